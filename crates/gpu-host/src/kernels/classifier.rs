//! The fused classifier: softmax, cross-entropy and the logits gradient in place (see
//! `kernel_abi::classifier`).

use super::check_len;
use super::elementwise::FloatElement;
use crate::device::{Device, LaunchConfig};
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::classifier::{
    BLOCK_THREADS, ClassifierKernels, ClassifierParams, GRAD_SKIP, GRAD_WRITE, GRAD_WRITE_TF32,
    NORMALISER_BYTES, staged_shared_bytes,
};

/// The vocabulary: `v` real tokens in rows padded to `vp` columns, stored `ld` apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Vocab {
    /// Real vocabulary size (50257 for GPT-2).
    pub v: usize,
    /// Padded row length, `≥ v` (50304 for GPT-2's padded vocabulary).
    pub vp: usize,
    /// Elements between the starts of consecutive rows, `≥ vp`; columns `vp..ld` are never
    /// touched.
    pub ld: usize,
}

impl Vocab {
    /// Rows of `vp` columns stored densely (`ld = vp`).
    pub fn dense(v: usize, vp: usize) -> Self {
        Self { v, vp, ld: vp }
    }
}

/// What the classifier does with the logits after computing the losses.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum LogitsGradient {
    /// Overwrite them with `dloss · (softmax − onehot)` (training; `dloss` is the gradient of
    /// the reduced loss with respect to each row's loss, e.g. `1 / rows`).
    Write {
        /// The factor of every row's gradient.
        dloss: f32,
    },
    /// As [`LogitsGradient::Write`], each gradient rounded to TF32 (to nearest, ties away from
    /// zero, as the `mma.sync` TF32 GEMMs round their operands) as it is stored: f32 logits only.
    /// A TF32 GEMM on `wgmma`, which truncates its f32 operands, then reads the gradient as it
    /// is, and one on `mma.sync` reads the same values as from [`LogitsGradient::Write`].
    WriteTf32 {
        /// The factor of every row's gradient.
        dloss: f32,
    },
    /// Leave them unchanged (evaluation: losses only).
    Skip,
}

/// How [`fused_classifier_on`] reads the logits (both give the same bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClassifierPath {
    /// `Staged` when the gradient is written and a row fits in the device's shared memory
    /// ([`Device::max_shared_per_block`]; GPT-2's in every type on an H100), else `TwoReads`.
    Auto,
    /// The row read from DRAM once, into shared memory, both passes reading it from there
    /// (`fused_classifier_staged_<ty>`).
    Staged,
    /// Both passes read the row from global memory, the second backwards, re-reading first
    /// what is most likely still in L2 (`fused_classifier_<ty>`): any row width.
    TwoReads,
}

/// Buffers of [`fused_classifier`].
pub struct Classifier<'a, T> {
    /// `rows` rows of logits, `ld` elements apart (the gradient replaces them under
    /// [`LogitsGradient::Write`]).
    pub logits: DeviceViewMut<'a, T>,
    /// `rows` losses, written.
    pub losses: DeviceViewMut<'a, f32>,
    /// `rows` target ids, each `< v` (a target `≥ v` yields a NaN loss and no out-of-row
    /// access).
    pub targets: DeviceView<'a, u32>,
}

/// Whether rows of `vp` elements of `T` fit in `dev`'s shared memory for the staged kernel
/// ([`ClassifierPath::Staged`]).
pub fn stages_on<T>(dev: &impl Device, vp: usize) -> bool {
    let bytes = staged_shared_bytes(u32::try_from(vp).unwrap_or(u32::MAX), size_of::<T>() as u32);
    bytes <= u64::from(dev.max_shared_per_block())
}

/// Per row: `loss = −ln softmax(logits[..v])[target]`, and per `gradient` the logits gradient
/// in place (columns `v..vp` get 0), on [`ClassifierPath::Auto`].
pub fn fused_classifier<D: Device, T: FloatElement>(
    dev: &D,
    vocab: Vocab,
    gradient: LogitsGradient,
    args: Classifier<'_, T>,
) -> Result<()> {
    fused_classifier_on(dev, ClassifierPath::Auto, vocab, gradient, args)
}

