//! `cargo xtask bench attention`: causal attention forward and backward at GPT-2 124M's head
//! layout (B = 16, NH = 12, HD = 64) and T = 1024, 2048, 4096, bf16 and f16: our flash
//! attention and our materialised path against PyTorch in the same run
//! (`scaled_dot_product_attention` with its default choice and pinned to each backend — flash,
//! memory-efficient, cuDNN — and PyTorch's materialised `softmax(q·kᵀ)·v`), written to
//! `bench/attention-<device>.md`. On Hopper our flash attention runs on wgmma; its `mma.sync`
//! kernels are timed beside it.
//!
//! Method: CUDA events around every call, warm-up calls first, the median of the timed calls,
//! random inputs (q, k, v and the output gradient rotated over two copies at T = 1024 so that
//! the inputs exceed the L2 cache); on Hopper our wgmma and mma.sync flash kernels timed in
//! interleaved rounds, so that both meet the same clocks. TFLOP/s counts the causal half of
//! the matmuls: forward `2·B·NH·T²·HD` (two matmuls of `2·T²·HD`, halved), backward 2.5 times
//! that (five matmuls).
//! The PyTorch side is `bench/attention_torch.py` (found through `$GPU_BENCH_SCRIPTS`, which
//! the GPU bundle sets, else `bench/` under the current folder), run with `python3` when
//! PyTorch imports; a backend PyTorch cannot run here is listed with its error.

use crate::data::{Value, random};
use crate::report;
use crate::timing::{RunArgs, Timer};
use anyhow::{Context, Result};
use gpu_host::kernels::attention::{
    AttentionBackward, AttentionElement, AttentionForward, AttentionShape, attention_backward,
    attention_backward_scratch_len, attention_forward, attention_forward_scratch_len,
};
use gpu_host::kernels::flash::{
    FlashBackward, FlashElement, FlashForward, flash_attention_backward, flash_attention_forward,
};
use gpu_host::kernels::gemm::{GemmEngine, Precision};
use gpu_host::{Device, DeviceBuffer, Gpu, PtxArch};
use half::{bf16, f16};
use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;

/// Sequences, heads and channels: GPT-2 124M at B = 16.
const B: usize = 16;
const NH: usize = 12;
const C: usize = 768;
/// The sequence length of the headline (GPT-2's).
const HEADLINE_T: usize = 1024;

/// Options of `bench attention`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Sequence lengths to measure (comma-separated; the headline is T = 1024's). T = 4096
    /// takes the longest: the materialised path's T×T scores and PyTorch's.
    #[arg(long, value_delimiter = ',', default_values_t = [1024, 2048, 4096])]
    pub seq_lens: Vec<usize>,
    /// Timing and report options.
    #[command(flatten)]
    pub run: RunArgs,
}

/// Forward and backward medians of one implementation.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Times {
    fwd_ms: f64,
    bwd_ms: f64,
}

/// One implementation at one (type, T): its times, or why it could not run.
struct Row {
    dtype: &'static str,
    t: usize,
    name: String,
    times: Result<Times, String>,
}

/// Causal forward FLOPs at sequence length `t`.
fn fwd_flops(t: usize) -> f64 {
    2.0 * (B * t * t * C) as f64
}

fn tflops(flops: f64, ms: f64) -> f64 {
    flops / (ms * 1e-3) / 1e12
}

/// Runs the benchmark (see the module docs).
pub fn run(args: &Args) -> Result<()> {
    if args.seq_lens.is_empty() || args.seq_lens.contains(&0) {
        anyhow::bail!("--seq-lens: give one or more sequence lengths above 0");
    }
    let (gpu, l2_bytes) = args.run.start("attention")?;
    let timer = args.run.timer(&gpu);
    let mut rows = Vec::new();
    for &t in &args.seq_lens {
        rows.extend(ours::<bf16>(&gpu, &timer, l2_bytes, "bf16", Precision::Bf16, t)?);
        rows.extend(torch("bf16", t, &args.run)?);
        rows.extend(ours::<f16>(&gpu, &timer, l2_bytes, "f16", Precision::Fp16, t)?);
        rows.extend(torch("f16", t, &args.run)?);
    }
    let meta = args.run.meta(&gpu, l2_bytes);
    let text = markdown(&meta, &rows);
    let path = args.run.report_path("attention", &meta.device_name);
    crate::write_atomic(&path, &text)?;
    println!("\n{text}\nbench attention: wrote {}", path.display());
    println!("headline: {}", headline(&rows));
    Ok(())
}

