//! Flash attention forward (see `kernel_abi::flash` for the contract and the tiling).
//!
//! Per warp (16 query rows) and key/value tile (64 rows), with `g = lane / 4`, `q = lane % 4`:
//! - `S = Q·Kᵀ`: 4 k-steps × 8 n8-tiles of `mma.m16n8k16`; the Q fragments are loaded once
//!   (`ldmatrix.x4`), K's with `ldmatrix.x4` (K rows are the B operand's columns);
//! - the accumulators hold rows `g` and `g + 8`, columns `8n + 2q, +1`: each row's maximum is
//!   reduced over the 4 lanes of a quad with two butterflies; the running sums stay per lane
//!   and are reduced once at the end;
//! - `P = 2^(S·scale·log2 e − max)` goes straight from the S accumulators into the A fragments
//!   of `O += P·V` (the m16n8 accumulator layout of two adjacent n8-tiles is the m16k16 A
//!   layout), rounded to the storage type; V's fragments come from `ldmatrix.x4.trans`.
//!
//! Shared memory: the Q tile, then two stages of K and two of V (64 × 64 16-bit values each,
//! rows XOR-swizzled by `kernel_abi::flash::tile_offset`), filled by `cp.async` one tile ahead
//! of the compute.
//!
//! The sm_90a module also has the forward and the backward's tiled kernels on `wgmma`
//! (`forward_wgmma`, `backward_wgmma`, with their building blocks in `wgmma`); the online
//! softmax ([`online_softmax`]) and the output's store ([`store_output`]) serve both forwards.

use crate::arch::cp_async::{cp_async_cg_16, cp_async_commit_group, cp_async_wait_group};
use crate::arch::cvt::{pack_bf16x2, pack_f16x2};
use crate::arch::ldmatrix::{ldmatrix_x4, ldmatrix_x4_trans};
use crate::arch::math::{ex2_approx_f32, lg2_approx_f32};
use crate::arch::shfl::{FULL_MASK, shfl_bfly_f32};
use crate::arch::smem::dynamic_smem_base;
use crate::arch::sync::bar_sync;
use crate::arch::{
    block_idx_x, block_idx_y, block_idx_z, grid_dim_y, lane_id, thread_idx_x, warp_idx_x,
};
use crate::entry::entries;
use crate::gemm::tensor_op::{Bf16Op, F16Op, TensorOp};
use crate::unroll::unroll;
use core::f32::consts::LN_2;
use core::f32::math::mul_add;
use kernel_abi::flash::{BLOCK_KV, BLOCK_Q, FORWARD_THREADS, FlashForwardParams, HD, tile_offset};

mod backward;
#[cfg(target_feature = "sm_90a")]
mod backward_wgmma;
#[cfg(target_feature = "sm_90a")]
mod forward_wgmma;
#[cfg(target_feature = "sm_90a")]
mod wgmma;

/// A 16-bit tensor-core type, with the packing of two f32 into one operand register.
trait FlashOp: TensorOp {
    /// Rounds `lo` and `hi` to the storage type and packs them, `lo` in the low half.
    fn pack(lo: f32, hi: f32) -> u32;
}

impl FlashOp for Bf16Op {
    #[inline(always)]
    fn pack(lo: f32, hi: f32) -> u32 {
        pack_bf16x2(lo, hi)
    }
}

impl FlashOp for F16Op {
    #[inline(always)]
    fn pack(lo: f32, hi: f32) -> u32 {
        pack_f16x2(lo, hi)
    }
}

/// 16-byte chunks per 64-value row.
const ROW_CHUNKS: u32 = HD / 8;
/// Bytes of one 64 × 64 16-bit tile.
const TILE_BYTES: u32 = BLOCK_KV * HD * 2;
/// Chunks each thread copies per tile.
const CHUNKS_PER_THREAD: u32 = BLOCK_KV * ROW_CHUNKS / FORWARD_THREADS;

/// Where a block's tiles come from: the 64 columns at `offset` of the rows of one sequence,
/// `stride` elements apart (head `h` of a qkv part, or of `out`/`dout`).
struct Source<T> {
    ptr: *const T,
    t: u32,
    stride: usize,
    offset: usize,
}

