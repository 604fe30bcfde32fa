//! `cargo xtask bench kernels`: achieved bandwidth of the memory-bound kernels at GPT-2 124M
//! training sizes (B = 16, T = 1024: 16384 rows of C = 768; the classifier's rows hold
//! V = 50257 real logits padded to Vp = 50304), against a device-to-device copy measured in
//! the same run, written to `bench/kernels-<device>.md`.
//!
//! The encoder's 16384 token ids are `i·7919 mod V` (all distinct but for a few), and for its
//! backward also Zipf-like, as in text: id `⌊(V + 1)^u⌋ − 1` for `u` the fractional part of
//! `i·φ`, the most frequent id at 6.4% of the batch (GPT-2's newline is 11.9% of the first
//! 16384 tokens of the bundled Shakespeare), whose bucket is the backward's longest chain of
//! rows.
//!
//! Method: CUDA events around every launch, warm-up launches first, the median of the timed
//! launches; each kernel rotates over enough copies of its buffers to touch twice the L2 cache;
//! random inputs. "Bytes" counts what the kernel must move at least: every input read once and
//! every output written once (a kernel that reads a row twice, like the classifier, is charged
//! once). GB/s = bytes / time; "% of copy" compares with `cuMemcpyDtoDAsync` of 512 MiB, which
//! moves 1 GiB (read + write).

use crate::data::{Value, random};
use crate::report;
use crate::timing::{RunArgs, Timer};
use anyhow::Result;
use gpu_host::kernels::adamw::{
    AdamWBuffers, AdamWHyper, AdamWTable, AdamWTensor, WorkingRounding, adamw,
};
use gpu_host::kernels::classifier::{
    Classifier, ClassifierPath, LogitsGradient, Vocab, fused_classifier_on, stages_on,
};
use gpu_host::kernels::elementwise::{FloatElement, add, fill};
use gpu_host::kernels::encoder::{TokenShape, Tokens, encoder_backward, encoder_forward};
use gpu_host::kernels::gelu::{gelu_backward, gelu_forward};
use gpu_host::kernels::grad_norm::{GRAD_NORM_WORKSPACE_LEN, grad_norm};
use gpu_host::kernels::layernorm::{
    LayerNormBackward, LayerNormForward, LayerNormStats, ResidualLayerNormForward,
    layernorm_backward, layernorm_backward_scratch_len, layernorm_forward,
    residual_layernorm_forward,
};
use gpu_host::{Device, DeviceBuffer, DeviceElement, Gpu};
use half::bf16;
use kernel_abi::Bf16;
use kernel_abi::adamw::AdamWKernel;
use std::fmt::Write;

/// Rows of activations: B·T.
const ROWS: usize = 16 * 1024;
/// Channels.
const C: usize = 768;
/// Real and padded vocabulary.
const VOCAB: Vocab = Vocab { v: 50257, vp: 50304, ld: 50304 };
/// Parameters of GPT-2 124M with the vocabulary padded to 50304 (the AdamW arena).
const PARAMS: usize = 124_475_904;
/// Bytes the copy baseline copies (it moves twice this).
const COPY_BYTES: usize = 512 << 20;

/// Options of `bench kernels`.
#[derive(clap::Args, Clone, Debug)]
pub struct Args {
    /// Timing and report options.
    #[command(flatten)]
    pub run: RunArgs,
    /// Only kernels whose name contains this (e.g. `layernorm`).
    #[arg(long)]
    pub only: Option<String>,
}

/// One measured kernel.
struct Row {
    kernel: String,
    dtype: &'static str,
    shape: String,
    bytes: f64,
    ms: f64,
}

impl Row {
    fn gb_per_s(&self) -> f64 {
        self.bytes / (self.ms * 1e-3) / 1e9
    }
}

/// What one measurement needs besides its buffers.
struct Case {
    kernel: &'static str,
    shape: String,
    /// Minimum bytes moved per launch (also the working set that decides the rotation).
    bytes: usize,
}

struct Bench<'a> {
    gpu: &'a Gpu,
    timer: Timer<'a>,
    l2_bytes: usize,
    only: Option<String>,
    rows: Vec<Row>,
}

