//! FP32 SIMT GEMM (the fp32 rung): 128×128×8 block tile, 256 threads, 8×8 outputs per
//! thread, register-staged double buffering of shared memory.
//!
//! Thread `t` (tx = t % 16, ty = t / 16) owns rows `{4ty .. 4ty+4, 64+4ty .. 64+4ty+4}` and
//! columns `{4tx .. 4tx+4, 64+4tx .. 64+4tx+4}` of the block tile: per k it reads four 16-byte
//! vectors from shared memory (broadcast for A, consecutive for B: conflict-free) and issues 64
//! FMAs. Both operand tiles are stored k-major in shared memory (`[k][m]`, `[k][n]`, rows of
//! 132 floats): operands that are contiguous along M/N are copied with 16-byte stores, those
//! contiguous along K are transposed through registers (the 4-float row padding spreads those
//! scalar stores over all 32 banks).
//!
//! Pipeline per k-tile: global loads of tile `kt + 1` into registers are issued before the
//! FMAs on tile `kt`, and stored to the other shared buffer after them; one barrier per tile.

use super::epilogue::{Epilogue, aligned16};
use crate::arch::{block_idx_x, block_idx_z, global, smem, sync, thread_idx_x};
use crate::unroll::unroll;
use kernel_abi::gemm::simt::{BK, BM, BN, ROW_FLOATS, TILE_BYTES};
use kernel_abi::gemm::{GemmParams, RASTER_GROUP, raster};

const _: () = assert!(BK == 8, "the k loop below is unrolled 8 times");

/// One operand's global → register → shared copy for this thread.
///
/// `ALONG_K`: the operand is contiguous along K (A row-major, B column-major): the thread loads
/// 4 consecutive k of one row (m or n) and transposes them into shared memory. Otherwise it
/// loads 4 consecutive m (or n) of one k.
struct Operand<const ALONG_K: bool> {
    /// The batch's matrix.
    base: *const f32,
    ld: u64,
    /// The thread's m (or n) inside the block tile, and its k inside the k-tile.
    outer: u32,
    k: u32,
    /// First m (or n) of the block tile; the matrix's extent along m (or n); K.
    outer0: u32,
    outer_len: u32,
    k_len: u32,
    vector: bool,
}

impl<const ALONG_K: bool> Operand<ALONG_K> {
    #[inline(always)]
    fn new(
        base: *const f32,
        ld: u32,
        stride: u64,
        outer0: u32,
        outer_len: u32,
        k_len: u32,
    ) -> Self {
        let t = thread_idx_x();
        let (outer, k) = if ALONG_K { (t / 2, (t % 2) * 4) } else { ((t % 32) * 4, t / 32) };
        let vector = aligned16(base as u64 | (ld as u64 * 4) | (stride * 4));
        Self { base, ld: ld as u64, outer, k, outer0, outer_len, k_len, vector }
    }

    /// Loads this thread's 4 elements of k-tile `kt` (zeros outside the matrix).
    #[inline(always)]
    unsafe fn load(&self, kt: u32) -> [f32; 4] {
        let (outer, k) = (self.outer0 + self.outer, kt * BK + self.k);
        // Elements (of the 4) inside the matrix, and where the first one lives.
        let (valid, at) = if ALONG_K {
            let v = if outer < self.outer_len { self.k_len.saturating_sub(k).min(4) } else { 0 };
            (v, outer as u64 * self.ld + k as u64)
        } else {
            let v = if k < self.k_len { self.outer_len.saturating_sub(outer).min(4) } else { 0 };
            (v, k as u64 * self.ld + outer as u64)
        };
        // SAFETY: only the `valid` elements inside the matrix are read; the vector path needs
        // all 4 and 16-byte alignment (aligned base, ld and stride; `at` a multiple of 4).
        unsafe {
            let p = self.base.wrapping_add(at as usize);
            if self.vector && valid == 4 {
                return global::ld_global_nc_v4_u32(p.cast()).map(f32::from_bits);
            }
            core::array::from_fn(|e| if (e as u32) < valid { *p.add(e) } else { 0.0 })
        }
    }

