//! Stream-K for the cooperative Hopper kernel ([`super::wgmma`]): how a block's partial
//! segment of a tile meets the others (the schedule and the workspace layout are
//! `kernel_abi::gemm_wgmma::stream_k`'s).
//!
//! Each consumer warp owns 16 rows of every tile, the same rows in every block, so the
//! segments of a tile meet warp by warp, with no block-wide barrier: a warp stores its sums
//! to its part of the block's slot, releases them (`fence.acq_rel.gpu`), and counts itself in
//! on the tile's counter for that warp. The warp that completes the count acquires the others'
//! stores and adds every segment's part in k order (block order), its own re-read from its
//! slot, so the order, and so the bits, do not depend on which block finished last.
//!
//! A slot holds a warp's part as its accumulator registers, 16 bytes per lane at a time:
//! float `i` of lane `l` in 128-column panel `p` is at `((p·16 + i / 4)·32 + l)·4 + i % 4` of the
//! warp's part (`16 · BN` floats, part `cwarp` of the slot), so a warp's stores and loads are
//! 512 contiguous bytes each.

use super::wgmma::Width;
use crate::arch::global::{atom_add_u32, ld_global_v4_u32, st_global_v4_u32};
use crate::arch::shfl::{FULL_MASK, shfl_idx_u32};
use crate::arch::sync::{bar_warp_sync, fence_acq_rel_gpu};
use crate::arch::{block_idx_x, grid_dim_x, lane_id};
use crate::unroll::unroll;
use kernel_abi::gemm_wgmma::{WgmmaGemmParams, stream_k, wg};

/// Floats of one consumer warp's part of a slot of `W`'s tiles: 16 rows of the tile, one of
/// the 8 consumer warps' (4 per consumer warpgroup).
const fn warp_part<W: Width>() -> usize {
    stream_k::slot_len(W::TILE.bn) / (4 * wg::CONSUMERS as usize)
}

/// Settles consumer warp `cwarp`'s accumulators `acc` of a partial stream-K segment of tile
/// `tile` (raster order; `k_tiles` k-tiles a tile) of the launch `p`: stores them to this
/// block's slot and counts them in; returns whether this warp was the tile's last, in which
/// case `acc` now holds the sums of every segment of the tile, added in block order, for the
/// caller to write through the epilogue.
///
/// # Safety
/// The 32 lanes of the warp call it together, with final accumulators, in a stream-K launch
/// (a `gemm_wgmma_sk_*` entry: `p.units` tiles, a grid of `g` blocks with
/// `stream_k::fits(g, p.units · k_tiles)`) whose workspace holds
/// `stream_k::workspace_len(g, p.units, W::TILE.bn)` words, the counters zero at the launch;
/// the segment is this block's and not all of the tile.
#[inline(always)]
pub(super) unsafe fn settle<W: Width, I: Copy, O: Copy>(
    p: &WgmmaGemmParams<I, O>,
    tile: u32,
    k_tiles: u32,
    acc: &mut W::Acc,
    cwarp: u32,
) -> bool {
    let (b, g, lane) = (block_idx_x(), grid_dim_x(), lane_id());
    let iters = p.units * k_tiles;
    let tile_start = tile * k_tiles;
    let workspace = p.gemm.workspace.as_mut_ptr();
    let slot_len = stream_k::slot_len(W::TILE.bn);
    // This warp's part of block `blk`'s slot for the tile, at this lane's first float.
    let part = |blk: u32| {
        let slot = stream_k::slot(blk, g, iters, tile_start) as usize;
        // SAFETY: slot < 2g and the part inside it (the caller's workspace length).
        unsafe {
            workspace.add(slot * slot_len + cwarp as usize * warp_part::<W>() + 4 * lane as usize)
        }
    };
    let own = part(b);
    unroll!(pn in 0..2 => {
        if let Some(panel) = W::panel(acc, pn) {
            unroll!(j in 0..16 => {
                let v = core::array::from_fn(|e| panel[4 * j + e].to_bits());
                // SAFETY: this lane's 16 bytes of chunk `pn·16 + j` of the warp's part.
                unsafe { st_global_v4_u32(own.add(4 * 32 * (16 * pn + j)).cast(), v) };
            });
        }
    });
    let first = stream_k::block_of(tile_start, g, iters);
    let last = stream_k::block_of(tile_start + k_tiles - 1, g, iters);
    // SAFETY: the counters follow the 2g slots; tile < units; every lane is here. Each lane
    // releases its stores before the warp barrier, after which lane 0 counts the warp in; the
    // count's previous value comes back to every lane.
    let previous = unsafe {
        let counters = workspace.add(2 * g as usize * slot_len).cast::<u32>();
        let counter = counters.add((tile * stream_k::COUNTERS_PER_TILE + cwarp) as usize);
        fence_acq_rel_gpu();
        bar_warp_sync();
        let previous = if lane == 0 { atom_add_u32(counter, 1) } else { 0 };
        shfl_idx_u32(FULL_MASK, previous, 0)
    };
    if previous != last - first {
        return false;
    }
    // SAFETY: the count is complete: every segment's warp stored its part and released it
    // before counting itself in; lane 0's fence, after its atomic, acquires them, and the warp
    // barrier orders the other lanes' loads after it.
    unsafe {
        fence_acq_rel_gpu();
        bar_warp_sync();
    }
    unroll!(pn in 0..2 => {
        if let Some(panel) = W::panel_mut(acc, pn) {
            let mut blk = first;
            while blk <= last {
                let src = part(blk);
                unroll!(h in 0..2 => {
                    // SAFETY: as the stores above, in block `blk`'s slot; the 8 loads of the
                    // half panel go out before the additions (more beside the 128
                    // accumulators of a 128 × 256 tile spilled).
                    let words: [[u32; 4]; 8] = core::array::from_fn(|j| unsafe {
                        let chunk = 16 * pn + 8 * h + j;
                        ld_global_v4_u32(src.add(4 * 32 * chunk).cast_const().cast())
                    });
                    unroll!(j in 0..8 => {
                        unroll!(e in 0..4 => {
                            let v = f32::from_bits(words[j][e]);
                            let i = 32 * h + 4 * j + e;
                            panel[i] = if blk == first { v } else { panel[i] + v };
                        });
                    });
                });
                blk += 1;
            }
        }
    });
    true
}
