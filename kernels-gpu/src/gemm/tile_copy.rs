//! Global → shared copies of one operand tile per pipeline stage.
//!
//! Each thread copies `tc::COPIES_PER_THREAD` 16-byte chunks per tile
//! (`kernel_abi::gemm::tc::copy_chunk`) into the swizzled layout of `tc::tile_offset`. When
//! the operand's base, leading dimension and batch stride are 16-byte aligned, whole chunks are
//! `cp.async.cg` copies; edge chunks (part or none of them inside the matrix), and every chunk
//! of an unaligned operand, are read element by element and stored zero-filled with one
//! 16-byte shared store (synchronous, correct for any layout, slower). A partial `cp.async`
//! chunk would read only its in-bounds bytes, but compute-sanitizer's memcheck counts its whole
//! window (`arch::cp_async`).

use super::tensor_op::TensorOp;
use crate::arch::{cp_async, smem};
use crate::unroll::unroll;
use kernel_abi::gemm::tc::{self, BK_BYTES, COPIES_PER_THREAD, THREADS};

const _: () = assert!(COPIES_PER_THREAD == 4, "the copy loop below is unrolled 4 times");

/// This thread's share of the copies of one operand (A or B).
///
/// `K_MAJOR`: the operand is contiguous along K in global memory (A row-major, B column-major)
/// and its tile is stored K-major (rows = m or n); otherwise rows are k.
pub struct TileCopy<T: TensorOp, const K_MAJOR: bool> {
    /// The batch's matrix.
    base: *const T::In,
    ld: u64,
    /// The thread's first tile row and its element column inside the tile.
    row: u32,
    col: u32,
    /// Byte offset of the thread's first chunk in a tile.
    smem_offset: u32,
    /// First m (or n) of the block tile; the matrix's extent along m (or n); K.
    outer0: u32,
    outer_len: u32,
    k_len: u32,
    vector: bool,
}

impl<T: TensorOp, const K_MAJOR: bool> TileCopy<T, K_MAJOR> {
    const ELEM_BYTES: u32 = size_of::<T::In>() as u32;
    /// Elements per 16-byte chunk.
    const CHUNK_ELEMS: u32 = 16 / Self::ELEM_BYTES;
    /// K elements per stage.
    pub const BK: u32 = BK_BYTES / Self::ELEM_BYTES;
    const ROW_CHUNKS: u32 = tc::row_chunks(K_MAJOR, Self::ELEM_BYTES);
    /// Tile rows between a thread's consecutive chunks. The swizzle of `tile_offset` repeats
    /// with this period (it depends on `row % 8` at most, and this is a multiple of 4 whose
    /// swizzle uses only `row % 4`), so chunk `i` sits `i` row-steps after chunk 0.
    const ROW_STEP: u32 = THREADS / Self::ROW_CHUNKS;

    /// The copies of thread `tid` for the matrix `base` (leading dimension `ld`, batch stride
    /// `stride`), block tile starting at `outer0` along m (or n).
    #[inline(always)]
    pub fn new(
        base: *const T::In,
        ld: u32,
        stride: u64,
        outer0: u32,
        outer_len: u32,
        k_len: u32,
        tid: u32,
    ) -> Self {
        let (row, chunk) = tc::copy_chunk(tid, 0, K_MAJOR, Self::ELEM_BYTES);
        let bytes = |elems: u64| elems * Self::ELEM_BYTES as u64;
        Self {
            base,
            ld: ld as u64,
            row,
            col: chunk * Self::CHUNK_ELEMS,
            smem_offset: tc::tile_offset(K_MAJOR, Self::ELEM_BYTES, row, chunk),
            outer0,
            outer_len,
            k_len,
            vector: (base as u64 | bytes(ld as u64) | bytes(stride)) & 15 == 0,
        }
    }

    /// Issues the copies of k-tile `kt` into the tile at shared address `tile`.
    ///
    /// # Safety
    /// `tile` must be a 16-byte aligned tile of `tc::TILE_BYTES` shared bytes not read by any
    /// thread until the copies complete (cp.async wait + barrier); the matrix must be valid
    /// for its extents.
    #[inline(always)]
    pub unsafe fn issue(&self, kt: u32, tile: u32) {
        let k0 = kt * Self::BK;
        unroll!(i in 0..4 => {
            let i = i as u32;
            let row = self.row + i * Self::ROW_STEP;
            let (g_row, g_col, row_ok, col_len) = if K_MAJOR {
                let outer = self.outer0 + row;
                (outer, k0 + self.col, outer < self.outer_len, self.k_len)
            } else {
                (k0 + row, self.outer0 + self.col, k0 + row < self.k_len, self.outer_len)
            };
            let valid = if row_ok { col_len.saturating_sub(g_col).min(Self::CHUNK_ELEMS) } else { 0 };
            let dst = tile + self.smem_offset + i * Self::ROW_STEP * Self::ROW_CHUNKS * 16;
            let src = self.base.wrapping_add((g_row as u64 * self.ld + g_col as u64) as usize);
            // SAFETY: `valid` elements from `src` are inside the matrix (row and column bounds
            // above); cp.async copies whole chunks only (compute-sanitizer's memcheck counts
            // all 16 bytes of a partial one as read) from a 16-byte aligned source (aligned
            // base, ld and stride, column a multiple of the chunk); edge chunks are loaded
            // element by element (none when `valid` is 0) and stored zero-filled.
            unsafe {
                if self.vector && valid == Self::CHUNK_ELEMS {
                    cp_async::cp_async_cg_16(dst, src.cast(), 16);
                } else {
                    smem::st_shared_v4_u32(dst, T::load_chunk(src, valid));
                }
            }
        });
    }
}
