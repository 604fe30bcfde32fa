//! LayerNorm kernels (see `kernel_abi::layernorm` for the contract and the determinism scheme).
//!
//! Every kernel walks a row in chunks of 8 channels (`warp::for_lane_chunks`): lane `l` of a
//! warp takes the chunks starting at channels `8·l, 8·l + 256, …`, through 16-byte accesses when the launch is
//! vectorized (`c % 8 == 0`, every pointer 16-byte aligned) and element by element otherwise
//! ([`load_chunk`] / [`store_chunk`]). A lane always takes the same chunks in every pass over a
//! row, so the passes after the first re-read what the same thread read (or wrote) before, and
//! find it in L1.

use crate::arch::smem::{
    dynamic_smem_base, ld_shared_f32, ld_shared_v4_u32, st_shared_f32, st_shared_v4_u32,
};
use crate::arch::sync::bar_sync;
use crate::arch::{block_dim_x, block_idx_x, global, lane_id, thread_idx_x, warp_idx_x};
use crate::elem::{Elem, load_chunk, round_trip, store_chunk};
use crate::entry::entries;
use crate::unroll::unroll;
use crate::warp::{LANE_CHUNK, for_lane_chunks, warp_sum};
use kernel_abi::layernorm::{
    BACKWARD_CACHED_MAX_C, BACKWARD_ROWS_PER_WARP, EPS, LayerNormBackwardParams,
    LayerNormBackwardReduceParams, LayerNormForwardParams, REDUCE_CHANNELS, REDUCE_GROUPS,
    backward_cached_dinp_word, backward_parts, backward_sum_word, backward_sums_len,
};
use kernel_abi::{Bf16, F16};

