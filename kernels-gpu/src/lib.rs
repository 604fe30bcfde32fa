//! GPU kernels of the project, compiled to PTX by `cargo xtask build-ptx`.
//!
//! - [`arch`]: the only module with inline PTX (`asm!`), one wrapper per instruction;
//! - [`elem`], [`warp`]: element conversions and warp collectives built on it;
//! - [`reduce`]: block-wide sums; [`softmax`]: online softmax statistics;
//! - one module per kernel family ([`elementwise`], [`gemm`], [`encoder`], [`gelu`],
//!   [`layernorm`], [`classifier`], [`grad_norm`], [`adamw`], [`flash`], [`transpose`], [`probe`]);
//!   entry points are
//!   `#[unsafe(no_mangle)] extern "ptx-kernel"` functions taking one `kernel_abi` struct,
//!   defined through `entry::entries!`.
//!
//! Device code is panic-free: no bounds-checked indexing, no `core` function that could stay
//! an undefined `.extern .func` in the PTX (build-ptx rejects such PTX). Kernels trust the
//! shapes in their parameters; the host launchers in `gpu-host` check them before launching.
#![no_std]
#![feature(abi_ptx, asm_experimental_arch, core_float_math)]
// `#[inline(always)]` on the Hopper GEMM's closures (a closure ptxas sees as a call serialises
// the wgmma pipeline).
#![cfg_attr(target_feature = "sm_90a", feature(stmt_expr_attributes))]

pub mod adamw;
pub mod arch;
pub mod attention;
pub mod classifier;
pub mod elem;
pub mod elementwise;
pub mod encoder;
mod entry;
pub mod flash;
pub mod gelu;
pub mod gemm;
pub mod grad_norm;
pub mod layernorm;
pub mod probe;
pub mod reduce;
pub mod softmax;
pub mod transpose;
mod unroll;
pub mod warp;

/// Device code never unwinds; a panic (which the code is written never to reach) traps.
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    arch::trap()
}
