//! `trainer bench --report`: the timings as a markdown report, one row per model and
//! precision, with the device, date, commit and method.

use super::{BenchResult, BenchRun};
use crate::backend::op_times::{OpClock, OpTime, OpTimes};
use crate::backend::{Precision, TUNING_RUNS, TunedGemm};
use crate::mfu::{self, Peak};
use crate::model::Gpt2Config;
use crate::report::{ReportMeta, thousands};
use gpu_host::kernels::gemm::WgmmaTile;
use std::fmt::Write;

/// One configuration `trainer bench` timed (or tried to).
#[derive(Clone, Debug)]
pub struct BenchRow {
    /// The `--model` name (`d12`).
    pub model: String,
    /// Its dimensions.
    pub config: Gpt2Config,
    /// The precision it ran in.
    pub precision: Precision,
    /// The attention kernel's CLI name.
    pub attention: &'static str,
    /// GELU and the residual adds fused.
    pub fused: bool,
    /// Batch shape and step counts.
    pub run: BenchRun,
    /// The timings, or why there are none.
    pub outcome: std::result::Result<BenchOutcome, String>,
}

/// What a configuration that ran measured, and where.
#[derive(Clone, Debug)]
pub struct BenchOutcome {
    /// The backend's one-line description (device, precision, kernels).
    pub backend: String,
    /// The GPU's name as the driver reports it, on a GPU.
    pub gpu: Option<String>,
    /// The timings.
    pub result: BenchResult,
}

impl BenchRow {
    /// Model FLOPs per token: 6·N + 6·L·C·T, N counted with the unpadded vocabulary (padding
    /// is not useful work).
    pub fn flops_per_token(&self) -> f64 {
        mfu::flops_per_token(&self.config, self.run.t)
    }

    /// The GPU's dense peak in this row's precision, when it ran on a GPU in the table.
    pub fn peak(&self) -> Option<Peak> {
        let gpu = self.outcome.as_ref().ok()?.gpu.as_deref()?;
        mfu::peak(gpu, self.precision)
    }

    /// Model FLOPs utilisation (a fraction), when the peak is known.
    pub fn mfu(&self) -> Option<f64> {
        let tokens_per_sec = self.outcome.as_ref().ok()?.result.tokens_per_sec;
        Some(self.flops_per_token() * tokens_per_sec / self.peak()?.flops)
    }

    /// `d12 bf16: 412,345 tokens/s (MFU 41.2%)`, or why it failed.
    pub fn summary(&self) -> String {
        let what = format!("{} {}", self.model, self.precision.name());
        match (&self.outcome, self.mfu()) {
            (Ok(o), Some(m)) => format!(
                "{what}: {} tokens/s (MFU {:.1}%)",
                thousands(o.result.tokens_per_sec),
                100.0 * m
            ),
            (Ok(o), None) => format!("{what}: {} tokens/s", thousands(o.result.tokens_per_sec)),
            (Err(e), _) => format!("{what}: failed: {e}"),
        }
    }
}

