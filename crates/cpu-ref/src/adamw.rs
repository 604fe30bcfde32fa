//! AdamW (decoupled weight decay), as in llm.c and `torch.optim.AdamW`.

use crate::precision::Element;
use crate::stochastic::{stochastic_bits, stochastic_round_bf16};
use multiversion::multiversion;
use rayon::prelude::*;

/// The hyperparameters of one AdamW update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    /// Learning rate of this step.
    pub lr: f32,
    /// Decay of the first moment.
    pub beta1: f32,
    /// Decay of the second moment.
    pub beta2: f32,
    /// Added to the root of the second moment.
    pub eps: f32,
    /// Decoupled weight decay (0 for tensors that are not decayed).
    pub weight_decay: f32,
    /// 1-based number of this update (for the bias corrections).
    pub t: u32,
    /// Factor applied to every gradient first (gradient clipping), 1 for none.
    pub grad_scale: f32,
}

impl AdamWStep {
    /// The bias corrections `(1 - beta1^t, 1 - beta2^t)`, in f32 (`powf`) as
    /// [`adamw_update`] uses them.
    pub fn bias_corrections(&self) -> (f32, f32) {
        let t = self.t as f32;
        (1.0 - self.beta1.powf(t), 1.0 - self.beta2.powf(t))
    }
}

const CHUNK: usize = 1 << 14;

/// One AdamW update, elementwise:
///
/// ```text
/// g = grad_scale · grad
/// m = beta1 · m + (1 - beta1) · g
/// v = beta2 · v + (1 - beta2) · g²
/// param -= lr · ((m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay · param)
/// ```
///
/// # Panics
/// If the four lengths differ or `t == 0`.
pub fn adamw_update(
    params: &mut [f32],
    grads: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    step: &AdamWStep,
) {
    let n = params.len();
    assert!(grads.len() == n && m.len() == n && v.len() == n, "adamw_update: lengths differ");
    assert!(step.t > 0, "adamw_update: t is 1-based");
    params
        .par_chunks_mut(CHUNK)
        .zip(grads.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK).zip(v.par_chunks_mut(CHUNK)))
        .for_each(|((p, g), (m, v))| update_chunk(p, g, m, v, step));
}

#[multiversion(targets = "simd")]
fn update_chunk(params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32], step: &AdamWStep) {
    let AdamWStep { lr, beta1, beta2, eps, weight_decay, t: _, grad_scale } = *step;
    let (correction1, correction2) = step.bias_corrections();
    for (((p, &g), m), v) in params.iter_mut().zip(grads).zip(m.iter_mut()).zip(v.iter_mut()) {
        let g = grad_scale * g;
        *m = beta1 * *m + (1.0 - beta1) * g;
        *v = beta2 * *v + (1.0 - beta2) * g * g;
        let m_hat = *m / correction1;
        let v_hat = *v / correction2;
        *p -= lr * (m_hat / (v_hat.sqrt() + eps) + weight_decay * *p);
    }
}

/// One tensor of a parameter arena: elements `offset .. offset + len`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ArenaTensor {
    /// First element.
    pub offset: usize,
    /// Number of elements.
    pub len: usize,
    /// Decoupled weight decay of this tensor.
    pub weight_decay: f32,
}

/// How the working copy of the parameters is rounded from the new f32 master weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkingRounding {
    /// To nearest, ties to even.
    NearestEven,
    /// bf16 only: [`stochastic_round_bf16`] with `stochastic_bits(seed, arena index)`.
    Stochastic {
        /// Seed of this step.
        seed: u32,
    },
}

/// The buffers of an arena update, indexed alike.
pub struct AdamWArena<'a, G, W> {
    /// f32 master weights.
    pub params: &'a mut [f32],
    /// Gradients (f32, bf16 or f16; widened exactly).
    pub grads: &'a [G],
    /// First moments.
    pub m: &'a mut [f32],
    /// Second moments.
    pub v: &'a mut [f32],
    /// Working copy of the parameters, written after the update, if any.
    pub working: Option<&'a mut [W]>,
}

