//! The Hopper GEMM (`gemm_wgmma_*`, sm_90a module only): the semantics of [`crate::gemm`]
//! computed by `wgmma.mma_async` from shared-memory tiles that the tensor memory accelerator
//! (TMA, `cp.async.bulk.tensor`) loads, in a warp-specialised, persistent kernel.
//!
//! # Operands
//! A and B are read through two *tensor maps* (128-byte descriptors of a rank-3 global tensor, the
//! batch of matrices, and of the box one TMA load copies) that the host encodes
//! (`cuTensorMapEncodeTiled` on a GPU, the simulator's own encoding on the simulator) and stores in
//! global memory; the kernel gets their addresses. A tensor map would normally be a
//! `__grid_constant__` kernel parameter, but rustc cannot mark a parameter that way (LLVM would
//! copy it to local memory, which TMA cannot read), so it lives in global memory, which the PTX ISA
//! equally allows.
//!
//! # Layouts
//! Each operand is *K-major* (A row-major M×K, or B column-major: an `nn.Linear` weight `W (N, K)`)
//! or, for BF16 and FP16, *M/N-major* (A column-major, B row-major), the transposed operands of the
//! backward GEMMs; wgmma reads TF32 K-major only, so TF32 has the `rc` entry alone. The tensor map
//! of a K-major operand describes it as rows (M or N) of K elements, box [`wg::BK_BYTES`] bytes of
//! K × [`wg::BM`] (A) or the tile width (B) rows; that of an M/N-major operand as rows of K of M
//! (or N) elements, box 64 elements (128 bytes) × `BK` rows of K, loaded once per 64 rows of the
//! tile (M/N offsets 0, 64, …). Both in the 128-byte swizzle. Elements outside the tensor are
//! zero-filled by TMA, so partial tiles need no masking in the main loop. Dimension 2 is the batch:
//! `batch` matrices `stride_a` (`stride_b`) elements apart, 16-byte aligned and not overlapping
//! (one matrix when `batch` is 1).
//!
//! # Tiles
//! Blocks of 128 × 128 ([`wg::N128`], 6 stages; every entry) or 128 × 256 ([`wg::N256`], 4
//! stages, wgmma m64n256; the `gemm_wgmma_n256_*` entries: every layout for 16-bit inputs,
//! TF32's K-major one), both consumer
//! warpgroups multiplying halves of each tile; or ping-pong ([`wg::PINGPONG`], 128 × 128, 6
//! stages; the `gemm_wgmma_pp_*` entries, A row-major only), each consumer warpgroup
//! multiplying whole tiles in turns; or deferred ([`wg::DEFERRED`], 128 × 128, 5 stages,
//! cooperative; the `gemm_wgmma_de_*` entries, A row-major only, whole tiles only: no
//! split-K), each consumer warp moving its accumulators to shared memory after a tile's
//! mainloop and running that tile's epilogue a run at a time between the k-tiles of the next
//! tile's mainloop; or stream-K ([`wg::STREAM_K`], the 128 × 256 cooperative tiles; the
//! `gemm_wgmma_sk_*` entries, 16-bit inputs, `rc` and `cr`, one batch, no split-K),
//! the grid's blocks sharing the tiles' k-tiles evenly ([`stream_k`]). The host picks one per
//! GEMM and sizes `tiles_n`, the B box and the shared memory for it.
//!
//! # Everything else
//! The epilogue (alpha, beta, bias, GELU, GELU backward, output types, column sums), split-K
//! (with the same `gemm_split_reduce_*` second pass; here also the tail split of
//! [`GemmParams::whole_tiles`], with 128 × 128 tiles) and rasterisation are those of
//! [`crate::gemm`],
//! through the embedded [`GemmParams`]; its `a`/`b` pointers are the operands the tensor maps
//! describe (the launcher fills both), `lda`/`ldb` their leading dimensions, `stride_c` the
//! batch stride of C and the pre-activation.

use crate::gemm::{GemmParams, Layout};
#[cfg(doc)]
use crate::gemm::{units_per_batch, work_unit};
use crate::kernel::{Kernel, KernelParams, KernelSig, LaunchBounds};
use crate::ptr::{Bf16, DevicePtr, F16};

/// An encoded TMA tensor map: 128 opaque bytes, 64-byte aligned (the driver's `CUtensorMap`).
#[repr(C, align(64))]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TensorMap {
    /// The encoding (the driver's, or the simulator's).
    pub bytes: [u8; 128],
}

impl core::fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "TensorMap({:02x?}..)", &self.bytes[..8])
    }
}

