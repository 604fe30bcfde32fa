//! What one GEMM is: shape, layouts, strides, scalars, precision, engine and tile, and the
//! choices that follow from them (split plans, engine, Hopper entry).

use super::{GemmTypes, Layout, invalid, wgmma};
use crate::device::Device;
use crate::error::Result;
use crate::ptx::PtxArch;
use half::{bf16, f16};
use kernel_abi::gemm::{TAIL_BM, TAIL_BN, simt, tc};
use kernel_abi::gemm_wgmma::{WgmmaKernels, stream_k, wg};

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
    /// The Hopper `wgmma` kernel; a GEMM it cannot run is an
    /// [`GpuError::InvalidArgument`](crate::GpuError::InvalidArgument) (argument `engine`) saying
    /// why.
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
    /// 128 × 256; a GEMM without such an entry is an
    /// [`GpuError::InvalidArgument`](crate::GpuError::InvalidArgument) (argument `wgmma_tile`).
    N256,
    /// Ping-pong 128 × 128: each consumer warpgroup multiplies whole tiles, in turns with the
    /// other, so one's epilogue overlaps the other's wgmmas (entries for A row-major; without
    /// one, an [`GpuError::InvalidArgument`](crate::GpuError::InvalidArgument)). `Auto` picks it
    /// for the 16-bit forward GEMMs (`wgmma::tile_for`).
    PingPong,
    /// 128 × 128 with the deferred epilogue: both consumers multiply every tile, and each
    /// consumer warp writes a tile out while the tensor cores multiply the block's next one
    /// (16-bit inputs, A row-major, whole tiles: a GEMM without such an entry, or split over K,
    /// is an [`GpuError::InvalidArgument`](crate::GpuError::InvalidArgument)). `Auto` never
    /// picks it yet: the GEMM benchmark times it beside the others, so that a GPU run can
    /// decide where it wins (the GEMMs with a GELU or GELU-backward epilogue, first).
    Deferred,
    /// Stream-K for the GEMMs [`GemmSpec::with_split_k_for`] plans (the weight gradients):
    /// 128 × 256 tiles whose k-tiles the grid's blocks share evenly, one block per SM, instead
    /// of whole tiles or K slices (16-bit inputs, `rc` or `cr`, one batch; the
    /// plan falls back to `Auto`'s where those do not hold). Every other GEMM runs as under
    /// `Auto`. `Auto` never picks it yet: `bench gemm` times it on the weight gradients, so
    /// that a GPU run can decide.
    StreamK,
    /// Chosen by timing, by the caller: every tile [`tuned_candidates`](super::tuned_candidates)
    /// lists for a GEMM, timed on its first launch ([`time_launches`](super::time_launches)),
    /// the fastest kept for the later ones (the trainer's `--wgmma-tile tuned`). A spec that
    /// reaches the launcher with it runs as under `Auto`.
    Tuned,
}

impl WgmmaTile {
    /// The kernel geometry of this tile (`Auto` stands for 128 × 128, the tile every entry
    /// has; `wgmma::tile_for` decides what it runs).
    pub(super) fn geometry(self) -> wg::Tile {
        match self {
            WgmmaTile::Auto | WgmmaTile::Tuned | WgmmaTile::N128 => wg::N128,
            WgmmaTile::N256 => wg::N256,
            WgmmaTile::PingPong => wg::PINGPONG,
            WgmmaTile::Deferred => wg::DEFERRED,
            WgmmaTile::StreamK => wg::STREAM_K,
        }
    }
}

/// How a model's weight gradients (the GEMMs [`GemmSpec::with_split_k_for`] plans) run on
/// the Hopper kernel (the trainer's `--weight-grads`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum WeightGrads {
    /// On [`GemmConfig::wgmma_tile`], as every other GEMM.
    #[default]
    Auto,
    /// On [`WgmmaTile::StreamK`] where it plans (16-bit), whatever `wgmma_tile` is: so that
    /// `--wgmma-tile deferred` (the forward and input-gradient GEMMs) and stream-K combine.
    StreamK,
}

