//! The compute backend the model runs on.
//!
//! [`Backend`] owns memory (an associated buffer type, device memory on a GPU) and runs every
//! GPT-2 op on it. Ops take [`View`]s and [`ViewMut`]s into backend buffers, never host
//! slices, so activations and parameters stay on the device; host transfers are explicit
//! ([`Backend::upload`], [`Backend::download`], the norm returned by
//! [`Backend::global_norm`]). The semantics of each op are those of the `cpu_ref` function of
//! the same name, which is also what [`CpuBackend`] runs.

mod cpu;
mod view;

pub use cpu::CpuBackend;
pub use cpu_ref::AdamWStep;
pub use view::{Storage, View, ViewMut};

use crate::error::{Error, Result};

/// Whether a CUDA backend can run on this machine.
///
/// There is no CUDA backend yet: it comes with the GPU kernel issues (gpu-host launchers for
/// every op). Until then this is false, and `--device auto` resolves to the CPU.
pub fn cuda_backend_available() -> bool {
    false
}

/// Where the user asked to train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The CPU backend.
    Cpu,
    /// The CUDA backend.
    Cuda,
    /// CUDA when it is available, else the CPU.
    Auto,
}

/// A backend that can actually run here.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResolvedDevice {
    /// [`CpuBackend`].
    Cpu,
}

impl DeviceChoice {
    /// The backend to use, or an error naming why the requested one cannot run.
    pub fn resolve(self) -> Result<ResolvedDevice> {
        match self {
            Self::Cpu => Ok(ResolvedDevice::Cpu),
            Self::Cuda => {
                Err(Error::invalid("the CUDA backend is not implemented yet; use --device cpu"))
            }
            Self::Auto if cuda_backend_available() => Self::Cuda.resolve(),
            Self::Auto => Ok(ResolvedDevice::Cpu),
        }
    }
}

/// A compute backend: memory plus the GPT-2 ops, forward and backward.
///
/// Shapes follow `cpu_ref`: `b` batch, `t` sequence length, `bt = b * t`, `c` channels, `oc`
/// output channels, `nh` heads, `v` / `vp` real / padded vocabulary. Views must have exactly
/// the lengths the shapes imply; backends may panic otherwise (a bug in the caller, never a
/// user input).
pub trait Backend: Sync {
    /// An allocation of f32 values.
    type Buffer: Storage;
    /// An allocation of token ids (u32).
    type Tokens: Storage;

    /// One line naming the device (shown in the startup summary).
    fn describe(&self) -> String;

