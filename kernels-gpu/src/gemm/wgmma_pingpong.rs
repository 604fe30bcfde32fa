//! Hopper GEMM, ping-pong schedule (`gemm_wgmma_pp_*`, sm_90a module only; geometry
//! `kernel_abi::gemm_wgmma::wg::PINGPONG`): the pipeline of [`super::wgmma`] (same producer,
//! ring, descriptors and epilogue), but each consumer warpgroup multiplies whole 128 × 128
//! tiles, the block's units alternating between them, so that one consumer's epilogue runs
//! while the other's wgmmas keep the tensor cores busy.
//!
//! # Schedule
//! Consumer `g` takes the block's units `g, g + 2, …` (block `b`'s `j`-th unit is `b + j ·
//! gridDim.x`, as in the cooperative kernel); per k-step it issues two m64n128 wgmmas, rows 0–63
//! and 64–127 of the A tile against the one B tile, into 2 × 64 f32 accumulators per thread.
//! The producer is unchanged: it loads every unit's k-tiles in unit order into the one ring
//! (6 stages), and each consumer's ring position skips the k-tiles of the other's units.
//! `empty[s]` counts the 4 warps of the one consumer reading the stage.
//!
//! The consumers must issue their units' wgmmas in unit order, for two reasons: the ring is
//! filled in that order (a consumer running ahead would wait on a stage `2 · stages` k-tiles
//! ahead of the producer, whose parity a stale phase satisfies), and the point is that the two
//! take turns at the tensor cores. Two mbarriers in shared memory (arrival count 4, lane 0 of
//! each warp) hand the turn over:
//!
//! ```text
//! consumer 0                         consumer 1
//! unit 0: wgmmas                     skip unit 0's k-tiles
//!   arrive turn[1]  ───────────────▶ wait turn[1] (parity 0)
//!   wait_group 0, epilogue           unit 1: wgmmas
//! skip unit 1's k-tiles                arrive turn[0]
//! wait turn[0] (parity 0) ◀──────────  wait_group 0, epilogue
//! unit 2: wgmmas                     skip unit 2's k-tiles
//!   arrive turn[1]  ───────────────▶ wait turn[1] (parity 1)
//! ```
//!
//! A consumer waits before each of its units but the block's first (its `n`-th wait has parity
//! `n & 1`) and arrives after issuing a unit's wgmmas only if the block has a next unit, so
//! every wait has exactly one phase to complete it and no arrival is left over. A consumer's
//! next arrival on `turn[g]` follows its own wait on `turn[1 - g]`, which follows the other's
//! wait on `turn[g]`: a phase never receives the next phase's arrivals.

use super::epilogue::VecIo;
use super::wgmma::{
    MN_ATOM_BYTES, N128, Ring, Smem, Unit, WgmmaOp, bk, drain, k_step_desc, mainloop, run_block,
    write_unit,
};
use crate::arch::{block_idx_x, grid_dim_x, lane_id, mbarrier};
use crate::unroll::unroll;
use kernel_abi::gemm_wgmma::{WgmmaGemmParams, wg};

const _: () = assert!(wg::PINGPONG.pingpong && wg::PINGPONG.bn == 128);

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host` with `wg::THREADS` threads, a one-dimensional grid of at most
/// `p.units` blocks and `wg::PINGPONG.smem_bytes()` of dynamic shared memory, with tensor maps
/// of A and B as `kernel_abi::gemm_wgmma` describes for 128 × 128 tiles, on buffers it
/// validated.
#[inline(always)]
pub unsafe fn gemm<T: WgmmaOp, const A_MN: bool, const B_MN: bool, O: VecIo<8>>(
    p: WgmmaGemmParams<T::In, O>,
) {
    // SAFETY: the launch contract is `run_block`'s, which calls the consumer closure in all 256
    // consumer threads, so each warpgroup's 128 together.
    unsafe {
        run_block::<T, A_MN, B_MN, O, false>(
            &p,
            wg::PINGPONG,
            #[inline(always)]
            |smem, cwarp| consume::<T, A_MN, B_MN, O>(&p, smem, cwarp),
        );
    }
}

/// A consumer warp (`cwarp` 0..8; consumer warpgroup `g = cwarp / 4`): the whole tiles of the
/// block's units `g, g + 2, …`, in turns with the other consumer, through the epilogue.
///
/// # Safety
/// The 128 threads of each consumer warpgroup call it together, after [`run_block`]'s
/// prologue.
#[inline(always)]
unsafe fn consume<T: WgmmaOp, const A_MN: bool, const B_MN: bool, O: VecIo<8>>(
    p: &WgmmaGemmParams<T::In, O>,
    smem: Smem,
    cwarp: u32,
) {
    let (bn, bk) = (smem.tile.bn, bk::<T>());
    let (group, warp_in_group) = (cwarp / 4, cwarp % 4);
    let lane = lane_id();
    let mut ring = Ring::new(smem.tile.stages);
    let mut waits = 0;
    let mut mine = group == 0;
    let mut u = block_idx_x();
    while u < p.units {
        let unit = Unit::new(&p.gemm, u, (bn, bk));
        let next = u + grid_dim_x();
        if !mine {
            ring.skip(unit.k_tiles());
        } else {
            let mut acc = [[0.0f32; 64]; 2];
            let mma = #[inline(always)]
            |a, b, kk, scale_d| {
                let desc_b = k_step_desc::<B_MN>(b, kk);
                unroll!(h in 0..2 => {
                    let desc_a = k_step_desc::<A_MN>(a + h as u32 * MN_ATOM_BYTES, kk);
                    // SAFETY: `mainloop` calls it as it requires: the wgmma reads this
                    // k-tile's stage.
                    unsafe { T::mma_n128::<A_MN, B_MN>(&mut acc[h], desc_a, desc_b, scale_d) };
                });
            };
            // SAFETY: the turn protocol of the module docs (both warpgroups walk the same
            // units, so the waits and arrivals pair up); every thread of the warpgroup walks
            // the same units and k-tiles.
            unsafe {
                if u != block_idx_x() {
                    mbarrier::wait(smem.turn(group), waits & 1);
                    waits += 1;
                }
                let held = mainloop(smem, &mut ring, &unit, lane, mma, || {});
                if next < p.units && lane == 0 {
                    mbarrier::arrive(smem.turn(1 - group));
                }
                drain(smem, held, lane);
            }
            let row = 16 * warp_in_group;
            // SAFETY: the warp is converged (the loop is warp-uniform); the staging buffer is
            // this warp's own, disjoint from the stages.
            unsafe {
                write_unit::<N128, O, 2>(&p.gemm, &unit, &acc, smem.staging(cwarp), lane, row)
            };
        }
        mine = !mine;
        u = next;
    }
}