impl Bench<'_> {
    /// Times `launch` over `make(i)`-built buffer sets, as many as it takes to touch 2 × L2.
    fn measure<S>(
        &mut self,
        dtype: &'static str,
        case: Case,
        mut make: impl FnMut(&Gpu, u64) -> Result<S>,
        mut launch: impl FnMut(&Gpu, &mut S) -> Result<()>,
    ) -> Result<()> {
        if self.only.as_ref().is_some_and(|s| !case.kernel.contains(s.as_str())) {
            return Ok(());
        }
        let count = (2 * self.l2_bytes).div_ceil(case.bytes.max(1)).clamp(1, 8);
        let gpu = self.gpu;
        let mut sets = (0..count as u64).map(|i| make(gpu, i)).collect::<Result<Vec<_>>>()?;
        let ms = self.timer.median_ms(count, |i| launch(gpu, &mut sets[i]))?;
        let row = Row {
            kernel: case.kernel.into(),
            dtype,
            shape: case.shape,
            bytes: case.bytes as f64,
            ms,
        };
        println!(
            "{:30} {:5} {:22} {:9.1} MB {:9.1} us {:8.1} GB/s",
            row.kernel,
            row.dtype,
            row.shape,
            row.bytes / 1e6,
            row.ms * 1e3,
            row.gb_per_s()
        );
        self.rows.push(row);
        Ok(())
    }

    /// Every kernel of one storage type.
    fn storage_type<T>(&mut self, dtype: &'static str) -> Result<()>
    where
        T: FloatElement + Value + DeviceElement<Abi: AdamWKernel<Bf16>>,
    {
        let s = size_of::<T>();
        let (n, wide) = (ROWS * C, ROWS * 4 * C);
        let rows_c = format!("{ROWS}×{C}");

        let t = 1024;
        let ids: Vec<u32> = (0..ROWS as u64).map(|i| (i * 7919 % VOCAB.v as u64) as u32).collect();
        let shape = TokenShape { b: ROWS / t, t, vocab: VOCAB.v };
        self.measure(
            dtype,
            Case {
                kernel: "encoder_forward",
                shape: rows_c.clone(),
                bytes: 2 * n * s + t * C * s + ROWS * 4,
            },
            |gpu, i| {
                let [wte, wpe] = [VOCAB.vp * C, t * C].map(|len| upload::<T>(gpu, len, 10 * i));
                Ok((
                    Tokens::upload(gpu, &ids, shape)?,
                    wte?,
                    wpe?,
                    upload::<T>(gpu, n, 10 * i + 2)?,
                ))
            },
            |gpu, (tokens, wte, wpe, out)| {
                Ok(encoder_forward(gpu, tokens, wte.view(), wpe.view(), out.view_mut(), C)?)
            },
        )?;
        for ids in [ids, zipf_ids(ROWS, VOCAB.v)] {
            let mut counts = std::collections::HashMap::new();
            ids.iter().for_each(|&id| *counts.entry(id).or_insert(0usize) += 1);
            let (distinct, largest) = (counts.len(), counts.values().max().copied().unwrap_or(0));
            self.measure(
                dtype,
                Case {
                    kernel: "encoder_backward",
                    shape: format!("{ROWS}×{C}, {distinct} ids, largest ×{largest}"),
                    bytes: n * s + 2 * (distinct + t) * C * 4 + ROWS * 16,
                },
                |gpu, i| {
                    let [dwte, dwpe] =
                        [VOCAB.vp * C, t * C].map(|len| upload::<f32>(gpu, len, 10 * i));
                    Ok((
                        Tokens::upload(gpu, &ids, shape)?,
                        upload::<T>(gpu, n, 10 * i + 2)?,
                        dwte?,
                        dwpe?,
                    ))
                },
                |gpu, (tokens, dout, dwte, dwpe)| {
                    let (dout, dwte, dwpe) = (dout.view(), dwte.view_mut(), dwpe.view_mut());
                    Ok(encoder_backward(gpu, tokens, dout, dwte, dwpe, C)?)
                },
            )?;
        }
        self.measure(
            dtype,
            Case {
                kernel: "gelu_forward",
                shape: format!("{ROWS}×{}", 4 * C),
                bytes: 2 * wide * s,
            },
            |gpu, i| Ok([upload::<T>(gpu, wide, 10 * i)?, upload::<T>(gpu, wide, 10 * i + 1)?]),
            |gpu, [x, out]| Ok(gelu_forward(gpu, x.view(), out.view_mut())?),
        )?;
        self.measure(
            dtype,
            Case {
                kernel: "gelu_backward",
                shape: format!("{ROWS}×{}", 4 * C),
                bytes: 3 * wide * s,
            },
            |gpu, i| uploads::<T>(gpu, wide, 3, 10 * i),
            |gpu, b| {
                let [x, g, d] = b.as_mut_slice() else { unreachable!("three buffers") };
                Ok(gelu_backward(gpu, x.view(), g.view(), d.view_mut())?)
            },
        )?;
        self.measure(
            dtype,
            Case { kernel: "add (residual)", shape: rows_c.clone(), bytes: 3 * n * s },
            |gpu, i| uploads::<T>(gpu, n, 3, 10 * i),
            |gpu, b| {
                let [x, y, out] = b.as_mut_slice() else { unreachable!("three buffers") };
                Ok(add(gpu, x.view(), y.view(), out.view_mut())?)
            },
        )?;
        let stats_bytes = 2 * ROWS * 4;
        self.measure(
            dtype,
            Case {
                kernel: "layernorm_forward",
                shape: rows_c.clone(),
                bytes: 2 * n * s + stats_bytes,
            },
            |gpu, i| Ok((LnBuffers::<T>::new(gpu, i)?, upload::<T>(gpu, n, 10 * i + 9)?)),
            |gpu, (b, out)| {
                let stats =
                    Some(LayerNormStats { mean: b.mean.view_mut(), rstd: b.rstd.view_mut() });
                let args = LayerNormForward {
                    inp: b.x.view(),
                    weight: b.w.view(),
                    bias: b.b.view(),
                    out: out.view_mut(),
                    stats,
                };
                Ok(layernorm_forward(gpu, C, args)?)
            },
        )?;
        self.measure(
            dtype,
            Case {
                kernel: "residual_layernorm_forward",
                shape: rows_c.clone(),
                bytes: 4 * n * s + stats_bytes,
            },
            |gpu, i| {
                let more = uploads::<T>(gpu, n, 3, 10 * i + 7)?;
                Ok((LnBuffers::<T>::new(gpu, i)?, more))
            },
            |gpu, (b, more)| {
                let [inp2, residual, out] = more.as_mut_slice() else {
                    unreachable!("three buffers")
                };
                let stats =
                    Some(LayerNormStats { mean: b.mean.view_mut(), rstd: b.rstd.view_mut() });
                let args = ResidualLayerNormForward {
                    inp1: b.x.view(),
                    inp2: inp2.view(),
                    residual: residual.view_mut(),
                    weight: b.w.view(),
                    bias: b.b.view(),
                    out: out.view_mut(),
                    stats,
                };
                Ok(residual_layernorm_forward(gpu, C, args)?)
            },
        )?;
        // Plain, and summing `dinp` as the trainer's residual projections' bias gradients do.
        for (colsum, kernel) in [(false, "layernorm_backward"), (true, "layernorm_backward_colsum")]
        {
            let sum_bytes = if colsum { 4 * C } else { 0 };
            let bytes = 4 * n * s + stats_bytes + sum_bytes;
            self.measure(
                dtype,
                Case { kernel, shape: rows_c.clone(), bytes },
                |gpu, i| {
                    let more = uploads::<T>(gpu, n, 2, 10 * i + 7)?;
                    let grads = [C, C, C, layernorm_backward_scratch_len(ROWS, C, colsum)]
                        .map(|len| upload::<f32>(gpu, len, 10 * i + 6))
                        .into_iter()
                        .collect::<Result<Vec<_>>>()?;
                    Ok((LnBuffers::<T>::new(gpu, i)?, more, grads))
                },
                |gpu, (b, more, grads)| {
                    let [dout, dinp] = more.as_mut_slice() else { unreachable!("two buffers") };
                    let [dw, db, sum, scratch] = grads.as_mut_slice() else {
                        unreachable!("four buffers")
                    };
                    let args = LayerNormBackward {
                        dout: dout.view(),
                        inp: b.x.view(),
                        weight: b.w.view(),
                        mean: b.mean.view(),
                        rstd: b.rstd.view(),
                        dinp: dinp.view_mut(),
                        dweight: dw.view_mut(),
                        dbias: db.view_mut(),
                        dinp_sum: colsum.then(|| sum.view_mut()),
                        // A training step's first micro-batch: the gradients overwritten.
                        beta: 0.0,
                        scratch: scratch.view_mut(),
                    };
                    Ok(layernorm_backward(gpu, C, args)?)
                },
            )?;
        }
        let logits = ROWS * VOCAB.vp;
        // Both kernels, the staged one where a row fits in shared memory (f32 does not on an
        // A100): the report shows what staging the row saves over re-reading it from L2.
        let staged_fits = stages_on::<T>(self.gpu, VOCAB.vp);
        let paths = [
            (ClassifierPath::Staged, "fused_classifier_staged"),
            (ClassifierPath::TwoReads, "fused_classifier"),
        ];
        for (path, kernel) in paths {
            if path == ClassifierPath::Staged && !staged_fits {
                continue;
            }
            self.measure(
                dtype,
                Case {
                    kernel,
                    shape: format!("{ROWS}×{} (V {})", VOCAB.vp, VOCAB.v),
                    bytes: 2 * logits * s + ROWS * 8,
                },
                |gpu, i| {
                    let targets: Vec<u32> =
                        (0..ROWS as u32).map(|r| (r * 7919 + i as u32) % VOCAB.v as u32).collect();
                    Ok((
                        upload::<T>(gpu, logits, 10 * i)?,
                        gpu.alloc::<f32>(ROWS)?,
                        gpu.upload(&targets)?,
                    ))
                },
                |gpu, (x, losses, targets)| {
                    // The gradient overwrites the logits: later launches see gradients, which
                    // the kernel handles at the same speed (no data-dependent branches).
                    let args = Classifier {
                        logits: x.view_mut(),
                        losses: losses.view_mut(),
                        targets: targets.view(),
                    };
                    let gradient = LogitsGradient::Write { dloss: 1.0 / ROWS as f32 };
                    Ok(fused_classifier_on(gpu, path, VOCAB, gradient, args)?)
                },
            )?;
        }
        self.optimizer::<T>(dtype)
    }

    /// The gradient norm and AdamW over GPT-2 124M's parameter arena, gradients in `T`. With
    /// 16-bit gradients AdamW also writes the bf16 working copy (the mixed-precision step).
    fn optimizer<T>(&mut self, dtype: &'static str) -> Result<()>
    where
        T: FloatElement + Value + DeviceElement<Abi: AdamWKernel<Bf16>>,
    {
        let s = size_of::<T>();
        let n = PARAMS;
        self.measure(
            dtype,
            Case { kernel: "grad_norm", shape: format!("{n} params"), bytes: n * s },
            |gpu, i| {
                let workspace = gpu.alloc::<u64>(GRAD_NORM_WORKSPACE_LEN)?;
                Ok((upload::<T>(gpu, n, 10 * i)?, workspace, gpu.alloc::<f32>(2)?))
            },
            |gpu, (grads, workspace, out)| {
                Ok(grad_norm(gpu, grads.view(), workspace.view_mut(), out.view_mut())?)
            },
        )?;
        let working = s == 2;
        let half = n / 2;
        let table = AdamWTable::new(
            self.gpu,
            &[
                AdamWTensor { offset: 0, len: half as u32, weight_decay: 0.1 },
                AdamWTensor { offset: half as u64, len: (n - half) as u32, weight_decay: 0.0 },
            ],
            n,
        )?;
        let hyper = AdamWHyper {
            lr: 6e-4,
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            t: 10,
            grad_scale: 1.0,
            rounding: WorkingRounding::NearestEven,
        };
        let copy = if working { " + bf16 copy" } else { "" };
        self.measure(
            dtype,
            Case {
                kernel: "adamw",
                shape: format!("{n} params{copy}"),
                bytes: n * (24 + s + if working { 2 } else { 0 }),
            },
            |gpu, i| {
                let [p, m, v] = [0, 1, 2].map(|k| upload::<f32>(gpu, n, 10 * i + k));
                let mut v = v?;
                // Second moments must be non-negative, as AdamW keeps them.
                fill(gpu, v.view_mut(), 1e-4)?;
                let copy = if working { Some(upload::<bf16>(gpu, n, 10 * i + 4)?) } else { None };
                Ok((p?, upload::<T>(gpu, n, 10 * i + 3)?, m?, v, copy))
            },
            |gpu, (p, g, m, v, copy)| {
                let bufs = AdamWBuffers {
                    params: p.view_mut(),
                    grads: g.view(),
                    m: m.view_mut(),
                    v: v.view_mut(),
                    working: copy.as_mut().map(|c| c.view_mut()),
                };
                Ok(adamw(gpu, &table, bufs, &hyper)?)
            },
        )
    }
}

/// `n` Zipf-like ids below `v`: `⌊(v + 1)^u⌋ − 1` for `u` the fractional part of `i·φ`, so
/// that id `r` has the share `log(1 + 1/(r + 1)) / log(v + 1)` of the batch.
fn zipf_ids(n: usize, v: usize) -> Vec<u32> {
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    let top = (v + 1) as f64;
    (0..n).map(|i| ((top.powf((i as f64 * phi).fract()) as usize).clamp(1, v) - 1) as u32).collect()
}

/// `len` random values of `T` on the GPU.
fn upload<T: Value + gpu_host::DeviceElement>(
    gpu: &Gpu,
    len: usize,
    seed: u64,
) -> Result<<Gpu as Device>::Buffer<T>> {
    Ok(gpu.upload(&random::<T>(len, seed))?)
}

/// `count` buffers of `len` random values, seeded `seed, seed + 1, …`.
fn uploads<T: Value + gpu_host::DeviceElement>(
    gpu: &Gpu,
    len: usize,
    count: u64,
    seed: u64,
) -> Result<Vec<<Gpu as Device>::Buffer<T>>> {
    (seed..seed + count).map(|k| upload(gpu, len, k)).collect()
}

/// A layernorm problem's input, parameters and statistics.
struct LnBuffers<T: gpu_host::DeviceElement> {
    x: <Gpu as Device>::Buffer<T>,
    w: <Gpu as Device>::Buffer<T>,
    b: <Gpu as Device>::Buffer<T>,
    mean: <Gpu as Device>::Buffer<f32>,
    rstd: <Gpu as Device>::Buffer<f32>,
}

impl<T: FloatElement + Value> LnBuffers<T> {
    fn new(gpu: &Gpu, i: u64) -> Result<Self> {
        let mut rstd = random::<f32>(ROWS, 10 * i + 5);
        rstd.iter_mut().for_each(|r| *r = r.abs() + 0.5);
        Ok(Self {
            x: upload(gpu, ROWS * C, 10 * i + 2)?,
            w: upload(gpu, C, 10 * i + 3)?,
            b: upload(gpu, C, 10 * i + 4)?,
            mean: upload(gpu, ROWS, 10 * i + 5)?,
            rstd: gpu.upload(&rstd)?,
        })
    }
}

/// Runs the benchmark (see the module docs).
pub fn run(args: &Args) -> Result<()> {
    let (gpu, l2_bytes) = args.run.start("kernels")?;
    let timer = args.run.timer(&gpu);
    let copy_gb_per_s = copy_bandwidth(&gpu, &timer)?;
    println!("device-to-device copy: {copy_gb_per_s:.1} GB/s (read + write)");
    let mut bench = Bench { gpu: &gpu, timer, l2_bytes, only: args.only.clone(), rows: Vec::new() };
    bench.storage_type::<f32>("f32")?;
    bench.storage_type::<bf16>("bf16")?;

    let meta = args.run.meta(&gpu, l2_bytes);
    let text = markdown(&meta, copy_gb_per_s, &bench.rows);
    let path = args.run.report_path("kernels", &meta.device_name);
    crate::write_atomic(&path, &text)?;
    println!("\n{text}\nbench kernels: wrote {}", path.display());
    println!("headline: {}", headline(copy_gb_per_s, &bench.rows));
    Ok(())
}

/// GB/s of `cuMemcpyDtoDAsync` over [`COPY_BYTES`], counting the bytes read and written.
fn copy_bandwidth(gpu: &Gpu, timer: &Timer<'_>) -> Result<f64> {
    let src = gpu.upload(&random::<f32>(COPY_BYTES / 4, 1))?;
    let dst = gpu.alloc::<f32>(COPY_BYTES / 4)?;
    let (from, to) = (src.view().addr(), dst.view().addr());
    let stream = gpu.stream().cu_stream();
    let ms = timer.median_ms(1, |_| {
        // SAFETY: both allocations hold COPY_BYTES and outlive the timed launches (the timer
        // synchronises before returning).
        unsafe { cudarc::driver::result::memcpy_dtod_async(to, from, COPY_BYTES, stream)? };
        Ok(())
    })?;
    Ok(2.0 * COPY_BYTES as f64 / (ms * 1e-3) / 1e9)
}

fn markdown(meta: &report::Meta, copy: f64, rows: &[Row]) -> String {
    let mut s = meta.header("Memory-bound kernels");
    let _ = writeln!(
        s,
        "- Method: `cargo xtask bench kernels`. CUDA events around every launch, {} warm-up \
         launches, median of {} timed launches; buffers rotated over enough copies to exceed \
         2 × L2 ({} MB); random inputs. Bytes = every input read once and every output \
         written once (the minimum). Baseline: `cuMemcpyDtoDAsync` of {} MiB, {copy:.1} GB/s \
         counting read + write.",
        meta.warmup,
        meta.reps,
        meta.l2_bytes >> 20,
        COPY_BYTES >> 20
    );
    let _ = writeln!(
        s,
        "- Sizes: GPT-2 124M at B = 16, T = 1024 (rows = B·T, C = 768, 4C for GELU).\n"
    );
    let _ = writeln!(s, "| kernel | type | shape | MB moved | µs | GB/s | % of copy |");
    let _ = writeln!(s, "|---|---|---|---:|---:|---:|---:|");
    for r in rows {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {:.1} | {:.1} | {:.0} | {:.0} |",
            r.kernel,
            r.dtype,
            r.shape,
            r.bytes / 1e6,
            r.ms * 1e3,
            r.gb_per_s(),
            100.0 * r.gb_per_s() / copy
        );
    }
    s
}

