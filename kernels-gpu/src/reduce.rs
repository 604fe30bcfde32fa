//! Deterministic block reductions in f64 (with an OR-ed flag), for the gradient norm.
//!
//! The order is fixed: a butterfly over the 32 lanes of each warp (offsets 16, 8, 4, 2, 1;
//! IEEE addition is commutative, so every lane holds the same sum), then thread 0 adds the
//! warp sums in warp order, starting from 0.

use crate::arch::shfl::{FULL_MASK, shfl_bfly_u32};
use crate::arch::smem::{dynamic_smem_base, ld_shared_u32, st_shared_v2_u32};
use crate::arch::{lane_id, sync::bar_sync, thread_idx_x, warp_idx_x};

/// Bytes of dynamic shared memory [`block_sum_f64`] needs per warp of the block.
pub const SMEM_BYTES_PER_WARP: u32 = 16;

/// Sum of `v` over the warp's 32 lanes, and the OR of `flag`, returned to every lane.
///
/// # Safety
/// All 32 lanes must call it together (converged).
#[inline(always)]
unsafe fn warp_sum_f64(mut v: f64, mut flag: u32) -> (f64, u32) {
    let mut offset = 16;
    while offset > 0 {
        let bits = v.to_bits();
        // SAFETY: the caller guarantees full-warp convergence.
        let (lo, hi, other_flag) = unsafe {
            (
                shfl_bfly_u32(FULL_MASK, bits as u32, offset),
                shfl_bfly_u32(FULL_MASK, (bits >> 32) as u32, offset),
                shfl_bfly_u32(FULL_MASK, flag, offset),
            )
        };
        v += f64::from_bits((hi as u64) << 32 | lo as u64);
        flag |= other_flag;
        offset /= 2;
    }
    (v, flag)
}

/// Sum of `v` and OR of `flag` over a one-dimensional block of `warps` full warps, in the
/// order of the module documentation. Returns the result on thread 0 (`None` elsewhere).
///
/// # Safety
/// Every thread of the block must call it from the same call site; the block has `warps`
/// full warps and at least `warps · SMEM_BYTES_PER_WARP` bytes of dynamic shared memory,
/// which nothing else uses during the call.
#[inline(always)]
pub unsafe fn block_sum_f64(v: f64, flag: u32, warps: u32) -> Option<(f64, u32)> {
    // SAFETY: block-uniform call (caller's contract), so every warp is converged here.
    let (sum, flag) = unsafe { warp_sum_f64(v, flag) };
    let smem = dynamic_smem_base();
    if lane_id() == 0 {
        let bits = sum.to_bits();
        let slot = smem + warp_idx_x() * SMEM_BYTES_PER_WARP;
        // SAFETY: one 16-byte slot per warp inside the caller-provided shared memory.
        unsafe {
            st_shared_v2_u32(slot, [bits as u32, (bits >> 32) as u32]);
            st_shared_v2_u32(slot + 8, [flag, 0]);
        }
    }
    // SAFETY: every thread of the block reaches this barrier (caller's contract).
    unsafe { bar_sync() };
    if thread_idx_x() != 0 {
        return None;
    }
    let (mut total, mut any) = (0.0f64, 0u32);
    let mut warp = 0;
    while warp < warps {
        let slot = smem + warp * SMEM_BYTES_PER_WARP;
        // SAFETY: slots written by every warp before the barrier.
        let (lo, hi, f) =
            unsafe { (ld_shared_u32(slot), ld_shared_u32(slot + 4), ld_shared_u32(slot + 8)) };
        total += f64::from_bits((hi as u64) << 32 | lo as u64);
        any |= f;
        warp += 1;
    }
    Some((total, any))
}
