//! Materialised causal attention: the permutes between the qkv layout and per-head matrices,
//! and the causal scaled softmax forward and backward (see `kernel_abi::attention` for the
//! layouts, the launch geometry and the formulas).
//!
//! The permutes copy bits (no conversion), in chunks of 8 elements of a head row. The softmax
//! kernels give each row to one warp: lane `l` takes the chunks starting at columns
//! `8·l, 8·l + 256, …` in every pass, so it rewrites only what it read itself (in place is
//! safe), and reads only the columns `0..=t` of row `t`.

use crate::arch::global::{ld_global_nc_v4_u32, st_global_v4_u32};
use crate::arch::math::ex2_approx_f32;
use crate::arch::{block_dim_x, block_idx_x, block_idx_y, block_idx_z, thread_idx_x, warp_idx_x};
use crate::elem::{Elem, load_chunk, store_chunk};
use crate::entry::entries;
use crate::softmax::{Normaliser, valid_in};
use crate::unroll::unroll;
use crate::warp::{for_lane_chunks, warp_sum};
use core::f32::consts::LOG2_E;
use kernel_abi::attention::{
    CHUNK, HeadDims, PermuteBackwardParams, PermuteParams, SoftmaxBackwardParams,
    SoftmaxForwardParams, UnpermuteBackwardParams, UnpermuteParams,
};
use kernel_abi::{Bf16, F16};

/// Copies the `count` (1..=8) elements at `src` to `dst` bit for bit: 16-byte accesses when
/// `vector && count == 8`, element by element otherwise.
///
/// # Safety
/// `src` must hold `count` readable elements that this kernel does not write, `dst` `count`
/// writable ones; both 16-byte aligned when `vector`.
#[inline(always)]
unsafe fn copy_chunk<T: Copy>(src: *const T, dst: *mut T, count: usize, vector: bool) {
    if vector && count == 8 {
        let (src, dst) = (src.cast::<u32>(), dst.cast::<u32>());
        // 8 elements are 16 bytes per byte of element size / 2: one vector (16-bit), two (f32).
        for i in 0..size_of::<T>() / 2 {
            // SAFETY: the caller's contract; `i` < the number of 16-byte vectors in 8 elements.
            unsafe { st_global_v4_u32(dst.add(4 * i), ld_global_nc_v4_u32(src.add(4 * i))) };
        }
        return;
    }
    unroll!(k in 0..8 => {
        if k < count {
            // SAFETY: k < count elements on both sides (the caller's contract).
            unsafe { *dst.add(k) = *src.add(k) };
        }
    });
}

/// Where this thread's chunk lives: element offsets of its first element in the per-head
/// layout (B, NH, T, hd) and in a token-major layout with rows of `token_row` elements whose
/// head `h` starts at column `h·hd`, and its number of elements.
struct ChunkAt {
    head: usize,
    token: usize,
    count: usize,
}

impl ChunkAt {
    /// This thread's chunk (head `blockIdx.y`, batch `blockIdx.z`), or `None` past the end.
    #[inline(always)]
    fn of_thread(d: HeadDims, token_row: usize) -> Option<Self> {
        let i = block_idx_x() * block_dim_x() + thread_idx_x();
        let pos = i.checked_div(d.chunks)?;
        if pos >= d.t {
            return None;
        }
        let ch = ((i - pos * d.chunks) * CHUNK) as usize;
        let (t, nh, hd) = (d.t as usize, d.nh as usize, d.hd as usize);
        let (pos, h, b) = (pos as usize, block_idx_y() as usize, block_idx_z() as usize);
        Some(Self {
            head: ((b * nh + h) * t + pos) * hd + ch,
            token: (b * t + pos) * token_row + h * hd + ch,
            count: if hd - ch < CHUNK as usize { hd - ch } else { CHUNK as usize },
        })
    }
}

