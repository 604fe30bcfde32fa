//! Hopper GEMM, deferred epilogue (`gemm_wgmma_de_*`, sm_90a module only; geometry
//! `kernel_abi::gemm_wgmma::wg::DEFERRED`): the cooperative pipeline of [`super::wgmma`] with
//! 128 × 128 tiles (same producer, ring, descriptors and epilogue arithmetic), but a tile's
//! epilogue runs while the tensor cores multiply the block's next tile.
//!
//! # Why
//! In the cooperative kernels the tensor cores wait while both consumers write a tile out. In
//! the ping-pong kernel one consumer's epilogue overlaps the other's mainloop, which hides it
//! only while it is shorter than a mainloop. With K = 768 and a GELU or GELU-backward
//! epilogue it is not: on an H100 (2026-11-26) the fc forward (GELU) and the fc projection's
//! input gradient (GELU backward, column sums) ran as slowly on the ping-pong tiles as on the
//! cooperative 128 × 256 ones (2.37 and 3.39 ms a step against 2.42 and 3.33), where the same
//! shapes without those epilogues take about 1.6 ms: a tile's epilogue took about two to three
//! times its mainloop, on one warp per scheduler, waiting out its own latencies.
//!
//! # Schedule
//! Each consumer warp keeps its 16 rows × 128 columns of a tile's accumulators in registers
//! only until the tile's mainloop is done: it then stages all of them in its shared-memory
//! buffer (two 16 × 64 pieces, [`stage_piece`]) and starts the next tile's mainloop at once.
//! Between the k-tiles of that mainloop (after each k-tile's wgmmas are committed, while the
//! tensor cores work, [`mainloop`]'s `between`) it writes the staged tile out one run at a
//! time: run `i` (0..8) is row `lane / 8 + 4 (i % 4)`, columns `64 (i / 4) + 8 (lane % 8) ..`
//! of piece `i / 4` ([`read_run`]), finished by [`Epilogue::store8_with`] exactly as the other
//! kernels finish it, its global inputs (old C, pre-activation, bias) loaded one run ahead.
//! Runs a mainloop had no k-tiles left for follow its [`drain`]; the block's last tile is
//! written after its last mainloop. So both consumers' warps (two per scheduler) run the
//! epilogue while the tensor cores multiply, and the tensor cores wait only where a tile's
//! runs take longer than its k-tiles.
//!
//! A run's values, its column sums (the rows of a lane's four runs of a piece, then the same
//! two butterflies, [`Epilogue::store_piece_col_sums`]) and their order are those of
//! `write_rows16`: the same bits as every other Hopper tile.
//!
//! Whole tiles only: a split unit's partial sums go to the workspace through another sink,
//! which this schedule does not carry, so the host never splits K on these entries.

use super::epilogue::{Epilogue, RunBias, RunInputs, VecIo, read_run, stage_piece};
use super::wgmma::{
    MN_ATOM_BYTES, Ring, Smem, Unit, WgmmaOp, bk, drain, k_step_desc, mainloop, piece_fragments,
    run_block,
};
use crate::arch::{block_idx_x, grid_dim_x, lane_id, sync};
use crate::unroll::unroll;
use kernel_abi::gemm::GemmParams;
use kernel_abi::gemm_wgmma::{WgmmaGemmParams, wg};

