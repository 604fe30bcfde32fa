//! Bias gradient: column sums of an M×N row-major matrix (`db = beta·db + Σ_m dy[m, :]`), in
//! two passes (geometry and order in `kernel_abi::gemm::bias_grad`):
//!
//! - [`bias_grad_partials`]: block `(bx, s)` sums rows `[128 s, 128 s + 128)` of columns
//!   `[256 bx, 256 bx + 256)` into `partials[s, ..]`: lane `l` of warp `w` adds rows `w, w + 8,
//!   …` of its 8 columns `256 bx + 8 l ..` (one 16-byte load per row for 16-bit types, two for
//!   f32, when aligned; a warp's loads cover 512 contiguous bytes of a row), then thread `t`
//!   adds the 8 warps' sums of column `t` in warp order;
//! - [`bias_grad_reduce`]: thread group `g` (of 16) of a block adds slices `g, g + 16, …` of
//!   its 8 columns in order, then the first group adds the 16 groups' sums in order, scales
//!   the old `db` by `beta` and rounds once to the output type.

use super::epilogue::aligned16;
use crate::arch::{block_idx_x, block_idx_y, smem, sync, thread_idx_x};
use crate::elem::Elem;
use crate::unroll::unroll;
use kernel_abi::gemm::bias_grad::{
    BLOCK_COLS, LANE_COLS, PARTIALS_SHARED_BYTES, REDUCE_COLS, REDUCE_SHARED_BYTES, REDUCE_THREADS,
    SLICE_ROWS, THREADS,
};
use kernel_abi::gemm::{BiasGradParams, BiasGradReduceParams};

const WARPS: u32 = THREADS / 32;
const _: () = assert!(LANE_COLS == 8 && SLICE_ROWS == 16 * WARPS, "the loops below are unrolled");
const _: () = assert!(THREADS == BLOCK_COLS, "one thread per column adds the warps' sums");
const GROUPS: u32 = REDUCE_THREADS / REDUCE_COLS;
const _: () = assert!(PARTIALS_SHARED_BYTES == WARPS * BLOCK_COLS * 4);
const _: () = assert!(REDUCE_SHARED_BYTES == GROUPS * REDUCE_COLS * 4);

/// The first pass.
///
/// # Safety
/// Launched by `gpu-host` with `THREADS` threads, grid `(ceil(N / BLOCK_COLS), slices(M))` and
/// `PARTIALS_SHARED_BYTES` of dynamic shared memory, on buffers it validated (`partials` holds
/// `slices(M) × N` f32).
#[inline(always)]
pub unsafe fn bias_grad_partials<T: Elem>(p: BiasGradParams<T>) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, tid % 32);
    let block_n0 = block_idx_x() * BLOCK_COLS;
    let n0 = block_n0 + lane * LANE_COLS;
    let slice = block_idx_y();
    let m0 = slice * SLICE_ROWS;
    let dy = p.dy.as_ptr();
    let ld = p.ld as u64;
    let vector = aligned16(p.dy.addr() | (ld * size_of::<T>() as u64)) && n0 + LANE_COLS <= p.n;
    let mut sums = [0.0f32; 8];
    // Two halves of 8 rows each, their loads unrolled so that they are all in flight at once
    // (as raw words, widened when added).
    for half in 0..2u32 {
        let row = |i: u32| m0 + warp + WARPS * (8 * half + i);
        let at = |m: u32| (m as u64 * ld + n0 as u64) as usize;
        if vector {
            let mut words = [[0u32; 8]; 8];
            unroll!(i in 0..8 => {
                let m = row(i as u32);
                if m < p.m {
                    // SAFETY: row m < M; the 8 columns are in bounds and start 16-byte aligned
                    // (aligned base and ld, n0 a multiple of 8).
                    words[i] = unsafe { T::load8_words(dy.add(at(m))) };
                }
            });
            unroll!(i in 0..8 => {
                let v = T::widen8(words[i]);
                sums = core::array::from_fn(|e| sums[e] + v[e]);
            });
        } else {
            unroll!(i in 0..8 => {
                let m = row(i as u32);
                if m < p.m {
                    unroll!(e in 0..8 => {
                        if n0 + (e as u32) < p.n {
                            // SAFETY: row m < M, column n0 + e < N.
                            sums[e] += unsafe { (*dy.add(at(m) + e)).to_f32() };
                        }
                    });
                }
            });
        }
    }
    let base = smem::dynamic_smem_base();
    // SAFETY: shared addresses stay in the PARTIALS_SHARED_BYTES allocation (warp < 8, columns
    // < 256, 16-byte aligned runs); every thread reaches the barrier; `partials` is written
    // only for columns < N of this block's slice.
    unsafe {
        // A lane's run is 32 bytes: lanes l and l + 4 of a quarter-warp would share banks, so
        // lanes 4..8 of each group of 8 store their second half first.
        let run = base + (warp * BLOCK_COLS + lane * LANE_COLS) * 4;
        let bits = sums.map(f32::to_bits);
        let (lo, hi) = ([bits[0], bits[1], bits[2], bits[3]], [bits[4], bits[5], bits[6], bits[7]]);
        let swap = lane / 4 % 2 == 1;
        let (first, second) = if swap { (hi, lo) } else { (lo, hi) };
        let (at_first, at_second) = if swap { (run + 16, run) } else { (run, run + 16) };
        smem::st_shared_v4_u32(at_first, first);
        smem::st_shared_v4_u32(at_second, second);
        sync::bar_sync();
        let col = block_n0 + tid;
        if col < p.n {
            let mut total = 0.0;
            unroll!(w in 0..8 => {
                total += smem::ld_shared_f32(base + (w as u32 * BLOCK_COLS + tid) * 4);
            });
            *p.partials.as_mut_ptr().add(slice as usize * p.n as usize + col as usize) = total;
        }
    }
}

