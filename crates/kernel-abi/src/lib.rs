//! The contract between the device crate (`kernels-gpu`) and the host crates.
//!
//! This crate is `no_std` and dependency-free so that it compiles both for the host and for
//! `nvptx64-nvidia-cuda`. It holds:
//! - [`ptr`]: typed device pointers used inside parameter structs;
//! - [`kernel`]: [`Kernel`] handles (entry name + parameter type) and the list of every entry
//!   point, [`ALL_KERNELS`], which `cargo xtask build-ptx` checks against the PTX it built;
//! - one module per kernel family with its `#[repr(C)]` parameter structs;
//! - [`fragment`]: the lane/register ↔ (row, col) algebra of `mma.sync` and `ldmatrix`.
//!
//! Every function here is `#[inline]` (or `const`): device code calls it, and a non-inlined
//! function of another crate would be an undefined `.extern .func` in the kernels' PTX.
#![no_std]

pub mod adamw;
pub mod attention;
pub mod classifier;
pub mod elementwise;
pub mod encoder;
pub mod flash;
pub mod fragment;
pub mod gelu;
pub mod gemm;
pub mod gemm_wgmma;
pub mod grad_norm;
pub mod kernel;
pub mod layernorm;
pub mod probe;
pub mod ptr;
pub mod transpose;

pub use kernel::{
    ALL_HOPPER_KERNELS, ALL_KERNELS, ALL_LAUNCH_BOUNDS, HOPPER_LAUNCH_BOUNDS, Kernel, KernelParams,
    KernelSig, LaunchBounds,
};
pub use ptr::{Bf16, DevicePtr, DevicePtrMut, F16};
