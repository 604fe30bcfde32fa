//! Layer normalisation over the channel dimension (`nn.LayerNorm(c)`, eps 1e-5).

use crate::gemm::grouped_sum;
use rayon::prelude::*;

/// The epsilon GPT-2's layernorms add to the variance.
pub const LAYERNORM_EPS: f32 = kernel_abi::layernorm::EPS;

/// Forward of layernorm, saving the statistics the backward needs.
///
/// - `out`: (bt, c), written: `(inp - mean) * rstd * weight + bias`
/// - `mean`, `rstd`: (bt), written: the row mean and `1 / sqrt(var + eps)` (biased variance)
/// - `inp`: (bt, c); `weight`, `bias`: (c)
///
/// # Panics
/// If a length does not match the shapes.
#[allow(
    clippy::too_many_arguments,
    reason = "llm.c's signature (buffers, then explicit shapes), kept for side-by-side reading"
)]
pub fn layernorm_forward(
    out: &mut [f32],
    mean: &mut [f32],
    rstd: &mut [f32],
    inp: &[f32],
    weight: &[f32],
    bias: &[f32],
    bt: usize,
    c: usize,
) {
    assert_eq!(out.len(), bt * c, "layernorm_forward: out must be bt×c");
    assert_eq!(inp.len(), bt * c, "layernorm_forward: inp must be bt×c");
    assert_eq!(mean.len(), bt, "layernorm_forward: mean must hold bt values");
    assert_eq!(rstd.len(), bt, "layernorm_forward: rstd must hold bt values");
    assert_eq!(weight.len(), c, "layernorm_forward: weight must hold c values");
    assert_eq!(bias.len(), c, "layernorm_forward: bias must hold c values");
    let c = c.max(1);
    out.par_chunks_mut(c)
        .zip(inp.par_chunks(c))
        .zip(mean.par_iter_mut().zip(rstd.par_iter_mut()))
        .for_each(|((o, x), (m, s))| {
            let n = c as f32;
            let mu = x.iter().sum::<f32>() / n;
            let var = x.iter().map(|v| (v - mu) * (v - mu)).sum::<f32>() / n;
            let r = 1.0 / (var + LAYERNORM_EPS).sqrt();
            for (((o, x), w), b) in o.iter_mut().zip(x).zip(weight).zip(bias) {
                *o = (x - mu) * r * w + b;
            }
            *m = mu;
            *s = r;
        });
}

/// Backward of layernorm.
///
/// - `dinp`: (bt, c), accumulated: `dinp += rstd * (g - mean(g) - norm * mean(g * norm))`
///   where `g = dout * weight` and `norm = (inp - mean) * rstd`. Accumulating lets the
///   trainer add the layernorm's gradient straight into the residual-stream gradient.
/// - `dweight`, `dbias`: (c), accumulated: `Σ_r dout * norm` and `Σ_r dout` (in row order)
/// - `dout`, `inp`: (bt, c); `weight`: (c); `mean`, `rstd`: (bt) from the forward
///
/// # Panics
/// If a length does not match the shapes.
#[allow(
    clippy::too_many_arguments,
    reason = "llm.c's signature (buffers, then explicit shapes), kept for side-by-side reading"
)]
pub fn layernorm_backward(
    dinp: &mut [f32],
    dweight: &mut [f32],
    dbias: &mut [f32],
    dout: &[f32],
    inp: &[f32],
    weight: &[f32],
    mean: &[f32],
    rstd: &[f32],
    bt: usize,
    c: usize,
) {
    for (name, len) in [("dinp", dinp.len()), ("dout", dout.len()), ("inp", inp.len())] {
        assert_eq!(len, bt * c, "layernorm_backward: {name} must be bt×c");
    }
    for (name, len) in
        [("dweight", dweight.len()), ("dbias", dbias.len()), ("weight", weight.len())]
    {
        assert_eq!(len, c, "layernorm_backward: {name} must hold c values");
    }
    assert_eq!(mean.len(), bt, "layernorm_backward: mean must hold bt values");
    assert_eq!(rstd.len(), bt, "layernorm_backward: rstd must hold bt values");
    let c = c.max(1);
    dinp.par_chunks_mut(c).enumerate().for_each(|(r, di)| {
        let (x, g) = (&inp[r * c..][..c], &dout[r * c..][..c]);
        let (mu, rs) = (mean[r], rstd[r]);
        let mut g_mean = 0.0f32;
        let mut g_norm_mean = 0.0f32;
        for ((x, g), w) in x.iter().zip(g).zip(weight) {
            let norm = (x - mu) * rs;
            g_mean += w * g;
            g_norm_mean += w * g * norm;
        }
        g_mean /= c as f32;
        g_norm_mean /= c as f32;
        for (((di, x), g), w) in di.iter_mut().zip(x).zip(g).zip(weight) {
            let norm = (x - mu) * rs;
            *di += rs * (w * g - g_mean - norm * g_norm_mean);
        }
    });
    const COLS: usize = 32;
    dweight.par_chunks_mut(COLS).zip(dbias.par_chunks_mut(COLS)).enumerate().for_each(
        |(chunk, (dw, db))| {
            let c0 = chunk * COLS;
            for r in 0..bt {
                let (x, g) = (&inp[r * c + c0..][..dw.len()], &dout[r * c + c0..][..dw.len()]);
                let (mu, rs) = (mean[r], rstd[r]);
                for (((dw, db), x), g) in dw.iter_mut().zip(db.iter_mut()).zip(x).zip(g) {
                    *dw += (x - mu) * rs * g;
                    *db += g;
                }
            }
        },
    );
}

