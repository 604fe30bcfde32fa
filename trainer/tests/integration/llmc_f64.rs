//! An independent f64 model of llm.c's CPU trainer (`train_gpt2.c`): GPT-2 forward, backward
//! and AdamW written as the plainest nested loops, reading checkpoints and shards by hand.
//! It shares no code with the trainer; the end-to-end tests compare the trainer's losses and
//! gradients with it.
// Index loops on purpose: they mirror llm.c's C loops one to one.
#![allow(clippy::needless_range_loop)]

use std::path::Path;

/// llm.c's parameter tensors, in checkpoint order.
pub const WTE: usize = 0;
const WPE: usize = 1;
const LN1W: usize = 2;
const LN1B: usize = 3;
const QKVW: usize = 4;
const QKVB: usize = 5;
const ATTPROJW: usize = 6;
const ATTPROJB: usize = 7;
const LN2W: usize = 8;
const LN2B: usize = 9;
const FCW: usize = 10;
const FCB: usize = 11;
const FCPROJW: usize = 12;
const FCPROJB: usize = 13;
const LNFW: usize = 14;
const LNFB: usize = 15;

/// The tensors the trainer decays (its docs: "the weight matrices and embeddings"), written out
/// here rather than taken from the trainer.
pub const MATRICES_AND_EMBEDDINGS: [bool; 16] = {
    let mut decays = [false; 16];
    let mut k = 0;
    while k < 16 {
        decays[k] = matches!(k, WTE | WPE | QKVW | ATTPROJW | FCW | FCPROJW);
        k += 1;
    }
    decays
};

/// One AdamW update of [`Model::adamw`].
#[derive(Clone, Copy, Debug)]
pub struct Update {
    pub lr: f64,
    pub beta1: f64,
    pub beta2: f64,
    pub eps: f64,
    pub weight_decay: f64,
    /// Whether tensor `k` (checkpoint order) decays.
    pub decays: [bool; 16],
    /// Multiplies every gradient before the moments see it (the clip factor).
    pub grad_scale: f64,
}

impl Update {
    /// llm.c's update without weight decay or clipping.
    pub fn plain(lr: f64, beta1: f64, beta2: f64, eps: f64) -> Self {
        Update { lr, beta1, beta2, eps, weight_decay: 0.0, decays: [true; 16], grad_scale: 1.0 }
    }
}

/// The global L2 norm of `grads`.
pub fn norm(grads: &[Vec<f64>]) -> f64 {
    grads.iter().flatten().map(|g| g * g).sum::<f64>().sqrt()
}

/// Dimensions from the checkpoint header.
#[derive(Clone, Copy, Debug)]
pub struct Dims {
    pub max_t: usize,
    pub v: usize,
    pub l: usize,
    pub nh: usize,
    pub c: usize,
    pub vp: usize,
}

impl Dims {
    fn sizes(&self) -> [usize; 16] {
        let Dims { max_t, l, c, vp, .. } = *self;
        [
            vp * c,
            max_t * c,
            l * c,
            l * c,
            l * 3 * c * c,
            l * 3 * c,
            l * c * c,
            l * c,
            l * c,
            l * c,
            l * 4 * c * c,
            l * 4 * c,
            l * c * 4 * c,
            l * c,
            c,
            c,
        ]
    }
}

/// A model with AdamW state.
pub struct Model {
    pub dims: Dims,
    pub params: Vec<Vec<f64>>,
    m: Vec<Vec<f64>>,
    v: Vec<Vec<f64>>,
    t: i32,
}

fn le_i32(bytes: &[u8], i: usize) -> i32 {
    i32::from_le_bytes(bytes[4 * i..4 * i + 4].try_into().unwrap())
}

