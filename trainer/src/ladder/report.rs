//! The ladder's report: a markdown table (ours and PyTorch per rung, speed-ups, MFU, loss
//! agreement) and a PNG bar chart of the two ladders.

use super::{Ladder, Rung, RungResult, TorchOps, TorchVocabLoss, max_loss_diff};
use crate::backend::Precision;
use crate::backend::op_times::OpTime;
use crate::bench::{clock_name, kernel_section, op_table, roofline_note, tile_name};
use crate::error::Result;
use crate::report::{ReportMeta, thousands};
use gpu_host::kernels::classifier::ClassifierPath;
use gpu_host::kernels::gemm::{GemmEngine, WeightGrads, WgmmaTile};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::fmt::Write;
use std::path::Path;

/// Largest |ours − PyTorch| loss over the steps that still counts as the same training, per
/// precision: reduction order alone at fp32, the rounding of the matmul inputs otherwise.
pub fn loss_tolerance(precision: Precision) -> f32 {
    match precision {
        Precision::Fp32 => 2e-3,
        Precision::Tf32 => 2e-2,
        Precision::Bf16 | Precision::Fp16 => 6e-2,
    }
}

fn tokens_per_sec(result: &RungResult) -> (Option<f64>, Option<f64>) {
    let ours = result.ours.as_ref().ok().map(|r| r.steps.timing.tokens_per_sec);
    let torch = result.torch.as_ref().and_then(|t| t.as_ref().ok()).map(|t| t.tokens_per_sec);
    (ours, torch)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}×", a / b),
        _ => "–".into(),
    }
}

fn losses(values: &[f32], n: usize) -> String {
    values.iter().take(n).map(|l| format!("{l:.4}")).collect::<Vec<_>>().join(" ")
}

