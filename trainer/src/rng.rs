//! Seeded randomness: every random stream is a PCG64 seeded from the user's seed and the
//! stream's coordinates, so a stream can be recreated from a few integers (that is all the
//! RNG state a checkpoint needs to hold).

use rand::SeedableRng;
use rand_pcg::Pcg64;

/// First coordinate of each stream family, so the families never share a stream.
pub mod family {
    /// Parameter initialisation: `[INIT, tensor, chunk]`.
    pub const INIT: u64 = 1;
    /// Shard order of an epoch: `[SHARD_ORDER, epoch]`.
    pub const SHARD_ORDER: u64 = 2;
    /// Window order of a shard in an epoch: `[WINDOW_ORDER, epoch, shard]`.
    pub const WINDOW_ORDER: u64 = 3;
    /// Token sampling: `[SAMPLE]`.
    pub const SAMPLE: u64 = 4;
    /// Synthetic benchmark tokens: `[BENCH_TOKENS]`.
    pub const BENCH_TOKENS: u64 = 5;
}

/// SplitMix64's finaliser: a bijective scramble of 64 bits.
fn scramble(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The generator of stream `coords` under `seed` (for example `[family::SHARD_ORDER, epoch]`).
pub fn stream(seed: u64, coords: &[u64]) -> Pcg64 {
    let mixed = coords
        .iter()
        .fold(scramble(seed), |acc, &c| scramble(acc ^ c.wrapping_add(0x9e37_79b9_7f4a_7c15)));
    Pcg64::seed_from_u64(mixed)
}

/// Fills `out` with independent standard normal samples (Box-Muller, both outputs used).
pub fn fill_normal(rng: &mut Pcg64, out: &mut [f32]) {
    use rand::RngExt;
    for pair in out.chunks_mut(2) {
        let u1: f64 = 1.0 - rng.random::<f64>(); // in (0, 1]
        let u2: f64 = rng.random();
        let radius = (-2.0 * u1.ln()).sqrt();
        let (sin, cos) = (std::f64::consts::TAU * u2).sin_cos();
        pair[0] = (radius * cos) as f32;
        if let Some(second) = pair.get_mut(1) {
            *second = (radius * sin) as f32;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::RngExt;

    #[test]
    fn streams_are_reproducible_and_distinct() {
        let a: u64 = stream(7, &[1, 2]).random();
        assert_eq!(a, stream(7, &[1, 2]).random::<u64>());
        assert_ne!(a, stream(7, &[2, 1]).random::<u64>());
        assert_ne!(a, stream(8, &[1, 2]).random::<u64>());
    }

    #[test]
    fn normal_has_unit_variance() {
        let mut samples = vec![0.0f32; 100_001];
        fill_normal(&mut stream(1, &[]), &mut samples);
        let xs: Vec<f64> = samples.iter().map(|&x| f64::from(x)).collect();
        let mean = xs.iter().sum::<f64>() / xs.len() as f64;
        let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / xs.len() as f64;
        assert!(mean.abs() < 0.02 && (var - 1.0).abs() < 0.02, "mean {mean}, var {var}");
    }
}
