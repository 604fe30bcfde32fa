//! Inline PTX, one documented function per instruction the kernels use.
//!
//! This module is the only place in the device crate with `asm!`. Each wrapper states the
//! minimum architecture and, for the `unsafe` ones, what the caller must guarantee. Everything
//! runs on sm_80, the oldest target the project builds for, except the Hopper modules
//! (`mbarrier`, `tma`, `wgmma`, `warpgroup`) and `sync::elect_sync`, which exist only when
//! compiling for sm_90a (`-C target-cpu=sm_90a` sets `target_feature = "sm_90a"`).
//!
//! Warp-collective instructions (`shfl.sync`, `ldmatrix`, `mma.sync`, `elect.sync`),
//! warpgroup-collective ones (`wgmma.*`, `setmaxnreg`) and `bar.sync` are convergent: every
//! participating thread must execute the same call site. LLVM does not know inline asm is
//! convergent, so callers keep these calls out of divergent control flow (the simulator's
//! `.aligned` checks catch violations).
//!
//! Shared-memory addresses are 32-bit offsets in the `.shared` window, as produced by
//! [`smem::dynamic_smem_base`]; global addresses are generic 64-bit pointers converted with
//! `cvta.to.global` inside each wrapper (except the TMA tensor map, which the instruction
//! takes as a generic address).

pub mod cp_async;
pub mod cvt;
pub mod global;
pub mod grid_dep;
pub mod ids;
pub mod ldmatrix;
pub mod math;
#[cfg(target_feature = "sm_90a")]
pub mod mbarrier;
pub mod mma;
pub mod shfl;
pub mod smem;
pub mod sync;
#[cfg(target_feature = "sm_90a")]
pub mod tma;
#[cfg(target_feature = "sm_90a")]
pub mod warpgroup;
#[cfg(target_feature = "sm_90a")]
pub mod wgmma;

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
