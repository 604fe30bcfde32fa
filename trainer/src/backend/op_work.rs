//! The work of each backend op: the FLOPs of its matrix products and the bytes an ideal
//! kernel moves, so that an op's time can be read as TFLOP/s, GB/s and a share of the GPU's
//! roofline ([`Work::roofline_ms`]). One function per op gives its [`OpLabel`]: the name it is
//! recorded under ([`names`]) and its work, the same on every backend.
//!
//! Conventions, the same on every backend:
//! - **FLOPs** are counted for the matrix products alone, 2 per multiply-add, as the MFU's
//!   model count does ([`crate::mfu::flops_per_token`]): a linear layer's forward
//!   `2·rows·in·out`, its backward `4·rows·in·out` (input and weight gradients); causal
//!   attention half of the full products (forward `2·B·T²·C`, backward `4·B·T²·C`; flash
//!   attention's recomputed scores are not model FLOPs). Bias adds, layernorms, softmax and
//!   the optimizer count none: they are bound by memory.
//! - **Bytes** are the minimum: every input element the op needs read once, every output
//!   written once, an accumulated output (`+=`, the gradients) read and written. The
//!   embedding gathers and scatters count the rows of the batch's distinct tokens. Scratch and intermediates a kernel
//!   keeps in memory (split-K partials, the naive attention's scores) are not counted, so a
//!   kernel that spills them shows a lower share of the roofline. Host copies count none
//!   (their bound is the PCIe link, not the GPU's memory).

use super::op_times::{OpLabel, names};
use super::ops::{Dims, Linear};
use gpu_host::kernels::attention::AttentionShape;
use serde::Deserialize;
use std::ops::AddAssign;

/// Bytes of an f32 element (master weights, gradients, moments, statistics, losses).
const F32: f64 = 4.0;
/// Bytes of a token id.
const ID: f64 = 4.0;

/// FLOPs and minimal bytes of one or more calls of an op.
#[derive(Clone, Copy, Debug, Default, PartialEq, Deserialize)]
pub struct Work {
    /// Matrix-product FLOPs.
    pub flops: f64,
    /// Bytes read and written by an ideal kernel.
    pub bytes: f64,
}

impl AddAssign for Work {
    fn add_assign(&mut self, other: Self) {
        self.flops += other.flops;
        self.bytes += other.bytes;
    }
}

impl Work {
    /// Nothing counted (host copies).
    pub const NONE: Self = Self { flops: 0.0, bytes: 0.0 };

    /// Whether anything is counted.
    pub fn is_counted(&self) -> bool {
        self.flops > 0.0 || self.bytes > 0.0
    }

    /// The least time the work takes on a GPU of peak `flops_per_s` and memory bandwidth
    /// `bytes_per_s`, in milliseconds: the larger of its compute and memory times.
    pub fn roofline_ms(&self, flops_per_s: f64, bytes_per_s: f64) -> f64 {
        1e3 * (self.flops / flops_per_s).max(self.bytes / bytes_per_s)
    }

    /// Whether memory bounds the work at those peaks (its arithmetic intensity is below the
    /// GPU's ridge point).
    pub fn memory_bound(&self, flops_per_s: f64, bytes_per_s: f64) -> bool {
        self.bytes / bytes_per_s >= self.flops / flops_per_s
    }
}

/// `count` elements of `bytes` bytes.
fn n(count: usize, bytes: f64) -> f64 {
    count as f64 * bytes
}

/// An op that moves `bytes` and multiplies no matrices.
fn memory_op(name: &str, bytes: f64) -> OpLabel {
    OpLabel::new(name, Work { flops: 0.0, bytes })
}

/// A linear layer's forward, `act` bytes per activation and weight element: reads the
/// input, the weight and the bias; writes the output and, with a fused GELU, the
/// pre-activation.
pub fn matmul_forward(shape: Linear, act: f64, bias: bool, gelu: bool) -> OpLabel {
    let Linear { rows, inp, out, .. } = shape;
    let outputs = if gelu { 2 } else { 1 };
    let work = Work {
        flops: 2.0 * (rows * inp * out) as f64,
        bytes: n(rows * inp + out * inp + rows * out * outputs + usize::from(bias) * out, act),
    };
    OpLabel::new(names::matmul("forward", shape), work)
}