/// Sum of the first `count` values of `v`.
#[inline(always)]
fn chunk_sum(v: [f32; 8], count: usize, f: impl Fn(f32) -> f32) -> f32 {
    let mut s = 0.0;
    unroll!(k in 0..8 => {
        if k < count {
            s += f(v[k]);
        }
    });
    s
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `layernorm_forward` / `residual_layernorm_forward` (`FUSED`) with
/// blocks of `FORWARD_THREADS` (whole warps, one per row), after checking that `inp`, `out`
/// (and, fused, `inp2`, `residual`) hold `rows × c`, `weight` and `bias` `c`, and `mean` and
/// `rstd` `rows` or are null; the written buffers are disjoint mutable borrows.
#[inline(always)]
unsafe fn forward<T: Elem, const FUSED: bool>(p: LayerNormForwardParams<T>) {
    let warps = block_dim_x() / 32;
    let row = block_idx_x() * warps + warp_idx_x();
    if row >= p.rows {
        return; // warp-uniform: the whole warp leaves, so its shuffles stay converged
    }
    let c = p.c as usize;
    let offset = row as usize * c;
    let vector = p.c.is_multiple_of(8)
        && p.inp.is_aligned_to(16)
        && p.inp2.is_aligned_to(16)
        && p.residual.is_aligned_to(16)
        && p.weight.is_aligned_to(16)
        && p.bias.is_aligned_to(16)
        && p.out.is_aligned_to(16);
    // SAFETY: the launcher checked every buffer covers `rows × c` (or `c`) elements, and
    // `row < rows`.
    let x: *const T = unsafe {
        if FUSED {
            p.residual.as_mut_ptr().add(offset).cast_const()
        } else {
            p.inp.as_ptr().add(offset)
        }
    };

    let (mean, rstd) = if vector && c <= CACHED_MAX_C {
        // SAFETY: this kernel's contract for row offset `offset`; vectorized, `c` small enough.
        unsafe { forward_cached::<T, FUSED>(&p, offset, x) }
    } else {
        // SAFETY: this kernel's contract for row offset `offset`.
        unsafe { forward_chunked::<T, FUSED>(&p, offset, x, vector) }
    };
    if lane_id() == 0 {
        // SAFETY: `row < rows` and the statistics buffers hold `rows` values when not null.
        unsafe {
            if !p.mean.is_null() {
                *p.mean.as_mut_ptr().add(row as usize) = mean;
            }
            if !p.rstd.is_null() {
                *p.rstd.as_mut_ptr().add(row as usize) = rstd;
            }
        }
    }
}

/// Passes 1–3 of [`forward`] chunk by chunk (any `c`, vectorized or not): each pass walks the
/// lane's chunks again, passes 2 and 3 finding them in L1. Returns `(mean, rstd)`.
///
/// # Safety
/// As [`forward`], for row offset `offset`, `x` the row's input (the residual when `FUSED`).
#[inline(always)]
unsafe fn forward_chunked<T: Elem, const FUSED: bool>(
    p: &LayerNormForwardParams<T>,
    offset: usize,
    x: *const T,
    vector: bool,
) -> (f32, f32) {
    let c = p.c as usize;
    // SAFETY (the blocks below): [`forward`]'s launcher checked every buffer covers `rows × c`
    // (or `c`) elements, and `ch + count <= c`; the fused passes 2 and 3 re-read the residual
    // this same thread wrote in pass 1 (coherent loads).
    let mut sum = 0.0;
    for_lane_chunks(c, |ch, count| {
        let v = if FUSED {
            // SAFETY: as stated above.
            unsafe {
                let a = load_chunk(p.inp.as_ptr().add(offset + ch), count, vector);
                let b = load_chunk(p.inp2.as_ptr().add(offset + ch), count, vector);
                let r: [f32; 8] = core::array::from_fn(|k| a[k] + b[k]);
                store_chunk(p.residual.as_mut_ptr().add(offset + ch), r, count, vector);
                r.map(round_trip::<T>)
            }
        } else {
            // SAFETY: as stated above.
            unsafe { load_chunk(x.add(ch), count, vector) }
        };
        sum += chunk_sum(v, count, |x| x);
    });
    // SAFETY: every lane of the warp is here (the caller's row test is warp-uniform).
    let mean = unsafe { warp_sum(sum) } / c as f32;

    let mut squares = 0.0;
    for_lane_chunks(c, |ch, count| {
        // SAFETY: as stated above.
        let v = unsafe { load_chunk(x.add(ch), count, vector) };
        squares += chunk_sum(v, count, |x| (x - mean) * (x - mean));
    });
    // SAFETY: as for the sum.
    let var = unsafe { warp_sum(squares) } / c as f32;
    let rstd = 1.0 / core::f32::math::sqrt(var + EPS);

    for_lane_chunks(c, |ch, count| {
        // SAFETY: as stated above.
        unsafe {
            let v = load_chunk(x.add(ch), count, vector);
            let w = load_chunk(p.weight.as_ptr().add(ch), count, vector);
            let b = load_chunk(p.bias.as_ptr().add(ch), count, vector);
            let o = core::array::from_fn(|k| (v[k] - mean) * rstd * w[k] + b[k]);
            store_chunk(p.out.as_mut_ptr().add(offset + ch), o, count, vector);
        }
    });
    (mean, rstd)
}

/// Rows of at most this many channels take [`forward_cached`] (when vectorized): 4 chunks of
/// 8 per lane, GPT-2 small (768) and medium (1024).
const CACHED_MAX_C: usize = 32 * LANE_CHUNK * CACHED_CHUNKS;
/// Chunks per lane [`forward_cached`] holds in registers.
const CACHED_CHUNKS: usize = 4;
const _: () = assert!(CACHED_CHUNKS == 4, "forward_cached's loops are unrolled 4 times");

/// Passes 1–3 of [`forward`] for a vectorized row of at most [`CACHED_MAX_C`] channels: the
/// lane's chunks are loaded once, every load issued before the first sum, and kept in
/// registers, so a row costs one round trip to memory where the chunked passes take one per
/// chunk in pass 1 and then re-read the row from L1 twice. Same sums in the same order as
/// [`forward_chunked`], so the same bits. Returns `(mean, rstd)`.
///
/// # Safety
/// As [`forward_chunked`], with `c % 8 == 0`, `c <= CACHED_MAX_C` and every pointer 16-byte
/// aligned.
#[inline(always)]
unsafe fn forward_cached<T: Elem, const FUSED: bool>(
    p: &LayerNormForwardParams<T>,
    offset: usize,
    x: *const T,
) -> (f32, f32) {
    let c = p.c as usize;
    let first = lane_id() as usize * LANE_CHUNK;
    let at = |k: usize| first + 32 * LANE_CHUNK * k;
    let mut v = [[0.0f32; 8]; CACHED_CHUNKS];
    if FUSED {
        let mut b = [[0.0f32; 8]; CACHED_CHUNKS];
        unroll!(k in 0..4 => {
            if at(k) < c {
                // SAFETY: whole aligned chunk inside the row (`c % 8 == 0`, `at(k) < c`).
                unsafe {
                    v[k] = T::load8(p.inp.as_ptr().add(offset + at(k)));
                    b[k] = T::load8(p.inp2.as_ptr().add(offset + at(k)));
                }
            }
        });
        unroll!(k in 0..4 => {
            if at(k) < c {
                let r: [f32; 8] = core::array::from_fn(|e| v[k][e] + b[k][e]);
                // SAFETY: as above, in the residual.
                unsafe { T::store8(p.residual.as_mut_ptr().add(offset + at(k)), r) };
                v[k] = r.map(round_trip::<T>);
            }
        });
    } else {
        unroll!(k in 0..4 => {
            if at(k) < c {
                // SAFETY: as above, in the input row `x`.
                v[k] = unsafe { T::load8(x.add(at(k))) };
            }
        });
    }
    let mut sum = 0.0;
    unroll!(k in 0..4 => {
        if at(k) < c {
            sum += chunk_sum(v[k], LANE_CHUNK, |x| x);
        }
    });
    // SAFETY: every lane of the warp is here (the caller's row test is warp-uniform).
    let mean = unsafe { warp_sum(sum) } / c as f32;
    let mut squares = 0.0;
    unroll!(k in 0..4 => {
        if at(k) < c {
            squares += chunk_sum(v[k], LANE_CHUNK, |x| (x - mean) * (x - mean));
        }
    });
    // SAFETY: as for the sum.
    let var = unsafe { warp_sum(squares) } / c as f32;
    let rstd = 1.0 / core::f32::math::sqrt(var + EPS);
    unroll!(k in 0..4 => {
        if at(k) < c {
            // SAFETY: whole aligned chunks inside `weight`, `bias` (c values) and the row.
            unsafe {
                let w = T::load8(p.weight.as_ptr().add(at(k)));
                let b = T::load8(p.bias.as_ptr().add(at(k)));
                let o = core::array::from_fn(|e| (v[k][e] - mean) * rstd * w[e] + b[e]);
                T::store8(p.out.as_mut_ptr().add(offset + at(k)), o);
            }
        }
    });
    (mean, rstd)
}

/// `(x − mean)·rstd`: an input's normalised value, as both backward kernels form it in both
/// their passes.
#[inline(always)]
fn normalised(x: f32, mean: f32, rstd: f32) -> f32 {
    (x - mean) * rstd
}

/// One element's input gradient added to its old value `d`: `d + rstd·(w·g − mean(g) −
/// norm·mean(g·norm))` for the input `x`, weight `w` and output gradient `g`, given the row's
/// `(mean, rstd)` and the means of `g·w` and `g·w·norm` over the row. One expression for both
/// backward kernels, so that they round alike.
#[inline(always)]
fn dinp_element(
    d: f32,
    (x, w, g): (f32, f32, f32),
    (mean, rstd): (f32, f32),
    (g_mean, g_norm_mean): (f32, f32),
) -> f32 {
    d + rstd * (w * g - g_mean - normalised(x, mean, rstd) * g_norm_mean)
}

/// The rows of one backward warp: `(first, end, step)`, the warp taking rows `first, first +
/// step, …` below `end` (`kernel_abi::layernorm`'s partition: `R = 4·W` rows a block).
#[inline(always)]
fn backward_warp_rows(rows: u32) -> (u32, u32, u32) {
    let warps = block_dim_x() / 32;
    let rows_per_block = warps * BACKWARD_ROWS_PER_WARP;
    let first = block_idx_x() * rows_per_block;
    let end = if rows - first < rows_per_block { rows } else { first + rows_per_block };
    (first + warp_idx_x(), end, warps)
}

/// The chunked kernel body (any `c`, vectorized or not): each warp's rows in turn, chunk by
/// chunk, a first pass adding to the channel sums in shared memory and summing `g =
/// dout·weight` and `g·norm` over the row, a second re-reading the row, updating `dinp` and,
/// when `COLSUM`, adding the values stored to a third array of channel sums.
///
/// Each pass waits for a chunk's loads before the next chunk's (the shared-memory updates
/// between them keep the compiler from hoisting loads), and four blocks' 48 KiB of channel
/// sums leave L1 too small to keep a row per warp for the second pass: an H100 ran the bf16
/// backward at 48% of its DRAM bandwidth with 55% of the issue slots busy (Nsight Compute,
/// 2026-11-27). So each row's lines of `dout`, `inp` and `dinp` are first requested into L2
/// all at once (prefetches: no registers held, no value changed), and the passes' loads wait
/// for L2 rather than DRAM: about one DRAM round trip a row instead of several. The 16-bit
/// rows of GPT-2 small take [`backward_cached`] instead.
///
/// # Safety
/// Launched by `gpu-host`'s `layernorm_backward` with `backward_warps(c)` warps per block,
/// `⌈rows / backward_rows_per_block(c)⌉` blocks and `backward_shared_bytes(c, COLSUM)` of
/// dynamic shared memory, after checking the `rows × c`, `c` and `rows` lengths, `c <= 6144`
/// and `partials` for `blocks × backward_parts(COLSUM)·c` values; every thread reaches the
/// `bar_sync`.
#[inline(always)]
unsafe fn backward<T: Elem, const COLSUM: bool>(p: LayerNormBackwardParams<T>) {
    let c = p.c as usize;
    let (mut row, end, warps) = backward_warp_rows(p.rows);
    let vector = p.c.is_multiple_of(8)
        && p.dout.is_aligned_to(16)
        && p.inp.is_aligned_to(16)
        && p.weight.is_aligned_to(16)
        && p.dinp.is_aligned_to(16);
    // This warp's channel sums in shared memory, arrays of `len` words, channels permuted
    // against bank conflicts (`backward_sum_word`): Σ dout·norm, Σ dout, then Σ dinp.
    let len = backward_sums_len(p.c);
    let sums = dynamic_smem_base() + warp_idx_x() * backward_parts(COLSUM) * len * 4;
    let dw_at = |ch: usize| sums + backward_sum_word(ch as u32) * 4;
    let db_at = |ch: usize| sums + (len + backward_sum_word(ch as u32)) * 4;
    let ds_at = |ch: usize| sums + (2 * len + backward_sum_word(ch as u32)) * 4;
    for_lane_chunks(c, |ch, count| {
        unroll!(k in 0..8 => {
            if k < count {
                // SAFETY: the launcher sized shared memory for the warps' `parts × c` f32.
                unsafe {
                    st_shared_f32(dw_at(ch + k), 0.0);
                    st_shared_f32(db_at(ch + k), 0.0);
                    if COLSUM {
                        st_shared_f32(ds_at(ch + k), 0.0);
                    }
                }
            }
        });
    });

    while row < end {
        let offset = row as usize * c;
        // SAFETY: (here and in the "see above" blocks below) the launcher checked every buffer
        // covers `rows × c`, `c` or `rows` elements; `row < rows` and `ch + count <= c`.
        let (mean, rstd, dout, inp) = unsafe {
            let r = row as usize;
            (
                *p.mean.as_ptr().add(r),
                *p.rstd.as_ptr().add(r),
                p.dout.as_ptr().add(offset),
                p.inp.as_ptr().add(offset),
            )
        };
        // The row's lines of `dout`, `inp` and `dinp`, requested into L2 at once (above).
        for_lane_chunks(c, |ch, _| {
            // SAFETY: addresses inside the row's buffers (`ch < c`), which a prefetch does not
            // read into the program.
            unsafe {
                global::prefetch_l2(dout.add(ch).cast());
                global::prefetch_l2(inp.add(ch).cast());
                global::prefetch_l2(p.dinp.as_mut_ptr().add(offset + ch).cast_const().cast());
            }
        });
        let (mut g_sum, mut g_norm_sum) = (0.0, 0.0);
        for_lane_chunks(c, |ch, count| {
            // SAFETY: see above.
            let (g, x, w) = unsafe {
                (
                    load_chunk(dout.add(ch), count, vector),
                    load_chunk(inp.add(ch), count, vector),
                    load_chunk(p.weight.as_ptr().add(ch), count, vector),
                )
            };
            unroll!(k in 0..8 => {
                if k < count {
                    let norm = normalised(x[k], mean, rstd);
                    let wg = w[k] * g[k];
                    g_sum += wg;
                    g_norm_sum += wg * norm;
                    // SAFETY: this lane's own channels of this warp's sums.
                    unsafe {
                        st_shared_f32(dw_at(ch + k), ld_shared_f32(dw_at(ch + k)) + g[k] * norm);
                        st_shared_f32(db_at(ch + k), ld_shared_f32(db_at(ch + k)) + g[k]);
                    }
                }
            });
        });
        // SAFETY: the loop bounds are warp-uniform, so all 32 lanes are here.
        let (g_mean, g_norm_mean) =
            unsafe { (warp_sum(g_sum) / c as f32, warp_sum(g_norm_sum) / c as f32) };
        // SAFETY: see above; each lane rewrites only its own chunks of `dinp`.
        for_lane_chunks(c, |ch, count| unsafe {
            let g = load_chunk(dout.add(ch), count, vector);
            let x = load_chunk(inp.add(ch), count, vector);
            let w = load_chunk(p.weight.as_ptr().add(ch), count, vector);
            let dinp = p.dinp.as_mut_ptr().add(offset + ch);
            let d = load_chunk(dinp.cast_const(), count, vector);
            let updated = core::array::from_fn(|k| {
                dinp_element(d[k], (x[k], w[k], g[k]), (mean, rstd), (g_mean, g_norm_mean))
            });
            let stored = store_chunk(dinp, updated, count, vector);
            if COLSUM {
                // This lane's own channels of this warp's Σ dinp (sized by the launcher).
                unroll!(k in 0..8 => {
                    if k < count {
                        st_shared_f32(ds_at(ch + k), ld_shared_f32(ds_at(ch + k)) + stored[k]);
                    }
                });
            }
        });
        row += warps;
    }

    // SAFETY: forwarded launch contract; every warp's sums are in shared memory.
    unsafe { backward_block_sums::<T, COLSUM>(&p, warps, backward_sum_word) };
}

/// Chunks of 8 channels per lane in a row of [`BACKWARD_CACHED_MAX_C`] channels.
const BACKWARD_CACHED_CHUNKS: usize = BACKWARD_CACHED_MAX_C as usize / (32 * LANE_CHUNK);
const _: () = assert!(BACKWARD_CACHED_CHUNKS == 3, "backward_cached's loops are unrolled 3 times");

/// [`backward`] for 16-bit rows of at most [`BACKWARD_CACHED_MAX_C`] channels on the 16-byte
/// path (GPT-2 small): a warp keeps its channel sums in registers until its rows are done, and
/// loads each row's `dout`, `inp` and `dinp` at once, as raw words (12 registers each), while
/// the next row's lines are requested into L2. A row is one round trip to memory, and an
/// element costs no shared-memory access: [`backward`] spends four on it, with a permuted
/// address, and waits for its loads chunk by chunk. The sums are then stored where
/// [`backward`] keeps them, and the block adds them up the same way: the same additions in
/// the same order, so the same bits (tested). With `COLSUM`, the sums of the `dinp` stored
/// are added up in shared memory after each row (in registers they made ptxas spill at the
/// launch bound's 128), laid out by `backward_cached_dinp_word` rather than [`backward`]'s
/// permutation: a lane's 8 channels are two 16-byte accesses without bank conflicts instead of
/// 16 element accesses on addresses in 8 registers, which spilled too.
///
/// # Safety
/// As [`backward`], with `c % 8 == 0`, `c <= BACKWARD_CACHED_MAX_C` and `dout`, `inp`,
/// `weight` and `dinp` 16-byte aligned.
#[inline(always)]
unsafe fn backward_cached<T: Elem, const COLSUM: bool>(p: LayerNormBackwardParams<T>) {
    let c = p.c as usize;
    let (mut row, end, warps) = backward_warp_rows(p.rows);
    let first = lane_id() as usize * LANE_CHUNK;
    let at = |k: usize| first + 32 * LANE_CHUNK * k;
    let mut dw = [[0.0f32; 8]; BACKWARD_CACHED_CHUNKS];
    let mut db = [[0.0f32; 8]; BACKWARD_CACHED_CHUNKS];
    // This warp's sums in shared memory, where [`backward`] keeps them (its lines, repeated:
    // shared through a helper, they made ptxas spill that kernel at 64 registers).
    let len = backward_sums_len(p.c);
    let sums = || dynamic_smem_base() + warp_idx_x() * backward_parts(COLSUM) * len * 4;
    // Chunk `j`'s halves in `Σ dinp` (`backward_cached_dinp_word`): this lane's first half at
    // byte `swap` of the chunk, its second at `16 − swap`.
    let swap = lane_id() / 4 % 2 * 16;
    let ds_at = |ch: usize, half: u32| sums() + (2 * len + ch as u32) * 4 + (swap ^ (16 * half));
    let mut first_row = true;
    while row < end {
        let offset = row as usize * c;
        // SAFETY: (here and below) the launcher checked every buffer covers `rows × c`, `c` or
        // `rows` elements; `row < rows`, and chunk `k` is whole and inside the row when
        // `at(k) < c` (`c % 8 == 0`), 16-byte aligned since every row is (`c % 8 == 0`).
        let (mean, rstd, dout, inp, dinp) = unsafe {
            let r = row as usize;
            (
                *p.mean.as_ptr().add(r),
                *p.rstd.as_ptr().add(r),
                p.dout.as_ptr().add(offset),
                p.inp.as_ptr().add(offset),
                p.dinp.as_mut_ptr().add(offset),
            )
        };
        let mut words = [[[0u32; 8]; BACKWARD_CACHED_CHUNKS]; 3];
        unroll!(k in 0..3 => {
            if at(k) < c {
                // SAFETY: see above.
                unsafe {
                    words[0][k] = T::load8_words(dout.add(at(k)));
                    words[1][k] = T::load8_words(inp.add(at(k)));
                    words[2][k] = T::load8_words(dinp.add(at(k)).cast_const());
                }
            }
        });
        let next = row + warps;
        if next < end {
            let offset = next as usize * c;
            unroll!(k in 0..3 => {
                if at(k) < c {
                    // SAFETY: addresses inside the next row (above), which a prefetch does not
                    // read into the program.
                    unsafe {
                        global::prefetch_l2(p.dout.as_ptr().add(offset + at(k)).cast());
                        global::prefetch_l2(p.inp.as_ptr().add(offset + at(k)).cast());
                        let d = p.dinp.as_mut_ptr().add(offset + at(k)).cast_const();
                        global::prefetch_l2(d.cast());
                    }
                }
            });
        }
        let (mut g_sum, mut g_norm_sum) = (0.0, 0.0);
        unroll!(k in 0..3 => {
            if at(k) < c {
                let (g, x) = (T::widen8(words[0][k]), T::widen8(words[1][k]));
                // SAFETY: see above.
                let w = unsafe { T::load8(p.weight.as_ptr().add(at(k))) };
                unroll!(e in 0..8 => {
                    let norm = normalised(x[e], mean, rstd);
                    let wg = w[e] * g[e];
                    g_sum += wg;
                    g_norm_sum += wg * norm;
                    dw[k][e] += g[e] * norm;
                    db[k][e] += g[e];
                });
            }
        });
        // SAFETY: the loop bounds are warp-uniform, so all 32 lanes are here.
        let (g_mean, g_norm_mean) =
            unsafe { (warp_sum(g_sum) / c as f32, warp_sum(g_norm_sum) / c as f32) };
        unroll!(k in 0..3 => {
            if at(k) < c {
                let (g, x) = (T::widen8(words[0][k]), T::widen8(words[1][k]));
                let d = T::widen8(words[2][k]);
                // SAFETY: see above; each lane rewrites only its own chunks of `dinp`.
                unsafe {
                    let w = T::load8(p.weight.as_ptr().add(at(k)));
                    let updated = core::array::from_fn(|e| {
                        dinp_element(d[e], (x[e], w[e], g[e]), (mean, rstd), (g_mean, g_norm_mean))
                    });
                    let stored = T::narrow8(updated);
                    T::store8_words(dinp.add(at(k)), stored);
                    if COLSUM {
                        // This lane's own 8 channels of this warp's Σ dinp, 16-byte aligned
                        // (`len` and `at(k)` are multiples of 8; sized by the launcher).
                        let stored = T::widen8(stored);
                        let ds = [ds_at(at(k), 0), ds_at(at(k), 1)];
                        let old = match first_row {
                            true => [[0; 4]; 2],
                            false => ds.map(|ds| ld_shared_v4_u32(ds)),
                        };
                        let sum = |i: usize| {
                            let e = |j: usize| f32::from_bits(old[i][j]) + stored[4 * i + j];
                            [e(0), e(1), e(2), e(3)].map(f32::to_bits)
                        };
                        st_shared_v4_u32(ds[0], sum(0));
                        st_shared_v4_u32(ds[1], sum(1));
                    }
                }
            }
        });
        row += warps;
        first_row = false;
    }
    if COLSUM && first_row {
        // A warp of a last block short of rows: no row wrote its `Σ dinp`.
        unroll!(k in 0..3 => {
            if at(k) < c {
                // SAFETY: this lane's own channels of this warp's sums (above).
                unsafe {
                    st_shared_v4_u32(ds_at(at(k), 0), [0; 4]);
                    st_shared_v4_u32(ds_at(at(k), 1), [0; 4]);
                }
            }
        });
    }
    let sums = sums();
    let dw_at = |ch: usize| sums + backward_sum_word(ch as u32) * 4;
    let db_at = |ch: usize| sums + (len + backward_sum_word(ch as u32)) * 4;
    unroll!(k in 0..3 => {
        if at(k) < c {
            unroll!(e in 0..8 => {
                // SAFETY: the launcher sized shared memory for the warps' arrays; this lane's
                // own channels of this warp's sums.
                unsafe {
                    st_shared_f32(dw_at(at(k) + e), dw[k][e]);
                    st_shared_f32(db_at(at(k) + e), db[k][e]);
                }
            });
        }
    });
    // SAFETY: forwarded launch contract; every warp's sums are in shared memory.
    unsafe { backward_block_sums::<T, COLSUM>(&p, warps, backward_cached_dinp_word) };
}

/// The end of both backward bodies: once every warp's sums are in shared memory, the block
/// writes them, added in warp order, to its slot of `partials`. `dinp_word` places channel
/// `ch` in a warp's `Σ dinp` array (the other two are permuted by [`backward_sum_word`]).
///
/// # Safety
/// As [`backward`]; every thread of the block calls it (it synchronises the block).
#[inline(always)]
unsafe fn backward_block_sums<T: Copy, const COLSUM: bool>(
    p: &LayerNormBackwardParams<T>,
    warps: u32,
    dinp_word: impl Fn(u32) -> u32,
) {
    let c = p.c as usize;
    let len = backward_sums_len(p.c);
    let parts = backward_parts(COLSUM);
    // SAFETY: block-uniform call site.
    unsafe { bar_sync() };
    // SAFETY: the launcher sized `partials` for `blocks × parts·c` values.
    let partials =
        unsafe { p.partials.as_mut_ptr().add(block_idx_x() as usize * parts as usize * c) };
    let base = dynamic_smem_base();
    let mut i = thread_idx_x() as usize;
    while i < parts as usize * c {
        // Output i is channel i of Σ dout·norm (i < c), else channel i − c of Σ dout, else
        // (COLSUM) channel i − 2c of Σ dinp.
        let word = if i < c {
            backward_sum_word(i as u32)
        } else if !COLSUM || i < 2 * c {
            len + backward_sum_word((i - c) as u32)
        } else {
            2 * len + dinp_word((i - 2 * c) as u32)
        };
        let mut total = 0.0;
        for w in 0..warps {
            // SAFETY: every warp's sums were written before the barrier.
            total += unsafe { ld_shared_f32(base + (w * parts * len + word) * 4) };
        }
        // SAFETY: the launcher sized `partials` for `blocks × parts·c` values.
        unsafe { *partials.add(i) = total };
        i += block_dim_x() as usize;
    }
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `layernorm_backward` right after [`backward`] wrote `partials`
/// (`blocks × parts·c` values, `parts` 3 when `dinp_sum` is not null, else 2), with `⌈c /
/// REDUCE_CHANNELS⌉` blocks of `REDUCE_THREADS` threads and `REDUCE_SHARED_BYTES` of dynamic
/// shared memory; `dweight`, `dbias` and a non-null `dinp_sum` hold `c` values. Every thread
/// reaches the `bar_sync`.
#[inline(always)]
unsafe fn backward_reduce(p: LayerNormBackwardReduceParams) {
    let tid = thread_idx_x();
    let (group, lane) = (tid / REDUCE_CHANNELS, tid % REDUCE_CHANNELS);
    let c = p.c as usize;
    let dinp_sums = !p.dinp_sum.is_null();
    let parts = backward_parts(dinp_sums) as usize;
    let ch = (block_idx_x() * REDUCE_CHANNELS + lane) as usize;
    let mut sums = [0.0f32; 3];
    if ch < c {
        // Slots group, group + 16, …, in order, eight of them loaded before their additions:
        // one load pair per slot in a loop waited out a round trip per slot.
        let slot = |i: u32| -> Option<usize> {
            let s = (group + REDUCE_GROUPS * i) as usize;
            (s < p.blocks as usize).then_some(s)
        };
        let mut first = 0;
        while first < p.blocks.div_ceil(REDUCE_GROUPS) {
            let mut loaded = [[0.0f32; 3]; 8];
            unroll!(i in 0..8 => {
                if let Some(s) = slot(first + i as u32) {
                    // SAFETY: the launcher checked `partials` holds `blocks × parts·c` values;
                    // s < blocks, `ch < c`.
                    unsafe {
                        let at = p.partials.as_ptr().add(s * parts * c + ch);
                        loaded[i][0] = *at;
                        loaded[i][1] = *at.add(c);
                        if dinp_sums {
                            loaded[i][2] = *at.add(2 * c);
                        }
                    }
                }
            });
            unroll!(i in 0..8 => {
                if slot(first + i as u32).is_some() {
                    unroll!(part in 0..3 => {
                        sums[part] += loaded[i][part];
                    });
                }
            });
            first += 8;
        }
    }
    // Group `g`'s sum of array `part` at word `(part·16 + g)·8 + lane`: a warp's four groups
    // store to 32 consecutive words, 32 banks.
    let base = dynamic_smem_base();
    let at = |g: u32, part: u32| base + ((part * REDUCE_GROUPS + g) * REDUCE_CHANNELS + lane) * 4;
    // SAFETY: the launcher gave `REDUCE_SHARED_BYTES`: three words per thread.
    unsafe {
        unroll!(part in 0..3 => {
            st_shared_f32(at(group, part as u32), sums[part]);
        });
        bar_sync();
    }
    if group == 0 && ch < c {
        let mut totals = [0.0f32; 3];
        for g in 0..REDUCE_GROUPS {
            unroll!(part in 0..3 => {
                // SAFETY: every group stored its sums before the barrier.
                totals[part] += unsafe { ld_shared_f32(at(g, part as u32)) };
            });
        }
        let outputs = [p.dweight, p.dbias, p.dinp_sum];
        unroll!(part in 0..3 => {
            if part < parts {
                // SAFETY: `ch < c` and each gradient present holds `c` values.
                unsafe {
                    let out = outputs[part].as_mut_ptr().add(ch);
                    if p.beta != 0.0 {
                        totals[part] += p.beta * *out;
                    }
                    *out = totals[part];
                }
            }
        });
    }
}

entries! { "layernorm";
    layernorm_forward_f32(LayerNormForwardParams<f32>) => forward::<f32, false>;
    layernorm_forward_bf16(LayerNormForwardParams<Bf16>) => forward::<Bf16, false>;
    layernorm_forward_f16(LayerNormForwardParams<F16>) => forward::<F16, false>;
    residual_layernorm_forward_f32(LayerNormForwardParams<f32>) => forward::<f32, true>;
    residual_layernorm_forward_bf16(LayerNormForwardParams<Bf16>) => forward::<Bf16, true>;
    residual_layernorm_forward_f16(LayerNormForwardParams<F16>) => forward::<F16, true>;
    layernorm_backward_f32(LayerNormBackwardParams<f32>) => backward::<f32, false>;
    layernorm_backward_bf16(LayerNormBackwardParams<Bf16>) => backward::<Bf16, false>;
    layernorm_backward_f16(LayerNormBackwardParams<F16>) => backward::<F16, false>;
    layernorm_backward_cached_bf16(LayerNormBackwardParams<Bf16>) =>
        backward_cached::<Bf16, false>;
    layernorm_backward_cached_f16(LayerNormBackwardParams<F16>) => backward_cached::<F16, false>;
    layernorm_backward_colsum_f32(LayerNormBackwardParams<f32>) => backward::<f32, true>;
    layernorm_backward_colsum_bf16(LayerNormBackwardParams<Bf16>) => backward::<Bf16, true>;
    layernorm_backward_colsum_f16(LayerNormBackwardParams<F16>) => backward::<F16, true>;
    layernorm_backward_cached_colsum_bf16(LayerNormBackwardParams<Bf16>) =>
        backward_cached::<Bf16, true>;
    layernorm_backward_cached_colsum_f16(LayerNormBackwardParams<F16>) =>
        backward_cached::<F16, true>;
    layernorm_backward_reduce(LayerNormBackwardReduceParams) => backward_reduce;
}
