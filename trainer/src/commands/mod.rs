//! The subcommands of `trainer`, one module each, and what they share: the device and
//! precisions chosen on the command line, report provenance and writing.

mod bench;
mod data;
mod ladder;
mod sample;
mod train;

pub(crate) use bench::bench;
pub(crate) use data::{convert, prepare_data, shard};
pub(crate) use ladder::ladder;
pub(crate) use sample::sample;
pub(crate) use train::train;

use crate::cli::{ClassifierArg, GemmEngineArg, KernelArgs, WeightGradsArg, WgmmaTileArg};
use anyhow::{Context, Result};
use trainer::backend::ops::AttentionKind;
use trainer::backend::{Compute, DeviceChoice, Precision, ResolvedDevice};
use trainer::model::{Gpt2Config, ModelOptions};

fn log(line: &str) {
    println!("{line}");
}

/// `value` when given, else the default for a run on a GPU (`on_gpu`) or anywhere else
/// (`elsewhere`): `trainer bench` and `trainer ladder` size their runs by where they run.
fn device_default<T>(value: Option<T>, gpu: bool, on_gpu: T, elsewhere: T) -> T {
    value.unwrap_or(if gpu { on_gpu } else { elsewhere })
}

/// The device `args` selects, opened, and per `--precision` value (the device's fastest when
/// none is given) the precision and GEMM kernels to run with there.
fn resolve_computes(args: &KernelArgs) -> Result<(ResolvedDevice, Vec<Compute>)> {
    let device = DeviceChoice::from(args.device).resolve()?;
    let kernel_choice = args.gemm_engine != GemmEngineArg::Auto
        || args.wgmma_tile != WgmmaTileArg::Auto
        || args.weight_grads != WeightGradsArg::Auto
        || args.classifier != ClassifierArg::Auto;
    if device.is_cpu() && kernel_choice {
        anyhow::bail!(
            "--gemm-engine, --wgmma-tile, --weight-grads and --classifier choose the CUDA \
             backend's kernels; the CPU backend has none (use --device cuda, sim or sim-hopper)"
        );
    }
    let fastest = if device.is_cpu() { Precision::Fp32 } else { Precision::Bf16 };
    let precisions: Vec<Precision> = if args.precision.is_empty() {
        vec![fastest]
    } else {
        args.precision.iter().map(|&p| Precision::from(p)).collect()
    };
    let computes = precisions
        .into_iter()
        .map(|precision| Compute {
            precision,
            gemm_engine: args.gemm_engine.into(),
            wgmma_tile: args.wgmma_tile.into(),
            weight_grads: args.weight_grads.into(),
            classifier: args.classifier.into(),
        })
        .collect();
    Ok((device, computes))
}

/// [`resolve_computes`] for the commands that run in one precision.
fn resolve_device(args: &KernelArgs) -> Result<(ResolvedDevice, Compute)> {
    if args.precision.len() > 1 {
        anyhow::bail!(
            "--precision takes one value here (a list, such as fp32,bf16, is for `trainer bench`)"
        );
    }
    let (device, computes) = resolve_computes(args)?;
    Ok((device, computes[0]))
}

/// The name reports are filed under: the GPU's slug (with `-pdl` under programmatic dependent
/// launch, `gpu_host::PDL_ENV`, so that such a run sits beside the default one), or `sim` /
/// `cpu`.
fn device_slug(device: &ResolvedDevice) -> String {
    match device {
        ResolvedDevice::Cuda(gpu) => {
            let pdl = if gpu.info().programmatic_launch { "-pdl" } else { "" };
            format!("{}{pdl}", gpu_host::provenance::device_slug(&gpu.info().name))
        }
        ResolvedDevice::Sim(_) if device.is_hopper_sim() => "sim-hopper".into(),
        ResolvedDevice::Sim(_) => "sim".into(),
        ResolvedDevice::Cpu => "cpu".into(),
    }
}

/// The date, commit and command a report records.
struct Provenance {
    date: String,
    commit: String,
    command: String,
}

impl Provenance {
    fn now() -> Self {
        use gpu_host::provenance;
        Provenance {
            date: provenance::utc_date(std::time::SystemTime::now()),
            commit: provenance::source_commit().unwrap_or_else(|| "unknown".into()),
            command: format!("trainer {}", std::env::args().skip(1).collect::<Vec<_>>().join(" ")),
        }
    }

    fn meta(&self) -> trainer::report::ReportMeta<'_> {
        trainer::report::ReportMeta {
            date: &self.date,
            commit: &self.commit,
            command: &self.command,
        }
    }
}

/// `-mma-sync`, `-pingpong`, `-stream-k`, `-classifier-two-reads`, …: the forced GEMM engine,
/// Hopper tile, weight-gradient schedule and classifier kernel, for a report's default name, so
/// that a run forcing them sits beside the default one (empty for `auto`).
fn forced_kernels_suffix(
    engine: GemmEngineArg,
    (tile, weight_grads): (WgmmaTileArg, WeightGradsArg),
    classifier: ClassifierArg,
) -> String {
    use clap::ValueEnum;
    let forced = [
        (engine != GemmEngineArg::Auto).then(|| engine.to_possible_value()),
        (tile != WgmmaTileArg::Auto).then(|| tile.to_possible_value()),
        (weight_grads != WeightGradsArg::Auto).then(|| weight_grads.to_possible_value()),
    ];
    let mut suffix: String =
        forced.into_iter().flatten().flatten().map(|v| format!("-{}", v.get_name())).collect();
    if let Some(v) = classifier.to_possible_value().filter(|_| classifier != ClassifierArg::Auto) {
        suffix += &format!("-classifier-{}", v.get_name());
    }
    suffix
}

/// Fails now, naming `flag`, where a report could not be written at `path` once the work is
/// done: `path` a directory, or its folder one that cannot be created or written.
fn check_report_path(flag: &str, path: &std::path::Path) -> Result<()> {
    if path.is_dir() {
        anyhow::bail!("{flag} {}: a directory; name the report's file", path.display());
    }
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty());
    trainer::io::ensure_writable_dir(dir.unwrap_or(std::path::Path::new(".")))
        .with_context(|| format!("{flag} {}", path.display()))
}

/// Writes `text` to `path` atomically, creating its folder.
fn write_report(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    trainer::io::write_atomic(path, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    Ok(())
}

/// The model options `args` select for a model of `config` in `precision`.
fn model_options(args: &KernelArgs, config: &Gpt2Config, precision: Precision) -> ModelOptions {
    let attention = args.attention.map(AttentionKind::from);
    ModelOptions::resolve(attention, !args.no_fuse, precision, config)
}
