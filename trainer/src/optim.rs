//! AdamW over the parameter tensors, gradient clipping and the learning-rate schedule.

use crate::backend::ops::{AdamWArgs, AdamWHyper, WorkingRounding};
use crate::backend::{ArenaTensor, Backend, Buf, View, ViewMut};
use crate::error::{Error, Result};
use crate::model::{Gpt2, ParamKind, ParamLayout};

/// Shape of the learning rate over the run (after the warm-up).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LrSchedule {
    /// The peak learning rate throughout.
    Constant,
    /// Cosine decay from the peak towards `min_lr_frac × peak`, which it reaches at step
    /// `total_steps` (one past the last step, as in llm.c).
    Cosine,
}

/// The learning rate as a function of the step (llm.c's `get_learning_rate`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LrConfig {
    /// Peak learning rate.
    pub lr: f32,
    /// Floor of the cosine decay, as a fraction of the peak.
    pub min_lr_frac: f32,
    /// Constant or cosine.
    pub schedule: LrSchedule,
    /// Steps of linear warm-up: step s < warmup uses `lr × (s + 1) / warmup`.
    pub warmup_steps: u64,
    /// Total number of steps of the run.
    pub total_steps: u64,
}

/// Fails unless `lr` is a usable peak learning rate: finite and not negative.
pub fn check_lr(lr: f32) -> Result<()> {
    if !(lr.is_finite() && lr >= 0.0) {
        return Err(Error::invalid(format!("--lr {lr} must be finite and not negative")));
    }
    Ok(())
}

impl LrConfig {
    /// Fails, naming the option, unless the peak is finite and not negative and the floor
    /// fraction is in [0, 1].
    pub fn validate(&self) -> Result<()> {
        check_lr(self.lr)?;
        if !(0.0..=1.0).contains(&self.min_lr_frac) {
            return Err(Error::invalid(format!(
                "--min-lr-frac {} must be in [0, 1]",
                self.min_lr_frac
            )));
        }
        Ok(())
    }

    /// The learning rate of step `step` (0-based).
    pub fn at(&self, step: u64) -> f32 {
        let peak = f64::from(self.lr);
        if step < self.warmup_steps {
            return (peak * (step + 1) as f64 / self.warmup_steps as f64) as f32;
        }
        match self.schedule {
            LrSchedule::Constant => self.lr,
            LrSchedule::Cosine => {
                let span = self.total_steps.saturating_sub(self.warmup_steps);
                let ratio = if span == 0 {
                    0.0
                } else {
                    ((step - self.warmup_steps) as f64 / span as f64).min(1.0)
                };
                let floor = peak * f64::from(self.min_lr_frac);
                let coeff = 0.5 * (1.0 + (std::f64::consts::PI * ratio).cos());
                (floor + coeff * (peak - floor)) as f32
            }
        }
    }
}

/// AdamW hyperparameters and gradient clipping.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWConfig {
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator epsilon.
    pub eps: f32,
    /// Decoupled weight decay.
    pub weight_decay: f32,
    /// Decay every tensor, not just the weight matrices ([`ParamKind::is_matrix`]).
    pub decay_all: bool,
    /// Scale the gradients so their global norm is at most this; 0 disables clipping.
    pub grad_clip: f32,
}

impl AdamWConfig {
    /// Fails, naming the option, unless the betas are in [0, 1), eps is positive, and the
    /// weight decay and gradient clip are not negative (all finite).
    pub fn validate(&self) -> Result<()> {
        let checks = [
            ("--beta1", self.beta1, (0.0..1.0).contains(&self.beta1), "in [0, 1)"),
            ("--beta2", self.beta2, (0.0..1.0).contains(&self.beta2), "in [0, 1)"),
            ("--eps", self.eps, self.eps.is_finite() && self.eps > 0.0, "positive and finite"),
            (
                "--weight-decay",
                self.weight_decay,
                self.weight_decay.is_finite() && self.weight_decay >= 0.0,
                "finite and not negative",
            ),
            (
                "--grad-clip",
                self.grad_clip,
                self.grad_clip.is_finite() && self.grad_clip >= 0.0,
                "finite and not negative (0 disables clipping)",
            ),
        ];
        match checks.into_iter().find(|&(.., ok, _)| !ok) {
            Some((option, value, _, rule)) => {
                Err(Error::invalid(format!("{option} {value} must be {rule}")))
            }
            None => Ok(()),
        }
    }

    /// The factor applied to every gradient for a gradient norm of `norm`.
    pub fn clip_scale(&self, norm: f32) -> f32 {
        if self.grad_clip > 0.0 && norm > self.grad_clip { self.grad_clip / norm } else { 1.0 }
    }