/// Launch parameters of the `gemm_wgmma_*` entries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WgmmaGemmParams<I: Copy, O: Copy> {
    /// Shapes, epilogue, split-K and rasterisation, as for the `mma.sync` kernels (the batch
    /// count is in `units`).
    pub gemm: GemmParams<I, O>,
    /// Tensor map of A (see the module docs for its box in each layout).
    pub tmap_a: DevicePtr<TensorMap>,
    /// Tensor map of B.
    pub tmap_b: DevicePtr<TensorMap>,
    /// Work units (`batch ·` [`units_per_batch`]`(tiles_m · tiles_n, split_k, whole_tiles)`)
    /// the persistent grid walks: block `b` takes units `b, b + gridDim.x, …`; unit `u` is
    /// [`work_unit`]`(u, …)` (without a tail split: batch `u / (tiles · split_k)`, slice
    /// `(u / tiles) % split_k` of tile `u % tiles`). For the stream-K entries
    /// ([`wg::STREAM_K`]): the number of tiles (one batch), whose k-tiles the grid's blocks
    /// share ([`stream_k`]).
    pub units: u32,
}

// SAFETY: #[repr(C)] struct of a GemmParams (144 bytes without padding), two device pointers
// and a u32: the only padding is the 4 bytes at the tail, which the device never reads (the
// test `gemm_params_have_no_padding` checks the layout).
unsafe impl<I: Copy + 'static, O: Copy + 'static> KernelParams for WgmmaGemmParams<I, O> {}

/// Geometry of the Hopper GEMM.
///
/// ```text
/// block = 3 warpgroups (384 threads)
///   warpgroup 0: producer. setmaxnreg.dec to PRODUCER_REGS; one elected thread of warp 0
///                issues the TMA loads of A and B for each stage, `arrive.expect_tx` on
///                full[s]; the other threads of the warpgroup exit.
///   warpgroups 1, 2: consumers. setmaxnreg.inc to CONSUMER_REGS; cooperative: consumer g
///                multiplies rows 64g .. 64g + 64 of every block tile with wgmma m64nBNk16
///                (bf16, f16) or m64nBNk8 (tf32), BN / 2 f32 accumulators per thread;
///                ping-pong: consumer g multiplies all 128 rows (two m64 wgmmas per k-step,
///                BN accumulators per thread) of the block's units g, g + 2, …, starting
///                its wgmmas when the other has issued its own (turn barriers).
///
/// four tiles: N128 (BN = 128, 6 stages, cooperative; every entry), N256 (BN = 256, 4
/// stages, cooperative; the `gemm_wgmma_n256_*` entries, every layout for 16-bit inputs),
/// PINGPONG (BN = 128, 6 stages; the `gemm_wgmma_pp_*` entries, A row-major) and DEFERRED
/// (BN = 128, 5 stages, cooperative, the epilogue of a tile run during the next tile's
/// mainloop; the `gemm_wgmma_de_*` entries, 16-bit inputs, A row-major, whole tiles only)
///
/// shared memory (1024-byte aligned base):
///   stages × [ A tile: BM rows × 128 B | B tile: BN rows × 128 B ]   128-byte swizzle
///   full[stages], empty[stages] (ping-pong: and turn[2]): mbarriers (8 B each)
///   8 consumer warps × EPI_WARP_BYTES of epilogue staging (deferred: × BN / 64, a warp's
///   16 rows × BN columns at once)
///
/// ring protocol, stage s = i % stages, phase parity (i / stages) & 1 of the i-th k-tile:
///   producer: wait empty[s] (parity ^ 1)  → arrive.expect_tx(full[s], stage bytes) → TMA
///   consumer: wait full[s] (parity)       → wgmma × 4 → commit → wait_group 1
///             → lane 0 of each consumer warp arrives on empty[previous stage]
///   (ping-pong: empty[s] counts the 4 warps of the one consumer reading the stage, and a
///    consumer's ring skips the k-tiles of the other's units)
/// ```
pub mod wg {
    /// Block tile rows (two consumer warpgroups of 64 rows).
    pub const BM: u32 = 128;
    /// Bytes of K per stage: one 128-byte swizzle row (64 16-bit or 32 f32 elements).
    pub const BK_BYTES: u32 = 128;
    /// Bytes of K one wgmma consumes (k16 of 16-bit or k8 of tf32).
    pub const WGMMA_K_BYTES: u32 = 32;
    /// Consumer warpgroups.
    pub const CONSUMERS: u32 = 2;
    /// Threads per block: the producer warpgroup and the consumers.
    pub const THREADS: u32 = 128 * (1 + CONSUMERS);
    /// Registers per thread of the producer warpgroup after `setmaxnreg.dec`.
    pub const PRODUCER_REGS: u32 = 40;
    /// Registers per thread of the consumer warpgroups after `setmaxnreg.inc`.
    pub const CONSUMER_REGS: u32 = 232;
    /// Bytes of one A tile of one stage.
    pub const A_TILE_BYTES: u32 = BM * BK_BYTES;
    /// Row stride (f32 words) of a consumer warp's epilogue staging buffer (16 rows × 64
    /// columns at a time): unpadded, its 8-word groups XOR-swizzled by row instead, as the
    /// `mma.sync` kernel's (`kernels-gpu`'s `epilogue::stage_piece`). Padding would cost the
    /// pipeline a stage in every tile.
    pub const EPI_ROW_WORDS: u32 = 64;
    /// Bytes of one consumer warp's staging buffer.
    pub const EPI_WARP_BYTES: u32 = 16 * EPI_ROW_WORDS * 4;