/// The report in markdown.
pub fn markdown(ladder: &Ladder, meta: &ReportMeta<'_>) -> String {
    let o = &ladder.options;
    let c = &o.config;
    let mut s = format!(
        "# GPT-2 speed ladder: {}\n\n- Device: {}\n- Date (UTC): {}; commit: `{}`\n",
        ladder.gpu.as_deref().unwrap_or(&ladder.device),
        ladder.device,
        meta.date,
        meta.commit
    );
    if ladder.gpu.is_none() {
        s += "- **Not a GPU: the timings below are meaningless.** This run checks that every \
              rung's configuration trains (and, with PyTorch on the CPU, that both sides \
              compute the same losses).\n";
    }
    let torch = ladder.rungs.iter().find_map(|r| r.torch.as_ref()?.as_ref().ok());
    match (torch, &ladder.torch_note) {
        (Some(t), note) => {
            let script =
                ladder.options.torch.script().map_or("?".into(), |p| p.display().to_string());
            let _ = writeln!(s, "- PyTorch {} on {} (`{script}`)", t.torch, t.device);
            if let Some(note) = note {
                let _ = writeln!(s, "- PyTorch's side is incomplete: {note}");
            }
        }
        (None, Some(note)) => {
            let _ = writeln!(s, "- No PyTorch side: {note}");
        }
        (None, None) => s += "- PyTorch ran but no rung succeeded there (see the table)\n",
    }
    let n = c.unpadded().num_params();
    let _ = writeln!(
        s,
        "- Model: {} ({:.1}M parameters with the unpadded vocabulary), B = {}, T = {}, one \
         micro-batch per step; AdamW at a constant lr {}, betas ({}, {}), eps {:e}, weight \
         decay {} on the matrices, gradient clip {}; initial parameters: GPT-2 initialisation, seed {}",
        c.describe(),
        n as f64 / 1e6,
        o.b,
        o.t,
        o.lr,
        o.adamw.beta1,
        o.adamw.beta2,
        o.adamw.eps,
        o.adamw.weight_decay,
        o.adamw.grad_clip,
        o.seed
    );
    let data =
        o.data.as_ref().map_or("random tokens below V".into(), |p| format!("`{}`", p.display()));
    let _ = writeln!(
        s,
        "- Method: `{}`. Each rung builds a fresh model from the same initial checkpoint and \
         trains {} warm-up + {} timed steps on the same batches (window i of {data} at step \
         i); a step is timed on the wall clock from its first launch to a synchronisation \
         after its loss is read back; tokens/s = B·T / median timed step. PyTorch runs in the \
         same process tree right after ours, with the same checkpoint, batches and optimizer, \
         timed the same way (`torch.cuda.synchronize()` around each step).{}",
        meta.command,
        o.warmup,
        o.steps,
        match (ladder.kernels, o.gemm_engine) {
            (false, _) => " Our side is the CPU backend (cpu-ref, fp32): no GPU kernel ran.",
            (true, GemmEngine::Auto) => {
                " Our tensor-core GEMMs: the Hopper wgmma kernels where they apply, mma.sync \
                 elsewhere."
            }
            (true, GemmEngine::MmaSync) => {
                " Our tensor-core GEMMs: mma.sync only (`--gemm-engine mma-sync`)."
            }
            (true, GemmEngine::Wgmma) =>
                " Our tensor-core GEMMs: wgmma only (`--gemm-engine wgmma`).",
        },
    );
    // `WgmmaTile::StreamK` on every GEMM plans stream-K for the weight gradients alone, as
    // `--weight-grads stream-k` does: the CLI has no such tile.
    let tile = match o.wgmma_tile {
        WgmmaTile::Auto | WgmmaTile::StreamK => None,
        tile => Some(tile),
    };
    let stream_k = o.weight_grads == WeightGrads::StreamK || o.wgmma_tile == WgmmaTile::StreamK;
    if ladder.kernels && o.gemm_engine != GemmEngine::MmaSync {
        match tile {
            Some(WgmmaTile::Tuned) => {
                let _ = writeln!(
                    s,
                    "- Hopper GEMM tiles chosen by timing each on its first call: \
                     `--wgmma-tile tuned`."
                );
            }
            Some(tile) => {
                let name = tile_name(tile);
                let _ = writeln!(s, "- Hopper GEMM tile forced: `--wgmma-tile {name}`.");
            }
            None => {}
        }
        if stream_k {
            let _ = writeln!(s, "- Weight gradients on stream-K: `--weight-grads stream-k`.");
        }
    }
    if ladder.kernels && o.classifier != ClassifierPath::Auto {
        let path = match o.classifier {
            ClassifierPath::Auto | ClassifierPath::Staged => "staged",
            ClassifierPath::TwoReads => "two-reads",
        };
        let _ = writeln!(s, "- Classifier kernel forced: `--classifier {path}`.");
    }
    let flops = ladder.flops_per_token();
    let _ = writeln!(
        s,
        "- MFU = model FLOPs per token × tokens/s / the GPU's dense peak in the rung's \
         precision (trainer::mfu's table). FLOPs per token = 6·N + 6·L·C·T = 6 × {n} + 6 × {} \
         × {} × {} = {:.1}M (N counted with the unpadded vocabulary: padding is not useful \
         work; the causal attention counted as half of 12·L·C·T, as llm.c and nanoGPT do).",
        c.num_layers,
        c.channels,
        o.t,
        flops / 1e6
    );
    s += "\n| rung | our change | ours tokens/s | ms/step | MFU | × previous | PyTorch rung | \
          PyTorch tokens/s | × previous | ours / PyTorch |\n|---|---|---:|---:|---:|---:|---|---:|---:|---:|\n";
    for result in &ladder.rungs {
        let rung = result.rung;
        let (ours, torch) = tokens_per_sec(result);
        let base = rung.base.and_then(|id| ladder.result(id)).map(tokens_per_sec);
        let (ours_cell, ms, mfu) = match &result.ours {
            Ok(r) => (
                thousands(r.steps.timing.tokens_per_sec),
                format!("{:.1}", r.steps.timing.median_ms),
                ladder
                    .mfu(rung, r.steps.timing.tokens_per_sec)
                    .map_or("–".into(), |m| format!("{:.1}%", 100.0 * m)),
            ),
            Err(e) => (format!("failed: {}", e.replace('|', "\\|")), "–".into(), "–".into()),
        };
        let torch_cell = match &result.torch {
            Some(Ok(t)) => thousands(t.tokens_per_sec),
            Some(Err(e)) => format!("failed: {}", e.replace('|', "\\|")),
            None => "–".into(),
        };
        let _ = writeln!(
            s,
            "| {} | {} | {ours_cell} | {ms} | {mfu} | {} | {} | {torch_cell} | {} | {} |",
            rung.id,
            rung.change,
            ratio(ours, base.and_then(|b| b.0)),
            rung.torch,
            ratio(torch, base.and_then(|b| b.1)),
            ratio(ours, torch),
        );
    }
    s += &loss_section(ladder);
    s += &op_section(ladder);
    s
}

