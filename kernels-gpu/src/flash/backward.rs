//! Flash attention backward (see `kernel_abi::flash` for the contract and the two launches).
//!
//! Both tiled kernels recompute the probabilities of a 64 × 64 tile from the saved log-sum-exp,
//! `P = 2^(s·scale·log2 e − lse·log2 e)` (exact softmax values, no running maximum; the
//! exponent one `fma`), and use
//! the fragment layouts of the forward, with `g = lane / 4`, `q = lane % 4`:
//!
//! - **dK/dV** (warp: 16 key/value rows, per query tile): `Sᵀ = K·Qᵀ` with the warp's K rows
//!   as the A operand (`ldmatrix.x4`) and the Q rows as the B operand's columns (`ldmatrix.x4`,
//!   like K in the forward). K and V stay in shared memory and their fragments are reloaded
//!   per query tile, which keeps the kernel under 255 registers. The accumulators hold key
//!   rows `g`, `g + 8` and query columns `8n + 2q, +1`, so each lane reads the `lse` and `D` of
//!   16 query positions. `Pᵀ` goes from the accumulators into the A fragments of
//!   `dV += Pᵀ·dO` (two adjacent m16n8 accumulator tiles are the m16k16 A fragment), with dO
//!   rows (k = query) through `ldmatrix.x4.trans`. `dPᵀ = V·dOᵀ` takes the warp's V rows as A
//!   and dO rows as B's columns, two n8-tiles at a time, and `dSᵀ = Pᵀ ∘ (dPᵀ − D)` overwrites
//!   `Pᵀ` in place; it feeds `dK += dSᵀ·Q` the same way `Pᵀ` fed dV. Shared memory: K, V, then
//!   two stages of Q and two of dO, streamed by `cp.async` from the diagonal query tile on.
//! - **dQ** (warp: 16 query rows, per key/value tile 0..=diagonal), launched first: each lane
//!   computes `D` of its two rows from `dO` and `O` (and stores it for dK/dV), then `S = Q·Kᵀ`
//!   exactly as in the forward, `P` from the two rows' `lse`, `dP = dO·Vᵀ` (dO rows as A,
//!   loaded once; V rows as B's columns), `dS = P ∘ (dP − D)` in place, `dQ += dS·K` (K rows,
//!   k = key, through `ldmatrix.x4.trans`). Shared memory: Q, dO, then two stages of K and two
//!   of V.
//!
//! `P` and `dS` are rounded to the storage type for their products (as `P` in the forward);
//! `dS` itself is formed from the f32 `P`. Rows past `T` are zero-filled in shared memory and
//! read `lse = D = 0`, which keeps every product finite; their gradients are not written.
//!
//! The 16-row blocks of a tile are addressed with `ldmatrix [addr+OFF]` (`OFF` a const
//! generic), so each lane keeps one shared address per lane pattern and k-step, not per load.

use super::{FlashOp, Source, StreamPair, TILE_BYTES, seq_head, tile_count, tile_rank};
use crate::arch::cp_async::cp_async_commit_group;
use crate::arch::ldmatrix::{ldmatrix_x4, ldmatrix_x4_at, ldmatrix_x4_trans_at};
use crate::arch::math::ex2_approx_f32;
use crate::arch::shfl::{FULL_MASK, shfl_bfly_f32};
use crate::arch::smem::dynamic_smem_base;
use crate::arch::sync::bar_sync;
use crate::arch::{lane_id, warp_idx_x};
use crate::elem::Elem;
use crate::entry::entries;
use crate::gemm::tensor_op::{Bf16Op, F16Op};
use crate::unroll::unroll;
use core::f32::consts::LOG2_E;
use core::f32::math::mul_add;
use kernel_abi::flash::{
    BACKWARD_THREADS, BLOCK_KV, BLOCK_Q, FORWARD_THREADS, FlashBackwardParams, HD, tile_offset,
};

const _: () = assert!(BACKWARD_THREADS == FORWARD_THREADS, "Source::load is sized for 128");
const _: () = assert!(BLOCK_Q == BLOCK_KV, "the kernels pair query and key tiles one to one");

