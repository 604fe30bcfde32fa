//! CPU reference implementations.
//!
//! Each function here states, in plain code that is still reasonably fast, what the GPU
//! kernel of the same name must compute. GPU and simulator tests compare against these.
//!
//! - [`gemm`]: the exact (f64-accumulated) reference of the GPU GEMM, with its layouts,
//!   roundings and epilogues.
//! - The GPT-2 ops (encoder, layernorm, `matmul` = the linear layer, attention, GELU,
//!   residual, fused classifier, global norm, AdamW), forward and backward in f32 on rayon,
//!   with the `gemm` crate's packed GEMM inside `matmul`: the ground truth of the GPT-2
//!   kernels and, fast enough to train with, the trainer's CPU backend.
//!
//! Conventions for the GPT-2 ops: f32 slices with explicit shapes, row-major, llm.c layouts
//! (`(b, t, c)` activations, `nn.Linear` `(out, in)` weights, `[q | k | v]` fused qkv). Forward
//! outputs are written. In backward functions, parameter gradients accumulate (`+=`) and
//! activation gradients are written, except [`layernorm_backward`]'s input gradient, which
//! accumulates into the residual-stream gradient. Each op is deterministic: its result does
//! not depend on the thread count or scheduling.

pub mod adamw;
pub mod attention;
pub mod classifier;
pub mod elementwise;
pub mod encoder;
pub mod gelu;
pub mod gemm;
pub mod grad_norm;
pub mod layernorm;
pub mod matmul;
pub mod precision;
pub mod residual;
mod simd;
pub mod stochastic;
#[cfg(test)]
mod testing;

pub use adamw::{AdamWArena, ArenaTensor, WorkingRounding, adamw_update_arena};
pub use adamw::{AdamWStep, adamw_update};
pub use attention::{attention_backward, attention_forward};
pub use classifier::fused_classifier;
pub use encoder::{encoder_backward, encoder_forward};
pub use gelu::{gelu_backward, gelu_backward_in_place, gelu_forward};
pub use grad_norm::global_norm;
pub use grad_norm::{GradNorm, grad_norm_kernel_order};
pub use layernorm::{
    LAYERNORM_EPS, layernorm_backward, layernorm_backward_reduce, layernorm_forward,
};
pub use matmul::{
    matmul_backward, matmul_backward_bias, matmul_backward_input, matmul_backward_weight,
    matmul_forward,
};
pub use residual::residual_forward;
