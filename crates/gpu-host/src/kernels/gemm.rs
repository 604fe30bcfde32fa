//! GEMM launchers: [`gemm`] (every matmul of GPT-2 training, see `kernel_abi::gemm` for the
//! exact semantics), [`gemm_split_k`] (the same with K split over more blocks, for outputs too
//! small to fill the GPU) and [`bias_grad`] (column sums for bias gradients).
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
//! [`GemmSpec::engine`] picks the instructions of the tensor-core variants: the `mma.sync`
//! kernels above (any GPU, every layout and batch), or on a runtime that loaded the sm_90a
//! module ([`Device::ptx_arch`]) the Hopper kernels (`kernel_abi::gemm_wgmma`: TMA loads,
//! `wgmma`, a persistent warp-specialised grid) in every layout for BF16 and FP16 and the
//! forward layout (A row-major, B column-major) for TF32, with K ≥ 1, 16-byte aligned A, B,
//! rows of A and B and batches of A and B, and batches that do not overlap.
//! [`GemmEngine::Auto`] (the default) takes the Hopper kernel where it applies and falls back to
//! `mma.sync` elsewhere; FP32 always runs on the SIMT cores. See [`GemmSpec::engine_on`].

use super::gemm_wgmma;
use crate::device::{Device, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::ptx::PtxArch;
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::gemm::{
    ACT_DGELU, ACT_GELU, ACT_NONE, BF16_BF16, BF16_F32, BIAS_GRAD_BF16, BIAS_GRAD_BF16_F32,
    BIAS_GRAD_F16, BIAS_GRAD_F16_F32, BIAS_GRAD_F32, BiasGradParams, F16_F16, F16_F32, GemmKernels,
    GemmParams, SIMT_F32, SPLIT_REDUCE_BF16, SPLIT_REDUCE_F16, SPLIT_REDUCE_F32,
    SPLIT_REDUCE_THREADS, TF32_F32, bias_grad as bg, simt, tc,
};
use kernel_abi::gemm_wgmma::{
    WGMMA_BF16_BF16, WGMMA_BF16_F32, WGMMA_F16_F16, WGMMA_F16_F32, WGMMA_N256_BF16_BF16,
    WGMMA_N256_BF16_F32, WGMMA_N256_F16_F16, WGMMA_N256_F16_F32, WGMMA_N256_TF32_F32,
    WGMMA_PP_BF16_BF16, WGMMA_PP_BF16_F32, WGMMA_PP_F16_F16, WGMMA_PP_F16_F32, WGMMA_PP_TF32_F32,
    WGMMA_TF32_F32, WgmmaKernel, WgmmaKernels, wg,
};
use kernel_abi::{DevicePtr, DevicePtrMut, Kernel};

pub use kernel_abi::gemm::Layout;

/// The matmul precision of a training mode (the project's speed ladder).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 inputs, FP32 FMA on the SIMT cores.
    Fp32,
    /// f32 inputs rounded to TF32 (nearest, ties away), tensor cores, f32 accumulation.
    Tf32,
    /// bf16 inputs, tensor cores, f32 accumulation.
    Bf16,
    /// f16 inputs, tensor cores, f32 accumulation.
    Fp16,
}

/// Which tensor-core instructions multiply (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum GemmEngine {
    /// The Hopper kernel where it applies (see [`GemmSpec::engine_on`]), else `mma.sync`.
    #[default]
    Auto,
    /// The `mma.sync` kernels (the sm_80 family; the SIMT kernel for FP32).
    MmaSync,
    /// The Hopper `wgmma` kernel; a GEMM it cannot run is an [`GpuError::InvalidArgument`]
    /// (argument `engine`) saying why.
    Wgmma,
}

/// The block tile of the Hopper kernel ([`GemmSpec::wgmma_tile`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WgmmaTile {
    /// 128 × 256 where there is such an entry (A row-major: the forward and `dX` GEMMs),
    /// nothing is split over K and its tiles still give every SM at least one; else 128 × 128.
    #[default]
    Auto,
    /// 128 × 128 (every entry).
    N128,
    /// 128 × 256; a GEMM without such an entry is an [`GpuError::InvalidArgument`]
    /// (argument `wgmma_tile`).
    N256,
    /// Ping-pong 128 × 128: each consumer warpgroup multiplies whole tiles, in turns with the
    /// other, so one's epilogue overlaps the other's wgmmas (entries for the layouts of
    /// `N256`; without one, an [`GpuError::InvalidArgument`]). `Auto` never picks it yet: the
    /// GEMM benchmark times it beside the others, so that a GPU run can decide where it wins.
    PingPong,
}

impl WgmmaTile {
    /// The kernel geometry of this tile (`Auto` stands for 128 × 128, the tile every entry
    /// has; `gemm_wgmma::tile_for` decides what it runs).
    pub(super) fn geometry(self) -> wg::Tile {
        match self {
            WgmmaTile::Auto | WgmmaTile::N128 => wg::N128,
            WgmmaTile::N256 => wg::N256,
            WgmmaTile::PingPong => wg::PINGPONG,
        }
    }
}

/// How the GEMMs of a model or a composite op run: their precision, engine and Hopper tile
/// (the trainer's `--precision`, `--gemm-engine`, `--wgmma-tile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// The arithmetic.
    pub precision: Precision,
    /// Which instructions multiply.
    pub engine: GemmEngine,
    /// The Hopper kernel's block tile, a preference: see [`GemmConfig::apply`].
    pub wgmma_tile: WgmmaTile,
}

impl From<Precision> for GemmConfig {
    /// `precision` with the default engine and tile (`Auto`).
    fn from(precision: Precision) -> Self {
        Self { precision, engine: GemmEngine::Auto, wgmma_tile: WgmmaTile::Auto }
    }
}

impl GemmConfig {
    /// `spec` in this precision, engine and tile, where a 128 × 256 or ping-pong tile asked
    /// for a GEMM without such an entry (the weight gradients) falls back to 128 × 128 instead
    /// of failing.
    pub fn apply(&self, spec: GemmSpec) -> GemmSpec {
        let spec = GemmSpec { precision: self.precision, engine: self.engine, ..spec };
        let wgmma_tile = match self.wgmma_tile {
            tile @ (WgmmaTile::N256 | WgmmaTile::PingPong) if !spec.has_wgmma_entry(tile) => {
                WgmmaTile::N128
            }
            tile => tile,
        };
        GemmSpec { wgmma_tile, ..spec }
    }
}

/// Shape, layouts, strides and scalars of one (batched) GEMM: `A` is M×K, `B` is K×N, `C` is
/// M×N row-major; batch `z` of a matrix starts `z · stride` elements after batch 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GemmSpec {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Number of products (1..=65535).
    pub batch: usize,
    /// Storage of A.
    pub a_layout: Layout,
    /// Storage of B.
    pub b_layout: Layout,
    /// Leading dimension of A (≥ K row-major, ≥ M column-major).
    pub lda: usize,
    /// Leading dimension of B (≥ N row-major, ≥ K column-major).
    pub ldb: usize,
    /// Leading dimension of C and of the pre-activation (≥ N).
    pub ldc: usize,
    /// Batch stride of A (0 broadcasts A).
    pub stride_a: usize,
    /// Batch stride of B (0 broadcasts B).
    pub stride_b: usize,
    /// Batch stride of C and of the pre-activation (batches must not overlap).
    pub stride_c: usize,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the previous C (0: C is write-only and may hold anything).
    pub beta: f32,
    /// Which variant multiplies.
    pub precision: Precision,
    /// Split K into this many slices (1: no split-K; see [`gemm_split_k`]).
    pub split_k: usize,
    /// Which instructions multiply ([`GemmEngine::Auto`] unless set).
    pub engine: GemmEngine,
    /// The Hopper kernel's block tile, when it runs ([`WgmmaTile::Auto`] unless set).
    pub wgmma_tile: WgmmaTile,
}

impl GemmSpec {
    /// A single dense GEMM: leading dimensions equal to the stored row lengths, batch 1,
    /// `alpha = 1`, `beta = 0`.
    pub fn new(
        m: usize,
        n: usize,
        k: usize,
        a_layout: Layout,
        b_layout: Layout,
        precision: Precision,
    ) -> Self {
        let lda = if a_layout == Layout::RowMajor { k } else { m };
        let ldb = if b_layout == Layout::RowMajor { n } else { k };
        Self {
            m,
            n,
            k,
            batch: 1,
            a_layout,
            b_layout,
            lda,
            ldb,
            ldc: n,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
            alpha: 1.0,
            beta: 0.0,
            precision,
            split_k: 1,
            engine: GemmEngine::Auto,
            wgmma_tile: WgmmaTile::Auto,
        }
    }

