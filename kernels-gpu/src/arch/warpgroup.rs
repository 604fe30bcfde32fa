//! Warpgroup register reallocation (`setmaxnreg`, sm_90a).
//!
//! A kernel launched with a register budget per thread (ptxas derives it from `.maxntid` and
//! `.minnctapersm`) can move registers between warpgroups at run time: a warpgroup that needs
//! few releases some to the SM's pool with [`setmaxnreg_dec`], one that needs many claims
//! them with [`setmaxnreg_inc`] (which blocks until the pool has enough). ptxas allocates the
//! code after each instruction within its count.

use core::arch::asm;

/// Checks a `setmaxnreg` register count: 24..=256, a multiple of 8.
const fn valid_count(n: u32) -> bool {
    n >= 24 && n <= 256 && n.is_multiple_of(8)
}

/// `setmaxnreg.inc.sync.aligned.u32 N`: raises this warp's per-thread register count to `N`,
/// waiting until the SM has the registers free.
///
/// # Safety
/// Every thread of the warpgroup executes this call site, converged; `N` is at least the
/// current count; the registers must eventually be available (released by other warpgroups of
/// the block with [`setmaxnreg_dec`]), or this never returns. Minimum sm_90a.
#[inline(always)]
pub unsafe fn setmaxnreg_inc<const N: u32>() {
    const { assert!(valid_count(N), "setmaxnreg takes 24..=256 registers, a multiple of 8") };
    // SAFETY: convergence and the register budget are the caller's contract.
    unsafe {
        asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nostack, preserves_flags))
    }
}

/// `setmaxnreg.dec.sync.aligned.u32 N`: lowers this warp's per-thread register count to `N`,
/// returning the rest to the SM's pool.
///
/// # Safety
/// Every thread of the warpgroup executes this call site, converged; `N` is at most the
/// current count (and enough for the code that follows, which ptxas checks). Minimum sm_90a.
#[inline(always)]
pub unsafe fn setmaxnreg_dec<const N: u32>() {
    const { assert!(valid_count(N), "setmaxnreg takes 24..=256 registers, a multiple of 8") };
    // SAFETY: convergence and the register budget are the caller's contract.
    unsafe {
        asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nostack, preserves_flags))
    }
}
