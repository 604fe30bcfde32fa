//! Bias gradient: column sums of an M×N row-major matrix (`db = beta·db + Σ_m dy[m, :]`),
//! `db` of the input type or f32 (the f32 gradients of mixed-precision training).
//!
//! One block per 8 adjacent columns: each of the 256 threads sums rows `t, t + 256, …` of its
//! 8 columns (one 16-byte load per row for 16-bit types, two for f32, when aligned), then the
//! block reduces the 256 partial sums (warp butterflies, then 8 warp results through shared
//! memory). Deterministic: the summation order is fixed by the launch shape.

use super::epilogue::{VecIo, aligned16};
use crate::arch::{block_idx_x, lane_id, smem, sync, thread_idx_x};
use crate::unroll::unroll;
use crate::warp::warp_sum;
use kernel_abi::gemm::BiasGradParams;
use kernel_abi::gemm::bias_grad::{COLS, THREADS};

const _: () = assert!(COLS == 8, "the per-column loops below are unrolled 8 times");

/// Shared memory the kernel needs: one partial sum per warp and column.
pub const SMEM_BYTES: u32 = THREADS / 32 * COLS * 4;

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host` with `THREADS` threads, `ceil(N / COLS)` blocks and `SMEM_BYTES` of
/// dynamic shared memory, on buffers it validated.
#[inline(always)]
pub unsafe fn bias_grad<T: VecIo<8>, O: VecIo<8>>(p: BiasGradParams<T, O>) {
    let tid = thread_idx_x();
    let n0 = block_idx_x() * COLS;
    let dy = p.dy.as_ptr();
    let ld = p.ld as u64;
    let vector = aligned16(p.dy.addr() | (ld * size_of::<T>() as u64)) && n0 + COLS <= p.n;
    let mut sums = [0.0f32; COLS as usize];
    let mut m = tid;
    while m < p.m {
        let at = (m as u64 * ld + n0 as u64) as usize;
        // SAFETY: row m < M; columns n0.. are read only where < N; the vector path has all 8
        // columns in bounds and a 16-byte aligned start (aligned base and ld, n0 a multiple of 8).
        let row: [f32; COLS as usize] = unsafe {
            if vector {
                T::load_vec(dy.add(at))
            } else {
                core::array::from_fn(|e| {
                    if n0 + (e as u32) < p.n { (*dy.add(at + e)).to_f32() } else { 0.0 }
                })
            }
        };
        sums = core::array::from_fn(|e| sums[e] + row[e]);
        m += THREADS;
    }
    let partials = smem::dynamic_smem_base();
    let warp = tid / 32;
    // SAFETY: all threads reach the warp reductions and the barrier; shared addresses stay in
    // the SMEM_BYTES allocation; db is written only for columns < N.
    unsafe {
        let totals = sums.map(|s| warp_sum(s));
        if lane_id() == 0 {
            unroll!(e in 0..8 => {
                smem::st_shared_f32(partials + (warp * COLS + e as u32) * 4, totals[e]);
            });
        }
        sync::bar_sync();
        let col = n0 + tid;
        if tid < COLS && col < p.n {
            let mut total = 0.0;
            for w in 0..THREADS / 32 {
                total += smem::ld_shared_f32(partials + (w * COLS + tid) * 4);
            }
            let db = p.db.as_mut_ptr().add(col as usize);
            if p.beta != 0.0 {
                total += p.beta * (*db).to_f32();
            }
            *db = O::from_f32(total);
        }
    }
}