/// Reads a version-3 llm.c checkpoint.
pub fn read_checkpoint(path: &Path) -> Model {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!((le_i32(&bytes, 0), le_i32(&bytes, 1)), (20240326, 3));
    let d = |i| le_i32(&bytes, i) as usize;
    let dims = Dims { max_t: d(2), v: d(3), l: d(4), nh: d(5), c: d(6), vp: d(7) };
    let mut offset = 1024;
    let params: Vec<Vec<f64>> = dims
        .sizes()
        .iter()
        .map(|&n| {
            let tensor = bytes[offset..offset + 4 * n]
                .chunks_exact(4)
                .map(|b| f64::from(f32::from_le_bytes(b.try_into().unwrap())))
                .collect();
            offset += 4 * n;
            tensor
        })
        .collect();
    assert_eq!(offset, bytes.len());
    let zeros: Vec<Vec<f64>> = params.iter().map(|p| vec![0.0; p.len()]).collect();
    Model { dims, params, m: zeros.clone(), v: zeros, t: 0 }
}

/// Reads the tokens of an llm.c shard.
pub fn read_shard(path: &Path) -> Vec<u16> {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!((le_i32(&bytes, 0), le_i32(&bytes, 1)), (20240520, 1));
    let n = le_i32(&bytes, 2) as usize;
    bytes[1024..1024 + 2 * n].chunks_exact(2).map(|b| u16::from_le_bytes([b[0], b[1]])).collect()
}

fn layernorm(x: &[f64], w: &[f64], b: &[f64], c: usize) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let (mut out, mut means, mut rstds) = (Vec::new(), Vec::new(), Vec::new());
    for row in x.chunks(c) {
        let mean = row.iter().sum::<f64>() / c as f64;
        let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / c as f64;
        let rstd = 1.0 / (var + 1e-5).sqrt();
        for i in 0..c {
            out.push((row[i] - mean) * rstd * w[i] + b[i]);
        }
        means.push(mean);
        rstds.push(rstd);
    }
    (out, means, rstds)
}

/// Returns dx and accumulates dw, db.
#[allow(
    clippy::too_many_arguments,
    reason = "llm.c's signature (buffers, then explicit shapes), kept for side-by-side reading"
)]
fn layernorm_back(
    dout: &[f64],
    x: &[f64],
    w: &[f64],
    mean: &[f64],
    rstd: &[f64],
    dw: &mut [f64],
    db: &mut [f64],
    c: usize,
) -> Vec<f64> {
    let mut dx = vec![0.0; x.len()];
    for r in 0..x.len() / c {
        let norm: Vec<f64> = (0..c).map(|i| (x[r * c + i] - mean[r]) * rstd[r]).collect();
        let g: Vec<f64> = (0..c).map(|i| dout[r * c + i] * w[i]).collect();
        let g_mean = g.iter().sum::<f64>() / c as f64;
        let gn_mean = (0..c).map(|i| g[i] * norm[i]).sum::<f64>() / c as f64;
        for i in 0..c {
            db[i] += dout[r * c + i];
            dw[i] += dout[r * c + i] * norm[i];
            dx[r * c + i] = rstd[r] * (g[i] - g_mean - norm[i] * gn_mean);
        }
    }
    dx
}

fn matmul(x: &[f64], w: &[f64], b: Option<&[f64]>, c: usize, oc: usize) -> Vec<f64> {
    let n = x.len() / c;
    let mut out = vec![0.0; n * oc];
    for r in 0..n {
        for o in 0..oc {
            let mut acc = b.map_or(0.0, |b| b[o]);
            for i in 0..c {
                acc += x[r * c + i] * w[o * c + i];
            }
            out[r * oc + o] = acc;
        }
    }
    out
}

/// Returns dx and accumulates dw, db.
fn matmul_back(
    dout: &[f64],
    x: &[f64],
    w: &[f64],
    dw: &mut [f64],
    mut db: Option<&mut [f64]>,
    c: usize,
    oc: usize,
) -> Vec<f64> {
    let n = x.len() / c;
    let mut dx = vec![0.0; n * c];
    for r in 0..n {
        for o in 0..oc {
            let g = dout[r * oc + o];
            for i in 0..c {
                dx[r * c + i] += g * w[o * c + i];
                dw[o * c + i] += g * x[r * c + i];
            }
            if let Some(db) = db.as_deref_mut() {
                db[o] += g;
            }
        }
    }
    dx
}

const GELU_K: f64 = 0.797_884_560_802_865_4; // sqrt(2 / pi)

fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + (GELU_K * (x + 0.044715 * x.powi(3))).tanh())
}

