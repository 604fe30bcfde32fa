//! FP32 SIMT GEMM (the fp32 rung): 128×`BN`×8 block tiles (`BN` = 128 with 256 threads, or 64
//! with 128 threads for N ≤ 64: [`kernel_abi::gemm::simt::Tile`]), 8×8 outputs per thread,
//! double-buffered shared memory.
//!
//! Thread `t` (`Tile::thread_grid`: tx = t % (BN/8), ty = t / (BN/8)) owns rows
//! `{4ty .. 4ty+4, 64+4ty .. 64+4ty+4}` and columns `{4tx .. 4tx+4, BN/2+4tx .. BN/2+4tx+4}` of
//! the block tile: per k it reads four 16-byte vectors from shared memory (broadcast for A,
//! consecutive for B: conflict-free) and issues 64 FMAs. Both operand tiles are stored k-major
//! in shared memory (`[k][m]`, `[k][n]`, rows of 132 floats): operands that are contiguous
//! along M/N are copied with 16-byte `cp.async` (edge chunks element by element, stored
//! zero-filled: memcheck counts a partial `cp.async`'s whole window), those contiguous along K
//! are transposed through registers (the 4-float row padding spreads those scalar stores over
//! all 32 banks).
//!
//! Each thread copies 4 floats of B's tile per k-tile and 4 of A's (two runs of 4 in the narrow
//! tile, whose 128 threads copy the same 128-row A tile): `Tile::copy_cell`.
//!
//! Pipeline per k-tile, double-buffered: the copies of tile `kt + 1` into the other buffer are
//! issued before the FMAs on tile `kt` (`cp.async`, or global loads into registers that are
//! stored after the FMAs), then `cp.async.wait_group 0` and one barrier. Keeping the M/N-
//! contiguous operands out of registers leaves the 64 accumulators room within the 128
//! registers that 512 threads per SM allow.
//!
//! Epilogue: the accumulators go through shared memory in 4 phases of 32 tile rows, so each warp
//! finishes whole rows (or, in the narrow tile, pairs of half rows) with 16-byte accesses and the
//! registers of staged rows are free for the epilogue's arithmetic.

use super::epilogue::{Epilogue, aligned16};
use crate::arch::{
    block_idx_x, block_idx_y, block_idx_z, cp_async, global, smem, sync, thread_idx_x,
};
use crate::unroll::unroll;
use kernel_abi::gemm::simt::{BK, BM, ROW_FLOATS, TILE_BYTES, Tile};
use kernel_abi::gemm::{GemmParams, RASTER_GROUP, raster};

const _: () = assert!(BK == 8, "the k loop below is unrolled 8 times");

/// One operand's global → shared copy for this thread.
///
/// `ALONG_K`: the operand is contiguous along K (A row-major, B column-major): the thread loads
/// 4 consecutive k of one row (m or n) into registers and transposes them into shared memory.
/// Otherwise its 4 consecutive m (or n) of one k go straight to shared memory with `cp.async`
/// (element by element, synchronously, when the matrix is not 16-byte aligned or the 4 are not
/// all inside it). Everything that
/// does not change with the k-tile is folded into a line pointer and a bound once, to keep the
/// registers of the main loop few.
struct Operand<const ALONG_K: bool> {
    /// Along K: start of the thread's row of the batch's matrix. Otherwise: the thread's first
    /// column in row 0.
    line: *const f32,
    /// Distance between rows (used when not along K).
    ld: u32,
    /// Along K: whether the thread's row exists. Otherwise: how many of its 4 columns exist.
    line_valid: u32,
    /// The thread's k inside the k-tile.
    k: u32,
    /// Byte offset of the thread's first element in a shared tile.
    smem_offset: u32,
    k_len: u32,
    vector: bool,
}