/// A linear layer's input gradient: reads the output gradient, the weight and (fused GELU
/// backward) the pre-activation; writes the input gradient.
pub fn matmul_backward_input(shape: Linear, act: f64, gelu: bool) -> OpLabel {
    let Linear { rows, inp, out, .. } = shape;
    let reads = rows * out + out * inp + usize::from(gelu) * rows * inp;
    let work = Work { flops: 2.0 * (rows * inp * out) as f64, bytes: n(reads + rows * inp, act) };
    OpLabel::new(names::matmul_backward(shape, "dX"), work)
}

/// A linear layer's weight gradient: reads the output gradient and the input; accumulates the
/// f32 weight gradient (read and written).
pub fn matmul_backward_weight(shape: Linear, act: f64) -> OpLabel {
    let Linear { rows, inp, out, .. } = shape;
    let work = Work {
        flops: 2.0 * (rows * inp * out) as f64,
        bytes: n(rows * out + rows * inp, act) + 2.0 * n(out * inp, F32),
    };
    OpLabel::new(names::matmul_backward(shape, "dW"), work)
}

/// A linear layer's bias gradient: reads the output gradient; accumulates the f32 bias
/// gradient.
pub fn matmul_backward_bias(shape: Linear, act: f64) -> OpLabel {
    let Linear { rows, out, .. } = shape;
    memory_op(&names::matmul_backward(shape, "dbias"), n(rows * out, act) + 2.0 * n(out, F32))
}

/// The bias gradient of the layer whose output a linear layer's fused GELU backward
/// differentiates at ([`crate::backend::ParamGrads::pre_act_bias`]): reads `dinp`, or, with
/// `from_col_sums`, the f32 column sums of every 16 rows that the input-gradient GEMM's
/// epilogue wrote; accumulates the f32 bias gradient.
pub fn matmul_backward_pre_act_bias(shape: Linear, act: f64, from_col_sums: bool) -> OpLabel {
    let Linear { rows, inp, .. } = shape;
    let sums = gpu_host::kernels::gemm::col_sums_len(1, rows, inp);
    let read = if from_col_sums { n(sums, F32) } else { n(rows * inp, act) };
    memory_op(&names::matmul_backward(shape, "pre-activation dbias"), read + 2.0 * n(inp, F32))
}

/// The qkv layer's bias gradient from the column sums of `dqkv` that flash attention's
/// backward wrote (every 16 positions' f32 sums of the `3C` channels); accumulates the f32
/// bias gradient. Named as the two-pass op it replaces.
pub fn qkv_bias_from_col_sums(dims: Dims) -> OpLabel {
    let Dims { b, t, c, nh, .. } = dims;
    let sums = gpu_host::kernels::flash::col_sums_len(AttentionShape { b, t, c, nh });
    let shape = Linear::new("qkv", b * t, c, 3 * c);
    memory_op(&names::matmul_backward(shape, "dbias"), n(sums, F32) + 2.0 * n(3 * c, F32))
}

/// Causal attention's forward: reads q, k, v; writes the output and what the backward needs
/// (flash: the log-sum-exp of every row; naive: the probabilities, `B·NH·T·T`).
pub fn attention_forward(dims: Dims, act: f64, flash: bool) -> OpLabel {
    let Dims { b, t, c, nh, .. } = dims;
    let saved = if flash { n(b * nh * t, F32) } else { n(b * nh * t * t, act) };
    let work = Work { flops: 2.0 * (b * t * t * c) as f64, bytes: n(4 * b * t * c, act) + saved };
    OpLabel::new(names::attention("forward", flash), work)
}

/// Causal attention's backward: reads q, k, v, the output gradient and what the forward saved
/// (flash: also the output, for the row dot products); writes the q, k, v gradients.
pub fn attention_backward(dims: Dims, act: f64, flash: bool) -> OpLabel {
    let Dims { b, t, c, nh, .. } = dims;
    let saved = if flash { n(b * t * c, act) + n(b * nh * t, F32) } else { n(b * nh * t * t, act) };
    let work = Work { flops: 4.0 * (b * t * t * c) as f64, bytes: n(7 * b * t * c, act) + saved };
    OpLabel::new(names::attention("backward", flash), work)
}

/// A layernorm of `rows × c`: reads the input, scale and shift; writes the output and the
/// row statistics.
pub fn layernorm_forward(rows: usize, c: usize, act: f64) -> OpLabel {
    memory_op(names::LAYERNORM_FORWARD, n(2 * rows * c + 2 * c, act) + n(2 * rows, F32))
}

/// A residual add fused with the layernorm of its sum: reads both inputs, scale and shift;
/// writes the sum, the output and the statistics.
pub fn residual_layernorm_forward(rows: usize, c: usize, act: f64) -> OpLabel {
    let bytes = n(4 * rows * c + 2 * c, act) + n(2 * rows, F32);
    memory_op(names::RESIDUAL_LAYERNORM_FORWARD, bytes)
}