    /// `nn.Linear` forward `Y (M×N) = X (M×K) · Wᵀ`, with `W` stored (N, K).
    pub fn linear_forward(m: usize, n: usize, k: usize, precision: Precision) -> Self {
        Self::new(m, n, k, Layout::RowMajor, Layout::ColMajor, precision)
    }

    /// `nn.Linear` input gradient `dX (M×K) = dY (M×N) · W (N×K)`: returns the spec of a GEMM
    /// with M = rows, N = in-features, K = out-features.
    pub fn linear_backward_input(
        rows: usize,
        in_features: usize,
        out_features: usize,
        precision: Precision,
    ) -> Self {
        Self::new(rows, in_features, out_features, Layout::RowMajor, Layout::RowMajor, precision)
    }

    /// `nn.Linear` weight gradient `dW (out×in) += dYᵀ · X` over `rows` rows: M = out-features,
    /// N = in-features, K = rows, A = dY read column-major, `beta = 1` (accumulate).
    pub fn linear_backward_weight(
        rows: usize,
        in_features: usize,
        out_features: usize,
        precision: Precision,
    ) -> Self {
        let mut spec = Self::new(
            out_features,
            in_features,
            rows,
            Layout::ColMajor,
            Layout::RowMajor,
            precision,
        );
        spec.beta = 1.0;
        spec
    }

    /// Multiply-adds × 2 of the whole batch.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64 * self.batch as f64
    }

    /// Elements A must have (0 when nothing is read).
    pub fn a_len(&self) -> usize {
        let (rows, cols) = match self.a_layout {
            Layout::RowMajor => (self.m, self.k),
            Layout::ColMajor => (self.k, self.m),
        };
        extent(self.batch, self.stride_a, rows, cols, self.lda)
    }

    /// Elements B must have (0 when nothing is read).
    pub fn b_len(&self) -> usize {
        let (rows, cols) = match self.b_layout {
            Layout::RowMajor => (self.k, self.n),
            Layout::ColMajor => (self.n, self.k),
        };
        extent(self.batch, self.stride_b, rows, cols, self.ldb)
    }

    /// Elements C (and the pre-activation) must have.
    pub fn c_len(&self) -> usize {
        extent(self.batch, self.stride_c, self.m, self.n, self.ldc)
    }

    /// [`GemmSpec::block_k_for`] the engine this spec names ([`GemmEngine::Auto`]: the
    /// `mma.sync` / SIMT kernel's).
    pub fn block_k(&self) -> usize {
        self.block_k_for(self.engine)
    }

    /// K per pipeline step of the variant on `engine`: `mma.sync` / SIMT (also for `Auto`):
    /// 8 FP32, 16 TF32, 32 BF16/FP16; `wgmma`: one 128-byte swizzle row, 32 TF32 (and FP32,
    /// which it does not run), 64 BF16/FP16.
    pub fn block_k_for(&self, engine: GemmEngine) -> usize {
        let bytes = match engine {
            GemmEngine::Wgmma => wg::BK_BYTES,
            GemmEngine::Auto | GemmEngine::MmaSync => tc::BK_BYTES,
        };
        match self.precision {
            Precision::Fp32 if engine != GemmEngine::Wgmma => simt::BK as usize,
            Precision::Fp32 | Precision::Tf32 => (bytes / 4) as usize,
            Precision::Bf16 | Precision::Fp16 => (bytes / 2) as usize,
        }
    }

    /// [`GemmSpec::split_plan_for`] the engine this spec names ([`GemmEngine::Auto`]: the
    /// `mma.sync` / SIMT kernel's, which may differ from what `Auto` launches on a Hopper
    /// runtime; see [`GemmSpec::engine_on`]).
    pub fn split_plan(&self) -> (usize, usize) {
        self.split_plan_for(self.engine)
    }

    /// (slices, K steps per slice) launched for `split_k` on `engine` (steps of
    /// [`GemmSpec::block_k_for`] that engine): every slice gets the same whole number of K
    /// steps except the last, and none is empty.
    pub fn split_plan_for(&self, engine: GemmEngine) -> (usize, usize) {
        let steps = self.k.div_ceil(self.block_k_for(engine));
        if self.split_k <= 1 || steps <= 1 {
            return (1, steps);
        }
        let per_slice = steps.div_ceil(self.split_k);
        (steps.div_ceil(per_slice), per_slice)
    }

    /// f32 elements of split-K workspace [`gemm_split_k`] needs (0 without split-K): the most
    /// any engine this spec may run on needs (under [`GemmEngine::Auto`], both, since the
    /// choice depends on the runtime and the operands).
    pub fn workspace_len(&self) -> usize {
        self.candidate_engines().iter().map(|&e| self.workspace_len_for(e)).max().unwrap_or(0)
    }

    /// The workspace of [`GemmSpec::split_plan_for`] `engine`.
    fn workspace_len_for(&self, engine: GemmEngine) -> usize {
        match self.split_plan_for(engine) {
            (1, _) => 0,
            (slices, _) => {
                [slices, self.m, self.n].iter().fold(self.batch, |a, &b| a.saturating_mul(b))
            }
        }
    }

    /// The most K slices any engine this spec may run on launches.
    fn max_slices(&self) -> usize {
        self.candidate_engines().iter().map(|&e| self.split_plan_for(e).0).max().unwrap_or(1)
    }

    /// The engines [`GemmSpec::engine_on`] may resolve this spec to, whatever the runtime and
    /// operand addresses (resolved engines only: `MmaSync`, `Wgmma`).
    fn candidate_engines(&self) -> &'static [GemmEngine] {
        match self.engine {
            GemmEngine::MmaSync => &[GemmEngine::MmaSync],
            GemmEngine::Wgmma => &[GemmEngine::Wgmma],
            GemmEngine::Auto if gemm_wgmma::shape_reason(self).is_none() => {
                &[GemmEngine::MmaSync, GemmEngine::Wgmma]
            }
            GemmEngine::Auto => &[GemmEngine::MmaSync],
        }
    }

    /// The engine [`gemm`] and [`gemm_split_k`] run this spec with on `dev`, for A and B at
    /// device addresses `a_addr` and `b_addr`: `MmaSync` or `Wgmma`, never `Auto`.
    ///
    /// `Wgmma` applies when `dev` loaded the sm_90a module, the precision is BF16 or FP16 (any
    /// layouts) or TF32 (A row-major and B column-major), `K ≥ 1`, both addresses are 16-byte
    /// aligned and so are the rows (`lda · size` and `ldb · size` multiples of 16 bytes) and, with
    /// `batch > 1`, the batches of A and B (`stride · size` multiples of 16 bytes, at least one
    /// matrix apart). `Auto` resolves to `Wgmma` when it applies and to `MmaSync` otherwise; an
    /// explicit `Wgmma` that does not apply is an [`GpuError::InvalidArgument`] (argument `engine`)
    /// giving the first reason; `MmaSync` stays `MmaSync`.
    pub fn engine_on<D: Device>(&self, dev: &D, a_addr: u64, b_addr: u64) -> Result<GemmEngine> {
        self.engine_for_arch(dev.ptx_arch(), a_addr, b_addr)
    }

    /// [`GemmSpec::engine_on`] a runtime that loaded the `arch` module.
    fn engine_for_arch(&self, arch: PtxArch, a_addr: u64, b_addr: u64) -> Result<GemmEngine> {
        let why_not = gemm_wgmma::unsupported_reason(arch, self, a_addr, b_addr);
        match (self.engine, why_not) {
            (GemmEngine::MmaSync, _) | (GemmEngine::Auto, Some(_)) => Ok(GemmEngine::MmaSync),
            (GemmEngine::Auto | GemmEngine::Wgmma, None) => Ok(GemmEngine::Wgmma),
            (GemmEngine::Wgmma, Some(reason)) => {
                Err(invalid("engine", format!("the wgmma kernel cannot run this GEMM: {reason}")))
            }
        }
    }

    /// Picks `split_k` for a GPU with `multiprocessors` SMs whose runtime loaded the `arch`
    /// module, for the engine this spec will most likely run on there (what
    /// [`GemmSpec::engine_on`] resolves to for aligned operands): when the output tiles fill
    /// less than half of the blocks the GPU runs at once (2 per SM for `mma.sync` / SIMT, 1 per
    /// SM for the persistent wgmma kernel), split K so that the slices fill about one wave,
    /// keeping at least 8 K steps (of that engine) per slice and at most 16 slices. A
    /// heuristic, not a tuner: it targets the GPT-2 weight gradients (768×768 output,
    /// K = B·T).
    pub fn with_split_k_for(mut self, multiprocessors: usize, arch: PtxArch) -> Self {
        let engine = self.likely_engine(arch);
        let (bm, bn, per_sm) = match (engine, self.precision) {
            (GemmEngine::Wgmma, _) => (wg::BM, wg::N128.bn, 1),
            (_, Precision::Fp32) => (simt::BM, simt::BN, 2),
            _ => (tc::BM, tc::BN, 2),
        };
        let tiles = self.m.div_ceil(bm as usize) * self.n.div_ceil(bn as usize) * self.batch;
        let resident = per_sm * multiprocessors;
        let steps = self.k.div_ceil(self.block_k_for(engine));
        self.split_k = if tiles == 0 || 2 * tiles > resident {
            1
        } else {
            (resident / tiles).min(steps / 8).clamp(1, 16)
        };
        self
    }

    /// Whether the Hopper kernel has an entry of `tile` for this precision and these layouts
    /// (`Auto` stands for 128 × 128): 128 × 128 for BF16 and FP16 in every layout and TF32
    /// with A row-major and B column-major; 128 × 256 and ping-pong for A row-major (the
    /// forward and `dX` GEMMs) in BF16 and FP16, and TF32's one layout.
    pub fn has_wgmma_entry(&self, tile: WgmmaTile) -> bool {
        let (a, b) = (self.a_layout, self.b_layout);
        let tile = tile.geometry();
        fn has<I: Copy + 'static, O: Copy + 'static>(
            family: Option<WgmmaKernels<I, O>>,
            (a, b): (Layout, Layout),
        ) -> bool {
            family.is_some_and(|family| family.get(a, b).is_some())
        }
        // Every output type has the same entries: the f32-output families stand for them.
        let p = self.precision;
        match p {
            Precision::Fp32 => false,
            Precision::Tf32 => has(<f32 as GemmTypes<f32>>::wgmma_kernels(p, tile), (a, b)),
            Precision::Bf16 => has(<bf16 as GemmTypes<f32>>::wgmma_kernels(p, tile), (a, b)),
            Precision::Fp16 => has(<f16 as GemmTypes<f32>>::wgmma_kernels(p, tile), (a, b)),
        }
    }

    /// The engine [`GemmSpec::engine_on`] resolves to on a runtime with the `arch` module for
    /// aligned operands (a forced engine that cannot run stays itself; the launch reports it).
    fn likely_engine(&self, arch: PtxArch) -> GemmEngine {
        self.engine_for_arch(arch, 0, 0).unwrap_or(self.engine)
    }
}

