//! `trainer bench`: timed training steps per model and precision, and their report.

use super::{
    Provenance, check_report_path, device_default, device_slug, forced_kernels_suffix, log,
    model_options, resolve_computes, write_report,
};
use crate::cli::{BenchArgs, KernelArgs, ModelArg};
use anyhow::Result;
use trainer::backend::{Backend, BackendJob, ResolvedDevice};
use trainer::bench::{BenchOutcome, BenchRow, BenchRun};
use trainer::model::{Gpt2Config, ModelOptions, ModelSize};

/// How many of the slowest ops the log shows per configuration (the report has them all).
const OP_LINES: usize = 12;

/// `trainer bench` of one model in one precision on whichever backend was chosen.
struct BenchJob<'a> {
    config: &'a Gpt2Config,
    options: ModelOptions,
    run: BenchRun,
}

impl BackendJob for BenchJob<'_> {
    type Output = BenchOutcome;
    fn run<B: Backend>(self, backend: &B) -> trainer::Result<BenchOutcome> {
        let result = trainer::bench::bench(backend, self.config, self.options, self.run)?;
        Ok(BenchOutcome {
            backend: backend.describe(),
            gpu: backend.gpu_name().map(Into::into),
            result,
        })
    }
}

/// Times every model in every precision asked for. A configuration that fails (out of memory,
/// say) is logged and reported, the others still run, and the command fails at the end.
pub fn bench(args: BenchArgs) -> Result<()> {
    if [args.batch_size, args.seq_len, args.steps].contains(&Some(0)) {
        anyhow::bail!("--batch-size, --seq-len and --steps must be positive");
    }
    let (device, computes) = resolve_computes(&args.kernels)?;
    let gpu = matches!(device, ResolvedDevice::Cuda(_));
    let profiler = match (&device, args.memory_profile) {
        (ResolvedDevice::Sim(sim), true) => Some(sim),
        (_, true) => anyhow::bail!("--memory-profile needs --device sim or sim-hopper"),
        (_, false) => None,
    };
    let run = BenchRun {
        b: device_default(args.batch_size, gpu, 16, 4),
        t: device_default(args.seq_len, gpu, 1024, 64),
        warmup: device_default(args.warmup, gpu, 3, 2),
        steps: device_default(args.steps, gpu, 10, 7),
        op_times: args.op_times,
    };
    let models = match (args.model.is_empty(), gpu) {
        (false, _) => args.model.clone(),
        (true, true) => vec![ModelArg::D12],
        (true, false) => vec![ModelArg::D2, ModelArg::D12],
    };
    for model in &models {
        let max_t = Gpt2Config::from_size(ModelSize::from(*model)).max_seq_len;
        if run.t > max_t {
            let name = format!("{model:?}").to_lowercase();
            anyhow::bail!("--seq-len {} exceeds {name}'s maximum sequence length {max_t}", run.t);
        }
    }
    let report = args.report.as_ref().map(|path| {
        path.clone().unwrap_or_else(|| default_report(&device_slug(&device), &args.kernels))
    });
    if let Some(path) = &report {
        check_report_path("--report", path)?;
    }
    let provenance = Provenance::now();
    let mut rows = Vec::new();
    let mut profiles = Vec::new();
    for model in &models {
        let mut config = Gpt2Config::from_size(ModelSize::from(*model));
        if let Some(vp) = args.padded_vocab {
            config.padded_vocab_size = vp;
        }
        for &compute in &computes {
            let options = model_options(&args.kernels, &config, compute.precision);
            let job = BenchJob { config: &config, options, run };
            if let Some(sim) = profiler {
                sim.start_memory_profile();
            }
            let row = BenchRow {
                model: format!("{model:?}").to_lowercase(),
                config,
                precision: compute.precision,
                attention: options.attention.name(),
                fused: options.fuse,
                run,
                outcome: device.run(compute, job).map_err(|e| e.to_string()),
            };
            log(&bench_line(&row));
            if let Ok(outcome) = &row.outcome {
                for line in trainer::bench::op_lines(&outcome.result.ops, OP_LINES, row.peak()) {
                    log(&format!("  {line}"));
                }
            }
            if let Some(sim) = profiler {
                let kernels = sim.take_memory_profile();
                for line in trainer::bench::memory_lines(&kernels) {
                    log(&format!("  {line}"));
                }
                let label = format!(
                    "{} {}, {} attention{}",
                    row.model,
                    row.precision.name(),
                    row.attention,
                    if row.fused { "" } else { ", unfused" }
                );
                profiles.push((label, kernels));
            }
            rows.push(row);
            if let Some(path) = &report {
                let text = trainer::bench::markdown(&rows, &provenance.meta())
                    + &trainer::bench::memory_markdown(&profiles);
                write_report(path, &text)?;
            }
        }
    }
    let summaries: Vec<String> = rows.iter().map(BenchRow::summary).collect();
    log(&format!("headline: B={} T={}: {}", run.b, run.t, summaries.join("; ")));
    if let Some(path) = &report {
        log(&format!("report: {}", path.display()));
    }
    let failed = rows.iter().filter(|r| r.outcome.is_err()).count();
    if failed > 0 {
        anyhow::bail!("{failed} of {} configurations failed (see above)", rows.len());
    }
    Ok(())
}