/// A layernorm's backward: reads the output gradient, the input, the scale and the
/// statistics; accumulates the input gradient and the f32 scale and shift gradients, and with
/// `residual_bias` the f32 column sums of the input gradient
/// ([`crate::backend::ParamGrads::residual_bias`]).
pub fn layernorm_backward(rows: usize, c: usize, act: f64, residual_bias: bool) -> OpLabel {
    let grads = if residual_bias { 3 * c } else { 2 * c };
    let bytes = n(4 * rows * c + c, act) + n(2 * rows, F32) + 2.0 * n(grads, F32);
    memory_op(names::LAYERNORM_BACKWARD, bytes)
}

/// Token and position embeddings: reads the ids, the `wte` rows of the batch's `distinct`
/// tokens and the first `t` rows of `wpe`; writes the sum.
pub fn encoder_forward(dims: Dims, act: f64, distinct: usize) -> OpLabel {
    let Dims { b, t, c, .. } = dims;
    let bytes = n(b * t, ID) + n((distinct + t) * c + b * t * c, act);
    memory_op(names::ENCODER_FORWARD, bytes)
}

/// The embeddings' backward: reads the ids and the output gradient; accumulates the f32
/// gradient rows of the `distinct` tokens of the batch and of the first `t` positions.
pub fn encoder_backward(dims: Dims, act: f64, distinct: usize) -> OpLabel {
    let Dims { b, t, c, .. } = dims;
    let bytes = n(b * t, ID) + n(b * t * c, act) + 2.0 * n((distinct + t) * c, F32);
    memory_op(names::ENCODER_BACKWARD, bytes)
}

/// GELU of `len` elements: reads the input, writes the output.
pub fn gelu_forward(len: usize, act: f64) -> OpLabel {
    memory_op(names::GELU_FORWARD, n(2 * len, act))
}

/// GELU's backward: reads the input and the output gradient, writes the input gradient.
pub fn gelu_backward(len: usize, act: f64) -> OpLabel {
    memory_op(names::GELU_BACKWARD, n(3 * len, act))
}

/// A residual add of `len` elements: reads two, writes one.
pub fn residual_forward(len: usize, act: f64) -> OpLabel {
    memory_op(names::RESIDUAL_FORWARD, n(3 * len, act))
}

/// The fused classifier: reads the ids and each row's `v` real logits; writes the losses and,
/// in training, the gradient over the row's `vp` columns.
pub fn classifier(dims: Dims, act: f64, gradient: bool) -> OpLabel {
    let rows = dims.bt();
    let written = if gradient { n(rows * dims.vp, act) } else { 0.0 };
    memory_op(names::CLASSIFIER, n(rows, ID + F32) + n(rows * dims.v, act) + written)
}

/// The gradient norm: reads `len` f32 gradients.
pub fn grad_norm(len: usize) -> OpLabel {
    memory_op(names::GRAD_NORM, n(len, F32))
}

/// AdamW over `len` parameters: reads the gradients, updates the f32 master weights and both
/// moments, and rewrites the working copy (`working` bytes per element) if there is one.
pub fn adamw(len: usize, working: Option<f64>) -> OpLabel {
    memory_op(names::ADAMW, n(len, 7.0 * F32 + working.unwrap_or(0.0)))
}

/// Zeroing `len` elements of `elem` bytes.
pub fn zero(len: usize, elem: f64) -> OpLabel {
    memory_op(names::ZERO, n(len, elem))
}

/// The master weights rounded to the working copy: reads `len` f32, writes `len` of `act`.
pub fn round_to_act(len: usize, act: f64) -> OpLabel {
    memory_op(names::ROUND_TO_ACT, n(len, F32 + act))
}

/// `len` f32 GEMM operands rounded to TF32 into scratch (read and written once).
pub fn round_tf32(len: usize) -> OpLabel {
    memory_op(names::ROUND_TF32, n(len, 2.0 * F32))
}

