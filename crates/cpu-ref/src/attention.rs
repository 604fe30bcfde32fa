//! Causal multi-head self-attention from the fused qkv activation.
//!
//! `qkv` is (b, t, 3c): each row is `[q | k | v]`, each of c channels, and head h owns
//! channels `h*hs .. (h+1)*hs` of each part (hs = c / nh). The scores are scaled by
//! `1 / sqrt(hs)`; position t attends to positions `0..=t`.

use crate::simd::{dot, exp};
use multiversion::multiversion;
use rayon::prelude::*;

fn check_shapes(op: &str, qkv: usize, att: usize, b: usize, t: usize, c: usize, nh: usize) {
    assert!(nh > 0 && c.is_multiple_of(nh), "{op}: c = {c} is not a multiple of nh = {nh}");
    assert_eq!(qkv, b * t * 3 * c, "{op}: qkv must be b×t×3c");
    assert_eq!(att, b * nh * t * t, "{op}: att must be b×nh×t×t");
}

/// Forward of causal attention.
///
/// - `out`: (b, t, c), written: head h of row t is `Σ_{t2<=t} att[b,h,t,t2] · v[t2]`
/// - `att`: (b, nh, t, t), written: the softmax probabilities, 0 above the diagonal
/// - `qkv`: (b, t, 3c)
///
/// # Panics
/// If a length does not match the shapes or `nh` does not divide `c`.
pub fn attention_forward(
    out: &mut [f32],
    att: &mut [f32],
    qkv: &[f32],
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) {
    check_shapes("attention_forward", qkv.len(), att.len(), b, t, c, nh);
    assert_eq!(out.len(), b * t * c, "attention_forward: out must be b×t×c");
    if b * t == 0 {
        return;
    }
    let hs = c / nh;
    out.par_chunks_mut(t * c).zip(att.par_chunks_mut(nh * t * t)).enumerate().for_each(
        |(bi, (out_b, att_b))| {
            let qkv_b = &qkv[bi * t * 3 * c..][..t * 3 * c];
            let heads: Vec<Vec<f32>> = att_b
                .par_chunks_mut(t * t)
                .enumerate()
                .map(|(h, att_h)| head_forward(att_h, qkv_b, h, t, c, hs))
                .collect();
            for (h, y) in heads.iter().enumerate() {
                for t1 in 0..t {
                    out_b[t1 * c + h * hs..][..hs].copy_from_slice(&y[t1 * hs..][..hs]);
                }
            }
        },
    );
}

/// Head `h` of one sequence (`qkv_b`: (t, 3c)): fills `att_h` (t, t) and returns the head's
/// output (t, hs).
#[multiversion(targets = "simd")]
fn head_forward(
    att_h: &mut [f32],
    qkv_b: &[f32],
    h: usize,
    t: usize,
    c: usize,
    hs: usize,
) -> Vec<f32> {
    let scale = 1.0 / (hs as f32).sqrt();
    let part = |ti: usize, p: usize| &qkv_b[ti * 3 * c + p * c + h * hs..][..hs];
    let mut y = vec![0.0f32; t * hs];
    for t1 in 0..t {
        let q = part(t1, 0);
        let row = &mut att_h[t1 * t..][..t];
        let mut max = f32::NEG_INFINITY;
        for (t2, score) in row[..=t1].iter_mut().enumerate() {
            *score = dot(q, part(t2, 1)) * scale;
            max = max.max(*score);
        }
        let mut sum = 0.0f32;
        for p in &mut row[..=t1] {
            *p = exp(*p - max);
            sum += *p;
        }
        let inv = 1.0 / sum;
        row[..=t1].iter_mut().for_each(|p| *p *= inv);
        row[t1 + 1..].fill(0.0);
        let y_row = &mut y[t1 * hs..][..hs];
        for (t2, &p) in row[..=t1].iter().enumerate() {
            y_row.iter_mut().zip(part(t2, 2)).for_each(|(y, v)| *y += p * v);
        }
    }
    y
}

/// Backward of causal attention.
///
/// - `dqkv`: (b, t, 3c), written: the gradients of q, k and v
/// - `dout`: (b, t, c); `qkv`: (b, t, 3c); `att`: (b, nh, t, t) from the forward
///
/// The softmax backward uses `dscore = p · (dp - Σ p · dp)`, the O(t) form of the Jacobian.
///
/// # Panics
/// If a length does not match the shapes or `nh` does not divide `c`.
#[allow(
    clippy::too_many_arguments,
    reason = "llm.c's signature (buffers, then explicit shapes), kept for side-by-side reading"
)]
pub fn attention_backward(
    dqkv: &mut [f32],
    dout: &[f32],
    qkv: &[f32],
    att: &[f32],
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) {
    check_shapes("attention_backward", qkv.len(), att.len(), b, t, c, nh);
    assert_eq!(dqkv.len(), qkv.len(), "attention_backward: dqkv must be b×t×3c");
    assert_eq!(dout.len(), b * t * c, "attention_backward: dout must be b×t×c");
    if b * t == 0 {
        return;
    }
    let hs = c / nh;
    dqkv.par_chunks_mut(t * 3 * c).enumerate().for_each(|(bi, dqkv_b)| {
        let qkv_b = &qkv[bi * t * 3 * c..][..t * 3 * c];
        let dout_b = &dout[bi * t * c..][..t * c];
        let heads: Vec<Vec<f32>> = (0..nh)
            .into_par_iter()
            .map(|h| {
                let att_h = &att[(bi * nh + h) * t * t..][..t * t];
                head_backward(dout_b, qkv_b, att_h, h, t, c, hs)
            })
            .collect();
        for (h, grad) in heads.iter().enumerate() {
            for t1 in 0..t {
                for part in 0..3 {
                    dqkv_b[t1 * 3 * c + part * c + h * hs..][..hs]
                        .copy_from_slice(&grad[(t1 * 3 + part) * hs..][..hs]);
                }
            }
        }
    });
}