/// [`fused_classifier`] on `path`; an explicit [`ClassifierPath::Staged`] whose row does not
/// fit in shared memory is an [`GpuError::InvalidArgument`] (argument `path`).
pub fn fused_classifier_on<D: Device, T: FloatElement>(
    dev: &D,
    path: ClassifierPath,
    vocab: Vocab,
    gradient: LogitsGradient,
    mut args: Classifier<'_, T>,
) -> Result<()> {
    const OP: &str = "fused_classifier";
    let Vocab { v, vp, ld } = vocab;
    if v == 0 || v > vp || vp > ld || ld > u32::MAX as usize {
        return Err(GpuError::invalid(
            OP,
            "vocab",
            format!("need 0 < v <= vp <= ld < 2^32, got v = {v}, vp = {vp}, ld = {ld}"),
        ));
    }
    if !args.logits.len().is_multiple_of(ld) {
        return Err(GpuError::invalid(
            OP,
            "logits",
            format!("has {} elements, not rows of ld = {ld}", args.logits.len()),
        ));
    }
    let rows = args.logits.len() / ld;
    if rows > i32::MAX as usize {
        return Err(GpuError::invalid(OP, "logits", format!("{rows} rows (more than 2^31 - 1)")));
    }
    check_len(OP, "losses", args.losses.len(), rows, "one per row of logits")?;
    check_len(OP, "targets", args.targets.len(), rows, "one per row of logits")?;
    let (dloss, write_grad) = match gradient {
        LogitsGradient::Write { dloss } => (dloss, GRAD_WRITE),
        LogitsGradient::WriteTf32 { .. } if T::NAME != "f32" => {
            let reason = format!("TF32 rounding takes f32 logits, not {}", T::NAME);
            return Err(GpuError::invalid(OP, "gradient", reason));
        }
        LogitsGradient::WriteTf32 { dloss } => (dloss, GRAD_WRITE_TF32),
        LogitsGradient::Skip => (0.0, GRAD_SKIP),
    };
    if !dloss.is_finite() {
        return Err(GpuError::invalid(OP, "dloss", format!("{dloss} is not finite")));
    }
    let staged_bytes = staged_shared_bytes(vp as u32, size_of::<T>() as u32);
    let fits = stages_on::<T>(dev, vp);
    let staged = match path {
        ClassifierPath::Auto => fits && write_grad != GRAD_SKIP,
        ClassifierPath::Staged if !fits => {
            let limit = dev.max_shared_per_block();
            let reason = format!(
                "a staged row of {vp} {} takes {staged_bytes} bytes of shared memory, more than \
                 the {limit} a block may use here",
                T::NAME
            );
            return Err(GpuError::invalid(OP, "path", reason));
        }
        ClassifierPath::Staged => true,
        ClassifierPath::TwoReads => false,
    };
    if rows == 0 {
        return Ok(());
    }
    let params = ClassifierParams {
        logits: args.logits.ptr(),
        losses: args.losses.ptr(),
        targets: args.targets.ptr(),
        rows: rows as u32,
        v: v as u32,
        vp: vp as u32,
        dloss,
        write_grad,
        ld: ld as u32,
    };
    let (kernel, shared_mem_bytes) = if staged {
        (T::Abi::FUSED_STAGED, staged_bytes as u32)
    } else {
        (T::Abi::FUSED, NORMALISER_BYTES)
    };
    let config =
        LaunchConfig { grid: (rows as u32, 1, 1), block: (BLOCK_THREADS, 1, 1), shared_mem_bytes };
    // SAFETY: `logits` holds `rows × ld` elements, `losses` and `targets` `rows`; the kernel
    // reads targets and only touches columns below `vp <= ld` of its own row; the staged
    // kernel has shared memory for the `vp / 8` body vectors a row has at most.
    unsafe { dev.launch(kernel, config, params) }
}
