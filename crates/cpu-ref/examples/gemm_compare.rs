//! Measures the matmul behind `cpu_ref::matmul_forward` (the `gemm` crate) against a
//! hand-written cache-blocked, register-tiled rayon loop on the GPT-2 d12 shapes at
//! B·T = 256, to justify the choice documented in `cpu_ref::matmul`.
//!
//! `cargo run --release -p cpu-ref --example gemm_compare`

use rayon::prelude::*;
use std::time::Instant;

const MR: usize = 4;
const NR: usize = 16;
const KC: usize = 256;

/// `out (m×n) = inp (m×k) · weightᵀ` with weight (n×k): B panels of NR columns are packed
/// k-major per KC block, and a MR×NR register tile of accumulators runs over each panel.
fn hand_written(out: &mut [f32], inp: &[f32], weight: &[f32], k: usize, n: usize) {
    out.fill(0.0);
    let panels = n.div_ceil(NR);
    for k0 in (0..k).step_by(KC) {
        let kc = KC.min(k - k0);
        // packed[p][kk][j] = weight[p*NR + j][k0 + kk]
        let mut packed = vec![0.0f32; panels * kc * NR];
        packed.par_chunks_mut(kc * NR).enumerate().for_each(|(p, panel)| {
            for j in 0..NR.min(n - p * NR) {
                let row = &weight[(p * NR + j) * k + k0..][..kc];
                for (kk, &w) in row.iter().enumerate() {
                    panel[kk * NR + j] = w;
                }
            }
        });
        out.par_chunks_mut(MR * n).enumerate().for_each(|(blk, out_rows)| {
            let rows = out_rows.len() / n;
            for (p, panel) in packed.chunks(kc * NR).enumerate() {
                let mut acc = [[0.0f32; NR]; MR];
                for kk in 0..kc {
                    let w = &panel[kk * NR..][..NR];
                    for (r, acc_r) in acc.iter_mut().enumerate().take(rows) {
                        let a = inp[(blk * MR + r) * k + k0 + kk];
                        for j in 0..NR {
                            acc_r[j] += a * w[j];
                        }
                    }
                }
                let cols = NR.min(n - p * NR);
                for (r, acc_r) in acc.iter().enumerate().take(rows) {
                    for j in 0..cols {
                        out_rows[r * n + p * NR + j] += acc_r[j];
                    }
                }
            }
        });
    }
}

fn median_ms(mut f: impl FnMut()) -> f64 {
    f();
    let mut times: Vec<f64> = (0..7)
        .map(|_| {
            let start = Instant::now();
            f();
            start.elapsed().as_secs_f64() * 1e3
        })
        .collect();
    times.sort_by(f64::total_cmp);
    times[times.len() / 2]
}

fn main() {
    println!("threads: {}", rayon::current_num_threads());
    println!("{:>22} {:>14} {:>14} {:>8}", "m×k·(n×k)ᵀ", "gemm GFLOP/s", "hand GFLOP/s", "ratio");
    for &(m, k, n) in
        &[(256, 768, 2304), (256, 768, 768), (256, 768, 3072), (256, 3072, 768), (256, 768, 50304)]
    {
        let inp: Vec<f32> = (0..m * k).map(|i| ((i * 7919) % 1013) as f32 / 1013.0 - 0.5).collect();
        let weight: Vec<f32> =
            (0..n * k).map(|i| ((i * 104_729) % 1009) as f32 / 1009.0 - 0.5).collect();
        let mut a = vec![0.0f32; m * n];
        let mut b = vec![0.0f32; m * n];
        let flops = 2.0 * (m * n * k) as f64;
        let t_gemm = median_ms(|| cpu_ref::matmul_forward(&mut a, &inp, &weight, None, m, k, n));
        let t_hand = median_ms(|| hand_written(&mut b, &inp, &weight, k, n));
        let max_diff = a.iter().zip(&b).map(|(x, y)| (x - y).abs()).fold(0.0f32, f32::max);
        assert!(max_diff < 1e-2, "the two products disagree by {max_diff}");
        let gflops = |ms: f64| flops / ms / 1e6;
        println!(
            "{:>22} {:>14.1} {:>14.1} {:>7.1}x",
            format!("{m}×{k}·({n}×{k})ᵀ"),
            gflops(t_gemm),
            gflops(t_hand),
            t_hand / t_gemm
        );
    }
}
