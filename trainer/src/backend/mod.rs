//! The compute backend the model runs on.
//!
//! [`Backend`] owns memory and runs every GPT-2 op on it. Buffers are typed by element: f32
//! (master weights, gradients, optimizer state, layernorm statistics, losses) and the
//! backend's activation type [`Backend::Act`] (f32, bf16 or f16: activations and the working
//! copy of the weights). Ops take parameter structs of [`View`]s and [`ViewMut`]s into backend
//! buffers ([`ops`]), never host slices, so everything stays on the device; host transfers are
//! explicit ([`Backend::upload`], [`Backend::download`], the norm returned by
//! [`Backend::grad_norm`]).
//!
//! Implementations: [`CpuBackend`] (the `cpu_ref` functions, f32, llm.c's numbers) and
//! [`CudaBackend`] (the project's kernels through `gpu_host`, generic over the runtime: a
//! CUDA GPU or the PTX simulator).

mod choice;
mod cpu;
mod cuda;
mod memory;
pub mod op_times;
pub mod op_work;
pub mod ops;
mod view;

pub use choice::{BackendJob, Compute, DeviceChoice, Precision, ResolvedDevice};
pub use cpu::CpuBackend;
pub use cpu_ref::GradNorm;
pub use cpu_ref::adamw::ArenaTensor;
pub use cuda::{CudaAct, CudaBackend, CudaOptions};
pub use gpu_host::kernels::encoder::TokenShape;
pub(crate) use memory::{check_host_memory, check_training_fits};
pub use view::{Storage, View, ViewMut};

use crate::error::Result;
use gpu_host::kernels::elementwise::FloatElement;
use half::{bf16, f16};
use op_times::{OpRecorder, OpTimes};
use ops::{
    AdamWArgs, AdamWHyper, AttentionBackward, AttentionForward, Classifier, Dims,
    LayerNormBackward, LayerNormForward, Linear, MatmulBackward, MatmulForward, ParamGrads,
    ResidualLayerNormForward,
};

/// An element type of backend buffers: f32, bf16 or f16.
pub trait Element: FloatElement + cpu_ref::precision::Element + Default {}

impl Element for f32 {}
impl Element for bf16 {}
impl Element for f16 {}

/// The element type of activations and working weights.
pub trait ActElement: Element {
    /// Whether the model keeps a working copy of the weights in this type (bf16, f16); f32
    /// models compute with the f32 master weights themselves.
    const WORKING_COPY: bool;

    /// The weights the forward and backward passes read: `master` itself for f32, else the
    /// working copy (present whenever [`ActElement::WORKING_COPY`] holds).
    fn weights<'a, B: Backend<Act = Self>>(
        master: &'a B::Buf<f32>,
        working: Option<&'a B::Buf<Self>>,
    ) -> &'a B::Buf<Self>;
}

impl ActElement for f32 {
    const WORKING_COPY: bool = false;
    fn weights<'a, B: Backend<Act = f32>>(
        master: &'a B::Buf<f32>,
        _: Option<&'a B::Buf<f32>>,
    ) -> &'a B::Buf<f32> {
        master
    }
}

macro_rules! working_copy {
    ($($ty:ty),*) => {$(
        impl ActElement for $ty {
            const WORKING_COPY: bool = true;
            fn weights<'a, B: Backend<Act = $ty>>(
                _: &'a B::Buf<f32>,
                working: Option<&'a B::Buf<$ty>>,
            ) -> &'a B::Buf<$ty> {
                working.expect("models with 16-bit activations always hold a working copy")
            }
        }
    )*};
}

working_copy!(bf16, f16);

/// A backend buffer of `T`.
pub type Buf<B, T> = <B as Backend>::Buf<T>;
/// A backend buffer of activations.
pub type ActBuf<B> = Buf<B, <B as Backend>::Act>;
/// A read-only window of activations.
pub type ActView<'a, B> = View<'a, ActBuf<B>>;
/// A writable window of activations.
pub type ActMut<'a, B> = ViewMut<'a, ActBuf<B>>;
/// A read-only window of f32 values.
pub type F32View<'a, B> = View<'a, Buf<B, f32>>;
/// A writable window of f32 values.
pub type F32Mut<'a, B> = ViewMut<'a, Buf<B, f32>>;

/// Timed launches of each tile when `--wgmma-tile tuned` chooses a GEMM's (after one untimed
/// one) on a GPU; one on the simulator, whose times say nothing of a GPU's.
pub const TUNING_RUNS: usize = 5;

