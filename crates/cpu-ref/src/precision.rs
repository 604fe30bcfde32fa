//! Storage precisions and the exact roundings the kernels use.

use half::{bf16, f16};

/// A storage type of activations and parameters: `f32`, `bf16` or `f16`.
///
/// Arithmetic is done in f32; [`Element::from_f32`] rounds to nearest, ties to even.
pub trait Element: Copy + Send + Sync + PartialEq + std::fmt::Debug + 'static {
    /// Short name used in kernel names and messages (`"f32"`, `"bf16"`, `"f16"`).
    const NAME: &'static str;
    /// Exact widening to f32.
    fn to_f32(self) -> f32;
    /// Rounding (nearest-even) narrowing from f32.
    fn from_f32(x: f32) -> Self;
}

impl Element for f32 {
    const NAME: &'static str = "f32";
    #[inline]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline]
    fn from_f32(x: f32) -> Self {
        x
    }
}

impl Element for bf16 {
    const NAME: &'static str = "bf16";
    #[inline]
    fn to_f32(self) -> f32 {
        bf16::to_f32(self)
    }
    #[inline]
    fn from_f32(x: f32) -> Self {
        bf16::from_f32(x)
    }
}

impl Element for f16 {
    const NAME: &'static str = "f16";
    #[inline]
    fn to_f32(self) -> f32 {
        f16::to_f32(self)
    }
    #[inline]
    fn from_f32(x: f32) -> Self {
        f16::from_f32(x)
    }
}

/// Rounds an f32 to TF32 (10 explicit mantissa bits) bit for bit as `cvt.rna.tf32.f32` does on
/// the GPU: to nearest, ties away from zero; the result is returned as an f32 with the low 13
/// bits clear. Infinities and NaNs only lose their low 13 bits (so a NaN whose payload lies
/// wholly there, such as `0x7f800001`, becomes infinity, as on an H100).
pub fn round_tf32(x: f32) -> f32 {
    let bits = x.to_bits();
    let rounded = if x.is_finite() { bits.wrapping_add(1 << 12) } else { bits };
    f32::from_bits(rounded & !0x1fff)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tf32_rounds_to_nearest_ties_away() {
        let one = 1.0f32.to_bits();
        // exactly half an ulp of tf32 above 1.0 rounds up (ties away from zero)
        assert_eq!(round_tf32(f32::from_bits(one + (1 << 12))).to_bits(), one + (1 << 13));
        // just below half an ulp rounds down
        assert_eq!(round_tf32(f32::from_bits(one + (1 << 12) - 1)).to_bits(), one);
        assert_eq!(round_tf32(-1.5), -1.5);
        assert!(round_tf32(f32::NAN).is_nan());
        assert_eq!(round_tf32(f32::from_bits(0x7fff_ffff)).to_bits(), 0x7fff_e000);
        assert_eq!(round_tf32(f32::from_bits(0x7f80_0001)), f32::INFINITY);
        assert_eq!(round_tf32(f32::INFINITY), f32::INFINITY);
        // the largest finite f32 rounds up to infinity, as the hardware does
        assert_eq!(round_tf32(f32::MAX), f32::INFINITY);
    }
}