impl<const ALONG_K: bool> Operand<ALONG_K> {
    /// The copy of the thread's `cell` (`Tile::copy_cell`: outer index and k inside the tile)
    /// from a batch's matrix at `base` (leading dimension `ld`, batch stride `stride`, elements),
    /// whose tile starts at row or column `outer0` of `outer_len`, with `k_len` k.
    #[inline(always)]
    fn new(
        base: *const f32,
        (ld, stride): (u32, u64),
        (outer, k): (u32, u32),
        outer0: u32,
        outer_len: u32,
        k_len: u32,
    ) -> Self {
        let vector = aligned16(base as u64 | (ld as u64 * 4) | (stride * 4));
        let global = outer0 + outer;
        let (line, line_valid) = if ALONG_K {
            (base.wrapping_add((global as u64 * ld as u64) as usize), (global < outer_len) as u32)
        } else {
            (base.wrapping_add(global as usize), outer_len.saturating_sub(global).min(4))
        };
        let smem_offset = (k * ROW_FLOATS + outer) * 4;
        Self { line, ld, line_valid, k, smem_offset, k_len, vector }
    }

    /// Loads this thread's 4 elements of k-tile `kt` (zeros outside the matrix).
    ///
    /// # Safety
    /// `self` comes from [`Operand::new`] on a batch's matrix (its base, `ld` and `outer_len ×
    /// k_len` extent) that lies inside a buffer the launcher validated.
    #[inline(always)]
    unsafe fn load(&self, kt: u32) -> [f32; 4] {
        let k = kt * BK + self.k;
        // Elements (of the 4) inside the matrix, and where the first one lives.
        let (valid, p) = if ALONG_K {
            let v = if self.line_valid != 0 { self.k_len.saturating_sub(k).min(4) } else { 0 };
            (v, self.line.wrapping_add(k as usize))
        } else {
            let v = if k < self.k_len { self.line_valid } else { 0 };
            (v, self.line.wrapping_add((k as u64 * self.ld as u64) as usize))
        };
        // SAFETY: only the `valid` elements inside the matrix are read; the vector path needs
        // all 4 and 16-byte alignment (aligned base, ld and stride; k or the column a
        // multiple of 4).
        unsafe {
            if self.vector && valid == 4 {
                return global::ld_global_nc_v4_u32(p.cast()).map(f32::from_bits);
            }
            core::array::from_fn(|e| if (e as u32) < valid { *p.add(e) } else { 0.0 })
        }
    }

    /// Starts the copy of k-tile `kt` into the shared tile at `tile`: along K, returns the
    /// loaded registers (for [`Operand::finish`]); otherwise copies (asynchronously when
    /// aligned) and returns nothing useful.
    ///
    /// # Safety
    /// As [`Operand::load`]; `tile` is one of this block's `TILE_BYTES` shared tiles, 16-byte
    /// aligned, that no thread reads before a `cp.async` wait and a barrier after this call.
    #[inline(always)]
    unsafe fn begin(&self, kt: u32, tile: u32) -> [f32; 4] {
        if ALONG_K {
            // SAFETY: forwarded bounds (`load` checks them).
            return unsafe { self.load(kt) };
        }
        let k = kt * BK + self.k;
        let valid = if k < self.k_len { self.line_valid } else { 0 };
        let p = self.line.wrapping_add((k as u64 * self.ld as u64) as usize);
        // SAFETY: `valid` elements from `p` are inside the matrix; cp.async copies whole
        // chunks only (compute-sanitizer's memcheck counts all 16 bytes of a partial one as
        // read) from a 16-byte aligned source (aligned base, ld and stride, column a multiple
        // of 4); edge chunks read their `valid` elements (none when 0) and store the chunk
        // zero-filled. The destination is this thread's 16 bytes.
        unsafe {
            if self.vector && valid == 4 {
                cp_async::cp_async_cg_16(tile + self.smem_offset, p.cast(), 16);
            } else {
                // The masked load of `load`, on the bounds already computed here: calling
                // `self.load(kt)` instead spills `gemm_simt_cr_f32` on sm_80 (28 bytes).
                let v = core::array::from_fn(|e| if (e as u32) < valid { *p.add(e) } else { 0.0 });
                self.store(tile, v);
            }
        }
        [0.0; 4]
    }

