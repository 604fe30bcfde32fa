//! Dynamic loss scaling for fp16 training (PyTorch's `GradScaler` rule).
//!
//! The loss is multiplied by [`LossScaler::scale`] before the backward pass so that small
//! fp16 gradients do not flush to zero. After the backward pass the gradients are checked for
//! inf/NaN (the gradient-norm kernel reports it) and [`LossScaler::update`] decides: on
//! overflow the step is skipped and the scale halved; after `growth_interval` clean steps in
//! a row it doubles. The optimizer divides the scale back out through AdamW's `grad_scale`
//! ([`LossScaler::unscale_factor`], multiplied by the clipping factor).

/// The parameters of the scale's dynamics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossScaleConfig {
    /// Scale of the first step.
    pub init_scale: f32,
    /// Factor applied after `growth_interval` clean steps in a row (> 1).
    pub growth_factor: f32,
    /// Factor applied on overflow (in (0, 1)).
    pub backoff_factor: f32,
    /// Clean steps in a row before the scale grows.
    pub growth_interval: u32,
    /// The scale never falls below this.
    pub min_scale: f32,
    /// The scale never grows above this.
    pub max_scale: f32,
}

impl Default for LossScaleConfig {
    /// PyTorch's `GradScaler` defaults (init 2^16, ×2 every 2000 clean steps, ×0.5 on
    /// overflow), bounded to [1, 2^24].
    fn default() -> Self {
        Self {
            init_scale: 65536.0,
            growth_factor: 2.0,
            backoff_factor: 0.5,
            growth_interval: 2000,
            min_scale: 1.0,
            max_scale: 16_777_216.0,
        }
    }
}

/// What to do with the step whose gradients were just checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StepDecision {
    /// The gradients are finite: apply the optimizer step.
    Apply,
    /// A gradient overflowed: skip the optimizer step (the scale was lowered).
    Skip,
}

/// The dynamic loss scale and its clean-step counter.
#[derive(Clone, Debug, PartialEq)]
pub struct LossScaler {
    config: LossScaleConfig,
    scale: f32,
    clean_steps: u32,
}

impl LossScaler {
    /// A scaler at `config.init_scale` (clamped to the bounds).
    ///
    /// # Panics
    /// If the factors or bounds are not as documented on [`LossScaleConfig`].
    pub fn new(config: LossScaleConfig) -> Self {
        assert!(config.growth_factor > 1.0, "growth_factor must be > 1");
        assert!(
            config.backoff_factor > 0.0 && config.backoff_factor < 1.0,
            "backoff_factor must be in (0, 1)"
        );
        assert!(
            config.min_scale > 0.0 && config.min_scale <= config.max_scale,
            "0 < min_scale <= max_scale"
        );
        assert!(config.max_scale.is_finite(), "max_scale must be finite");
        assert!(config.growth_interval > 0, "growth_interval must be > 0");
        let scale = config.init_scale.clamp(config.min_scale, config.max_scale);
        Self { config, scale, clean_steps: 0 }
    }

    /// A scaler resumed at `scale` after `clean_steps` clean steps (from a checkpoint).
    pub fn resumed(config: LossScaleConfig, scale: f32, clean_steps: u32) -> Self {
        let mut scaler = Self::new(config);
        scaler.scale = scale.clamp(config.min_scale, config.max_scale);
        scaler.clean_steps = clean_steps.min(config.growth_interval - 1);
        scaler
    }

    /// The factor to multiply the loss (or its gradient seed) by.
    pub fn scale(&self) -> f32 {
        self.scale
    }

    /// The factor that undoes the scale on the gradients, `1 / scale`, to fuse into AdamW's
    /// `grad_scale` (together with the clipping factor of the unscaled norm).
    pub fn unscale_factor(&self) -> f32 {
        1.0 / self.scale
    }

    /// Clean steps in a row since the last change of the scale.
    pub fn clean_steps(&self) -> u32 {
        self.clean_steps
    }

    /// Records the overflow check of this step's gradients and updates the scale: on
    /// overflow, backs off (not below `min_scale`) and skips the step; otherwise counts a
    /// clean step and, every `growth_interval` of them, grows (not above `max_scale`).
    pub fn update(&mut self, found_nonfinite: bool) -> StepDecision {
        let c = &self.config;
        if found_nonfinite {
            self.scale = (self.scale * c.backoff_factor).max(c.min_scale);
            self.clean_steps = 0;
            return StepDecision::Skip;
        }
        self.clean_steps += 1;
        if self.clean_steps == c.growth_interval {
            self.scale = (self.scale * c.growth_factor).min(c.max_scale);
            self.clean_steps = 0;
        }
        StepDecision::Apply
    }
}

impl Default for LossScaler {
    fn default() -> Self {
        Self::new(LossScaleConfig::default())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_at_pytorch_defaults() {
        let s = LossScaler::default();
        assert_eq!(s.scale(), 65536.0);
        assert_eq!(s.unscale_factor(), 1.0 / 65536.0);
        assert_eq!(s.clean_steps(), 0);
    }

    #[test]
    fn overflow_halves_and_skips_and_resets_the_count() {
        let mut s = LossScaler::default();
        for _ in 0..5 {
            assert_eq!(s.update(false), StepDecision::Apply);
        }
        assert_eq!(s.clean_steps(), 5);
        assert_eq!(s.update(true), StepDecision::Skip);
        assert_eq!(s.scale(), 32768.0);
        assert_eq!(s.clean_steps(), 0);
        assert_eq!(s.update(true), StepDecision::Skip);
        assert_eq!(s.scale(), 16384.0);
    }

    #[test]
    fn grows_after_exactly_the_interval_of_clean_steps() {
        let mut s = LossScaler::default();
        for _ in 0..1999 {
            s.update(false);
        }
        assert_eq!(s.scale(), 65536.0, "not yet after 1999 clean steps");
        assert_eq!(s.update(false), StepDecision::Apply);
        assert_eq!(s.scale(), 131072.0);
        assert_eq!(s.clean_steps(), 0);
        // An overflow in between restarts the count.
        for _ in 0..1000 {
            s.update(false);
        }
        s.update(true);
        for _ in 0..1999 {
            s.update(false);
        }
        assert_eq!(s.scale(), 65536.0);
        s.update(false);
        assert_eq!(s.scale(), 131072.0);
    }

    #[test]
    fn stays_within_floor_and_ceiling() {
        let config = LossScaleConfig {
            init_scale: 4.0,
            growth_interval: 1,
            min_scale: 1.0,
            max_scale: 16.0,
            ..LossScaleConfig::default()
        };
        let mut s = LossScaler::new(config);
        for _ in 0..10 {
            assert_eq!(s.update(true), StepDecision::Skip);
        }
        assert_eq!(s.scale(), 1.0, "never below the floor");
        for _ in 0..10 {
            assert_eq!(s.update(false), StepDecision::Apply);
        }
        assert_eq!(s.scale(), 16.0, "never above the ceiling");
        let clamped = LossScaler::new(LossScaleConfig { init_scale: 1e9, ..config });
        assert_eq!(clamped.scale(), 16.0);
    }

    #[test]
    #[should_panic(expected = "backoff_factor")]
    fn rejects_a_backoff_that_does_not_shrink() {
        LossScaler::new(LossScaleConfig { backoff_factor: 1.0, ..LossScaleConfig::default() });
    }
}
