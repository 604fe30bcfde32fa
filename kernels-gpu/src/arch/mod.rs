//! Inline PTX, one documented function per instruction the kernels use.
//!
//! This module is the only place in the device crate with `asm!`. Each wrapper states the
//! minimum architecture (all of them run on sm_80, the oldest target the project builds for)
//! and, for the `unsafe` ones, what the caller must guarantee.
//!
//! Warp-collective instructions (`shfl.sync`, `ldmatrix`, `mma.sync`) and `bar.sync` are
//! convergent: every participating thread must execute the same call site. LLVM does not know
//! inline asm is convergent, so callers keep these calls out of divergent control flow (the
//! simulator's `.aligned` checks catch violations).
//!
//! Shared-memory addresses are 32-bit offsets in the `.shared` window, as produced by
//! [`smem::dynamic_smem_base`]; global addresses are generic 64-bit pointers converted with
//! `cvta.to.global` inside each wrapper.

pub mod cp_async;
pub mod cvt;
pub mod global;
pub mod ids;
pub mod ldmatrix;
pub mod math;
pub mod mma;
pub mod shfl;
pub mod smem;
pub mod sync;

pub use ids::*;

/// Aborts the kernel (`trap`): the launch fails with an illegal-instruction error.
///
/// # Safety
/// Always safe to call; it never returns. Minimum sm_20.
#[inline(always)]
pub fn trap() -> ! {
    // SAFETY: `trap` has no operands and ends the thread; `noreturn` states exactly that.
    unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
}
