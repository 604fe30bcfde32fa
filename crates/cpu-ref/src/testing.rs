//! Helpers shared by the op tests: random inputs, f64 conversion, tolerant comparison and
//! central finite differences.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;

/// A seeded generator, so every failure reproduces.
pub fn rng(seed: u64) -> Pcg64 {
    Pcg64::seed_from_u64(seed)
}

/// `n` values uniform in `[-scale, scale)`.
pub fn uniform(rng: &mut Pcg64, n: usize, scale: f32) -> Vec<f32> {
    (0..n).map(|_| rng.random_range(-scale..scale)).collect()
}

/// `n` token ids uniform in `0..vocab`.
pub fn tokens(rng: &mut Pcg64, n: usize, vocab: usize) -> Vec<u32> {
    (0..n).map(|_| rng.random_range(0..vocab as u32)).collect()
}

/// Widens to f64.
pub fn f64s(x: &[f32]) -> Vec<f64> {
    x.iter().map(|&v| f64::from(v)).collect()
}

/// Asserts `|got - want| <= tol * (1 + |want|)` elementwise, naming the first mismatch.
pub fn assert_close(what: &str, got: &[f32], want: &[f64], tol: f64) {
    assert_eq!(got.len(), want.len(), "{what}: lengths differ");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(err <= tol * (1.0 + w.abs()), "{what}[{i}]: got {g}, want {w} (error {err:e})");
    }
}

/// Central finite differences of `f` at `x`, in f64.
pub fn numerical_grad(f: impl Fn(&[f64]) -> f64, x: &[f64]) -> Vec<f64> {
    let mut probe = x.to_vec();
    (0..x.len())
        .map(|i| {
            let h = 1e-6 * x[i].abs().max(1.0);
            probe[i] = x[i] + h;
            let up = f(&probe);
            probe[i] = x[i] - h;
            let down = f(&probe);
            probe[i] = x[i];
            (up - down) / (2.0 * h)
        })
        .collect()
}

/// `sum_i out[i] * w[i]`: the scalar loss whose gradient with respect to `out` is `w`.
pub fn weighted_sum(out: &[f64], w: &[f64]) -> f64 {
    out.iter().zip(w).map(|(o, w)| o * w).sum()
}