/// A host copy (`names::UPLOAD`, `names::DOWNLOAD`, `names::TOKENS`): no work counted, its
/// bound is the PCIe link.
pub fn host_copy(name: &str) -> OpLabel {
    OpLabel::new(name, Work::NONE)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// GPT-2 124M at B = 16, T = 1024 in bf16.
    const DIMS: Dims =
        Dims { b: 16, t: 1024, c: 768, nh: 12, v: 50257, vp: 50304, logits_ld: 50304 };
    const BF16: f64 = 2.0;

    #[test]
    fn gpt2_small_linear_layers() {
        let fc = Linear::new("fc", 16384, 768, 3072);
        let forward = matmul_forward(fc, BF16, true, true);
        assert_eq!(forward.name, "matmul forward fc");
        assert_eq!(forward.work.flops, 2.0 * 16384.0 * 768.0 * 3072.0);
        // x, W, bias, out and pre-activation.
        let bytes = 2.0 * (16384.0 * 768.0 + 3072.0 * 768.0 + 3072.0 + 2.0 * 16384.0 * 3072.0);
        assert_eq!(forward.work.bytes, bytes);
        let fc_proj = Linear::new("fc proj", 16384, 3072, 768);
        let dx = matmul_backward_input(fc_proj, BF16, true);
        assert_eq!(dx.name, "matmul backward fc proj dX");
        assert_eq!(dx.work.flops, 2.0 * 16384.0 * 3072.0 * 768.0);
        // dout, W and the pre-activation read, dx written.
        let bytes = 2.0 * (16384.0 * 768.0 + 768.0 * 3072.0 + 2.0 * 16384.0 * 3072.0);
        assert_eq!(dx.work.bytes, bytes);
        let dw = matmul_backward_weight(fc_proj, BF16);
        assert_eq!(dw.name, "matmul backward fc proj dW");
        assert_eq!(dw.work.flops, dx.work.flops);
        // dout and x read; dW read and written in f32.
        let bytes = 2.0 * (16384.0 * 768.0 + 16384.0 * 3072.0) + 8.0 * 768.0 * 3072.0;
        assert_eq!(dw.work.bytes, bytes);
        let db = matmul_backward_bias(fc_proj, BF16);
        assert_eq!(db.name, "matmul backward fc proj dbias");
        assert_eq!((db.work.flops, db.work.bytes), (0.0, 2.0 * 16384.0 * 768.0 + 8.0 * 768.0));
        // The GEMMs are bound by compute on an H100 SXM (989.4 TFLOP/s bf16, 3.35 TB/s).
        assert!(!forward.work.memory_bound(989.4e12, 3.35e12));
        assert!(!dx.work.memory_bound(989.4e12, 3.35e12));
        assert!(!dw.work.memory_bound(989.4e12, 3.35e12));
    }

    #[test]
    fn attention_counts_the_causal_half_as_the_mfu_does() {
        let forward = attention_forward(DIMS, BF16, true);
        let backward = attention_backward(DIMS, BF16, true);
        // 6·C·T per token per layer, as mfu::flops_per_token counts it.
        assert_eq!((forward.work.flops + backward.work.flops) / 16384.0, 6.0 * 768.0 * 1024.0);
        assert_eq!(forward.work.bytes, 2.0 * 4.0 * 16384.0 * 768.0 + 4.0 * 16.0 * 12.0 * 1024.0);
        let naive = attention_forward(DIMS, BF16, false);
        assert_eq!(naive.work.flops, forward.work.flops);
        assert_eq!(
            naive.work.bytes - 2.0 * 4.0 * 16384.0 * 768.0,
            2.0 * 16.0 * 12.0 * 1024.0 * 1024.0
        );
    }

    #[test]
    fn memory_bound_ops() {
        let rows = DIMS.bt();
        let ln = layernorm_forward(rows, 768, BF16);
        assert_eq!(ln.work.flops, 0.0);
        assert_eq!(ln.work.bytes, 2.0 * (2.0 * 16384.0 * 768.0 + 1536.0) + 8.0 * 16384.0);
        // The classifier reads the real columns and writes the padded row.
        let train = classifier(DIMS, BF16, true);
        let eval = classifier(DIMS, BF16, false);
        assert_eq!(train.work.bytes - eval.work.bytes, 2.0 * 16384.0 * 50304.0);
        assert_eq!(eval.work.bytes, 8.0 * 16384.0 + 2.0 * 16384.0 * 50257.0);
        // AdamW: 7 f32 accesses per parameter, and the bf16 working copy.
        assert_eq!(adamw(10, Some(BF16)).work.bytes, 300.0);
        assert_eq!(adamw(10, None).work.bytes, 280.0);
        assert!(ln.work.memory_bound(989.4e12, 3.35e12));
        // 100 MB at 1 TB/s: 0.1 ms.
        assert!((Work { flops: 0.0, bytes: 1e8 }.roofline_ms(1e15, 1e12) - 0.1).abs() < 1e-12);
        assert!(!Work::NONE.is_counted() && ln.work.is_counted());
    }
}