    /// Allocates `len` zeros.
    fn alloc(&self, len: usize) -> Result<Self::Buffer>;
    /// Allocates `len` token slots, all 0.
    fn alloc_tokens(&self, len: usize) -> Result<Self::Tokens>;
    /// Copies host values into `dst` (same length).
    fn upload(&self, src: &[f32], dst: ViewMut<'_, Self::Buffer>) -> Result<()>;
    /// Copies host token ids into `dst` (same length).
    fn upload_tokens(&self, src: &[u32], dst: ViewMut<'_, Self::Tokens>) -> Result<()>;
    /// Copies `src` to host memory (same length), waiting for the work that writes it.
    fn download(&self, src: View<'_, Self::Buffer>, dst: &mut [f32]) -> Result<()>;
    /// Sets every element of `dst` to 0.
    fn zero(&self, dst: ViewMut<'_, Self::Buffer>) -> Result<()>;

    /// See [`cpu_ref::encoder_forward`].
    fn encoder_forward(
        &self,
        out: ViewMut<'_, Self::Buffer>,
        tokens: View<'_, Self::Tokens>,
        wte: View<'_, Self::Buffer>,
        wpe: View<'_, Self::Buffer>,
        b: usize,
        t: usize,
        c: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::encoder_backward`].
    fn encoder_backward(
        &self,
        dwte: ViewMut<'_, Self::Buffer>,
        dwpe: ViewMut<'_, Self::Buffer>,
        dout: View<'_, Self::Buffer>,
        tokens: View<'_, Self::Tokens>,
        b: usize,
        t: usize,
        c: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::layernorm_forward`].
    fn layernorm_forward(
        &self,
        out: ViewMut<'_, Self::Buffer>,
        mean: ViewMut<'_, Self::Buffer>,
        rstd: ViewMut<'_, Self::Buffer>,
        inp: View<'_, Self::Buffer>,
        weight: View<'_, Self::Buffer>,
        bias: View<'_, Self::Buffer>,
        bt: usize,
        c: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::layernorm_backward`] (accumulates into `dinp`).
    fn layernorm_backward(
        &self,
        dinp: ViewMut<'_, Self::Buffer>,
        dweight: ViewMut<'_, Self::Buffer>,
        dbias: ViewMut<'_, Self::Buffer>,
        dout: View<'_, Self::Buffer>,
        inp: View<'_, Self::Buffer>,
        weight: View<'_, Self::Buffer>,
        mean: View<'_, Self::Buffer>,
        rstd: View<'_, Self::Buffer>,
        bt: usize,
        c: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::matmul_forward`].
    fn matmul_forward(
        &self,
        out: ViewMut<'_, Self::Buffer>,
        inp: View<'_, Self::Buffer>,
        weight: View<'_, Self::Buffer>,
        bias: Option<View<'_, Self::Buffer>>,
        bt: usize,
        c: usize,
        oc: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::matmul_backward`].
    fn matmul_backward(
        &self,
        dinp: ViewMut<'_, Self::Buffer>,
        dweight: ViewMut<'_, Self::Buffer>,
        dbias: Option<ViewMut<'_, Self::Buffer>>,
        dout: View<'_, Self::Buffer>,
        inp: View<'_, Self::Buffer>,
        weight: View<'_, Self::Buffer>,
        bt: usize,
        c: usize,
        oc: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::attention_forward`].
    fn attention_forward(
        &self,
        out: ViewMut<'_, Self::Buffer>,
        att: ViewMut<'_, Self::Buffer>,
        qkv: View<'_, Self::Buffer>,
        b: usize,
        t: usize,
        c: usize,
        nh: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::attention_backward`].
    fn attention_backward(
        &self,
        dqkv: ViewMut<'_, Self::Buffer>,
        dout: View<'_, Self::Buffer>,
        qkv: View<'_, Self::Buffer>,
        att: View<'_, Self::Buffer>,
        b: usize,
        t: usize,
        c: usize,
        nh: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::gelu_forward`].
    fn gelu_forward(
        &self,
        out: ViewMut<'_, Self::Buffer>,
        inp: View<'_, Self::Buffer>,
    ) -> Result<()>;

    /// See [`cpu_ref::gelu_backward`].
    fn gelu_backward(
        &self,
        dinp: ViewMut<'_, Self::Buffer>,
        inp: View<'_, Self::Buffer>,
        dout: View<'_, Self::Buffer>,
    ) -> Result<()>;

    /// See [`cpu_ref::residual_forward`].
    fn residual_forward(
        &self,
        out: ViewMut<'_, Self::Buffer>,
        inp1: View<'_, Self::Buffer>,
        inp2: View<'_, Self::Buffer>,
    ) -> Result<()>;

    /// See [`cpu_ref::fused_classifier`] (logits become dlogits in place).
    fn fused_classifier(
        &self,
        logits: ViewMut<'_, Self::Buffer>,
        losses: ViewMut<'_, Self::Buffer>,
        targets: View<'_, Self::Tokens>,
        dloss: f32,
        bt: usize,
        v: usize,
        vp: usize,
    ) -> Result<()>;

    /// See [`cpu_ref::global_norm`]; the result is read back to the host.
    fn global_norm(&self, tensors: &[View<'_, Self::Buffer>]) -> Result<f32>;

    /// See [`cpu_ref::adamw_update`].
    fn adamw_update(
        &self,
        params: ViewMut<'_, Self::Buffer>,
        grads: View<'_, Self::Buffer>,
        m: ViewMut<'_, Self::Buffer>,
        v: ViewMut<'_, Self::Buffer>,
        step: &AdamWStep,
    ) -> Result<()>;
}