/// The GPU backward's second pass bit for bit (`kernel_abi::layernorm`): from the first
/// pass's `blocks` slots of `partials` (slot `b` holds its `Σ dout·norm` of the `c` channels,
/// then its `Σ dout`, then, with `dinp_sum`, its `Σ dinp`), `dweight[ch] = S + beta·dweight[ch]`
/// in f32 (the product rounded, then the sum; not read when `beta` is 0), `S` the f32 sum from
/// 0.0 of the 16 groups' sums in order, group `g`'s the f32 sum from 0.0 of slots `g, g + 16,
/// …` in order; `dbias` and `dinp_sum` alike.
///
/// # Panics
/// If `partials` holds fewer than `blocks` slots or a gradient fewer than `c` values.
pub fn layernorm_backward_reduce(
    partials: &[f32],
    blocks: usize,
    dweight: &mut [f32],
    dbias: &mut [f32],
    mut dinp_sum: Option<&mut [f32]>,
    beta: f32,
) {
    let c = dweight.len();
    let parts = if dinp_sum.is_some() { 3 } else { 2 };
    assert_eq!(dbias.len(), c, "layernorm_backward_reduce: dbias must hold c values");
    if let Some(sum) = &dinp_sum {
        assert_eq!(sum.len(), c, "layernorm_backward_reduce: dinp_sum must hold c values");
    }
    assert!(partials.len() >= blocks * parts * c, "layernorm_backward_reduce: short partials");
    let groups = kernel_abi::layernorm::REDUCE_GROUPS as usize;
    let reduce = |part: usize, ch: usize, old: f32| {
        let sum = grouped_sum(blocks, groups, |b| partials[b * parts * c + part * c + ch]);
        if beta != 0.0 { sum + beta * old } else { sum }
    };
    for ch in 0..c {
        dweight[ch] = reduce(0, ch, dweight[ch]);
        dbias[ch] = reduce(1, ch, dbias[ch]);
        if let Some(sum) = dinp_sum.as_deref_mut() {
            sum[ch] = reduce(2, ch, sum[ch]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn naive_forward(
        inp: &[f64],
        w: &[f64],
        b: &[f64],
        c: usize,
    ) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
        let (mut out, mut means, mut rstds) = (vec![], vec![], vec![]);
        for x in inp.chunks(c) {
            let m = x.iter().sum::<f64>() / c as f64;
            let var = x.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / c as f64;
            let r = 1.0 / (var + f64::from(LAYERNORM_EPS)).sqrt();
            out.extend(x.iter().zip(w).zip(b).map(|((x, w), b)| (x - m) * r * w + b));
            means.push(m);
            rstds.push(r);
        }
        (out, means, rstds)
    }

    #[test]
    fn forward_matches_naive_f64() {
        let mut rng = rng(20);
        let (bt, c) = (9, 37);
        let inp: Vec<f32> = uniform(&mut rng, bt * c, 2.0).iter().map(|v| v + 0.5).collect();
        let w = uniform(&mut rng, c, 1.0);
        let b = uniform(&mut rng, c, 1.0);
        let (mut out, mut mean, mut rstd) = (vec![f32::NAN; bt * c], vec![0.0; bt], vec![0.0; bt]);
        layernorm_forward(&mut out, &mut mean, &mut rstd, &inp, &w, &b, bt, c);
        let (want, want_mean, want_rstd) = naive_forward(&f64s(&inp), &f64s(&w), &f64s(&b), c);
        assert_close("out", &out, &want, 1e-5);
        assert_close("mean", &mean, &want_mean, 1e-6);
        assert_close("rstd", &rstd, &want_rstd, 1e-5);
    }

    #[test]
    fn backward_matches_finite_differences_and_accumulates() {
        let mut rng = rng(21);
        let (bt, c) = (5, 13);
        let inp = uniform(&mut rng, bt * c, 2.0);
        let w = uniform(&mut rng, c, 1.0);
        let b = uniform(&mut rng, c, 1.0);
        let dout = uniform(&mut rng, bt * c, 1.0);
        let (mut out, mut mean, mut rstd) = (vec![0.0; bt * c], vec![0.0; bt], vec![0.0; bt]);
        layernorm_forward(&mut out, &mut mean, &mut rstd, &inp, &w, &b, bt, c);
        let dinp0 = uniform(&mut rng, bt * c, 1.0);
        let dw0 = uniform(&mut rng, c, 1.0);
        let db0 = uniform(&mut rng, c, 1.0);
        let (mut dinp, mut dw, mut db) = (dinp0.clone(), dw0.clone(), db0.clone());
        layernorm_backward(&mut dinp, &mut dw, &mut db, &dout, &inp, &w, &mean, &rstd, bt, c);

        let (x64, w64, b64, g) = (f64s(&inp), f64s(&w), f64s(&b), f64s(&dout));
        let loss = |x: &[f64], w: &[f64], b: &[f64]| weighted_sum(&naive_forward(x, w, b, c).0, &g);
        let plus = |d: Vec<f64>, d0: &[f32]| -> Vec<f64> {
            d.iter().zip(d0).map(|(d, &d0)| d + f64::from(d0)).collect()
        };
        let want_dinp = plus(numerical_grad(|x| loss(x, &w64, &b64), &x64), &dinp0);
        let want_dw = plus(numerical_grad(|x| loss(&x64, x, &b64), &w64), &dw0);
        let want_db = plus(numerical_grad(|x| loss(&x64, &w64, x), &b64), &db0);
        assert_close("dinp", &dinp, &want_dinp, 1e-5);
        assert_close("dweight", &dw, &want_dw, 1e-5);
        assert_close("dbias", &db, &want_db, 1e-5);
    }
}
