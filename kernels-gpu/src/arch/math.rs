//! Special-function-unit approximations.

use core::arch::asm;

/// `tanh.approx.f32`: hyperbolic tangent. The PTX ISA bounds its relative error by 2^-11 over
/// the whole f32 range (earlier ISA versions said 2^-10.987); ±inf give ±1, NaN gives NaN,
/// subnormal inputs pass through.
///
/// # Safety
/// Always safe. Minimum sm_75.
#[inline(always)]
pub fn tanh_approx_f32(x: f32) -> f32 {
    let out: f32;
    // SAFETY: register-only instruction.
    unsafe {
        asm!("tanh.approx.f32 {}, {};", out(reg32) out, in(reg32) x,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}
