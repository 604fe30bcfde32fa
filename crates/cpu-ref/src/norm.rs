//! Global L2 norm of the gradients (for clipping).

use crate::simd::sum_f64;
use multiversion::multiversion;
use rayon::prelude::*;

const CHUNK: usize = 1 << 15;

/// `sqrt(Σ_tensors Σ_i x[i]²)`: squares in f32, sums in f64.
///
/// The sum runs over fixed chunks whose partial sums are added in order, so the result does
/// not depend on the thread count or scheduling.
pub fn global_norm(tensors: &[&[f32]]) -> f32 {
    let partials: Vec<f64> = tensors
        .iter()
        .flat_map(|t| t.chunks(CHUNK))
        .collect::<Vec<_>>()
        .par_iter()
        .map(|chunk| sum_of_squares(chunk))
        .collect();
    partials.iter().sum::<f64>().sqrt() as f32
}

#[multiversion(targets = "simd")]
fn sum_of_squares(x: &[f32]) -> f64 {
    sum_f64(x, |v| v * v)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn matches_naive_f64() {
        let mut rng = rng(70);
        let a = uniform(&mut rng, 100_003, 1.0);
        let b = uniform(&mut rng, 17, 30.0);
        let want = f64s(&a).iter().chain(&f64s(&b)).map(|x| x * x).sum::<f64>().sqrt();
        assert_close("norm", &[global_norm(&[&a, &b])], &[want], 1e-6);
        assert_eq!(global_norm(&[]), 0.0);
    }
}
