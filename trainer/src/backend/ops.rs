//! The parameter structs of the [`Backend`] ops.

use super::{ActMut, ActView, Backend, F32Mut, F32View};
pub use cpu_ref::adamw::WorkingRounding;
use std::ops::Range;

/// The sizes of a batch: `b` sequences of `t` tokens, `c` channels in `nh` heads, a
/// vocabulary of `v` tokens in rows padded to `vp`, the logits' rows `logits_ld` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dims {
    /// Sequences.
    pub b: usize,
    /// Tokens per sequence.
    pub t: usize,
    /// Channels.
    pub c: usize,
    /// Attention heads.
    pub nh: usize,
    /// Real vocabulary size.
    pub v: usize,
    /// Padded vocabulary size (columns of the logits).
    pub vp: usize,
    /// Elements between the starts of consecutive rows of the logits, `≥ vp`: the backend's
    /// [`Backend::logits_stride`](super::Backend::logits_stride).
    pub logits_ld: usize,
}

impl Dims {
    /// Tokens in the batch, `b · t`.
    pub fn bt(&self) -> usize {
        self.b * self.t
    }
}

/// The shape of a linear layer applied to `rows` rows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Linear {
    /// The layer's name (`qkv`, `fc`, `lm head`, ...), for op timings.
    pub layer: &'static str,
    /// Rows (tokens).
    pub rows: usize,
    /// Input features.
    pub inp: usize,
    /// Output features.
    pub out: usize,
    /// Elements between the starts of consecutive rows of the output and of its gradient:
    /// `out`, except for the classifier, whose logits rows are [`Dims::logits_ld`] apart.
    pub out_ld: usize,
    /// Whether this is the language-model head, whose output gradient is what the backend's
    /// [`Backend::fused_classifier`] wrote in place of the logits: the backend may rely on how
    /// it stored it (the CUDA backend rounds it to TF32 in TF32, so that a wgmma GEMM can read
    /// it without a rounded copy).
    pub lm_head: bool,
}

impl Linear {
    /// A layer of `inp` to `out` features over `rows` rows, its output stored densely.
    pub fn new(layer: &'static str, rows: usize, inp: usize, out: usize) -> Self {
        Self { layer, rows, inp, out, out_ld: out, lm_head: false }
    }

    /// The language-model head: `channels` to `vp` logits per row, rows `logits_ld` apart.
    pub fn lm_head(rows: usize, channels: usize, vp: usize, logits_ld: usize) -> Self {
        Self { out_ld: logits_ld, lm_head: true, ..Self::new("lm head", rows, channels, vp) }
    }
}

/// Which attention implementation the model uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AttentionKind {
    /// Scores and probabilities materialised (B·NH·T·T per layer), GEMMs and a softmax kernel.
    Naive,
    /// Fused flash attention: no T×T buffer, the per-row log-sum-exp saved for the backward.
    Flash,
}

impl AttentionKind {
    /// The fastest kind that runs in `precision` at head size `head_size`: flash for 16-bit
    /// activations and 64-channel heads, else naive.
    pub fn fastest(precision: super::Precision, head_size: usize) -> Self {
        use super::Precision::{Bf16, Fp16};
        if matches!(precision, Bf16 | Fp16) && head_size == flash_head_size() {
            Self::Flash
        } else {
            Self::Naive
        }
    }

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Naive => "naive",
            Self::Flash => "flash",
        }
    }
}

/// How an op writes its parameters' gradients into the gradient arena.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GradWrite {
    /// Over the arena's values, without reading them (they may be NaN): a step's first
    /// micro-batch, so that the arena needs no zeroing (the GEMMs' `β = 0`). Each of GPT-2's
    /// gradient windows has one writer per micro-batch, the tied token embedding excepted
    /// (see [`Backend::encoder_backward`]).
    Replace,
    /// Added to the arena's values: the later micro-batches.
    Accumulate,
}

impl GradWrite {
    /// A step's micro-batch `micro` (0-based): `Replace` for the first.
    pub fn for_micro_batch(micro: usize) -> Self {
        if micro == 0 { Self::Replace } else { Self::Accumulate }
    }

    /// The scale of the arena's old values that does this: 0 (not read) or 1.
    pub fn beta(self) -> f32 {
        match self {
            Self::Replace => 0.0,
            Self::Accumulate => 1.0,
        }
    }
}

