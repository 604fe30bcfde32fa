//! Warp shuffles (`shfl.sync`), 32-bit, over the whole warp (width 32).

use core::arch::asm;

/// Mask naming all 32 lanes.
pub const FULL_MASK: u32 = 0xffff_ffff;

macro_rules! shfl {
    ($(#[$doc:meta])* $name:ident, $mode:literal, $clamp:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// Every lane named in `mask` must execute this same call site with the same `mask`,
        /// and the calling lane must be in `mask`. Minimum sm_70 (`.sync` form).
        #[inline(always)]
        pub unsafe fn $name(mask: u32, value: u32, lane_arg: u32) -> u32 {
            let out: u32;
            // SAFETY: convergence and mask membership are the caller's contract.
            unsafe {
                asm!(concat!("shfl.sync.", $mode, ".b32 {out}, {v}, {l}, ", $clamp, ", {m};"),
                     out = out(reg32) out, v = in(reg32) value, l = in(reg32) lane_arg,
                     m = in(reg32) mask, options(nomem, nostack, preserves_flags));
            }
            out
        }
    };
}

shfl!(/// `shfl.sync.bfly.b32`: the value of lane `lane ^ lane_arg`.
    shfl_bfly_u32, "bfly", "0x1f");
shfl!(/// `shfl.sync.down.b32`: the value of lane `lane + lane_arg`, or this lane's own value
      /// when that is past lane 31.
    shfl_down_u32, "down", "0x1f");
shfl!(/// `shfl.sync.idx.b32`: the value of lane `lane_arg % 32`.
    shfl_idx_u32, "idx", "0x1f");

/// [`shfl_bfly_u32`] on the bits of an f32.
///
/// # Safety
/// As [`shfl_bfly_u32`]. Minimum sm_70.
#[inline(always)]
pub unsafe fn shfl_bfly_f32(mask: u32, value: f32, lane_mask: u32) -> f32 {
    // SAFETY: forwarded contract.
    f32::from_bits(unsafe { shfl_bfly_u32(mask, value.to_bits(), lane_mask) })
}

/// [`shfl_down_u32`] on the bits of an f32.
///
/// # Safety
/// As [`shfl_down_u32`]. Minimum sm_70.
#[inline(always)]
pub unsafe fn shfl_down_f32(mask: u32, value: f32, delta: u32) -> f32 {
    // SAFETY: forwarded contract.
    f32::from_bits(unsafe { shfl_down_u32(mask, value.to_bits(), delta) })
}

/// [`shfl_idx_u32`] on the bits of an f32.
///
/// # Safety
/// As [`shfl_idx_u32`]. Minimum sm_70.
#[inline(always)]
pub unsafe fn shfl_idx_f32(mask: u32, value: f32, src_lane: u32) -> f32 {
    // SAFETY: forwarded contract.
    f32::from_bits(unsafe { shfl_idx_u32(mask, value.to_bits(), src_lane) })
}
