//! Warp-wide reductions built on `shfl.sync.bfly`.

use crate::arch::lane_id;
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

/// Elements per lane chunk of [`for_lane_chunks`] (one 16-byte vector of a 16-bit type).
pub const LANE_CHUNK: usize = 8;

/// Calls `body(start, count)` for each chunk of a `len`-element row that this lane owns: lane
/// `l` takes the chunks starting at `8·l, 8·l + 256, …`, each `count` (1..=8) long. A lane owns
/// the same chunks in every pass over a row, so later passes re-read what it read before.
#[inline(always)]
pub fn for_lane_chunks(len: usize, mut body: impl FnMut(usize, usize)) {
    let mut start = lane_id() as usize * LANE_CHUNK;
    while start < len {
        body(start, if len - start < LANE_CHUNK { len - start } else { LANE_CHUNK });
        start += 32 * LANE_CHUNK;
    }
}