    /// A block tile (`BM` × `bn`, the N of one wgmma), the pipeline depth its shared memory
    /// allows, and how the consumers share the tiles.
    #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
    pub struct Tile {
        /// Block tile columns.
        pub bn: u32,
        /// Pipeline depth.
        pub stages: u32,
        /// Ping-pong: each consumer warpgroup multiplies whole tiles (every other work unit
        /// of the block), taking turns at the tensor cores, so one's epilogue overlaps the
        /// other's wgmmas. Otherwise (cooperative) both multiply halves of every tile.
        pub pingpong: bool,
        /// Deferred epilogue (cooperative): each consumer warp stages all its accumulators of
        /// a tile at once and writes them out between the k-tiles of its next tile's
        /// mainloop.
        pub deferred: bool,
        /// Stream-K (cooperative): the grid's blocks share the tiles' k-tiles evenly
        /// ([`super::stream_k`]) instead of taking whole work units.
        pub stream_k: bool,
    }

    /// 128 × 128 tiles, 6 stages, cooperative: every entry.
    ///
    /// Every tile has the deepest ring that fits beside its epilogue staging in the 227 KiB a
    /// block may have (asserted below): the producer runs `stages − 1` k-tiles ahead of the
    /// one the tensor cores multiply, 0.28 µs of a 128 × 128 k-tile's wgmmas at an H100's peak
    /// (0.56 µs for 128 × 256), against TMA latencies of about a microsecond from DRAM under
    /// load. Until 2026-11-28 the staging rows were padded (72 words) and the rings one stage
    /// shallower (4, 3, 5 and 4 stages; docs/GEMM.md, "Ring depth").
    pub const N128: Tile =
        Tile { bn: 128, stages: 6, pingpong: false, deferred: false, stream_k: false };
    /// 128 × 256 tiles, 4 stages, cooperative: the `gemm_wgmma_n256_*` entries.
    pub const N256: Tile =
        Tile { bn: 256, stages: 4, pingpong: false, deferred: false, stream_k: false };
    /// 128 × 128 tiles, 6 stages, ping-pong: the `gemm_wgmma_pp_*` entries.
    pub const PINGPONG: Tile =
        Tile { bn: 128, stages: 6, pingpong: true, deferred: false, stream_k: false };
    /// 128 × 256 tiles, 4 stages, cooperative, stream-K: the `gemm_wgmma_sk_*` entries.
    pub const STREAM_K: Tile = Tile { stream_k: true, ..N256 };
    /// 128 × 128 tiles, 5 stages (a whole tile's staging takes the sixth's room), cooperative,
    /// deferred epilogue: the `gemm_wgmma_de_*` entries.
    pub const DEFERRED: Tile =
        Tile { bn: 128, stages: 5, pingpong: false, deferred: true, stream_k: false };