/// The report in markdown.
pub fn markdown(rows: &[BenchRow], meta: &ReportMeta<'_>) -> String {
    let gpu = rows.iter().find_map(|r| r.outcome.as_ref().ok()?.gpu.clone());
    let backend = rows.iter().find_map(|r| Some(r.outcome.as_ref().ok()?.backend.clone()));
    let mut s = format!(
        "# GPT-2 training throughput: {}\n\n- Date (UTC): {}; commit: `{}`\n",
        gpu.as_deref().or(backend.as_deref()).unwrap_or("no configuration ran"),
        meta.date,
        meta.commit
    );
    if gpu.is_none() {
        s += "- **Not a GPU: the timings below are meaningless.** This run checks that every \
              configuration trains.\n";
    }
    let _ = writeln!(
        s,
        "- Method: `{}`. Each row builds a fresh model (GPT-2 initialisation, seed 0) and runs \
         warm-up steps, then timed training steps (forward, backward, gradient norm and clip, \
         AdamW) on uniformly random tokens, one micro-batch per step; a step is timed on the \
         wall clock from its first launch to a synchronisation after it; tokens/s = B·T / \
         the median timed step.",
        meta.command
    );
    let mut models: Vec<&BenchRow> = Vec::new();
    for row in rows {
        if !models.iter().any(|m| m.model == row.model && m.run.t == row.run.t) {
            models.push(row);
        }
    }
    let flops: Vec<String> = models
        .iter()
        .map(|r| {
            let c = &r.config;
            format!(
                "{} at T = {}: 6 × {} + 6 × {} × {} × {} = {:.1}M",
                r.model,
                r.run.t,
                c.unpadded().num_params(),
                c.num_layers,
                c.channels,
                r.run.t,
                r.flops_per_token() / 1e6
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "- MFU = model FLOPs per token × tokens/s / the GPU's dense peak in the row's precision \
         (`trainer::mfu`'s table). FLOPs per token = 6·N + 6·L·C·T, N counted with the \
         unpadded vocabulary (padding is not useful work), the causal attention as half of \
         12·L·C·T as llm.c and nanoGPT count it: {}.",
        flops.join("; ")
    );
    s += "\n| model | precision | attention | fused | B | T | steps (warm-up + timed) | \
          ms/step (median) | min–max ms | tokens/s | MFU | backend |\n\
          |---|---|---|---|---:|---:|---|---:|---:|---:|---:|---|\n";
    for r in rows {
        let run = &r.run;
        let (ms, spread, tokens, backend) = match &r.outcome {
            Ok(o) => {
                let t = &o.result;
                let min = t.step_ms.iter().copied().fold(f64::INFINITY, f64::min);
                let max = t.step_ms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                (
                    format!("{:.1}", t.median_ms),
                    format!("{min:.1}–{max:.1}"),
                    thousands(t.tokens_per_sec),
                    o.backend.replace('|', "\\|"),
                )
            }
            Err(e) => {
                let failed = format!("failed: {}", e.replace('|', "\\|"));
                ("–".into(), "–".into(), "–".into(), failed)
            }
        };
        let mfu = r.mfu().map_or("–".into(), |m| format!("{:.1}%", 100.0 * m));
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} | {} | {} + {} | {ms} | {spread} | {tokens} | {mfu} | {backend} |",
            r.model,
            r.precision.name(),
            r.attention,
            if r.fused { "yes" } else { "no" },
            run.b,
            run.t,
            run.warmup,
            run.steps,
        );
    }
    let peaks: Vec<String> = rows
        .iter()
        .filter_map(|r| r.peak().map(|p| (r.precision, p)))
        .map(|(precision, p)| format!("{} {:.1} TFLOP/s", precision.name(), p.flops / 1e12))
        .fold(Vec::new(), |mut seen, p| {
            if !seen.contains(&p) {
                seen.push(p);
            }
            seen
        });
    if let Some(peak) = rows.iter().find_map(BenchRow::peak) {
        let _ = writeln!(s, "\nPeaks used ({}, dense): {}.", peak.gpu, peaks.join(", "));
    }
    s += &tuned_sections(rows);
    s += &op_sections(rows);
    s
}