fn headline(copy: f64, rows: &[Row]) -> String {
    let mut pct: Vec<f64> = rows.iter().map(|r| 100.0 * r.gb_per_s() / copy).collect();
    let median = report::median(&mut pct);
    let worst = rows
        .iter()
        .min_by(|a, b| a.gb_per_s().total_cmp(&b.gb_per_s()))
        .map(|r| format!("{} {} {:.0}%", r.kernel, r.dtype, 100.0 * r.gb_per_s() / copy))
        .unwrap_or_default();
    format!("copy {copy:.0} GB/s; kernels at median {median:.0}% of copy, slowest {worst}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_rows_and_headline() {
        let row = |kernel: &str, ms| Row {
            kernel: kernel.into(),
            dtype: "bf16",
            shape: "1×1".into(),
            bytes: 3e9,
            ms,
        };
        let rows = [row("a", 1.0), row("b", 2.0)];
        assert_eq!(rows[0].gb_per_s(), 3000.0);
        let meta = report::Meta {
            device: "H100".into(),
            device_name: "NVIDIA H100".into(),
            date: "2026-01-01".into(),
            commit: "abc".into(),
            warmup: 5,
            reps: 50,
            l2_bytes: 50 << 20,
        };
        let md = markdown(&meta, 3000.0, &rows);
        assert!(md.contains("| a | bf16 | 1×1 | 3000.0 | 1000.0 | 3000 | 100 |"), "{md}");
        assert_eq!(
            headline(3000.0, &rows),
            "copy 3000 GB/s; kernels at median 75% of copy, slowest b bf16 50%"
        );
    }
}