/// With `--op-times`: per rung, where our step's time went and PyTorch's slowest kernels (or
/// operators, on the CPU) of one profiled step (empty otherwise).
fn op_section(ladder: &Ladder) -> String {
    let profiled = |r: &&RungResult| {
        let ours = r.ours.as_ref().is_ok_and(|o| {
            let ops = &o.steps.timing.ops;
            !ops.ops.is_empty() || ops.error.is_some()
        });
        ours || torch_ops(r).is_some()
    };
    let rungs: Vec<&RungResult> = ladder.rungs.iter().filter(profiled).collect();
    if rungs.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "\n## Where the steps' time goes\n\nAfter each rung's timed steps, one more step on each \
         side, profiled. Ours: every op timed, on a GPU by its own clock (CUDA events around \
         each op: device time, the gaps between launches excluded), on the CPU and the \
         simulator by the host clock; then, on a GPU or the simulator, one more step with \
         every kernel launch timed the same way, its slowest kernels listed as PyTorch's are. \
         PyTorch's: `torch.profiler` over the step, its slowest CUDA kernels by device self \
         time (on the CPU, operators by host self time).\n",
    );
    for result in rungs {
        let _ = writeln!(s, "\n### {}: {}", result.rung.id, result.rung.change);
        if let Ok(ours) = &result.ours {
            let (ops, median) = (&ours.steps.timing.ops, ours.steps.timing.median_ms);
            if let Some(error) = &ops.error {
                let _ = writeln!(s, "\nOurs: the op times failed: {}.", error.replace('|', "\\|"));
            } else if !ops.ops.is_empty() {
                let _ = writeln!(
                    s,
                    "\nOurs: the ops sum to {:.2} ms by {} against a median step of \
                     {median:.2} ms.\n",
                    ops.total_ms(),
                    clock_name(ops.clock)
                );
                let peak = ladder.peak(result.rung.precision);
                s += &op_table(&ops.slowest_first(), ops.total_ms(), false, peak);
                s += &roofline_note(ops, peak);
                s += &kernel_section(&ours.steps.timing.kernels, "Ours by kernel");
            }
        }
        match torch_ops(result) {
            Some(TorchOps { error: Some(e), .. }) => {
                let _ = writeln!(s, "\nPyTorch: no profile ({}).", e.replace('|', "\\|"));
            }
            Some(ops) => {
                let what =
                    if ops.clock.as_deref() == Some("cuda") { "kernels" } else { "operators" };
                let _ = writeln!(
                    s,
                    "\nPyTorch: self times sum to {:.2} ms; its {} slowest {what}:\n",
                    ops.total_ms,
                    ops.ops.len()
                );
                let slowest: Vec<&OpTime> = ops.ops.iter().collect();
                s += &op_table(&slowest, ops.total_ms, true, None);
            }
            None => {}
        }
    }
    s
}

/// PyTorch's profile of `result`'s rung, when it ran with one.
fn torch_ops(result: &RungResult) -> Option<&TorchOps> {
    result.torch.as_ref()?.as_ref().ok()?.ops.as_ref()
}

