//! `transpose_f32`: `dst = srcᵀ` of f32 matrices, optionally rounded to TF32 (see
//! `kernel_abi::transpose`).

use super::check_len;
use crate::device::{Device, LaunchConfig};
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::transpose::{
    BLOCK_THREADS, MAX_BLOCKS, SHARED_BYTES, TILE, TRANSPOSE_F32, TransposeParams,
};

/// What [`transpose`] does to each element on the way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransposeRounding {
    /// Copied exactly.
    Exact,
    /// Rounded to TF32 as `cvt.rna.tf32.f32` does (nearest, ties away from zero).
    Tf32,
}

/// `dst = srcᵀ`: `src` is `rows × cols` and `dst` `cols × rows`, both row-major and dense, each
/// element copied or rounded as `rounding` says.
pub fn transpose<D: Device>(
    dev: &D,
    src: DeviceView<'_, f32>,
    (rows, cols): (usize, usize),
    mut dst: DeviceViewMut<'_, f32>,
    rounding: TransposeRounding,
) -> Result<()> {
    const OP: &str = "transpose";
    for (arg, value) in [("rows", rows), ("cols", cols)] {
        if u32::try_from(value).is_err() {
            return Err(GpuError::invalid(OP, arg, format!("{value} exceeds u32::MAX")));
        }
    }
    let len = rows.checked_mul(cols).ok_or_else(|| {
        GpuError::invalid(OP, "rows", format!("{rows} × {cols} elements overflow usize"))
    })?;
    check_len(OP, "src", src.len(), len, "rows · cols")?;
    check_len(OP, "dst", dst.len(), len, "rows · cols")?;
    if len == 0 {
        return Ok(());
    }
    let tiles = rows.div_ceil(TILE as usize) * cols.div_ceil(TILE as usize);
    let config = LaunchConfig {
        grid: (tiles.min(MAX_BLOCKS as usize) as u32, 1, 1),
        block: (BLOCK_THREADS, 1, 1),
        shared_mem_bytes: SHARED_BYTES,
    };
    let params = TransposeParams {
        src: src.ptr(),
        dst: dst.ptr(),
        rows: rows as u32,
        cols: cols as u32,
        round_tf32: u32::from(rounding == TransposeRounding::Tf32),
    };
    // SAFETY: both views hold rows · cols elements and cannot overlap (one is borrowed
    // mutably); the block shape and shared memory are the kernel's.
    unsafe { dev.launch(TRANSPOSE_F32, config, params) }
}