    /// The weight decay of tensor `kind`.
    pub fn decay_of(&self, kind: ParamKind) -> f32 {
        if self.decay_all || kind.is_matrix() { self.weight_decay } else { 0.0 }
    }
}

/// AdamW state: the moments, one arena each (laid out as the parameters), and the per-tensor
/// table that gives every tensor its weight decay, so an update is one launch.
pub struct AdamW<B: Backend> {
    /// First moments.
    pub m: Buf<B, f32>,
    /// Second moments.
    pub v: Buf<B, f32>,
    table: B::AdamWTable,
    config: AdamWConfig,
}

/// One optimizer step's inputs besides the state.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct UpdateStep {
    /// Learning rate.
    pub lr: f32,
    /// 1-based update number.
    pub t: u32,
    /// Factor applied to every gradient: clipping × 1/loss scale.
    pub grad_scale: f32,
    /// Rounding of the working copy of the weights.
    pub rounding: WorkingRounding,
}

impl<B: Backend> AdamW<B> {
    /// Zero moments for parameters laid out as `layout`.
    pub fn new(backend: &B, layout: &ParamLayout, config: AdamWConfig) -> Result<Self> {
        let tensors: Vec<ArenaTensor> = ParamKind::ALL
            .iter()
            .map(|&kind| {
                let range = layout.range(kind);
                ArenaTensor {
                    offset: range.start,
                    len: range.len(),
                    weight_decay: config.decay_of(kind),
                }
            })
            .collect();
        Ok(Self {
            m: backend.alloc(layout.len(), "the AdamW first moments")?,
            v: backend.alloc(layout.len(), "the AdamW second moments")?,
            table: backend.adamw_table(&tensors, layout.len())?,
            config,
        })
    }

    /// The hyperparameters.
    pub fn config(&self) -> &AdamWConfig {
        &self.config
    }

    /// Applies one update to the model's master weights (and its working copy).
    pub fn update(
        &mut self,
        backend: &B,
        model: &mut Gpt2<B>,
        grads: &Buf<B, f32>,
        step: UpdateStep,
    ) -> Result<()> {
        let cfg = &self.config;
        let hyper = AdamWHyper {
            lr: step.lr,
            beta1: cfg.beta1,
            beta2: cfg.beta2,
            eps: cfg.eps,
            t: step.t,
            grad_scale: step.grad_scale,
            rounding: step.rounding,
        };
        let (params, working) = model.weights_mut();
        let args = AdamWArgs {
            params,
            grads: View::all(grads),
            m: ViewMut::all(&mut self.m),
            v: ViewMut::all(&mut self.v),
            working,
        };
        backend.adamw(args, &self.table, &hyper)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lr(schedule: LrSchedule, warmup_steps: u64) -> LrConfig {
        LrConfig { lr: 1.0, min_lr_frac: 0.1, schedule, warmup_steps, total_steps: 12 }
    }

    #[test]
    fn warmup_then_cosine_to_the_floor() {
        let cfg = lr(LrSchedule::Cosine, 2);
        assert_eq!(cfg.at(0), 0.5);
        assert_eq!(cfg.at(1), 1.0);
        assert_eq!(cfg.at(2), 1.0);
        assert!((cfg.at(7) - 0.55).abs() < 1e-6, "midpoint is halfway to the floor");
        assert!(cfg.at(11) > 0.1 && cfg.at(11) < 0.13, "the last step is just above the floor");
        assert!((cfg.at(12) - 0.1).abs() < 1e-6, "the floor is reached one past the last step");
        assert!((cfg.at(50) - 0.1).abs() < 1e-6);
    }

    #[test]
    fn constant_schedule_only_warms_up() {
        let cfg = lr(LrSchedule::Constant, 4);
        assert_eq!(cfg.at(0), 0.25);
        assert_eq!(cfg.at(3), 1.0);
        assert_eq!(cfg.at(10), 1.0);
        assert_eq!(lr(LrSchedule::Constant, 0).at(0), 1.0);
    }

    #[test]
    fn clipping_and_decay_selection() {
        let mut cfg = AdamWConfig {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            decay_all: false,
            grad_clip: 1.0,
        };
        assert_eq!(cfg.clip_scale(4.0), 0.25);
        assert_eq!(cfg.clip_scale(0.5), 1.0);
        assert_eq!(cfg.decay_of(ParamKind::Qkvw), 0.1);
        assert_eq!(cfg.decay_of(ParamKind::Qkvb), 0.0);
        cfg.decay_all = true;
        assert_eq!(cfg.decay_of(ParamKind::Ln1w), 0.1);
        cfg.grad_clip = 0.0;
        assert_eq!(cfg.clip_scale(1e9), 1.0);
    }
}