/// A GEMM whose Hopper tile `--wgmma-tile tuned` chose by timing every tile that runs it.
#[derive(Clone, Debug, PartialEq)]
pub struct TunedGemm {
    /// The op of its first call (e.g. `matmul forward fc`).
    pub op: String,
    /// `M×N×K` and the layouts (`rc`: A row-major, B column-major; …).
    pub shape: String,
    /// The epilogue (`bias, GELU`, `GELU backward, column sums`, …).
    pub epilogue: String,
    /// Each tile timed and its median time in milliseconds, `Auto`'s first.
    pub timings: Vec<(gpu_host::kernels::gemm::WgmmaTile, f64)>,
    /// The fastest (the first of equals), which the later calls run.
    pub chosen: gpu_host::kernels::gemm::WgmmaTile,
}

/// A compute backend: typed memory plus the GPT-2 ops, forward and backward.
///
/// Views must have exactly the lengths the shapes imply; backends may panic otherwise (a bug
/// in the caller, never a user input). User input (token ids, sizes, memory) is checked and
/// reported as errors.
pub trait Backend {
    /// The activation element type.
    type Act: ActElement;
    /// An allocation of `T`.
    type Buf<T: Element>: Storage;
    /// A batch of token ids, validated against the vocabulary on upload.
    type Tokens;
    /// The per-tensor table of an AdamW update.
    type AdamWTable;

    /// One line naming the device and precision (shown in the startup summary).
    fn describe(&self) -> String;
    /// The precision the matmuls run in.
    fn precision(&self) -> Precision;
    /// The GPU's name as the driver reports it (for the MFU's peak), if on a GPU.
    fn gpu_name(&self) -> Option<&str> {
        None
    }
    /// Waits for all issued work (for timing).
    fn synchronize(&self) -> Result<()>;
    /// The GEMMs whose Hopper tile was chosen by timing so far (`--wgmma-tile tuned`), in the
    /// order of their first call; empty otherwise.
    fn tuned_gemms(&self) -> Vec<TunedGemm> {
        Vec::new()
    }
    /// Records the time of every op while switched on (off by default): where a step's time
    /// goes.
    fn op_recorder(&self) -> &OpRecorder;
    /// Starts timing every kernel launch (the device backends,
    /// [`gpu_host::Device::start_kernel_times`]; the CPU backend launches none).
    fn start_kernel_times(&self) {}
    /// Ends it: each kernel's launches and summed time as an op named after the kernel, its
    /// work not counted; empty on the CPU.
    fn take_kernel_times(&self) -> Result<OpTimes> {
        Ok(OpTimes::default())
    }

    /// Elements between the starts of consecutive rows of logits `vp` wide, `≥ vp`, in which
    /// the model allocates them: `vp` (dense) unless the backend's GEMMs want aligned rows.
    fn logits_stride(&self, vp: usize) -> usize {
        vp
    }

