//! Online softmax statistics in the log2 domain, shared by the fused classifier and the causal
//! attention softmax: values come in already multiplied by `log2(e)` (times any scale), so
//! every exponential is one `ex2.approx`.

use crate::arch::math::ex2_approx_f32;
use crate::arch::shfl::{FULL_MASK, shfl_bfly_f32};
use crate::unroll::unroll;
use core::f32::math::mul_add;

/// A running softmax normaliser in the log2 domain: the maximum `m` of the values seen and
/// `Σ 2^(x − m)`.
#[derive(Clone, Copy)]
pub struct Normaliser {
    /// The maximum of the values seen (−inf for none).
    pub max: f32,
    /// `Σ 2^(x − max)`.
    pub sum: f32,
}

impl Normaliser {
    /// No values.
    pub const EMPTY: Self = Self { max: f32::NEG_INFINITY, sum: 0.0 };

    /// Adds the first `count` values of `x` ([`Normaliser::add_scaled`] by 1, exactly: the
    /// `fma`s are subtractions).
    #[inline(always)]
    pub fn add(&mut self, x: [f32; 8], count: usize) {
        self.add_scaled(x, count, 1.0);
    }

    /// Adds the first `count` values of `x · scale` (`scale > 0`): the chunk's maximum is taken
    /// over `x` and scaled once (the bits of the maximum of the rounded products: rounding is
    /// monotonic), and each exponent `x·scale − max` is one `fma`, where [`Normaliser::add`]'s
    /// callers round the product first and subtract after: one instruction fewer an element.
    #[inline(always)]
    pub fn add_scaled(&mut self, x: [f32; 8], count: usize, scale: f32) {
        let mut chunk_max = f32::NEG_INFINITY;
        unroll!(k in 0..8 => {
            if k < count {
                chunk_max = chunk_max.max(x[k]);
            }
        });
        let chunk_max = chunk_max * scale;
        if chunk_max > self.max {
            self.sum *= ex2_approx_f32(self.max - chunk_max);
            self.max = chunk_max;
        }
        unroll!(k in 0..8 => {
            if k < count {
                self.sum += ex2_approx_f32(mul_add(x[k], scale, -self.max));
            }
        });
    }

    /// The normaliser of the union of two sets of values.
    #[inline(always)]
    pub fn merge(self, other: Self) -> Self {
        let max = self.max.max(other.max);
        if max == f32::NEG_INFINITY {
            return Self::EMPTY;
        }
        Self {
            max,
            sum: self.sum * ex2_approx_f32(self.max - max)
                + other.sum * ex2_approx_f32(other.max - max),
        }
    }

    /// The warp's combined normaliser, the same in every lane (butterfly).
    ///
    /// # Safety
    /// All 32 lanes must call it together (converged).
    #[inline(always)]
    pub unsafe fn warp_merge(mut self) -> Self {
        let mut offset = 16;
        while offset > 0 {
            // SAFETY: the caller guarantees full-warp convergence.
            let other = unsafe {
                Self {
                    max: shfl_bfly_f32(FULL_MASK, self.max, offset),
                    sum: shfl_bfly_f32(FULL_MASK, self.sum, offset),
                }
            };
            self = self.merge(other);
            offset /= 2;
        }
        self
    }
}

/// The number of elements of the chunk at `col` (`count` long) that lie in the first `valid`
/// columns.
#[inline(always)]
pub fn valid_in(col: usize, count: usize, valid: usize) -> usize {
    if valid <= col {
        0
    } else if valid - col < count {
        valid - col
    } else {
        count
    }
}
