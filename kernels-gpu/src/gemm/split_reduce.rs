//! Split-K reduction: `C = epilogue(Σ_s partial_s)` (see `kernel_abi::gemm`, "Split-K").
//!
//! Each thread owns one run of 8 adjacent columns of one row of one batch: it adds the `split_k`
//! partial sums of the run in slice order (16-byte loads when the workspace rows are aligned, four
//! slices' loads in flight) and hands the total to the GEMM [`Epilogue`], which applies alpha,
//! beta·C, the bias and the activation exactly as the single-pass kernels do. Without a tail split
//! the threads cover M × N; with one (`whole_tiles > 0`), only the rows and columns of the tail
//! tiles, whose partial sums are one `TAIL_BM × TAIL_BN` block per tile and slice.

use super::epilogue::{Epilogue, VecIo, aligned16};
use crate::arch::{block_dim_x, block_idx_x, block_idx_z, thread_idx_x};
use crate::unroll::unroll;
use kernel_abi::gemm::{GemmParams, RASTER_GROUP, TAIL_BM, TAIL_BN, div, raster, rem};

/// Runs of 8 columns in a row of a tail tile's block.
const TAIL_RUNS: u32 = TAIL_BN / 8;

/// Slices whose loads a thread issues before adding them (the `unroll!`s below take 4).
const SLICES_IN_FLIGHT: usize = 4;

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host` after the split-K GEMM of the same parameters, on buffers it
/// validated, with a grid of (ceil(M · ceil(N / 8) / threads), 1, batch), or with a tail split
/// of (ceil(tail · TAIL_BM · TAIL_BN / 8 / threads), 1, batch).
#[inline(always)]
pub unsafe fn split_reduce<O: VecIo<8>>(p: GemmParams<f32, O>) {
    let index = block_idx_x() * block_dim_x() + thread_idx_x();
    let batch = block_idx_z();
    let (m, n, first, block, vector) = if p.whole_tiles == 0 {
        let runs = p.n.div_ceil(8);
        let (m, n) = (div(index, runs), 8 * rem(index, runs));
        let block = p.m as u64 * p.n as u64;
        let first = batch as u64 * p.split_k as u64 * block + m as u64 * p.n as u64 + n as u64;
        (m, n, first, block, aligned16(p.workspace.addr() | (p.n as u64 * 4)))
    } else {
        let tail = p.tiles_m * p.tiles_n - p.whole_tiles;
        let tail_tile = div(index, TAIL_BM * TAIL_RUNS);
        if tail_tile >= tail {
            return;
        }
        let (row, run) = (div(rem(index, TAIL_BM * TAIL_RUNS), TAIL_RUNS), rem(index, TAIL_RUNS));
        let tile = raster(p.whole_tiles + tail_tile, p.tiles_m, p.tiles_n, RASTER_GROUP);
        let (m, n) = (tile.0 * TAIL_BM + row, tile.1 * TAIL_BN + 8 * run);
        let block = (TAIL_BM * TAIL_BN) as u64;
        let slices = (batch as u64 * tail as u64 + tail_tile as u64) * p.split_k as u64;
        let first = slices * block + (row * TAIL_BN + 8 * run) as u64;
        (m, n, first, block, aligned16(p.workspace.addr()))
    };
    if m >= p.m || n >= p.n {
        return;
    }
    let vector = vector && n + 8 <= p.n;
    let load = |s: u32| -> [f32; 8] {
        // SAFETY: slice s < split_k of this batch holds row m; only columns < N are read; the
        // vector path has the whole run inside the row and 16-byte alignment.
        unsafe {
            let at = p.workspace.as_const().as_ptr().add((first + s as u64 * block) as usize);
            if vector {
                <f32 as VecIo<8>>::load_vec(at)
            } else {
                core::array::from_fn(|e| if n + (e as u32) < p.n { *at.add(e) } else { 0.0 })
            }
        }
    };
    // The slices in rounds of SLICES_IN_FLIGHT, each round's loads issued before its first
    // addition: one load per slice in a loop waited for each slice's in turn (the tail split's
    // 11 slices: 11 round trips a thread, 7.6 µs a call on an H100, 2026-11-27). The same
    // additions in the same order, from 0.0.
    let mut sum = [0.0f32; 8];
    let mut s0 = 0;
    while s0 < p.split_k {
        let mut parts = [[0.0f32; 8]; SLICES_IN_FLIGHT];
        unroll!(i in 0..4 => {
            if s0 + (i as u32) < p.split_k {
                parts[i] = load(s0 + i as u32);
            }
        });
        unroll!(i in 0..4 => {
            if s0 + (i as u32) < p.split_k {
                sum = core::array::from_fn(|e| sum[e] + parts[i][e]);
            }
        });
        s0 += SLICES_IN_FLIGHT as u32;
    }
    // SAFETY: m < M, batch < batch count; the epilogue drops columns >= N.
    unsafe { Epilogue::new(&p, batch).store8(m, n, sum) };
}