/// Per configuration that tuned its GEMMs (`--wgmma-tile tuned`), each GEMM's tiles and times
/// (empty when none did).
fn tuned_sections(rows: &[BenchRow]) -> String {
    let tuned: Vec<(&BenchRow, &[TunedGemm])> = rows
        .iter()
        .filter_map(|r| Some((r, r.outcome.as_ref().ok()?.result.tuned.as_slice())))
        .filter(|(_, tuned)| !tuned.is_empty())
        .collect();
    if tuned.is_empty() {
        return String::new();
    }
    let mut s = format!(
        "\n## GEMM tiles tuned by timing\n\n`--wgmma-tile tuned`: on its first call, each \
         forward and input-gradient GEMM, and each weight gradient that runs unsplit, ran on \
         every Hopper tile that takes it (CUDA events around each launch, one untimed launch, \
         the median of {TUNING_RUNS}; on the simulator one host-timed launch); the fastest ran \
         every later call. Every tile computes the same bits.\n"
    );
    for (row, tuned) in tuned {
        let _ = writeln!(s, "\n### {} {}\n", row.model, row.precision.name());
        s += "| GEMM | M×N×K | epilogue | chosen | every tile (ms) |\n|---|---|---|---|---|\n";
        for t in tuned {
            let times: Vec<String> = t
                .timings
                .iter()
                .map(|(tile, ms)| format!("{} {ms:.3}", tile_name(*tile)))
                .collect();
            let _ = writeln!(
                s,
                "| {} | {} | {} | {} | {} |",
                t.op,
                t.shape,
                t.epilogue,
                tile_name(t.chosen),
                times.join(", ")
            );
        }
    }
    s
}

/// A Hopper tile as `--wgmma-tile` names it.
pub fn tile_name(tile: WgmmaTile) -> &'static str {
    match tile {
        WgmmaTile::Auto => "auto",
        WgmmaTile::N128 => "128",
        WgmmaTile::N256 => "256",
        WgmmaTile::PingPong => "pingpong",
        WgmmaTile::Deferred => "deferred",
        WgmmaTile::StreamK => "stream-k",
        WgmmaTile::Tuned => "tuned",
    }
}

/// The clock a recording was read from, in words.
pub fn clock_name(clock: Option<OpClock>) -> &'static str {
    match clock {
        Some(OpClock::Device) => "the GPU's clock",
        Some(OpClock::Host) => "the host clock",
        None => "no clock",
    }
}

/// The log's view of a profiled step: a line with the total, then the `most` slowest ops
/// with their share and, where their work is counted, their throughput and (on a GPU of
/// known `peak`) their share of the roofline (nothing when no op was timed).
pub fn op_lines(times: &OpTimes, most: usize, peak: Option<Peak>) -> Vec<String> {
    if let Some(error) = &times.error {
        return vec![format!("one more step, every op timed: failed ({error}); the timings stand")];
    }
    if times.ops.is_empty() {
        return Vec::new();
    }
    let total = times.total_ms();
    let calls: usize = times.ops.iter().map(|o| o.calls).sum();
    let light = speed_of_light(times, peak).map_or(String::new(), |(p, roofline, took)| {
        format!(" ({:.1}% of the speed of light on the {})", 100.0 * roofline / took, p.gpu)
    });
    let mut lines = vec![format!(
        "one more step, every op timed by {}: {total:.2} ms in {calls} ops{light}; the slowest:",
        clock_name(times.clock)
    )];
    for op in times.slowest_first().into_iter().take(most) {
        let mut line = format!(
            "{:5.1}% {:9.3} ms  {} ({} call{})",
            100.0 * op.ms / total,
            op.ms,
            op.op,
            op.calls,
            if op.calls == 1 { "" } else { "s" }
        );
        let rate = OpRate::of(op, peak);
        if let Some(flops) = &rate.flops {
            line += &format!(", {flops} TFLOP/s");
        } else if let Some(bytes) = &rate.bytes {
            line += &format!(", {bytes} GB/s");
        }
        if let Some(roofline) = &rate.roofline {
            line += &format!(", {roofline} of the roofline");
        }
        lines.push(line);
    }
    lines
}

/// `x` to three significant digits, no exponent (`512`, `3.35`, `0.0123`).
fn three_digits(x: f64) -> String {
    let decimals = if x > 0.0 { (2.0 - x.log10().floor()).clamp(0.0, 12.0) as usize } else { 0 };
    format!("{x:.decimals$}")
}