/// Our flash attention and materialised path at sequence length `t`.
fn ours<T: FlashElement + AttentionElement + Value>(
    gpu: &Gpu,
    timer: &Timer<'_>,
    l2_bytes: usize,
    dtype: &'static str,
    precision: Precision,
    t: usize,
) -> Result<Vec<Row>> {
    let shape = AttentionShape { b: B, t, c: C, nh: NH };
    let sets = (2 * l2_bytes).div_ceil(shape.qkv_len() * size_of::<T>()).clamp(1, 4);
    let qkv = (0..sets as u64)
        .map(|i| Ok(gpu.upload(&random::<T>(shape.qkv_len(), 2 * i + 1))?))
        .collect::<Result<Vec<_>>>()?;
    let dout = (0..sets as u64)
        .map(|i| Ok(gpu.upload(&random::<T>(shape.out_len(), 2 * i + 2))?))
        .collect::<Result<Vec<_>>>()?;
    let inputs = Inputs { qkv: &qkv, dout: &dout };
    // On Hopper, Auto's kernels run on wgmma: the mma.sync kernels beside them.
    let engines: &[GemmEngine] = match gpu.ptx_arch() {
        PtxArch::Sm90a => &[GemmEngine::Auto, GemmEngine::MmaSync],
        PtxArch::Sm80 => &[GemmEngine::Auto],
    };
    let mut flash = flash_times(gpu, timer, shape, inputs, engines)?.into_iter();
    let (flash, flash_mma) = (flash.next().context("no flash times")?, flash.next());
    let mut out = gpu.alloc::<T>(shape.out_len())?;
    let mut dqkv = gpu.alloc::<T>(shape.qkv_len())?;

    let mut att = gpu.alloc::<T>(shape.att_len())?;
    let scratch_len =
        attention_forward_scratch_len(shape).max(attention_backward_scratch_len(shape));
    let mut scratch = gpu.alloc::<T>(scratch_len)?;
    let naive_fwd = timer.median_ms(sets, |i| {
        let args = AttentionForward {
            qkv: qkv[i].view(),
            out: out.view_mut(),
            att: att.view_mut(),
            scratch: scratch.view_mut(),
        };
        Ok(attention_forward(gpu, shape, precision, args)?)
    })?;
    let naive_bwd = timer.median_ms(sets, |i| {
        let args = AttentionBackward {
            dout: dout[i].view(),
            qkv: qkv[i].view(),
            att: att.view(),
            dqkv: dqkv.view_mut(),
            scratch: scratch.view_mut(),
        };
        Ok(attention_backward(gpu, shape, precision, args)?)
    })?;
    let mut rows = vec![Row { dtype, t, name: "flash (ours)".into(), times: Ok(flash) }];
    if let Some(times) = flash_mma {
        rows.push(Row { dtype, t, name: "flash, mma.sync (ours)".into(), times: Ok(times) });
    }
    rows.push(Row {
        dtype,
        t,
        name: "materialised (ours)".into(),
        times: Ok(Times { fwd_ms: naive_fwd, bwd_ms: naive_bwd }),
    });
    rows.iter().for_each(|r| println!("{}", progress_line(r)));
    Ok(rows)
}

/// The rotated input sets of one (type, T): qkv and the output gradient.
struct Inputs<'a, B> {
    qkv: &'a [B],
    dout: &'a [B],
}

impl<B> Clone for Inputs<'_, B> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<B> Copy for Inputs<'_, B> {}

/// Our flash attention's forward and backward medians with its kernels on each of `engines`,
/// the engines timed in interleaved rounds (`Timer::interleaved_medians_ms`: the same clocks
/// for both kernel families). The backward of every engine reads the output and log-sum-exp
/// of the last forward launched, whichever engine ran it (the values differ in the last bits,
/// the work not at all).
fn flash_times<T: FlashElement + Value>(
    gpu: &Gpu,
    timer: &Timer<'_>,
    shape: AttentionShape,
    inputs: Inputs<'_, impl DeviceBuffer<T>>,
    engines: &[GemmEngine],
) -> Result<Vec<Times>> {
    let sets = inputs.qkv.len();
    let mut out = gpu.alloc::<T>(shape.out_len())?;
    let mut dqkv = gpu.alloc::<T>(shape.qkv_len())?;
    let stats_len = shape.b * shape.nh * shape.t;
    let (mut lse, mut d_scratch) = (gpu.alloc::<f32>(stats_len)?, gpu.alloc::<f32>(stats_len)?);
    let fwd_ms = timer.interleaved_medians_ms(sets, engines.len(), |k, i| {
        let args =
            FlashForward { qkv: inputs.qkv[i].view(), out: out.view_mut(), lse: lse.view_mut() };
        Ok(flash_attention_forward(gpu, shape, engines[k], args)?)
    })?;
    let bwd_ms = timer.interleaved_medians_ms(sets, engines.len(), |k, i| {
        let args = FlashBackward {
            qkv: inputs.qkv[i].view(),
            out: out.view(),
            dout: inputs.dout[i].view(),
            lse: lse.view(),
            d_scratch: d_scratch.view_mut(),
            dqkv: dqkv.view_mut(),
            col_sums: None,
        };
        Ok(flash_attention_backward(gpu, shape, engines[k], args)?)
    })?;
    Ok(fwd_ms.into_iter().zip(bwd_ms).map(|(fwd_ms, bwd_ms)| Times { fwd_ms, bwd_ms }).collect())
}