/// How the GEMMs of a model or a composite op run: their precision, engine and Hopper tile
/// (the trainer's `--precision`, `--gemm-engine`, `--wgmma-tile`, `--weight-grads`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct GemmConfig {
    /// The arithmetic.
    pub precision: Precision,
    /// Which instructions multiply.
    pub engine: GemmEngine,
    /// The Hopper kernel's block tile, a preference: see [`GemmConfig::apply`].
    pub wgmma_tile: WgmmaTile,
    /// The weight gradients' schedule: see [`GemmConfig::apply_weight_grad`].
    pub weight_grads: WeightGrads,
}

impl From<Precision> for GemmConfig {
    /// `precision` with the default engine, tile and weight gradients (`Auto`).
    fn from(precision: Precision) -> Self {
        Self {
            precision,
            engine: GemmEngine::Auto,
            wgmma_tile: WgmmaTile::Auto,
            weight_grads: WeightGrads::Auto,
        }
    }
}

impl GemmConfig {
    /// `spec` in this precision, engine and tile, where a 128 × 256 or ping-pong tile asked
    /// for a GEMM without such an entry (the weight gradients) falls back to 128 × 128 instead
    /// of failing. `StreamK` stays: the GEMMs [`GemmSpec::with_split_k_for`] does not plan run
    /// as under `Auto`.
    pub fn apply(&self, spec: GemmSpec) -> GemmSpec {
        let spec = GemmSpec { precision: self.precision, engine: self.engine, ..spec };
        let wgmma_tile = match self.wgmma_tile {
            tile @ (WgmmaTile::N256 | WgmmaTile::PingPong | WgmmaTile::Deferred)
                if !spec.has_wgmma_entry(tile) =>
            {
                WgmmaTile::N128
            }
            tile => tile,
        };
        GemmSpec { wgmma_tile, ..spec }
    }

