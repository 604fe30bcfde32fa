//! The CUDA backend: every op is one or a few of the project's kernels, launched through
//! `gpu_host` on any [`Device`] — a CUDA GPU, or the PTX simulator (`--device sim`).
//!
//! Activations and the working copy of the weights are `A` (f32, bf16 or f16); master
//! weights, gradients, AdamW moments, layernorm statistics and losses are f32. Matmul weight
//! and bias gradients are accumulated in f32 straight from the 16-bit operands.

use super::memory::human_size;
use super::op_times::{OpClock, OpLabel, OpRecorder, OpTime, OpTimes, Stamp, host_stamp, names};
use super::op_work::{self, Work};
use super::ops::{
    AdamWArgs, AdamWHyper, AttentionBackward, AttentionForward, AttentionSaved, AttentionSavedView,
    Classifier, Dims, ENCODER_ACCUMULATES, GradWindow, GradWrite, LayerNormBackward,
    LayerNormForward, Linear, MatmulBackward, MatmulForward, ParamGrads, ResidualLayerNormForward,
    WorkingRounding,
};
use super::view::cut_order;
use super::{
    ActElement, ActMut, ActView, ArenaTensor, Backend, Compute, Element, F32View, GradNorm,
    Precision, Storage, TUNING_RUNS, TokenShape, TunedGemm, View, ViewMut,
};
use crate::error::{Error, Result};
use gpu_host::kernels::adamw::{self, AdamWBuffers, AdamWTable, AdamWTensor};
use gpu_host::kernels::attention::{self, AttentionElement, AttentionShape};
use gpu_host::kernels::classifier::{self, ClassifierPath, LogitsGradient, Vocab};
use gpu_host::kernels::elementwise;
use gpu_host::kernels::encoder::{self, Tokens};
use gpu_host::kernels::flash::{self, FlashBackward, FlashForward};
use gpu_host::kernels::gemm::{
    self, BiasGradElement, Epilogue, GemmConfig, GemmEngine, GemmOutput, GemmSpec, GemmTypes,
    Precision as GemmPrecision, WeightGrads, WgmmaTile,
};
use gpu_host::kernels::layernorm::{self, LayerNormStats};
use gpu_host::kernels::{gelu, grad_norm};
use gpu_host::{Device, DeviceBuffer, DeviceElement, DeviceView, DeviceViewMut, GpuError, PtxArch};
use half::{bf16, f16};
use std::cell::RefCell;
use std::marker::PhantomData;

/// The activation types the CUDA backend runs: what their matmuls, attention, working-copy
/// rounding and AdamW need.
pub trait CudaAct:
    ActElement + GemmTypes<Self> + GemmOutput + GemmTypes<f32> + BiasGradElement<f32> + AttentionElement
{
    /// The precisions whose matmuls take this type.
    const PRECISIONS: &'static [Precision];

    /// `dst = src` rounded to nearest-even.
    fn round_from_f32<D: Device>(
        dev: &D,
        src: DeviceView<'_, f32>,
        dst: DeviceViewMut<'_, Self>,
    ) -> gpu_host::Result<()>;

    /// Flash attention forward (16-bit types only), on `engine`.
    fn flash_forward<D: Device>(
        dev: &D,
        shape: AttentionShape,
        engine: GemmEngine,
        args: FlashForward<'_, Self>,
    ) -> Result<()>;

    /// Flash attention backward (16-bit types only), its dK/dV and dQ kernels on `engine`.
    fn flash_backward<D: Device>(
        dev: &D,
        shape: AttentionShape,
        engine: GemmEngine,
        args: FlashBackward<'_, Self>,
    ) -> Result<()>;

    /// One AdamW step with f32 gradients, writing a working copy of this type if given.
    fn adamw<D: Device>(
        dev: &D,
        table: &AdamWTable<D>,
        bufs: AdamWBuffers<'_, f32, Self>,
        hyper: &adamw::AdamWHyper,
    ) -> gpu_host::Result<()>;
}

fn no_flash() -> Error {
    Error::invalid(super::ops::FLASH_NEEDS_16_BIT)
}

impl CudaAct for f32 {
    const PRECISIONS: &'static [Precision] = &[Precision::Fp32, Precision::Tf32];

    fn round_from_f32<D: Device>(
        dev: &D,
        src: DeviceView<'_, f32>,
        dst: DeviceViewMut<'_, f32>,
    ) -> gpu_host::Result<()> {
        elementwise::scale(dev, src, 1.0, dst)
    }

    fn flash_forward<D: Device>(
        _: &D,
        _: AttentionShape,
        _: GemmEngine,
        _: FlashForward<'_, f32>,
    ) -> Result<()> {
        Err(no_flash())
    }

    fn flash_backward<D: Device>(
        _: &D,
        _: AttentionShape,
        _: GemmEngine,
        _: FlashBackward<'_, f32>,
    ) -> Result<()> {
        Err(no_flash())
    }

    fn adamw<D: Device>(
        dev: &D,
        table: &AdamWTable<D>,
        bufs: AdamWBuffers<'_, f32, f32>,
        hyper: &adamw::AdamWHyper,
    ) -> gpu_host::Result<()> {
        let AdamWBuffers { params, grads, m, v, working } = bufs;
        if working.is_some() {
            return Err(GpuError::invalid("adamw", "working", "f32 models keep no working copy"));
        }
        let working: Option<DeviceViewMut<'_, bf16>> = None;
        adamw::adamw(dev, table, AdamWBuffers { params, grads, m, v, working }, hyper)
    }
}

macro_rules! half_act {
    ($ty:ty, $precision:ident) => {
        impl CudaAct for $ty {
            const PRECISIONS: &'static [Precision] = &[Precision::$precision];

            fn round_from_f32<D: Device>(
                dev: &D,
                src: DeviceView<'_, f32>,
                dst: DeviceViewMut<'_, $ty>,
            ) -> gpu_host::Result<()> {
                elementwise::cast(dev, src, dst)
            }

            fn flash_forward<D: Device>(
                dev: &D,
                shape: AttentionShape,
                engine: GemmEngine,
                args: FlashForward<'_, $ty>,
            ) -> Result<()> {
                Ok(flash::flash_attention_forward(dev, shape, engine, args)?)
            }

            fn flash_backward<D: Device>(
                dev: &D,
                shape: AttentionShape,
                engine: GemmEngine,
                args: FlashBackward<'_, $ty>,
            ) -> Result<()> {
                Ok(flash::flash_attention_backward(dev, shape, engine, args)?)
            }

            fn adamw<D: Device>(
                dev: &D,
                table: &AdamWTable<D>,
                bufs: AdamWBuffers<'_, f32, $ty>,
                hyper: &adamw::AdamWHyper,
            ) -> gpu_host::Result<()> {
                adamw::adamw(dev, table, bufs, hyper)
            }
        }
    };
}