/// `lse · log2 e` and `D` of position `pos` of row `row_base` of the (B, NH, T) buffers.
///
/// # Safety
/// `row_base` is `(b·NH + h)·T` of a (b, h) inside the buffers, and `pos < t`.
#[inline(always)]
unsafe fn stats_at<T: Copy>(p: &FlashBackwardParams<T>, row_base: usize, pos: u32) -> (f32, f32) {
    let at = row_base + pos as usize;
    // SAFETY: row_base plus pos < t indexes both (B, NH, T) buffers (the caller's contract).
    unsafe { (*p.lse.as_ptr().add(at) * LOG2_E, *p.d.as_mut_ptr().add(at)) }
}

/// [`stats_at`], or 0 for positions past `t` (zero-filled rows, whose products must stay
/// finite).
///
/// # Safety
/// `row_base` is `(b·NH + h)·T` of a (b, h) inside the buffers.
#[inline(always)]
unsafe fn row_stats<T: Copy>(p: &FlashBackwardParams<T>, row_base: usize, pos: u32) -> (f32, f32) {
    if pos < p.t {
        // SAFETY: the caller's row_base, and pos < t.
        unsafe { stats_at(p, row_base, pos) }
    } else {
        (0.0, 0.0)
    }
}

/// [`row_stats`] of a lane's 16 columns `tile0 + 8n + 2·quad + c` (n < 8, c < 2) of one query
/// tile: without the bounds checks (and the zeros they need) when the whole tile is inside T.
///
/// # Safety
/// As [`row_stats`].
#[inline(always)]
pub(super) unsafe fn tile_stats<T: Copy>(
    p: &FlashBackwardParams<T>,
    row_base: usize,
    tile0: u32,
    quad: u32,
) -> [[(f32, f32); 2]; 8] {
    let mut out = [[(0.0f32, 0.0f32); 2]; 8];
    let pos = |n: usize, c: usize| tile0 + n as u32 * 8 + 2 * quad + c as u32;
    if tile0 + BLOCK_Q <= p.t {
        unroll!(n in 0..8 => {
            unroll!(c in 0..2 => {
                // SAFETY: the caller's row_base, and pos < t (the whole tile is).
                out[n][c] = unsafe { stats_at(p, row_base, pos(n, c)) };
            });
        });
    } else {
        unroll!(n in 0..8 => {
            unroll!(c in 0..2 => {
                // SAFETY: forwarded contract.
                out[n][c] = unsafe { row_stats(p, row_base, pos(n, c)) };
            });
        });
    }
    out
}

/// Packs accumulator n8-tiles `2k` and `2k + 1` into the m16k16 A fragment of k-step `k`.
#[inline(always)]
pub(super) fn a_fragment<Op: FlashOp>(lo: [f32; 4], hi: [f32; 4]) -> [u32; 4] {
    [Op::pack(lo[0], lo[1]), Op::pack(lo[2], lo[3]), Op::pack(hi[0], hi[1]), Op::pack(hi[2], hi[3])]
}

