//! Hopper GEMM: TMA loads, `wgmma.mma_async` (BF16/FP16 m64nNk16, TF32 m64nNk8 with N = 128
//! or 256, f32 accumulators), warp specialisation and a persistent grid (sm_90a module only;
//! contract and geometry in `kernel_abi::gemm_wgmma`).
//!
//! Block tile 128 × BN ([`Width`]: [`N128`], 6 stages, or [`N256`], 4 stages), K advancing
//! `wg::BK_BYTES` = 128 bytes per stage (64 16-bit or 32 f32 elements) through a ring of
//! shared-memory stages, each an A tile (128 rows of M) and a B tile (BN rows of N) in the
//! 128-byte swizzle that TMA writes and wgmma reads: K-major (rows of 128 bytes of K), or, for
//! 16-bit inputs, M/N-major (8 KiB atom columns of 64 rows of K × 64 elements of M or N). The
//! const generics `A_MN` / `B_MN` of [`gemm`] choose ([`K_MAJOR`], [`MN_MAJOR`]). 384 threads
//! in three warpgroups:
//!
//! - **warpgroup 0, producer**: `setmaxnreg.dec` to `wg::PRODUCER_REGS`; one lane of warp 0
//!   (`elect.sync`) issues every TMA load (and the L2 prefetches of the epilogue's inputs,
//!   [`produce`]), the rest of the warpgroup exits;
//! - **warpgroups 1 and 2, consumers**: `setmaxnreg.inc` to `wg::CONSUMER_REGS`; consumer `g`
//!   computes rows `64g .. 64g + 64` of the block tile, BN / 2 f32 accumulators per thread
//!   (the whole 64 × BN wgmma result), and writes them through the epilogue.
//!
//! This is the cooperative schedule (both consumers on every tile). The pieces of the pipeline
//! ([`run_block`], [`produce`], [`mainloop`], [`drain`], [`write_unit`]) are shared with the
//! ping-pong schedule of [`super::wgmma_pingpong`], where each consumer takes whole tiles, and
//! with the deferred epilogue of [`super::wgmma_deferred`], where a tile is written out during
//! the next one's mainloop.
//!
//! # Register split
//! The launch bounds (384 threads, one block per SM) make ptxas budget 168 registers per thread
//! at entry; `setmaxnreg` then moves them between warpgroups: 128 × 40 (producer) + 256 × 232
//! (consumers) = 384 × 168. The consumers' 64 or 128 accumulators, descriptors and epilogue
//! fit in 232 without spilling, and the producer, which only walks coordinates, needs few.
//!
//! # Work units
//! The grid is persistent ([`Work`]): block `b` takes units `b, b + gridDim.x, … < p.units` (the
//! stream-K entries instead an even share of the tiles' k-tiles: [`super::wgmma_stream_k`]);
//! unit `u` is batch
//! `u / (tiles · split_k)`, K slice `(u / tiles) % split_k` of block tile `raster(u % tiles)`
//! (`tiles = tiles_m · tiles_n`, [`raster`] bands of `RASTER_GROUP` tile rows), over k-tiles `[kt0,
//! min(ceil(K / BK), kt0 + k_tiles_per_split))` with `kt0 = slice · k_tiles_per_split` and `BK =
//! BK_BYTES / element size`, as in the `mma.sync` kernel. The tensor maps are rank 3 (dimension 2
//! the batch), so a unit's loads name its batch. Producer and consumers walk the same units, and
//! the ring's stage and phase continue from one unit to the next, so the producer loads the next
//! unit's first stages while the consumers run the epilogue.
//!
//! # Barrier protocol
//! Per stage `s`, in shared memory after the stages: `full[s]` (arrival count 1) and `empty[s]`
//! (arrival count 8, one per consumer warp); `S` is the tile's stage count. Thread 0 initialises
//! them and fences them into the asynchronous proxy (`fence.proxy.async`), then the whole block
//! meets at `bar.sync` — the only block barrier. The `i`-th k-tile the block walks (over all its
//! units) uses stage `s = i % S` with phase parity `ph = (i / S) & 1`:
//!
//! ```text
//! producer (1 thread)                         consumers (256 threads)
//! wait empty[s], parity ph ^ 1                wait full[s], parity ph
//!   (a fresh barrier reads parity 1 as          wgmma.fence
//!    complete: the first pass is free)          4 × wgmma (k-steps of 32 bytes), commit
//! arrive.expect_tx(full[s], stage bytes)        wgmma.wait_group 1: the previous k-tile's
//! TMA A → full[s] (1 box, or 2 if M-major)        group is done, so lane 0 of each warp
//! TMA B → full[s] (1 box, or BN/64 if N-major)    arrives on empty[previous stage]
//!                                             after the unit's k-tiles: wait_group 0 (even
//!                                               if there were none), lane 0 of each warp
//!                                               arrives on empty[last stage]; epilogue
//! ```
//!
//! `full[s]` completes when its one arrival and the TMAs' stage bytes of `complete_tx` are
//! in; `empty[s]` when all 8 consumer warps are done reading the stage. Keeping one wgmma group
//! in flight (`wait_group 1`) overlaps a k-tile's tensor-core work with the wait for the next.
//! The first wgmma of a unit has `scale_d` false (it overwrites the accumulators); a unit
//! without k-tiles writes zeros.
//!
//! # Descriptors
//! A stage's tiles start at 1024-byte aligned addresses (the dynamic shared base is aligned up,
//! `Tile::smem_bytes` has the slack), so the 128-byte swizzle pattern is anchored. A K-major
//! k-step's descriptor is the tile's plus 32 bytes per step (`wgmma::desc_k_major_sw128`); an
//! M/N-major one the tile's plus 16 rows of K (2 KiB) per step, with the next 64 elements of
//! M/N 8 KiB further (`wgmma::desc_mn_major_sw128`). Consumer `g`'s A starts 8 KiB·g into the
//! A tile in both layouts ([`k_step_desc`]).
//!
//! # Epilogue
//! Accumulator register `i` of a thread is element `i % 4` of the `mma.sync` C fragment of n8
//! tile `i / 4` of its warp's 16 rows, so each consumer warp writes its 16 rows × BN columns
//! as 16 × 64 pieces through [`write_piece`] and its own staging buffer
//! (`Tile::epilogue_offset`, separate from the stages): the epilogue of [`Epilogue::new`], or the
//! split-K partial sums of [`Epilogue::partials`].