half_act!(bf16, Bf16);
half_act!(f16, Fp16);

/// A device allocation as a backend buffer.
pub struct DevBuf<D: Device, T: DeviceElement>(D::Buffer<T>);

impl<D: Device, T: DeviceElement> Storage for DevBuf<D, T> {
    fn len(&self) -> usize {
        self.0.len()
    }
}

fn dv<'a, D: Device, T: DeviceElement>(view: View<'a, DevBuf<D, T>>) -> DeviceView<'a, T> {
    let (buf, range) = view.parts();
    buf.0.view().slice(range).expect("backend views lie inside their buffers")
}

fn dvm<'a, D: Device, T: DeviceElement>(view: ViewMut<'a, DevBuf<D, T>>) -> DeviceViewMut<'a, T> {
    let (buf, range) = view.into_parts();
    buf.0.view_mut().slice_mut(range).expect("backend views lie inside their buffers")
}

/// Work space the ops borrow for the duration of a call, grown on demand.
struct Scratch<D: Device, A: DeviceElement> {
    act: Option<D::Buffer<A>>,
    f32: Option<D::Buffer<f32>>,
    norm_workspace: D::Buffer<u64>,
    norm_out: D::Buffer<f32>,
}

/// How a [`CudaBackend`] is set up.
#[derive(Clone, Debug)]
pub struct CudaOptions {
    /// Precision (which must take the backend's activation type) and GEMM engine.
    pub compute: Compute,
    /// SMs of the GPU, for the split-K heuristic of small-output GEMMs.
    pub multiprocessors: usize,
    /// The driver's name of a real GPU: selects the peak of the MFU.
    pub gpu_name: Option<String>,
}

/// The CUDA backend on runtime `D` with activations of type `A`.
pub struct CudaBackend<'d, D: Device, A: CudaAct> {
    dev: &'d D,
    precision: Precision,
    /// How every GEMM of the model runs: the precision's GEMM arithmetic, engine and Hopper
    /// tile (the linear layers' and the materialised attention's alike).
    gemm: GemmConfig,
    /// The fused classifier's kernel.
    classifier: ClassifierPath,
    multiprocessors: usize,
    gpu_name: Option<String>,
    scratch: RefCell<Scratch<D, A>>,
    /// The GEMMs tuned so far under `--wgmma-tile tuned`, with their keys
    /// ([`CudaBackend::tuned_gemm`]).
    tuned: RefCell<Vec<(GemmSpec, &'static str, TunedGemm)>>,
    ops: OpRecorder,
    act: PhantomData<A>,
}

/// The widest output, in multiples of its input, of a linear layer whose TF32 input gradient
/// runs on wgmma ([`CudaBackend::tf32_input_gradient_on_wgmma`]): GPT-2's fc layer (4×).
const MAX_WGMMA_DX_WIDENING: usize = 4;

/// Maps a runtime error to the trainer's, naming the buffer of an out-of-memory error.
fn alloc_error(what: &str, err: GpuError) -> Error {
    match err {
        GpuError::OutOfMemory { bytes, free, total } => Error::Backend(format!(
            "out of GPU memory allocating {what}: {} requested, {} free of {}; lower --batch-size (or --seq-len)",
            human_size(bytes),
            human_size(free),
            human_size(total)
        )),
        other => Error::Backend(format!("allocating {what}: {other}")),
    }
}

impl From<GpuError> for Error {
    fn from(err: GpuError) -> Self {
        Error::Backend(err.to_string())
    }
}

impl<'d, D: Device, A: CudaAct> CudaBackend<'d, D, A> {
    /// A backend on `dev` set up by `options`.
    pub fn new(dev: &'d D, options: CudaOptions) -> Result<Self> {
        let CudaOptions {
            compute: Compute { precision, gemm_engine, wgmma_tile, weight_grads, classifier },
            multiprocessors,
            gpu_name,
        } = options;
        if !<A as CudaAct>::PRECISIONS.contains(&precision) {
            return Err(Error::invalid(format!(
                "precision {} does not compute on {} activations",
                precision.name(),
                <A as DeviceElement>::NAME
            )));
        }
        let gemm_engine = match (precision, gemm_engine) {
            // The FP32 rung runs the SIMT kernel whatever the engine (as --help says).
            (Precision::Fp32, _) => GemmEngine::Auto,
            (Precision::Tf32, GemmEngine::Wgmma) => {
                return Err(Error::invalid(
                    "--gemm-engine wgmma cannot train in tf32: wgmma reads TF32 operands K-major \
                     only, and the weight gradients' operands are not; --gemm-engine auto runs \
                     the forward and input-gradient GEMMs on wgmma and the rest on mma.sync",
                ));
            }
            (_, GemmEngine::Wgmma) if dev.ptx_arch() != PtxArch::Sm90a => {
                return Err(Error::invalid(format!(
                    "--gemm-engine wgmma needs the Hopper module (sm_90a: an H100 or H200, or \
                     --device sim-hopper); {} runs the {} module",
                    dev.describe(),
                    dev.ptx_arch().name()
                )));
            }
            (_, engine) => engine,
        };
        let scratch = Scratch {
            act: None,
            f32: None,
            norm_workspace: dev
                .alloc(grad_norm::GRAD_NORM_WORKSPACE_LEN)
                .map_err(|e| alloc_error("the gradient-norm workspace", e))?,
            norm_out: dev.alloc(2).map_err(|e| alloc_error("the gradient norm", e))?,
        };
        Ok(Self {
            dev,
            precision,
            gemm: GemmConfig {
                precision: precision.gemm(),
                engine: gemm_engine,
                wgmma_tile,
                weight_grads,
            },
            classifier,
            multiprocessors: multiprocessors.max(1),
            gpu_name,
            scratch: RefCell::new(scratch),
            tuned: RefCell::default(),
            ops: OpRecorder::default(),
            act: PhantomData,
        })
    }

    fn gemm_precision(&self) -> GemmPrecision {
        self.gemm.precision
    }

