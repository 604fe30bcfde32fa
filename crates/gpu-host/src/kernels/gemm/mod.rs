//! GEMM launchers: [`gemm`] (every matmul of GPT-2 training, see `kernel_abi::gemm` for the
//! exact semantics), [`gemm_split_k`] (the same with K split over more blocks, for outputs too
//! small to fill the GPU) and [`bias_grad`] / [`bias_grad_from_col_sums`] (bias gradients, from an
//! output gradient or from the column sums a GEMM epilogue wrote of it).
//!
//! The variant follows the [`Precision`] mode and the element types: `Fp32` → FP32 SIMT,
//! `Tf32` → `mma.sync` TF32 (both f32 in and out), `Bf16` / `Fp16` → `mma.sync` with bf16 / f16
//! inputs and an output of the input type or f32. Any M, N, K, leading dimensions and batch
//! strides are accepted: when a matrix is not 16-byte aligned (base, `ld · size` or
//! `stride · size`) the kernels fall back to element-wise loads or stores for that matrix
//! (correct, slower); the fast path needs, e.g. for bf16, leading dimensions that are multiples
//! of 8.
//!
//! # Engines
//! [`GemmSpec::engine`] picks the instructions of the tensor-core variants: the `mma.sync` kernels
//! above (any GPU, every layout and batch), or on a runtime that loaded the sm_90a module
//! ([`Device::ptx_arch`](crate::Device::ptx_arch)) the Hopper kernels (`kernel_abi::gemm_wgmma`:
//! TMA loads, `wgmma`, a persistent warp-specialised grid) in every layout for BF16 and FP16 and
//! the forward layout (A row-major, B column-major) for TF32, with K ≥ 1, 16-byte aligned A, B,
//! rows of A and B and batches of A and B, and batches that do not overlap.
//! [`GemmEngine::Auto`] (the default) takes the Hopper kernel where it applies and falls back to
//! `mma.sync` elsewhere; FP32 always runs on the SIMT cores. See [`GemmSpec::engine_on`].

mod bias_grad;
mod launch;
mod spec;
#[cfg(test)]
mod tests;
mod tune;
mod types;
mod wgmma;

pub use bias_grad::{
    BiasGradElement, BiasGradOutput, bias_grad, bias_grad_from_col_sums, bias_grad_workspace_len,
    col_sum_groups, col_sums_len,
};
pub use kernel_abi::gemm::Layout;
pub use launch::{gemm, gemm_split_k};
pub use spec::{GemmConfig, GemmEngine, GemmSpec, Precision, WeightGrads, WgmmaTile};
pub use tune::{time_launches, tuned_candidates};
pub use types::{Activation, Epilogue, GemmOutput, GemmTypes};

use crate::error::{GpuError, Result};

const OP: &str = "gemm";

pub(super) fn invalid(arg: &'static str, reason: impl Into<String>) -> GpuError {
    GpuError::invalid(OP, arg, reason)
}

pub(super) fn to_u32(arg: &'static str, value: usize) -> Result<u32> {
    u32::try_from(value).map_err(|_| invalid(arg, format!("{value} does not fit in 32 bits")))
}
