//! Split-K reduction: `C = epilogue(Σ_s partial_s)` (see `kernel_abi::gemm`, "Split-K").
//!
//! Each thread owns one run of 8 adjacent columns of one row of one batch: it adds the
//! `split_k` partial sums of the run in slice order (16-byte loads when the workspace rows are
//! aligned) and hands the total to the GEMM [`Epilogue`], which applies alpha, beta·C, the bias
//! and the activation exactly as the single-pass kernels do.

use super::epilogue::{Epilogue, VecIo, aligned16};
use crate::arch::{block_dim_x, block_idx_x, block_idx_z, thread_idx_x};
use kernel_abi::gemm::{GemmParams, div, rem};

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host` with a grid of (ceil(M · ceil(N / 8) / threads), 1, batch) after the
/// split-K GEMM of the same parameters, on buffers it validated.
#[inline(always)]
pub unsafe fn split_reduce<O: VecIo<8>>(p: GemmParams<f32, O>) {
    let runs = p.n.div_ceil(8);
    let index = block_idx_x() * block_dim_x() + thread_idx_x();
    let (m, n) = (div(index, runs), 8 * rem(index, runs));
    if m >= p.m {
        return;
    }
    let batch = block_idx_z();
    let block = p.m as u64 * p.n as u64;
    let vector = aligned16(p.workspace.addr() | (p.n as u64 * 4)) && n + 8 <= p.n;
    let first =
        (batch as u64 * p.split_k as u64 * block + m as u64 * p.n as u64 + n as u64) as usize;
    let mut sum = [0.0f32; 8];
    for s in 0..p.split_k {
        // SAFETY: slice s of this batch holds row m; only columns < N are read; the vector
        // path has the whole run inside the row and 16-byte alignment.
        let part: [f32; 8] = unsafe {
            let at = p.workspace.as_const().as_ptr().add(first + (s as u64 * block) as usize);
            if vector {
                <f32 as VecIo<8>>::load_vec(at)
            } else {
                core::array::from_fn(|e| if n + (e as u32) < p.n { *at.add(e) } else { 0.0 })
            }
        };
        sum = core::array::from_fn(|e| sum[e] + part[e]);
    }
    // SAFETY: m < M, batch < batch count; the epilogue drops columns >= N.
    unsafe { Epilogue::new(&p, batch).store8(m, n, sum) };
}