fn loss_section(ladder: &Ladder) -> String {
    let shown = 4;
    let mut s = format!(
        "\n## Loss agreement\n\nEvery step's loss (warm-up included), ours against PyTorch's on \
         the same batches; the first {shown} are shown. Step 0's loss is the initial model's, \
         the same for every rung up to the rung's precision; the agreement tolerance is {} \
         (fp32), {} (tf32), {} (bf16, fp16).\n",
        loss_tolerance(Precision::Fp32),
        loss_tolerance(Precision::Tf32),
        loss_tolerance(Precision::Bf16)
    );
    let c = &ladder.options.config;
    let padded_rungs = ladder.rungs.iter().any(|r| r.rung.padded_vocab);
    if padded_rungs && ladder.options.torch_vocab_loss == TorchVocabLoss::Real {
        let _ = writeln!(
            s,
            "\nOn the padded-vocab rungs PyTorch's loss covers the first {} logits only \
             (`--torch-vocab-loss real`), as ours does: both sides train the same model there \
             too, at the rung's tolerance (nanoGPT's loss would cover the padded logits as well).",
            c.vocab_size
        );
    } else if padded_rungs && c.padded_vocab_size > c.vocab_size {
        let _ = writeln!(
            s,
            "\nFrom the vocab rung on, PyTorch's softmax (nanoGPT's `vocab_size=50304`) also \
             covers the {} padded logits, ours (llm.c's) does not: PyTorch's loss starts higher \
             by about ln(Vp/V) = {:.2e} (the padded rows of wte are zero) and the gap shrinks \
             as training pushes those logits down. The tolerance of those rungs adds that gap.",
            c.padded_vocab_size - c.vocab_size,
            (c.padded_vocab_size as f64 / c.vocab_size as f64).ln()
        );
    }
    s += "\n| rung | ours | PyTorch | max \\|Δ\\| | tolerance | within tolerance |\n\
          |---|---|---|---:|---:|---|\n";
    for result in &ladder.rungs {
        let ours = result.ours.as_ref().ok().map(|r| &r.steps);
        let torch = result.torch.as_ref().and_then(|t| t.as_ref().ok());
        let steps = (ours.map(|o| o.losses.len()), torch.map(|t| t.losses.len()));
        let (diff, tolerance, agree) = match ladder.torch_agreement(result) {
            Some(a) => (
                match steps {
                    (Some(o), Some(t)) if o != t => format!("{o} steps vs {t}"),
                    _ => format!("{:.2e}", a.max_diff),
                },
                format!("{:.2e}", a.tolerance),
                if a.agrees { "yes" } else { "**no**" }.to_string(),
            ),
            None => ("–".into(), "–".into(), "–".into()),
        };
        let skipped = ours
            .filter(|o| o.skipped > 0)
            .map_or(String::new(), |o| format!(" ({} skipped by the loss scaler)", o.skipped));
        let _ = writeln!(
            s,
            "| {} | {}{skipped} | {} | {diff} | {tolerance} | {agree} |",
            result.rung.id,
            ours.map_or("–".into(), |o| losses(&o.losses, shown)),
            torch.map_or("–".into(), |t| losses(&t.losses, shown)),
        );
    }
    s += &drift_section(ladder);
    s
}

/// Each rung's drift from its own side's fp32 rung (empty without an fp32 rung of ours).
fn drift_section(ladder: &Ladder) -> String {
    let Some(fp32) = ladder.rungs.iter().find(|r| r.rung.id == "fp32") else {
        return String::new();
    };
    let Some(ours_fp32) = fp32.our_losses() else {
        return String::new();
    };
    let torch_fp32 = fp32.torch_losses();
    let mut s = String::from(
        "\n## Drift from fp32\n\nEach rung's largest loss difference from its own side's fp32 \
         rung over the same steps (same checkpoint, same batches): how far the rung's arithmetic \
         moves training on each side. A rung that fails the agreement with ours drifting further \
         than PyTorch computes more coarsely than PyTorch does; similar drifts put the tolerance \
         in question instead.\n",
    );
    let c = &ladder.options.config;
    let padded = ladder.rungs.iter().any(|r| r.rung.padded_vocab && r.rung.id != "fp32");
    if padded && ladder.options.torch_vocab_loss != TorchVocabLoss::Real {
        let _ = writeln!(
            s,
            "\nOn the padded-vocab rungs PyTorch's drift includes the padding gap of its loss \
             (about ln(Vp/V) = {:.2e}, above), so the ratio understates ours there.",
            (c.padded_vocab_size as f64 / c.vocab_size as f64).ln()
        );
    }
    s += "\n| rung | ours | PyTorch | ours / PyTorch |\n|---|---:|---:|---:|\n";
    for result in ladder.rungs.iter().filter(|r| r.rung.id != "fp32") {
        let ours = result.our_losses().and_then(|l| drift(l, ours_fp32));
        let torch = result.torch_losses().zip(torch_fp32).and_then(|(l, f)| drift(l, f));
        let cell = |d: Option<f32>| d.map_or("–".to_string(), |d| format!("{d:.2e}"));
        let ratio = match (ours, torch) {
            (Some(o), Some(t)) if t > 0.0 => format!("{:.2}", o / t),
            _ => "–".into(),
        };
        let _ = writeln!(s, "| {} | {} | {} | {ratio} |", result.rung.id, cell(ours), cell(torch));
    }
    s
}