/// An op's throughput, formatted: its matrix-product TFLOP/s, its GB/s of minimal traffic,
/// and the share of its roofline (the larger of its compute and memory times at the GPU's
/// peaks) that it reached, with the bound.
struct OpRate {
    flops: Option<String>,
    bytes: Option<String>,
    roofline: Option<String>,
}

impl OpRate {
    fn of(op: &OpTime, peak: Option<Peak>) -> Self {
        let (work, seconds) = (op.work, op.ms / 1e3);
        let counted = work.is_counted() && seconds > 0.0;
        let rate = |amount: f64, unit: f64| {
            (counted && amount > 0.0).then(|| three_digits(amount / seconds / unit))
        };
        let roofline = peak.filter(|_| counted).map(|p| {
            let bound =
                if work.memory_bound(p.flops, p.bytes_per_s) { "memory" } else { "compute" };
            format!("{:.0}% ({bound})", 100.0 * work.roofline_ms(p.flops, p.bytes_per_s) / op.ms)
        });
        Self { flops: rate(work.flops, 1e12), bytes: rate(work.bytes, 1e9), roofline }
    }
}

/// One table per configuration that timed its ops, slowest op first (empty when none did).
fn op_sections(rows: &[BenchRow]) -> String {
    let timed: Vec<(&BenchRow, &BenchResult)> = rows
        .iter()
        .filter_map(|r| Some((r, &r.outcome.as_ref().ok()?.result)))
        .filter(|(_, result)| !result.ops.ops.is_empty() || result.ops.error.is_some())
        .collect();
    if timed.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Where a step's time goes\n\nOne more step after the timed ones, every op timed: \
         on a GPU by its own clock (CUDA events around each op: device time, the gaps between \
         launches excluded), on the CPU and the simulator by the host clock around ops that \
         have finished when they return. The ops' sum against the median step is the time \
         spent outside them (launch gaps, host work). Then, on a GPU or the simulator, one \
         more step with every kernel launch timed the same way, summed by kernel (an op may \
         launch several).\n",
    );
    for (row, result) in timed {
        let ops = &result.ops;
        if let Some(error) = &ops.error {
            let _ = writeln!(
                s,
                "\n### {} {}\n\nThe op times failed: {}.",
                row.model,
                row.precision.name(),
                error.replace('|', "\\|")
            );
            continue;
        }
        let total = ops.total_ms();
        let _ = writeln!(
            s,
            "\n### {} {} ({} attention{})\n\nThe ops sum to {total:.2} ms by {} against a \
             median step of {:.2} ms.\n",
            row.model,
            row.precision.name(),
            row.attention,
            if row.fused { ", fused" } else { ", unfused" },
            clock_name(ops.clock),
            result.median_ms
        );
        s += &op_table(&ops.slowest_first(), total, false, row.peak());
        s += &roofline_note(ops, row.peak());
        s += &kernel_section(&result.kernels, "By kernel");
    }
    s
}

/// How many of a step's slowest kernels the reports list.
pub const KERNEL_ROWS: usize = 20;

/// `who`'s kernels of a step ([`BenchResult::kernels`]): a line with their launches and total,
/// then the [`KERNEL_ROWS`] slowest, summed by kernel, as a table (names as code); or why their
/// times failed; empty when none were timed (the CPU backend).
pub fn kernel_section(kernels: &OpTimes, who: &str) -> String {
    if let Some(error) = &kernels.error {
        return format!("\n{who}: the kernel times failed: {}.\n", error.replace('|', "\\|"));
    }
    if kernels.ops.is_empty() {
        return String::new();
    }
    let total = kernels.total_ms();
    let launches: usize = kernels.ops.iter().map(|k| k.calls).sum();
    let slowest: Vec<&OpTime> = kernels.slowest_first().into_iter().take(KERNEL_ROWS).collect();
    format!(
        "\n{who}: one more step with every kernel launch timed by {}, {launches} launches of {} \
         kernels summing to {total:.2} ms; the {} slowest:\n\n{}",
        clock_name(kernels.clock),
        kernels.ops.len(),
        slowest.len(),
        op_table(&slowest, total, true, None)
    )
}