use super::epilogue::{Epilogue, STAGE_ROW_WORDS, VecIo, write_piece};
use super::wgmma_stream_k;
use crate::arch::{
    block_idx_x, grid_dim_x, lane_id, mbarrier, smem, sync, thread_idx_x, tma, warpgroup, wgmma,
};
use crate::elem::Elem;
use crate::unroll::unroll;
use kernel_abi::gemm::{GemmParams, RASTER_GROUP, div, raster, rem, work_unit};
use kernel_abi::gemm_wgmma::{TensorMap, WgmmaGemmParams, stream_k, wg};
use kernel_abi::{Bf16, F16};

/// wgmma k-steps per stage.
const K_STEPS: u32 = wg::BK_BYTES / wg::WGMMA_K_BYTES;
/// Bytes of one M/N-major swizzle atom column: 64 16-bit elements of M or N (128 bytes) ×
/// `BK` = 64 rows of K; also 64 K-major rows of 128 bytes.
pub(super) const MN_ATOM_BYTES: u32 = 64 * wg::BK_BYTES;

// The code below is written for this geometry.
const _: () = assert!(K_STEPS == 4, "the k-steps are unrolled 4 times");
const _: () = assert!(wg::CONSUMERS == 2 && wg::THREADS == 128 * 3);
const _: () = assert!(wg::BM == 64 * wg::CONSUMERS && wg::BK_BYTES == 128);
const _: () = assert!(wg::EPI_WARP_BYTES == 16 * STAGE_ROW_WORDS * 4);
const _: () = assert!(tile_fits(N128::TILE) && tile_fits(N256::TILE) && tile_fits(wg::PINGPONG));

/// Whether `t` has the alignments the kernel relies on: 1024-byte aligned A tiles, B tiles
/// and stages (the swizzle pattern), 8-byte aligned barriers, 16-byte aligned staging, a
/// width of whole 64-column epilogue pieces and 128-column wgmma panels.
const fn tile_fits(t: wg::Tile) -> bool {
    wg::A_TILE_BYTES.is_multiple_of(1024)
        && t.stage_bytes().is_multiple_of(1024)
        && t.barriers_offset().is_multiple_of(8)
        && t.epilogue_offset().is_multiple_of(16)
        && t.bn.is_multiple_of(128)
        && t.bn / 64 <= 4
}

/// An operand's majorness, as a const generic of [`gemm`]: K-major (A row-major, B
/// column-major).
pub const K_MAJOR: bool = false;
/// M/N-major (A column-major, B row-major; 16-bit inputs only).
pub const MN_MAJOR: bool = true;

/// One wgmma flavour: the element type of A and B and the instructions.
pub trait WgmmaOp {
    /// Element type of A and B in memory (and in shared memory: TMA copies them as they are).
    type In: Elem;

    /// One m64n128 wgmma of 32 bytes of K: `acc = A·B (+ acc if scale_d)`, A M-major if
    /// `A_MN`, B N-major if `B_MN`.
    ///
    /// # Safety
    /// As `arch::wgmma::mma_m64n128k16_bf16`. Minimum sm_90a.
    unsafe fn mma_n128<const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; 64],
        desc_a: u64,
        desc_b: u64,
        scale_d: bool,
    );

    /// One m64n256 wgmma of 32 bytes of K, as [`WgmmaOp::mma_n128`].
    ///
    /// # Safety
    /// As `arch::wgmma::mma_m64n256k16_bf16`. Minimum sm_90a.
    unsafe fn mma_n256<const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; 128],
        desc_a: u64,
        desc_b: u64,
        scale_d: bool,
    );
}

/// A block tile width: its geometry, a consumer thread's accumulators and the wgmma of that N.
pub trait Width {
    /// The geometry (`wg::N128` or `wg::N256`).
    const TILE: wg::Tile;
    /// `TILE.accumulators()` f32 in registers.
    type Acc: Copy;
    /// All zeros.
    const ZERO: Self::Acc;

    /// The accumulators of columns `128p .. 128p + 128` of the warp's rows (`None` past the
    /// tile); `p` is a constant wherever it is called, so the choice folds away.
    fn panel(acc: &Self::Acc, p: usize) -> Option<&[f32; 64]>;

    /// [`Width::panel`], writable.
    fn panel_mut(acc: &mut Self::Acc, p: usize) -> Option<&mut [f32; 64]>;

    /// One m64n`TILE.bn` wgmma of flavour `T` into `acc`, as [`WgmmaOp::mma_n128`].
    ///
    /// # Safety
    /// As [`WgmmaOp::mma_n128`].
    unsafe fn mma<T: WgmmaOp, const A_MN: bool, const B_MN: bool>(
        acc: &mut Self::Acc,
        desc_a: u64,
        desc_b: u64,
        scale_d: bool,
    );
}

/// 128 × 128 block tiles (`wg::N128`).
pub struct N128;
/// 128 × 256 block tiles (`wg::N256`).
pub struct N256;

impl Width for N128 {
    const TILE: wg::Tile = wg::N128;
    type Acc = [f32; 64];
    const ZERO: [f32; 64] = [0.0; 64];

    #[inline(always)]
    fn panel(acc: &[f32; 64], p: usize) -> Option<&[f32; 64]> {
        (p == 0).then_some(acc)
    }