impl<T> Source<T> {
    /// Head `h`'s columns of sequence `b` in a (B, T, `stride`) buffer, starting at column
    /// `part_start` (`part · C` for part `part` of qkv).
    #[inline(always)]
    fn new(ptr: *const T, t: u32, stride: u32, b: u32, part_start: u32, h: u32) -> Self {
        let stride = stride as usize;
        let offset = b as usize * t as usize * stride + (part_start + h * HD) as usize;
        Self { ptr, t, stride, offset }
    }

    /// Issues the `cp.async` copies of rows `row0..row0 + 64` into the tile at shared address
    /// `tile`; rows at or past `t` are zero-filled.
    ///
    /// # Safety
    /// Every thread of the block (of 128) calls it; the buffer holds the rows of `new`'s shape
    /// with 16-byte aligned rows, and `tile` is a 16-byte aligned tile of shared memory not
    /// read until a covering wait and barrier.
    #[inline(always)]
    unsafe fn load(&self, tile: u32, row0: u32) {
        unroll!(i in 0..4 => {
            let idx = thread_idx_x() + i as u32 * FORWARD_THREADS;
            let (row, chunk) = (idx / ROW_CHUNKS, idx % ROW_CHUNKS);
            let t = row0 + row;
            let (src_t, bytes) = if t < self.t { (t, 16) } else { (0, 0) };
            let elem = self.offset + src_t as usize * self.stride + (chunk * 8) as usize;
            // SAFETY: `elem` is inside the buffer (row `src_t < t` of the sequence) and
            // 16-byte aligned (the launcher checked the base and the row stride).
            unsafe { cp_async_cg_16(tile + tile_offset(row, chunk), self.ptr.add(elem).cast(), bytes) };
        });
    }
}

const _: () = assert!(CHUNKS_PER_THREAD == 4, "Source::load copies 4 chunks per thread");

/// Two tile streams in shared memory (K and V, or Q and dO): each stream's stages
/// [`TILE_BYTES`] apart from its address on. [`Self::step`] double-buffers two stages (the
/// `mma.sync` kernels); the wgmma kernels walk theirs with `wgmma::StageRing` (two for the
/// forward, three for the backward).
struct StreamPair<'a, T> {
    first: (&'a Source<T>, u32),
    second: (&'a Source<T>, u32),
}

impl<T> StreamPair<'_, T> {
    /// One step of the tile loop at `stage` (0 or 1): issues both streams' tiles starting at
    /// row `next_row` (when there is a next tile) into the other stage, commits (possibly an
    /// empty group), waits until this stage's tiles and everything committed before them have
    /// landed, and synchronises the block. Returns this stage's two tile addresses.
    ///
    /// # Safety
    /// Block-uniform call site; the other stage was last read before the barrier that ended
    /// the previous step; the sources' buffers are as `Source::load` requires.
    #[inline(always)]
    unsafe fn step(&self, stage: u32, next_row: Option<u32>) -> (u32, u32) {
        // SAFETY: the caller's contract.
        unsafe {
            let tiles = self.issue_and_wait(stage, next_row);
            bar_sync();
            tiles
        }
    }

    /// [`Self::step`] without the barrier: this thread's own copies of this stage have landed.
    ///
    /// # Safety
    /// As [`Self::step`]; the caller synchronises the block before reading the tiles.
    #[inline(always)]
    unsafe fn issue_and_wait(&self, stage: u32, next_row: Option<u32>) -> (u32, u32) {
        // SAFETY: the caller's contract.
        unsafe {
            if let Some(row) = next_row {
                self.issue(1 - stage, row);
            }
            cp_async_commit_group();
            cp_async_wait_group::<1>();
        }
        self.tiles(stage)
    }

    /// Issues (without committing) both streams' tiles starting at row `row` into `stage`.
    ///
    /// # Safety
    /// Block-uniform call site; `stage` is not read until a covering wait and barrier, nor read
    /// by anyone since the last barrier; the sources' buffers are as `Source::load` requires.
    #[inline(always)]
    unsafe fn issue(&self, stage: u32, row: u32) {
        let ((a, a0), (b, b0)) = (self.first, self.second);
        // SAFETY: the caller's contract.
        unsafe {
            a.load(a0 + stage * TILE_BYTES, row);
            b.load(b0 + stage * TILE_BYTES, row);
        }
    }

    /// The shared addresses of both streams' tiles in `stage`.
    #[inline(always)]
    fn tiles(&self, stage: u32) -> (u32, u32) {
        (self.first.1 + stage * TILE_BYTES, self.second.1 + stage * TILE_BYTES)
    }
}

