//! Token + position embedding: `out[b, t] = wte[tokens[b, t]] + wpe[t]`.
//!
//! Generic over the activation precision ([`Element`]): sums are taken in f32 and rounded
//! once; the trainer's f32 path is the `T = f32` instance.

use crate::precision::Element;
use rayon::prelude::*;

/// Forward of the encoder: `out = round(wte[token] + wpe[pos])`, the sum in f32.
///
/// - `out`: (b, t, c), written
/// - `tokens`: (b, t), each `< wte.len() / c`
/// - `wte`: (vp, c) token embeddings; `wpe`: (max_t, c) position embeddings, `max_t >= t`
///
/// # Panics
/// If a length does not match the shapes or a token is out of range.
pub fn encoder_forward<T: Element>(
    out: &mut [T],
    tokens: &[u32],
    wte: &[T],
    wpe: &[T],
    b: usize,
    t: usize,
    c: usize,
) {
    assert_eq!(out.len(), b * t * c, "encoder_forward: out must be b×t×c");
    assert_eq!(tokens.len(), b * t, "encoder_forward: tokens must be b×t");
    assert!(wpe.len() >= t * c, "encoder_forward: wpe holds fewer than t positions");
    let vocab = wte.len() / c.max(1);
    out.par_chunks_mut(c.max(1)).zip(tokens.par_iter()).enumerate().for_each(|(row, (o, &tok))| {
        let tok = tok as usize;
        assert!(tok < vocab, "encoder_forward: token {tok} is outside the {vocab}-row wte");
        let pos = row % t;
        let (e, p) = (&wte[tok * c..][..c], &wpe[pos * c..][..c]);
        for ((o, e), p) in o.iter_mut().zip(e).zip(p) {
            *o = T::from_f32(e.to_f32() + p.to_f32());
        }
    });
}

