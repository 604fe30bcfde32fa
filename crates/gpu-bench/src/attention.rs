//! `cargo xtask bench attention`: our flash attention forward at GPT-2 124M's attention shape
//! (B = 16, T = 1024, NH = 12, HD = 64, causal) in bf16 and f16, against PyTorch in the same
//! run (`scaled_dot_product_attention`, and the materialised `softmax(q·kᵀ)·v` path), written to
//! `bench/attention-<device>.md`.
//!
//! Method: CUDA events around every launch, warm-up launches first, the median of the timed
//! launches, inputs rotated over enough copies to exceed 2 × L2, random data. TFLOP/s counts the
//! causal half of the two matmuls: `2 · B·NH·T²·HD` (`4·B·NH·T²·HD` halved). The PyTorch side
//! is `bench/attention_torch.py` (found through `$GPU_BENCH_SCRIPTS`, which the GPU bundle
//! sets, else `bench/` under the current folder), run with `python3` when PyTorch imports.

use crate::data::{Value, random};
use crate::report;
use crate::timing::{RunArgs, Timer};
use anyhow::{Context, Result};
use gpu_host::kernels::attention::AttentionShape;
use gpu_host::kernels::flash::{FlashElement, FlashForward, flash_attention_forward};
use gpu_host::{Device, DeviceBuffer, Gpu};
use half::{bf16, f16};
use std::fmt::Write;
use std::path::PathBuf;
use std::process::Command;

/// GPT-2 124M's attention at B = 16, T = 1024.
const SHAPE: AttentionShape = AttentionShape { b: 16, t: 1024, c: 768, nh: 12 };

/// Options of `bench attention`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Timing and report options.
    #[command(flatten)]
    pub run: RunArgs,
}

/// One precision's measurements.
struct Row {
    dtype: &'static str,
    ours_ms: f64,
    torch: Option<TorchTimes>,
}

/// PyTorch's times for the same shape and precision.
struct TorchTimes {
    version: String,
    sdpa_ms: f64,
    materialised_ms: f64,
}

/// Causal forward FLOPs of [`SHAPE`].
fn flops() -> f64 {
    let AttentionShape { b, t, c, .. } = SHAPE;
    2.0 * (b * t * t * c) as f64
}

fn tflops(ms: f64) -> f64 {
    flops() / (ms * 1e-3) / 1e12
}

/// Runs the benchmark (see the module docs).
pub fn run(args: &Args) -> Result<()> {
    let (gpu, l2_bytes) = args.run.start("attention")?;
    let timer = args.run.timer(&gpu);
    let rows = vec![
        measure::<bf16>(&gpu, &timer, l2_bytes, "bf16", args)?,
        measure::<f16>(&gpu, &timer, l2_bytes, "f16", args)?,
    ];
    let meta = args.run.meta(&gpu, l2_bytes);
    let text = markdown(&meta, &rows);
    let path = args.run.report_path("attention", &meta.device_name);
    crate::write_atomic(&path, &text)?;
    println!("\n{text}\nbench attention: wrote {}", path.display());
    println!("headline: {}", headline(&rows));
    Ok(())
}

fn measure<T: FlashElement + Value>(
    gpu: &Gpu,
    timer: &Timer<'_>,
    l2_bytes: usize,
    dtype: &'static str,
    args: &Args,
) -> Result<Row> {
    let AttentionShape { b, t, c, nh } = SHAPE;
    let qkv_len = b * t * 3 * c;
    let sets = (2 * l2_bytes).div_ceil(qkv_len * size_of::<T>()).clamp(1, 8);
    let inputs = (0..sets as u64)
        .map(|i| Ok(gpu.upload(&random::<T>(qkv_len, i + 1))?))
        .collect::<Result<Vec<_>>>()?;
    let mut out = gpu.alloc::<T>(b * t * c)?;
    let mut lse = gpu.alloc::<f32>(b * nh * t)?;
    let ours_ms = timer.median_ms(sets, |i| {
        let args = FlashForward { qkv: inputs[i].view(), out: out.view_mut(), lse: lse.view_mut() };
        Ok(flash_attention_forward(gpu, SHAPE, args)?)
    })?;
    let torch = torch_times(dtype, args)?;
    let row = Row { dtype, ours_ms, torch };
    println!("{}", progress_line(&row));
    Ok(row)
}

/// PyTorch's times, or `None` (with a note) when `python3` cannot import torch.
fn torch_times(dtype: &str, args: &Args) -> Result<Option<TorchTimes>> {
    let scripts =
        std::env::var_os("GPU_BENCH_SCRIPTS").map_or_else(|| PathBuf::from("bench"), PathBuf::from);
    let script = scripts.join("attention_torch.py");
    let AttentionShape { b, t, c, nh } = SHAPE;
    let output = Command::new("python3")
        .arg(&script)
        .args(["--b", &b.to_string(), "--t", &t.to_string(), "--nh", &nh.to_string()])
        .args(["--hd", &(c / nh).to_string(), "--dtype", dtype])
        .args(["--warmup", &args.run.warmup.to_string(), "--reps", &args.run.reps.to_string()])
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
            return Ok(None);
        }
        Err(e) => {
            println!("bench attention: no PyTorch baseline (python3: {e})");
            return Ok(None);
        }
    };
    let json: serde_json::Value = serde_json::from_slice(&output.stdout)
        .with_context(|| format!("parsing the output of {}", script.display()))?;
    let number = |key: &str| json[key].as_f64().with_context(|| format!("{key} missing in {json}"));
    Ok(Some(TorchTimes {
        version: json["torch"].as_str().unwrap_or("?").to_string(),
        sdpa_ms: number("sdpa_ms")?,
        materialised_ms: number("materialised_ms")?,
    }))
}

