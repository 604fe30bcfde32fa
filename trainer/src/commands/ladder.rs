//! `trainer ladder`: the speed ladder against PyTorch, and its report.

use super::{
    Provenance, check_report_path, device_default, device_slug, forced_kernels_suffix, log,
    write_report,
};
use crate::cli::{LadderArgs, LadderModelArg, TorchArg};
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use trainer::backend::{DeviceChoice, ResolvedDevice};
use trainer::data::ensure_shakespeare;
use trainer::model::{Gpt2Config, ModelSize};
use trainer::optim::AdamWConfig;

/// The ladder's model: a named GPT-2 size, or the tiny toy-vocabulary model.
fn ladder_config(model: LadderModelArg) -> Gpt2Config {
    let size = match model {
        LadderModelArg::D2 => ModelSize::D2,
        LadderModelArg::D4 => ModelSize::D4,
        LadderModelArg::D6 => ModelSize::D6,
        LadderModelArg::D12 => ModelSize::D12,
        LadderModelArg::Tiny => {
            return Gpt2Config {
                max_seq_len: 64,
                vocab_size: 96,
                padded_vocab_size: 128,
                num_layers: 2,
                num_heads: 2,
                channels: 128,
            };
        }
    };
    Gpt2Config::from_size(size)
}

/// The ladder's options from the command line, for a GPU (`gpu`) or not.
fn ladder_options(args: &LadderArgs, gpu: bool) -> Result<trainer::ladder::LadderOptions> {
    use trainer::ladder::{self, LadderOptions, TorchMode};
    let model = device_default(args.model, gpu, LadderModelArg::D12, LadderModelArg::Tiny);
    let rungs = if args.rungs.is_empty() {
        ladder::RUNGS.iter().collect()
    } else {
        args.rungs
            .iter()
            .map(|id| {
                ladder::rung(id).with_context(|| {
                    let known: Vec<&str> = ladder::RUNGS.iter().map(|r| r.id).collect();
                    format!("--rungs: unknown rung '{id}' (the rungs: {})", known.join(", "))
                })
            })
            .collect::<Result<Vec<_>>>()?
    };
    let data = match (&args.data, model) {
        (Some(path), _) => Some(path.clone()),
        (None, LadderModelArg::Tiny) => None,
        (None, _) => {
            ensure_shakespeare(&args.data_dir, None, &mut |l| log(l))
                .context("preparing the bundled Shakespeare data")?;
            Some(args.data_dir.join("train_000000.bin"))
        }
    };
    let script = args.torch_script.clone().unwrap_or_else(|| {
        std::env::var_os("GPU_BENCH_SCRIPTS")
            .map_or_else(|| "bench".into(), std::path::PathBuf::from)
            .join("ladder_torch.py")
    });
    let torch = match args.torch {
        TorchArg::Auto => TorchMode::Auto(script),
        TorchArg::On => TorchMode::Required(script),
        TorchArg::Off => TorchMode::Off,
    };
    Ok(LadderOptions {
        config: ladder_config(model),
        b: device_default(args.batch_size, gpu, 16, 2),
        t: device_default(args.seq_len, gpu, 1024, 16),
        warmup: device_default(args.warmup, gpu, 3, 1),
        steps: device_default(args.steps, gpu, 10, 1),
        lr: args.lr,
        adamw: AdamWConfig {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: args.weight_decay,
            decay_all: false,
            grad_clip: 1.0,
        },
        rungs,
        seed: args.seed,
        data,
        work_dir: ladder::default_work_dir(),
        torch,
        torch_vocab_loss: args.torch_vocab_loss.into(),
        gemm_engine: args.gemm_engine.into(),
        wgmma_tile: args.wgmma_tile.into(),
        weight_grads: args.weight_grads.into(),
        classifier: args.classifier.into(),
        op_times: args.op_times,
    })
}

/// The ladder's report: `--out`, else `bench/ladder-<device>[-<rungs>][-<forced kernels>].md`
/// (a part of the ladder gets its own report, named after its rungs; a forced GEMM engine or
/// Hopper tile joins the name).
fn report_path(args: &LadderArgs, slug: &str, rungs: &[&trainer::ladder::Rung]) -> PathBuf {
    let part = if rungs.len() == trainer::ladder::RUNGS.len() {
        String::new()
    } else {
        rungs.iter().map(|r| format!("-{}", r.id)).collect()
    };
    let tiles = (args.wgmma_tile, args.weight_grads);
    let forced = forced_kernels_suffix(args.gemm_engine, tiles, args.classifier);
    args.out.clone().unwrap_or_else(|| format!("bench/ladder-{slug}{part}{forced}.md").into())
}

/// Writes the ladder's report to `out` and its chart beside it.
fn write_ladder_report(out: &Path, ladder: &trainer::ladder::Ladder) -> Result<()> {
    write_report(out, &trainer::ladder::markdown(ladder, &Provenance::now().meta()))?;
    let png = out.with_extension("png");
    trainer::ladder::chart(ladder, &png)?;
    log(&format!("report: {} (chart: {})", out.display(), png.display()));
    Ok(())
}

pub fn ladder(args: &LadderArgs) -> Result<()> {
    let device = DeviceChoice::from(args.device).resolve()?;
    let options = ladder_options(args, matches!(device, ResolvedDevice::Cuda(_)))?;
    // Named after the rungs asked for, from the first rewrite on.
    let out = report_path(args, &device_slug(&device), &options.rungs);
    check_report_path("--out", &out)?;
    // The report is rewritten after each rung of either side, so a ladder stopped part-way (a
    // time limit, a crash in PyTorch's side) still leaves what both sides measured.
    let mut partial = |ladder: &trainer::ladder::Ladder| {
        if let Err(e) = write_ladder_report(&out, ladder) {
            log(&format!("could not write the report so far: {e:#}"));
        }
    };
    let result = trainer::ladder::run(&device, &options, &mut |l| log(l), &mut partial);
    trainer::ladder::remove_work_dir(&options.work_dir);
    let ladder = result?;
    write_ladder_report(&out, &ladder)?;
    let failed: Vec<String> = ladder
        .rungs
        .iter()
        .filter_map(|r| r.ours.as_ref().err().map(|e| format!("{}: {e}", r.rung.id)))
        .collect();
    if !failed.is_empty() {
        anyhow::bail!("{} of our rungs failed: {}", failed.len(), failed.join("; "));
    }
    let disagree: Vec<&str> = ladder
        .rungs
        .iter()
        .filter(|r| ladder.torch_agreement(r).is_some_and(|a| !a.agrees))
        .map(|r| r.rung.id)
        .collect();
    if !disagree.is_empty() {
        anyhow::bail!(
            "our losses and PyTorch's differ beyond the tolerance (or in their step count) on \
             {}: see the report's loss agreement",
            disagree.join(", ")
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::report_path;
    use crate::cli::{Cli, Command};
    use clap::Parser;

    #[test]
    fn a_part_and_a_forced_engine_name_the_report() {
        let cli = ["trainer", "ladder", "--rungs", "fp32,tf32", "--gemm-engine", "mma-sync"];
        let Command::Ladder(args) = Cli::try_parse_from(cli).unwrap().command else {
            panic!("not ladder")
        };
        let rungs: Vec<_> = trainer::ladder::RUNGS.iter().take(2).collect();
        let path = report_path(&args, "nvidia-h200", &rungs);
        assert_eq!(path.display().to_string(), "bench/ladder-nvidia-h200-fp32-tf32-mma-sync.md");
    }
}