    /// [`GemmConfig::apply`] for a weight gradient (a spec the caller then plans with
    /// [`GemmSpec::with_split_k_for`]): under [`WeightGrads::StreamK`] on the stream-K tiles,
    /// which that plan takes where they apply and otherwise replaces with `Auto`'s.
    pub fn apply_weight_grad(&self, spec: GemmSpec) -> GemmSpec {
        let spec = self.apply(spec);
        match self.weight_grads {
            WeightGrads::Auto => spec,
            WeightGrads::StreamK => GemmSpec { wgmma_tile: WgmmaTile::StreamK, ..spec },
        }
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
    /// Split K into this many slices (1: no split-K; see [`gemm_split_k`](super::gemm_split_k)).
    pub split_k: usize,
    /// With `split_k > 1`, on the Hopper kernel: the tiles (128 × 128, the first in its raster
    /// order) multiplied over the whole K, only the rest split (the *tail split* of
    /// `kernel_abi::gemm`; [`GemmSpec::with_split_k_for`] picks it for the whole waves of a
    /// GEMM with a little more tiles than SMs). Less than the tiles; 0 (the default) splits
    /// every tile. The `mma.sync` kernels have no persistent grid to share out whole tiles:
    /// they run a spec with `whole_tiles > 0` unsplit.
    pub whole_tiles: usize,
    /// Which instructions multiply ([`GemmEngine::Auto`] unless set).
    pub engine: GemmEngine,
    /// The Hopper kernel's block tile, when it runs ([`WgmmaTile::Auto`] unless set).
    pub wgmma_tile: WgmmaTile,
    /// Under [`WgmmaTile::StreamK`], the blocks of the stream-K grid, set by
    /// [`GemmSpec::with_split_k_for`] (one per SM, at most one per k-tile); 0 (the default): no
    /// stream-K. The workspace depends on it ([`GemmSpec::workspace_len`]).
    pub stream_k_blocks: usize,
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
            whole_tiles: 0,
            engine: GemmEngine::Auto,
            wgmma_tile: WgmmaTile::Auto,
            stream_k_blocks: 0,
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

    /// The layouts of A and B as the kernel entries name them: `rc` for A row-major and B
    /// column-major, and so on.
    pub fn layout_name(&self) -> &'static str {
        use Layout::{ColMajor, RowMajor};
        match (self.a_layout, self.b_layout) {
            (RowMajor, RowMajor) => "rr",
            (RowMajor, ColMajor) => "rc",
            (ColMajor, RowMajor) => "cr",
            (ColMajor, ColMajor) => "cc",
        }
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
    /// steps except the last, and none is empty. A tail split (`whole_tiles > 0`) is
    /// unsplit except on `Wgmma`.
    pub fn split_plan_for(&self, engine: GemmEngine) -> (usize, usize) {
        let steps = self.k.div_ceil(self.block_k_for(engine));
        let tail_split_elsewhere = self.whole_tiles > 0 && engine != GemmEngine::Wgmma;
        if self.split_k <= 1 || steps <= 1 || tail_split_elsewhere {
            return (1, steps);
        }
        let per_slice = steps.div_ceil(self.split_k);
        (steps.div_ceil(per_slice), per_slice)
    }

    /// f32 elements of split-K workspace [`gemm_split_k`](super::gemm_split_k) needs (0 without
    /// split-K): the most any engine this spec may run on needs (under [`GemmEngine::Auto`], both,
    /// since the choice depends on the runtime and the operands).
    pub fn workspace_len(&self) -> usize {
        self.candidate_engines().iter().map(|&e| self.workspace_len_for(e)).max().unwrap_or(0)
    }

    /// The workspace of [`GemmSpec::split_plan_for`] `engine`: `batch · slices · M · N`, or
    /// with a tail split one 128 × 128 block per tail tile and slice.
    pub(super) fn workspace_len_for(&self, engine: GemmEngine) -> usize {
        if let Some((grid, tiles)) = self.stream_k_grid(engine) {
            return stream_k::workspace_len(grid, tiles, wg::STREAM_K.bn);
        }
        let per_slice = if self.whole_tiles == 0 {
            self.m.saturating_mul(self.n)
        } else {
            self.tail_tiles().saturating_mul((TAIL_BM * TAIL_BN) as usize)
        };
        match self.split_plan_for(engine) {
            (1, _) => 0,
            (slices, _) => [slices, per_slice].iter().fold(self.batch, |a, &b| a.saturating_mul(b)),
        }
    }

    /// The stream-K launch of this spec on `engine`, `(grid, tiles)`: on the Hopper kernel under
    /// [`WgmmaTile::StreamK`] with `stream_k_blocks` set, the grid of `min(stream_k_blocks,
    /// iterations)` blocks sharing the `tiles` 128 × 256 tiles' k-tiles; `None` otherwise (or
    /// where the schedule's 32-bit arithmetic would not hold them: `stream_k::fits`).
    pub(super) fn stream_k_grid(&self, engine: GemmEngine) -> Option<(u32, u32)> {
        if engine != GemmEngine::Wgmma
            || self.wgmma_tile != WgmmaTile::StreamK
            || self.stream_k_blocks == 0
        {
            return None;
        }
        let tiles = self.m.div_ceil(wg::BM as usize) * self.n.div_ceil(wg::STREAM_K.bn as usize);
        let iters = tiles.checked_mul(self.k.div_ceil(self.block_k_for(engine)))?;
        let grid = u32::try_from(self.stream_k_blocks.min(iters)).ok()?;
        let (tiles, iters) = (u32::try_from(tiles).ok()?, u32::try_from(iters).ok()?);
        stream_k::fits(grid, iters).then_some((grid, tiles))
    }

    /// The 128 × 128 tiles of one batch that a tail split divides over K (all but
    /// `whole_tiles`).
    pub(super) fn tail_tiles(&self) -> usize {
        self.tiles_128().saturating_sub(self.whole_tiles)
    }

    /// Tiles of 128 × 128 in one batch: those of the `mma.sync` kernels and of the Hopper kernel
    /// when it splits K.
    pub(super) fn tiles_128(&self) -> usize {
        self.m.div_ceil(TAIL_BM as usize) * self.n.div_ceil(TAIL_BN as usize)
    }

    /// The most K slices any engine this spec may run on launches.
    pub(super) fn max_slices(&self) -> usize {
        self.candidate_engines().iter().map(|&e| self.split_plan_for(e).0).max().unwrap_or(1)
    }

    /// The engines [`GemmSpec::engine_on`] may resolve this spec to, whatever the runtime and
    /// operand addresses (resolved engines only: `MmaSync`, `Wgmma`).
    fn candidate_engines(&self) -> &'static [GemmEngine] {
        match self.engine {
            GemmEngine::MmaSync => &[GemmEngine::MmaSync],
            GemmEngine::Wgmma => &[GemmEngine::Wgmma],
            GemmEngine::Auto if wgmma::shape_reason(self).is_none() => {
                &[GemmEngine::MmaSync, GemmEngine::Wgmma]
            }
            GemmEngine::Auto => &[GemmEngine::MmaSync],
        }
    }