    #[inline(always)]
    fn panel_mut(acc: &mut [f32; 64], p: usize) -> Option<&mut [f32; 64]> {
        (p == 0).then_some(acc)
    }

    #[inline(always)]
    unsafe fn mma<T: WgmmaOp, const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; 64],
        desc_a: u64,
        desc_b: u64,
        scale_d: bool,
    ) {
        // SAFETY: forwarded contract.
        unsafe { T::mma_n128::<A_MN, B_MN>(acc, desc_a, desc_b, scale_d) }
    }
}

impl Width for N256 {
    const TILE: wg::Tile = wg::N256;
    type Acc = [f32; 128];
    const ZERO: [f32; 128] = [0.0; 128];

    #[inline(always)]
    fn panel(acc: &[f32; 128], p: usize) -> Option<&[f32; 64]> {
        match p {
            0 => acc.first_chunk(),
            1 => acc.last_chunk(),
            _ => None,
        }
    }

    #[inline(always)]
    fn panel_mut(acc: &mut [f32; 128], p: usize) -> Option<&mut [f32; 64]> {
        match p {
            0 => acc.first_chunk_mut(),
            1 => acc.last_chunk_mut(),
            _ => None,
        }
    }

    #[inline(always)]
    unsafe fn mma<T: WgmmaOp, const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; 128],
        desc_a: u64,
        desc_b: u64,
        scale_d: bool,
    ) {
        // SAFETY: forwarded contract.
        unsafe { T::mma_n256::<A_MN, B_MN>(acc, desc_a, desc_b, scale_d) }
    }
}

/// `wgmma.m64nNk16` (N = 128 or 256) with bf16 inputs.
pub struct Bf16Wg;
/// `wgmma.m64nNk16` (N = 128 or 256) with f16 inputs.
pub struct F16Wg;
/// `wgmma.m64nNk8` (N = 128 or 256) with TF32 inputs (f32 in memory, low mantissa bits
/// ignored).
pub struct Tf32Wg;

/// The [`WgmmaOp`] of a 16-bit input type: `wgmma.m64nNk16` through the `arch::wgmma` wrappers
/// `$n128` and `$n256`.
macro_rules! wgmma_op_16bit {
    ($op:ty, $in:ty, $n128:ident, $n256:ident) => {
        impl WgmmaOp for $op {
            type In = $in;
            #[inline(always)]
            unsafe fn mma_n128<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; 64],
                desc_a: u64,
                desc_b: u64,
                scale_d: bool,
            ) {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$n128::<A_MN, B_MN>(acc, desc_a, desc_b, scale_d) }
            }
            #[inline(always)]
            unsafe fn mma_n256<const A_MN: bool, const B_MN: bool>(
                acc: &mut [f32; 128],
                desc_a: u64,
                desc_b: u64,
                scale_d: bool,
            ) {
                // SAFETY: forwarded contract.
                unsafe { wgmma::$n256::<A_MN, B_MN>(acc, desc_a, desc_b, scale_d) }
            }
        }
    };
}

wgmma_op_16bit!(Bf16Wg, Bf16, mma_m64n128k16_bf16, mma_m64n256k16_bf16);
wgmma_op_16bit!(F16Wg, F16, mma_m64n128k16_f16, mma_m64n256k16_f16);

impl WgmmaOp for Tf32Wg {
    type In = f32;
    #[inline(always)]
    unsafe fn mma_n128<const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; 64],
        desc_a: u64,
        desc_b: u64,
        scale_d: bool,
    ) {
        const { assert!(!A_MN && !B_MN, "wgmma reads TF32 operands K-major only") };
        // SAFETY: forwarded contract.
        unsafe { wgmma::mma_m64n128k8_tf32(acc, desc_a, desc_b, scale_d) }
    }
    #[inline(always)]
    unsafe fn mma_n256<const A_MN: bool, const B_MN: bool>(
        acc: &mut [f32; 128],
        desc_a: u64,
        desc_b: u64,
        scale_d: bool,
    ) {
        const { assert!(!A_MN && !B_MN, "wgmma reads TF32 operands K-major only") };
        // SAFETY: forwarded contract.
        unsafe { wgmma::mma_m64n256k8_tf32(acc, desc_a, desc_b, scale_d) }
    }
}

/// The shared-memory map of `tile` from the 1024-aligned base.
#[derive(Clone, Copy)]
pub(super) struct Smem {
    base: u32,
    pub(super) tile: wg::Tile,
}

impl Smem {
    /// The map of `tile` in this block's dynamic shared memory.
    #[inline(always)]
    pub(super) fn new(tile: wg::Tile) -> Self {
        Self { base: (smem::dynamic_smem_base() + 1023) & !1023, tile }
    }
    /// The A tile of stage `s` (the B tile follows it).
    #[inline(always)]
    fn a_tile(self, s: u32) -> u32 {
        self.base + s * self.tile.stage_bytes()
    }
    /// The B tile of stage `s`.
    #[inline(always)]
    fn b_tile(self, s: u32) -> u32 {
        self.a_tile(s) + wg::A_TILE_BYTES
    }
    /// `full[s]`: the stage's data has landed.
    #[inline(always)]
    fn full(self, s: u32) -> u32 {
        self.base + self.tile.barriers_offset() + 8 * s
    }
    /// `empty[s]`: every consumer warp is done reading the stage.
    #[inline(always)]
    fn empty(self, s: u32) -> u32 {
        self.base + self.tile.barriers_offset() + 8 * (self.tile.stages + s)
    }
    /// `turn[g]` (ping-pong only): the other consumer has issued the wgmmas of its unit, so
    /// consumer `g` may issue those of its next one.
    #[inline(always)]
    pub(super) fn turn(self, g: u32) -> u32 {
        self.base + self.tile.barriers_offset() + 8 * (2 * self.tile.stages + g)
    }
    /// The epilogue staging buffer of consumer warp `w` (0..8): `warp_staging_bytes`.
    #[inline(always)]
    pub(super) fn staging(self, w: u32) -> u32 {
        self.base + self.tile.epilogue_offset() + w * self.tile.warp_staging_bytes()
    }
}