/// Writes a warp's 16 × 64 accumulator, times `scale`, into part `part` of `dqkv` at rows
/// `rows` (skipping those at or past `t`), and, with `p.col_sums`, the 16 rows' column sums of
/// the stored values (the order of `kernel_abi::flash::FlashBackwardParams::col_sums`: a
/// lane's two rows, then butterflies over `g`).
///
/// # Safety
/// The whole warp calls it together; `rows` are this lane's rows `g`, `g + 8` of the warp's
/// 16, the first of which is a multiple of 16; `dqkv` holds (B, T, 3, NH, HD) and `col_sums`,
/// when not null, `B·⌈T/16⌉·3C` f32.
#[inline(always)]
pub(super) unsafe fn store_rows<Op: FlashOp>(
    p: &FlashBackwardParams<Op::In>,
    acc: &[[f32; 4]; 8],
    scale: f32,
    rows: [u32; 2],
    part: u32,
) {
    let ((b, h), quad) = (seq_head(), lane_id() % 4);
    let channels = (p.nh * HD) as usize;
    // The stored values, as the column sums add them: 0 for rows at or past t.
    let mut stored = [[0.0f32; 4]; 8];
    unroll!(r in 0..2 => {
        let row = rows[r];
        let at = ((b as usize * p.t as usize + row as usize) * 3 + part as usize) * channels
            + (h * HD) as usize;
        unroll!(n in 0..8 => {
            let d = n * 8 + 2 * quad as usize;
            let word = Op::pack(acc[n][2 * r] * scale, acc[n][2 * r + 1] * scale);
            if row < p.t {
                // SAFETY: row < t; `d` is even, so the pair is 4-byte aligned inside the row.
                unsafe { *p.dqkv.as_mut_ptr().add(at + d).cast::<u32>() = word };
            }
            let pair = <Op::In as Elem>::widen8([word, 0, 0, 0, 0, 0, 0, 0]);
            let valid = row < p.t;
            stored[n][2 * r] = if valid { pair[0] } else { 0.0 };
            stored[n][2 * r + 1] = if valid { pair[1] } else { 0.0 };
        });
    });
    if p.col_sums.is_null() {
        return;
    }
    // Rows g and g + 8, then lanes g ^ 1, g ^ 2, g ^ 4 (f32 addition commutes: every lane of
    // a quad column ends with the same bits).
    let mut sums = [[0.0f32; 2]; 8];
    unroll!(n in 0..8 => {
        unroll!(e in 0..2 => {
            let mut sum = 0.0 + stored[n][e];
            sum += stored[n][2 + e];
            // SAFETY: the whole warp is here (`col_sums` is the launch's).
            unsafe {
                sum += shfl_bfly_f32(FULL_MASK, sum, 4);
                sum += shfl_bfly_f32(FULL_MASK, sum, 8);
                sum += shfl_bfly_f32(FULL_MASK, sum, 16);
            }
            sums[n][e] = sum;
        });
    });
    let group = (b * p.t.div_ceil(16) + rows[0] / 16) as usize;
    if lane_id() < 4 && rows[0] < p.t {
        let at = group * 3 * channels + part as usize * channels + (h * HD) as usize;
        unroll!(n in 0..8 => {
            let d = n * 8 + 2 * quad as usize;
            // SAFETY: group < B·⌈T/16⌉ (rows[0] < t) and channel d + 1 < 3C: inside the sums
            // the launcher checked.
            unsafe {
                let sum = p.col_sums.as_mut_ptr().add(at + d);
                *sum = sums[n][0];
                *sum.add(1) = sums[n][1];
            }
        });
    }
}

/// The causal mask of the diagonal tile of `Pᵀ` (rows: keys, columns: queries, equal tile
/// offsets): calls `masked(n, e)` for each accumulator element (n8 tile `n`, fragment element
/// `e`) of this lane whose query column `8n + 2·quad + (e & 1)` lies before its key row
/// `warp·16 + g + 8·(e / 2)`. Shared by both dK/dV kernels (the caller zeroes its layout's
/// element).
#[inline(always)]
pub(super) fn causal_mask_transposed(warp: u32, lane: u32, mut masked: impl FnMut(usize, usize)) {
    let (g, quad) = (lane / 4, lane % 4);
    let first = |r: i32| (warp * 16 + g) as i32 + 8 * r - 2 * quad as i32;
    let first = [first(0), first(1)];
    unroll!(n in 0..8 => {
        unroll!(e in 0..4 => {
            if ((8 * n + (e & 1)) as i32) < first[e / 2] {
                masked(n, e);
            }
        });
    });
}

/// The causal mask of the diagonal tile `q_tile` of `P` (rows: this lane's queries `rows`,
/// columns: keys): calls `masked(n, e)` for each accumulator element whose key column lies
/// after its query row. Absolute positions, not the per-lane offsets of
/// [`causal_mask_transposed`]: with those ptxas spilled the `mma.sync` dQ kernel at its
/// 168-register bound. Shared by both dQ kernels.
#[inline(always)]
pub(super) fn causal_mask(
    q_tile: u32,
    quad: u32,
    rows: [u32; 2],
    mut masked: impl FnMut(usize, usize),
) {
    unroll!(n in 0..8 => {
        unroll!(e in 0..4 => {
            let col = q_tile * BLOCK_KV + n as u32 * 8 + 2 * quad + (e as u32 & 1);
            if col > rows[e / 2] {
                masked(n, e);
            }
        });
    });
}