    /// Stores the 4 loaded elements into the k-major shared tile at `tile`.
    #[inline(always)]
    unsafe fn store(&self, tile: u32, v: [f32; 4]) {
        // SAFETY: rows k < BK and columns < 128 of a tile of BK × ROW_FLOATS floats.
        unsafe {
            if ALONG_K {
                unroll!(e in 0..4 => {
                    let row = self.k + e as u32;
                    smem::st_shared_f32(tile + (row * ROW_FLOATS + self.outer) * 4, v[e]);
                });
            } else {
                let words = v.map(f32::to_bits);
                smem::st_shared_v4_u32(tile + (self.k * ROW_FLOATS + self.outer) * 4, words);
            }
        }
    }
}

/// 4 floats of row `k` of a shared tile starting at column `col`.
#[inline(always)]
unsafe fn ld4(tile: u32, k: u32, col: u32) -> [f32; 4] {
    // SAFETY: the caller passes k < BK and col + 4 <= 128 of a tile.
    unsafe { smem::ld_shared_v4_u32(tile + (k * ROW_FLOATS + col) * 4) }.map(f32::from_bits)
}

/// The kernel body; `A_ROW`: A row-major (else column-major), `B_COL`: B column-major.
///
/// # Safety
/// Launched by `gpu-host` with 256 threads, a grid of (tiles_m · tiles_n, 1, batch) and
/// `simt::SMEM_BYTES` of dynamic shared memory, on buffers it validated.
#[inline(always)]
pub unsafe fn gemm<const A_ROW: bool, const B_COL: bool>(p: GemmParams<f32, f32>) {
    let t = thread_idx_x();
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
    // A is contiguous along K when row-major, B when column-major.
    let a_op = Operand::<A_ROW>::new(a, p.lda, p.stride_a, m0, p.m, p.k);
    let b_op = Operand::<B_COL>::new(b, p.ldb, p.stride_b, n0, p.n, p.k);
    let smem = smem::dynamic_smem_base();
    let a_tile = |buf: u32| smem + buf * TILE_BYTES;
    let b_tile = |buf: u32| smem + (2 + buf) * TILE_BYTES;
    let (tx, ty) = (t % 16, t / 16);
    let mut acc = [[0.0f32; 8]; 8];
    let k_tiles = p.k.div_ceil(BK);

    // SAFETY: all threads run the same loop (barriers are block-uniform); shared accesses stay
    // in the two buffers; global loads are bounds-checked by `Operand::load`.
    unsafe {
        if k_tiles > 0 {
            a_op.store(a_tile(0), a_op.load(0));
            b_op.store(b_tile(0), b_op.load(0));
        }
        sync::bar_sync();
        for kt in 0..k_tiles {
            let (cur, next) = (kt % 2, (kt + 1) % 2);
            let prefetch = kt + 1 < k_tiles;
            let (a_next, b_next) = if prefetch {
                (a_op.load(kt + 1), b_op.load(kt + 1))
            } else {
                ([0.0; 4], [0.0; 4])
            };
            unroll!(k in 0..8 => {
                let k = k as u32;
                let (lo, hi) = (ld4(a_tile(cur), k, 4 * ty), ld4(a_tile(cur), k, 64 + 4 * ty));
                let a_frag = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
                let (lo, hi) = (ld4(b_tile(cur), k, 4 * tx), ld4(b_tile(cur), k, 64 + 4 * tx));
                let b_frag = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
                unroll!(i in 0..8 => {
                    unroll!(j in 0..8 => {
                        acc[i][j] = core::f32::math::mul_add(a_frag[i], b_frag[j], acc[i][j]);
                    });
                });
            });
            if prefetch {
                a_op.store(a_tile(next), a_next);
                b_op.store(b_tile(next), b_next);
            }
            sync::bar_sync();
        }

        let epilogue = Epilogue::new(&p, batch);
        unroll!(i in 0..8 => {
            let m = m0 + (i as u32 / 4) * 64 + 4 * ty + i as u32 % 4;
            if m < p.m {
                let row = acc[i];
                epilogue.store4(m, n0 + 4 * tx, [row[0], row[1], row[2], row[3]]);
                epilogue.store4(m, n0 + 64 + 4 * tx, [row[4], row[5], row[6], row[7]]);
            }
        });
    }
}