    /// Completes [`Operand::begin`]: stores the registers of an operand along K.
    ///
    /// # Safety
    /// As [`Operand::store`].
    #[inline(always)]
    unsafe fn finish(&self, tile: u32, v: [f32; 4]) {
        if ALONG_K {
            // SAFETY: forwarded (the thread's cells of the tile).
            unsafe { self.store(tile, v) };
        }
    }

    /// Stores the 4 loaded elements into the k-major shared tile at `tile`.
    ///
    /// # Safety
    /// `tile` is one of this block's `TILE_BYTES` (`BK × ROW_FLOATS` f32) shared tiles, 16-byte
    /// aligned, that no thread reads before the next barrier.
    #[inline(always)]
    unsafe fn store(&self, tile: u32, v: [f32; 4]) {
        // SAFETY: rows k < BK and columns < 128 of a tile of BK × ROW_FLOATS floats.
        unsafe {
            if ALONG_K {
                unroll!(e in 0..4 => {
                    let at = tile + self.smem_offset + e as u32 * ROW_FLOATS * 4;
                    smem::st_shared_f32(at, v[e]);
                });
            } else {
                smem::st_shared_v4_u32(tile + self.smem_offset, v.map(f32::to_bits));
            }
        }
    }
}

/// 4 floats of row `k` of a shared tile starting at column `col`.
///
/// # Safety
/// `tile` is a 16-byte aligned `BK × ROW_FLOATS` shared tile made visible by a barrier;
/// `k < BK` and `col` is a multiple of 4 with `col + 4 <= ROW_FLOATS`.
#[inline(always)]
unsafe fn ld4(tile: u32, k: u32, col: u32) -> [f32; 4] {
    // SAFETY: the caller passes k < BK and col + 4 <= 128 of a tile.
    unsafe { smem::ld_shared_v4_u32(tile + (k * ROW_FLOATS + col) * 4) }.map(f32::from_bits)
}