/// Loads the A fragments of a warp's 16 rows of a 64-column tile (one per k-step).
///
/// # Safety
/// Warp-uniform; the tile at `tile` is visible to the warp.
#[inline(always)]
unsafe fn a_rows(tile: u32) -> [[u32; 4]; 4] {
    let (warp, lane) = (warp_idx_x(), lane_id());
    let mut a = [[0u32; 4]; 4];
    unroll!(kk in 0..4 => {
        let row = warp * 16 + lane % 8 + 8 * ((lane / 8) % 2);
        let chunk = 2 * kk as u32 + lane / 16;
        // SAFETY: the caller's contract; inside the tile.
        a[kk] = unsafe { ldmatrix_x4(tile + tile_offset(row, chunk)) };
    });
    a
}

/// Bytes of 16 rows of a tile: the step between the 16-row blocks an m16 fragment covers.
const ROWS16: u32 = 16 * 128;

/// `acc[0], acc[1] += a · tileᵀ` for the 16 rows at byte `OFF` (a multiple of [`ROWS16`]) of
/// `tile` (the B operand's columns; k runs over the tile's 64 columns).
///
/// # Safety
/// Warp-uniform; the tile at `tile` is visible to the warp.
#[inline(always)]
unsafe fn mma_rows_t<Op: FlashOp, const OFF: u32>(
    a: &[[u32; 4]; 4],
    tile: u32,
    acc: [[f32; 4]; 2],
) -> [[f32; 4]; 2] {
    let lane = lane_id();
    let mut acc = acc;
    unroll!(kk in 0..4 => {
        // tile_offset(16·block + row, chunk) = block · ROWS16 + tile_offset(row, chunk).
        let row = 8 * (lane / 16) + lane % 8;
        let chunk = 2 * kk as u32 + (lane / 8) % 2;
        // SAFETY: the caller's contract; inside the tile.
        unsafe {
            let r = ldmatrix_x4_at::<OFF>(tile + tile_offset(row, chunk));
            acc[0] = Op::mma(a[kk], [r[0], r[1]], acc[0]);
            acc[1] = Op::mma(a[kk], [r[2], r[3]], acc[1]);
        }
    });
    acc
}

/// `acc += x · tile` with `x` the warp's 16 × 64 accumulator (k = the tile's rows), rounded to
/// the storage type, and the tile's rows through `ldmatrix.trans`.
///
/// # Safety
/// Warp-uniform; the tile at `tile` is visible to the warp.
#[inline(always)]
unsafe fn mma_acc_tile<Op: FlashOp>(x: &[[f32; 4]; 8], tile: u32, acc: &mut [[f32; 4]; 8]) {
    let lane = lane_id();
    unroll!(const KK in 0..4 => {
        let a = a_fragment::<Op>(x[2 * KK], x[2 * KK + 1]);
        unroll!(dp in 0..4 => {
            let row = lane % 8 + 8 * ((lane / 8) % 2);
            let chunk = 2 * dp as u32 + lane / 16;
            // SAFETY: the caller's contract; rows 16·KK + row of the tile.
            unsafe {
                let r = ldmatrix_x4_trans_at::<{ KK as u32 * ROWS16 }>(
                    tile + tile_offset(row, chunk),
                );
                acc[2 * dp] = Op::mma(a, [r[0], r[1]], acc[2 * dp]);
                acc[2 * dp + 1] = Op::mma(a, [r[2], r[3]], acc[2 * dp + 1]);
            }
        });
    });
}

/// What a dK/dV or dQ block sets up before its tile loop, the same in the `mma.sync` and wgmma
/// kernels (whose tiles differ in their base and their streams' stages): the tile it owns, heaviest
/// first (key tile [`tile_rank`] for dK/dV, query tile `tiles − 1 −` it for dQ), the shared
/// addresses of its two resident tiles (K, V for dK/dV; Q, dO for dQ) and its two streamed tiles'
/// stage 0 with their sources (Q, dO; K, V), this lane's rows `g`, `g + 8` of its warp's 16, and
/// the (b, h) row of the (B, NH, T) statistics. [`Self::dkdv`] and [`Self::dq`] issue the resident
/// tiles and the streamed ones' first tiles as one cp.async group.
pub(super) struct BackwardBlock<T> {
    pub tile: u32,
    pub resident: [u32; 2],
    streamed: [(Source<T>, u32); 2],
    pub rows: [u32; 2],
    pub stats_base: usize,
}

