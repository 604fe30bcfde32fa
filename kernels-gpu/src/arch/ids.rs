//! Thread, block and grid coordinates (special registers).
//!
//! # Safety
//! All functions here read special registers and have no preconditions. Minimum sm_20.

use core::arch::asm;

macro_rules! special_register {
    ($(#[$doc:meta])* $name:ident, $reg:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Always safe: reads a special register. Minimum sm_20.
        #[inline(always)]
        pub fn $name() -> u32 {
            let value: u32;
            // SAFETY: reading a special register has no side effects and no preconditions.
            unsafe {
                asm!(concat!("mov.u32 {}, ", $reg, ";"), out(reg32) value,
                     options(pure, nomem, nostack, preserves_flags));
            }
            value
        }
    };
}

special_register!(/// `%tid.x`: thread index within the block, x dimension.
    thread_idx_x, "%tid.x");
special_register!(/// `%tid.y`: thread index within the block, y dimension.
    thread_idx_y, "%tid.y");
special_register!(/// `%tid.z`: thread index within the block, z dimension.
    thread_idx_z, "%tid.z");
special_register!(/// `%ntid.x`: threads per block, x dimension.
    block_dim_x, "%ntid.x");
special_register!(/// `%ntid.y`: threads per block, y dimension.
    block_dim_y, "%ntid.y");
special_register!(/// `%ctaid.x`: block index within the grid, x dimension.
    block_idx_x, "%ctaid.x");
special_register!(/// `%ctaid.y`: block index within the grid, y dimension.
    block_idx_y, "%ctaid.y");
special_register!(/// `%ctaid.z`: block index within the grid, z dimension.
    block_idx_z, "%ctaid.z");
special_register!(/// `%nctaid.x`: blocks per grid, x dimension.
    grid_dim_x, "%nctaid.x");
special_register!(/// `%nctaid.y`: blocks per grid, y dimension.
    grid_dim_y, "%nctaid.y");
special_register!(/// `%laneid`: lane of this thread within its warp (0..32).
    lane_id, "%laneid");

/// Index of this thread's warp within a one-dimensional block (`%tid.x / 32`).
///
/// # Safety
/// Always safe. Minimum sm_20.
#[inline(always)]
pub fn warp_idx_x() -> u32 {
    thread_idx_x() / 32
}

/// Global linear thread index and total thread count of a one-dimensional launch, as `u64`
/// (for grid-stride loops over buffers longer than `u32::MAX`).
///
/// # Safety
/// Always safe. Minimum sm_20.
#[inline(always)]
pub fn grid_stride_1d() -> (u64, u64) {
    let start = block_idx_x() as u64 * block_dim_x() as u64 + thread_idx_x() as u64;
    let stride = grid_dim_x() as u64 * block_dim_x() as u64;
    (start, stride)
}