    impl Tile {
        /// f32 accumulators per consumer thread: a BM × BN tile (ping-pong) or half of it
        /// over the warpgroup's 128 threads.
        pub const fn accumulators(self) -> u32 {
            if self.pingpong { self.bn } else { self.bn / 2 }
        }
        /// Consumer warps that read each stage: the arrival count of its empty barrier.
        pub const fn stage_readers(self) -> u32 {
            if self.pingpong { 4 } else { 4 * CONSUMERS }
        }
        /// mbarriers: full and empty per stage, and for ping-pong the two turn barriers.
        pub const fn barriers(self) -> u32 {
            2 * self.stages + if self.pingpong { 2 } else { 0 }
        }
        /// Bytes of one B tile of one stage.
        pub const fn b_tile_bytes(self) -> u32 {
            self.bn * BK_BYTES
        }
        /// Bytes of one stage (what its full barrier expects).
        pub const fn stage_bytes(self) -> u32 {
            A_TILE_BYTES + self.b_tile_bytes()
        }
        /// Offset of the mbarriers (full[0..stages], empty[0..stages], then for ping-pong
        /// turn[0..2]).
        pub const fn barriers_offset(self) -> u32 {
            self.stages * self.stage_bytes()
        }
        /// Offset of the staging buffers (16-byte aligned).
        pub const fn epilogue_offset(self) -> u32 {
            (self.barriers_offset() + 8 * self.barriers()).next_multiple_of(16)
        }
        /// Bytes of one consumer warp's staging: one 16 × 64 piece at a time, or (deferred)
        /// all `BN / 64` pieces of its rows, one after the other.
        pub const fn warp_staging_bytes(self) -> u32 {
            if self.deferred { self.bn / 64 * EPI_WARP_BYTES } else { EPI_WARP_BYTES }
        }
        /// Bytes used from the aligned base.
        pub const fn used_bytes(self) -> u32 {
            self.epilogue_offset() + 4 * CONSUMERS * self.warp_staging_bytes()
        }
        /// Dynamic shared memory to request: the used bytes plus slack to align the base to
        /// the 1024 bytes of the 128-byte swizzle pattern.
        pub const fn smem_bytes(self) -> u32 {
            self.used_bytes() + 1024
        }
    }

    /// Dynamic shared memory a block may have on sm_90 (227 KiB).
    pub const MAX_SMEM_BYTES: u32 = 227 * 1024;

    /// Whether `tile` fits [`MAX_SMEM_BYTES`] and its ring is as deep as fits.
    const fn deepest_that_fits(tile: Tile) -> bool {
        let deeper = Tile { stages: tile.stages + 1, ..tile };
        tile.smem_bytes() <= MAX_SMEM_BYTES && deeper.smem_bytes() > MAX_SMEM_BYTES
    }
    const _: () = assert!(
        deepest_that_fits(N128)
            && deepest_that_fits(N256)
            && deepest_that_fits(PINGPONG)
            && deepest_that_fits(DEFERRED)
            && deepest_that_fits(STREAM_K)
    );
    const _: () = assert!(
        crate::gemm::TAIL_BM == BM
            && crate::gemm::TAIL_BN == N128.bn
            && crate::gemm::TAIL_BN == PINGPONG.bn,
        "a tail split keeps the partial sums of the 128 × 128 tiles"
    );
    const _: () = assert!(
        PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * CONSUMERS <= 65536,
        "the register split must fit the SM's register file"
    );
}

/// One Hopper entry (layouts, input and output types fixed).
pub type WgmmaKernel<I, O> = Kernel<WgmmaGemmParams<I, O>>;

/// The Hopper entries of one input/output pair, by layouts of A and B (`r`: row-major, `c`:
/// column-major), as [`crate::gemm::GemmKernels`]; `None` where wgmma cannot read the layout.
#[derive(Clone, Copy, Debug)]
pub struct WgmmaKernels<I: Copy + 'static, O: Copy + 'static> {
    /// A row-major (K-major), B row-major (N-major).
    pub rr: Option<WgmmaKernel<I, O>>,
    /// A row-major, B column-major: both K-major.
    pub rc: WgmmaKernel<I, O>,
    /// A column-major (M-major), B row-major.
    pub cr: Option<WgmmaKernel<I, O>>,
    /// A column-major, B column-major (K-major).
    pub cc: Option<WgmmaKernel<I, O>>,
}

impl<I: Copy + 'static, O: Copy + 'static> WgmmaKernels<I, O> {
    /// The entry for these layouts of A and B, if there is one.
    #[inline]
    pub const fn get(&self, a: Layout, b: Layout) -> Option<WgmmaKernel<I, O>> {
        match (a, b) {
            (Layout::RowMajor, Layout::RowMajor) => self.rr,
            (Layout::RowMajor, Layout::ColMajor) => Some(self.rc),
            (Layout::ColMajor, Layout::RowMajor) => self.cr,
            (Layout::ColMajor, Layout::ColMajor) => self.cc,
        }
    }
}