    /// Allocates `len` zeros; `what` names the buffer in an out-of-memory error.
    fn alloc<T: Element>(&self, len: usize, what: &str) -> Result<Self::Buf<T>>;
    /// Copies host values into `dst` (same length).
    fn upload<T: Element>(&self, src: &[T], dst: ViewMut<'_, Self::Buf<T>>) -> Result<()>;
    /// Copies `src` to host memory (same length), waiting for the work that writes it.
    fn download<T: Element>(&self, src: View<'_, Self::Buf<T>>, dst: &mut [T]) -> Result<()>;
    /// Sets every element of `dst` to 0.
    fn zero<T: Element>(&self, dst: ViewMut<'_, Self::Buf<T>>) -> Result<()>;
    /// `dst = src` rounded to nearest-even (the working copy of the master weights).
    fn round_to_act(&self, src: F32View<'_, Self>, dst: ActMut<'_, Self>) -> Result<()>;

    /// Validates `ids` (`shape.b × shape.t`, each `< shape.vocab`) and uploads them.
    fn upload_tokens(&self, ids: &[u32], shape: TokenShape) -> Result<Self::Tokens>;
    /// Validates and uploads a new batch of the same shape into `tokens`.
    fn replace_tokens(&self, tokens: &mut Self::Tokens, ids: &[u32]) -> Result<()>;

    /// `out = wte[tokens] + wpe[position]` ([`cpu_ref::encoder_forward`]).
    fn encoder_forward(
        &self,
        out: ActMut<'_, Self>,
        tokens: &Self::Tokens,
        wte: ActView<'_, Self>,
        wpe: ActView<'_, Self>,
        dims: Dims,
    ) -> Result<()>;
    /// `dwte[tokens] += dout`, `dwpe[position] += dout` ([`cpu_ref::encoder_backward`]);
    /// `grads.weight` is wte's window of the arena, `grads.bias` wpe's. Always accumulates
    /// (`grads.write` is [`Accumulate`](ops::GradWrite::Accumulate)): GPT-2's token embedding
    /// is the lm head's weight, whose gradient the lm head's backward wrote first; on a step's
    /// first micro-batch the model zeroes wpe's window before (rows past `t` get no gradient).
    /// May prepare `tokens` for it, once a batch (the CUDA backend groups the positions by
    /// token: host work that overlaps the GPU's when the backward is queued ahead of it).
    fn encoder_backward(
        &self,
        grads: ParamGrads<'_, Self>,
        dout: ActView<'_, Self>,
        tokens: &mut Self::Tokens,
        dims: Dims,
    ) -> Result<()>;

    /// [`cpu_ref::layernorm_forward`] over `rows` rows of `c`.
    fn layernorm_forward(
        &self,
        args: LayerNormForward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()>;
    /// `residual = inp1 + inp2`, then its layernorm (one kernel where the backend fuses them).
    fn residual_layernorm_forward(
        &self,
        args: ResidualLayerNormForward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()>;
    /// [`cpu_ref::layernorm_backward`] (accumulates into `dinp`; `dweight` and `dbias` as
    /// `grads.write` says), and with [`ParamGrads::residual_bias`] the column sums of the
    /// updated `dinp` into that window.
    fn layernorm_backward(
        &self,
        args: LayerNormBackward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()>;

    /// `out = act(inp · weightᵀ + bias)` ([`cpu_ref::matmul_forward`], then the activation).
    fn matmul_forward(&self, args: MatmulForward<'_, Self>, shape: Linear) -> Result<()>;
    /// `dinp = (dout · weight) ⊙ gelu'(pre_act)` when the input went through a GELU (else
    /// without the factor), `dweight += doutᵀ · inp`, `dbias += Σ dout` (`=` under
    /// [`GradWrite::Replace`](ops::GradWrite::Replace)).
    fn matmul_backward(&self, args: MatmulBackward<'_, Self>, shape: Linear) -> Result<()>;

    /// Causal self-attention forward, saving what its backward needs.
    fn attention_forward(&self, args: AttentionForward<'_, Self>, dims: Dims) -> Result<()>;
    /// Causal self-attention backward: `dqkv` is overwritten.
    fn attention_backward(&self, args: AttentionBackward<'_, Self>, dims: Dims) -> Result<()>;

    /// `out = gelu(inp)` (the unfused path).
    fn gelu_forward(&self, out: ActMut<'_, Self>, inp: ActView<'_, Self>) -> Result<()>;
    /// `dinp = gelu'(inp) · dout` (the unfused path).
    fn gelu_backward(
        &self,
        dinp: ActMut<'_, Self>,
        inp: ActView<'_, Self>,
        dout: ActView<'_, Self>,
    ) -> Result<()>;
    /// `out = inp1 + inp2` (the unfused path).
    fn residual_forward(
        &self,
        out: ActMut<'_, Self>,
        inp1: ActView<'_, Self>,
        inp2: ActView<'_, Self>,
    ) -> Result<()>;

    /// Per row: the cross-entropy loss, and (training) the logits' gradient in place
    /// ([`cpu_ref::fused_classifier`]). A backend may store the gradient as its GEMMs will
    /// read it (the CUDA backend in TF32: rounded to TF32, which its lm head's input gradient
    /// relies on: [`Linear::lm_head`]).
    fn fused_classifier(&self, args: Classifier<'_, Self>, dims: Dims) -> Result<()>;

    /// The L2 norm of `grads` and whether any element is not finite (read back to the host).
    fn grad_norm(&self, grads: F32View<'_, Self>) -> Result<GradNorm>;

    /// The table of an AdamW update over an arena of `arena_len` elements.
    fn adamw_table(&self, tensors: &[ArenaTensor], arena_len: usize) -> Result<Self::AdamWTable>;
    /// One AdamW step over every tensor of `table` (per-tensor weight decay), writing the
    /// working copy when given.
    fn adamw(
        &self,
        args: AdamWArgs<'_, Self>,
        table: &Self::AdamWTable,
        hyper: &AdamWHyper,
    ) -> Result<()>;
}
