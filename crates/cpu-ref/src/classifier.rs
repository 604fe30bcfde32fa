//! Fused classifier: softmax + cross-entropy over the real vocabulary, and the gradient of the
//! loss with respect to the logits, written in place of the logits.
//!
//! The logits are (bt, vp) with vp >= v; columns `v..vp` (the padding that makes the vocab
//! GEMM-friendly) are ignored by the softmax and get a zero gradient.

use crate::simd::{exp, max, sum_f64};
use multiversion::multiversion;
use rayon::prelude::*;

/// Computes per-position losses and overwrites the logits with their gradient.
///
/// - `logits`: (bt, vp), read, then written with `dloss · (softmax(logits[..v]) - onehot)` in
///   columns `..v` and 0 in columns `v..vp`
/// - `losses`: (bt), written: `-ln softmax(logits)[target]`
/// - `targets`: (bt), each `< v`
/// - `dloss`: the gradient of the reduced loss with respect to each position's loss (for the
///   mean over bt positions and `n` accumulation micro-steps: `1 / (bt · n)`)
///
/// The softmax subtracts the row maximum and sums the exponentials in f64.
///
/// # Panics
/// If a length does not match the shapes, `v > vp`, `v == 0`, or a target is `>= v`.
pub fn fused_classifier(
    logits: &mut [f32],
    losses: &mut [f32],
    targets: &[u32],
    dloss: f32,
    bt: usize,
    v: usize,
    vp: usize,
) {
    assert!(0 < v && v <= vp, "fused_classifier: need 0 < v <= vp, got v = {v}, vp = {vp}");
    assert_eq!(logits.len(), bt * vp, "fused_classifier: logits must be bt×vp");
    assert_eq!(losses.len(), bt, "fused_classifier: losses must hold bt values");
    assert_eq!(targets.len(), bt, "fused_classifier: targets must hold bt values");
    logits.par_chunks_mut(vp).zip(losses.par_iter_mut().zip(targets.par_iter())).for_each(
        |(row, (loss, &target))| {
            let target = target as usize;
            assert!(target < v, "fused_classifier: target {target} is not below v = {v}");
            let (real, pad) = row.split_at_mut(v);
            let target_logit = real[target];
            let (max, sum) = softmax_row(real, dloss);
            *loss = (sum.ln() + f64::from(max) - f64::from(target_logit)) as f32;
            real[target] -= dloss;
            pad.fill(0.0);
        },
    );
}

/// Replaces `row` with `scale · softmax(row)`; returns the row's maximum and `Σ exp(x - max)`.
#[multiversion(targets = "simd")]
fn softmax_row(row: &mut [f32], scale: f32) -> (f32, f64) {
    let max = max(row);
    for x in row.iter_mut() {
        *x = exp(*x - max);
    }
    let sum = sum_f64(row, |e| e);
    let factor = (1.0 / sum) as f32 * scale;
    for x in row.iter_mut() {
        *x *= factor;
    }
    (max, sum)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    /// Per-position losses in f64, over the first `v` columns.
    fn naive_losses(logits: &[f64], targets: &[u32], v: usize, vp: usize) -> Vec<f64> {
        logits
            .chunks(vp)
            .zip(targets)
            .map(|(row, &tgt)| {
                let sum: f64 = row[..v].iter().map(|x| x.exp()).sum();
                sum.ln() - row[tgt as usize]
            })
            .collect()
    }

    #[test]
    fn losses_and_gradient_match_f64_and_finite_differences() {
        let mut rng = rng(60);
        let (bt, v, vp) = (6, 19, 24);
        let mut logits = uniform(&mut rng, bt * vp, 4.0);
        let targets = tokens(&mut rng, bt, v);
        let dloss = 1.0 / bt as f32;
        let x64 = f64s(&logits);
        let mut losses = vec![f32::NAN; bt];
        fused_classifier(&mut logits, &mut losses, &targets, dloss, bt, v, vp);
        assert_close("losses", &losses, &naive_losses(&x64, &targets, v, vp), 1e-6);
        let mean = |x: &[f64]| naive_losses(x, &targets, v, vp).iter().sum::<f64>() / bt as f64;
        let want = numerical_grad(mean, &x64);
        assert_close("dlogits", &logits, &want, 1e-6);
        for row in logits.chunks(vp) {
            assert!(row[v..].iter().all(|&g| g == 0.0), "padded columns must get zero gradient");
        }
    }

    #[test]
    fn large_logits_do_not_overflow() {
        let (v, vp) = (3, 4);
        let mut logits = vec![1000.0, 999.0, -1000.0, 12345.0];
        let mut losses = [0.0];
        fused_classifier(&mut logits, &mut losses, &[1], 1.0, 1, v, vp);
        let want = (1.0f64 + (-1.0f64).exp()).ln() + 1.0;
        assert!((f64::from(losses[0]) - want).abs() < 1e-5, "loss {} != {want}", losses[0]);
        assert!(logits.iter().all(|g| g.is_finite()));
    }
}