/// Elements spanned by `batch` matrices of `rows` stored rows of `cols` elements `ld` apart.
fn extent(batch: usize, stride: usize, rows: usize, cols: usize, ld: usize) -> usize {
    if batch == 0 || rows == 0 || cols == 0 {
        return 0;
    }
    (batch - 1) * stride + (rows - 1) * ld + cols
}

/// The activation of the epilogue, with its pre-activation matrix (same `ldc` and
/// `stride_c` as C, output element type).
#[derive(Debug)]
pub enum Activation<'a, O> {
    /// `C = v`.
    None,
    /// `C = gelu(v)` (tanh approximation), storing `v` to `pre_act` when given.
    Gelu {
        /// Receives the pre-activation, for the backward pass.
        pre_act: Option<DeviceViewMut<'a, O>>,
    },
    /// `C = v · gelu'(pre_act)`: the GELU backward fused into `dX = dY · W`.
    DGelu {
        /// The forward pre-activation.
        pre_act: DeviceView<'a, O>,
    },
}

/// Everything after the product: `v = alpha·A·B + beta·C + bias`, then the activation.
#[derive(Debug)]
pub struct Epilogue<'a, O> {
    /// Added to every row (length ≥ N), or none.
    pub bias: Option<DeviceView<'a, O>>,
    /// Applied to `v`.
    pub activation: Activation<'a, O>,
}

impl<O> Default for Epilogue<'_, O> {
    /// No bias, no activation.
    fn default() -> Self {
        Self { bias: None, activation: Activation::None }
    }
}

/// Output element types: f32, bf16, f16.
pub trait GemmOutput: DeviceElement {
    /// The split-K reduction into this type.
    const SPLIT_REDUCE: Kernel<GemmParams<f32, Self::Abi>>;
}

impl GemmOutput for f32 {
    const SPLIT_REDUCE: Kernel<GemmParams<f32, f32>> = SPLIT_REDUCE_F32;
}
impl GemmOutput for bf16 {
    const SPLIT_REDUCE: Kernel<GemmParams<f32, kernel_abi::Bf16>> = SPLIT_REDUCE_BF16;
}
impl GemmOutput for f16 {
    const SPLIT_REDUCE: Kernel<GemmParams<f32, kernel_abi::F16>> = SPLIT_REDUCE_F16;
}

/// Input element types and the output types their variants produce: `f32 → f32` (FP32 and
/// TF32), `bf16 → bf16 | f32`, `f16 → f16 | f32`.
pub trait GemmTypes<O: GemmOutput>: DeviceElement {
    /// The precision modes that take this input type.
    const PRECISIONS: &'static [Precision];
    /// The entry points of `precision`, if it takes these types.
    fn kernels(precision: Precision) -> Option<GemmKernels<Self::Abi, O::Abi>>;
    /// The Hopper (`wgmma`) entries of `precision` with block tiles `tile` (`wg::N128` or
    /// `wg::N256`), if it takes these types.
    fn wgmma_kernels(
        precision: Precision,
        tile: wg::Tile,
    ) -> Option<WgmmaKernels<Self::Abi, O::Abi>>;
}

/// The wgmma family of `tile`: `narrow` for `wg::N128`, `wide` for `wg::N256`, `pingpong`
/// for `wg::PINGPONG`.
fn by_tile<K>(tile: wg::Tile, narrow: K, wide: K, pingpong: K) -> Option<K> {
    match tile {
        t if t == wg::N128 => Some(narrow),
        t if t == wg::N256 => Some(wide),
        t if t == wg::PINGPONG => Some(pingpong),
        _ => None,
    }
}

impl GemmTypes<f32> for f32 {
    const PRECISIONS: &'static [Precision] = &[Precision::Fp32, Precision::Tf32];
    fn kernels(precision: Precision) -> Option<GemmKernels<f32, f32>> {
        match precision {
            Precision::Fp32 => Some(SIMT_F32),
            Precision::Tf32 => Some(TF32_F32),
            _ => None,
        }
    }
    fn wgmma_kernels(precision: Precision, tile: wg::Tile) -> Option<WgmmaKernels<f32, f32>> {
        by_tile(tile, WGMMA_TF32_F32, WGMMA_N256_TF32_F32, WGMMA_PP_TF32_F32)
            .filter(|_| precision == Precision::Tf32)
    }
}

macro_rules! half_gemm_types {
    ($in:ty, $precision:ident, $same:ident, $wide:ident, [$($wg_same:ident)*], [$($wg_wide:ident)*]) => {
        impl GemmTypes<$in> for $in {
            const PRECISIONS: &'static [Precision] = &[Precision::$precision];
            fn kernels(
                precision: Precision,
            ) -> Option<GemmKernels<<$in as DeviceElement>::Abi, <$in as DeviceElement>::Abi>> {
                (precision == Precision::$precision).then_some($same)
            }
            fn wgmma_kernels(
                precision: Precision,
                tile: wg::Tile,
            ) -> Option<WgmmaKernels<<$in as DeviceElement>::Abi, <$in as DeviceElement>::Abi>>
            {
                by_tile(tile, $($wg_same),*).filter(|_| precision == Precision::$precision)
            }
        }

        impl GemmTypes<f32> for $in {
            const PRECISIONS: &'static [Precision] = &[Precision::$precision];
            fn kernels(
                precision: Precision,
            ) -> Option<GemmKernels<<$in as DeviceElement>::Abi, f32>> {
                (precision == Precision::$precision).then_some($wide)
            }
            fn wgmma_kernels(
                precision: Precision,
                tile: wg::Tile,
            ) -> Option<WgmmaKernels<<$in as DeviceElement>::Abi, f32>> {
                by_tile(tile, $($wg_wide),*).filter(|_| precision == Precision::$precision)
            }
        }
    };
}

half_gemm_types!(bf16, Bf16, BF16_BF16, BF16_F32,
    [WGMMA_BF16_BF16 WGMMA_N256_BF16_BF16 WGMMA_PP_BF16_BF16],
    [WGMMA_BF16_F32 WGMMA_N256_BF16_F32 WGMMA_PP_BF16_F32]);
