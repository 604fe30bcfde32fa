//! Encoder kernels (see `kernel_abi::encoder` for their contracts).
//!
//! Both kernels give each warp one work item at a time (warp-stride over the items): a row of
//! the output in the forward, a (bucket, 32-lane channel chunk) in the backward. A lane owns
//! 8 adjacent channels on the 16-byte path and one channel otherwise, except in the
//! backward's hot items (the largest buckets), where it owns one channel and loads 32 rows
//! of it at once.

use crate::arch::shfl::{FULL_MASK, shfl_idx_u32};
use crate::arch::{block_dim_x, block_idx_x, grid_dim_x, lane_id, warp_idx_x};
use crate::elem::Elem;
use crate::entry::entries;
use crate::unroll::unroll;
use kernel_abi::encoder::{
    BackwardItems, EncoderBackwardParams, EncoderForwardParams, HOT_BUCKET_ROWS, VECTOR_CHANNELS,
    backward_items, chunks_per_row, hot_chunks_per_row, units_per_row, vectorized,
};
use kernel_abi::gemm::rem;
use kernel_abi::{Bf16, F16};

const LANES: u32 = 32;

/// This warp's index in the grid and the number of warps of the grid.
#[inline(always)]
fn grid_warps() -> (u64, u64) {
    let per_block = (block_dim_x() / LANES) as u64;
    (block_idx_x() as u64 * per_block + warp_idx_x() as u64, grid_dim_x() as u64 * per_block)
}