/// The largest `|loss − fp32's|` over the steps both ran (NaN when either is NaN), or `None`
/// when either ran none.
fn drift(losses: &[f32], fp32: &[f32]) -> Option<f32> {
    (!losses.is_empty() && !fp32.is_empty()).then(|| max_loss_diff(losses, fp32))
}

/// Draws the two ladders (tokens/s per rung, ours and PyTorch side by side) into a PNG.
pub fn chart(ladder: &Ladder, path: &Path) -> Result<()> {
    crate::train::render_png(path, |tmp| draw(ladder, tmp))
}

fn draw(ladder: &Ladder, path: &Path) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let bars: Vec<(&Rung, Option<f64>, Option<f64>)> = ladder
        .rungs
        .iter()
        .map(|r| {
            let (ours, torch) = tokens_per_sec(r);
            (r.rung, ours, torch)
        })
        .collect();
    let top = bars.iter().flat_map(|b| [b.1, b.2]).flatten().fold(0.0, f64::max).max(1.0);
    let n = bars.len() as f64;
    let root = BitMapBackend::new(path, (960, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let title = format!(
        "GPT-2 {} training, B={} T={}: tokens/s per rung ({})",
        ladder.options.config.describe().split(" maxT").next().unwrap_or(""),
        ladder.options.b,
        ladder.options.t,
        ladder.gpu.as_deref().unwrap_or("not a GPU: timings meaningless")
    );
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(80)
        .build_cartesian_2d(0.0..n, 0.0..top * 1.15)?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(0)
        .y_desc("tokens/s")
        .y_label_formatter(&|y| thousands(*y))
        .draw()?;
    let ours_color = RGBColor(31, 119, 180);
    let torch_color = RGBColor(255, 127, 14);
    for (i, (_, ours, torch)) in bars.iter().enumerate() {
        let x = i as f64;
        if let Some(v) = ours {
            chart.draw_series([Rectangle::new(
                [(x + 0.1, 0.0), (x + 0.48, *v)],
                ours_color.filled(),
            )])?;
        }
        if let Some(v) = torch {
            chart.draw_series([Rectangle::new(
                [(x + 0.52, 0.0), (x + 0.9, *v)],
                torch_color.filled(),
            )])?;
        }
    }
    chart
        .draw_series([Rectangle::new([(0.0, 0.0), (0.0, 0.0)], ours_color.filled())])?
        .label("ours")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], ours_color.filled()));
    chart
        .draw_series([Rectangle::new([(0.0, 0.0), (0.0, 0.0)], torch_color.filled())])?
        .label("PyTorch")
        .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 15, y + 5)], torch_color.filled()));
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    let style = TextStyle::from(("sans-serif", 16)).pos(Pos::new(HPos::Center, VPos::Top));
    for (i, (rung, ..)) in bars.iter().enumerate() {
        let (px, py) = chart.backend_coord(&(i as f64 + 0.5, 0.0));
        root.draw(&Text::new(rung.id.to_string(), (px, py + 8), style.clone()))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::drift;

    #[test]
    fn drift_is_the_largest_difference_and_keeps_a_nan() {
        assert_eq!(drift(&[10.0, 9.5, 9.0], &[10.0, 9.25, 9.5]), Some(0.5));
        // Over the steps both ran.
        assert_eq!(drift(&[10.0, 9.0], &[10.0, 9.5, 1.0]), Some(0.5));
        assert!(drift(&[10.0, f32::NAN, 9.0], &[10.0, 9.5, 9.0]).unwrap().is_nan());
        assert_eq!(drift(&[], &[1.0]), None);
    }
}