impl<T: Copy> BackwardBlock<T> {
    /// The layout shared by both kernels: two resident tiles at `smem`, then `stages` stages of
    /// each streamed tile (two for the `mma.sync` kernels, `BACKWARD_WGMMA_STAGES` on wgmma);
    /// the sources of qkv's three parts and of dout.
    #[inline(always)]
    fn new(
        p: &FlashBackwardParams<T>,
        (smem, stages): (u32, u32),
        tile: u32,
        resident: [Source<T>; 2],
        streamed: [Source<T>; 2],
    ) -> (Self, [Source<T>; 2]) {
        let ((warp, lane), (b, h)) = ((warp_idx_x(), lane_id()), seq_head());
        let row0 = tile * BLOCK_Q + warp * 16 + lane / 4;
        let [first, second] = streamed;
        let block = Self {
            tile,
            resident: [smem, smem + TILE_BYTES],
            streamed: [(first, smem + 2 * TILE_BYTES), (second, smem + (2 + stages) * TILE_BYTES)],
            rows: [row0, row0 + 8],
            stats_base: ((b * p.nh + h) * p.t) as usize,
        };
        (block, resident)
    }

    /// The tile sources of this block's (sequence, head): q, k, v of qkv and dout.
    #[inline(always)]
    fn sources(p: &FlashBackwardParams<T>) -> [Source<T>; 4] {
        let ((b, h), channels) = (seq_head(), p.nh * HD);
        let part = |i: u32| Source::new(p.qkv.as_ptr(), p.t, 3 * channels, b, i * channels, h);
        [part(0), part(1), part(2), Source::new(p.dout.as_ptr(), p.t, channels, b, 0, h)]
    }

    /// A dK/dV block with its tiles at `smem`: K and V resident, Q and dO streamed in `stages`
    /// stages from the diagonal query tile on (the first tile issued into stage 0).
    ///
    /// # Safety
    /// Every thread of the block calls it; `smem` starts the launch's tiles (`2 + 2·stages` of
    /// `TILE_BYTES`); the buffers have the shapes the launcher checked.
    #[inline(always)]
    pub(super) unsafe fn dkdv(p: &FlashBackwardParams<T>, smem: (u32, u32)) -> Self {
        let [q, k, v, dout] = Self::sources(p);
        let (block, [k, v]) = Self::new(p, smem, tile_rank(), [k, v], [q, dout]);
        let row0 = block.tile * BLOCK_KV;
        // SAFETY: block-uniform calls; the tiles are inside the launch's shared memory.
        unsafe { block.issue_first(&k, &v, row0, row0) };
        block
    }