fn gelu_grad(x: f64) -> f64 {
    let u = GELU_K * (x + 0.044715 * x.powi(3));
    let th = u.tanh();
    0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * GELU_K * (1.0 + 3.0 * 0.044715 * x * x)
}

/// Causal attention over (b, t, 3c) qkv: returns (out (b, t, c), att (b, nh, t, t)).
fn attention(qkv: &[f64], b: usize, t: usize, c: usize, nh: usize) -> (Vec<f64>, Vec<f64>) {
    let hs = c / nh;
    let scale = 1.0 / (hs as f64).sqrt();
    let mut out = vec![0.0; b * t * c];
    let mut att = vec![0.0; b * nh * t * t];
    let at = |bi: usize, ti: usize, part: usize, h: usize, i: usize| {
        qkv[(bi * t + ti) * 3 * c + part * c + h * hs + i]
    };
    for bi in 0..b {
        for t1 in 0..t {
            for h in 0..nh {
                let scores: Vec<f64> = (0..=t1)
                    .map(|t2| {
                        (0..hs).map(|i| at(bi, t1, 0, h, i) * at(bi, t2, 1, h, i)).sum::<f64>()
                            * scale
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

/// llm.c's attention_backward: the full softmax Jacobian, O(t²) per row.
fn attention_back(
    dout: &[f64],
    qkv: &[f64],
    att: &[f64],
    b: usize,
    t: usize,
    c: usize,
    nh: usize,
) -> Vec<f64> {
    let hs = c / nh;
    let scale = 1.0 / (hs as f64).sqrt();
    let mut dqkv = vec![0.0; qkv.len()];
    let idx = |bi: usize, ti: usize, part: usize, h: usize, i: usize| {
        (bi * t + ti) * 3 * c + part * c + h * hs + i
    };
    for bi in 0..b {
        for t1 in 0..t {
            for h in 0..nh {
                let a = |t2: usize| att[((bi * nh + h) * t + t1) * t + t2];
                let dy = |i: usize| dout[(bi * t + t1) * c + h * hs + i];
                let mut datt = vec![0.0; t1 + 1];
                for t2 in 0..=t1 {
                    for i in 0..hs {
                        datt[t2] += qkv[idx(bi, t2, 2, h, i)] * dy(i);
                        dqkv[idx(bi, t2, 2, h, i)] += a(t2) * dy(i);
                    }
                }
                let mut dpre = vec![0.0; t1 + 1];
                for t2 in 0..=t1 {
                    for (t3, d) in dpre.iter_mut().enumerate() {
                        let indicator = if t2 == t3 { 1.0 } else { 0.0 };
                        *d += a(t2) * (indicator - a(t3)) * datt[t2];
                    }
                }
                for (t2, d) in dpre.iter().enumerate() {
                    for i in 0..hs {
                        dqkv[idx(bi, t1, 0, h, i)] += qkv[idx(bi, t2, 1, h, i)] * d * scale;
                        dqkv[idx(bi, t2, 1, h, i)] += qkv[idx(bi, t1, 0, h, i)] * d * scale;
                    }
                }
            }
        }
    }
    dqkv
}

/// What the backward pass needs from one layer's forward.
struct LayerCache {
    input: Vec<f64>,
    ln1: (Vec<f64>, Vec<f64>, Vec<f64>),
    qkv: Vec<f64>,
    atty: Vec<f64>,
    att: Vec<f64>,
    residual2: Vec<f64>,
    ln2: (Vec<f64>, Vec<f64>, Vec<f64>),
    fch: Vec<f64>,
    fch_gelu: Vec<f64>,
}

impl Model {
    fn layer(&self, kind: usize, l: usize) -> &[f64] {
        let n = self.params[kind].len() / self.dims.l;
        &self.params[kind][l * n..(l + 1) * n]
    }

    /// Mean loss; with `grads`, also accumulates the gradient of the mean loss into it.
    fn run(
        &self,
        inputs: &[u16],
        targets: &[u16],
        b: usize,
        t: usize,
        grads: Option<&mut [Vec<f64>]>,
    ) -> f64 {
        let Dims { v, vp, c, nh, l: layers, .. } = self.dims;
        let bt = b * t;
        let p = &self.params;
        let mut x = vec![0.0; bt * c];
        for r in 0..bt {
            let (tok, pos) = (inputs[r] as usize, r % t);
            for i in 0..c {
                x[r * c + i] = p[WTE][tok * c + i] + p[WPE][pos * c + i];
            }
        }
        let mut caches = Vec::new();
        for l in 0..layers {
            let ln1 = layernorm(&x, self.layer(LN1W, l), self.layer(LN1B, l), c);
            let qkv = matmul(&ln1.0, self.layer(QKVW, l), Some(self.layer(QKVB, l)), c, 3 * c);
            let (atty, att) = attention(&qkv, b, t, c, nh);
            let proj = matmul(&atty, self.layer(ATTPROJW, l), Some(self.layer(ATTPROJB, l)), c, c);
            let residual2: Vec<f64> = x.iter().zip(&proj).map(|(a, b)| a + b).collect();
            let ln2 = layernorm(&residual2, self.layer(LN2W, l), self.layer(LN2B, l), c);
            let fch = matmul(&ln2.0, self.layer(FCW, l), Some(self.layer(FCB, l)), c, 4 * c);
            let fch_gelu: Vec<f64> = fch.iter().map(|&v| gelu(v)).collect();
            let fcproj =
                matmul(&fch_gelu, self.layer(FCPROJW, l), Some(self.layer(FCPROJB, l)), 4 * c, c);
            let out: Vec<f64> = residual2.iter().zip(&fcproj).map(|(a, b)| a + b).collect();
            caches.push(LayerCache {
                input: x,
                ln1,
                qkv,
                atty,
                att,
                residual2,
                ln2,
                fch,
                fch_gelu,
            });
            x = out;
        }
        let lnf = layernorm(&x, &p[LNFW], &p[LNFB], c);
        let logits = matmul(&lnf.0, &p[WTE], None, c, vp);
        let mut loss = 0.0;
        let mut dlogits = vec![0.0; bt * vp];
        for r in 0..bt {
            let row = &logits[r * vp..r * vp + v];
            let max = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let sum: f64 = row.iter().map(|z| (z - max).exp()).sum();
            let target = targets[r] as usize;
            loss -= ((row[target] - max).exp() / sum).ln();
            for i in 0..v {
                let prob = (row[i] - max).exp() / sum;
                let indicator = if i == target { 1.0 } else { 0.0 };
                dlogits[r * vp + i] = (prob - indicator) / bt as f64;
            }
        }
        let Some(g) = grads else { return loss / bt as f64 };

        let per_layer = |kind: usize| self.params[kind].len() / layers;
        let dlnf = matmul_back(&dlogits, &lnf.0, &p[WTE], &mut g[WTE], None, c, vp);
        let (lnfw, lnfb) = g[LNFW..=LNFB].split_at_mut(1);
        let mut dres =
            layernorm_back(&dlnf, &x, &p[LNFW], &lnf.1, &lnf.2, &mut lnfw[0], &mut lnfb[0], c);
        for l in (0..layers).rev() {
            let cache = &caches[l];
            let zeros = |kind: usize| vec![0.0; per_layer(kind)];
            let (mut d_fcprojw, mut d_fcprojb) = (zeros(FCPROJW), zeros(FCPROJB));
            let (mut d_fcw, mut d_fcb) = (zeros(FCW), zeros(FCB));
            let (mut d_ln2w, mut d_ln2b) = (zeros(LN2W), zeros(LN2B));
            let (mut d_attprojw, mut d_attprojb) = (zeros(ATTPROJW), zeros(ATTPROJB));
            let (mut d_qkvw, mut d_qkvb) = (zeros(QKVW), zeros(QKVB));
            let (mut d_ln1w, mut d_ln1b) = (zeros(LN1W), zeros(LN1B));

            let d_gelu = matmul_back(
                &dres,
                &cache.fch_gelu,
                self.layer(FCPROJW, l),
                &mut d_fcprojw,
                Some(&mut d_fcprojb),
                4 * c,
                c,
            );
            let d_fch: Vec<f64> =
                d_gelu.iter().zip(&cache.fch).map(|(d, &x)| d * gelu_grad(x)).collect();
            let d_ln2 = matmul_back(
                &d_fch,
                &cache.ln2.0,
                self.layer(FCW, l),
                &mut d_fcw,
                Some(&mut d_fcb),
                c,
                4 * c,
            );
            let d_res2 = layernorm_back(
                &d_ln2,
                &cache.residual2,
                self.layer(LN2W, l),
                &cache.ln2.1,
                &cache.ln2.2,
                &mut d_ln2w,
                &mut d_ln2b,
                c,
            );
            let d_residual2: Vec<f64> = dres.iter().zip(&d_res2).map(|(a, b)| a + b).collect();
            let d_atty = matmul_back(
                &d_residual2,
                &cache.atty,
                self.layer(ATTPROJW, l),
                &mut d_attprojw,
                Some(&mut d_attprojb),
                c,
                c,
            );
            let d_qkv = attention_back(&d_atty, &cache.qkv, &cache.att, b, t, c, nh);
            let d_ln1 = matmul_back(
                &d_qkv,
                &cache.ln1.0,
                self.layer(QKVW, l),
                &mut d_qkvw,
                Some(&mut d_qkvb),
                c,
                3 * c,
            );
            let d_in = layernorm_back(
                &d_ln1,
                &cache.input,
                self.layer(LN1W, l),
                &cache.ln1.1,
                &cache.ln1.2,
                &mut d_ln1w,
                &mut d_ln1b,
                c,
            );
            dres = d_residual2.iter().zip(&d_in).map(|(a, b)| a + b).collect();

            for (kind, values) in [
                (FCPROJW, d_fcprojw),
                (FCPROJB, d_fcprojb),
                (FCW, d_fcw),
                (FCB, d_fcb),
                (LN2W, d_ln2w),
                (LN2B, d_ln2b),
                (ATTPROJW, d_attprojw),
                (ATTPROJB, d_attprojb),
                (QKVW, d_qkvw),
                (QKVB, d_qkvb),
                (LN1W, d_ln1w),
                (LN1B, d_ln1b),
            ] {
                let n = per_layer(kind);
                for (dst, value) in g[kind][l * n..(l + 1) * n].iter_mut().zip(values) {
                    *dst += value;
                }
            }
        }
        for r in 0..bt {
            let (tok, pos) = (inputs[r] as usize, r % t);
            for i in 0..c {
                g[WTE][tok * c + i] += dres[r * c + i];
                g[WPE][pos * c + i] += dres[r * c + i];
            }
        }
        loss / bt as f64
    }

    /// The mean loss of a batch.
    pub fn loss(&self, inputs: &[u16], targets: &[u16], b: usize, t: usize) -> f64 {
        self.run(inputs, targets, b, t, None)
    }

    /// The mean loss of a batch and its gradient.
    pub fn loss_and_grads(
        &self,
        inputs: &[u16],
        targets: &[u16],
        b: usize,
        t: usize,
    ) -> (f64, Vec<Vec<f64>>) {
        let mut grads: Vec<Vec<f64>> = self.params.iter().map(|p| vec![0.0; p.len()]).collect();
        let loss = self.run(inputs, targets, b, t, Some(&mut grads));
        (loss, grads)
    }

    /// llm.c's gpt2_update (AdamW, decay inside the step), with the trainer's choice of the
    /// tensors that decay and a factor on every gradient (the clip factor).
    pub fn adamw(&mut self, grads: &[Vec<f64>], u: &Update) {
        let Update { lr, beta1, beta2, eps, weight_decay, decays, grad_scale } = *u;
        self.t += 1;
        for k in 0..16 {
            let weight_decay = if decays[k] { weight_decay } else { 0.0 };
            for i in 0..self.params[k].len() {
                let g = grad_scale * grads[k][i];
                self.m[k][i] = beta1 * self.m[k][i] + (1.0 - beta1) * g;
                self.v[k][i] = beta2 * self.v[k][i] + (1.0 - beta2) * g * g;
                let m_hat = self.m[k][i] / (1.0 - beta1.powi(self.t));
                let v_hat = self.v[k][i] / (1.0 - beta2.powi(self.t));
                let p = self.params[k][i];
                self.params[k][i] = p - lr * (m_hat / (v_hat.sqrt() + eps) + weight_decay * p);
            }
        }
    }
}