/// One configuration's log line: what ran where, and its timing or error.
fn bench_line(row: &BenchRow) -> String {
    let what = format!(
        "{:<4} {} B={} T={}, {} attention{}",
        row.model,
        row.config.describe(),
        row.run.b,
        row.run.t,
        row.attention,
        if row.fused { "" } else { ", unfused" },
    );
    match &row.outcome {
        Ok(o) => format!(
            "{what} on {}{}: {:.1} ms/step, {:.0} tokens/s (median of {} steps after {} warm-up)",
            o.backend,
            row.peak().zip(row.mfu()).map_or(String::new(), |(p, m)| format!(
                ", MFU {:.1}% of the {} peak",
                100.0 * m,
                p.gpu
            )),
            o.result.median_ms,
            o.result.tokens_per_sec,
            row.run.steps,
            row.run.warmup
        ),
        Err(e) => format!("{what}, {}: failed: {e}", row.precision.name()),
    }
}

/// `bench/trainer-<device>.md`, with a forced GEMM engine, Hopper tile or classifier kernel in
/// the name (`…-mma-sync.md`, `…-pingpong.md`, `…-classifier-two-reads.md`), so that a run of
/// each sits beside the default one.
fn default_report(slug: &str, kernels: &KernelArgs) -> std::path::PathBuf {
    let tiles = (kernels.wgmma_tile, kernels.weight_grads);
    let suffix = forced_kernels_suffix(kernels.gemm_engine, tiles, kernels.classifier);
    format!("bench/trainer-{slug}{suffix}.md").into()
}

#[cfg(test)]
mod tests {
    use super::default_report;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    fn report_for(args: &[&str]) -> String {
        let cli = Cli::try_parse_from([&["trainer", "bench"], args].concat()).unwrap();
        let Command::Bench(bench) = cli.command else { panic!("not bench") };
        default_report("nvidia-h200", &bench.kernels).display().to_string()
    }

    #[test]
    fn a_forced_engine_tile_or_classifier_names_its_own_report() {
        assert_eq!(report_for(&[]), "bench/trainer-nvidia-h200.md");
        assert_eq!(
            report_for(&["--classifier", "two-reads"]),
            "bench/trainer-nvidia-h200-classifier-two-reads.md"
        );
        assert_eq!(
            report_for(&["--wgmma-tile", "pingpong"]),
            "bench/trainer-nvidia-h200-pingpong.md"
        );
        assert_eq!(
            report_for(&["--weight-grads", "stream-k"]),
            "bench/trainer-nvidia-h200-stream-k.md"
        );
        let combined = ["--wgmma-tile", "deferred", "--weight-grads", "stream-k"];
        assert_eq!(report_for(&combined), "bench/trainer-nvidia-h200-deferred-stream-k.md");
        let both = ["--gemm-engine", "mma-sync", "--wgmma-tile", "128"];
        assert_eq!(report_for(&both), "bench/trainer-nvidia-h200-mma-sync-128.md");
    }
}