    /// The statistics (`lse·log2 e`, `D`) of this lane's two query rows, which a dQ block keeps
    /// for all its tiles. `D = Σ_d dO·O` of each row is computed here, and written to `p.d`
    /// for the dK/dV kernel launched after: each lane of a quad adds up, with `fma`s in column
    /// order, the products of its 16 columns `16·quad ..` of the row, then two butterflies
    /// over the quad add the four partial sums (every lane ends with the same bits), and the
    /// quad's lane 0 stores the sum. Rows at or past t read 0 for both and store nothing.
    ///
    /// # Safety
    /// The whole warp calls it together; `p` is the launch's (`out` and `dout` hold (B, T, C)
    /// 16-byte aligned; `lse` and `d` cover this block's (b, h) row).
    #[inline(always)]
    pub(super) unsafe fn rows_stats(&self, p: &FlashBackwardParams<T>) -> [(f32, f32); 2]
    where
        T: Elem,
    {
        let ((b, h), quad) = (seq_head(), lane_id() % 4);
        let channels = (p.nh * HD) as usize;
        let mut d = [0.0f32; 2];
        unroll!(r in 0..2 => {
            let row = self.rows[r];
            if row < p.t {
                let at = (b as usize * p.t as usize + row as usize) * channels
                    + (h * HD + 16 * quad) as usize;
                // SAFETY: row < t of sequence b, head h's 16 columns of this lane: two
                // 16-byte aligned chunks of 8 inside (B, T, C) (aligned bases, C = NH·64).
                let (o, g) = unsafe {
                    let (out, dout) = (p.out.as_ptr().add(at), p.dout.as_ptr().add(at));
                    let o = [T::load8(out), T::load8(out.add(8))];
                    (o, [T::load8(dout), T::load8(dout.add(8))])
                };
                unroll!(c in 0..2 => {
                    unroll!(k in 0..8 => { d[r] = mul_add(g[c][k], o[c][k], d[r]) });
                });
            }
        });
        // SAFETY: every lane of the warp reaches the shuffles (the branches above have closed).
        unsafe {
            unroll!(r in 0..2 => {
                d[r] += shfl_bfly_f32(FULL_MASK, d[r], 1);
                d[r] += shfl_bfly_f32(FULL_MASK, d[r], 2);
            });
        }
        let mut stats = [(0.0f32, 0.0f32); 2];
        unroll!(r in 0..2 => {
            let row = self.rows[r];
            if row < p.t {
                let at = self.stats_base + row as usize;
                // SAFETY: position row < t of this block's (b, h) row of both (B, NH, T) buffers.
                unsafe {
                    if quad == 0 {
                        *p.d.as_mut_ptr().add(at) = d[r];
                    }
                    stats[r] = (*p.lse.as_ptr().add(at) * LOG2_E, d[r]);
                }
            }
        });
        stats
    }

    /// A dQ block with its tiles at `smem`: Q and dO resident, K and V streamed in `stages`
    /// stages from tile 0 (issued into stage 0).
    ///
    /// # Safety
    /// As [`Self::dkdv`].
    #[inline(always)]
    pub(super) unsafe fn dq(p: &FlashBackwardParams<T>, smem: (u32, u32)) -> Self {
        let [q, k, v, dout] = Self::sources(p);
        let tile = tile_count() - 1 - tile_rank();
        let (block, [q, dout]) = Self::new(p, smem, tile, [q, dout], [k, v]);
        // SAFETY: block-uniform calls; the tiles are inside the launch's shared memory.
        unsafe { block.issue_first(&q, &dout, block.tile * BLOCK_Q, 0) };
        block
    }

    /// Issues the resident tiles from row `resident_row` and the streamed ones' first tiles
    /// from `streamed_row`, as one group.
    ///
    /// # Safety
    /// Block-uniform call site; the tiles are inside the launch's shared memory.
    #[inline(always)]
    unsafe fn issue_first(
        &self,
        a: &Source<T>,
        b: &Source<T>,
        resident_row: u32,
        streamed_row: u32,
    ) {
        let [(first, s0), (second, s1)] = &self.streamed;
        // SAFETY: the caller's contract.
        unsafe {
            a.load(self.resident[0], resident_row);
            b.load(self.resident[1], resident_row);
            first.load(*s0, streamed_row);
            second.load(*s1, streamed_row);
            cp_async_commit_group();
        }
    }

    /// The first shared address past the block's tiles: the second stream's last stage ends
    /// there.
    #[cfg(target_feature = "sm_90a")]
    #[inline(always)]
    pub(super) fn tiles_end(&self, stages: u32) -> u32 {
        self.streamed[1].1 + stages * TILE_BYTES
    }

    /// The streamed tiles' stages.
    #[inline(always)]
    pub(super) fn stream(&self) -> StreamPair<'_, T> {
        let [(first, s0), (second, s1)] = &self.streamed;
        StreamPair { first: (first, *s0), second: (second, *s1) }
    }
}

