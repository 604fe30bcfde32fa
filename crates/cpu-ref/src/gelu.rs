//! GELU, tanh approximation (GPT-2's `gelu_new`):
//! `gelu(x) = 0.5 x (1 + tanh(sqrt(2/π) (x + 0.044715 x³)))`, with a vectorisable tanh
//! (absolute error below 2e-7).

use crate::simd::tanh;
use multiversion::multiversion;
use rayon::prelude::*;

const SQRT_2_OVER_PI: f32 = kernel_abi::gelu::SQRT_2_OVER_PI as f32;
const CUBIC: f32 = kernel_abi::gelu::CUBIC as f32;
const CHUNK: usize = 1 << 14;

/// Forward of GELU: `out[i] = gelu(inp[i])`.
///
/// # Panics
/// If the lengths differ.
pub fn gelu_forward(out: &mut [f32], inp: &[f32]) {
    assert_eq!(out.len(), inp.len(), "gelu_forward: out and inp lengths differ");
    out.par_chunks_mut(CHUNK).zip(inp.par_chunks(CHUNK)).for_each(|(o, x)| forward_chunk(o, x));
}

#[multiversion(targets = "simd")]
fn forward_chunk(out: &mut [f32], inp: &[f32]) {
    for (o, &x) in out.iter_mut().zip(inp) {
        *o = 0.5 * x * (1.0 + tanh(SQRT_2_OVER_PI * (x + CUBIC * x * x * x)));
    }
}

/// Backward of GELU: `dinp[i] = gelu'(inp[i]) · dout[i]`, written.
///
/// # Panics
/// If the lengths differ.
pub fn gelu_backward(dinp: &mut [f32], inp: &[f32], dout: &[f32]) {
    assert_eq!(dinp.len(), inp.len(), "gelu_backward: dinp and inp lengths differ");
    assert_eq!(dout.len(), inp.len(), "gelu_backward: dout and inp lengths differ");
    dinp.par_chunks_mut(CHUNK)
        .zip(inp.par_chunks(CHUNK).zip(dout.par_chunks(CHUNK)))
        .for_each(|(d, (x, g))| backward_chunk(d, x, g));
}

/// [`gelu_backward`] in place: `grad[i] = gelu'(inp[i]) · grad[i]` (the same arithmetic).
///
/// # Panics
/// If the lengths differ.
pub fn gelu_backward_in_place(grad: &mut [f32], inp: &[f32]) {
    assert_eq!(grad.len(), inp.len(), "gelu_backward_in_place: grad and inp lengths differ");
    grad.par_chunks_mut(CHUNK)
        .zip(inp.par_chunks(CHUNK))
        .for_each(|(g, x)| backward_in_place_chunk(g, x));
}

/// `gelu'(x)`, llm.c's local gradient.
#[inline(always)]
fn local_grad(x: f32) -> f32 {
    let th = tanh(SQRT_2_OVER_PI * (x + CUBIC * x * x * x));
    let sech2 = 1.0 - th * th;
    0.5 * (1.0 + th) + 0.5 * x * sech2 * SQRT_2_OVER_PI * (1.0 + 3.0 * CUBIC * x * x)
}

#[multiversion(targets = "simd")]
fn backward_chunk(dinp: &mut [f32], inp: &[f32], dout: &[f32]) {
    for ((d, &x), &g) in dinp.iter_mut().zip(inp).zip(dout) {
        *d = local_grad(x) * g;
    }
}

#[multiversion(targets = "simd")]
fn backward_in_place_chunk(grad: &mut [f32], inp: &[f32]) {
    for (g, &x) in grad.iter_mut().zip(inp) {
        *g *= local_grad(x);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn naive(x: f64) -> f64 {
        0.5 * x * (1.0 + ((2.0 / std::f64::consts::PI).sqrt() * (x + 0.044715 * x.powi(3))).tanh())
    }

    #[test]
    fn forward_matches_naive_f64() {
        let mut rng = rng(40);
        let mut x = uniform(&mut rng, 1001, 6.0);
        x.extend([0.0, -20.0, 20.0, 1e-3]);
        let mut out = vec![f32::NAN; x.len()];
        gelu_forward(&mut out, &x);
        let want: Vec<f64> = f64s(&x).into_iter().map(naive).collect();
        assert_close("gelu", &out, &want, 1e-6);
    }

    #[test]
    fn backward_matches_finite_differences() {
        let mut rng = rng(41);
        let x = uniform(&mut rng, 300, 5.0);
        let dout = uniform(&mut rng, 300, 1.0);
        let mut dinp = vec![f32::NAN; x.len()];
        gelu_backward(&mut dinp, &x, &dout);
        let g = f64s(&dout);
        let want = numerical_grad(
            |x| weighted_sum(&x.iter().map(|&v| naive(v)).collect::<Vec<_>>(), &g),
            &f64s(&x),
        );
        assert_close("dinp", &dinp, &want, 1e-5);
    }
}