/// Head `h` of one sequence: returns the gradients of its q, k and v as (t, 3, hs).
#[multiversion(targets = "simd")]
fn head_backward(
    dout_b: &[f32],
    qkv_b: &[f32],
    att_h: &[f32],
    h: usize,
    t: usize,
    c: usize,
    hs: usize,
) -> Vec<f32> {
    let scale = 1.0 / (hs as f32).sqrt();
    let part = |ti: usize, p: usize| &qkv_b[ti * 3 * c + p * c + h * hs..][..hs];
    let mut grad = vec![0.0f32; t * 3 * hs];
    let mut datt = vec![0.0f32; t];
    for t1 in 0..t {
        let p = &att_h[t1 * t..][..=t1];
        let dy = &dout_b[t1 * c + h * hs..][..hs];
        for t2 in 0..=t1 {
            datt[t2] = dot(dy, part(t2, 2));
            let dv = &mut grad[(t2 * 3 + 2) * hs..][..hs];
            dv.iter_mut().zip(dy).for_each(|(d, g)| *d += p[t2] * g);
        }
        let pdp = dot(p, &datt[..=t1]);
        let q = part(t1, 0);
        for t2 in 0..=t1 {
            let dscore = p[t2] * (datt[t2] - pdp) * scale;
            let dq = &mut grad[t1 * 3 * hs..][..hs];
            dq.iter_mut().zip(part(t2, 1)).for_each(|(d, k)| *d += dscore * k);
            let dk = &mut grad[(t2 * 3 + 1) * hs..][..hs];
            dk.iter_mut().zip(q).for_each(|(d, q)| *d += dscore * q);
        }
    }
    grad
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    /// Returns (out, att) in f64, written as plainly as possible.
    fn naive_forward(qkv: &[f64], b: usize, t: usize, c: usize, nh: usize) -> (Vec<f64>, Vec<f64>) {
        let hs = c / nh;
        let mut out = vec![0.0; b * t * c];
        let mut att = vec![0.0; b * nh * t * t];
        let at = |bi: usize, ti: usize, part: usize, h: usize, i: usize| {
            qkv[(bi * t + ti) * 3 * c + part * c + h * hs + i]
        };
        for bi in 0..b {
            for h in 0..nh {
                for t1 in 0..t {
                    let scores: Vec<f64> = (0..=t1)
                        .map(|t2| {
                            (0..hs).map(|i| at(bi, t1, 0, h, i) * at(bi, t2, 1, h, i)).sum::<f64>()
                                / (hs as f64).sqrt()
                        })
                        .collect();
                    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                    let sum: f64 = scores.iter().map(|s| (s - max).exp()).sum();
                    for t2 in 0..=t1 {
                        let p = (scores[t2] - max).exp() / sum;
                        att[((bi * nh + h) * t + t1) * t + t2] = p;
                        for i in 0..hs {
                            out[(bi * t + t1) * c + h * hs + i] += p * at(bi, t2, 2, h, i);
                        }
                    }
                }
            }
        }
        (out, att)
    }

    #[test]
    fn forward_matches_naive_f64() {
        let mut rng = rng(30);
        // hs = 20 (a 16-lane block and a tail of the vectorised dot product), hs = 4, hs = 64
        for (b, t, c, nh) in [(2, 7, 60, 3), (1, 5, 12, 3), (1, 33, 128, 2)] {
            let qkv = uniform(&mut rng, b * t * 3 * c, 1.5);
            let mut out = vec![f32::NAN; b * t * c];
            let mut att = vec![f32::NAN; b * nh * t * t];
            attention_forward(&mut out, &mut att, &qkv, b, t, c, nh);
            let (want_out, want_att) = naive_forward(&f64s(&qkv), b, t, c, nh);
            assert_close("out", &out, &want_out, 1e-5);
            assert_close("att", &att, &want_att, 1e-5);
        }
    }

    #[test]
    fn backward_matches_finite_differences() {
        let mut rng = rng(31);
        let (b, t, c, nh) = (2, 5, 40, 2);
        let qkv = uniform(&mut rng, b * t * 3 * c, 1.5);
        let dout = uniform(&mut rng, b * t * c, 1.0);
        let mut out = vec![0.0; b * t * c];
        let mut att = vec![0.0; b * nh * t * t];
        attention_forward(&mut out, &mut att, &qkv, b, t, c, nh);
        let mut dqkv = vec![f32::NAN; qkv.len()];
        attention_backward(&mut dqkv, &dout, &qkv, &att, b, t, c, nh);
        let g = f64s(&dout);
        let want =
            numerical_grad(|x| weighted_sum(&naive_forward(x, b, t, c, nh).0, &g), &f64s(&qkv));
        assert_close("dqkv", &dqkv, &want, 1e-5);
    }
}