/// The position in a ring of `stages` stages: stage and phase parity of the next k-tile.
pub(super) struct Ring {
    stage: u32,
    phase: u32,
    stages: u32,
}

impl Ring {
    #[inline(always)]
    pub(super) fn new(stages: u32) -> Self {
        Self { stage: 0, phase: 0, stages }
    }
    #[inline(always)]
    fn advance(&mut self) {
        self.stage += 1;
        if self.stage == self.stages {
            self.stage = 0;
            self.phase ^= 1;
        }
    }
    /// Moves past `n` k-tiles (that another consumer multiplies).
    #[inline(always)]
    pub(super) fn skip(&mut self, n: u32) {
        let to = self.stage + n;
        self.stage = rem(to, self.stages);
        self.phase ^= div(to, self.stages) & 1;
    }
}

/// Which part of its tile's products a [`Unit`] computes, and so where its sums go.
#[derive(Clone, Copy)]
pub(super) enum Part {
    /// All of K: through the epilogue.
    Whole,
    /// K slice `slice` of the split tile `tail_tile` (its index among the split ones, `tile −
    /// whole_tiles`): to the split-K workspace.
    Slice { tail_tile: u32, slice: u32 },
    /// A stream-K segment of tile `tile` (raster order) that is not all of its k-tiles: to the
    /// block's workspace slot, then settled ([`super::wgmma_stream_k`]).
    Stream { tile: u32 },
}

/// One work unit: a block tile of batch `z` and its k-tiles `[kt0, kt1)`: a unit of
/// [`work_unit`] (all of K, or one K slice), or a stream-K segment ([`Work`]).
pub(super) struct Unit {
    z: u32,
    pub(super) m0: u32,
    pub(super) n0: u32,
    pub(super) part: Part,
    kt0: u32,
    kt1: u32,
}

impl Unit {
    /// Unit `u` of the launch `p`, whose tiles are `bn` wide and k-tiles `bk` elements.
    #[inline(always)]
    pub(super) fn new<I: Copy, O: Copy>(
        p: &GemmParams<I, O>,
        u: u32,
        (bn, bk): (u32, u32),
    ) -> Self {
        let w = work_unit(u, p.tiles_m * p.tiles_n, p.split_k, p.whole_tiles);
        let (tile_m, tile_n) = raster(w.tile, p.tiles_m, p.tiles_n, RASTER_GROUP);
        let k_tiles = p.k.div_ceil(bk);
        let (kt0, kt1, part) = match w.slice {
            None => (0, k_tiles, Part::Whole),
            Some(slice) => {
                let kt0 = slice * p.k_tiles_per_split;
                let tail_tile = w.tile - p.whole_tiles;
                (kt0, k_tiles.min(kt0 + p.k_tiles_per_split), Part::Slice { tail_tile, slice })
            }
        };
        Self { z: w.batch, m0: tile_m * wg::BM, n0: tile_n * bn, part, kt0, kt1 }
    }

    /// The stream-K segment of k-tiles `[kt0, kt1)` of tile `tile` (raster order) of the
    /// launch `p` (one batch), whose tiles are `bn` wide and have `k_tiles` k-tiles.
    #[inline(always)]
    fn segment<I: Copy, O: Copy>(
        p: &GemmParams<I, O>,
        tile: u32,
        (kt0, kt1): (u32, u32),
        (bn, k_tiles): (u32, u32),
    ) -> Self {
        let (tile_m, tile_n) = raster(tile, p.tiles_m, p.tiles_n, RASTER_GROUP);
        let part = if kt1 - kt0 == k_tiles { Part::Whole } else { Part::Stream { tile } };
        Self { z: 0, m0: tile_m * wg::BM, n0: tile_n * bn, part, kt0, kt1 }
    }

    /// Its batch.
    #[inline(always)]
    pub(super) fn batch(&self) -> u32 {
        self.z
    }

    /// Its k-tiles (none for a K slice past the end of K).
    #[inline(always)]
    pub(super) fn k_tiles(&self) -> u32 {
        self.kt1.saturating_sub(self.kt0)
    }
}

/// K elements per k-tile (one stage).
pub(super) const fn bk<T: WgmmaOp>() -> u32 {
    wg::BK_BYTES / size_of::<T::In>() as u32
}

/// The work of this block, in order, for the producer and the cooperative consumers alike:
/// units `b, b + gridDim.x, … < p.units` ([`work_unit`]), or under stream-K the segments of its
/// iterations `stream_k::start(b) .. stream_k::start(b + 1)` ([`kernel_abi::gemm_wgmma::
/// stream_k`]). Walked as `while work.more() { let unit = work.take(…); … }`, not as an
/// iterator: with an `Option`-returning `next`, ptxas no longer proved the consumer warps
/// converged at the epilogue's warp-synchronous instructions (80 `WARPSYNC.COLLECTIVE`
/// regions, 368 more instructions, and a spill in the 128 × 256 `rr` kernel).
pub(super) struct Work<const STREAM: bool> {
    next: u32,
    end: u32,
    /// Under stream-K, the k-tiles per tile.
    k_tiles: u32,
}

impl<const STREAM: bool> Work<STREAM> {
    /// This block's work in the launch `p`, whose k-tiles are `bk` elements: stream-K
    /// segments when `STREAM` (a `gemm_wgmma_sk_*` entry).
    #[inline(always)]
    pub(super) fn new<I: Copy, O: Copy>(p: &WgmmaGemmParams<I, O>, bk: u32) -> Self {
        if !STREAM {
            return Self { next: block_idx_x(), end: p.units, k_tiles: 0 };
        }
        let (b, g) = (block_idx_x(), grid_dim_x());
        let k_tiles = p.gemm.k.div_ceil(bk);
        let iters = p.units * k_tiles;
        Self { next: stream_k::start(b, g, iters), end: stream_k::start(b + 1, g, iters), k_tiles }
    }