/// The ops whose work is counted: their summed roofline and their summed time, in ms, on a GPU
/// of known `peak` (none when there is no peak or no such op).
fn speed_of_light(ops: &OpTimes, peak: Option<Peak>) -> Option<(Peak, f64, f64)> {
    let counted: Vec<&OpTime> = ops.ops.iter().filter(|op| op.work.is_counted()).collect();
    let p = peak.filter(|_| !counted.is_empty())?;
    let roofline = counted.iter().map(|op| op.work.roofline_ms(p.flops, p.bytes_per_s)).sum();
    Some((p, roofline, counted.iter().map(|op| op.ms).sum()))
}

/// A paragraph comparing the step's counted ops with their summed roofline on a GPU of known
/// `peak` (empty otherwise): how far the step as a whole is from the speed of light.
pub fn roofline_note(ops: &OpTimes, peak: Option<Peak>) -> String {
    let Some((p, roofline, took)) = speed_of_light(ops, peak) else { return String::new() };
    format!(
        "\nAt the {}'s peaks ({:.1} TFLOP/s in this precision, {:.0} GB/s) the ops whose work \
         is counted would take {roofline:.2} ms; they took {took:.2} ms, {:.1}% of the speed \
         of light.\n",
        p.gpu,
        p.flops / 1e12,
        p.bytes_per_s / 1e9,
        100.0 * roofline / took
    )
}