    /// The engine [`gemm`](fn@super::gemm) and [`gemm_split_k`](super::gemm_split_k) run this spec
    /// with on `dev`, for A and B at device addresses `a_addr` and `b_addr`: `MmaSync` or `Wgmma`,
    /// never `Auto`.
    ///
    /// `Wgmma` applies when `dev` loaded the sm_90a module, the precision is BF16 or FP16 (any
    /// layouts) or TF32 (A row-major and B column-major), `K ≥ 1`, both addresses are 16-byte
    /// aligned and so are the rows (`lda · size` and `ldb · size` multiples of 16 bytes) and, with
    /// `batch > 1`, the batches of A and B (`stride · size` multiples of 16 bytes, at least one
    /// matrix apart). `Auto` resolves to `Wgmma` when it applies and to `MmaSync` otherwise; an
    /// explicit `Wgmma` that does not apply is an
    /// [`GpuError::InvalidArgument`](crate::GpuError::InvalidArgument) (argument `engine`) giving
    /// the first reason; `MmaSync` stays `MmaSync`.
    pub fn engine_on<D: Device>(&self, dev: &D, a_addr: u64, b_addr: u64) -> Result<GemmEngine> {
        self.engine_for_arch(dev.ptx_arch(), a_addr, b_addr)
    }

    /// [`GemmSpec::engine_on`] a runtime that loaded the `arch` module.
    fn engine_for_arch(&self, arch: PtxArch, a_addr: u64, b_addr: u64) -> Result<GemmEngine> {
        let why_not = wgmma::unsupported_reason(arch, self, a_addr, b_addr);
        match (self.engine, why_not) {
            (GemmEngine::MmaSync, _) | (GemmEngine::Auto, Some(_)) => Ok(GemmEngine::MmaSync),
            (GemmEngine::Auto | GemmEngine::Wgmma, None) => Ok(GemmEngine::Wgmma),
            (GemmEngine::Wgmma, Some(reason)) => {
                Err(invalid("engine", format!("the wgmma kernel cannot run this GEMM: {reason}")))
            }
        }
    }

    /// Whether this spec, with 16-byte-aligned operands on a runtime that loaded the `arch`
    /// module, runs on `wgmma` in TF32: wgmma reads an f32 operand by its upper 19 bits
    /// (truncation, which biases every product towards zero), where `mma.sync` rounds it to
    /// nearest first (`cvt.rna.tf32.f32`). A caller that wants the same arithmetic on both
    /// engines hands such a GEMM operands rounded first
    /// ([`round_tf32`](crate::kernels::elementwise::round_tf32)), as the materialised attention
    /// and the trainer do.
    pub fn truncates_tf32_operands(&self, arch: PtxArch) -> bool {
        self.precision == Precision::Tf32 && self.likely_engine(arch) == GemmEngine::Wgmma
    }