fn progress_line(row: &Row) -> String {
    let mut line =
        format!("{:5} ours {:8.3} ms {:6.1} TFLOP/s", row.dtype, row.ours_ms, tflops(row.ours_ms));
    if let Some(t) = &row.torch {
        let _ = write!(
            line,
            "  sdpa {:8.3} ms {:6.1} TFLOP/s  materialised {:8.3} ms",
            t.sdpa_ms,
            tflops(t.sdpa_ms),
            t.materialised_ms
        );
    }
    line
}

fn markdown(meta: &report::Meta, rows: &[Row]) -> String {
    let AttentionShape { b, t, c, nh } = SHAPE;
    let mut s = String::new();
    let _ = writeln!(s, "# Attention forward benchmark: {}\n", meta.device_name);
    let _ = writeln!(s, "- Device: {}", meta.device);
    let _ = writeln!(s, "- Date (UTC): {}; commit: `{}`", meta.date, meta.commit);
    let _ = writeln!(
        s,
        "- Shape: causal, B = {b}, T = {t}, NH = {nh}, HD = {} (GPT-2 124M at B·T = 16384). \
         TFLOP/s = 2·B·NH·T²·HD / time (the causal half of the two matmuls).",
        c / nh
    );
    let _ = writeln!(
        s,
        "- Method: `cargo xtask bench attention`. CUDA events, {} warm-up launches, median of {} \
         timed launches, inputs rotated past 2 × L2 ({} MB), random data. PyTorch: \
         `bench/attention_torch.py` in the same run (`scaled_dot_product_attention(is_causal=True)` \
         and the materialised `softmax(q·kᵀ/√d)·v`), timed the same way.\n",
        meta.warmup,
        meta.reps,
        meta.l2_bytes >> 20
    );
    let _ = writeln!(
        s,
        "| type | ours ms | ours TFLOP/s | PyTorch SDPA ms | SDPA TFLOP/s | ours / SDPA speed | PyTorch materialised ms |"
    );
    let _ = writeln!(s, "|---|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        match &r.torch {
            Some(t) => {
                let _ = writeln!(
                    s,
                    "| {} | {:.3} | {:.1} | {:.3} | {:.1} | {:.2} | {:.3} |",
                    r.dtype,
                    r.ours_ms,
                    tflops(r.ours_ms),
                    t.sdpa_ms,
                    tflops(t.sdpa_ms),
                    t.sdpa_ms / r.ours_ms,
                    t.materialised_ms
                );
            }
            None => {
                let _ = writeln!(
                    s,
                    "| {} | {:.3} | {:.1} | — | — | — | — |",
                    r.dtype,
                    r.ours_ms,
                    tflops(r.ours_ms)
                );
            }
        }
    }
    if let Some(t) = rows.iter().find_map(|r| r.torch.as_ref()) {
        let _ = writeln!(s, "\nPyTorch {}.", t.version);
    } else {
        let _ =
            writeln!(s, "\nNo PyTorch baseline: `python3` could not import torch on this machine.");
    }
    s
}

fn headline(rows: &[Row]) -> String {
    let parts: Vec<String> = rows
        .iter()
        .map(|r| match &r.torch {
            Some(t) => format!(
                "{} {:.0} TFLOP/s ({:.2}x SDPA)",
                r.dtype,
                tflops(r.ours_ms),
                t.sdpa_ms / r.ours_ms
            ),
            None => format!("{} {:.0} TFLOP/s", r.dtype, tflops(r.ours_ms)),
        })
        .collect();
    format!("flash forward, GPT-2 124M shape: {}", parts.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flops_and_report() {
        assert_eq!(flops(), 2.0 * 16.0 * 1024.0 * 1024.0 * 768.0);
        let rows = [
            Row {
                dtype: "bf16",
                ours_ms: 1.0,
                torch: Some(TorchTimes {
                    version: "2.11".into(),
                    sdpa_ms: 2.0,
                    materialised_ms: 8.0,
                }),
            },
            Row { dtype: "f16", ours_ms: 1.0, torch: None },
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
        assert!(md.contains("| bf16 | 1.000 | 25.8 | 2.000 | 12.9 | 2.00 | 8.000 |"), "{md}");
        assert!(md.contains("| f16 | 1.000 | 25.8 | — |"), "{md}");
        assert_eq!(
            headline(&rows),
            "flash forward, GPT-2 124M shape: bf16 26 TFLOP/s (2.00x SDPA), f16 26 TFLOP/s"
        );
    }
}