/// This block's (sequence, head) in a tiled kernel's grid `(NH, tiles, B)`.
///
/// Blocks start in the order of their linear index, x fastest: every head of a sequence takes
/// its tile of rank 0 (the one with the most work: [`tile_rank`]), then every head its rank 1,
/// and so on, sequence by sequence. The last blocks to start are light ones, and the blocks
/// running together cover a sequence or two, whose tiles they share in L2. (On the grid `(tiles,
/// NH, B)`, before 2026-11-27, a head's heaviest tile started with its lightest, and the last
/// heads' heaviest tiles could run on alone after the others had finished.)
#[inline(always)]
fn seq_head() -> (u32, u32) {
    (block_idx_z(), block_idx_x())
}

/// This block's tile's rank by the work it holds, 0 the most ([`seq_head`]): causal tiles
/// range from one tile of the other operand to all of them.
#[inline(always)]
fn tile_rank() -> u32 {
    block_idx_y()
}

/// The tiles of a sequence ([`seq_head`]'s grid).
#[inline(always)]
fn tile_count() -> u32 {
    grid_dim_y()
}

/// What both forwards (`mma.sync` and wgmma) set up: the query tile (the last first, so the
/// longest rows start first), the shared-memory layout from `smem` (Q, then two stages of K,
/// then two of V, each [`TILE_BYTES`]), this lane's two rows, and the first `cp.async` group:
/// Q and the first K and V tiles.
struct ForwardBlock<T> {
    q_tile: u32,
    sq: u32,
    kv: [(Source<T>, u32); 2],
    rows: [u32; 2],
}

impl<T: Copy> ForwardBlock<T> {
    /// Sets up the block and issues its first group.
    ///
    /// # Safety
    /// Every thread of the block calls it; `smem` starts the launch's five tiles (16-byte
    /// aligned); the buffers have the shapes the launcher checked.
    #[inline(always)]
    unsafe fn start(p: &FlashForwardParams<T>, smem: u32) -> Self {
        let q_tile = tile_count() - 1 - tile_rank();
        let ((b, h), channels) = (seq_head(), p.nh * HD);
        let part = |i: u32| Source::new(p.qkv.as_ptr(), p.t, 3 * channels, b, i * channels, h);
        let q0 = q_tile * BLOCK_Q;
        let row0 = q0 + warp_idx_x() * 16 + lane_id() / 4;
        let block = Self {
            q_tile,
            sq: smem,
            kv: [(part(1), smem + TILE_BYTES), (part(2), smem + 3 * TILE_BYTES)],
            rows: [row0, row0 + 8],
        };
        // SAFETY: block-uniform calls; the tiles are inside the launch's shared memory.
        unsafe {
            part(0).load(block.sq, q0);
            block.kv[0].0.load(block.kv[0].1, 0);
            block.kv[1].0.load(block.kv[1].1, 0);
            cp_async_commit_group();
        }
        block
    }

    /// The K and V streams.
    #[inline(always)]
    fn kv(&self) -> StreamPair<'_, T> {
        let [(k, sk), (v, sv)] = &self.kv;
        StreamPair { first: (k, *sk), second: (v, *sv) }
    }
}

/// The maximum of `x` over the 4 lanes of this lane's quad.
///
/// # Safety
/// All 32 lanes call it together.
#[inline(always)]
unsafe fn quad_max(mut x: f32) -> f32 {
    // SAFETY: the caller's convergence contract.
    unsafe {
        x = x.max(shfl_bfly_f32(FULL_MASK, x, 1));
        x.max(shfl_bfly_f32(FULL_MASK, x, 2))
    }
}

/// The sum of `x` over the 4 lanes of this lane's quad.
///
/// # Safety
/// All 32 lanes call it together.
#[inline(always)]
unsafe fn quad_sum(mut x: f32) -> f32 {
    // SAFETY: the caller's convergence contract.
    unsafe {
        x += shfl_bfly_f32(FULL_MASK, x, 1);
        x + shfl_bfly_f32(FULL_MASK, x, 2)
    }
}

/// The online softmax's running state of a lane's two rows (`g`, `g + 8` of its warp's 16): the
/// maximum of the scaled scores so far (base-2 exponent units) and the sum of this lane's
/// `2^(s·scale − max)` (the quad's four partial sums are added once, at the end).
struct RowState {
    max: [f32; 2],
    sum: [f32; 2],
}