const TILE: wg::Tile = wg::DEFERRED;
const _: () = assert!(TILE.deferred && !TILE.pingpong && TILE.bn == 128);
/// 16 × 64 pieces a consumer warp stages per tile.
const PIECES: u32 = TILE.bn / 64;
/// Runs a lane writes per tile: four rows of each piece.
const RUNS: u32 = 4 * PIECES;

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host` with `wg::THREADS` threads, a one-dimensional grid of at most
/// `p.units` blocks and `wg::DEFERRED.smem_bytes()` of dynamic shared memory, with tensor maps
/// of A and B as `kernel_abi::gemm_wgmma` describes for 128 × 128 tiles, on buffers it
/// validated; `p.gemm.split_k == 1` (whole tiles only).
#[inline(always)]
pub unsafe fn gemm<T: WgmmaOp, const A_MN: bool, const B_MN: bool, O: VecIo<8>>(
    p: WgmmaGemmParams<T::In, O>,
) {
    // SAFETY: the launch contract is `run_block`'s, which calls the consumer closure in all
    // 256 consumer threads.
    unsafe {
        run_block::<T, A_MN, B_MN, O, false>(
            &p,
            TILE,
            #[inline(always)]
            |smem, cwarp| consume::<T, A_MN, B_MN, O>(&p, smem, cwarp),
        );
    }
}

/// A consumer warp (`cwarp` 0..8; consumer warpgroup `cwarp / 4`): its warpgroup's 64 rows of
/// every unit of the block, each unit's epilogue during the next one's mainloop.
///
/// # Safety
/// All 256 consumer threads call it together, after [`run_block`]'s prologue; whole tiles
/// only (`split_k == 1`).
#[inline(always)]
unsafe fn consume<T: WgmmaOp, const A_MN: bool, const B_MN: bool, O: VecIo<8>>(
    p: &WgmmaGemmParams<T::In, O>,
    smem: Smem,
    cwarp: u32,
) {
    let bk = bk::<T>();
    let (group, warp_in_group) = (cwarp / 4, cwarp % 4);
    let lane = lane_id();
    // Consumer g's 64 rows of A: 64 K-major rows of 128 bytes, or the g-th M atom column;
    // both 8 KiB into the tile.
    let a_rows = group * MN_ATOM_BYTES;
    let staging = smem.staging(cwarp);
    let row = 64 * group + 16 * warp_in_group;
    let mut ring = Ring::new(TILE.stages);
    let mut pending: Option<Pending<O>> = None;
    let mut u = block_idx_x();
    while u < p.units {
        let unit = Unit::new(&p.gemm, u, (TILE.bn, bk));
        let mut acc = [0.0f32; 64];
        let mma = #[inline(always)]
        |a, b, kk, scale_d| {
            let (desc_a, desc_b) =
                (k_step_desc::<A_MN>(a + a_rows, kk), k_step_desc::<B_MN>(b, kk));
            // SAFETY: `mainloop` calls it as it requires: the wgmma reads this k-tile's stage.
            unsafe { T::mma_n128::<A_MN, B_MN>(&mut acc, desc_a, desc_b, scale_d) };
        };
        let mut run = 0;
        let between = #[inline(always)]
        || {
            if let Some(tile) = &mut pending
                && run < RUNS
            {
                // SAFETY: the warp is converged (the mainloop is warpgroup-uniform); the
                // staged tile is this warp's own, and nothing else touches the buffer.
                unsafe { tile.write_run(run) };
                run += 1;
            }
        };
        // SAFETY: every consumer thread walks the same units and k-tiles; `between` reads the
        // warp's staging buffer and global memory only.
        let held = unsafe { mainloop(smem, &mut ring, &unit, lane, mma, between) };
        // SAFETY: the whole warpgroup, after its mainloop.
        unsafe { drain(smem, held, lane) };
        if let Some(tile) = &mut pending {
            while run < RUNS {
                // SAFETY: as in `between`.
                unsafe { tile.write_run(run) };
                run += 1;
            }
        }
        // SAFETY: the previous tile's runs are all written (the last ends with a warp
        // barrier), so the buffer is free; the barrier after the staging makes every lane's
        // stores visible to the warp.
        unsafe {
            unroll!(h in 0..2 => {
                let frag = piece_fragments(&acc, h);
                stage_piece(&frag, staging + h as u32 * wg::EPI_WARP_BYTES, lane);
            });
            sync::bar_warp_sync();
            pending = Some(Pending::new(&p.gemm, &unit, staging, lane, row));
        }
        u += grid_dim_x();
    }
    if let Some(tile) = &mut pending {
        for run in 0..RUNS {
            // SAFETY: as in `between`.
            unsafe { tile.write_run(run) };
        }
    }
}

/// A staged tile whose runs are still to be written: a consumer warp's 16 rows × 128 columns
/// in its staging buffer, the epilogue of the unit they belong to, and the next run's inputs.
struct Pending<O> {
    sink: Epilogue<O>,
    /// The warp's first row in C, the tile's first column, and M.
    rows: (u32, u32, u32),
    staging: u32,
    lane: u32,
    /// The global inputs of the next run to write, loaded one run ahead.
    inputs: RunInputs,
    bias: RunBias,
    /// The lane's column sums of the piece being written.
    sums: [f32; 8],
}

impl<O: VecIo<8>> Pending<O> {
    /// The tile of `unit` that the warp (first row `row` of the block tile) has staged at
    /// `staging`, with run 0's inputs requested.
    ///
    /// # Safety
    /// `unit` is a whole tile of the launch `p` (`Epilogue::new`'s contract).
    #[inline(always)]
    unsafe fn new(
        p: &GemmParams<impl Copy, O>,
        unit: &Unit,
        staging: u32,
        lane: u32,
        row: u32,
    ) -> Self {
        // SAFETY: the caller's contract.
        let sink = unsafe { Epilogue::new(p, unit.batch()) };
        let rows = (unit.m0 + row, unit.n0, p.m);
        let (inputs, bias) = load_run(&sink, rows, lane, 0);
        Self { sink, rows, staging, lane, inputs, bias, sums: [0.0; 8] }
    }

    /// Writes run `run` (0..RUNS, in order) through the epilogue, and after a piece's fourth
    /// run its column sums; after the last run a warp barrier frees the staging buffer.
    ///
    /// # Safety
    /// The whole warp calls it together, for runs 0, 1, … in turn, after the tile was staged
    /// and a warp barrier.
    #[inline(always)]
    unsafe fn write_run(&mut self, run: u32) {
        let (piece, q) = (run / 4, run % 4);
        let (m, n) = run_at(self.rows, self.lane, run);
        let (inputs, bias) = (self.inputs, self.bias);
        if run + 1 < RUNS {
            (self.inputs, self.bias) = load_run(&self.sink, self.rows, self.lane, run + 1);
        }
        // SAFETY: the staged piece is the warp's own (the caller's contract); row m < M for
        // the store; the warp is converged for the column sums' shuffles and the barrier.
        unsafe {
            let values = read_run(self.staging + piece * wg::EPI_WARP_BYTES, self.lane, q);
            let stored = if m < self.rows.2 {
                self.sink.store8_with(m, n, values, inputs, bias)
            } else {
                [0.0; 8]
            };
            self.sink.add_to_col_sums(&mut self.sums, stored);
            if q == 3 {
                let (m_base, n_base, m_len) = self.rows;
                let sums = core::mem::replace(&mut self.sums, [0.0; 8]);
                self.sink.store_piece_col_sums(
                    sums,
                    self.lane,
                    (m_base, n_base + 64 * piece, m_len),
                );
                if run == RUNS - 1 {
                    sync::bar_warp_sync();
                }
            }
        }
    }
}

/// Row and column in C of `lane`'s run `run` of a warp's staged tile at `(m_base, n_base)`:
/// row `lane / 8 + 4 (run % 4)` of piece `run / 4`, columns `8 (lane % 8) ..` of it.
#[inline(always)]
fn run_at((m_base, n_base, _): (u32, u32, u32), lane: u32, run: u32) -> (u32, u32) {
    let (piece, q) = (run / 4, run % 4);
    (m_base + lane / 8 + 4 * q, n_base + 64 * piece + 8 * (lane % 8))
}

/// Requests the global inputs of `lane`'s run `run` (< RUNS) of a warp's staged tile at
/// `rows` (as [`run_at`]) through `sink`: none for a row past M.
#[inline(always)]
fn load_run<O: VecIo<8>>(
    sink: &Epilogue<O>,
    rows: (u32, u32, u32),
    lane: u32,
    run: u32,
) -> (RunInputs, RunBias) {
    let (m, n) = run_at(rows, lane, run);
    let inputs = if m < rows.2 {
        // SAFETY: row m < M, as the sink requires.
        unsafe { sink.load_inputs8(m, n) }
    } else {
        RunInputs::default()
    };
    (inputs, sink.load_bias8(n))
}