    /// A GEMM's outcome; with `--gemm-engine wgmma` forced, a GEMM the Hopper kernels cannot
    /// take says which option made it so.
    fn gemm_result<R>(&self, result: gpu_host::Result<R>) -> Result<R> {
        result.map_err(|e| match (&e, self.gemm.engine) {
            (GpuError::InvalidArgument { .. }, GemmEngine::Wgmma) => Error::Backend(format!(
                "{e} (--gemm-engine wgmma forces the Hopper kernels on every GEMM; \
                 --gemm-engine auto runs the GEMMs they cannot take on mma.sync)"
            )),
            _ => e.into(),
        })
    }

    /// `spec` on the backend's GEMM engine and Hopper tile ([`GemmConfig::apply`]).
    fn on_engine(&self, spec: GemmSpec) -> GemmSpec {
        self.gemm.apply(spec)
    }

    /// Runs `launch` with `spec`, whose tile under `--wgmma-tile tuned` is chosen here: the
    /// first call of each GEMM (its spec and `epilogue`) times every tile
    /// [`gemm::tuned_candidates`] lists, each through `launch` ([`gemm::time_launches`]), and
    /// keeps the fastest for the later calls. Every tile computes the same bits, and `launch`
    /// writes its outputs over (its inputs are other buffers: Rust's borrows), so the output
    /// is the GEMM's whichever ran. A GEMM without a choice, or one adding to its output
    /// (β ≠ 0), runs as under `Auto`, untuned.
    fn tuned_gemm(
        &self,
        spec: GemmSpec,
        op: impl FnOnce() -> String,
        epilogue: &'static str,
        mut launch: impl FnMut(&GemmSpec) -> Result<()>,
    ) -> Result<()> {
        if spec.wgmma_tile != WgmmaTile::Tuned {
            return launch(&spec);
        }
        let known = self
            .tuned
            .borrow()
            .iter()
            .find(|(s, e, _)| *s == spec && *e == epilogue)
            .map(|(.., t)| t.chosen);
        if let Some(tile) = known {
            return launch(&GemmSpec { wgmma_tile: tile, ..spec });
        }
        let sms = u32::try_from(self.multiprocessors).unwrap_or(u32::MAX);
        let candidates = gemm::tuned_candidates(&spec, self.dev.ptx_arch(), sms);
        if candidates.is_empty() || spec.beta != 0.0 {
            return launch(&spec);
        }
        let runs = if self.dev.is_simulator() { 1 } else { TUNING_RUNS };
        let mut timings = Vec::with_capacity(candidates.len());
        for tile in candidates {
            let spec = GemmSpec { wgmma_tile: tile, ..spec };
            let ms = gemm::time_launches(self.dev, runs, || launch(&spec))?;
            timings.push((tile, ms));
        }
        let chosen = timings.iter().min_by(|a, b| a.1.total_cmp(&b.1)).map(|t| t.0);
        let chosen = chosen.expect("tuned_candidates lists two tiles or none");
        let tuned = TunedGemm {
            op: op(),
            shape: format!("{}×{}×{} {}", spec.m, spec.n, spec.k, spec.layout_name()),
            epilogue: epilogue.to_owned(),
            timings,
            chosen,
        };
        self.tuned.borrow_mut().push((spec, epilogue, tuned));
        launch(&GemmSpec { wgmma_tile: chosen, ..spec })
    }

    /// Runs `op`, recorded as `label()` (its name and work) while the op recorder is on: on the
    /// GPU's clock (events in its stream), or where the runtime has none (the simulator) on the
    /// host's after a synchronisation.
    fn timed<R>(
        &self,
        label: impl FnOnce() -> OpLabel,
        op: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        let clock = || match self.dev.record_event()? {
            Some(event) => Ok(Stamp::Device(event)),
            None => {
                self.dev.synchronize()?;
                host_stamp()
            }
        };
        self.ops.time(label, clock, op)
    }

    /// Whether the input gradient `dX = dY·W` of `shape` runs as `transposed`, `dY·(Wᵀ)ᵀ` with
    /// `Wᵀ` K-major, on the Hopper TF32 kernel: wgmma reads TF32 operands K-major only, and `W`
    /// (`out × in`) is N-major for this product. Then `dY` is rounded to TF32 into scratch and
    /// `W` transposed and rounded beside it (wgmma truncates TF32 operands): modelled for
    /// GPT-2 124M at B·T = 16384 on an H200, 0.27 ms of copies and 0.83 ms of wgmma per layer
    /// against 2.3 ms on mma.sync (TF32 wgmma at 86% of cuBLAS, mma.sync at 38–44%, measured
    /// 2026-11-26). Only with `--gemm-engine auto`, and not for a layer whose output is
    /// more than [`MAX_WGMMA_DX_WIDENING`] times wider than its input (a copy of its `dY` would
    /// be the step's largest buffer again) unless it is the lm head, whose `dY`, the logits'
    /// gradient, the fused classifier stored rounded already ([`Self::rounds_logits_gradient`]):
    /// only its weight is transposed then (the classifier's input gradient, 1.27 TFLOP at
    /// B·T = 16384, ran on mma.sync at 137 TFLOP/s, TF32 wgmma ran its forward at 318).
    fn tf32_input_gradient_on_wgmma(&self, transposed: &GemmSpec, shape: Linear) -> bool {
        self.gemm.engine == GemmEngine::Auto
            && (shape.lm_head || shape.out <= MAX_WGMMA_DX_WIDENING * shape.inp)
            && transposed.truncates_tf32_operands(self.dev.ptx_arch())
    }

    /// Whether the fused classifier stores the logits' gradient rounded to TF32: in TF32, where
    /// every GEMM reading it rounds it so first (`mma.sync`) or must be handed it rounded
    /// (`wgmma`, which truncates): the same arithmetic on both engines, and no rounded copy of
    /// the step's largest buffer for the lm head's input gradient on wgmma.
    fn rounds_logits_gradient(&self) -> bool {
        self.gemm_precision() == GemmPrecision::Tf32
    }