    /// Under stream-K, the k-tiles of a tile.
    #[inline(always)]
    pub(super) fn k_tiles(&self) -> u32 {
        self.k_tiles
    }

    /// Whether there is a next unit ([`Work::take`]).
    #[inline(always)]
    pub(super) fn more(&self) -> bool {
        self.next < self.end
    }

    /// The next unit, of tiles `bn` wide and k-tiles `bk` elements; [`Work::more`] holds.
    #[inline(always)]
    pub(super) fn take<I: Copy, O: Copy>(
        &mut self,
        p: &WgmmaGemmParams<I, O>,
        (bn, bk): (u32, u32),
    ) -> Unit {
        if !STREAM {
            let unit = Unit::new(&p.gemm, self.next, (bn, bk));
            self.next += grid_dim_x();
            return unit;
        }
        let (tile, kt0) = (div(self.next, self.k_tiles), rem(self.next, self.k_tiles));
        let kt1 = self.k_tiles.min(kt0 + (self.end - self.next));
        self.next += kt1 - kt0;
        Unit::segment(&p.gemm, tile, (kt0, kt1), (bn, self.k_tiles))
    }
}

/// The kernel body of the cooperative tiles ([`N128`], [`N256`]).
///
/// # Safety
/// Launched by `gpu-host` with `wg::THREADS` threads, a one-dimensional grid of at most
/// `p.units` blocks and `W::TILE.smem_bytes()` of dynamic shared memory, with tensor maps of A
/// and B as `kernel_abi::gemm_wgmma` describes for the tile, on buffers it validated.
#[inline(always)]
pub unsafe fn gemm<T: WgmmaOp, W: Width, const A_MN: bool, const B_MN: bool, O: VecIo<8>>(
    p: WgmmaGemmParams<T::In, O>,
) {
    // SAFETY: forwarded contract.
    unsafe { cooperative::<T, W, A_MN, B_MN, O, false>(p) }
}

/// The kernel body of the stream-K tiles ([`wg::STREAM_K`]: [`N256`] geometry, the grid's
/// blocks sharing the tiles' k-tiles; `kernel_abi::gemm_wgmma::stream_k`).
///
/// # Safety
/// As [`gemm`], with `p.units` the number of tiles (one batch, `split_k == 1`), a grid of `g`
/// blocks such that `stream_k::fits(g, units · k_tiles)`, and a workspace of
/// `stream_k::workspace_len(g, units, 256)` f32 whose counters are zero.
#[inline(always)]
pub unsafe fn gemm_stream_k<T: WgmmaOp, const A_MN: bool, const B_MN: bool, O: VecIo<8>>(
    p: WgmmaGemmParams<T::In, O>,
) {
    // SAFETY: forwarded contract.
    unsafe { cooperative::<T, N256, A_MN, B_MN, O, true>(p) }
}

/// [`gemm`] (`STREAM` false) and [`gemm_stream_k`] (`STREAM` true).
///
/// # Safety
/// That of the entry.
#[inline(always)]
unsafe fn cooperative<
    T: WgmmaOp,
    W: Width,
    const A_MN: bool,
    const B_MN: bool,
    O: VecIo<8>,
    const STREAM: bool,
>(
    p: WgmmaGemmParams<T::In, O>,
) {
    let tile = if STREAM { wg::STREAM_K } else { W::TILE };
    // SAFETY: the launch contract is `run_block`'s, which calls the consumer closure in all
    // 256 consumer threads.
    unsafe {
        run_block::<T, A_MN, B_MN, O, STREAM>(
            &p,
            tile,
            #[inline(always)]
            |smem, cwarp| consume::<T, W, A_MN, B_MN, O, STREAM>(&p, smem, cwarp),
        );
    }
}

/// Runs a block of the launch `p` on tiles `tile`, whichever schedule: thread 0 initialises
/// the barriers (full: 1 arrival, empty: `stage_readers`, turn: the 4 warps of a consumer) and
/// fences them into the asynchronous proxy; the block meets at its only `bar.sync`; then
/// `setmaxnreg` moves registers from the producer warpgroup (warps 0–3) to the consumers
/// (warps 4–11), one elected thread of warp 0 runs [`produce`], the rest of the producer
/// warpgroup exits, and every consumer thread runs `consumer(smem, cwarp)` (`cwarp` 0..8;
/// consumer warpgroup `cwarp / 4`). Each role is called inside its branch, after its
/// `setmaxnreg`, so that ptxas sees the two register budgets apart (a role value branched on
/// after a join makes it ignore `setmaxnreg`).
///
/// # Safety
/// All `wg::THREADS` threads of a block call it together, at the kernel's start; the launch
/// is `gpu-host`'s for `tile`: a one-dimensional grid of at most `p.units` blocks,
/// `tile.smem_bytes()` of dynamic shared memory, tensor maps of A and B as
/// `kernel_abi::gemm_wgmma` describes for the tile, on buffers it validated.
#[inline(always)]
pub(super) unsafe fn run_block<
    T: WgmmaOp,
    const A_MN: bool,
    const B_MN: bool,
    O: Elem,
    const STREAM: bool,