impl RowState {
    #[inline(always)]
    fn new() -> Self {
        Self { max: [f32::NEG_INFINITY; 2], sum: [0.0; 2] }
    }
}

/// One key/value tile of the online softmax: masks the diagonal tile (`diagonal`: a
/// warp-uniform branch, so the other tiles skip the mask's compares and selects), takes each
/// row's maximum of the raw scores — scaled to base-2 exponents (a positive factor: the same
/// maximum as of the scaled scores) it updates the running maximum — rescales the running sums
/// and the output accumulator `o`, and turns `s` into `P = 2^(s·scale − max)` (one `fma` each),
/// adding it to the sums.
///
/// # Safety
/// All 32 lanes call it together; `s` and `o` are this lane's m16n8 accumulator tiles of its
/// warp's 16 query rows (the tile's query and key offsets equal when `diagonal`).
#[inline(always)]
unsafe fn online_softmax(
    s: &mut [[f32; 4]; 8],
    o: &mut [[f32; 4]; 8],
    state: &mut RowState,
    diagonal: bool,
    scale_log2: f32,
) {
    let (warp, lane) = (warp_idx_x() % 4, lane_id());
    let (g, quad) = (lane / 4, lane % 4);
    let mut tile_max = [f32::NEG_INFINITY; 2];
    if diagonal {
        // Column `8n + 2·quad + (e & 1)` of the tile lies past row `warp·16 + g + 8·(e / 2)`
        // (the tile's query and key offsets are equal) when `8n + (e & 1)` exceeds `last`.
        let last = |r: i32| (warp * 16 + g) as i32 + 8 * r - 2 * quad as i32;
        let last = [last(0), last(1)];
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => {
                if (8 * n + (e & 1)) as i32 > last[e / 2] {
                    s[n][e] = f32::NEG_INFINITY;
                }
                tile_max[e / 2] = tile_max[e / 2].max(s[n][e]);
            });
        });
    } else {
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => { tile_max[e / 2] = tile_max[e / 2].max(s[n][e]) });
        });
    }
    let RowState { max, sum } = state;
    let mut alpha = [0.0f32; 2];
    unroll!(r in 0..2 => {
        // SAFETY: the caller's convergence contract.
        let m = max[r].max(unsafe { quad_max(tile_max[r]) } * scale_log2);
        alpha[r] = ex2_approx_f32(max[r] - m);
        max[r] = m;
        sum[r] *= alpha[r];
    });
    unroll!(n in 0..8 => {
        unroll!(e in 0..4 => {
            s[n][e] = ex2_approx_f32(mul_add(s[n][e], scale_log2, -max[e / 2]));
            sum[e / 2] += s[n][e];
            o[n][e] *= alpha[e / 2];
        });
    });
}

