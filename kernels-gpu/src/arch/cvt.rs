//! Precision conversions.

use core::arch::asm;

/// `cvt.rna.tf32.f32`: rounds to TF32 (10 mantissa bits) to nearest, ties away from zero; the
/// result is an f32 bit pattern with the low 13 bits clear.
///
/// # Safety
/// Always safe. Minimum sm_80.
#[inline(always)]
pub fn f32_to_tf32(x: f32) -> u32 {
    let out: u32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.rna.tf32.f32 {}, {};", out(reg32) out, in(reg32) x,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}

/// `cvt.rn.bf16x2.f32`: rounds two f32 to bf16 (nearest-even) and packs them, `lo` in the low
/// half.
///
/// # Safety
/// Always safe. Minimum sm_80.
#[inline(always)]
pub fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
    let out: u32;
    // SAFETY: register-only conversion. PTX puts the first source in the upper half.
    unsafe {
        asm!("cvt.rn.bf16x2.f32 {}, {}, {};", out(reg32) out, in(reg32) hi, in(reg32) lo,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}

/// `cvt.rn.f16x2.f32`: rounds two f32 to f16 (nearest-even, overflow to ±inf) and packs them,
/// `lo` in the low half.
///
/// # Safety
/// Always safe. Minimum sm_80.
#[inline(always)]
pub fn pack_f16x2(lo: f32, hi: f32) -> u32 {
    let out: u32;
    // SAFETY: register-only conversion. PTX puts the first source in the upper half.
    unsafe {
        asm!("cvt.rn.f16x2.f32 {}, {}, {};", out(reg32) out, in(reg32) hi, in(reg32) lo,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}

/// `cvt.f32.f16`: widens an f16 bit pattern to f32 (exact).
///
/// # Safety
/// Always safe. Minimum sm_20.
#[inline(always)]
pub fn f16_to_f32(bits: u16) -> f32 {
    let out: f32;
    // SAFETY: register-only conversion.
    unsafe {
        asm!("cvt.f32.f16 {}, {};", out(reg32) out, in(reg16) bits,
             options(pure, nomem, nostack, preserves_flags));
    }
    out
}
