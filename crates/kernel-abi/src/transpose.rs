//! Matrix transpose of f32, optionally rounding to TF32 on the way.
//!
//! `transpose_f32` writes `dst = srcᵀ`: `src` is `rows × cols` and `dst` `cols × rows`, both
//! row-major and dense. It exists for the Hopper TF32 GEMM, which reads its operands K-major
//! only: the input gradient `dX = dY·W` of a linear layer reads `W` (`out × in`) N-major, and
//! `Wᵀ` K-major. With `round_tf32 = 1` every element is rounded as `cvt.rna.tf32.f32` does
//! (`ROUND_TF32_F32`), which that GEMM needs too (wgmma truncates TF32 operands).
//!
//! Geometry: [`TILE`] × [`TILE`] tiles of `src`, each read by one block of [`BLOCK_THREADS`]
//! threads into shared memory (rows padded to `TILE + 1` words, so that the transposed reads
//! meet no bank conflict) and written back transposed; rows of both matrices are read and
//! written 128 bytes per warp. Blocks walk the tiles grid-stride, `tile = block, block + grid,
//! …`, row-major over the `⌈rows / TILE⌉ × ⌈cols / TILE⌉` tile grid. Any shape; `src` and
//! `dst` must not overlap.

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{DevicePtr, DevicePtrMut};

/// Side of a tile.
pub const TILE: u32 = 32;

/// Threads per block: 8 warps, each moving 4 rows of a tile.
pub const BLOCK_THREADS: u32 = 256;

/// Dynamic shared memory of a block: one tile of f32 with rows of `TILE + 1` words.
pub const SHARED_BYTES: u32 = TILE * (TILE + 1) * 4;

/// Most blocks of a launch (they walk the rest of the tiles).
pub const MAX_BLOCKS: u32 = 8192;

/// `dst[c · rows + r] = round(src[r · cols + c])` for `r < rows`, `c < cols`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct TransposeParams {
    /// `rows × cols`, row-major.
    pub src: DevicePtr<f32>,
    /// `cols × rows`, row-major; disjoint from `src`.
    pub dst: DevicePtrMut<f32>,
    /// Rows of `src`.
    pub rows: u32,
    /// Columns of `src`.
    pub cols: u32,
    /// 1: round each element to TF32 (nearest, ties away from zero); 0: copy it exactly.
    pub round_tf32: u32,
}

// SAFETY: #[repr(C)] of two device pointers and three u32 (4 bytes of tail padding, never read
// by the device).
unsafe impl KernelParams for TransposeParams {}

/// `transpose_f32`.
pub const TRANSPOSE_F32: Kernel<TransposeParams> = Kernel::new("transpose_f32");

/// Every transpose entry point.
pub const KERNELS: &[KernelSig] = &[TRANSPOSE_F32.sig()];