/// dK and dV of one key/value tile (see the module doc).
///
/// # Safety
/// Launched by `gpu-host`'s `flash_attention_backward` once [`dq`] has written `d`, with
/// `BACKWARD_THREADS` threads, the grid `(NH, ⌈T / BLOCK_KV⌉, B)` and `BACKWARD_SHARED_BYTES` of
/// dynamic shared memory, after checking every buffer's length for the shape (`C = NH·HD`,
/// `B·NH·T <= u32::MAX`), and `qkv` and `dout` 16-byte and `dqkv` 4-byte aligned.
#[inline(always)]
unsafe fn dkdv<Op: FlashOp>(p: FlashBackwardParams<Op::In>) {
    // SAFETY: every thread is here; the launch's tiles start at the dynamic shared base.
    let block = unsafe { BackwardBlock::dkdv(&p, (dynamic_smem_base(), 2)) };
    let (kv_tile, tiles) = (block.tile, tile_count());
    let [sk, sv] = block.resident;
    let (rows, stats_base) = (block.rows, block.stats_base);
    let (warp, lane) = (warp_idx_x(), lane_id());
    let quad = lane % 4;
    let q_do = block.stream();
    let mut dk = [[0.0f32; 4]; 8];
    let mut dv = [[0.0f32; 4]; 8];
    let mut j = kv_tile;
    while j < tiles {
        let next_row = (j + 1 < tiles).then(|| (j + 1) * BLOCK_Q);
        // SAFETY: block-uniform; the previous step ended with a barrier.
        let (qs, dos) = unsafe { q_do.step((j - kv_tile) % 2, next_row) };

        // The query columns' statistics first, so that their loads overlap the product.
        // SAFETY: stats_base is this block's (b, h) row.
        let stats = unsafe { tile_stats(&p, stats_base, j * BLOCK_Q, quad) };
        // Sᵀ = K·Qᵀ, then Pᵀ (masked below the diagonal: query < key).
        // SAFETY: warp-uniform; K arrived with the first group.
        let ka = unsafe { a_rows(sk) };
        let mut s = [[0.0f32; 4]; 8];
        unroll!(const NP in 0..4 => {
            // SAFETY: warp-uniform; this stage's Q tile is visible.
            let pair = unsafe { mma_rows_t::<Op, { NP as u32 * ROWS16 }>(&ka, qs, [[0.0; 4]; 2]) };
            (s[2 * NP], s[2 * NP + 1]) = (pair[0], pair[1]);
        });
        let mut dd = [[0.0f32; 2]; 8];
        unroll!(n in 0..8 => {
            unroll!(c in 0..2 => {
                let (lse2, d) = stats[n][c];
                dd[n][c] = d;
                unroll!(r in 0..2 => {
                    let e = 2 * r + c;
                    s[n][e] = ex2_approx_f32(mul_add(s[n][e], p.scale_log2, -lse2));
                });
            });
        });
        // The diagonal tile (the first): a warp-uniform branch, so the others skip the mask.
        if j == kv_tile {
            causal_mask_transposed(warp, lane, |n, e| s[n][e] = 0.0);
        }

        // SAFETY: warp-uniform; this stage's dO tile is visible.
        unsafe { mma_acc_tile::<Op>(&s, dos, &mut dv) };

        // dPᵀ = V·dOᵀ, two n8-tiles at a time, and dSᵀ = Pᵀ ∘ (dPᵀ − D) in place.
        // SAFETY: warp-uniform; V arrived with the first group.
        let va = unsafe { a_rows(sv) };
        unroll!(const NP in 0..4 => {
            // SAFETY: warp-uniform; this stage's dO tile is visible.
            let dp = unsafe { mma_rows_t::<Op, { NP as u32 * ROWS16 }>(&va, dos, [[0.0; 4]; 2]) };
            unroll!(x in 0..2 => {
                unroll!(e in 0..4 => {
                    let n = 2 * NP + x;
                    s[n][e] *= dp[x][e] - dd[n][e % 2];
                });
            });
        });

        // SAFETY: warp-uniform; this stage's Q tile is visible.
        unsafe { mma_acc_tile::<Op>(&s, qs, &mut dk) };
        // SAFETY: block-uniform; the next iteration overwrites the other stage only after it.
        unsafe { bar_sync() };
        j += 1;
    }

    // SAFETY: this lane's rows of the warp's 16; the launcher checked dqkv's shape.
    unsafe {
        store_rows::<Op>(&p, &dk, p.scale, rows, 1);
        store_rows::<Op>(&p, &dv, 1.0, rows, 2);
    }
}