    /// Runs `gemm` on two operands of `lens` elements that `prepare` writes into scratch first
    /// (TF32-rounded copies for a GEMM on wgmma, which would truncate the originals), the
    /// preparation timed as its own op.
    fn with_tf32_operands<R>(
        &self,
        (a_len, b_len): (usize, usize),
        prepare: impl FnOnce(DeviceViewMut<'_, A>, DeviceViewMut<'_, A>) -> gpu_host::Result<()>,
        gemm: impl FnOnce(DeviceView<'_, A>, DeviceView<'_, A>) -> Result<R>,
    ) -> Result<R> {
        let len = a_len + b_len;
        self.with_scratch(len, 0, "the TF32-rounded operands", |copies, _| {
            let (mut a, mut b) = copies.split_at_mut(a_len)?;
            self.timed(|| op_work::round_tf32(len), || Ok(prepare(a.reborrow(), b.reborrow())?))?;
            gemm(a.as_view(), b.as_view())
        })
    }

    /// Bytes of an activation element.
    const ACT: f64 = size_of::<A>() as f64;

    /// `db = beta · db + Σ_rows dy` over `rows` dense rows of `db.len()` columns, in two
    /// passes (`gemm::bias_grad`) through the f32 scratch.
    fn bias_grad(
        &self,
        dy: DeviceView<'_, A>,
        rows: usize,
        db: DeviceViewMut<'_, f32>,
        beta: f32,
    ) -> Result<()> {
        let len = gemm::bias_grad_workspace_len(rows, db.len());
        self.with_scratch(0, len, "bias-gradient workspace", |_, workspace| {
            let n = db.len();
            Ok(gemm::bias_grad::<D, A, f32>(self.dev, dy, rows, n, db, beta, workspace)?)
        })
    }

    /// Runs `f` with `act_len` elements of `A` and `f32_len` of f32 scratch.
    fn with_scratch<R>(
        &self,
        act_len: usize,
        f32_len: usize,
        what: &str,
        f: impl FnOnce(DeviceViewMut<'_, A>, DeviceViewMut<'_, f32>) -> Result<R>,
    ) -> Result<R> {
        let mut scratch = self.scratch.borrow_mut();
        let scratch = &mut *scratch;
        grow(self.dev, &mut scratch.act, act_len, what)?;
        grow(self.dev, &mut scratch.f32, f32_len, what)?;
        let act = scratch.act.as_mut().expect("grown").view_mut().slice_mut(0..act_len)?;
        let f32s = scratch.f32.as_mut().expect("grown").view_mut().slice_mut(0..f32_len)?;
        f(act, f32s)
    }
}

/// Replaces `buf` with a larger allocation when it holds fewer than `len` elements (at least
/// one element, so the views exist).
fn grow<D: Device, T: DeviceElement>(
    dev: &D,
    buf: &mut Option<D::Buffer<T>>,
    len: usize,
    what: &str,
) -> Result<()> {
    let len = len.max(1);
    if buf.as_ref().is_none_or(|b| b.len() < len) {
        *buf = None;
        *buf = Some(dev.alloc(len).map_err(|e| alloc_error(what, e))?);
    }
    Ok(())
}

/// The windows of one op's gradients in the arena (see [`ParamGrads`]).
struct GradWindows<'a> {
    weight: DeviceViewMut<'a, f32>,
    bias: Option<DeviceViewMut<'a, f32>>,
    pre_act_bias: Option<DeviceViewMut<'a, f32>>,
    residual_bias: Option<DeviceViewMut<'a, f32>>,
}

/// The windows of `grads`, disjoint by the arena's layout.
fn grad_windows<'a, D: Device, A: CudaAct>(
    grads: ParamGrads<'a, CudaBackend<'_, D, A>>,
) -> Result<GradWindows<'a>> {
    let ParamGrads { arena, weight, bias, pre_act_bias, residual_bias, write: _ } = grads;
    let ranges = [Some(weight), bias, pre_act_bias, residual_bias];
    let mut windows: [Option<DeviceViewMut<'a, f32>>; 4] = [None, None, None, None];
    let (mut rest, mut offset) = (Some(dvm(arena)), 0);
    for i in cut_order(&ranges) {
        let range = ranges[i].clone().expect("present");
        let tail = rest.take().expect("cut in order").split_at_mut(range.start - offset)?.1;
        let (window, tail) = tail.split_at_mut(range.len())?;
        (windows[i], rest, offset) = (Some(window), Some(tail), range.end);
    }
    let [weight, bias, pre_act_bias, residual_bias] = windows;
    Ok(GradWindows { weight: weight.expect("present"), bias, pre_act_bias, residual_bias })
}

/// The weight and bias windows of the gradients of an op that adds no other bias gradient.
fn weight_and_bias<'a, D: Device, A: CudaAct>(
    grads: ParamGrads<'a, CudaBackend<'_, D, A>>,
) -> Result<(DeviceViewMut<'a, f32>, Option<DeviceViewMut<'a, f32>>)> {
    assert!(grads.pre_act_bias.is_none(), "only a matmul backward fuses the GELU backward");
    assert!(grads.residual_bias.is_none(), "only a layernorm backward sums its dinp");
    let GradWindows { weight, bias, .. } = grad_windows(grads)?;
    Ok((weight, bias))
}

fn attention_shape(dims: Dims) -> AttentionShape {
    AttentionShape { b: dims.b, t: dims.t, c: dims.c, nh: dims.nh }
}

