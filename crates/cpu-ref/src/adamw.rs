//! AdamW (decoupled weight decay), as in llm.c and `torch.optim.AdamW`.

use multiversion::multiversion;
use rayon::prelude::*;

/// The hyperparameters of one AdamW update.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWStep {
    /// Learning rate of this step.
    pub lr: f32,
    /// Decay of the first moment.
    pub beta1: f32,
    /// Decay of the second moment.
    pub beta2: f32,
    /// Added to the root of the second moment.
    pub eps: f32,
    /// Decoupled weight decay (0 for tensors that are not decayed).
    pub weight_decay: f32,
    /// 1-based number of this update (for the bias corrections).
    pub t: u32,
    /// Factor applied to every gradient first (gradient clipping), 1 for none.
    pub grad_scale: f32,
}

const CHUNK: usize = 1 << 14;

/// One AdamW update, elementwise:
///
/// ```text
/// g = grad_scale · grad
/// m = beta1 · m + (1 - beta1) · g
/// v = beta2 · v + (1 - beta2) · g²
/// param -= lr · ((m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay · param)
/// ```
///
/// # Panics
/// If the four lengths differ or `t == 0`.
pub fn adamw_update(
    params: &mut [f32],
    grads: &[f32],
    m: &mut [f32],
    v: &mut [f32],
    step: &AdamWStep,
) {
    let n = params.len();
    assert!(grads.len() == n && m.len() == n && v.len() == n, "adamw_update: lengths differ");
    assert!(step.t > 0, "adamw_update: t is 1-based");
    params
        .par_chunks_mut(CHUNK)
        .zip(grads.par_chunks(CHUNK))
        .zip(m.par_chunks_mut(CHUNK).zip(v.par_chunks_mut(CHUNK)))
        .for_each(|((p, g), (m, v))| update_chunk(p, g, m, v, step));
}

#[multiversion(targets = "simd")]
fn update_chunk(params: &mut [f32], grads: &[f32], m: &mut [f32], v: &mut [f32], step: &AdamWStep) {
    let AdamWStep { lr, beta1, beta2, eps, weight_decay, t, grad_scale } = *step;
    let correction1 = 1.0 - beta1.powf(t as f32);
    let correction2 = 1.0 - beta2.powf(t as f32);
    for (((p, &g), m), v) in params.iter_mut().zip(grads).zip(m.iter_mut()).zip(v.iter_mut()) {
        let g = grad_scale * g;
        *m = beta1 * *m + (1.0 - beta1) * g;
        *v = beta2 * *v + (1.0 - beta2) * g * g;
        let m_hat = *m / correction1;
        let v_hat = *v / correction2;
        *p -= lr * (m_hat / (v_hat.sqrt() + eps) + weight_decay * *p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    #[test]
    fn matches_naive_f64_over_several_steps() {
        let mut rng = rng(80);
        let n = 40_000;
        let mut p = uniform(&mut rng, n, 1.0);
        let (mut m, mut v) = (vec![0.0f32; n], vec![0.0f32; n]);
        let (mut p64, mut m64, mut v64) = (f64s(&p), vec![0.0f64; n], vec![0.0f64; n]);
        for t in 1..=3 {
            let g = uniform(&mut rng, n, 1.0);
            let step = AdamWStep {
                lr: 1e-2,
                beta1: 0.9,
                beta2: 0.95,
                eps: 1e-8,
                weight_decay: 0.1,
                t,
                grad_scale: 0.5,
            };
            adamw_update(&mut p, &g, &mut m, &mut v, &step);
            for i in 0..n {
                let g = 0.5 * f64::from(g[i]);
                m64[i] = 0.9 * m64[i] + 0.1 * g;
                v64[i] = 0.95 * v64[i] + 0.05 * g * g;
                let m_hat = m64[i] / (1.0 - 0.9f64.powi(t as i32));
                let v_hat = v64[i] / (1.0 - 0.95f64.powi(t as i32));
                p64[i] -= 1e-2 * (m_hat / (v_hat.sqrt() + 1e-8) + 0.1 * p64[i]);
            }
        }
        assert_close("params", &p, &p64, 1e-5);
        assert_close("m", &m, &m64, 1e-5);
        assert_close("v", &v, &v64, 1e-5);
    }
}