/// `(a / b, a % b)`, or `(0, 0)` when `b == 0` (no panic path; no valid launch has it).
#[inline(always)]
fn div_rem(a: u64, b: u64) -> (u64, u64) {
    match (a.checked_div(b), a.checked_rem(b)) {
        (Some(q), Some(r)) => (q, r),
        _ => (0, 0),
    }
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `encoder_forward` on a one-dimensional grid, with the ids of a
/// `Tokens` batch (each checked `< vocab` at upload), after checking that `wte` has at least
/// `vocab` rows of `c`, `wpe` at least `t`, `out` exactly `rows = b·t`, and that `rows` and
/// `c` fit `u32` (`c <= 2^32 − 33`).
#[inline(always)]
unsafe fn forward<T: Elem>(p: EncoderForwardParams<T>) {
    let vector = vectorized(p.c, p.out.addr() | p.wte.addr() | p.wpe.addr());
    let units = units_per_row(p.c, vector);
    let c = p.c as usize;
    let (mut row, warps) = grid_warps();
    while row < p.rows as u64 {
        // SAFETY: row < rows; the launcher checked every token id is a row of wte, t <= the
        // rows of wpe, and that out holds rows × c elements. A lane's unit lies inside the
        // row; the 16-byte path has c % 8 == 0 and aligned bases, so its chunks are aligned.
        unsafe {
            let token = *p.tokens.as_ptr().add(row as usize) as usize;
            let pos = rem(row as u32, p.t) as usize;
            let out = p.out.as_mut_ptr().add(row as usize * c);
            let (wte, wpe) = (p.wte.as_ptr().add(token * c), p.wpe.as_ptr().add(pos * c));
            let mut unit = lane_id();
            if vector {
                while unit < units {
                    let at = (unit * VECTOR_CHANNELS) as usize;
                    let (e, q) = (T::load8(wte.add(at)), T::load8(wpe.add(at)));
                    T::store8(out.add(at), core::array::from_fn(|k| e[k] + q[k]));
                    unit += LANES;
                }
            } else {
                while unit < units {
                    let at = unit as usize;
                    *out.add(at) = T::from_f32((*wte.add(at)).to_f32() + (*wpe.add(at)).to_f32());
                    unit += LANES;
                }
            }
        }
        row += warps;
    }
}

/// `acc + load(0) + load(1) + ... + load(count - 1)`, added in that order; the loads are
/// issued four at a time so that several rows are in flight.
#[inline(always)]
fn sum_rows<const N: usize>(
    mut acc: [f32; N],
    count: u32,
    load: impl Fn(u32) -> [f32; N],
) -> [f32; N] {
    let mut k = 0;
    while count - k >= 4 {
        let rows: [[f32; N]; 4] = [load(k), load(k + 1), load(k + 2), load(k + 3)];
        unroll!(i in 0..4 => {
            acc = core::array::from_fn(|e| acc[e] + rows[i][e]);
        });
        k += 4;
    }
    while k < count {
        let row = load(k);
        acc = core::array::from_fn(|e| acc[e] + row[e]);
        k += 1;
    }
    acc
}

/// Adds `count` rows of `dout` (row `k` is `row_of(k)`), in order, to the channels of lane
/// unit `unit` of the gradient row `grad`.
///
/// # Safety
/// `grad` must be a row of `c` f32 and `row_of(k)` a row of `dout` for every `k < count`;
/// `unit` must be a unit of the row (`< units_per_row(c, vector)`), with the alignment the
/// 16-byte path needs when `vector`.
#[inline(always)]
unsafe fn accumulate<T: Elem>(
    grad: *mut f32,
    dout: *const T,
    c: usize,
    (unit, vector): (u32, bool),
    count: u32,
    row_of: impl Fn(u32) -> usize,
) {
    // SAFETY: the caller's contract: every access is inside `grad`'s row or a row of `dout`.
    unsafe {
        if vector {
            let at = (unit * VECTOR_CHANNELS) as usize;
            let start = f32::load8(grad.add(at));
            let sum = sum_rows(start, count, |k| T::load8(dout.add(row_of(k) * c + at)));
            f32::store8(grad.add(at), sum);
        } else {
            let at = unit as usize;
            let start = [*grad.add(at)];
            let sum = sum_rows(start, count, |k| [(*dout.add(row_of(k) * c + at)).to_f32()]);
            *grad.add(at) = sum[0];
        }
    }
}

/// Adds `count` rows of `dout`, the rows `positions[0..count]` in that order, to channel `ch`
/// of the gradient row `grad` (nothing where `ch >= c`): each round, lane `l` reads position
/// `l` of the next [`HOT_BUCKET_ROWS`], the warp loads those rows (the positions broadcast by
/// shuffles) before it adds the first, and the next round's positions are read before this
/// round's rows.
///
/// # Safety
/// `grad` must be a row of `c` f32 and `positions[0..count]` rows of `dout` (`c` channels per
/// row); every lane of the warp calls it together (the shuffles), with the same `count`.
#[inline(always)]
unsafe fn accumulate_hot<T: Elem>(
    grad: *mut f32,
    dout: *const T,
    (c, ch): (usize, usize),
    positions: *const u32,
    count: u32,
) {
    const HALF: u32 = HOT_BUCKET_ROWS / 2;
    const _: () = assert!(HALF == 16, "the rounds are unrolled as two halves of 16 rows");
    let lane = lane_id();
    let active = ch < c;
    let position = |first: u32| -> u32 {
        let at = first as u64 + lane as u64;
        if at >= count as u64 {
            return 0;
        }
        // SAFETY: `at < count`: `positions` holds `count` entries (the caller's contract).
        unsafe { *positions.add(at as usize) }
    };
    let load = |pos: u32, row: u32, n: u32| -> f32 {
        // SAFETY: every lane of the warp is here: the rounds' bounds are warp-uniform.
        let src = unsafe { shfl_idx_u32(FULL_MASK, pos, row) } as usize;
        if !(active && row < n) {
            return 0.0;
        }
        // SAFETY: lane `row < n` read a position of this round, a row of `dout` (the
        // caller's contract), and `ch < c` is inside it.
        unsafe { (*dout.add(src * c + ch)).to_f32() }
    };
    let mut acc = 0.0;
    if active {
        // SAFETY: `ch < c`, inside `grad`'s row.
        acc = unsafe { *grad.add(ch) };
    }
    let mut pos = position(0);
    let mut k = 0;
    while k < count {
        let next = position(k.saturating_add(HOT_BUCKET_ROWS));
        let n = (count - k).min(HOT_BUCKET_ROWS);
        let mut first = [0.0f32; HALF as usize];
        let mut second = [0.0f32; HALF as usize];
        unroll!(r in 0..16 => {
            first[r] = load(pos, r as u32, n);
        });
        unroll!(r in 0..16 => {
            second[r] = load(pos, HALF + r as u32, n);
        });
        unroll!(r in 0..16 => {
            if (r as u32) < n {
                acc += first[r];
            }
        });
        unroll!(r in 0..16 => {
            if HALF + (r as u32) < n {
                acc += second[r];
            }
        });
        pos = next;
        k = k.saturating_add(HOT_BUCKET_ROWS);
    }
    if active {
        // SAFETY: `ch < c`, inside `grad`'s row.
        unsafe { *grad.add(ch) = acc };
    }
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `encoder_backward` with the buckets of a `Tokens` batch (distinct
/// ids `< vocab`, each bucket's rows of `dout` increasing, together a partition of `0..b·t`;
/// `hot_buckets <= buckets`), after checking that `dwte` has at least `vocab` rows of `c`,
/// `dwpe` at least `t` and `dout` `b·t`; `dwte` and `dwpe` are disjoint mutable borrows, so
/// no two work items share a word.
#[inline(always)]
unsafe fn backward<T: Elem>(p: EncoderBackwardParams<T>) {
    let vector = vectorized(p.c, p.dwte.addr() | p.dwpe.addr() | p.dout.addr());
    let units = units_per_row(p.c, vector);
    let chunks = chunks_per_row(units) as u64;
    let hot_chunks = hot_chunks_per_row(p.c) as u64;
    let hot_items = p.hot_buckets as u64 * hot_chunks;
    let (buckets, hot_buckets) = (p.buckets, p.hot_buckets);
    let items = backward_items(BackwardItems { buckets, hot_buckets, t: p.t, c: p.c, vector });
    let (c, t) = (p.c as usize, p.t as usize);
    let (mut item, warps) = grid_warps();
    while item < items {
        if item < hot_items {
            let (k, chunk) = div_rem(item, hot_chunks);
            let ch = chunk as usize * LANES as usize + lane_id() as usize;
            // SAFETY: k < hot_buckets <= buckets: as for the other buckets below; every lane
            // of the warp is here (`item` is warp-uniform).
            unsafe {
                let k = k as usize;
                let start = *p.bucket_starts.as_ptr().add(k);
                let count = (*p.bucket_starts.as_ptr().add(k + 1)).wrapping_sub(start);
                let token = *p.bucket_tokens.as_ptr().add(k) as usize;
                let positions = p.positions.as_ptr().add(start as usize);
                let grad = p.dwte.as_mut_ptr().add(token * c);
                accumulate_hot(grad, p.dout.as_ptr(), (c, ch), positions, count);
            }
            item += warps;
            continue;
        }
        let (index, chunk) = div_rem(item - hot_items, chunks);
        let index = index + p.hot_buckets as u64;
        let unit = chunk as u32 * LANES + lane_id();
        if unit < units {
            if index < p.buckets as u64 {
                let k = index as usize;
                // SAFETY: k < buckets: the bucket arrays hold it; the launcher's token batch
                // guarantees its rows are rows of dout, in increasing order, and its token a
                // row of dwte.
                unsafe {
                    let start = *p.bucket_starts.as_ptr().add(k);
                    let count = (*p.bucket_starts.as_ptr().add(k + 1)).wrapping_sub(start);
                    let token = *p.bucket_tokens.as_ptr().add(k) as usize;
                    let positions = p.positions.as_ptr().add(start as usize);
                    let grad = p.dwte.as_mut_ptr().add(token * c);
                    let row_of = |r: u32| *positions.add(r as usize) as usize;
                    accumulate(grad, p.dout.as_ptr(), c, (unit, vector), count, row_of);
                }
            } else {
                let pos = (index - p.buckets as u64) as usize;
                // SAFETY: pos < t <= the rows of dwpe; rows bi·t + pos, bi < b, are rows of
                // dout.
                unsafe {
                    let grad = p.dwpe.as_mut_ptr().add(pos * c);
                    let row_of = |bi: u32| bi as usize * t + pos;
                    accumulate(grad, p.dout.as_ptr(), c, (unit, vector), p.b, row_of);
                }
            }
        }
        item += warps;
    }
}

entries! { "encoder";
    encoder_forward_f32(EncoderForwardParams<f32>) => forward::<f32>;
    encoder_forward_bf16(EncoderForwardParams<Bf16>) => forward::<Bf16>;
    encoder_forward_f16(EncoderForwardParams<F16>) => forward::<F16>;
    encoder_backward_f32(EncoderBackwardParams<f32>) => backward::<f32>;
    encoder_backward_bf16(EncoderBackwardParams<Bf16>) => backward::<Bf16>;
    encoder_backward_f16(EncoderBackwardParams<F16>) => backward::<F16>;
}