>(
    p: &WgmmaGemmParams<T::In, O>,
    tile: wg::Tile,
    consumer: impl FnOnce(Smem, u32),
) {
    let smem = Smem::new(tile);
    let warp = thread_idx_x() / 32;
    // SAFETY: the barriers lie inside the dynamic allocation (`smem_bytes` covers the aligned
    // base plus `used_bytes`); they are initialised before the block barrier and used only
    // after it. The role split is warpgroup-uniform (warps 0–3 / 4–11), as setmaxnreg needs,
    // and `elect.sync` runs in all of warp 0. No thread meets another block barrier, so the
    // producer threads that exit early cannot deadlock anyone.
    unsafe {
        if thread_idx_x() == 0 {
            for s in 0..tile.stages {
                mbarrier::init(smem.full(s), 1);
                mbarrier::init(smem.empty(s), tile.stage_readers());
            }
            if tile.pingpong {
                mbarrier::init(smem.turn(0), 4);
                mbarrier::init(smem.turn(1), 4);
            }
            tma::fence_proxy_async_shared_cta();
        }
        sync::bar_sync();
        if warp < 4 {
            warpgroup::setmaxnreg_dec::<{ wg::PRODUCER_REGS }>();
            if warp == 0 && sync::elect_sync() {
                produce::<T, A_MN, B_MN, O, STREAM>(p, smem);
            }
        } else {
            warpgroup::setmaxnreg_inc::<{ wg::CONSUMER_REGS }>();
            consumer(smem, warp - 4);
        }
    }
}

/// The producer: one thread acquiring the two tensor maps, then issuing the TMA loads of every
/// k-tile of every unit of the block, in unit order, whichever consumer multiplies them. For a
/// whole tile it also asks L2 for the global input of the tile's epilogue
/// ([`Epilogue::l2_rows`]: the pre-activation of a GELU backward, or the old C under β ≠ 0),
/// which the consumers read after the mainloop: a few rows after each k-tile's loads, all of
/// them by the middle of the unit's k-tiles.
///
/// # Safety
/// One thread of the block calls it, after [`run_block`]'s prologue; the tensor maps are valid for
/// `smem.tile`.
#[inline(always)]
unsafe fn produce<T: WgmmaOp, const A_MN: bool, const B_MN: bool, O: Elem, const STREAM: bool>(
    p: &WgmmaGemmParams<T::In, O>,
    smem: Smem,
) {
    let tile = smem.tile;
    let (bn, bk) = (tile.bn, bk::<T>());
    let (tmap_a, tmap_b) = (p.tmap_a.as_ptr(), p.tmap_b.as_ptr());
    // SAFETY: the launcher's tensor maps are 64-byte aligned 128-byte maps in global memory,
    // which the host wrote before the launch and nothing modifies during it.
    unsafe {
        tma::fence_proxy_tensormap_acquire_sys(tmap_a);
        tma::fence_proxy_tensormap_acquire_sys(tmap_b);
    }
    let mut ring = Ring::new(tile.stages);
    let mut work = Work::<STREAM>::new(p, bk);
    while work.more() {
        let unit = work.take(p, (bn, bk));
        // The epilogue's rows to prefetch after each k-tile: all of them over the first half
        // of the unit's k-tiles, a few per k-tile, so that no stage's loads wait long for them.
        let prefetch_rows = div(2 * wg::BM + unit.k_tiles() - 1, unit.k_tiles());
        let l2 = match unit.part {
            // SAFETY: a whole tile's epilogue is `Epilogue::new`'s; `n0` is a multiple of 64.
            Part::Whole => unsafe { Epilogue::new(&p.gemm, unit.z).l2_rows(unit.n0, bn) },
            Part::Slice { .. } | Part::Stream { .. } => None,
        };
        for kt in unit.kt0..unit.kt1 {
            let s = ring.stage;
            let k0 = kt * bk;
            // SAFETY: empty[s] completing phase `phase ^ 1` means every consumer warp released
            // the k-tile that last used stage s (or none did: the first pass), so its tiles may
            // be overwritten; full[s] then expects exactly the tiles' bytes, which the loads
            // complete on it. Destinations are 1024-aligned and sized for the boxes.
            unsafe {
                mbarrier::wait(smem.empty(s), ring.phase ^ 1);
                mbarrier::arrive_expect_tx(smem.full(s), tile.stage_bytes());
                let a = (k0, unit.m0, unit.z);
                load_tile::<A_MN>(smem.a_tile(s), tmap_a, a, wg::BM, smem.full(s));
                load_tile::<B_MN>(smem.b_tile(s), tmap_b, (k0, unit.n0, unit.z), bn, smem.full(s));
            }
            if let Some(l2) = l2 {
                let first = unit.m0 + (kt - unit.kt0) * prefetch_rows;
                let end = (first + prefetch_rows).min(unit.m0 + wg::BM).min(p.gemm.m);
                for m in first..end {
                    // SAFETY: m < M.
                    unsafe { l2.prefetch(m) };
                }
            }
            ring.advance();
        }
    }
}

/// Loads one `rows`-row × `BK_BYTES` tile of batch `z` (rows of M or N starting at `mn0`, K
/// from `k0`) into `dst`: K-major, one box of `rows` rows; M/N-major, `rows / 64` boxes of 64
/// elements of M/N × `BK` rows of K, 8 KiB apart (`MN_ATOM_BYTES`).
///
/// # Safety
/// As `tma::load_3d` for each box: `dst` a 1024-aligned tile of `rows · BK_BYTES` bytes, `map`
/// the operand's tensor map in the majorness `MN` (box of `rows` rows when K-major), `full` an
/// mbarrier expecting the bytes; `rows` is 128 or 256; `k0` a multiple of the K step
/// (`BK_BYTES` of K) and `mn0` of 64, so that every box's inner coordinate is 16-byte aligned,
/// as TMA requires.
#[inline(always)]
unsafe fn load_tile<const MN: bool>(
    dst: u32,
    map: *const TensorMap,
    (k0, mn0, z): (u32, u32, u32),
    rows: u32,
    full: u32,
) {
    let (k0, mn0, z) = (k0 as i32, mn0 as i32, z as i32);
    // SAFETY: forwarded contract.
    unsafe {
        if MN {
            unroll!(i in 0..4 => {
                if (i as u32) < rows / 64 {
                    let at = dst + i as u32 * MN_ATOM_BYTES;
                    tma::load_3d(at, map, [mn0 + 64 * i as i32, k0, z], full);
                }
            });
        } else {
            tma::load_3d(dst, map, [k0, mn0, z], full);
        }
    }
}