/// Backward of the encoder, accumulating into the embedding gradients.
///
/// - `dwte`: (vp, c), `dwte[tokens[b, t]] += dout[b, t]`
/// - `dwpe`: (max_t, c), `dwpe[t] += dout[b, t]` (rows `t..` untouched)
/// - `dout`: (b, t, c), widened to f32 exactly; `tokens`: (b, t)
///
/// Each element of `dwte` and `dwpe` starts from its current value and receives its
/// positions one at a time in increasing (b, t) order, so the result is deterministic and
/// equal to a sequential loop (the order the GPU kernel follows too).
///
/// # Panics
/// If a length does not match the shapes or a token is out of range.
pub fn encoder_backward<T: Element>(
    dwte: &mut [f32],
    dwpe: &mut [f32],
    dout: &[T],
    tokens: &[u32],
    b: usize,
    t: usize,
    c: usize,
) {
    assert_eq!(dout.len(), b * t * c, "encoder_backward: dout must be b×t×c");
    assert_eq!(tokens.len(), b * t, "encoder_backward: tokens must be b×t");
    assert!(dwpe.len() >= t * c, "encoder_backward: dwpe holds fewer than t positions");
    let c = c.max(1);
    let vocab = dwte.len() / c;
    // Counting sort of the positions by token: `positions[starts[v]..starts[v + 1]]` are the
    // rows of `dout` that hold token v, in increasing order.
    let mut starts = vec![0usize; vocab + 1];
    for &tok in tokens {
        assert!(
            (tok as usize) < vocab,
            "encoder_backward: token {tok} is outside the {vocab}-row dwte"
        );
        starts[tok as usize + 1] += 1;
    }
    for v in 0..vocab {
        starts[v + 1] += starts[v];
    }
    let mut fill = starts.clone();
    let mut positions = vec![0usize; tokens.len()];
    for (row, &tok) in tokens.iter().enumerate() {
        positions[fill[tok as usize]] = row;
        fill[tok as usize] += 1;
    }
    dwte.par_chunks_mut(c).enumerate().for_each(|(v, grad)| {
        for &row in &positions[starts[v]..starts[v + 1]] {
            for (g, d) in grad.iter_mut().zip(&dout[row * c..][..c]) {
                *g += d.to_f32();
            }
        }
    });
    dwpe[..t * c].par_chunks_mut(c).enumerate().for_each(|(pos, grad)| {
        for bi in 0..b {
            for (g, d) in grad.iter_mut().zip(&dout[(bi * t + pos) * c..][..c]) {
                *g += d.to_f32();
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;
    use half::{bf16, f16};

    fn naive_forward(
        tokens: &[u32],
        wte: &[f64],
        wpe: &[f64],
        b: usize,
        t: usize,
        c: usize,
    ) -> Vec<f64> {
        let mut out = vec![0.0; b * t * c];
        for bi in 0..b {
            for ti in 0..t {
                let tok = tokens[bi * t + ti] as usize;
                for i in 0..c {
                    out[(bi * t + ti) * c + i] = wte[tok * c + i] + wpe[ti * c + i];
                }
            }
        }
        out
    }

    #[test]
    fn forward_matches_naive_f64() {
        let mut rng = rng(10);
        let (b, t, c, vp, max_t) = (3, 5, 7, 11, 6);
        let tokens = tokens(&mut rng, b * t, vp);
        let wte = uniform(&mut rng, vp * c, 1.0);
        let wpe = uniform(&mut rng, max_t * c, 1.0);
        let mut out = vec![f32::NAN; b * t * c];
        encoder_forward(&mut out, &tokens, &wte, &wpe, b, t, c);
        let want = naive_forward(&tokens, &f64s(&wte), &f64s(&wpe), b, t, c);
        assert_close("out", &out, &want, 1e-7);
    }

    #[test]
    fn backward_matches_finite_differences_with_repeated_tokens() {
        let mut rng = rng(11);
        let (b, t, c, vp, max_t) = (2, 6, 5, 4, 7);
        let tokens = tokens(&mut rng, b * t, vp - 1); // the last row gets no gradient
        let wte = uniform(&mut rng, vp * c, 1.0);
        let wpe = uniform(&mut rng, max_t * c, 1.0);
        let dout = uniform(&mut rng, b * t * c, 1.0);
        let dwte0 = uniform(&mut rng, vp * c, 1.0);
        let dwpe0 = uniform(&mut rng, max_t * c, 1.0);
        let (mut dwte, mut dwpe) = (dwte0.clone(), dwpe0.clone());
        encoder_backward(&mut dwte, &mut dwpe, &dout, &tokens, b, t, c);

        let (wte64, wpe64, g) = (f64s(&wte), f64s(&wpe), f64s(&dout));
        let plus = |d: Vec<f64>, d0: &[f32]| -> Vec<f64> {
            d.iter().zip(d0).map(|(d, &d0)| d + f64::from(d0)).collect()
        };
        let want_dwte = numerical_grad(
            |x| weighted_sum(&naive_forward(&tokens, x, &wpe64, b, t, c), &g),
            &wte64,
        );
        let want_dwpe = numerical_grad(
            |x| weighted_sum(&naive_forward(&tokens, &wte64, x, b, t, c), &g),
            &wpe64,
        );
        assert_close("dwte", &dwte, &plus(want_dwte, &dwte0), 1e-6);
        assert_close("dwpe", &dwpe, &plus(want_dwpe, &dwpe0), 1e-6);
    }

    #[test]
    fn half_forward_rounds_the_f32_sum_once() {
        let mut rng = rng(12);
        let (b, t, c, vp) = (2, 3, 9, 5);
        let tokens = tokens(&mut rng, b * t, vp);
        let wte: Vec<bf16> =
            uniform(&mut rng, vp * c, 1.0).into_iter().map(bf16::from_f32).collect();
        let wpe: Vec<bf16> =
            uniform(&mut rng, t * c, 1.0).into_iter().map(bf16::from_f32).collect();
        let mut out = vec![bf16::NAN; b * t * c];
        encoder_forward(&mut out, &tokens, &wte, &wpe, b, t, c);
        let widen = |x: &[bf16]| -> Vec<f64> { x.iter().map(|v| f64::from(v.to_f32())).collect() };
        let want = naive_forward(&tokens, &widen(&wte), &widen(&wpe), b, t, c);
        for (o, w) in out.iter().zip(&want) {
            // One rounding of the f32 sum: equal to rounding the exact sum wherever the f32
            // sum of two bf16 is exact, which holds for every element of this seed.
            assert_eq!(*o, bf16::from_f64(*w));
        }
    }

    #[test]
    fn half_backward_equals_f32_backward_of_the_widened_gradient() {
        let mut rng = rng(13);
        let (b, t, c, vp, max_t) = (3, 4, 6, 3, 5);
        let tokens = tokens(&mut rng, b * t, vp);
        let dout: Vec<f16> =
            uniform(&mut rng, b * t * c, 1.0).into_iter().map(f16::from_f32).collect();
        let wide: Vec<f32> = dout.iter().map(|v| v.to_f32()).collect();
        let (dwte0, dwpe0) = (uniform(&mut rng, vp * c, 1.0), uniform(&mut rng, max_t * c, 1.0));
        let (mut dwte, mut dwpe) = (dwte0.clone(), dwpe0.clone());
        encoder_backward(&mut dwte, &mut dwpe, &dout, &tokens, b, t, c);
        let (mut want_dwte, mut want_dwpe) = (dwte0, dwpe0);
        encoder_backward(&mut want_dwte, &mut want_dwpe, &wide, &tokens, b, t, c);
        assert_eq!(dwte, want_dwte);
        assert_eq!(dwpe, want_dwpe);
    }
}