half_gemm_types!(f16, Fp16, F16_F16, F16_F32,
    [WGMMA_F16_F16 WGMMA_N256_F16_F16 WGMMA_PP_F16_F16],
    [WGMMA_F16_F32 WGMMA_N256_F16_F32 WGMMA_PP_F16_F32]);

const OP: &str = "gemm";

pub(super) fn invalid(arg: &'static str, reason: impl Into<String>) -> GpuError {
    GpuError::invalid(OP, arg, reason)
}

pub(super) fn to_u32(arg: &'static str, value: usize) -> Result<u32> {
    u32::try_from(value).map_err(|_| invalid(arg, format!("{value} does not fit in 32 bits")))
}

fn check_ld(arg: &'static str, ld: usize, min: usize, what: &str) -> Result<()> {
    if ld < min.max(1) {
        return Err(invalid(arg, format!("{ld} is smaller than {what} ({min})")));
    }
    Ok(())
}

fn check_covers(arg: &'static str, len: usize, needed: usize) -> Result<()> {
    if len < needed {
        return Err(invalid(
            arg,
            format!(
                "has {len} elements, the shape, leading dimension and batch stride need {needed}"
            ),
        ));
    }
    Ok(())
}

/// Checks the shape, leading dimensions and batch of `spec` (not the views).
fn validate(spec: &GemmSpec) -> Result<()> {
    let rows_cols = |layout, r, c| if layout == Layout::RowMajor { c } else { r };
    check_ld(
        "lda",
        spec.lda,
        rows_cols(spec.a_layout, spec.m, spec.k),
        "the stored row length of A",
    )?;
    check_ld(
        "ldb",
        spec.ldb,
        rows_cols(spec.b_layout, spec.k, spec.n),
        "the stored row length of B",
    )?;
    check_ld("ldc", spec.ldc, spec.n, "N")?;
    if spec.batch == 0 || spec.batch > 65_535 {
        return Err(invalid("batch", format!("{} is not in 1..=65535", spec.batch)));
    }
    if spec.batch > 1 && spec.m > 0 && spec.n > 0 {
        let matrix = (spec.m - 1) * spec.ldc + spec.n;
        if spec.stride_c < matrix {
            return Err(invalid(
                "stride_c",
                format!(
                    "{} makes batches of C overlap (each spans {matrix} elements)",
                    spec.stride_c
                ),
            ));
        }
    }
    for (arg, value) in [
        ("m", spec.m),
        ("n", spec.n),
        ("k", spec.k),
        ("lda", spec.lda),
        ("ldb", spec.ldb),
        ("ldc", spec.ldc),
    ] {
        to_u32(arg, value)?;
    }
    Ok(())
}

/// `C = act(alpha · op(A) · op(B) + beta · C + bias)` on every batch (see the module docs and
/// `kernel_abi::gemm`), with the variant of `spec.precision` on the engine of
/// [`GemmSpec::engine_on`], in one pass (`spec.split_k` must not split K; see
/// [`gemm_split_k`]).
///
/// Errors (`GpuError::InvalidArgument`, before anything is launched): a precision that does not
/// take these element types, leading dimensions smaller than the stored rows, a batch count
/// outside 1..=65535, overlapping batches of C, a view shorter than the shape needs (bias:
/// N), a dimension that does not fit in 32 bits, a `split_k` that splits K on some engine the
/// spec may run on, or [`GemmEngine::Wgmma`] where it does not apply (argument `engine`).
pub fn gemm<D: Device, I: GemmTypes<O>, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    a: DeviceView<'_, I>,
    b: DeviceView<'_, I>,
    c: DeviceViewMut<'_, O>,
    epilogue: Epilogue<'_, O>,
) -> Result<()> {
    if spec.max_slices() > 1 {
        return Err(invalid(
            "split_k",
            format!("{} needs an f32 workspace: call gemm_split_k", spec.split_k),
        ));
    }
    launch(dev, spec, a, b, c, epilogue, None)
}

/// [`gemm`] with K split into `spec.split_k` slices: the first launch writes each slice's f32
/// partial products to `workspace` (at least [`GemmSpec::workspace_len`] elements), a second
/// sums the slices in order (deterministic) and applies the epilogue. For outputs with few
/// tiles and a long K (see [`GemmSpec::with_split_k_for`]). With `split_k == 1` it is [`gemm`]
/// and the workspace is unused. The slices are those of [`GemmSpec::split_plan_for`] the
/// engine that runs (the `wgmma` kernel steps through K in larger tiles, so it may launch
/// fewer slices than `mma.sync` for the same `split_k`).
pub fn gemm_split_k<D: Device, I: GemmTypes<O>, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    a: DeviceView<'_, I>,
    b: DeviceView<'_, I>,
    c: DeviceViewMut<'_, O>,
    epilogue: Epilogue<'_, O>,
    workspace: DeviceViewMut<'_, f32>,
) -> Result<()> {
    validate(spec)?;
    check_covers("workspace", workspace.len(), spec.workspace_len())?;
    launch(dev, spec, a, b, c, epilogue, Some(workspace))
}

/// Validates, picks the engine and launches (both passes when split).
fn launch<D: Device, I: GemmTypes<O>, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    a: DeviceView<'_, I>,
    b: DeviceView<'_, I>,
    mut c: DeviceViewMut<'_, O>,
    epilogue: Epilogue<'_, O>,
    workspace: Option<DeviceViewMut<'_, f32>>,
) -> Result<()> {
    let kernels = I::kernels(spec.precision).ok_or_else(|| {
        invalid(
            "precision",
            format!(
                "{:?} does not multiply {} into {} (this input type takes {:?})",
                spec.precision,
                I::NAME,
                O::NAME,
                I::PRECISIONS
            ),
        )
    })?;
    validate(spec)?;
    check_covers("a", a.len(), spec.a_len())?;
    check_covers("b", b.len(), spec.b_len())?;
    check_covers("c", c.len(), spec.c_len())?;
    let bias = match epilogue.bias {
        Some(bias) => {
            check_covers("bias", bias.len(), spec.n)?;
            bias.ptr()
        }
        None => DevicePtr::null(),
    };
    let (activation, pre_act_store, pre_act_load) = match epilogue.activation {
        Activation::None => (ACT_NONE, DevicePtrMut::null(), DevicePtr::null()),
        Activation::Gelu { pre_act: None } => (ACT_GELU, DevicePtrMut::null(), DevicePtr::null()),
        Activation::Gelu { pre_act: Some(mut pre) } => {
            check_covers("pre_act", pre.len(), spec.c_len())?;
            (ACT_GELU, pre.ptr(), DevicePtr::null())
        }
        Activation::DGelu { pre_act } => {
            check_covers("pre_act", pre_act.len(), spec.c_len())?;
            (ACT_DGELU, DevicePtrMut::null(), pre_act.ptr())
        }
    };
    let engine = spec.engine_on(dev, a.addr(), b.addr())?;
    if spec.m == 0 || spec.n == 0 {
        return Ok(());
    }
    let wgmma = match engine {
        GemmEngine::Wgmma => Some(wgmma_entry::<I, O>(spec, dev.multiprocessors())?),
        GemmEngine::Auto | GemmEngine::MmaSync => None,
    };
    let (bm, bn) = match (wgmma, spec.precision) {
        (Some((tile, _)), _) => (wg::BM, tile.bn),
        (None, Precision::Fp32) => (simt::BM, simt::BN),
        (None, _) => (tc::BM, tc::BN),
    };
    let tiles_m = spec.m.div_ceil(bm as usize);
    let tiles_n = spec.n.div_ceil(bn as usize);
    let blocks = to_u32("m", tiles_m * tiles_n)?;
    let (slices, steps_per_slice) = spec.split_plan_for(engine);
    if slices > 65_535 {
        return Err(invalid("split_k", format!("{slices} slices exceed the grid's 65535")));
    }
    let workspace = match (slices, workspace) {
        (1, _) => DevicePtrMut::null(),
        (_, Some(mut w)) => {
            check_covers("workspace", w.len(), spec.workspace_len_for(engine))?;
            w.ptr()
        }
        (_, None) => return Err(invalid("split_k", "a split launch needs a workspace")),
    };
    let params = GemmParams {
        a: a.ptr(),
        b: b.ptr(),
        c: c.ptr(),
        bias,
        pre_act_store,
        pre_act_load,
        workspace,
        stride_a: spec.stride_a as u64,
        stride_b: spec.stride_b as u64,
        stride_c: spec.stride_c as u64,
        m: spec.m as u32,
        n: spec.n as u32,
        k: spec.k as u32,
        lda: spec.lda as u32,
        ldb: spec.ldb as u32,
        ldc: spec.ldc as u32,
        alpha: spec.alpha,
        beta: spec.beta,
        activation,
        tiles_m: tiles_m as u32,
        tiles_n: tiles_n as u32,
        split_k: slices as u32,
        k_tiles_per_split: steps_per_slice as u32,
    };
    if let Some((tile, kernel)) = wgmma {
        // SAFETY: as for the mma.sync launch below (same views, shape and workspace checks);
        // `engine_on` established the wgmma preconditions (K ≥ 1, batches 16-byte aligned and
        // disjoint, layouts the precision's wgmma reads, 16-byte aligned operands and rows).
        unsafe { gemm_wgmma::launch(dev, spec, (tile, kernel), params) }?;
    } else {
        let (threads, smem) = match spec.precision {
            Precision::Fp32 => (simt::THREADS, simt::SMEM_BYTES),
            _ => (tc::THREADS, tc::SMEM_BYTES),
        };
        let config = LaunchConfig {
            grid: (blocks, slices as u32, spec.batch as u32),
            block: (threads, 1, 1),
            shared_mem_bytes: smem,
        };
        let kernel = kernels.get(spec.a_layout, spec.b_layout);
        // SAFETY: every view covers the elements the kernel reads or writes for this shape,
        // leading dimensions and batch strides (checked above); batches of C do not overlap;
        // the bias covers N; C and a stored pre-activation are distinct mutable borrows; a
        // split launch has a workspace of batch · slices · M · N f32 (checked above); the
        // grid, block and shared memory are the kernel family's.
        unsafe { dev.launch(kernel, config, params) }?;
    }
    if slices == 1 {
        return Ok(());
    }
    split_reduce::<D, I::Abi, O>(dev, spec, &params)
}