macro_rules! wgmma_family {
    ($(#[$doc:meta])* $name:ident: $in:ty => $out:ty, $prefix:literal, $suffix:literal) => {
        $(#[$doc])*
        pub const $name: WgmmaKernels<$in, $out> = WgmmaKernels {
            rr: Some(Kernel::new(concat!($prefix, "_rr_", $suffix))),
            rc: Kernel::new(concat!($prefix, "_rc_", $suffix)),
            cr: Some(Kernel::new(concat!($prefix, "_cr_", $suffix))),
            cc: Some(Kernel::new(concat!($prefix, "_cc_", $suffix))),
        };
    };
    ($(#[$doc:meta])* $name:ident: $in:ty => $out:ty, $prefix:literal, $suffix:literal, a_row_major) => {
        $(#[$doc])*
        pub const $name: WgmmaKernels<$in, $out> = WgmmaKernels {
            rr: Some(Kernel::new(concat!($prefix, "_rr_", $suffix))),
            rc: Kernel::new(concat!($prefix, "_rc_", $suffix)),
            cr: None,
            cc: None,
        };
    };
    ($(#[$doc:meta])* $name:ident: $in:ty => $out:ty, $prefix:literal, $suffix:literal, rc_cr) => {
        $(#[$doc])*
        pub const $name: WgmmaKernels<$in, $out> = WgmmaKernels {
            rr: None,
            rc: Kernel::new(concat!($prefix, "_rc_", $suffix)),
            cr: Some(Kernel::new(concat!($prefix, "_cr_", $suffix))),
            cc: None,
        };
    };
}

wgmma_family!(/// `gemm_wgmma_bf16_*_bf16`: wgmma m64n128k16 BF16, bf16 output.
    WGMMA_BF16_BF16: Bf16 => Bf16, "gemm_wgmma_bf16", "bf16");
wgmma_family!(/// `gemm_wgmma_bf16_*_f32`: wgmma m64n128k16 BF16, f32 output.
    WGMMA_BF16_F32: Bf16 => f32, "gemm_wgmma_bf16", "f32");
wgmma_family!(/// `gemm_wgmma_f16_*_f16`: wgmma m64n128k16 FP16, f16 output.
    WGMMA_F16_F16: F16 => F16, "gemm_wgmma_f16", "f16");
wgmma_family!(/// `gemm_wgmma_f16_*_f32`: wgmma m64n128k16 FP16, f32 output.
    WGMMA_F16_F32: F16 => f32, "gemm_wgmma_f16", "f32");

/// `gemm_wgmma_tf32_rc_f32`: f32 in memory, read by wgmma as TF32 (the low 13 mantissa bits
/// ignored, i.e. truncated, unlike the `mma.sync` kernel's round-to-nearest); K-major operands
/// only.
pub const WGMMA_TF32_F32: WgmmaKernels<f32, f32> =
    WgmmaKernels { rr: None, rc: Kernel::new("gemm_wgmma_tf32_rc_f32"), cr: None, cc: None };

wgmma_family!(/// `gemm_wgmma_n256_bf16_*_bf16`: 128 × 256 tiles ([`wg::N256`]), wgmma
    /// m64n256k16 BF16, bf16 output.
    WGMMA_N256_BF16_BF16: Bf16 => Bf16, "gemm_wgmma_n256_bf16", "bf16");
wgmma_family!(/// `gemm_wgmma_n256_bf16_*_f32`: as [`WGMMA_N256_BF16_BF16`], f32 output.
    WGMMA_N256_BF16_F32: Bf16 => f32, "gemm_wgmma_n256_bf16", "f32");
wgmma_family!(/// `gemm_wgmma_n256_f16_*_f16`: 128 × 256 tiles, wgmma m64n256k16 FP16,
    /// f16 output.
    WGMMA_N256_F16_F16: F16 => F16, "gemm_wgmma_n256_f16", "f16");
wgmma_family!(/// `gemm_wgmma_n256_f16_*_f32`: as [`WGMMA_N256_F16_F16`], f32 output.
    WGMMA_N256_F16_F32: F16 => f32, "gemm_wgmma_n256_f16", "f32");

/// `gemm_wgmma_n256_tf32_rc_f32`: 128 × 256 tiles, wgmma m64n256k8 TF32 (as
/// [`WGMMA_TF32_F32`]).
pub const WGMMA_N256_TF32_F32: WgmmaKernels<f32, f32> =
    WgmmaKernels { rr: None, rc: Kernel::new("gemm_wgmma_n256_tf32_rc_f32"), cr: None, cc: None };

wgmma_family!(/// `gemm_wgmma_pp_bf16_{rr,rc}_bf16`: ping-pong 128 × 128 tiles ([`wg::PINGPONG`]),
    /// wgmma m64n128k16 BF16, bf16 output; A row-major (the forward and `dX` GEMMs).
    WGMMA_PP_BF16_BF16: Bf16 => Bf16, "gemm_wgmma_pp_bf16", "bf16", a_row_major);
wgmma_family!(/// `gemm_wgmma_pp_bf16_{rr,rc}_f32`: as [`WGMMA_PP_BF16_BF16`], f32 output.
    WGMMA_PP_BF16_F32: Bf16 => f32, "gemm_wgmma_pp_bf16", "f32", a_row_major);
wgmma_family!(/// `gemm_wgmma_pp_f16_{rr,rc}_f16`: ping-pong 128 × 128 tiles, wgmma m64n128k16
    /// FP16, f16 output; A row-major.
    WGMMA_PP_F16_F16: F16 => F16, "gemm_wgmma_pp_f16", "f16", a_row_major);
wgmma_family!(/// `gemm_wgmma_pp_f16_{rr,rc}_f32`: as [`WGMMA_PP_F16_F16`], f32 output.
    WGMMA_PP_F16_F32: F16 => f32, "gemm_wgmma_pp_f16", "f32", a_row_major);

/// `gemm_wgmma_pp_tf32_rc_f32`: ping-pong 128 × 128 tiles, wgmma m64n128k8 TF32 (as
/// [`WGMMA_TF32_F32`]).
pub const WGMMA_PP_TF32_F32: WgmmaKernels<f32, f32> =
    WgmmaKernels { rr: None, rc: Kernel::new("gemm_wgmma_pp_tf32_rc_f32"), cr: None, cc: None };

wgmma_family!(/// `gemm_wgmma_de_bf16_{rr,rc}_bf16`: 128 × 128 tiles with the deferred epilogue
    /// ([`wg::DEFERRED`]), wgmma m64n128k16 BF16, bf16 output; A row-major (the forward and
    /// `dX` GEMMs).
    WGMMA_DE_BF16_BF16: Bf16 => Bf16, "gemm_wgmma_de_bf16", "bf16", a_row_major);
wgmma_family!(/// `gemm_wgmma_de_bf16_{rr,rc}_f32`: as [`WGMMA_DE_BF16_BF16`], f32 output.
    WGMMA_DE_BF16_F32: Bf16 => f32, "gemm_wgmma_de_bf16", "f32", a_row_major);
wgmma_family!(/// `gemm_wgmma_de_f16_{rr,rc}_f16`: 128 × 128 tiles with the deferred epilogue,
    /// wgmma m64n128k16 FP16, f16 output; A row-major.
    WGMMA_DE_F16_F16: F16 => F16, "gemm_wgmma_de_f16", "f16", a_row_major);
wgmma_family!(/// `gemm_wgmma_de_f16_{rr,rc}_f32`: as [`WGMMA_DE_F16_F16`], f32 output.
    WGMMA_DE_F16_F32: F16 => f32, "gemm_wgmma_de_f16", "f32", a_row_major);

wgmma_family!(/// `gemm_wgmma_sk_bf16_{rc,cr}_bf16`: 128 × 256 tiles under stream-K
    /// ([`wg::STREAM_K`]), wgmma m64n256k16 BF16, bf16 output; `cr` is the weight gradients'
    /// `dYᵀ·X`, whose few tiles and long K leave SMs idle on whole tiles.
    WGMMA_SK_BF16_BF16: Bf16 => Bf16, "gemm_wgmma_sk_bf16", "bf16", rc_cr);
wgmma_family!(/// `gemm_wgmma_sk_bf16_{rc,cr}_f32`: as [`WGMMA_SK_BF16_BF16`], f32 output (the
    /// trainer's weight gradients).
    WGMMA_SK_BF16_F32: Bf16 => f32, "gemm_wgmma_sk_bf16", "f32", rc_cr);
wgmma_family!(/// `gemm_wgmma_sk_f16_{rc,cr}_f16`: as [`WGMMA_SK_BF16_BF16`], FP16.
    WGMMA_SK_F16_F16: F16 => F16, "gemm_wgmma_sk_f16", "f16", rc_cr);
wgmma_family!(/// `gemm_wgmma_sk_f16_{rc,cr}_f32`: as [`WGMMA_SK_F16_F16`], f32 output.
    WGMMA_SK_F16_F32: F16 => f32, "gemm_wgmma_sk_f16", "f32", rc_cr);

/// Every entry of a family.
const fn family_sigs<I: Copy + 'static, O: Copy + 'static>(
    f: &WgmmaKernels<I, O>,
) -> [Option<KernelSig>; 4] {
    [sig_of(f.rr), Some(f.rc.sig()), sig_of(f.cr), sig_of(f.cc)]
}

const fn sig_of<I: Copy + 'static, O: Copy + 'static>(
    k: Option<WgmmaKernel<I, O>>,
) -> Option<KernelSig> {
    match k {
        Some(k) => Some(k.sig()),
        None => None,
    }
}

/// Number of Hopper GEMM entries: 17 of 128 × 128 tiles, 17 of 128 × 256, 9 ping-pong, 8
/// deferred, 8 stream-K.
const ENTRIES: usize = 2 * (4 * 4 + 1) + (4 * 2 + 1) + 4 * 2 + 4 * 2;

/// Every Hopper GEMM entry (exported by the sm_90a module only).
pub const KERNELS: &[KernelSig] = &{
    let families = [
        family_sigs(&WGMMA_BF16_BF16),
        family_sigs(&WGMMA_BF16_F32),
        family_sigs(&WGMMA_F16_F16),
        family_sigs(&WGMMA_F16_F32),
        family_sigs(&WGMMA_TF32_F32),
        family_sigs(&WGMMA_N256_BF16_BF16),
        family_sigs(&WGMMA_N256_BF16_F32),
        family_sigs(&WGMMA_N256_F16_F16),
        family_sigs(&WGMMA_N256_F16_F32),
        family_sigs(&WGMMA_N256_TF32_F32),
        family_sigs(&WGMMA_PP_BF16_BF16),
        family_sigs(&WGMMA_PP_BF16_F32),
        family_sigs(&WGMMA_PP_F16_F16),
        family_sigs(&WGMMA_PP_F16_F32),
        family_sigs(&WGMMA_PP_TF32_F32),
        family_sigs(&WGMMA_DE_BF16_BF16),
        family_sigs(&WGMMA_DE_BF16_F32),
        family_sigs(&WGMMA_DE_F16_F16),
        family_sigs(&WGMMA_DE_F16_F32),
        family_sigs(&WGMMA_SK_BF16_BF16),
        family_sigs(&WGMMA_SK_BF16_F32),
        family_sigs(&WGMMA_SK_F16_F16),
        family_sigs(&WGMMA_SK_F16_F32),
    ];
    let mut out = [WGMMA_TF32_F32.rc.sig(); ENTRIES];
    let (mut f, mut n) = (0, 0);
    while f < families.len() {
        let mut l = 0;
        while l < 4 {
            if let Some(sig) = families[f][l] {
                out[n] = sig;
                n += 1;
            }
            l += 1;
        }
        f += 1;
    }
    assert!(n == ENTRIES);
    out
};

/// One block of `wg::THREADS` per SM (its shared memory allows no second one), so that ptxas
/// budgets 168 registers per thread, which `setmaxnreg` redistributes.
pub const LAUNCH_BOUNDS: &[LaunchBounds] = &{
    let mut out =
        [LaunchBounds { name: "", max_threads: wg::THREADS, min_blocks_per_sm: 1 }; ENTRIES];
    let mut i = 0;
    while i < ENTRIES {
        out[i].name = KERNELS[i].name;
        i += 1;
    }
    out
};

/// The stream-K schedule of the `gemm_wgmma_sk_*` entries ([`wg::STREAM_K`]).
///
/// A GEMM of `tiles` block tiles of `k_tiles` k-tiles each is `iters = tiles · k_tiles`
/// iterations, tile-major (iteration `i` is k-tile `i % k_tiles` of tile `raster(i / k_tiles)`).
/// Block `b` of a grid of `g ≤ iters` blocks takes iterations [`start`]`(b) .. start(b + 1)` in
/// order: a *segment* per tile it touches, all of that tile's k-tiles or some of them. So every
/// SM multiplies the same number of k-tiles (±1), whatever the number of tiles, where a grid
/// walking whole tiles idles the SMs a last partial wave leaves over (the weight gradients'
/// 144 or 108 tiles of 128 × 128 on 132 SMs). A block's first and last segments may be
/// partial; the ones between are whole tiles.
///
/// A whole segment goes through the epilogue as usual. A partial one stores its f32 sums to
/// the block's slot for it ([`slot`]: `2b` for the block's first segment, `2b + 1` for its
/// last) in the workspace, and each consumer warp then counts its part in with an atomic add
/// on its own counter of the tile (`COUNTERS_PER_TILE` per tile, after the
/// `2g` slots, zero before the launch); the warp that brings its counter to the number of the
/// tile's segments adds every segment's sums from the workspace in k order, its own
/// included, and writes its rows through the epilogue. The sums, and so the result, depend
/// only on the grid size: the same bits on every run with the same number of blocks.
pub mod stream_k {
    use super::wg;
    use crate::gemm::div;

    /// Counters per tile: one per consumer warp (8), each covering that warp's 16 rows.
    pub const COUNTERS_PER_TILE: u32 = 8;

    /// Whether a grid of `g` blocks may share `iters` iterations: `1 ≤ g ≤ iters` and
    /// `g · iters` fits in 32 bits (the device's arithmetic in [`start`] and [`block_of`]).
    #[inline]
    pub const fn fits(g: u32, iters: u32) -> bool {
        g >= 1 && g <= iters && (g as u64) * (iters as u64) <= u32::MAX as u64
    }

    /// The first iteration of block `b ≤ g` of `g` (`start(g) = iters`); [`fits`]`(g, iters)`.
    #[inline]
    pub const fn start(b: u32, g: u32, iters: u32) -> u32 {
        div(b.wrapping_mul(iters), g)
    }

    /// The block of `g` whose iterations include `i < iters`; [`fits`]`(g, iters)`.
    #[inline]
    pub const fn block_of(i: u32, g: u32, iters: u32) -> u32 {
        div((i + 1).wrapping_mul(g).wrapping_sub(1), iters)
    }

    /// The workspace slot of block `b`'s partial segment of the tile whose first iteration is
    /// `tile_start`: `2b` when it is the block's first segment (the block starts inside the
    /// tile), `2b + 1` when it is its last (the block started before the tile).
    #[inline]
    pub const fn slot(b: u32, g: u32, iters: u32, tile_start: u32) -> u32 {
        2 * b + (start(b, g, iters) < tile_start) as u32
    }

    /// f32 of one slot: a block tile `bn` wide.
    #[inline]
    pub const fn slot_len(bn: u32) -> usize {
        (wg::BM * bn) as usize
    }

    /// f32 words of the workspace of a grid of `g` blocks over `tiles` tiles `bn` wide: `2g`
    /// slots, then `COUNTERS_PER_TILE` u32 counters per tile (zero before a launch).
    #[inline]
    pub const fn workspace_len(g: u32, tiles: u32, bn: u32) -> usize {
        2 * g as usize * slot_len(bn) + counters_len(tiles)
    }

    /// The counters' words ([`workspace_len`]'s tail).
    #[inline]
    pub const fn counters_len(tiles: u32) -> usize {
        (tiles * COUNTERS_PER_TILE) as usize
    }
}

#[cfg(test)]
mod stream_k_tests {
    extern crate std;
    use super::stream_k::*;
    use std::collections::BTreeMap;
    use std::vec::Vec;

    /// Every iteration belongs to exactly one block, `block_of` inverts `start`, a block has at
    /// most two partial segments, and the partial segments of a tile take distinct slots, the
    /// first and last of their blocks.
    #[test]
    fn blocks_share_the_iterations_and_partial_segments_own_their_slots() {
        for tiles in 1..9u32 {
            for k_tiles in 1..7u32 {
                let iters = tiles * k_tiles;
                for g in 1..=iters.min(20) {
                    assert!(fits(g, iters));
                    let mut slots: BTreeMap<u32, (u32, u32)> = BTreeMap::new();
                    for b in 0..g {
                        let (lo, hi) = (start(b, g, iters), start(b + 1, g, iters));
                        assert!(lo < hi, "block {b} of {g} has no iterations");
                        for i in lo..hi {
                            assert_eq!(block_of(i, g, iters), b, "{tiles} {k_tiles} {g} {i}");
                        }
                        let mut partial = Vec::new();
                        let mut i = lo;
                        while i < hi {
                            let (tile, kt0) = (i / k_tiles, i % k_tiles);
                            let kt1 = k_tiles.min(kt0 + hi - i);
                            if kt1 - kt0 < k_tiles {
                                partial.push((i == lo, tile, slot(b, g, iters, tile * k_tiles)));
                            }
                            i += kt1 - kt0;
                        }
                        assert!(partial.len() <= 2);
                        for (first, tile, s) in partial {
                            assert_eq!(s, 2 * b + u32::from(!first));
                            assert!(slots.insert(s, (tile, b)).is_none(), "slot {s} twice");
                        }
                    }
                    assert!(slots.keys().all(|&s| s < 2 * g));
                }
            }
        }
        assert!(!fits(0, 5) && !fits(6, 5) && fits(132, 18_432) && !fits(132, 40_000_000));
    }
}