/// The kernel body for tiles `BN` columns wide; `A_ROW`: A row-major (else column-major),
/// `B_COL`: B column-major.
///
/// # Safety
/// Launched by `gpu-host` with `Tile::of_width(BN).threads()` threads, a grid of
/// (tiles_m · tiles_n, split_k, batch) and `simt::SMEM_BYTES` of dynamic shared memory, on
/// buffers it validated.
#[inline(always)]
pub unsafe fn gemm<const A_ROW: bool, const B_COL: bool, const BN: u32>(p: GemmParams<f32, f32>) {
    let tile = const { Tile::of_width(BN) };
    // Each thread copies one run of 4 of B's tile per k-tile, and one or two of A's (the
    // second, `a_hi`, only in the narrow tile: its 128 threads copy the same 128-row A tile).
    let two_a = tile.copies(BM) == 2;
    const {
        let tile = Tile::of_width(BN);
        assert!(matches!(tile.copies(BM), 1 | 2));
        assert!(tile.copies(BN) == 1);
        // The epilogue's 4 runs per thread cover 32 staged rows.
        assert!(32 * (BN / 4) == 4 * tile.threads());
    }
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
    let a_op = |i| {
        let cell = tile.copy_cell(A_ROW, BM, t, i);
        Operand::<A_ROW>::new(a, (p.lda, p.stride_a), cell, m0, p.m, p.k)
    };
    let (a_lo, a_hi) = (a_op(0), a_op(1));
    let b_cell = tile.copy_cell(B_COL, BN, t, 0);
    let b_op = Operand::<B_COL>::new(b, (p.ldb, p.stride_b), b_cell, n0, p.n, p.k);
    let smem = smem::dynamic_smem_base();
    let a_tile = |buf: u32| smem + buf * TILE_BYTES;
    let b_tile = |buf: u32| smem + (2 + buf) * TILE_BYTES;
    let (ty, tx) = tile.thread_grid(t);
    let mut acc = [[0.0f32; 8]; 8];
    // This block's K slice: tiles [kt0, kt1).
    let kt0 = block_idx_y() * p.k_tiles_per_split;
    let kt1 = p.k.div_ceil(BK).min(kt0 + p.k_tiles_per_split);

    // SAFETY: all threads run the same loop (barriers are block-uniform); shared accesses stay
    // in the two buffers; global loads are bounds-checked by `Operand::load`.
    unsafe {
        if kt0 < kt1 {
            a_lo.store(a_tile(0), a_lo.load(kt0));
            if two_a {
                a_hi.store(a_tile(0), a_hi.load(kt0));
            }
            b_op.store(b_tile(0), b_op.load(kt0));
        }
        sync::bar_sync();
        for kt in kt0..kt1 {
            let (cur, next) = ((kt - kt0) % 2, (kt - kt0 + 1) % 2);
            let prefetch = kt + 1 < kt1;
            let (a_lo_next, a_hi_next, b_next) = if prefetch {
                let a_lo_next = a_lo.begin(kt + 1, a_tile(next));
                let a_hi_next = if two_a { a_hi.begin(kt + 1, a_tile(next)) } else { [0.0; 4] };
                (a_lo_next, a_hi_next, b_op.begin(kt + 1, b_tile(next)))
            } else {
                ([0.0; 4], [0.0; 4], [0.0; 4])
            };
            unroll!(k in 0..8 => {
                let k = k as u32;
                let (lo, hi) = (ld4(a_tile(cur), k, 4 * ty), ld4(a_tile(cur), k, 64 + 4 * ty));
                let a_frag = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
                let (lo, hi) = (ld4(b_tile(cur), k, 4 * tx), ld4(b_tile(cur), k, BN / 2 + 4 * tx));
                let b_frag = [lo[0], lo[1], lo[2], lo[3], hi[0], hi[1], hi[2], hi[3]];
                unroll!(i in 0..8 => {
                    unroll!(j in 0..8 => {
                        acc[i][j] = core::f32::math::mul_add(a_frag[i], b_frag[j], acc[i][j]);
                    });
                });
            });
            if prefetch {
                a_lo.finish(a_tile(next), a_lo_next);
                if two_a {
                    a_hi.finish(a_tile(next), a_hi_next);
                }
                b_op.finish(b_tile(next), b_next);
            }
            cp_async::cp_async_commit_group();
            cp_async::cp_async_wait_group::<0>();
            sync::bar_sync();
        }

        let epilogue = if p.split_k > 1 {
            Epilogue::partials(&p, batch, block_idx_y())
        } else {
            Epilogue::new(&p, batch)
        };
        // The epilogue goes through shared memory in 4 phases of 32 tile rows: phase `ph`
        // holds the thread's rows 4ty + ph and 64 + 4ty + ph. Then each thread finishes runs
        // of 4 columns, consecutive threads consecutive runs of a staged row (16-byte
        // accesses), and the accumulators already staged no longer occupy registers.
        let runs_per_row = BN / 4;
        unroll!(ph in 0..4 => {
            unroll!(half in 0..2 => {
                let row = acc[ph + 4 * half];
                let at = |col: u32| smem + ((16 * half as u32 + ty) * ROW_FLOATS + col) * 4;
                let lo = [row[0], row[1], row[2], row[3]].map(f32::to_bits);
                let hi = [row[4], row[5], row[6], row[7]].map(f32::to_bits);
                smem::st_shared_v4_u32(at(4 * tx), lo);
                smem::st_shared_v4_u32(at(BN / 2 + 4 * tx), hi);
            });
            sync::bar_sync();
            for q in 0..4 {
                // Run t + q · threads (threads: a whole number of rows).
                let s = t / runs_per_row + q * (tile.threads() / runs_per_row);
                let local = if s < 16 { 4 * s } else { 64 + 4 * (s - 16) } + ph as u32;
                let m = m0 + local;
                let col = 4 * (t % runs_per_row);
                if m < p.m {
                    // Row s < 32 of the staging area, which fits in the pipeline buffers.
                    let staged = smem::ld_shared_v4_u32(smem + (s * ROW_FLOATS + col) * 4);
                    epilogue.store4(m, n0 + col, staged.map(f32::from_bits));
                }
            }
            sync::bar_sync();
        });
    }
}