/// A Hopper entry and the block tile it was built for.
type TiledWgmma<I, O> = (wg::Tile, WgmmaKernel<I, O>);

/// The Hopper kernel's tile and entry for `spec` on a GPU with `sms` SMs
/// ([`gemm_wgmma::tile_for`]).
fn wgmma_entry<I: GemmTypes<O>, O: GemmOutput>(
    spec: &GemmSpec,
    sms: u32,
) -> Result<TiledWgmma<I::Abi, O::Abi>> {
    let entry = |tile| {
        I::wgmma_kernels(spec.precision, tile)
            .and_then(|family| family.get(spec.a_layout, spec.b_layout))
    };
    let tile = gemm_wgmma::tile_for(spec, sms)?;
    let kernel = entry(tile).ok_or_else(|| {
        invalid(
            "engine",
            format!(
                "{:?} has no wgmma kernel for A {:?}, B {:?}",
                spec.precision, spec.a_layout, spec.b_layout
            ),
        )
    })?;
    Ok((tile, kernel))
}

/// The second pass of a split launch: sums the slices `params.workspace` holds into C and
/// applies the epilogue (the same for every engine).
fn split_reduce<D: Device, I: Copy + 'static, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    params: &GemmParams<I, O::Abi>,
) -> Result<()> {
    let runs = spec.m * spec.n.div_ceil(8);
    let reduce_blocks = to_u32("m", runs.div_ceil(SPLIT_REDUCE_THREADS as usize))?;
    let reduce = GemmParams {
        a: DevicePtr::null(),
        b: DevicePtr::null(),
        c: params.c,
        bias: params.bias,
        pre_act_store: params.pre_act_store,
        pre_act_load: params.pre_act_load,
        workspace: params.workspace,
        stride_a: 0,
        stride_b: 0,
        stride_c: params.stride_c,
        m: params.m,
        n: params.n,
        k: params.k,
        lda: 0,
        ldb: 0,
        ldc: params.ldc,
        alpha: params.alpha,
        beta: params.beta,
        activation: params.activation,
        tiles_m: params.tiles_m,
        tiles_n: params.tiles_n,
        split_k: params.split_k,
        k_tiles_per_split: params.k_tiles_per_split,
    };
    let config = LaunchConfig {
        grid: (reduce_blocks, 1, spec.batch as u32),
        block: (SPLIT_REDUCE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `params` is the first pass's, whose checks cover C, the pre-activation and the
    // bias; the reduction reads the workspace the first pass wrote (same stream, so in order)
    // and writes C and the pre-activation exactly as the one-pass epilogue does.
    unsafe { dev.launch(O::SPLIT_REDUCE, config, reduce) }
}

/// Element types of [`bias_grad`]: `dy` of `Self`, sums written as `O`: `f32 → f32`,
/// `bf16 → bf16 | f32`, `f16 → f16 | f32` (sums are f32 in every case).
pub trait BiasGradElement<O: DeviceElement>: DeviceElement {
    /// The kernel of this pair of types.
    const KERNEL: Kernel<BiasGradParams<Self::Abi, O::Abi>>;
}

impl BiasGradElement<f32> for f32 {
    const KERNEL: Kernel<BiasGradParams<f32, f32>> = BIAS_GRAD_F32;
}
impl BiasGradElement<bf16> for bf16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::Bf16, kernel_abi::Bf16>> = BIAS_GRAD_BF16;
}
impl BiasGradElement<f16> for f16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::F16, kernel_abi::F16>> = BIAS_GRAD_F16;
}
impl BiasGradElement<f32> for bf16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::Bf16, f32>> = BIAS_GRAD_BF16_F32;
}
impl BiasGradElement<f32> for f16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::F16, f32>> = BIAS_GRAD_F16_F32;
}

