//! Vectorisation helpers.
//!
//! The workspace builds for baseline x86-64 (SSE2), so binaries run on any x86-64 machine.
//! The hot loops of the reference are functions marked `#[multiversion(targets = "simd")]`:
//! compiled once per instruction set (AVX-512, AVX2+FMA, SSE4.1, baseline) and chosen at run
//! time, so plain loops in them auto-vectorise for the CPU at hand. The math functions here
//! are `#[inline(always)]` and branch-free so loops that call them vectorise too (libm's
//! `expf`/`tanhf` are opaque calls that do not).

/// `e^x` with a relative error below 3e-7 for x in [-87, 88] (Cephes' `expf` polynomial);
/// inputs are clamped to that range, so `exp(-inf)` is about 1.6e-38 rather than 0. NaN stays
/// NaN.
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * std::f32::consts::LOG2_E).round_ties_even();
    let r = x - n * LN2_HI - n * LN2_LO;
    let p = 1.987_569_2e-4;
    let p = p * r + 1.398_199_9e-3;
    let p = p * r + 8.333_452e-3;
    let p = p * r + 4.166_579_6e-2;
    let p = p * r + 1.666_666_5e-1;
    let p = p * r + 0.5;
    let p = p * r * r + r + 1.0;
    p * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// `tanh(x)` as `1 - 2 / (e^{2|x|} + 1)` with the sign of x; absolute error below 2e-7.
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let e = exp(2.0 * x.abs().min(10.0));
    (1.0 - 2.0 / (e + 1.0)).copysign(x)
}

/// `Σ a[i] · b[i]` over the shorter length, in 16 interleaved partial sums.
#[inline(always)]
pub(crate) fn dot(a: &[f32], b: &[f32]) -> f32 {
    const LANES: usize = 16;
    let n = a.len().min(b.len());
    let (a, b) = (&a[..n], &b[..n]);
    let mut acc = [0.0f32; LANES];
    for (x, y) in a.chunks_exact(LANES).zip(b.chunks_exact(LANES)) {
        for i in 0..LANES {
            acc[i] += x[i] * y[i];
        }
    }
    let tail = n - n % LANES;
    let rest: f32 = a[tail..].iter().zip(&b[tail..]).map(|(x, y)| x * y).sum();
    acc.iter().sum::<f32>() + rest
}

/// `Σ f(x[i])` accumulated in f64 over 8 interleaved partial sums.
#[inline(always)]
pub(crate) fn sum_f64(x: &[f32], f: impl Fn(f32) -> f32) -> f64 {
    const LANES: usize = 8;
    let mut acc = [0.0f64; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for i in 0..LANES {
            acc[i] += f64::from(f(chunk[i]));
        }
    }
    acc.iter().sum::<f64>() + rest.iter().map(|&v| f64::from(f(v))).sum::<f64>()
}

/// The largest element (`-inf` for none), over 16 interleaved partial maxima.
#[inline(always)]
pub(crate) fn max(x: &[f32]) -> f32 {
    const LANES: usize = 16;
    let mut acc = [f32::NEG_INFINITY; LANES];
    let chunks = x.chunks_exact(LANES);
    let rest = chunks.remainder();
    for chunk in chunks {
        for i in 0..LANES {
            acc[i] = acc[i].max(chunk[i]);
        }
    }
    rest.iter().chain(&acc).fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exp_is_accurate() {
        let mut worst = 0.0f64;
        for i in 0..=200_000 {
            let x = -87.0 + 175.0 * i as f32 / 200_000.0;
            let want = f64::from(x).exp();
            worst = worst.max(((f64::from(exp(x)) - want) / want).abs());
        }
        assert!(worst < 3e-7, "worst relative error {worst:e}");
        assert!(exp(f32::NAN).is_nan());
        assert!(exp(f32::NEG_INFINITY) < 1e-37);
        assert!(exp(1000.0).is_finite());
    }

    #[test]
    fn tanh_is_accurate() {
        for i in -100_000..=100_000 {
            let x = i as f32 * 1e-4;
            let err = (f64::from(tanh(x)) - f64::from(x).tanh()).abs();
            assert!(err < 2e-7, "tanh({x}) error {err:e}");
        }
        assert_eq!(tanh(50.0), 1.0);
        assert_eq!(tanh(-50.0), -1.0);
        assert_eq!(tanh(0.0), 0.0);
    }

    #[test]
    fn reductions_match_naive() {
        let x: Vec<f32> = (0..1003).map(|i| ((i * 37) % 101) as f32 - 50.0).collect();
        let y: Vec<f32> = (0..1003).map(|i| ((i * 11) % 7) as f32).collect();
        let naive: f64 = x.iter().zip(&y).map(|(a, b)| f64::from(a * b)).sum();
        assert_eq!(f64::from(dot(&x, &y)), naive);
        assert_eq!(sum_f64(&x, |v| v * v), x.iter().map(|&v| f64::from(v * v)).sum::<f64>());
        assert_eq!(max(&x), 50.0);
        assert_eq!(max(&[]), f32::NEG_INFINITY);
    }
}