/// Writes a lane's two rows of the output (`o / Σ`, rounded to the storage type) and their
/// log-sum-exp, skipping rows at or past `t`.
///
/// # Safety
/// All 32 lanes call it together; `rows` are this lane's rows `g`, `g + 8` of its warp's 16, of
/// this block's (sequence, head); the buffers have the shapes the launcher checked.
#[inline(always)]
unsafe fn store_output<Op: FlashOp>(
    p: &FlashForwardParams<Op::In>,
    o: &[[f32; 4]; 8],
    state: &RowState,
    rows: [u32; 2],
) {
    let ((b, h), quad) = (seq_head(), lane_id() % 4);
    let channels = (p.nh * HD) as usize;
    unroll!(r in 0..2 => {
        // SAFETY: the caller's convergence contract.
        let total = unsafe { quad_sum(state.sum[r]) };
        let row = rows[r];
        if row < p.t {
            let inv = 1.0 / total;
            let at = (b as usize * p.t as usize + row as usize) * channels + (h * HD) as usize;
            unroll!(n in 0..8 => {
                let d = n * 8 + 2 * quad as usize;
                let word = Op::pack(o[n][2 * r] * inv, o[n][2 * r + 1] * inv);
                // SAFETY: row < t; `d` is even, so the pair is 4-byte aligned inside the row.
                unsafe { *p.out.as_mut_ptr().add(at + d).cast::<u32>() = word };
            });
            if quad == 0 {
                let lse = (state.max[r] + lg2_approx_f32(total)) * LN_2;
                // SAFETY: (b, h, row) is inside the (B, NH, T) buffer.
                unsafe { *p.lse.as_mut_ptr().add(((b * p.nh + h) * p.t + row) as usize) = lse };
            }
        }
    });
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `flash_attention_forward` with `FORWARD_THREADS` threads, the grid
/// `(NH, ⌈T / BLOCK_Q⌉, B)` and `FORWARD_SHARED_BYTES` of dynamic shared memory, after checking
/// `C = NH·HD`, the (B, T, 3C), (B, T, C) and (B, NH, T) lengths of `qkv`, `out` and `lse`,
/// `B·NH·T <= u32::MAX`, and `qkv` 16-byte and `out` 4-byte aligned.
#[inline(always)]
unsafe fn forward<Op: FlashOp>(p: FlashForwardParams<Op::In>) {
    // SAFETY: every thread, at the start; the launch's shared memory holds the five tiles.
    let block = unsafe { ForwardBlock::start(&p, dynamic_smem_base()) };
    let (q_tile, sq) = (block.q_tile, block.sq);
    let (warp, lane) = (warp_idx_x(), lane_id());
    let kv = block.kv();
    let kv_tiles = q_tile + 1;
    let mut qa = [[0u32; 4]; 4];
    let mut o = [[0.0f32; 4]; 8];
    let mut rows_state = RowState::new();
    let mut j = 0;
    while j < kv_tiles {
        let next_row = (j + 1 < kv_tiles).then(|| (j + 1) * BLOCK_KV);
        // SAFETY: block-uniform; the previous step ended with a barrier.
        let (ks, vs) = unsafe { kv.step(j % 2, next_row) };
        if j == 0 {
            unroll!(kk in 0..4 => {
                let row = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
                let chunk = 2 * kk as u32 + lane / 16;
                // SAFETY: warp-uniform; inside the Q tile, which the wait and barrier above
                // made visible.
                qa[kk] = unsafe { ldmatrix_x4(sq + tile_offset(row, chunk)) };
            });
        }

        let mut s = [[0.0f32; 4]; 8];
        unroll!(kk in 0..4 => {
            unroll!(np in 0..4 => {
                let row = np as u32 * 16 + 8 * (lane / 16) + lane % 8;
                let chunk = 2 * kk as u32 + (lane / 8) % 2;
                // SAFETY: warp-uniform; inside this stage's K tile.
                unsafe {
                    let r = ldmatrix_x4(ks + tile_offset(row, chunk));
                    s[2 * np] = Op::mma(qa[kk], [r[0], r[1]], s[2 * np]);
                    s[2 * np + 1] = Op::mma(qa[kk], [r[2], r[3]], s[2 * np + 1]);
                }
            });
        });

        // SAFETY: all lanes are here (the loop bounds are block-uniform).
        unsafe { online_softmax(&mut s, &mut o, &mut rows_state, j == q_tile, p.scale_log2) };

        unroll!(kk in 0..4 => {
            let a = [
                Op::pack(s[2 * kk][0], s[2 * kk][1]),
                Op::pack(s[2 * kk][2], s[2 * kk][3]),
                Op::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                Op::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]),
            ];
            unroll!(dp in 0..4 => {
                let row = kk as u32 * 16 + lane % 8 + 8 * ((lane / 8) % 2);
                let chunk = 2 * dp as u32 + lane / 16;
                // SAFETY: warp-uniform; inside this stage's V tile.
                unsafe {
                    let r = ldmatrix_x4_trans(vs + tile_offset(row, chunk));
                    o[2 * dp] = Op::mma(a, [r[0], r[1]], o[2 * dp]);
                    o[2 * dp + 1] = Op::mma(a, [r[2], r[3]], o[2 * dp + 1]);
                }
            });
        });
        // SAFETY: block-uniform; the next iteration overwrites the other stage only after it.
        unsafe { bar_sync() };
        j += 1;
    }

    // SAFETY: all lanes are here; `rows` are this lane's rows of the warp's 16.
    unsafe { store_output::<Op>(&p, &o, &rows_state, block.rows) };
}

entries! { "flash";
    flash_attention_forward_bf16(FlashForwardParams<kernel_abi::Bf16>) => forward::<Bf16Op>;
    flash_attention_forward_f16(FlashForwardParams<kernel_abi::F16>) => forward::<F16Op>;
}