/// `ops`, in the order given, as a markdown table: calls, milliseconds and each op's share of
/// `total_ms`; where their work is counted (`trainer::backend::op_work`: matrix-product
/// FLOPs, minimal bytes), their TFLOP/s and GB/s, and on a GPU of known `peak` the share of
/// each op's roofline it reached; `quoted` writes the names as code (PyTorch's kernel and
/// operator names).
pub fn op_table(ops: &[&OpTime], total_ms: f64, quoted: bool, peak: Option<Peak>) -> String {
    let counted = ops.iter().any(|op| op.work.is_counted());
    let peak = peak.filter(|_| counted);
    let mut s = String::from("| op | calls | ms | share of the ops |");
    let mut rule = String::from("|---|---:|---:|---:|");
    if counted {
        s += " TFLOP/s | GB/s |";
        rule += "---:|---:|";
    }
    if let Some(p) = peak {
        let _ = write!(s, " of the roofline ({}) |", p.gpu);
        rule += "---:|";
    }
    let _ = writeln!(s, "\n{rule}");
    for op in ops {
        let name = op.op.replace('|', "\\|");
        let name = if quoted { format!("`{name}`") } else { name };
        let share = 100.0 * op.ms / total_ms;
        let _ = write!(s, "| {name} | {} | {:.3} | {share:.1}% |", op.calls, op.ms);
        let rate = OpRate::of(op, peak);
        let dash = || "–".to_string();
        if counted {
            let (flops, bytes) = (rate.flops.unwrap_or_else(dash), rate.bytes.unwrap_or_else(dash));
            let _ = write!(s, " {flops} | {bytes} |");
        }
        if peak.is_some() {
            let _ = write!(s, " {} |", rate.roofline.unwrap_or_else(dash));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::op_work::Work;
    use crate::model::ModelSize;

    fn row(precision: Precision, outcome: std::result::Result<BenchOutcome, String>) -> BenchRow {
        BenchRow {
            model: "d12".into(),
            config: Gpt2Config::from_size(ModelSize::D12),
            precision,
            attention: "flash",
            fused: true,
            run: BenchRun { b: 16, t: 1024, warmup: 3, steps: 10, op_times: false },
            outcome,
        }
    }

    fn ran(tokens_per_sec: f64, gpu: Option<&str>) -> BenchOutcome {
        let median_ms = 16384.0 / tokens_per_sec * 1e3;
        BenchOutcome {
            backend: "Some GPU | bf16".into(),
            gpu: gpu.map(Into::into),
            result: BenchResult {
                step_ms: vec![median_ms, median_ms * 1.1, median_ms * 0.9],
                median_ms,
                tokens_per_sec,
                ops: OpTimes::default(),
                kernels: OpTimes::default(),
                tuned: Vec::new(),
            },
        }
    }

    /// On an H100: MFU from the unpadded FLOP count and the bf16 peak, failures kept as rows,
    /// the peaks named, pipes in cells escaped.
    #[test]
    fn the_report_states_mfu_and_failures() {
        let h100 = Some("NVIDIA H100 80GB HBM3");
        let rows = [
            row(Precision::Bf16, Ok(ran(400_000.0, h100))),
            row(Precision::Fp16, Err("out of | memory".into())),
        ];
        let meta = ReportMeta { date: "2026-11-25", commit: "abc", command: "trainer bench" };
        let md = markdown(&rows, &meta);
        let mfu = 400_000.0 * rows[0].flops_per_token() / 989.4e12;
        assert!((rows[0].mfu().unwrap() - mfu).abs() < 1e-12);
        assert!(md.starts_with("# GPT-2 training throughput: NVIDIA H100 80GB HBM3\n"), "{md}");
        assert!(!md.contains("meaningless"), "{md}");
        let want = format!("| 400,000 | {:.1}% | Some GPU \\| bf16 |", 100.0 * mfu);
        assert!(md.contains(&want), "{md}");
        assert!(md.contains("| d12 | fp16 | flash | yes | 16 | 1024 | 3 + 10 | – | – | – | – | failed: out of \\| memory |"), "{md}");
        assert!(md.contains("Peaks used (H100 SXM, dense): bf16 989.4 TFLOP/s."), "{md}");
        assert!(md.contains("d12 at T = 1024: 6 × 124439808 + 6 × 12 × 768 × 1024"), "{md}");
        assert_eq!(rows[1].summary(), "d12 fp16: failed: out of | memory");
    }

    /// A configuration that timed its ops gets a table, slowest op first, with each op's share
    /// of their sum; the log shows the slowest few.
    #[test]
    fn op_times_show_where_the_step_goes() {
        let op = |op: &str, calls, ms, flops, bytes| OpTime {
            op: op.into(),
            calls,
            ms,
            work: Work { flops, bytes },
        };
        let mut outcome = ran(400_000.0, Some("NVIDIA H100 80GB HBM3"));
        outcome.result.ops = OpTimes {
            clock: Some(OpClock::Device),
            ops: vec![
                op("AdamW", 1, 1.0, 0.0, 2.68e9),
                op("matmul backward fc", 12, 3.0, 1.5e12, 1e9),
                op("copy to the host", 1, 0.001, 0.0, 0.0),
            ],
            error: None,
        };
        let rows = [row(Precision::Bf16, Ok(outcome)), row(Precision::Fp16, Ok(ran(1.0, None)))];
        let meta = ReportMeta { date: "2026-11-25", commit: "abc", command: "trainer bench" };
        let md = markdown(&rows, &meta);
        let section = md.split("## Where a step's time goes").nth(1).expect(&md);
        assert!(section.contains("### d12 bf16 (flash attention, fused)"), "{md}");
        assert!(!section.contains("### d12 fp16"), "rows without op times get no table: {md}");
        assert!(section.contains("The ops sum to 4.00 ms by the GPU's clock"), "{md}");
        assert!(section.contains("| TFLOP/s | GB/s | of the roofline (H100 SXM) |"), "{md}");
        // 1.5 TFLOP in 3 ms; the roofline is 1.5e12 / 989.4e12 s = 1.52 ms.
        let slowest =
            section.find("| matmul backward fc | 12 | 3.000 | 75.0% | 500 | 333 | 51% (compute) |");
        // 2.68 GB in 1 ms; the roofline is 2.68e9 / 3.35e12 s = 0.8 ms.
        let adamw = section.find("| AdamW | 1 | 1.000 | 25.0% | – | 2680 | 80% (memory) |");
        assert!(slowest.zip(adamw).is_some_and(|(s, a)| s < a), "{md}");
        assert!(section.contains("| copy to the host | 1 | 0.001 | 0.0% | – | – | – |"), "{md}");
        // 1.516 + 0.8 ms of roofline against 4 ms.
        assert!(
            section.contains(
                "At the H100 SXM's peaks (989.4 TFLOP/s in this precision, 3350 GB/s) the ops \
                 whose work is counted would take 2.32 ms; they took 4.00 ms, 57.9% of the \
                 speed of light."
            ),
            "{md}"
        );
        assert_eq!(roofline_note(&ops_of(&rows[0]), None), "");
        let ops = &ops_of(&rows[0]);
        let lines = op_lines(ops, 2, rows[0].peak());
        assert_eq!(lines.len(), 3, "{lines:?}");
        assert!(
            lines[0].contains(
                "by the GPU's clock: 4.00 ms in 14 ops (57.9% of the speed of light on the H100 SXM)"
            ),
            "{lines:?}"
        );
        assert!(
            lines[1].ends_with(
                "matmul backward fc (12 calls), 500 TFLOP/s, 51% (compute) of the roofline"
            ),
            "{lines:?}"
        );
        assert!(lines[2].ends_with("AdamW (1 call), 2680 GB/s, 80% (memory) of the roofline"));
        assert!(op_lines(ops, 1, None)[1].ends_with("(12 calls), 500 TFLOP/s"));
        assert!(op_lines(&OpTimes::default(), 5, None).is_empty());
        let digits = [0.0, 0.0123, 3.354, 99.95, 512.4, 2680.0].map(three_digits);
        assert_eq!(digits, ["0", "0.0123", "3.35", "100.0", "512", "2680"]);
        // Without counted work (PyTorch's kernels) the table keeps its four columns.
        let torch = [&ops.ops[2]];
        assert!(op_table(&torch, 1.0, true, rows[0].peak()).starts_with(
            "| op | calls | ms | share of the ops |\n|---|---:|---:|---:|\n| `copy to the host` |"
        ));

        // A profiled step that failed costs its table only: the row keeps its timings.
        let mut failed = ran(300_000.0, Some("NVIDIA H100 80GB HBM3"));
        failed.result.ops.error = Some("recording an event: out | of resources".into());
        let rows = [row(Precision::Fp16, Ok(failed))];
        let md = markdown(&rows, &meta);
        assert!(md.contains("| 300,000 |"), "{md}");
        assert!(
            md.contains(
                "### d12 fp16\n\nThe op times failed: recording an event: out \\| of resources."
            ),
            "{md}"
        );
        let lines = op_lines(&rows[0].outcome.as_ref().unwrap().result.ops, 5, None);
        assert_eq!(
            lines,
            [
                "one more step, every op timed: failed (recording an event: out | of resources); the timings stand"
            ]
        );
    }

    fn ops_of(row: &BenchRow) -> OpTimes {
        row.outcome.as_ref().unwrap().result.ops.clone()
    }

    /// Off a GPU the report says its timings mean nothing, and states no MFU.
    #[test]
    fn off_a_gpu_the_report_says_so() {
        let rows = [row(Precision::Fp32, Ok(ran(1000.0, None)))];
        let meta = ReportMeta { date: "2026-11-25", commit: "abc", command: "trainer bench" };
        let md = markdown(&rows, &meta);
        assert!(md.contains("Not a GPU: the timings below are meaningless"), "{md}");
        assert!(md.contains("| 1,000 | – |"), "{md}");
        assert!(!md.contains("Peaks used"), "{md}");
        assert_eq!(rows[0].summary(), "d12 fp32: 1,000 tokens/s");
    }
}
