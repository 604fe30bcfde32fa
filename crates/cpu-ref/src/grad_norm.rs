//! Global L2 norm of the gradients (for clipping).

use crate::precision::Element;
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

/// The result of the GPU's gradient-norm kernels.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GradNorm {
    /// `sqrt(Σ x[i]²)`, rounded to f32.
    pub norm: f32,
    /// Whether any element is ±inf or NaN.
    pub nonfinite: bool,
}

/// The GPU's gradient norm in the kernels' exact order (`kernel_abi::grad_norm`): squares added
/// in f32 per thread over its chunks, f64 across threads (warp butterfly, then warps in
/// order) and across blocks; it reproduces the kernels' bits.
pub fn grad_norm_kernel_order<T: Element>(x: &[T]) -> GradNorm {
    use kernel_abi::grad_norm::{BLOCK_THREADS, CHUNK, partial_blocks};
    let (threads_per_block, chunk) = (BLOCK_THREADS as usize, CHUNK as usize);
    let blocks = partial_blocks(x.len() as u64) as usize;
    let threads = blocks * threads_per_block;
    let whole_chunks = x.len() / chunk;
    let partial = |thread: usize| -> (f64, bool) {
        let (mut sum, mut nonfinite) = (0.0f32, false);
        let mut add = |v: T| {
            let v = v.to_f32();
            sum += v * v;
            nonfinite |= !v.is_finite();
        };
        let mut c = thread;
        while c < whole_chunks {
            x[c * chunk..(c + 1) * chunk].iter().for_each(|&v| add(v));
            c += threads;
        }
        if c == whole_chunks {
            x[whole_chunks * chunk..].iter().for_each(|&v| add(v));
        }
        (f64::from(sum), nonfinite)
    };
    let block_partials: Vec<(f64, bool)> = (0..blocks)
        .into_par_iter()
        .map(|b| block_sum((0..threads_per_block).map(|t| partial(b * threads_per_block + t))))
        .collect();
    let finish = (0..threads_per_block).map(|t| {
        block_partials
            .iter()
            .skip(t)
            .step_by(threads_per_block)
            .fold((0.0f64, false), |(sum, flag), &(s, f)| (sum + s, flag | f))
    });
    let (total, nonfinite) = block_sum(finish);
    GradNorm { norm: total.sqrt() as f32, nonfinite }
}

/// A block's f64 sum as the kernels form it: a butterfly within each warp of 32 (whose
/// result is the pairwise tree below, IEEE addition being commutative), then the warp sums
/// in order starting from 0.
fn block_sum(values: impl Iterator<Item = (f64, bool)>) -> (f64, bool) {
    let values: Vec<(f64, bool)> = values.collect();
    values.chunks(32).fold((0.0, false), |(total, any), warp| {
        let mut lanes = warp.to_vec();
        let mut width = 16;
        while width > 0 {
            for i in 0..width {
                lanes[i] = (lanes[i].0 + lanes[i + width].0, lanes[i].1 | lanes[i + width].1);
            }
            width /= 2;
        }
        (total + lanes[0].0, any | lanes[0].1)
    })
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

    #[test]
    fn kernel_order_matches_naive_f64_and_flags_nonfinite() {
        let mut rng = rng(71);
        for n in [0, 1, 7, 8, 9, 2048 * 3 + 5, 100_003, 3_000_001] {
            let mut x = uniform(&mut rng, n, 2.0);
            let want = f64s(&x).iter().map(|x| x * x).sum::<f64>().sqrt();
            let got = grad_norm_kernel_order(&x);
            assert_close(&format!("norm n={n}"), &[got.norm], &[want], 1e-6);
            assert!(!got.nonfinite);
            if n > 0 {
                for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
                    x[n / 2] = bad;
                    assert!(grad_norm_kernel_order(&x).nonfinite, "n={n}: {bad} not flagged");
                }
            }
        }
        let halves: Vec<half::f16> = (0..1000).map(|i| half::f16::from_f32(i as f32)).collect();
        let want = (0..1000).map(|i| f64::from(i * i)).sum::<f64>().sqrt();
        assert_close("f16", &[grad_norm_kernel_order(&halves).norm], &[want], 1e-7);
    }
}