/// The descriptor of k-step `kk` (32 bytes of K) of the 64 or 128 rows of a tile starting at
/// `rows` (a 1024-aligned address inside the tile; for M/N-major tiles an 8 KiB atom column).
#[inline(always)]
pub(super) fn k_step_desc<const MN: bool>(rows: u32, kk: u32) -> u64 {
    if MN {
        wgmma::desc_mn_major_sw128(rows + 16 * 128 * kk, MN_ATOM_BYTES)
    } else {
        wgmma::desc_k_major_sw128(rows + wg::WGMMA_K_BYTES * kk)
    }
}

/// Issues the wgmmas of `unit`'s k-tiles out of the ring: per k-tile, waits for its stage
/// (`full`), fences, calls `mma(a_tile, b_tile, kk, scale_d)` for its 4 k-steps (`scale_d`
/// false for the unit's first, which overwrites the accumulators), commits, calls `between()`
/// while the tensor cores multiply, waits until only this k-tile's group is pending and
/// releases the previous k-tile's stage (`empty`, lane 0 of each warp). Returns the last
/// k-tile's stage, still held: [`drain`] releases it.
///
/// # Safety
/// The 128 threads of a consumer warpgroup call it together (the wgmma sequence is
/// warpgroup-uniform), with `ring` at `unit`'s first k-tile; `mma` issues wgmmas reading
/// only the given tiles. The accumulators `mma` writes are read only after [`drain`];
/// `between` touches neither them nor the stages.
#[inline(always)]
pub(super) unsafe fn mainloop(
    smem: Smem,
    ring: &mut Ring,
    unit: &Unit,
    lane: u32,
    mut mma: impl FnMut(u32, u32, u32, bool),
    mut between: impl FnMut(),
) -> Option<u32> {
    let mut held = None;
    for kt in unit.kt0..unit.kt1 {
        let s = ring.stage;
        // SAFETY: full[s] completing phase `phase` means both tiles of this k-tile have landed
        // (the TMA's complete_tx) and are visible. A stage is released only after the
        // wait_group that covers the wgmmas reading it: `wait_group 1` after this k-tile's
        // commit leaves only this k-tile's group pending, so the previous k-tile's stage is
        // free.
        unsafe {
            mbarrier::wait(smem.full(s), ring.phase);
            wgmma::fence();
            unroll!(kk in 0..4 => {
                mma(smem.a_tile(s), smem.b_tile(s), kk as u32, kk > 0 || kt > unit.kt0);
            });
            wgmma::commit_group();
            between();
            wgmma::wait_group::<1>();
            if let Some(previous) = held
                && lane == 0
            {
                mbarrier::arrive(smem.empty(previous));
            }
        }
        held = Some(s);
        ring.advance();
    }
    held
}

/// Waits for every wgmma of the warpgroup (`wait_group 0`), then releases `held`, the stage
/// [`mainloop`] kept: the accumulators are final.
///
/// # Safety
/// The consumer warpgroup's 128 threads call it together after [`mainloop`]. The wait runs
/// even for a unit without k-tiles (it is then immediate), so that on every path to the
/// epilogue ptxas sees it between the wgmmas and the accumulators' reads.
#[inline(always)]
pub(super) unsafe fn drain(smem: Smem, held: Option<u32>, lane: u32) {
    // SAFETY: after `wait_group 0` no wgmma reads the held stage any more.
    unsafe {
        wgmma::wait_group::<0>();
        if let Some(s) = held
            && lane == 0
        {
            mbarrier::arrive(smem.empty(s));
        }
    }
}

/// A cooperative consumer warp (`cwarp` 0..8 among the consumer warps; consumer warpgroup
/// `cwarp / 4`): its warpgroup's 64 rows of every unit of the block, through the epilogue.
///
/// # Safety
/// All 256 consumer threads call it together, after [`run_block`]'s prologue.
#[inline(always)]
unsafe fn consume<
    T: WgmmaOp,
    W: Width,
    const A_MN: bool,
    const B_MN: bool,
    O: VecIo<8>,
    const STREAM: bool,
>(
    p: &WgmmaGemmParams<T::In, O>,
    smem: Smem,
    cwarp: u32,
) {
    let (bn, bk) = (W::TILE.bn, bk::<T>());
    let (group, warp_in_group) = (cwarp / 4, cwarp % 4);
    let lane = lane_id();
    // Consumer g's 64 rows of A: 64 K-major rows of 128 bytes, or the g-th M atom column;
    // both 8 KiB into the tile.
    let a_rows = group * MN_ATOM_BYTES;
    let mut ring = Ring::new(W::TILE.stages);
    let mut work = Work::<STREAM>::new(p, bk);
    while work.more() {
        let unit = work.take(p, (bn, bk));
        let mut acc = W::ZERO;
        let mma = #[inline(always)]
        |a, b, kk, scale_d| {
            let (desc_a, desc_b) =
                (k_step_desc::<A_MN>(a + a_rows, kk), k_step_desc::<B_MN>(b, kk));
            // SAFETY: `mainloop` calls it as it requires: the wgmma reads this k-tile's stage.
            unsafe { W::mma::<T, A_MN, B_MN>(&mut acc, desc_a, desc_b, scale_d) };
        };
        // SAFETY: every consumer thread walks the same units and k-tiles.
        let held = unsafe { mainloop(smem, &mut ring, &unit, lane, mma, || {}) };
        // SAFETY: the whole warpgroup, after its mainloop.
        unsafe { drain(smem, held, lane) };
        // A partial stream-K segment's warp writes its rows only when it is the last of the
        // tile's to finish, with the sums of them all.
        let write = match unit.part {
            _ if !STREAM => true,
            // SAFETY: the warp is converged (the loop is warp-uniform) and its accumulators
            // final; the launch is a stream-K one.
            Part::Stream { tile } => unsafe {
                wgmma_stream_k::settle::<W, _, _>(p, tile, work.k_tiles(), &mut acc, cwarp)
            },
            Part::Whole | Part::Slice { .. } => true,
        };
        let row = 64 * group + 16 * warp_in_group;
        if write {
            // SAFETY: the warp is converged here (the loop above is warp-uniform); the staging
            // buffer is this warp's own, disjoint from the stages.
            unsafe {
                write_unit::<W, O, 1>(&p.gemm, &unit, &[acc], smem.staging(cwarp), lane, row);
            }
        }
    }
}

