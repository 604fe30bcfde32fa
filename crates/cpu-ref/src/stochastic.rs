//! Stochastic rounding of f32 to bf16, driven by counter-based random bits.
//!
//! The random bits are `kernel_abi::adamw::stochastic_bits(seed, index)` (the same function
//! device code calls), so a reference run reproduces the GPU's rounding bit for bit.

use half::bf16;

pub use kernel_abi::adamw::stochastic_bits;

/// Rounds `x` to one of the two bf16 values around it: away from zero with probability
/// (distance to the bf16 toward zero) / (their spacing), decided by the low 16 bits of
/// `random` (uniform bits give an unbiased rounding). Exact bf16 values and ±inf are
/// unchanged; NaN rounds to nearest (a NaN); values within half a spacing of the largest
/// finite bf16 may round to ±inf.
pub fn stochastic_round_bf16(x: f32, random: u32) -> bf16 {
    if x.is_nan() {
        return bf16::from_f32(x);
    }
    let bits = x.to_bits();
    let toward_zero = bits >> 16;
    let remainder = bits & 0xffff;
    let away = remainder != 0 && (random & 0xffff) >= 0x1_0000 - remainder;
    bf16::from_bits((toward_zero + u32::from(away)) as u16)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use rand::RngExt;

    /// The two bf16 neighbours of x (toward and away from zero), in f64.
    fn neighbours(x: f32) -> (f64, f64) {
        let down = f32::from_bits(x.to_bits() & 0xffff_0000);
        let up = f32::from_bits((x.to_bits() & 0xffff_0000) + 0x1_0000);
        (f64::from(down), f64::from(up))
    }

    #[test]
    fn rounds_to_a_neighbour_and_keeps_exact_values() {
        let mut rng = rng(90);
        for x in uniform(&mut rng, 10_000, 100.0) {
            let r = f64::from(stochastic_round_bf16(x, rng.random()).to_f32());
            let (down, up) = neighbours(x);
            assert!(r == down || r == up, "{x} rounded to {r}, not {down} or {up}");
            let exact = bf16::from_f32(x);
            assert_eq!(stochastic_round_bf16(exact.to_f32(), rng.random()), exact);
        }
        assert_eq!(stochastic_round_bf16(f32::INFINITY, u32::MAX).to_f32(), f32::INFINITY);
        assert!(stochastic_round_bf16(f32::NAN, u32::MAX).is_nan());
    }

    #[test]
    fn is_unbiased_over_the_counter() {
        // Over 2^16 consecutive indices the mean of the rounded values equals x (in f64) to
        // well within the statistical error (spacing / 2 / 256).
        let mut rng = rng(91);
        for (seed, x) in [(1u32, 1.0f32 + 3.0 / 1024.0), (7, -0.3337), (99, 12345.678)] {
            let x = x * rng.random_range(0.9f32..1.1);
            let n = 1u64 << 16;
            let mean = (0..n)
                .map(|i| f64::from(stochastic_round_bf16(x, stochastic_bits(seed, i)).to_f32()))
                .sum::<f64>()
                / n as f64;
            let (down, up) = neighbours(x);
            let spacing = (up - down).abs();
            let err = (mean - f64::from(x)).abs();
            assert!(err < spacing / 100.0, "x = {x}: mean {mean}, error {err:e}");
        }
    }

    #[test]
    fn bits_depend_on_seed_and_both_halves_of_the_index() {
        let a = stochastic_bits(5, 1);
        assert_eq!(a, stochastic_bits(5, 1));
        assert_ne!(a, stochastic_bits(6, 1));
        assert_ne!(a, stochastic_bits(5, 2));
        assert_ne!(a, stochastic_bits(5, 1 | 1 << 32));
    }
}