/// `db[n] = beta · db[n] + Σ_{m < rows} dy[m · ld + n]` for `n < db.len()`: the bias gradient of
/// a linear layer from its output gradient `dy` (rows × N, row-major, leading dimension `ld`).
/// f32 sums in a fixed order (deterministic), rounded once.
pub fn bias_grad<D: Device, T: BiasGradElement<O>, O: DeviceElement>(
    dev: &D,
    dy: DeviceView<'_, T>,
    rows: usize,
    ld: usize,
    mut db: DeviceViewMut<'_, O>,
    beta: f32,
) -> Result<()> {
    const OP: &str = "bias_grad";
    let n = db.len();
    if ld < n.max(1) {
        return Err(GpuError::invalid(OP, "ld", format!("{ld} is smaller than N = {n}")));
    }
    let needed = if rows == 0 || n == 0 { 0 } else { (rows - 1) * ld + n };
    if dy.len() < needed {
        return Err(GpuError::invalid(
            OP,
            "dy",
            format!(
                "has {} elements, rows × N with leading dimension {ld} need {needed}",
                dy.len()
            ),
        ));
    }
    for (arg, value) in [("rows", rows), ("ld", ld), ("db", n)] {
        u32::try_from(value)
            .map_err(|_| GpuError::invalid(OP, arg, format!("{value} does not fit in 32 bits")))?;
    }
    if n == 0 {
        return Ok(());
    }
    let params = BiasGradParams {
        dy: dy.ptr(),
        db: db.ptr(),
        m: rows as u32,
        n: n as u32,
        ld: ld as u32,
        beta,
    };
    let config = LaunchConfig {
        grid: (n.div_ceil(bg::COLS as usize) as u32, 1, 1),
        block: (bg::THREADS, 1, 1),
        shared_mem_bytes: bg::THREADS / 32 * bg::COLS * 4,
    };
    // SAFETY: `dy` covers rows × N with leading dimension ld, `db` has N elements; the launch
    // geometry is the kernel's.
    unsafe { dev.launch(T::KERNEL, config, params) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tensor_map::{TensorMapDesc, TensorMapElem, TensorMapLayers, TensorMapSwizzle};

    #[test]
    fn extents_follow_layout_ld_and_batch() {
        let mut s = GemmSpec::new(3, 5, 7, Layout::ColMajor, Layout::RowMajor, Precision::Bf16);
        assert_eq!((s.a_len(), s.b_len(), s.c_len()), (21, 35, 15));
        s.lda = 4;
        s.batch = 2;
        s.stride_a = 100;
        s.stride_c = 15;
        assert_eq!(s.a_len(), 100 + 6 * 4 + 3);
        assert_eq!(s.c_len(), 30);
        s.k = 0;
        assert_eq!(s.a_len(), 0);
    }

    #[test]
    fn linear_helpers_pick_gpt2_layouts() {
        let f = GemmSpec::linear_forward(16384, 2304, 768, Precision::Bf16);
        assert_eq!((f.a_layout, f.b_layout, f.ldb), (Layout::RowMajor, Layout::ColMajor, 768));
        let dx = GemmSpec::linear_backward_input(16384, 768, 2304, Precision::Bf16);
        assert_eq!((dx.m, dx.n, dx.k, dx.ldb), (16384, 768, 2304, 768));
        let dw = GemmSpec::linear_backward_weight(16384, 768, 2304, Precision::Bf16);
        assert_eq!((dw.m, dw.n, dw.k, dw.lda, dw.beta), (2304, 768, 16384, 2304, 1.0));
        assert_eq!(f.flops(), 2.0 * 16384.0 * 2304.0 * 768.0);
    }

    #[test]
    fn validation_names_the_argument() {
        let mut s = GemmSpec::new(4, 4, 4, Layout::RowMajor, Layout::RowMajor, Precision::Fp32);
        s.lda = 3;
        assert!(matches!(validate(&s), Err(GpuError::InvalidArgument { arg: "lda", .. })));
        s.lda = 4;
        s.batch = 2;
        s.stride_c = 10;
        assert!(matches!(validate(&s), Err(GpuError::InvalidArgument { arg: "stride_c", .. })));
        s.stride_c = 16;
        assert!(validate(&s).is_ok());
        s.batch = 70_000;
        assert!(matches!(validate(&s), Err(GpuError::InvalidArgument { arg: "batch", .. })));
    }

    #[test]
    fn split_plans_have_no_empty_slices() {
        let mut s =
            GemmSpec::new(100, 100, 300, Layout::RowMajor, Layout::RowMajor, Precision::Bf16);
        assert_eq!(s.block_k(), 32);
        for (split, plan) in [(1, (1, 10)), (3, (3, 4)), (4, (4, 3)), (64, (10, 1))] {
            s.split_k = split;
            assert_eq!(s.split_plan(), plan, "split_k = {split}");
        }
        assert_eq!(s.workspace_len(), 10 * 100 * 100);
        s.k = 0;
        assert_eq!((s.split_plan(), s.workspace_len()), ((1, 0), 0));
    }

    #[test]
    fn split_heuristic_targets_small_outputs_with_long_k() {
        let dw = |out, inp| GemmSpec::linear_backward_weight(16384, inp, out, Precision::Bf16);
        let a100 = |s: GemmSpec| s.with_split_k_for(108, PtxArch::Sm80).split_k;
        let h100 = |s: GemmSpec| s.with_split_k_for(132, PtxArch::Sm90a).split_k;
        // mma.sync, 2 blocks per SM: 216 resident blocks over 36, 108 and 144 tiles.
        assert_eq!((a100(dw(768, 768)), a100(dw(2304, 768)), a100(dw(3072, 768))), (6, 2, 1));
        // wgmma, 1 persistent block per SM: 132 over 36 tiles; 108 already fill most SMs.
        assert_eq!((h100(dw(768, 768)), h100(dw(2304, 768))), (3, 1));
        let forced_mma = GemmSpec { engine: GemmEngine::MmaSync, ..dw(768, 768) };
        assert_eq!(h100(forced_mma), 7);
        let fwd = GemmSpec::linear_forward(16384, 768, 768, Precision::Bf16);
        assert_eq!((a100(fwd), h100(fwd)), (1, 1));
        let short =
            GemmSpec::new(128, 128, 64, Layout::RowMajor, Layout::RowMajor, Precision::Fp32);
        assert_eq!(a100(short), 1);
    }

    #[test]
    fn precisions_map_to_families() {
        assert_eq!(
            <f32 as GemmTypes<f32>>::kernels(Precision::Tf32).unwrap().rc.name(),
            "gemm_tf32_rc_f32"
        );
        assert!(<f32 as GemmTypes<f32>>::kernels(Precision::Bf16).is_none());
        assert_eq!(
            <bf16 as GemmTypes<f32>>::kernels(Precision::Bf16).unwrap().cr.name(),
            "gemm_bf16_cr_f32"
        );
        assert!(<f16 as GemmTypes<f16>>::kernels(Precision::Bf16).is_none());
    }

    #[test]
    fn block_k_and_split_plan_follow_the_engine() {
        let mut s = GemmSpec::linear_forward(128, 128, 320, Precision::Bf16);
        assert_eq!(s.block_k_for(GemmEngine::MmaSync), 32);
        assert_eq!(s.block_k_for(GemmEngine::Wgmma), 64);
        assert_eq!(s.block_k(), 32, "Auto plans with the mma.sync tile");
        s.precision = Precision::Tf32;
        assert_eq!(
            (s.block_k_for(GemmEngine::MmaSync), s.block_k_for(GemmEngine::Wgmma)),
            (16, 32)
        );
        s.precision = Precision::Bf16;
        s.split_k = 4;
        // 10 mma.sync steps → 4 slices of 3; 5 wgmma steps → 3 slices of 2.
        assert_eq!(s.split_plan_for(GemmEngine::MmaSync), (4, 3));
        assert_eq!(s.split_plan_for(GemmEngine::Wgmma), (3, 2));
        assert_eq!(s.workspace_len(), 4 * 128 * 128, "Auto: the larger of the two");
        let forced = GemmSpec { engine: GemmEngine::Wgmma, ..s };
        assert_eq!((forced.split_plan(), forced.workspace_len()), ((3, 2), 3 * 128 * 128));
        let fp32 = GemmSpec { precision: Precision::Fp32, ..s };
        assert_eq!(fp32.workspace_len(), fp32.workspace_len_for(GemmEngine::MmaSync));
    }

    mod engines {
        use super::*;
        use crate::device::DeviceBuffer;
        use crate::mock::{Launched, MockDevice};
        use kernel_abi::gemm_wgmma::{TensorMap, WgmmaGemmParams, wg};
        use kernel_abi::{Bf16, F16};

        /// Runs `gemm_split_k` of `spec` (bf16 → bf16) on `dev` with operands `offset`
        /// elements into their buffers; returns the launches.
        fn run_bf16(
            dev: &MockDevice,
            spec: &GemmSpec,
            offset: usize,
            workspace: usize,
        ) -> Result<Vec<Launched>> {
            let a = dev.alloc::<bf16>(spec.a_len() + offset)?;
            let b = dev.alloc::<bf16>(spec.b_len() + offset)?;
            let mut c = dev.alloc::<bf16>(spec.c_len())?;
            let mut w = dev.alloc::<f32>(workspace)?;
            let (a, b) = (a.view().slice(offset..a.len())?, b.view().slice(offset..b.len())?);
            gemm_split_k(dev, spec, a, b, c.view_mut(), Epilogue::default(), w.view_mut())?;
            Ok(dev.take_launches())
        }

        #[test]
        fn auto_on_sm_80_runs_mma_sync() {
            let dev = MockDevice::new(PtxArch::Sm80, 132);
            let spec = GemmSpec::linear_forward(300, 200, 72, Precision::Bf16);
            assert_eq!(spec.engine_on(&dev, 0, 0).unwrap(), GemmEngine::MmaSync);
            let launches = run_bf16(&dev, &spec, 0, 0).unwrap();
            assert_eq!(launches.len(), 1);
            assert_eq!(launches[0].name, "gemm_bf16_rc_bf16");
            assert_eq!(launches[0].config.grid, (3 * 2, 1, 1));
            assert_eq!(launches[0].config.block, (tc::THREADS, 1, 1));
        }

        #[test]
        fn wgmma_forced_on_sm_80_names_the_reason() {
            let dev = MockDevice::new(PtxArch::Sm80, 132);
            let spec = GemmSpec {
                engine: GemmEngine::Wgmma,
                ..GemmSpec::linear_forward(300, 200, 72, Precision::Bf16)
            };
            let err = run_bf16(&dev, &spec, 0, 0).unwrap_err();
            assert!(
                matches!(&err, GpuError::InvalidArgument { op: "gemm", arg: "engine", .. }),
                "{err}"
            );
            assert!(err.to_string().contains("sm_80") && err.to_string().contains("sm_90a"));
            assert!(dev.take_launches().is_empty());
        }

        #[test]
        fn auto_on_sm_90a_runs_wgmma_with_tensor_maps() {
            let dev = MockDevice::new(PtxArch::Sm90a, 4);
            let spec =
                GemmSpec { lda: 80, ..GemmSpec::linear_forward(300, 200, 72, Precision::Bf16) };
            let launches = run_bf16(&dev, &spec, 0, 0).unwrap();
            assert_eq!(launches.len(), 1);
            let l = &launches[0];
            assert_eq!(l.name, "gemm_wgmma_bf16_rc_bf16");
            // 3 × 2 tiles, 1 slice = 6 units on min(6, 4 SMs) blocks.
            assert_eq!(l.config.grid, (4, 1, 1));
            assert_eq!(l.config.block, (wg::THREADS, 1, 1));
            assert_eq!(l.config.shared_mem_bytes, wg::N128.smem_bytes());
            let p = l.params::<WgmmaGemmParams<Bf16, Bf16>>();
            assert_eq!(p.units, 6);
            assert_eq!((p.gemm.tiles_m, p.gemm.tiles_n, p.gemm.split_k), (3, 2, 1));
            assert_eq!((p.gemm.k_tiles_per_split, p.gemm.lda, p.gemm.ldb), (2, 80, 72));
            assert_eq!(p.tmap_b.addr(), p.tmap_a.addr() + 128);
            assert!(p.tmap_a.is_aligned_to(64));
            let desc_a = TensorMapDesc {
                global_address: p.gemm.a.addr(),
                elem: TensorMapElem::Bf16,
                dims: [72, 300],
                row_stride_bytes: 160,
                box_dims: [64, 128],
                swizzle: TensorMapSwizzle::B128,
                layers: Some(TensorMapLayers { count: 1, stride_bytes: 300 * 160 }),
            };
            let desc_b = TensorMapDesc {
                global_address: p.gemm.b.addr(),
                dims: [72, 200],
                row_stride_bytes: 144,
                layers: Some(TensorMapLayers { count: 1, stride_bytes: 200 * 144 }),
                ..desc_a
            };
            let uploaded = dev.read(p.tmap_a.addr(), 2 * size_of::<TensorMap>());
            assert_eq!(uploaded[..128], MockDevice::encode(&desc_a).bytes);
            assert_eq!(uploaded[128..], MockDevice::encode(&desc_b).bytes);
            // Many units: still one block per SM; 8 × 4 tiles of 128 × 256 fill the 4 SMs.
            let big = GemmSpec::linear_forward(1024, 1024, 64, Precision::Bf16);
            let launches = run_bf16(&dev, &big, 0, 0).unwrap();
            let l = &launches[0];
            assert_eq!((l.name, l.config.grid), ("gemm_wgmma_n256_bf16_rc_bf16", (4, 1, 1)));
            assert_eq!(l.config.shared_mem_bytes, wg::N256.smem_bytes());
            let p = l.params::<WgmmaGemmParams<Bf16, Bf16>>();
            assert_eq!((p.units, p.gemm.tiles_n), (32, 4));
            let b = dev.read(p.tmap_b.addr(), size_of::<TensorMap>());
            let desc_b = TensorMapDesc {
                global_address: p.gemm.b.addr(),
                dims: [64, 1024],
                row_stride_bytes: 128,
                box_dims: [64, 256],
                layers: Some(TensorMapLayers { count: 1, stride_bytes: 1024 * 128 }),
                ..desc_a
            };
            assert_eq!(b, MockDevice::encode(&desc_b).bytes);
        }

        #[test]
        fn a_gemm_config_prefers_its_tile_where_there_is_one() {
            let config = GemmConfig {
                precision: Precision::Fp16,
                engine: GemmEngine::Wgmma,
                wgmma_tile: WgmmaTile::N256,
            };
            let fwd = config.apply(GemmSpec::linear_forward(64, 64, 64, Precision::Bf16));
            assert_eq!((fwd.precision, fwd.engine), (Precision::Fp16, GemmEngine::Wgmma));
            assert_eq!(fwd.wgmma_tile, WgmmaTile::N256);
            let dw = config.apply(GemmSpec::linear_backward_weight(64, 64, 64, Precision::Fp16));
            assert_eq!((dw.wgmma_tile, dw.beta), (WgmmaTile::N128, 1.0));
            let auto = GemmConfig::from(Precision::Bf16).apply(dw);
            assert_eq!((auto.engine, auto.wgmma_tile), (GemmEngine::Auto, WgmmaTile::Auto));
            let pingpong = GemmConfig { wgmma_tile: WgmmaTile::PingPong, ..config };
            let dx = GemmSpec::linear_backward_input(64, 64, 64, Precision::Fp16);
            assert_eq!(pingpong.apply(dx).wgmma_tile, WgmmaTile::PingPong);
            assert_eq!(pingpong.apply(dw).wgmma_tile, WgmmaTile::N128);
            // Only a forced tile falls back: `Auto` stays itself even where wgmma has no entry.
            let tf32_dx = GemmSpec::linear_backward_input(64, 64, 64, Precision::Tf32);
            assert_eq!(
                GemmConfig::from(Precision::Tf32).apply(tf32_dx).wgmma_tile,
                WgmmaTile::Auto
            );
        }

        #[test]
        fn wide_entries_are_those_of_a_row_major() {
            let spec = |a_layout, b_layout, precision| GemmSpec {
                a_layout,
                b_layout,
                ..GemmSpec::linear_forward(64, 64, 64, precision)
            };
            let (r, c) = (Layout::RowMajor, Layout::ColMajor);
            for p in [Precision::Bf16, Precision::Fp16] {
                for tile in [WgmmaTile::N256, WgmmaTile::PingPong] {
                    let has = [(r, r), (r, c), (c, r), (c, c)]
                        .map(|(a, b)| spec(a, b, p).has_wgmma_entry(tile));
                    assert_eq!(has, [true, true, false, false], "{p:?} {tile:?}");
                }
                for tile in [WgmmaTile::Auto, WgmmaTile::N128] {
                    assert!(spec(c, r, p).has_wgmma_entry(tile), "{p:?} {tile:?}");
                }
            }
            for tile in [WgmmaTile::N128, WgmmaTile::N256, WgmmaTile::PingPong] {
                assert!(spec(r, c, Precision::Tf32).has_wgmma_entry(tile));
                assert!(!spec(r, r, Precision::Tf32).has_wgmma_entry(tile));
                assert!(!spec(r, c, Precision::Fp32).has_wgmma_entry(tile));
            }
        }

        #[test]
        fn the_wide_tile_needs_its_entry_whole_sms_and_no_split() {
            let dev = MockDevice::new(PtxArch::Sm90a, 16);
            let name = |spec: GemmSpec| run_bf16(&dev, &spec, 0, 1 << 20).map(|l| l[0].name);
            // 8 × 2 wide tiles fill 16 SMs; 8 × 1 do not.
            let fwd = |n| GemmSpec::linear_forward(1024, n, 64, Precision::Bf16);
            assert_eq!(name(fwd(512)).unwrap(), "gemm_wgmma_n256_bf16_rc_bf16");
            assert_eq!(name(fwd(256)).unwrap(), "gemm_wgmma_bf16_rc_bf16");
            // So do 2 batches of 8 × 1.
            let batched = GemmSpec {
                batch: 2,
                stride_a: 1024 * 64,
                stride_b: 256 * 64,
                stride_c: 1024 * 256,
                ..fwd(256)
            };
            assert_eq!(name(batched).unwrap(), "gemm_wgmma_n256_bf16_rc_bf16");
            // dX (rr) has the wide entry; dW (cr) does not.
            let dx = GemmSpec::linear_backward_input(1024, 512, 512, Precision::Bf16);
            assert_eq!(name(dx).unwrap(), "gemm_wgmma_n256_bf16_rr_bf16");
            let dw = GemmSpec::linear_backward_weight(1024, 512, 4096, Precision::Bf16);
            assert_eq!(name(dw).unwrap(), "gemm_wgmma_bf16_cr_bf16");
            // Split over K: narrow.
            let split = GemmSpec {
                split_k: 2,
                ..GemmSpec::linear_forward(1024, 512, 1024, Precision::Bf16)
            };
            assert_eq!(name(split).unwrap(), "gemm_wgmma_bf16_rc_bf16");
            // Forced.
            let narrow = GemmSpec { wgmma_tile: WgmmaTile::N128, ..fwd(512) };
            assert_eq!(name(narrow).unwrap(), "gemm_wgmma_bf16_rc_bf16");
            let wide = GemmSpec { wgmma_tile: WgmmaTile::N256, ..fwd(64) };
            assert_eq!(name(wide).unwrap(), "gemm_wgmma_n256_bf16_rc_bf16");
            let err = name(GemmSpec { wgmma_tile: WgmmaTile::N256, ..dw }).unwrap_err();
            assert!(matches!(&err, GpuError::InvalidArgument { arg: "wgmma_tile", .. }), "{err}");
            // Ping-pong: only forced, on the entries of the A row-major layouts.
            let pingpong = GemmSpec { wgmma_tile: WgmmaTile::PingPong, ..fwd(512) };
            assert_eq!(name(pingpong).unwrap(), "gemm_wgmma_pp_bf16_rc_bf16");
            let pingpong_dx = GemmSpec { wgmma_tile: WgmmaTile::PingPong, ..dx };
            assert_eq!(name(pingpong_dx).unwrap(), "gemm_wgmma_pp_bf16_rr_bf16");
            let err = name(GemmSpec { wgmma_tile: WgmmaTile::PingPong, ..dw }).unwrap_err();
            assert!(err.to_string().contains("ping-pong"), "{err}");
        }

        #[test]
        fn wgmma_uploads_the_tensor_maps_of_a_gemm_once() {
            let dev = MockDevice::new(PtxArch::Sm90a, 4);
            let spec = GemmSpec::linear_forward(300, 200, 72, Precision::Bf16);
            let a = dev.alloc::<bf16>(spec.a_len()).unwrap();
            let b = dev.alloc::<bf16>(spec.b_len()).unwrap();
            let mut c = dev.alloc::<bf16>(spec.c_len()).unwrap();
            let mut run = |spec: &GemmSpec| {
                gemm(&dev, spec, a.view(), b.view(), c.view_mut(), Epilogue::default()).unwrap();
                let launch = &dev.take_launches()[0];
                launch.params::<WgmmaGemmParams<Bf16, Bf16>>().tmap_a.addr()
            };
            let first = run(&spec);
            let allocations = dev.allocations();
            // The next training step: same buffers and shapes, nothing uploaded.
            assert_eq!(run(&spec), first);
            assert_eq!(dev.allocations(), allocations);
            // Another shape over the same buffers: its own maps.
            let other = GemmSpec::linear_forward(300, 100, 72, Precision::Bf16);
            assert_ne!(run(&other), first);
            assert_eq!(dev.allocations(), allocations + 1);
            assert_eq!(run(&spec), first);
        }

        #[test]
        fn auto_on_sm_90a_falls_back_where_wgmma_does_not_apply() {
            let dev = MockDevice::new(PtxArch::Sm90a, 132);
            let fwd = GemmSpec::linear_forward(64, 64, 64, Precision::Bf16);
            let batched =
                GemmSpec { batch: 2, stride_a: 4096, stride_b: 4096, stride_c: 4096, ..fwd };
            let cases = [
                (
                    "gemm_wgmma_bf16_rr_bf16",
                    GemmSpec::linear_backward_input(64, 64, 64, Precision::Bf16),
                ),
                (
                    "gemm_wgmma_bf16_cr_bf16",
                    GemmSpec::linear_backward_weight(64, 64, 64, Precision::Bf16),
                ),
                ("gemm_wgmma_bf16_rc_bf16", batched),
                // Batches of A overlapping by a row.
                ("gemm_bf16_rc_bf16", GemmSpec { stride_a: 4032, ..batched }),
                ("gemm_bf16_rc_bf16", GemmSpec { lda: 65, ..fwd }),
                ("gemm_bf16_rc_bf16", GemmSpec { k: 0, ..fwd }),
            ];
            for (want, spec) in cases {
                let launches = run_bf16(&dev, &spec, 0, 0).unwrap();
                assert_eq!(launches[0].name, want, "{spec:?}");
            }
            // One work unit per tile, slice and batch.
            let launches = run_bf16(&dev, &batched, 0, 0).unwrap();
            assert_eq!(launches[0].params::<WgmmaGemmParams<Bf16, Bf16>>().units, 2);
            // A view starting one element into its buffer: not 16-byte aligned.
            assert_eq!(run_bf16(&dev, &fwd, 1, 0).unwrap()[0].name, "gemm_bf16_rc_bf16");
            assert_eq!(run_bf16(&dev, &fwd, 8, 0).unwrap()[0].name, "gemm_wgmma_bf16_rc_bf16");
            let forced = GemmSpec { engine: GemmEngine::Wgmma, ..fwd };
            let err = run_bf16(&dev, &forced, 1, 0).unwrap_err().to_string();
            assert!(err.contains("`engine`") && err.contains("not 16-byte aligned"), "{err}");
            let mma = GemmSpec { engine: GemmEngine::MmaSync, ..fwd };
            assert_eq!(run_bf16(&dev, &mma, 0, 0).unwrap()[0].name, "gemm_bf16_rc_bf16");
        }

        #[test]
        fn fp32_and_the_other_types_pick_their_entries() {
            let dev = MockDevice::new(PtxArch::Sm90a, 132);
            let a = dev.alloc::<f32>(64 * 64).unwrap();
            let mut c = dev.alloc::<f32>(64 * 64).unwrap();
            for (precision, want) in
                [(Precision::Fp32, "gemm_simt_rc_f32"), (Precision::Tf32, "gemm_wgmma_tf32_rc_f32")]
            {
                let spec = GemmSpec::linear_forward(64, 64, 64, precision);
                let e = Epilogue::default();
                gemm(&dev, &spec, a.view(), a.view(), c.view_mut(), e).unwrap();
                assert_eq!(dev.take_launches()[0].name, want);
            }
            let forced = GemmSpec {
                engine: GemmEngine::Wgmma,
                ..GemmSpec::linear_forward(64, 64, 64, Precision::Fp32)
            };
            let err = gemm(&dev, &forced, a.view(), a.view(), c.view_mut(), Epilogue::default())
                .unwrap_err();
            assert!(err.to_string().contains("FP32"), "{err}");
            let h = dev.alloc::<f16>(64 * 64).unwrap();
            let spec = GemmSpec::linear_forward(64, 64, 64, Precision::Fp16);
            gemm(&dev, &spec, h.view(), h.view(), c.view_mut(), Epilogue::default()).unwrap();
            let launches = dev.take_launches();
            assert_eq!(launches[0].name, "gemm_wgmma_f16_rc_f32");
            let _: &WgmmaGemmParams<F16, f32> = launches[0].params();
        }

        #[test]
        fn split_k_uses_the_plan_of_the_engine_that_runs() {
            let dev = MockDevice::new(PtxArch::Sm90a, 132);
            let mut spec = GemmSpec::linear_forward(128, 256, 320, Precision::Bf16);
            spec.split_k = 4;
            let launches = run_bf16(&dev, &spec, 0, spec.workspace_len()).unwrap();
            assert_eq!(launches.len(), 2);
            let p = launches[0].params::<WgmmaGemmParams<Bf16, Bf16>>();
            // 5 k tiles of 64 → 3 slices of 2 tiles; 1 × 2 output tiles.
            assert_eq!((p.gemm.split_k, p.gemm.k_tiles_per_split, p.units), (3, 2, 6));
            assert!(!p.gemm.workspace.is_null());
            assert_eq!(launches[1].name, "gemm_split_reduce_bf16");
            let reduce = launches[1].params::<GemmParams<f32, Bf16>>();
            assert_eq!((reduce.split_k, reduce.workspace.addr()), (3, p.gemm.workspace.addr()));
            // Auto asks for the larger (mma.sync) workspace; forced wgmma for its own.
            let wgmma_ws = 3 * 128 * 256;
            let err = run_bf16(&dev, &spec, 0, wgmma_ws).unwrap_err();
            assert!(err.to_string().contains("`workspace`"), "{err}");
            let forced = GemmSpec { engine: GemmEngine::Wgmma, ..spec };
            assert_eq!(run_bf16(&dev, &forced, 0, wgmma_ws).unwrap().len(), 2);
            // On sm_80 the same spec runs 4 mma.sync slices.
            let sm80 = MockDevice::new(PtxArch::Sm80, 132);
            let launches = run_bf16(&sm80, &spec, 0, spec.workspace_len()).unwrap();
            assert_eq!(launches[0].config.grid, (2, 4, 1));
        }

        #[test]
        fn gemm_rejects_a_split_on_any_candidate_engine() {
            let dev = MockDevice::new(PtxArch::Sm90a, 132);
            let a = dev.alloc::<bf16>(64 * 64).unwrap();
            let mut c = dev.alloc::<bf16>(64 * 64).unwrap();
            // K = 64: 2 mma.sync steps (splits), 1 wgmma step (does not).
            let spec =
                GemmSpec { split_k: 2, ..GemmSpec::linear_forward(64, 64, 64, Precision::Bf16) };
            let err = gemm(&dev, &spec, a.view(), a.view(), c.view_mut(), Epilogue::default())
                .unwrap_err();
            assert!(matches!(err, GpuError::InvalidArgument { arg: "split_k", .. }), "{err}");
            let forced = GemmSpec { engine: GemmEngine::Wgmma, ..spec };
            gemm(&dev, &forced, a.view(), a.view(), c.view_mut(), Epilogue::default()).unwrap();
            assert_eq!(dev.take_launches().len(), 1);
        }
    }
}
