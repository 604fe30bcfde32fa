//! Block-level barriers.

use core::arch::asm;

/// `bar.sync 0`: waits until every thread of the block arrives, and orders their shared and
/// global memory accesses around the barrier.
///
/// # Safety
/// Every non-exited thread of the block must execute this same call site (no divergence),
/// otherwise the block deadlocks or behaves undefined. Minimum sm_20.
#[inline(always)]
pub unsafe fn bar_sync() {
    // SAFETY: the caller guarantees block-uniform control flow; the asm is a full memory
    // barrier for the compiler (no `nomem`), so accesses are not moved across it.
    unsafe { asm!("bar.sync 0;", options(nostack, preserves_flags)) }
}

/// `bar.warp.sync 0xffffffff`: waits until all 32 lanes of the warp arrive, and orders their
/// shared and global memory accesses around it (a warp-level barrier, e.g. between a warp's
/// writes to a private shared-memory buffer and its reads of what other lanes wrote).
///
/// # Safety
/// All 32 lanes of the warp must execute this same call site. Minimum sm_70.
#[inline(always)]
pub unsafe fn bar_warp_sync() {
    // SAFETY: convergence is the caller's contract; no `nomem`, so the compiler does not move
    // memory accesses across it.
    unsafe { asm!("bar.warp.sync 0xffffffff;", options(nostack, preserves_flags)) }
}

/// `fence.acq_rel.gpu`: orders this thread's memory accesses before the fence against those
/// after it for every thread of the GPU: with an atomic between them, the release of one
/// block's stores and the acquire of another's loads (stream-K's partial sums).
///
/// # Safety
/// None beyond executing on sm_70 or later.
#[inline(always)]
pub unsafe fn fence_acq_rel_gpu() {
    // SAFETY: a fence; no `nomem`, so the compiler moves no memory access across it.
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack, preserves_flags)) }
}

/// `elect.sync _|p, 0xffffffff`: elects one lane of the full warp (the same lane for every
/// caller) and returns true in that lane only.
///
/// # Safety
/// All 32 lanes of the warp must execute this same call site. Minimum sm_90.
#[cfg(target_feature = "sm_90a")]
#[inline(always)]
pub unsafe fn elect_sync() -> bool {
    let elected: u32;
    // SAFETY: convergence is the caller's contract; the predicate lives in a scope of its own
    // and is turned into a register with `selp`.
    unsafe {
        asm!("{{ .reg .pred p;", "elect.sync _|p, 0xffffffff;", "selp.u32 {d}, 1, 0, p; }}",
             d = out(reg32) elected, options(nostack, preserves_flags));
    }
    elected != 0
}