/// PyTorch's implementations at sequence length `t`, or none (with a note) when `python3`
/// cannot import torch.
fn torch(dtype: &'static str, t: usize, run: &RunArgs) -> Result<Vec<Row>> {
    let scripts =
        std::env::var_os("GPU_BENCH_SCRIPTS").map_or_else(|| PathBuf::from("bench"), PathBuf::from);
    let script = scripts.join("attention_torch.py");
    let output = Command::new("python3")
        .arg(&script)
        .args(["--b", &B.to_string(), "--t", &t.to_string(), "--nh", &NH.to_string()])
        .args(["--hd", &(C / NH).to_string(), "--dtype", dtype])
        .args(["--warmup", &run.warmup.to_string(), "--reps", &run.reps.to_string()])
        .output();
    let output = match output {
        Ok(o) if o.status.success() => o,
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            println!(
                "bench attention: no PyTorch baseline ({}): {}",
                script.display(),
                err.lines().last().unwrap_or("")
            );
            return Ok(Vec::new());
        }
        Err(e) => {
            println!("bench attention: no PyTorch baseline (python3: {e})");
            return Ok(Vec::new());
        }
    };
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("parsing the output of {}", script.display()))?;
    let version = json["torch"].as_str().unwrap_or("?");
    let mut rows = Vec::new();
    for entry in json["rows"].as_array().context("no rows in the PyTorch output")? {
        let name = format!("{} (PyTorch {version})", entry["impl"].as_str().unwrap_or("?"));
        let times = match (entry["fwd_ms"].as_f64(), entry["bwd_ms"].as_f64()) {
            (Some(fwd_ms), Some(bwd_ms)) => Ok(Times { fwd_ms, bwd_ms }),
            _ => Err(entry["error"].as_str().unwrap_or("no times").to_string()),
        };
        let row = Row { dtype, t, name, times };
        println!("{}", progress_line(&row));
        rows.push(row);
    }
    Ok(rows)
}

fn progress_line(row: &Row) -> String {
    let f = fwd_flops(row.t);
    match &row.times {
        Ok(x) => format!(
            "{:5} T={:5} {:40} fwd {:8.3} ms {:6.1} TFLOP/s  bwd {:8.3} ms {:6.1} TFLOP/s",
            row.dtype,
            row.t,
            row.name,
            x.fwd_ms,
            tflops(f, x.fwd_ms),
            x.bwd_ms,
            tflops(2.5 * f, x.bwd_ms)
        ),
        Err(e) => format!("{:5} T={:5} {:40} unavailable: {e}", row.dtype, row.t, row.name),
    }
}

/// The fastest PyTorch SDPA times (forward and backward separately) among `rows` of one
/// (type, T).
fn best_sdpa<'a>(rows: impl Iterator<Item = &'a Row>) -> Option<Times> {
    rows.filter(|r| r.name.starts_with("SDPA"))
        .filter_map(|r| r.times.as_ref().ok())
        .copied()
        .reduce(|a, b| Times { fwd_ms: a.fwd_ms.min(b.fwd_ms), bwd_ms: a.bwd_ms.min(b.bwd_ms) })
}