/// Where the gradients of one op's parameters live in the gradient arena: a weight and,
/// optionally, a bias window (disjoint), both written as `write` says.
pub struct ParamGrads<'a, B: Backend + ?Sized> {
    /// The whole gradient arena.
    pub arena: F32Mut<'a, B>,
    /// The weight's elements in it.
    pub weight: Range<usize>,
    /// The bias's elements in it, if the op has a bias.
    pub bias: Option<Range<usize>>,
    /// Only for a matmul backward with a fused GELU backward ([`MatmulBackward::gelu_pre_act`]):
    /// the bias gradient of the layer whose output that pre-activation is, accumulated from
    /// the column sums of `dinp` (the pre-activation's gradient). The GPU backend takes them
    /// from the input-gradient GEMM's epilogue instead of re-reading `dinp` (cuBLASLt's
    /// `DGELU_BGRAD`).
    pub pre_act_bias: Option<Range<usize>>,
    /// Only for a layernorm backward whose `dinp` is the residual stream's gradient: the bias
    /// gradient of the linear layer that added to the stream there (a residual block's
    /// projection), the column sums of `dinp` once the layernorm's part is added. The GPU
    /// backend sums the values its kernel stores instead of re-reading `dinp`.
    pub residual_bias: Option<Range<usize>>,
    /// Whether the windows are overwritten or accumulated into.
    pub write: GradWrite,
}

/// Why [`Backend::encoder_backward`] takes only [`GradWrite::Accumulate`].
pub const ENCODER_ACCUMULATES: &str = "the encoder backward accumulates: the token embedding's \
     gradient window holds the lm head's weight gradient already";

/// One window of the gradient arena and how an op writes it.
pub struct GradWindow<'a, B: Backend + ?Sized> {
    /// The window.
    pub grad: F32Mut<'a, B>,
    /// Whether it is overwritten or accumulated into.
    pub write: GradWrite,
}

/// Why flash attention cannot run in fp32 or tf32 (the model refuses it before it is built;
/// the backends' own checks say the same).
pub const FLASH_NEEDS_16_BIT: &str =
    "flash attention runs on bf16 or fp16 activations; use --attention naive with fp32/tf32";

/// The head size the flash attention kernels are built for.
pub fn flash_head_size() -> usize {
    kernel_abi::flash::HD as usize
}

/// Layernorm statistics saved for the backward pass, one per row.
pub struct LayerNormStats<'a, B: Backend + ?Sized> {
    /// Row means.
    pub mean: F32Mut<'a, B>,
    /// Row reciprocal standard deviations.
    pub rstd: F32Mut<'a, B>,
}

/// Buffers of [`Backend::layernorm_forward`].
pub struct LayerNormForward<'a, B: Backend + ?Sized> {
    /// Normalised output, `rows × c`.
    pub out: ActMut<'a, B>,
    /// Statistics for the backward pass.
    pub stats: LayerNormStats<'a, B>,
    /// Input, `rows × c`.
    pub inp: ActView<'a, B>,
    /// Scale, `c`.
    pub weight: ActView<'a, B>,
    /// Shift, `c`.
    pub bias: ActView<'a, B>,
}

/// Buffers of [`Backend::residual_layernorm_forward`].
pub struct ResidualLayerNormForward<'a, B: Backend + ?Sized> {
    /// `inp1 + inp2`, written: the next residual stream.
    pub residual: ActMut<'a, B>,
    /// The residual stream.
    pub inp1: ActView<'a, B>,
    /// The block output added to it.
    pub inp2: ActView<'a, B>,
    /// The layernorm of `residual`.
    pub out: ActMut<'a, B>,
    /// Statistics for the backward pass.
    pub stats: LayerNormStats<'a, B>,
    /// Scale, `c`.
    pub weight: ActView<'a, B>,
    /// Shift, `c`.
    pub bias: ActView<'a, B>,
}

/// Buffers of [`Backend::layernorm_backward`].
pub struct LayerNormBackward<'a, B: Backend + ?Sized> {
    /// Input gradient, accumulated into.
    pub dinp: ActMut<'a, B>,
    /// Scale (weight) and shift (bias, always present) gradients.
    pub grads: ParamGrads<'a, B>,
    /// Output gradient.
    pub dout: ActView<'a, B>,
    /// The forward's input.
    pub inp: ActView<'a, B>,
    /// Scale.
    pub weight: ActView<'a, B>,
    /// The forward's row means.
    pub mean: F32View<'a, B>,
    /// The forward's row reciprocal standard deviations.
    pub rstd: F32View<'a, B>,
}

/// What follows the bias of a linear layer.
pub enum Activation<'a, B: Backend + ?Sized> {
    /// Nothing.
    None,
    /// GELU, with the pre-activation saved for the backward pass.
    Gelu {
        /// Receives `inp · weightᵀ + bias`.
        pre_act: ActMut<'a, B>,
    },
}

