//! Tensor-core GEMM on `mma.sync` (TF32 m16n8k8, BF16/FP16 m16n8k16, f32 accumulators).
//!
//! Block tile 128×128, 4 warps in a 2×2 grid, warp tile 64×64 (4×8 `m16n8` accumulator tiles,
//! 128 f32 registers per thread), K advancing 64 bytes per stage through a `tc::STAGES`-deep
//! `cp.async` ring in the swizzled layout of `kernel_abi::gemm::tc` (see there for the
//! diagram). Blocks are rasterized in bands of `RASTER_GROUP` tile rows for L2 reuse.
//!
//! Main loop, per k-tile `kt`:
//! 1. wait until stage `kt` has landed (`cp.async.wait_group STAGES-2`) and barrier: the data
//!    of stage `kt` is visible to all, and every warp is done with stage `kt - 1`;
//! 2. issue the copies of k-tile `kt + STAGES - 1` into the slot of stage `kt - 1`, commit;
//! 3. two k-steps of `ldmatrix` + `mma.sync` on stage `kt`.
//!
//! Epilogue: each warp stages its accumulators through its own swizzled shared buffer
//! (`tc::EPI_ROW_WORDS`), 16 rows at a time, and reads them back as runs of 8 adjacent columns
//! per lane ([`write_piece`]), which [`Epilogue::store8`] finishes and writes with 16-byte
//! stores.

use super::epilogue::{Epilogue, VecIo, write_piece};
use super::fragments::{self, MT, NT};
use super::tensor_op::TensorOp;
use super::tile_copy::TileCopy;
use crate::arch::{
    block_idx_x, block_idx_y, block_idx_z, cp_async, lane_id, smem, sync, thread_idx_x,
};
use crate::unroll::unroll;
use kernel_abi::gemm::tc::{BM, BN, EPI_WARP_BYTES, STAGE_BYTES, STAGES, TILE_BYTES};
use kernel_abi::gemm::{GemmParams, RASTER_GROUP, raster};

// The unrolled loops below are written for a 4×8 grid of m16n8 tiles and two k-steps per stage.
const _: () = assert!(MT == 4 && NT == 8);
const _: () = assert!(TileCopy::<super::tensor_op::Bf16Op, true>::BK / 16 == 2);
const _: () = assert!(TileCopy::<super::tensor_op::Tf32Op, true>::BK / 8 == 2);