fn markdown(meta: &report::Meta, rows: &[Row]) -> String {
    let mut s = meta.header("Attention benchmark");
    let _ = writeln!(
        s,
        "- Shape: causal, B = {B}, NH = {NH}, HD = {} (GPT-2 124M's heads). TFLOP/s: forward \
         2·B·NH·T²·HD / time, backward 2.5 × that (causal halves of 2 and 5 matmuls).",
        C / NH
    );
    let _ = writeln!(
        s,
        "- Method: `cargo xtask bench attention`. CUDA events, {} warm-up calls, median of {} \
         timed calls, random inputs rotated past 2 × L2 ({} MB); our two flash kernel \
         families (Hopper) timed in interleaved rounds. PyTorch: \
         `bench/attention_torch.py` in the same run, timed the same way (backward = \
         `torch.autograd.grad` of the output). \"ours / best SDPA\" compares our flash \
         attention with the fastest SDPA backend, per direction.",
        meta.warmup,
        meta.reps,
        meta.l2_bytes >> 20
    );
    let mut keys: Vec<(&str, usize)> = Vec::new();
    for r in rows {
        if !keys.contains(&(r.dtype, r.t)) {
            keys.push((r.dtype, r.t));
        }
    }
    for (dtype, t) in keys {
        let group: Vec<&Row> = rows.iter().filter(|r| r.dtype == dtype && r.t == t).collect();
        let f = fwd_flops(t);
        let _ = writeln!(s, "\n## {dtype}, T = {t}\n");
        let _ = writeln!(s, "| implementation | fwd ms | fwd TFLOP/s | bwd ms | bwd TFLOP/s |");
        let _ = writeln!(s, "|---|---:|---:|---:|---:|");
        for r in &group {
            match &r.times {
                Ok(x) => {
                    let _ = writeln!(
                        s,
                        "| {} | {:.3} | {:.1} | {:.3} | {:.1} |",
                        r.name,
                        x.fwd_ms,
                        tflops(f, x.fwd_ms),
                        x.bwd_ms,
                        tflops(2.5 * f, x.bwd_ms)
                    );
                }
                Err(e) => {
                    let _ =
                        writeln!(s, "| {} | unavailable: {} | | | |", r.name, e.replace('|', "/"));
                }
            }
        }
        let flash =
            group.iter().find(|r| r.name == "flash (ours)").and_then(|r| r.times.as_ref().ok());
        if let (Some(ours), Some(best)) = (flash, best_sdpa(group.iter().copied())) {
            let _ = writeln!(
                s,
                "\nours / best SDPA speed: forward {:.2}, backward {:.2}",
                best.fwd_ms / ours.fwd_ms,
                best.bwd_ms / ours.bwd_ms
            );
        }
    }
    if !rows.iter().any(|r| r.name.contains("PyTorch")) {
        let _ =
            writeln!(s, "\nNo PyTorch baseline: `python3` could not import torch on this machine.");
    }
    s
}

fn headline(rows: &[Row]) -> String {
    let at =
        |dtype: &'static str| rows.iter().filter(move |r| r.dtype == dtype && r.t == HEADLINE_T);
    let parts: Vec<String> = ["bf16", "f16"]
        .iter()
        .filter_map(|&dtype| {
            let ours = at(dtype).find(|r| r.name == "flash (ours)")?.times.as_ref().ok()?;
            let f = fwd_flops(HEADLINE_T);
            let mut part = format!(
                "{dtype} fwd {:.0} / bwd {:.0} TFLOP/s",
                tflops(f, ours.fwd_ms),
                tflops(2.5 * f, ours.bwd_ms)
            );
            if let Some(best) = best_sdpa(at(dtype)) {
                let _ = write!(
                    part,
                    " ({:.2}x / {:.2}x best SDPA)",
                    best.fwd_ms / ours.fwd_ms,
                    best.bwd_ms / ours.bwd_ms
                );
            }
            Some(part)
        })
        .collect();
    format!("flash attention at T = {HEADLINE_T}: {}", parts.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(name: &str, times: Result<Times, String>) -> Row {
        Row { dtype: "bf16", t: 1024, name: name.into(), times }
    }

    #[test]
    fn report_and_headline() {
        let f = fwd_flops(1024);
        assert_eq!(f, 2.0 * 16.0 * 1024.0 * 1024.0 * 768.0);
        let ms = |tf: f64| f / tf / 1e9;
        let rows = [
            row("flash (ours)", Ok(Times { fwd_ms: ms(200.0), bwd_ms: 2.5 * ms(100.0) })),
            row(
                "SDPA flash (PyTorch 2.11)",
                Ok(Times { fwd_ms: ms(100.0), bwd_ms: 2.5 * ms(200.0) }),
            ),
            row("SDPA cuDNN (PyTorch 2.11)", Err("not supported".into())),
        ];
        let meta = report::Meta {
            device: "H100".into(),
            device_name: "NVIDIA H100".into(),
            date: "2026-01-01".into(),
            commit: "abc".into(),
            warmup: 5,
            reps: 25,
            l2_bytes: 50 << 20,
        };
        let md = markdown(&meta, &rows);
        assert!(md.contains("## bf16, T = 1024"), "{md}");
        assert!(md.contains("| flash (ours) | 0.129 | 200.0 | 0.644 | 100.0 |"), "{md}");
        assert!(
            md.contains("| SDPA cuDNN (PyTorch 2.11) | unavailable: not supported | | | |"),
            "{md}"
        );
        assert!(md.contains("ours / best SDPA speed: forward 2.00, backward 0.50"), "{md}");
        assert_eq!(
            headline(&rows),
            "flash attention at T = 1024: bf16 fwd 200 / bwd 100 TFLOP/s (2.00x / 0.50x best SDPA)"
        );
    }
}