/// Buffers of [`Backend::matmul_forward`].
pub struct MatmulForward<'a, B: Backend + ?Sized> {
    /// Output, `rows × out`.
    pub out: ActMut<'a, B>,
    /// Input, `rows × inp`.
    pub inp: ActView<'a, B>,
    /// Weight, `out × inp` (PyTorch's layout).
    pub weight: ActView<'a, B>,
    /// Bias, `out`, if any.
    pub bias: Option<ActView<'a, B>>,
    /// The fused activation.
    pub activation: Activation<'a, B>,
}

impl<B: Backend + ?Sized> MatmulForward<'_, B> {
    /// Whether a GELU is fused in.
    pub fn gelu(&self) -> bool {
        matches!(self.activation, Activation::Gelu { .. })
    }
}

/// Buffers of [`Backend::matmul_backward`].
pub struct MatmulBackward<'a, B: Backend + ?Sized> {
    /// Input gradient, `rows × inp`, overwritten.
    pub dinp: ActMut<'a, B>,
    /// Weight (`out × inp`) and bias (`out`) gradients.
    pub grads: ParamGrads<'a, B>,
    /// Output gradient, `rows × out`.
    pub dout: ActView<'a, B>,
    /// The forward's input.
    pub inp: ActView<'a, B>,
    /// Weight.
    pub weight: ActView<'a, B>,
    /// The pre-activation of a GELU that produced `inp`: its backward is fused into `dinp`.
    pub gelu_pre_act: Option<ActView<'a, B>>,
}

/// What an attention forward saves for its backward.
pub enum AttentionSaved<'a, B: Backend + ?Sized> {
    /// [`AttentionKind::Naive`]: the probabilities, `b · nh · t · t`.
    Probs(ActMut<'a, B>),
    /// [`AttentionKind::Flash`]: the log-sum-exp of every score row, `b · nh · t`.
    Lse(F32Mut<'a, B>),
}

/// What an attention backward reads of its forward.
pub enum AttentionSavedView<'a, B: Backend + ?Sized> {
    /// See [`AttentionSaved::Probs`].
    Probs(ActView<'a, B>),
    /// See [`AttentionSaved::Lse`].
    Lse(F32View<'a, B>),
}

/// Buffers of [`Backend::attention_forward`].
pub struct AttentionForward<'a, B: Backend + ?Sized> {
    /// Output `(b, t, c)`.
    pub out: ActMut<'a, B>,
    /// What the backward needs.
    pub saved: AttentionSaved<'a, B>,
    /// Fused q, k, v `(b, t, 3c)`.
    pub qkv: ActView<'a, B>,
}

/// Buffers of [`Backend::attention_backward`].
pub struct AttentionBackward<'a, B: Backend + ?Sized> {
    /// Gradient of `qkv`, overwritten.
    pub dqkv: ActMut<'a, B>,
    /// Gradient of the output.
    pub dout: ActView<'a, B>,
    /// The forward's input.
    pub qkv: ActView<'a, B>,
    /// The forward's output.
    pub out: ActView<'a, B>,
    /// What the forward saved.
    pub saved: AttentionSavedView<'a, B>,
    /// Flash attention only: the qkv layer's bias gradient (`3C`, a window of the gradient
    /// arena), from the column sums of `dqkv` that the GPU kernels write as they store it,
    /// instead of re-reading `dqkv` in the qkv matmul's backward.
    pub qkv_bias: Option<GradWindow<'a, B>>,
}

/// Buffers of [`Backend::fused_classifier`].
pub struct Classifier<'a, B: Backend + ?Sized> {
    /// Logits `(b·t, vp)`; with `dloss`, replaced by their gradient.
    pub logits: ActMut<'a, B>,
    /// Per-position losses, `b·t`, written.
    pub losses: F32Mut<'a, B>,
    /// Target ids.
    pub targets: &'a B::Tokens,
    /// The gradient of the reduced loss with respect to each position's loss (training), or
    /// `None` (evaluation: losses only).
    pub dloss: Option<f32>,
}

/// Buffers of [`Backend::adamw`]: whole arenas of the table's length.
pub struct AdamWArgs<'a, B: Backend + ?Sized> {
    /// f32 master weights, updated.
    pub params: F32Mut<'a, B>,
    /// Gradients.
    pub grads: F32View<'a, B>,
    /// First moments, updated.
    pub m: F32Mut<'a, B>,
    /// Second moments, updated.
    pub v: F32Mut<'a, B>,
    /// Working copy, rewritten from the new master weights, if the model keeps one.
    pub working: Option<ActMut<'a, B>>,
}

/// The hyperparameters of one AdamW step (weight decay is per tensor, in the table).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWHyper {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Denominator epsilon.
    pub eps: f32,
    /// 1-based update number.
    pub t: u32,
    /// Factor applied to every gradient first: clipping × 1/loss scale.
    pub grad_scale: f32,
    /// Rounding of the working copy.
    pub rounding: WorkingRounding,
}
