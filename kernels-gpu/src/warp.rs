//! Warp-wide reductions built on `shfl.sync.bfly`.

use crate::arch::shfl::{FULL_MASK, shfl_bfly_f32};

/// Sum of `v` over the 32 lanes, returned to every lane (butterfly: same result everywhere).
///
/// # Safety
/// All 32 lanes must call it together (converged).
#[inline(always)]
pub unsafe fn warp_sum(mut v: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        // SAFETY: the caller guarantees full-warp convergence.
        v += unsafe { shfl_bfly_f32(FULL_MASK, v, offset) };
        offset /= 2;
    }
    v
}

/// Maximum of `v` over the 32 lanes, returned to every lane (NaN-ignoring, as `max.f32`).
///
/// # Safety
/// All 32 lanes must call it together (converged).
#[inline(always)]
pub unsafe fn warp_max(mut v: f32) -> f32 {
    let mut offset = 16;
    while offset > 0 {
        // SAFETY: the caller guarantees full-warp convergence.
        v = v.max(unsafe { shfl_bfly_f32(FULL_MASK, v, offset) });
        offset /= 2;
    }
    v
}