/// The kernel body; `A_ROW`: A row-major (else column-major), `B_COL`: B column-major.
///
/// # Safety
/// Launched by `gpu-host` with `tc::THREADS` threads, a grid of (tiles_m · tiles_n, split_k,
/// batch) and `tc::SMEM_BYTES` of dynamic shared memory, on buffers it validated.
#[inline(always)]
pub unsafe fn gemm<T: TensorOp, O: VecIo<8>, const A_ROW: bool, const B_COL: bool>(
    p: GemmParams<T::In, O>,
) {
    let tid = thread_idx_x();
    let (warp, lane) = (tid / 32, lane_id());
    let (wm, wn) = ((warp / 2) * (BM / 2), (warp % 2) * (BN / 2));
    let (tile_m, tile_n) = raster(block_idx_x(), p.tiles_m, p.tiles_n, RASTER_GROUP);
    let (m0, n0) = (tile_m * BM, tile_n * BN);
    let batch = block_idx_z();
    // SAFETY: batch offsets stay inside the buffers the launcher validated.
    let (a, b) = unsafe {
        (
            p.a.as_ptr().add((batch as u64 * p.stride_a) as usize),
            p.b.as_ptr().add((batch as u64 * p.stride_b) as usize),
        )
    };
    // A is K-major (rows m) when row-major; B is K-major (rows n) when column-major.
    let a_copy = TileCopy::<T, A_ROW>::new(a, p.lda, p.stride_a, m0, p.m, p.k, tid);
    let b_copy = TileCopy::<T, B_COL>::new(b, p.ldb, p.stride_b, n0, p.n, p.k, tid);
    // This block's K slice: tiles [kt0, kt1).
    let slice = block_idx_y();
    let kt0 = slice * p.k_tiles_per_split;
    let kt1 = p.k.div_ceil(TileCopy::<T, true>::BK).min(kt0 + p.k_tiles_per_split);
    let smem = smem::dynamic_smem_base();
    let a_tile = |stage: u32| smem + stage * STAGE_BYTES;
    let b_tile = |stage: u32| smem + stage * STAGE_BYTES + TILE_BYTES;
    let mut acc = [[[0.0f32; 4]; NT]; MT];

    // SAFETY: every thread runs the same loop (block-uniform barriers, warp-uniform
    // ldmatrix/mma); a stage's slot is overwritten only after the barrier that follows every
    // warp's last read of it, and read only after its copies were waited for and a barrier.
    unsafe {
        for s in 0..STAGES - 1 {
            if kt0 + s < kt1 {
                a_copy.issue(kt0 + s, a_tile(s));
                b_copy.issue(kt0 + s, b_tile(s));
            }
            cp_async::cp_async_commit_group();
        }
        let (mut read, mut write) = (0, STAGES - 1);
        for kt in kt0..kt1 {
            cp_async::cp_async_wait_group::<{ STAGES - 2 }>();
            sync::bar_sync();
            let next = kt + STAGES - 1;
            if next < kt1 {
                a_copy.issue(next, a_tile(write));
                b_copy.issue(next, b_tile(write));
            }
            cp_async::cp_async_commit_group();
            unroll!(kk in 0..2 => {
                let af = fragments::load_a::<T, A_ROW>(a_tile(read), wm, lane, kk as u32);
                let bf = fragments::load_b::<T, B_COL>(b_tile(read), wn, lane, kk as u32);
                unroll!(i in 0..4 => {
                    unroll!(j in 0..8 => {
                        acc[i][j] = T::mma(af[i], bf[j], acc[i][j]);
                    });
                });
            });
            read = (read + 1) % STAGES;
            write = (write + 1) % STAGES;
        }
        cp_async::cp_async_wait_group::<0>();
        sync::bar_sync();

        let stage = smem + warp * EPI_WARP_BYTES;
        let rows = (m0 + wm, n0 + wn, p.m);
        if p.split_k > 1 {
            write_tile(&Epilogue::partials(&p, batch, slice), &acc, stage, lane, rows);
        } else {
            write_tile(&Epilogue::new(&p, batch), &acc, stage, lane, rows);
        }
    }
}

/// Writes the warp's accumulators through `sink`: 16 rows (one m16 tile, 64 columns) at a
/// time through [`write_piece`], all of them packed or none ([`Epilogue::packs`]).
///
/// # Safety
/// The whole warp calls it together after a barrier that ended every warp's use of the
/// pipeline buffers; `stage` is this warp's `EPI_WARP_BYTES` of shared memory; `sink` as
/// [`Epilogue::store8_with`] requires, for rows `< m_len`.
#[inline(always)]
unsafe fn write_tile<O: VecIo<8>>(
    sink: &Epilogue<O>,
    acc: &[[[f32; 4]; NT]; MT],
    stage: u32,
    lane: u32,
    (m_base, n_base, m_len): (u32, u32, u32),
) {
    // SAFETY: forwarded contract; `EPI_WARP_BYTES` is 16 rows of `EPI_ROW_WORDS` words, the
    // staging layout of `write_rows16`; the packed path only where `packs` holds.
    unsafe {
        if sink.packs() {
            write_m16_tiles::<O, true>(sink, acc, stage, lane, (m_base, n_base, m_len));
        } else {
            write_m16_tiles::<O, false>(sink, acc, stage, lane, (m_base, n_base, m_len));
        }
    }
}

/// [`write_tile`]'s m16 tiles, all packed (`PACKED`, with the bias words of their common
/// columns loaded once) or none ([`write_piece`]).
///
/// # Safety
/// As [`write_tile`]; `PACKED` only if `sink.packs()`.
#[inline(always)]
unsafe fn write_m16_tiles<O: VecIo<8>, const PACKED: bool>(
    sink: &Epilogue<O>,
    acc: &[[[f32; 4]; NT]; MT],
    stage: u32,
    lane: u32,
    (m_base, n_base, m_len): (u32, u32, u32),
) {
    // SAFETY: `packs` holds on the packed path; n_base is a multiple of the tile width.
    let bias = PACKED.then(|| unsafe { sink.piece_bias(n_base, lane) });
    unroll!(i in 0..4 => {
        let rows = (m_base + 16 * i as u32, n_base, m_len);
        // SAFETY: forwarded contract; a bias only on the packed path.
        unsafe { write_piece(sink, &acc[i], stage, lane, rows, bias) };
    });
}