/// The second pass.
///
/// # Safety
/// Launched by `gpu-host` with `REDUCE_THREADS` threads, `ceil(N / REDUCE_COLS)` blocks and
/// `REDUCE_SHARED_BYTES` of dynamic shared memory, after the first pass wrote `partials`
/// (`slices × N` f32); `db` holds N elements.
#[inline(always)]
pub unsafe fn bias_grad_reduce<O: Elem>(p: BiasGradReduceParams<O>) {
    let tid = thread_idx_x();
    let (group, c) = (tid / REDUCE_COLS, tid % REDUCE_COLS);
    let col = block_idx_x() * REDUCE_COLS + c;
    let n = p.n as usize;
    let partials = p.partials.as_ptr();
    let mut total = 0.0f32;
    if col < p.n {
        // Slices group, group + 16, …, in order, sixteen loads in flight at a time: the
        // column sums of GPT-2's fc and qkv input gradients are 1024 slices (one per 16 rows
        // of the GEMM epilogue), and with eight loads in flight each thread waited out eight
        // round trips: 12 and 10 µs a call, about 1 TB/s (H100, 2026-11-27, on 96 and 72
        // blocks of 32 columns; `REDUCE_COLS` is 8 since). The same additions in the same
        // order.
        let mut s = group;
        while s < p.slices {
            let vals: [f32; 16] = core::array::from_fn(|i| {
                let si = s + GROUPS * i as u32;
                if si < p.slices {
                    // SAFETY: slice si < slices and col < N: inside the partials.
                    unsafe { *partials.add(si as usize * n + col as usize) }
                } else {
                    0.0
                }
            });
            unroll!(i in 0..16 => {
                total += vals[i];
            });
            s += 16 * GROUPS;
        }
    }
    let base = smem::dynamic_smem_base();
    // SAFETY: shared addresses stay in the REDUCE_SHARED_BYTES allocation; every thread reaches
    // the barrier; `db` is read and written only for columns < N.
    unsafe {
        smem::st_shared_f32(base + (group * REDUCE_COLS + c) * 4, total);
        sync::bar_sync();
        if group == 0 && col < p.n {
            let mut sum = 0.0;
            unroll!(g in 0..16 => {
                sum += smem::ld_shared_f32(base + (g as u32 * REDUCE_COLS + c) * 4);
            });
            let db = p.db.as_mut_ptr().add(col as usize);
            if p.beta != 0.0 {
                sum += p.beta * (*db).to_f32();
            }
            *db = O::from_f32(sum);
        }
    }
}