/// The GPU's one-launch AdamW: [`adamw_update`] on each tensor of `tensors` with that
/// tensor's weight decay (`step.weight_decay` is not used), then the working copy of each
/// tensor's elements rounded from the new master weights. Elements outside every tensor are
/// left alone.
///
/// # Panics
/// If the buffers' lengths differ, a tensor lies outside them, or stochastic rounding is
/// asked for a working copy that is not bf16.
pub fn adamw_update_arena<G: Element, W: Element>(
    arena: AdamWArena<'_, G, W>,
    tensors: &[ArenaTensor],
    step: &AdamWStep,
    rounding: WorkingRounding,
) {
    let AdamWArena { params, grads, m, v, mut working } = arena;
    let n = params.len();
    assert!(grads.len() == n && m.len() == n && v.len() == n, "adamw_update_arena: lengths");
    let stochastic = matches!(rounding, WorkingRounding::Stochastic { .. });
    assert!(!stochastic || W::NAME == "bf16", "stochastic rounding is bf16 only");
    for t in tensors {
        let range = t.offset..t.offset + t.len;
        let g: Vec<f32> = grads[range.clone()].iter().map(|g| g.to_f32()).collect();
        let tensor_step = AdamWStep { weight_decay: t.weight_decay, ..*step };
        adamw_update(
            &mut params[range.clone()],
            &g,
            &mut m[range.clone()],
            &mut v[range.clone()],
            &tensor_step,
        );
        if let Some(working) = working.as_deref_mut() {
            for i in range {
                working[i] = match rounding {
                    WorkingRounding::NearestEven => W::from_f32(params[i]),
                    WorkingRounding::Stochastic { seed } => {
                        let random = stochastic_bits(seed, i as u64);
                        W::from_f32(stochastic_round_bf16(params[i], random).to_f32())
                    }
                };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use half::bf16;

    #[test]
    fn matches_naive_f64_over_several_steps() {
        let mut rng = rng(80);
        let n = 40_000;
        let mut p = uniform(&mut rng, n, 1.0);
        let (mut m, mut v) = (vec![0.0f32; n], vec![0.0f32; n]);
        let (mut p64, mut m64, mut v64) = (f64s(&p), vec![0.0f64; n], vec![0.0f64; n]);
        for t in 1..=3 {
            let g = uniform(&mut rng, n, 1.0);
            let step = AdamWStep {
                lr: 1e-2,
                beta1: 0.9,
                beta2: 0.95,
                eps: 1e-8,
                weight_decay: 0.1,
                t,
                grad_scale: 0.5,
            };
            adamw_update(&mut p, &g, &mut m, &mut v, &step);
            for i in 0..n {
                let g = 0.5 * f64::from(g[i]);
                m64[i] = 0.9 * m64[i] + 0.1 * g;
                v64[i] = 0.95 * v64[i] + 0.05 * g * g;
                let m_hat = m64[i] / (1.0 - 0.9f64.powi(t as i32));
                let v_hat = v64[i] / (1.0 - 0.95f64.powi(t as i32));
                p64[i] -= 1e-2 * (m_hat / (v_hat.sqrt() + 1e-8) + 0.1 * p64[i]);
            }
        }
        assert_close("params", &p, &p64, 1e-5);
        assert_close("m", &m, &m64, 1e-5);
        assert_close("v", &v, &v64, 1e-5);
    }

    /// Per-tensor decay, bf16 gradients, a gap, and both roundings of the working copy,
    /// against a naive f64 AdamW.
    #[test]
    fn arena_matches_naive_f64_per_tensor() {
        let mut rng = rng(81);
        let n = 3000;
        let tensors = [
            ArenaTensor { offset: 0, len: 1000, weight_decay: 0.1 },
            ArenaTensor { offset: 1000, len: 999, weight_decay: 0.0 },
            ArenaTensor { offset: 2003, len: 997, weight_decay: 0.3 },
        ];
        let p0 = uniform(&mut rng, n, 1.0);
        let grads: Vec<bf16> = uniform(&mut rng, n, 1.0).into_iter().map(bf16::from_f32).collect();
        let m0 = uniform(&mut rng, n, 0.1);
        let v0: Vec<f32> = uniform(&mut rng, n, 0.01).iter().map(|x| x.abs()).collect();
        let step = AdamWStep {
            lr: 1e-2,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: f32::NAN,
            t: 3,
            grad_scale: 0.25,
        };
        for rounding in [WorkingRounding::NearestEven, WorkingRounding::Stochastic { seed: 4 }] {
            let (mut p, mut m, mut v) = (p0.clone(), m0.clone(), v0.clone());
            let mut working = vec![bf16::NAN; n];
            let arena = AdamWArena {
                params: &mut p,
                grads: &grads,
                m: &mut m,
                v: &mut v,
                working: Some(&mut working),
            };
            adamw_update_arena(arena, &tensors, &step, rounding);
            let (mut p64, mut m64, mut v64) = (f64s(&p0), f64s(&m0), f64s(&v0));
            for t in &tensors {
                for i in t.offset..t.offset + t.len {
                    let g = 0.25 * f64::from(grads[i].to_f32());
                    m64[i] = 0.9 * m64[i] + 0.1 * g;
                    v64[i] = 0.95 * v64[i] + 0.05 * g * g;
                    let m_hat = m64[i] / (1.0 - 0.9f64.powi(3));
                    let v_hat = v64[i] / (1.0 - 0.95f64.powi(3));
                    let decay = f64::from(t.weight_decay);
                    p64[i] -= 1e-2 * (m_hat / (v_hat.sqrt() + 1e-8) + decay * p64[i]);
                }
            }
            assert_close("params", &p, &p64, 1e-5);
            assert_close("m", &m, &m64, 1e-5);
            assert_close("v", &v, &v64, 1e-5);
            for i in 0..n {
                let in_gap = (1999..2003).contains(&i);
                if in_gap {
                    assert!(working[i].is_nan() && p[i] == p0[i], "gap element {i} touched");
                    continue;
                }
                let w = f64::from(working[i].to_f32());
                let spacing = f64::from(p[i]).abs() / 128.0;
                match rounding {
                    WorkingRounding::NearestEven => {
                        assert!((w - p64[i]).abs() <= spacing / 2.0 * 1.001, "working[{i}]")
                    }
                    WorkingRounding::Stochastic { .. } => {
                        assert!((w - p64[i]).abs() <= spacing * 1.001, "working[{i}]")
                    }
                }
            }
        }
    }
}
