//! Matrix transpose of f32, optionally rounding to TF32 (see `kernel_abi::transpose` for the
//! contract and geometry).

use crate::arch::cvt::f32_to_tf32;
use crate::arch::ids::{block_idx_x, grid_dim_x, lane_id, warp_idx_x};
use crate::arch::smem::{dynamic_smem_base, ld_shared_f32, st_shared_f32};
use crate::arch::sync::bar_sync;
use crate::entry::entries;
use kernel_abi::transpose::{BLOCK_THREADS, TILE, TransposeParams};

/// Rows of a tile each warp moves: warp `w` takes rows `w, w + 8, w + 16, w + 24`.
const ROWS_PER_WARP: u32 = TILE / (BLOCK_THREADS / 32);

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `transpose` with `BLOCK_THREADS` threads and `SHARED_BYTES` of
/// dynamic shared memory, after checking that `src` and `dst` hold `rows · cols` elements each
/// and do not overlap. Every thread of a block walks the same tiles, so all reach each
/// `bar_sync`.
#[inline(always)]
unsafe fn transpose(p: TransposeParams) {
    let (warp, lane) = (warp_idx_x(), lane_id());
    let (rows, cols) = (p.rows as u64, p.cols as u64);
    let tiles = p.rows.div_ceil(TILE) as u64 * p.cols.div_ceil(TILE) as u64;
    // At least 1, so the division below has no zero divisor (with no columns there are no tiles).
    let tiles_c = p.cols.div_ceil(TILE).max(1) as u64;
    let base = dynamic_smem_base();
    // Word (r, c) of the tile at r · (TILE + 1) + c: the padding puts a column's 32 words in 32
    // banks.
    let at = |r: u32, c: u32| base + (r * (TILE + 1) + c) * 4;
    let round = |x: f32| if p.round_tf32 != 0 { f32::from_bits(f32_to_tf32(x)) } else { x };
    let mut tile = block_idx_x() as u64;
    while tile < tiles {
        let r0 = tile / tiles_c * TILE as u64;
        let c0 = tile % tiles_c * TILE as u64;
        for j in 0..ROWS_PER_WARP {
            let r = warp + j * (BLOCK_THREADS / 32);
            let (row, col) = (r0 + r as u64, c0 + lane as u64);
            if row < rows && col < cols {
                // SAFETY: `row < rows`, `col < cols`: inside `src`; the tile word is inside the
                // `SHARED_BYTES` the launcher gave.
                unsafe {
                    let x = *p.src.as_ptr().add((row * cols + col) as usize);
                    st_shared_f32(at(r, lane), round(x));
                }
            }
        }
        // SAFETY: every thread of the block reaches this barrier (uniform loop).
        unsafe { bar_sync() };
        for j in 0..ROWS_PER_WARP {
            let c = warp + j * (BLOCK_THREADS / 32);
            // Row `c0 + c` of dst is column `c0 + c` of src; its element `r0 + lane`.
            let (row, col) = (c0 + c as u64, r0 + lane as u64);
            if row < cols && col < rows {
                // SAFETY: `row < cols`, `col < rows`: inside `dst`; the word was stored above
                // (its src element is in bounds).
                unsafe {
                    *p.dst.as_mut_ptr().add((row * rows + col) as usize) =
                        ld_shared_f32(at(lane, c));
                }
            }
        }
        // SAFETY: as above; the tile's words are read before the next tile overwrites them.
        unsafe { bar_sync() };
        tile += grid_dim_x() as u64;
    }
}

entries! { "transpose";
    transpose_f32(TransposeParams) => transpose;
}
