//! Special-function-unit approximations.

use core::arch::asm;

/// `ex2.approx.ftz.f32`: 2^x. The PTX ISA bounds its error by 2 ulp over the full range
/// (about 2^-22 relative); subnormal inputs and results flush to zero, -inf gives +0, +inf
/// gives +inf, NaN gives NaN.
///
/// # Safety
/// Always safe. Minimum sm_20.
#[inline(always)]
pub fn ex2_approx_f32(x: f32) -> f32 {
    let out: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("ex2.approx.ftz.f32 {}, {};", out(reg32) out, in(reg32) x,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}

/// `rcp.approx.ftz.f32`: 1/x. The PTX ISA bounds its error by 1 ulp over the full range;
/// subnormal inputs and results flush to zero, ±0 gives ±inf, ±inf gives ±0, NaN gives NaN.
/// One `MUFU.RCP` where IEEE `1.0 / x` (`div.rn`) adds a Newton step, a range check and a
/// branch to a slow path per division.
///
/// # Safety
/// Always safe. Minimum sm_20.
#[inline(always)]
pub fn rcp_approx_f32(x: f32) -> f32 {
    let out: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("rcp.approx.ftz.f32 {}, {};", out(reg32) out, in(reg32) x,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}

/// `lg2.approx.f32`: log2(x). The PTX ISA bounds its absolute error by 2^-22 for x in
/// (0.5, 2) and its relative error by 2^-22 elsewhere; 0 gives -inf, negative inputs NaN.
///
/// # Safety
/// Always safe. Minimum sm_20.
#[inline(always)]
pub fn lg2_approx_f32(x: f32) -> f32 {
    let out: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("lg2.approx.f32 {}, {};", out(reg32) out, in(reg32) x,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}
