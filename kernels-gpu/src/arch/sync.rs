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