impl<D: Device, A: CudaAct> Backend for CudaBackend<'_, D, A> {
    type Act = A;
    type Buf<T: Element> = DevBuf<D, T>;
    type Tokens = Tokens<D>;
    type AdamWTable = AdamWTable<D>;

    fn describe(&self) -> String {
        let matmuls = match self.precision {
            Precision::Fp32 => "FP32 SIMT matmuls",
            Precision::Tf32 => "TF32 tensor-core matmuls",
            Precision::Bf16 => "bf16 tensor-core matmuls",
            Precision::Fp16 => "fp16 tensor-core matmuls",
        };
        let engine = match (self.precision, self.gemm.engine) {
            (Precision::Fp32, _) | (_, GemmEngine::Auto) => "",
            (_, GemmEngine::MmaSync) => " on mma.sync only",
            (_, GemmEngine::Wgmma) => " on wgmma only",
        };
        let tile = match (self.precision, self.gemm.engine, self.gemm.wgmma_tile) {
            (Precision::Fp32, ..) | (_, GemmEngine::MmaSync, _) | (.., WgmmaTile::Auto) => "",
            (.., WgmmaTile::N128) => ", 128×128 wgmma tiles",
            (.., WgmmaTile::N256) => ", 128×256 wgmma tiles where they exist",
            (.., WgmmaTile::PingPong) => ", ping-pong wgmma tiles where they exist",
            (.., WgmmaTile::Deferred) => ", deferred-epilogue wgmma tiles where they exist",
            (.., WgmmaTile::StreamK) => ", stream-K wgmma tiles where they apply",
            (.., WgmmaTile::Tuned) => ", wgmma tiles tuned by timing",
        };
        let weight_grads = match (self.precision, self.gemm.engine, self.gemm.weight_grads) {
            (Precision::Fp32, ..) | (_, GemmEngine::MmaSync, _) | (.., WeightGrads::Auto) => "",
            (.., WeightGrads::StreamK) => ", stream-K weight gradients where they apply",
        };
        format!(
            "{}, {} ({} activations, {matmuls}{engine}{tile}{weight_grads})",
            self.dev.describe(),
            self.precision.name(),
            <A as DeviceElement>::NAME
        )
    }

    fn precision(&self) -> Precision {
        self.precision
    }

    fn gpu_name(&self) -> Option<&str> {
        self.gpu_name.as_deref()
    }

    fn tuned_gemms(&self) -> Vec<TunedGemm> {
        self.tuned.borrow().iter().map(|(.., tuned)| tuned.clone()).collect()
    }

    fn synchronize(&self) -> Result<()> {
        Ok(self.dev.synchronize()?)
    }

    fn op_recorder(&self) -> &OpRecorder {
        &self.ops
    }

    fn start_kernel_times(&self) {
        self.dev.start_kernel_times();
    }

    fn take_kernel_times(&self) -> Result<OpTimes> {
        let kernels = self.dev.take_kernel_times()?;
        let clock = if kernels.is_empty() {
            None
        } else if self.dev.is_simulator() {
            Some(OpClock::Host)
        } else {
            Some(OpClock::Device)
        };
        let ops = kernels
            .into_iter()
            .map(|k| OpTime {
                op: k.name.into(),
                calls: k.launches,
                ms: k.ms,
                work: Work::default(),
            })
            .collect();
        Ok(OpTimes { clock, ops, error: None })
    }

    /// `vp` rounded up to 16 bytes of `A`: with GPT-2's 50,257 tokens unpadded, dense rows
    /// would start at every alignment, and the GEMMs that read the logits' gradient would take
    /// their slow element-wise path and no wgmma (the H200's bf16 rung, 2026-11-26: 33 ms of
    /// an 89 ms step in the classifier's backward, against 3.3 ms with the padded vocabulary).
    fn logits_stride(&self, vp: usize) -> usize {
        vp.next_multiple_of(16 / size_of::<A>())
    }

    fn alloc<T: Element>(&self, len: usize, what: &str) -> Result<DevBuf<D, T>> {
        let mut buf = self.dev.alloc::<T>(len).map_err(|e| alloc_error(what, e))?;
        elementwise::fill(self.dev, buf.view_mut(), T::default())?;
        Ok(DevBuf(buf))
    }

    fn upload<T: Element>(&self, src: &[T], dst: ViewMut<'_, DevBuf<D, T>>) -> Result<()> {
        self.timed(
            || op_work::host_copy(names::UPLOAD),
            || Ok(self.dev.copy_to_device(src, dvm(dst))?),
        )
    }

    fn download<T: Element>(&self, src: View<'_, DevBuf<D, T>>, dst: &mut [T]) -> Result<()> {
        self.timed(
            || op_work::host_copy(names::DOWNLOAD),
            || Ok(self.dev.copy_to_host(dv(src), dst)?),
        )
    }

    fn zero<T: Element>(&self, dst: ViewMut<'_, DevBuf<D, T>>) -> Result<()> {
        let len = dst.len();
        self.timed(
            || op_work::zero(len, size_of::<T>() as f64),
            || Ok(elementwise::fill(self.dev, dvm(dst), T::default())?),
        )
    }

    fn round_to_act(&self, src: F32View<'_, Self>, dst: ActMut<'_, Self>) -> Result<()> {
        let len = src.len();
        self.timed(
            || op_work::round_to_act(len, Self::ACT),
            || Ok(A::round_from_f32(self.dev, dv(src), dvm(dst))?),
        )
    }

    fn upload_tokens(&self, ids: &[u32], shape: TokenShape) -> Result<Tokens<D>> {
        Tokens::upload(self.dev, ids, shape).map_err(|e| Error::invalid(e.to_string()))
    }

    fn replace_tokens(&self, tokens: &mut Tokens<D>, ids: &[u32]) -> Result<()> {
        self.timed(
            || op_work::host_copy(names::TOKENS),
            || tokens.replace(self.dev, ids).map_err(|e| Error::invalid(e.to_string())),
        )
    }

    fn encoder_forward(
        &self,
        out: ActMut<'_, Self>,
        tokens: &Tokens<D>,
        wte: ActView<'_, Self>,
        wpe: ActView<'_, Self>,
        dims: Dims,
    ) -> Result<()> {
        self.timed(
            || op_work::encoder_forward(dims, Self::ACT, tokens.distinct()),
            || Ok(encoder::encoder_forward(self.dev, tokens, dv(wte), dv(wpe), dvm(out), dims.c)?),
        )
    }

    fn encoder_backward(
        &self,
        grads: ParamGrads<'_, Self>,
        dout: ActView<'_, Self>,
        tokens: &mut Tokens<D>,
        dims: Dims,
    ) -> Result<()> {
        let distinct = tokens.distinct();
        self.timed(
            || op_work::encoder_backward(dims, Self::ACT, distinct),
            || {
                assert_eq!(grads.write, GradWrite::Accumulate, "{ENCODER_ACCUMULATES}");
                let (dwte, dwpe) = weight_and_bias(grads)?;
                let dwpe = dwpe.expect("the encoder's grads name wpe as the bias");
                Ok(encoder::encoder_backward(self.dev, tokens, dv(dout), dwte, dwpe, dims.c)?)
            },
        )
    }

    fn layernorm_forward(
        &self,
        args: LayerNormForward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()> {
        self.timed(
            || op_work::layernorm_forward(rows, c, Self::ACT),
            || {
                let LayerNormForward { out, stats, inp, weight, bias } = args;
                let args = layernorm::LayerNormForward {
                    inp: dv(inp),
                    weight: dv(weight),
                    bias: dv(bias),
                    out: dvm(out),
                    stats: Some(LayerNormStats { mean: dvm(stats.mean), rstd: dvm(stats.rstd) }),
                };
                Ok(layernorm::layernorm_forward(self.dev, c, args)?)
            },
        )
    }

    fn residual_layernorm_forward(
        &self,
        args: ResidualLayerNormForward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()> {
        self.timed(
            || op_work::residual_layernorm_forward(rows, c, Self::ACT),
            || {
                let ResidualLayerNormForward { residual, inp1, inp2, out, stats, weight, bias } =
                    args;
                let args = layernorm::ResidualLayerNormForward {
                    inp1: dv(inp1),
                    inp2: dv(inp2),
                    residual: dvm(residual),
                    weight: dv(weight),
                    bias: dv(bias),
                    out: dvm(out),
                    stats: Some(LayerNormStats { mean: dvm(stats.mean), rstd: dvm(stats.rstd) }),
                };
                Ok(layernorm::residual_layernorm_forward(self.dev, c, args)?)
            },
        )
    }

    fn layernorm_backward(
        &self,
        args: LayerNormBackward<'_, Self>,
        rows: usize,
        c: usize,
    ) -> Result<()> {
        let colsum = args.grads.residual_bias.is_some();
        self.timed(
            || op_work::layernorm_backward(rows, c, Self::ACT, colsum),
            || {
                let LayerNormBackward { dinp, grads, dout, inp, weight, mean, rstd } = args;
                let beta = grads.write.beta();
                assert!(grads.pre_act_bias.is_none(), "only a matmul backward fuses GELU's");
                let GradWindows { weight: dweight, bias: dbias, residual_bias, .. } =
                    grad_windows(grads)?;
                let dbias = dbias.expect("layernorm gradients have a bias");
                let len = layernorm::layernorm_backward_scratch_len(rows, c, colsum);
                self.with_scratch(0, len, "layernorm backward scratch", |_, scratch| {
                    let args = layernorm::LayerNormBackward {
                        dout: dv(dout),
                        inp: dv(inp),
                        weight: dv(weight),
                        mean: dv(mean),
                        rstd: dv(rstd),
                        dinp: dvm(dinp),
                        dweight,
                        dbias,
                        dinp_sum: residual_bias,
                        beta,
                        scratch,
                    };
                    Ok(layernorm::layernorm_backward(self.dev, c, args)?)
                })
            },
        )
    }

    /// On `wgmma` in TF32 (the Hopper forward GEMMs), the input and the weight are first rounded
    /// to TF32 into scratch, timed as their own op: wgmma would truncate them, where the
    /// mma.sync kernels (any GPU before Hopper, the weight gradients) round to nearest.
    fn matmul_forward(&self, args: MatmulForward<'_, Self>, shape: Linear) -> Result<()> {
        let (bias, gelu) = (args.bias.is_some(), args.gelu());
        let MatmulForward { out, inp, weight, bias: bias_view, activation } = args;
        let spec =
            GemmSpec::linear_forward(shape.rows, shape.out, shape.inp, self.gemm_precision());
        let spec = self.on_engine(GemmSpec { ldc: shape.out_ld, ..spec });
        let (inp, weight) = (dv(inp), dv(weight));
        let run = |inp: DeviceView<'_, A>, weight: DeviceView<'_, A>| {
            self.timed(
                || op_work::matmul_forward(shape, Self::ACT, bias, gelu),
                || {
                    let (mut out, mut activation) = (out, activation);
                    let epilogue = match (bias, gelu) {
                        (true, true) => "bias, GELU",
                        (true, false) => "bias",
                        (false, true) => "GELU",
                        (false, false) => "none",
                    };
                    let op = || names::matmul("forward", shape);
                    self.tuned_gemm(spec, op, epilogue, |spec| {
                        let activation = match &mut activation {
                            super::ops::Activation::None => gemm::Activation::None,
                            super::ops::Activation::Gelu { pre_act } => {
                                gemm::Activation::Gelu { pre_act: Some(dvm(pre_act.reborrow())) }
                            }
                        };
                        let bias = bias_view.clone().map(dv);
                        let epilogue = Epilogue { bias, activation, col_sums: None };
                        let out = dvm(out.reborrow());
                        self.gemm_result(gemm::gemm::<D, A, A>(
                            self.dev, spec, inp, weight, out, epilogue,
                        ))
                    })
                },
            )
        };
        if !spec.truncates_tf32_operands(self.dev.ptx_arch()) {
            return run(inp, weight);
        }
        self.with_tf32_operands(
            (inp.len(), weight.len()),
            |inp_tf32, weight_tf32| {
                A::round_tf32(self.dev, inp, inp_tf32)?;
                A::round_tf32(self.dev, weight, weight_tf32)
            },
            run,
        )
    }

    /// The input gradient (GELU backward fused), the weight gradient and the bias gradient,
    /// each timed as its own op.
    fn matmul_backward(&self, args: MatmulBackward<'_, Self>, shape: Linear) -> Result<()> {
        let MatmulBackward { dinp, grads, dout, inp, weight, gelu_pre_act } = args;
        let beta = grads.write.beta();
        assert!(grads.residual_bias.is_none(), "only a layernorm backward sums its dinp");
        let GradWindows { weight: dweight, bias: dbias, mut pre_act_bias, .. } =
            grad_windows(grads)?;
        let Linear { rows, inp: in_features, out: out_features, .. } = shape;
        let precision = self.gemm_precision();
        let dout = dv(dout);
        let gelu = gelu_pre_act.is_some();
        assert!(gelu || pre_act_bias.is_none(), "a pre-activation bias needs the GELU backward");
        let pre_act = gelu_pre_act.map(dv);
        let (weight, mut dinp) = (dv(weight), dvm(dinp));
        let input_gradient =
            |spec: GemmSpec,
             dout: DeviceView<'_, A>,
             weight: DeviceView<'_, A>,
             mut dinp: DeviceViewMut<'_, A>,
             mut col_sums: Option<DeviceViewMut<'_, f32>>| {
                self.timed(
                    || op_work::matmul_backward_input(shape, Self::ACT, gelu),
                    || {
                        let epilogue = match (gelu, col_sums.is_some()) {
                            (true, true) => "GELU backward, column sums",
                            (true, false) => "GELU backward",
                            (false, _) => "none",
                        };
                        let op = || names::matmul_backward(shape, "dX");
                        self.tuned_gemm(spec, op, epilogue, |spec| {
                            let activation = match pre_act {
                                Some(pre_act) => gemm::Activation::DGelu { pre_act },
                                None => gemm::Activation::None,
                            };
                            let col_sums = col_sums.as_mut().map(|sums| sums.reborrow());
                            let epilogue = Epilogue { bias: None, activation, col_sums };
                            self.gemm_result(gemm::gemm::<D, A, A>(
                                self.dev,
                                spec,
                                dout,
                                weight,
                                dinp.reborrow(),
                                epilogue,
                            ))
                        })
                    },
                )
            };
        // `dout`'s rows are `out_ld` apart (the classifier's logits; else dense).
        let out_ld = shape.out_ld;
        let transposed = GemmSpec::linear_forward(rows, in_features, out_features, precision);
        let transposed = self.on_engine(GemmSpec { lda: out_ld, ..transposed });
        let on_wgmma = self.tf32_input_gradient_on_wgmma(&transposed, shape);
        if on_wgmma && shape.lm_head {
            // The classifier stored `dout` rounded: only the weight is transposed (and rounded).
            self.with_tf32_operands(
                (0, weight.len()),
                |_, weight_t| {
                    A::transpose_tf32(self.dev, weight, (out_features, in_features), weight_t)
                },
                |_, weight| input_gradient(transposed, dout, weight, dinp.reborrow(), None),
            )?;
        } else if on_wgmma {
            self.with_tf32_operands(
                (dout.len(), weight.len()),
                |dout_tf32, weight_t| {
                    A::round_tf32(self.dev, dout, dout_tf32)?;
                    A::transpose_tf32(self.dev, weight, (out_features, in_features), weight_t)
                },
                |dout, weight| input_gradient(transposed, dout, weight, dinp.reborrow(), None),
            )?;
        } else {
            let spec = GemmSpec::linear_backward_input(rows, in_features, out_features, precision);
            let spec = self.on_engine(GemmSpec { lda: out_ld, ..spec });
            // The 16-bit GEMMs' epilogue writes dinp's column sums as it stores dinp (TF32
            // keeps the two passes, so that its gradients stay the same bits on both engines).
            let sixteen_bit = matches!(precision, gemm::Precision::Bf16 | gemm::Precision::Fp16);
            let fused_bias = if sixteen_bit { pre_act_bias.take() } else { None };
            match fused_bias {
                Some(dbias) => {
                    let len = gemm::col_sums_len(1, rows, in_features);
                    self.with_scratch(0, len, "column sums", |_, mut sums| {
                        input_gradient(spec, dout, weight, dinp.reborrow(), Some(sums.reborrow()))?;
                        self.timed(
                            || op_work::matmul_backward_pre_act_bias(shape, Self::ACT, true),
                            || {
                                let groups = gemm::col_sum_groups(1, rows);
                                let sums = sums.as_view();
                                let db = gemm::bias_grad_from_col_sums(
                                    self.dev, sums, groups, dbias, beta,
                                );
                                Ok(db?)
                            },
                        )
                    })?;
                }
                None => input_gradient(spec, dout, weight, dinp.reborrow(), None)?,
            }
        }
        if let Some(dbias) = pre_act_bias {
            // FP32 and TF32: from dinp, in two passes.
            self.timed(
                || op_work::matmul_backward_pre_act_bias(shape, Self::ACT, false),
                || self.bias_grad(dinp.as_view(), rows, dbias, beta),
            )?;
        }
        self.timed(
            || op_work::matmul_backward_weight(shape, Self::ACT),
            || {
                let spec =
                    GemmSpec::linear_backward_weight(rows, in_features, out_features, precision);
                let spec = self
                    .gemm
                    .apply_weight_grad(GemmSpec { lda: out_ld, beta, ..spec })
                    .with_split_k_for(self.multiprocessors, self.dev.ptx_arch());
                // Tuned only where unsplit (`tuned_candidates`): split, tail-split and stream-K
                // plans add partial sums, which change the bits.
                let op = || names::matmul_backward(shape, "dW");
                let (inp, mut dweight) = (dv(inp), dweight);
                self.with_scratch(0, spec.workspace_len(), "split-K workspace", |_, mut ws| {
                    self.tuned_gemm(spec, op, "none", |spec| {
                        self.gemm_result(gemm::gemm_split_k::<D, A, f32>(
                            self.dev,
                            spec,
                            dout,
                            inp,
                            dweight.reborrow(),
                            Epilogue::default(),
                            ws.reborrow(),
                        ))
                    })
                })
            },
        )?;
        if let Some(dbias) = dbias {
            assert_eq!(out_ld, out_features, "a layer with a bias stores its output densely");
            self.timed(
                || op_work::matmul_backward_bias(shape, Self::ACT),
                || self.bias_grad(dout, rows, dbias, beta),
            )?;
        }
        Ok(())
    }

    fn attention_forward(&self, args: AttentionForward<'_, Self>, dims: Dims) -> Result<()> {
        let flash = matches!(args.saved, AttentionSaved::Lse(_));
        self.timed(
            || op_work::attention_forward(dims, Self::ACT, flash),
            || {
                let AttentionForward { out, saved, qkv } = args;
                let shape = attention_shape(dims);
                match saved {
                    AttentionSaved::Probs(att) => {
                        let len = attention::attention_forward_scratch_len(shape);
                        self.with_scratch(len, 0, "attention scratch", |scratch, _| {
                            let args = attention::AttentionForward {
                                qkv: dv(qkv),
                                out: dvm(out),
                                att: dvm(att),
                                scratch,
                            };
                            let done =
                                attention::attention_forward(self.dev, shape, self.gemm, args);
                            self.gemm_result(done)
                        })
                    }
                    AttentionSaved::Lse(lse) => {
                        let args = FlashForward { qkv: dv(qkv), out: dvm(out), lse: dvm(lse) };
                        A::flash_forward(self.dev, shape, self.gemm.engine, args)
                    }
                }
            },
        )
    }

    fn attention_backward(&self, args: AttentionBackward<'_, Self>, dims: Dims) -> Result<()> {
        let AttentionBackward { dqkv, dout, qkv, out, saved, qkv_bias } = args;
        let shape = attention_shape(dims);
        let lse = match saved {
            AttentionSavedView::Probs(att) => {
                assert!(qkv_bias.is_none(), "only flash attention writes qkv's bias gradient");
                return self.timed(
                    || op_work::attention_backward(dims, Self::ACT, false),
                    || {
                        let len = attention::attention_backward_scratch_len(shape);
                        self.with_scratch(len, 0, "attention scratch", |scratch, _| {
                            let args = attention::AttentionBackward {
                                dout: dv(dout),
                                qkv: dv(qkv),
                                att: dv(att),
                                dqkv: dvm(dqkv),
                                scratch,
                            };
                            let done =
                                attention::attention_backward(self.dev, shape, self.gemm, args);
                            self.gemm_result(done)
                        })
                    },
                );
            }
            AttentionSavedView::Lse(lse) => lse,
        };
        // The kernels also write dqkv's column sums when qkv's bias gradient is wanted.
        let d_len = dims.b * dims.nh * dims.t;
        let sums_len = if qkv_bias.is_some() { flash::col_sums_len(shape) } else { 0 };
        self.with_scratch(0, d_len + sums_len, "flash attention scratch", |_, scratch| {
            let (d_scratch, mut sums) = scratch.split_at_mut(d_len)?;
            self.timed(
                || op_work::attention_backward(dims, Self::ACT, true),
                || {
                    let args = FlashBackward {
                        qkv: dv(qkv),
                        out: dv(out),
                        dout: dv(dout),
                        lse: dv(lse),
                        d_scratch,
                        dqkv: dvm(dqkv),
                        col_sums: qkv_bias.is_some().then(|| sums.reborrow()),
                    };
                    A::flash_backward(self.dev, shape, self.gemm.engine, args)
                },
            )?;
            let Some(qkv_bias) = qkv_bias else { return Ok(()) };
            self.timed(
                || op_work::qkv_bias_from_col_sums(dims),
                || {
                    let groups = flash::col_sum_groups(shape);
                    let sums = sums.as_view();
                    let GradWindow { grad, write } = qkv_bias;
                    let db = dvm(grad);
                    let beta = write.beta();
                    Ok(gemm::bias_grad_from_col_sums(self.dev, sums, groups, db, beta)?)
                },
            )
        })
    }

    fn gelu_forward(&self, out: ActMut<'_, Self>, inp: ActView<'_, Self>) -> Result<()> {
        let len = out.len();
        self.timed(
            || op_work::gelu_forward(len, Self::ACT),
            || Ok(gelu::gelu_forward(self.dev, dv(inp), dvm(out))?),
        )
    }

    fn gelu_backward(
        &self,
        dinp: ActMut<'_, Self>,
        inp: ActView<'_, Self>,
        dout: ActView<'_, Self>,
    ) -> Result<()> {
        let len = dinp.len();
        self.timed(
            || op_work::gelu_backward(len, Self::ACT),
            || Ok(gelu::gelu_backward(self.dev, dv(inp), dv(dout), dvm(dinp))?),
        )
    }

    fn residual_forward(
        &self,
        out: ActMut<'_, Self>,
        inp1: ActView<'_, Self>,
        inp2: ActView<'_, Self>,
    ) -> Result<()> {
        let len = out.len();
        self.timed(
            || op_work::residual_forward(len, Self::ACT),
            || Ok(elementwise::add(self.dev, dv(inp1), dv(inp2), dvm(out))?),
        )
    }

    fn fused_classifier(&self, args: Classifier<'_, Self>, dims: Dims) -> Result<()> {
        let gradient = args.dloss.is_some();
        self.timed(
            || op_work::classifier(dims, Self::ACT, gradient),
            || {
                let Classifier { logits, losses, targets, dloss } = args;
                let gradient = match dloss {
                    Some(dloss) if self.rounds_logits_gradient() => {
                        LogitsGradient::WriteTf32 { dloss }
                    }
                    Some(dloss) => LogitsGradient::Write { dloss },
                    None => LogitsGradient::Skip,
                };
                let args = classifier::Classifier {
                    logits: dvm(logits),
                    losses: dvm(losses),
                    targets: targets.ids(),
                };
                let vocab = Vocab { v: dims.v, vp: dims.vp, ld: dims.logits_ld };
                let path = self.classifier;
                Ok(classifier::fused_classifier_on(self.dev, path, vocab, gradient, args)?)
            },
        )
    }

    fn grad_norm(&self, grads: F32View<'_, Self>) -> Result<GradNorm> {
        let len = grads.len();
        self.timed(
            || op_work::grad_norm(len),
            || {
                let mut scratch = self.scratch.borrow_mut();
                let scratch = &mut *scratch;
                grad_norm::grad_norm(
                    self.dev,
                    dv(grads),
                    scratch.norm_workspace.view_mut(),
                    scratch.norm_out.view_mut(),
                )?;
                let mut out = [0.0f32; 2];
                self.dev.copy_to_host(scratch.norm_out.view(), &mut out)?;
                Ok(GradNorm { norm: out[0], nonfinite: out[1] != 0.0 })
            },
        )
    }

    fn adamw_table(&self, tensors: &[ArenaTensor], arena_len: usize) -> Result<AdamWTable<D>> {
        let mut entries = Vec::with_capacity(tensors.len());
        for e in tensors {
            let len = u32::try_from(e.len).map_err(|_| {
                Error::invalid(format!("a parameter tensor of {} elements is too large", e.len))
            })?;
            entries.push(AdamWTensor {
                offset: e.offset as u64,
                len,
                weight_decay: e.weight_decay,
            });
        }
        Ok(AdamWTable::new(self.dev, &entries, arena_len)?)
    }

    fn adamw(
        &self,
        args: AdamWArgs<'_, Self>,
        table: &AdamWTable<D>,
        hyper: &AdamWHyper,
    ) -> Result<()> {
        let (len, working) = (args.params.len(), args.working.is_some().then_some(Self::ACT));
        self.timed(
            || op_work::adamw(len, working),
            || {
                let AdamWArgs { params, grads, m, v, working } = args;
                let rounding = match hyper.rounding {
                    WorkingRounding::NearestEven => adamw::WorkingRounding::NearestEven,
                    WorkingRounding::Stochastic { seed } => {
                        adamw::WorkingRounding::Stochastic { seed }
                    }
                };
                let gpu_hyper = adamw::AdamWHyper {
                    lr: hyper.lr,
                    beta1: hyper.beta1,
                    beta2: hyper.beta2,
                    eps: hyper.eps,
                    t: hyper.t,
                    grad_scale: hyper.grad_scale,
                    rounding,
                };
                let bufs = AdamWBuffers {
                    params: dvm(params),
                    grads: dv(grads),
                    m: dvm(m),
                    v: dvm(v),
                    working: working.map(dvm),
                };
                Ok(A::adamw(self.dev, table, bufs, &gpu_hyper)?)
            },
        )
    }
}