    /// Picks `split_k` (and, on the Hopper kernel, `whole_tiles`) for a GPU with
    /// `multiprocessors` SMs whose runtime loaded the `arch` module, for the engine this spec
    /// will most likely run on there (what [`GemmSpec::engine_on`] resolves to for aligned
    /// operands): the plan of least [`split_cost`], from 1 to 16 slices of at least 8 K steps
    /// (of that engine) each, every tile split or, on the Hopper kernel's persistent grid of an
    /// unbatched GEMM, only those past its whole waves of tiles (the tail split). A model, not a
    /// tuner: it targets the GPT-2 weight gradients (outputs of a few dozen to a few hundred
    /// tiles, K = B·T), whose last wave of tiles left most SMs idle (the 3072 × 768 gradient,
    /// 144 tiles on 132 SMs, ran at 59% of cuBLAS on an H200 unsplit, and at 61% on an H100 in
    /// four slices, 2026-11-26: the partial sums of every tile cost more than the model said).
    ///
    /// Under [`WgmmaTile::StreamK`] it plans stream-K instead (`stream_k_blocks` =
    /// `multiprocessors`, no split) where the stream-K entries take the spec on the Hopper
    /// kernel, and otherwise plans as under [`WgmmaTile::Auto`], to which it sets the tile.
    pub fn with_split_k_for(self, multiprocessors: usize, arch: PtxArch) -> Self {
        self.plan_split(multiprocessors, arch, true)
    }

    /// [`GemmSpec::with_split_k_for`] without the tail split (`whole_tiles` 0: every tile
    /// split, or none): the plan it picked before the tail split, which the GEMM benchmark
    /// times beside it.
    pub fn with_every_tile_split_for(self, multiprocessors: usize, arch: PtxArch) -> Self {
        self.plan_split(multiprocessors, arch, false)
    }

    /// The split plans of [`GemmSpec::with_split_k_for`], tail splits only if `tail`.
    fn plan_split(mut self, multiprocessors: usize, arch: PtxArch, tail: bool) -> Self {
        let engine = self.likely_engine(arch);
        self.stream_k_blocks = 0;
        if self.wgmma_tile == WgmmaTile::StreamK {
            let planned =
                Self { split_k: 1, whole_tiles: 0, stream_k_blocks: multiprocessors, ..self };
            let entry = self.batch == 1 && self.has_wgmma_entry(WgmmaTile::StreamK);
            if entry && planned.stream_k_grid(engine).is_some() {
                return planned;
            }
            self.wgmma_tile = WgmmaTile::Auto;
        }
        // Blocks per SM, and roughly the engine's FLOPs per byte of DRAM traffic on an H100 /
        // H200 (dense peak over bandwidth): what a slice's workspace costs against its math.
        // A split Hopper GEMM runs 128 × 128 tiles under `Auto`; a forced 128 × 256 tile keeps
        // its own width, and no tail split (whose partial sums are 128 × 128 blocks).
        let wide = self.wgmma_tile == WgmmaTile::N256;
        let wgmma_bn = if wide { wg::N256.bn } else { wg::N128.bn };
        let (bm, bn, per_sm, flops_per_byte) = match (engine, self.precision) {
            (GemmEngine::Wgmma, Precision::Tf32) => (wg::BM, wgmma_bn, 1, 100.0),
            (GemmEngine::Wgmma, _) => (wg::BM, wgmma_bn, 1, 200.0),
            (_, Precision::Fp32) => {
                let tile = self.simt_tile();
                (simt::BM, tile.bn, tile.blocks_per_sm as usize, 15.0)
            }
            (_, Precision::Tf32) => (tc::BM, tc::BN, 2, 50.0),
            _ => (tc::BM, tc::BN, 2, 100.0),
        };
        let tiles = self.m.div_ceil(bm as usize) * self.n.div_ceil(bn as usize) * self.batch;
        let steps = self.k.div_ceil(self.block_k_for(engine));
        let multiprocessors = multiprocessors.max(1);
        let model = SplitModel {
            tiles,
            steps,
            multiprocessors,
            per_sm,
            slice_overhead: 4.0 * flops_per_byte / self.k.max(1) as f64,
        };
        let most = (steps / 8).clamp(1, 16);
        let whole_waves = tiles / multiprocessors * multiprocessors;
        let tail_split =
            tail && engine == GemmEngine::Wgmma && !wide && self.batch == 1 && whole_waves < tiles;
        let plans = (1..=most).map(|split| (0, split));
        let tail_plans = (2..=most).filter(|_| tail_split && whole_waves > 0);
        let plans = plans.chain(tail_plans.map(|split| (whole_waves, split)));
        (self.whole_tiles, self.split_k) = if tiles == 0 {
            (0, 1)
        } else {
            plans
                .min_by(|&a, &b| split_cost(&model, a).total_cmp(&split_cost(&model, b)))
                .unwrap_or((0, 1))
        };
        self
    }