/// Whether whole chunks can move as 16-byte vectors: `hd % 8 == 0` and every buffer aligned.
#[inline(always)]
fn vectorizable<const N: usize>(d: HeadDims, addrs: [u64; N]) -> bool {
    d.hd.is_multiple_of(CHUNK) && addrs.iter().all(|a| a.is_multiple_of(16))
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `attention_permute` with the grid `(⌈T·chunks / threads⌉, NH, B)`
/// of `dims`, after checking that `qkv` holds B·T·3C elements and `q`, `k`, `v` B·NH·T·hd
/// each; the outputs are mutable borrows, overlapping neither each other nor `qkv`.
#[inline(always)]
unsafe fn permute<T: Copy>(p: PermuteParams<T>) {
    let d = p.dims;
    let c = (d.nh * d.hd) as usize;
    let Some(at) = ChunkAt::of_thread(d, 3 * c) else { return };
    let vector = vectorizable(d, [p.qkv.addr(), p.q.addr(), p.k.addr(), p.v.addr()]);
    // SAFETY: the launcher checked `qkv` holds B·T·3C elements and `q`, `k`, `v` B·NH·T·hd
    // each, and launched the grid `(⌈T·chunks / threads⌉, NH, B)`; the outputs do not overlap
    // the input.
    unsafe {
        let src = p.qkv.as_ptr().add(at.token);
        copy_chunk(src, p.q.as_mut_ptr().add(at.head), at.count, vector);
        copy_chunk(src.add(c), p.k.as_mut_ptr().add(at.head), at.count, vector);
        copy_chunk(src.add(2 * c), p.v.as_mut_ptr().add(at.head), at.count, vector);
    }
}

/// The kernel body.
///
/// # Safety
/// As [`permute`], launched by `attention_permute_backward`: `dq`, `dk`, `dv` hold B·NH·T·hd
/// elements each and `dqkv` (a mutable borrow, overlapping none of them) B·T·3C.
#[inline(always)]
unsafe fn permute_backward<T: Copy>(p: PermuteBackwardParams<T>) {
    let d = p.dims;
    let c = (d.nh * d.hd) as usize;
    let Some(at) = ChunkAt::of_thread(d, 3 * c) else { return };
    let vector = vectorizable(d, [p.dqkv.addr(), p.dq.addr(), p.dk.addr(), p.dv.addr()]);
    // SAFETY: as in `permute`, with the roles of the buffers swapped.
    unsafe {
        let dst = p.dqkv.as_mut_ptr().add(at.token);
        copy_chunk(p.dq.as_ptr().add(at.head), dst, at.count, vector);
        copy_chunk(p.dk.as_ptr().add(at.head), dst.add(c), at.count, vector);
        copy_chunk(p.dv.as_ptr().add(at.head), dst.add(2 * c), at.count, vector);
    }
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `attention_unpermute` with the grid `(⌈T·chunks / threads⌉, NH, B)`
/// of `dims`, after checking that `y` and `out` hold B·T·C elements each; `out` (a mutable
/// borrow) does not overlap `y`.
#[inline(always)]
unsafe fn unpermute<T: Copy>(p: UnpermuteParams<T>) {
    let d = p.dims;
    let Some(at) = ChunkAt::of_thread(d, (d.nh * d.hd) as usize) else { return };
    let vector = vectorizable(d, [p.y.addr(), p.out.addr()]);
    // SAFETY: the launcher checked `y` and `out` hold B·T·C elements each and launched the grid
    // `(⌈T·chunks / threads⌉, NH, B)`; they do not overlap.
    unsafe {
        copy_chunk(p.y.as_ptr().add(at.head), p.out.as_mut_ptr().add(at.token), at.count, vector)
    };
}

/// The kernel body.
///
/// # Safety
/// As [`unpermute`], launched by `attention_unpermute_backward`: `dout` and `dy` hold B·T·C
/// elements each and `dy` (a mutable borrow) does not overlap `dout`.
#[inline(always)]
unsafe fn unpermute_backward<T: Copy>(p: UnpermuteBackwardParams<T>) {
    let d = p.dims;
    let Some(at) = ChunkAt::of_thread(d, (d.nh * d.hd) as usize) else { return };
    let vector = vectorizable(d, [p.dout.addr(), p.dy.addr()]);
    // SAFETY: as in `unpermute`, with the roles of the buffers swapped.
    unsafe {
        copy_chunk(p.dout.as_ptr().add(at.token), p.dy.as_mut_ptr().add(at.head), at.count, vector)
    };
}

/// This warp's row: its index `t` within its T×T matrix and the element offset of the row, or
/// `None` past the matrix (warp-uniform).
#[inline(always)]
fn softmax_row(t: u32) -> Option<(usize, usize)> {
    let row = block_idx_x() * (block_dim_x() / 32) + warp_idx_x();
    if row >= t {
        return None;
    }
    let t = t as usize;
    Some((row as usize, (block_idx_y() as usize * t + row as usize) * t))
}

/// The columns of row `row` (of `t`) a softmax kernel writes: all of them when `block_rows` is
/// 0, else those up to the end of the row's block of `block_rows` rows (`SoftmaxForwardParams`).
#[inline(always)]
fn written_columns(row: usize, t: u32, block_rows: u32) -> usize {
    let written = match block_rows {
        0 => t,
        // 32-bit: `row < t` fits.
        b => (row as u32 / b + 1).saturating_mul(b).min(t),
    };
    written as usize
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `causal_softmax_forward` (or `_in_place`: `out == inp`) with
/// blocks of `SOFTMAX_THREADS` (whole warps) and the grid `(⌈T / warps⌉, matrices)`, after
/// checking that `inp` and `out` hold `matrices · T · T` elements; out of place, they are
/// disjoint. Each row's warp is converged at the shuffles (the row test is warp-uniform).
#[inline(always)]
unsafe fn softmax_forward<T: Elem>(p: SoftmaxForwardParams<T>) {
    let Some((row, offset)) = softmax_row(p.t) else { return };
    let written = written_columns(row, p.t, p.block_rows);
    let vector = p.t.is_multiple_of(CHUNK) && p.inp.is_aligned_to(16) && p.out.is_aligned_to(16);
    let scale = p.scale * LOG2_E;
    // SAFETY: (here and below) the launcher checked both buffers hold B·NH·T·T elements and
    // launched `B·NH` matrices of `⌈T / warps⌉` blocks; `row < T` and every chunk ends within
    // the row. In place, each lane reads its chunks before rewriting them (coherent loads).
    let (inp, out) = unsafe { (p.inp.as_ptr().add(offset), p.out.as_mut_ptr().add(offset)) };
    let valid = row + 1;

    let mut n = Normaliser::EMPTY;
    for_lane_chunks(valid, |col, count| {
        // SAFETY: see above.
        let x = unsafe { load_chunk(inp.add(col), count, vector) };
        n.add(x.map(|x| x * scale), count);
    });
    // SAFETY: every lane of the warp is here (the row test is warp-uniform).
    let n = unsafe { n.warp_merge() };
    let inv_sum = 1.0 / n.sum;

    for_lane_chunks(written, |col, count| {
        let live = valid_in(col, count, valid);
        let x = if live == 0 {
            [0.0; 8]
        } else {
            // SAFETY: see above.
            unsafe { load_chunk(inp.add(col), live, vector) }
        };
        let mut probs = [0.0; 8];
        unroll!(k in 0..8 => {
            if k < live {
                probs[k] = ex2_approx_f32(x[k] * scale - n.max) * inv_sum;
            }
        });
        // SAFETY: see above.
        unsafe { store_chunk(out.add(col), probs, count, vector) };
    });
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `causal_softmax_backward` (or `_in_place`: `dpreatt == datt`)
/// with the geometry of [`softmax_forward`], after checking that `att`, `datt` and `dpreatt`
/// hold `matrices · T · T` elements; `dpreatt` (a mutable borrow) overlaps no input except,
/// in place, exactly `datt`.
#[inline(always)]
unsafe fn softmax_backward<T: Elem>(p: SoftmaxBackwardParams<T>) {
    let Some((row, offset)) = softmax_row(p.t) else { return };
    let written = written_columns(row, p.t, p.block_rows);
    let vector = p.t.is_multiple_of(CHUNK)
        && p.att.is_aligned_to(16)
        && p.datt.is_aligned_to(16)
        && p.dpreatt.is_aligned_to(16);
    // SAFETY: (here and below) as in `softmax_forward`: the three buffers hold B·NH·T·T
    // elements; in place (`dpreatt == datt`) each lane reads its chunks before rewriting them.
    let (att, datt, dpreatt) = unsafe {
        (
            p.att.as_ptr().add(offset),
            p.datt.as_ptr().add(offset),
            p.dpreatt.as_mut_ptr().add(offset),
        )
    };
    let valid = row + 1;

    let mut dot = 0.0;
    for_lane_chunks(valid, |col, count| {
        // SAFETY: see above.
        let (a, d) = unsafe {
            (load_chunk(att.add(col), count, vector), load_chunk(datt.add(col), count, vector))
        };
        unroll!(k in 0..8 => {
            if k < count {
                dot += a[k] * d[k];
            }
        });
    });
    // SAFETY: every lane of the warp is here (the row test is warp-uniform).
    let dot = unsafe { warp_sum(dot) };

    for_lane_chunks(written, |col, count| {
        let live = valid_in(col, count, valid);
        let mut grad = [0.0; 8];
        if live > 0 {
            // SAFETY: see above.
            let (a, d) = unsafe {
                (load_chunk(att.add(col), live, vector), load_chunk(datt.add(col), live, vector))
            };
            unroll!(k in 0..8 => {
                if k < live {
                    grad[k] = a[k] * (d[k] - dot) * p.scale;
                }
            });
        }
        // SAFETY: see above.
        unsafe { store_chunk(dpreatt.add(col), grad, count, vector) };
    });
}

entries! { "attention";
    attention_permute_f32(PermuteParams<f32>) => permute::<f32>;
    attention_permute_bf16(PermuteParams<Bf16>) => permute::<Bf16>;
    attention_permute_f16(PermuteParams<F16>) => permute::<F16>;
    attention_permute_backward_f32(PermuteBackwardParams<f32>) => permute_backward::<f32>;
    attention_permute_backward_bf16(PermuteBackwardParams<Bf16>) => permute_backward::<Bf16>;
    attention_permute_backward_f16(PermuteBackwardParams<F16>) => permute_backward::<F16>;
    attention_unpermute_f32(UnpermuteParams<f32>) => unpermute::<f32>;
    attention_unpermute_bf16(UnpermuteParams<Bf16>) => unpermute::<Bf16>;
    attention_unpermute_f16(UnpermuteParams<F16>) => unpermute::<F16>;
    attention_unpermute_backward_f32(UnpermuteBackwardParams<f32>) => unpermute_backward::<f32>;
    attention_unpermute_backward_bf16(UnpermuteBackwardParams<Bf16>) => unpermute_backward::<Bf16>;
    attention_unpermute_backward_f16(UnpermuteBackwardParams<F16>) => unpermute_backward::<F16>;
    causal_softmax_forward_f32(SoftmaxForwardParams<f32>) => softmax_forward::<f32>;
    causal_softmax_forward_bf16(SoftmaxForwardParams<Bf16>) => softmax_forward::<Bf16>;
    causal_softmax_forward_f16(SoftmaxForwardParams<F16>) => softmax_forward::<F16>;
    causal_softmax_backward_f32(SoftmaxBackwardParams<f32>) => softmax_backward::<f32>;
    causal_softmax_backward_bf16(SoftmaxBackwardParams<Bf16>) => softmax_backward::<Bf16>;
    causal_softmax_backward_f16(SoftmaxBackwardParams<F16>) => softmax_backward::<F16>;
}