/// Writes a consumer warp's accumulators of `unit`, `accs[h]` rows `row + 64h .. row + 64h +
/// 16` of its tile, through the epilogue ([`Epilogue::new`]) for a whole tile (or a settled
/// stream-K segment, whose accumulators hold all its tile's sums), or as the slice's
/// partial sums: at their place in M × N ([`Epilogue::partials`]) when every tile is split, in
/// the tile's own block ([`Epilogue::tail_partials`], tile coordinates) when only the tail is.
///
/// # Safety
/// As [`write_acc`]; `unit` is one of the launch's (`units` as `kernel_abi::gemm_wgmma`
/// describes), `W` 128 columns wide when `p.whole_tiles > 0`.
#[inline(always)]
pub(super) unsafe fn write_unit<W: Width, O: VecIo<8>, const H: usize>(
    p: &GemmParams<impl Copy, O>,
    unit: &Unit,
    accs: &[W::Acc; H],
    staging: u32,
    lane: u32,
    row: u32,
) {
    // SAFETY: forwarded contract; a tail tile's block holds its rows and columns inside M × N
    // in tile coordinates.
    unsafe {
        match unit.part {
            Part::Whole | Part::Stream { .. } => {
                let rows = (unit.m0 + row, unit.n0, p.m);
                write_acc::<W, _, H>(&Epilogue::new(p, unit.z), accs, staging, lane, rows);
            }
            Part::Slice { tail_tile, slice } => {
                let (sink, rows) = if p.whole_tiles == 0 {
                    (Epilogue::partials(p, unit.z, slice), (unit.m0 + row, unit.n0, p.m))
                } else {
                    let sink = Epilogue::tail_partials(p, unit.z, (tail_tile, slice), unit.n0);
                    (sink, (row, 0, p.m - unit.m0))
                };
                write_acc::<W, _, H>(&sink, accs, staging, lane, rows);
            }
        }
    }
}

/// Writes a consumer warp's 16 rows × BN columns of accumulators of each `accs[h]` (rows from
/// `m_base + 64h`) through `sink`, as 16 × 64 pieces ([`write_pieces`]), all packed or none
/// ([`Epilogue::packs`], tested once).
///
/// # Safety
/// As [`write_piece`], with `(m_base, n_base, m_len)` the warp's first row, the tile's first
/// column and M.
#[inline(always)]
unsafe fn write_acc<W: Width, O: Elem, const H: usize>(
    sink: &Epilogue<O>,
    accs: &[W::Acc; H],
    staging: u32,
    lane: u32,
    rows: (u32, u32, u32),
) {
    // SAFETY: forwarded contract; the packed path only where `packs` holds.
    unsafe {
        if sink.packs() {
            write_pieces::<W, O, H, true>(sink, accs, staging, lane, rows);
        } else {
            write_pieces::<W, O, H, false>(sink, accs, staging, lane, rows);
        }
    }
}

/// The m16n8 C fragments of piece `h` (0 or 1: columns `64h .. 64h + 64`) of a 128-column
/// panel of a consumer warp's accumulators: register `32h + 4j + e` of the panel is element
/// `e` of n8 tile `j`.
#[inline(always)]
pub(super) fn piece_fragments(panel: &[f32; 64], h: usize) -> [[f32; 4]; 8] {
    let mut frag = [[0.0f32; 4]; 8];
    unroll!(j in 0..8 => {
        unroll!(e in 0..4 => {
            frag[j][e] = panel[32 * h + 4 * j + e];
        });
    });
    frag
}

/// [`write_acc`]'s pieces, all packed (`PACKED`) or none ([`write_piece`]): register `i` of each 128-column panel of `accs[a]` is element `i % 4` of
/// the m16n8 C fragment of n8 tile `i / 4` of rows `m_base + 64a ..`. The pieces go column
/// block by column block, so that the packed path loads a block's bias words once for the
/// `H` accumulator sets (the ping-pong kernel's two).
///
/// # Safety
/// As [`write_acc`]; `PACKED` only if `sink.packs()`.
#[inline(always)]
unsafe fn write_pieces<W: Width, O: Elem, const H: usize, const PACKED: bool>(
    sink: &Epilogue<O>,
    accs: &[W::Acc; H],
    staging: u32,
    lane: u32,
    (m_base, n_base, m_len): (u32, u32, u32),
) {
    const { assert!(H <= 2, "the accumulator sets are unrolled twice") };
    unroll!(p in 0..2 => {
        if W::panel(&accs[0], p).is_some() {
            unroll!(h in 0..2 => {
                let n0 = n_base + 128 * p as u32 + 64 * h as u32;
                // SAFETY: `packs` holds on the packed path; n0 is a multiple of 64.
                let bias = PACKED.then(|| unsafe { sink.piece_bias(n0, lane) });
                unroll!(a in 0..2 => {
                    if a < H && let Some(panel) = W::panel(&accs[a], p) {
                        let frag = piece_fragments(panel, h);
                        let rows = (m_base + 64 * a as u32, n0, m_len);
                        // SAFETY: forwarded contract; a bias only on the packed path.
                        unsafe { write_piece(sink, &frag, staging, lane, rows, bias) };
                    }
                });
            });
        }
    });
}