/// dQ of one query tile (see the module doc), and `D` of its rows
/// ([`BackwardBlock::rows_stats`]).
///
/// # Safety
/// As [`dkdv`]: the same launcher, parameters and geometry, launched before it; `out` holds
/// (B, T, C) elements, 16-byte aligned, and `d` is written.
#[inline(always)]
unsafe fn dq<Op: FlashOp>(p: FlashBackwardParams<Op::In>) {
    // SAFETY: every thread is here; the launch's tiles start at the dynamic shared base.
    let block = unsafe { BackwardBlock::dq(&p, (dynamic_smem_base(), 2)) };
    let (q_tile, [sq, sdo], rows) = (block.tile, block.resident, block.rows);
    let quad = lane_id() % 4;
    // SAFETY: the launch's parameters.
    let stats = unsafe { block.rows_stats(&p) };
    let kv = block.stream();
    let kv_tiles = q_tile + 1;
    let mut qa = [[0u32; 4]; 4];
    let mut doa = [[0u32; 4]; 4];
    let mut dq = [[0.0f32; 4]; 8];
    let mut j = 0;
    while j < kv_tiles {
        let next_row = (j + 1 < kv_tiles).then(|| (j + 1) * BLOCK_KV);
        // SAFETY: block-uniform; the previous step ended with a barrier.
        let (ks, vs) = unsafe { kv.step(j % 2, next_row) };
        if j == 0 {
            // SAFETY: warp-uniform; Q and dO arrived with the first group.
            unsafe { (qa, doa) = (a_rows(sq), a_rows(sdo)) };
        }

        // S = Q·Kᵀ, then P (masked above the diagonal: key > query).
        let mut s = [[0.0f32; 4]; 8];
        unroll!(const NP in 0..4 => {
            // SAFETY: warp-uniform; this stage's K tile is visible.
            let pair = unsafe { mma_rows_t::<Op, { NP as u32 * ROWS16 }>(&qa, ks, [[0.0; 4]; 2]) };
            (s[2 * NP], s[2 * NP + 1]) = (pair[0], pair[1]);
        });
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => {
                s[n][e] = ex2_approx_f32(mul_add(s[n][e], p.scale_log2, -stats[e / 2].0));
            });
        });
        // The diagonal tile (the last): a warp-uniform branch, so the others skip the mask.
        if j == q_tile {
            causal_mask(q_tile, quad, rows, |n, e| s[n][e] = 0.0);
        }

        // dP = dO·Vᵀ, two n8-tiles at a time, and dS = P ∘ (dP − D) in place.
        unroll!(const NP in 0..4 => {
            // SAFETY: warp-uniform; this stage's V tile is visible.
            let dp = unsafe { mma_rows_t::<Op, { NP as u32 * ROWS16 }>(&doa, vs, [[0.0; 4]; 2]) };
            unroll!(x in 0..2 => {
                unroll!(e in 0..4 => {
                    let n = 2 * NP + x;
                    s[n][e] *= dp[x][e] - stats[e / 2].1;
                });
            });
        });

        // SAFETY: warp-uniform; this stage's K tile is visible.
        unsafe { mma_acc_tile::<Op>(&s, ks, &mut dq) };
        // SAFETY: block-uniform; the next iteration overwrites the other stage only after it.
        unsafe { bar_sync() };
        j += 1;
    }

    // SAFETY: this lane's rows of the warp's 16; the launcher checked dqkv's shape.
    unsafe { store_rows::<Op>(&p, &dq, p.scale, rows, 0) };
}

entries! { "flash";
    flash_attention_backward_dkdv_bf16(FlashBackwardParams<kernel_abi::Bf16>) => dkdv::<Bf16Op>;
    flash_attention_backward_dkdv_f16(FlashBackwardParams<kernel_abi::F16>) => dkdv::<F16Op>;
    flash_attention_backward_dq_bf16(FlashBackwardParams<kernel_abi::Bf16>) => dq::<Bf16Op>;
    flash_attention_backward_dq_f16(FlashBackwardParams<kernel_abi::F16>) => dq::<F16Op>;
}