    /// The FP32 SIMT kernel's block tile for this spec: 128 × 64 when N ≤ 64 (the attention's
    /// products with the head dimension), else 128 × 128.
    pub fn simt_tile(&self) -> simt::Tile {
        simt::tile_for(u32::try_from(self.n).unwrap_or(u32::MAX))
    }

    /// Whether the Hopper kernel has an entry of `tile` for this precision and these layouts
    /// (`Auto` stands for 128 × 128): 128 × 128 for BF16 and FP16 in every layout and TF32
    /// with A row-major and B column-major; 128 × 256 and ping-pong for A row-major (the
    /// forward and `dX` GEMMs) in BF16 and FP16, and TF32's one layout; stream-K for BF16 and
    /// FP16 `rc` and `cr`.
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
    pub(super) fn likely_engine(&self, arch: PtxArch) -> GemmEngine {
        self.engine_for_arch(arch, 0, 0).unwrap_or(self.engine)
    }
}

/// What [`split_cost`] weighs: a GEMM of `tiles` output tiles (batches included) and `steps` K
/// steps per tile, on `multiprocessors` SMs running `per_sm` blocks each.
#[derive(Clone, Copy, Debug)]
pub(super) struct SplitModel {
    pub(super) tiles: usize,
    pub(super) steps: usize,
    pub(super) multiprocessors: usize,
    pub(super) per_sm: usize,
    /// The time one slice's f32 workspace (written, then read by the reduction) costs, as a
    /// fraction of the GEMM's own: `2 · 4 bytes · M · N` against `2 · M · N · K` FLOPs, that is
    /// `4 · (FLOPs per byte) / K`.
    pub(super) slice_overhead: f64,
}

/// The time of the GEMM split into `split` K slices, all but its first `whole` tiles (0, or
/// a multiple of the block slots), relative to its ideal (every SM busy for the same number
/// of K steps): the busiest SM's K steps, `whole / slots · per_sm · steps` for the whole tiles
/// plus `⌈units / slots⌉ · per_sm · ⌈steps / split⌉` for the `units = (tiles − whole) · split`
/// others (slots = per_sm · SMs: the blocks sharing an SM share its throughput), over `tiles
/// · steps / SMs`, plus [`SplitModel::slice_overhead`] per slice of the split tiles' share
/// when split. Ties keep the first minimum (the smaller split, every tile split).
pub(super) fn split_cost(model: &SplitModel, (whole, split): (usize, usize)) -> f64 {
    let SplitModel { tiles, steps, multiprocessors, per_sm, slice_overhead } = *model;
    let slots = per_sm * multiprocessors;
    let split_tiles = tiles.saturating_sub(whole);
    let busiest = whole / slots * per_sm * steps
        + (split_tiles * split).div_ceil(slots) * per_sm * steps.div_ceil(split);
    let ideal = (tiles * steps) as f64 / multiprocessors as f64;
    let split_share = split_tiles as f64 / tiles.max(1) as f64;
    let workspace = if split > 1 { slice_overhead * split as f64 * split_share } else { 0.0 };
    busiest as f64 / ideal.max(f64::MIN_POSITIVE) + workspace
}

/// Elements spanned by `batch` matrices of `rows` stored rows of `cols` elements `ld` apart;
/// `usize::MAX` where that does not fit (no view is that long, so the launch's length checks
/// fail instead of a wrapped, small extent passing them).
fn extent(batch: usize, stride: usize, rows: usize, cols: usize, ld: usize) -> usize {
    if batch == 0 || rows == 0 || cols == 0 {
        return 0;
    }
    (batch - 1)
        .checked_mul(stride)
        .and_then(|batches| (rows - 1).checked_mul(ld)?.checked_add(batches))
        .and_then(|span| span.checked_add(cols))
        .unwrap_or(usize::MAX)
}
