//! `cargo xtask train`: the main job. Trains on the bundled Shakespeare (prepared on first
//! use): GPT-2 124M in bf16 with flash attention on the GPU when `nvidia-smi` lists one, else
//! the small d2 model on the CPU; then prints a sample from the final checkpoint. The PTX is
//! built first whenever the run needs the kernels (a GPU, or `--device cuda|sim|sim-hopper`).

use crate::build_ptx;
use crate::cmd;
use crate::trainer_bin::trainer;
use anyhow::Result;

/// Where the CPU run writes its checkpoints, metrics and plot.
const RUN_DIR: &str = "runs/shakespeare-d2";
/// Where the GPU run writes them.
const GPU_RUN_DIR: &str = "runs/shakespeare-d12";

/// The GPU run: GPT-2 124M (d12), B=16 × T=1024 for 300 steps in bf16 (the CUDA backend's
/// fastest defaults: flash attention, fused kernels), 4.9M tokens. Not yet timed on a GPU.
const GPU_DEFAULTS: &[&str] = &[
    "--device",
    "cuda",
    "--model",
    "d12",
    "--batch-size",
    "16",
    "--seq-len",
    "1024",
    "--steps",
    "300",
    "--lr",
    "6e-4",
    "--warmup-steps",
    "30",
    "--lr-schedule",
    "cosine",
    "--min-lr-frac",
    "0.1",
    "--weight-decay",
    "0.1",
    "--val-every",
    "50",
    "--val-batches",
    "10",
    "--checkpoint-every",
    "100",
    "--checkpoint-dir",
    GPU_RUN_DIR,
    "--metrics-jsonl",
    "runs/shakespeare-d12/metrics.jsonl",
];

/// The CPU run: d2 (L2 NH2 C128, 7M parameters) on B=8 × T=64 for 1000 steps: 80 to 150 s on
/// 2 idle CPU cores, depending on the CPU (val loss 10.8 -> 5.9). Later options override these
/// (the trainer's flags take the last occurrence); `--model` is left out when the extra
/// options start from a checkpoint (`--init`, `--resume`), which it would conflict with.
const DEFAULTS: &[&str] = &[
    "--device",
    "cpu",
    "--model",
    "d2",
    "--batch-size",
    "8",
    "--seq-len",
    "64",
    "--steps",
    "1000",
    "--lr",
    "2e-3",
    "--warmup-steps",
    "20",
    "--lr-schedule",
    "cosine",
    "--min-lr-frac",
    "0.1",
    "--weight-decay",
    "0.1",
    "--val-every",
    "100",
    "--val-batches",
    "10",
    "--checkpoint-every",
    "250",
    "--checkpoint-dir",
    RUN_DIR,
    "--metrics-jsonl",
    "runs/shakespeare-d2/metrics.jsonl",
];

/// The value of option `flag` (e.g. `--checkpoint-dir`) in `args`, the last one winning, if
/// any.
fn option_value(args: &[String], flag: &str) -> Option<String> {
    let mut found = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == flag {
            found = iter.next().cloned();
        } else if let Some(value) = arg.strip_prefix(flag).and_then(|v| v.strip_prefix('=')) {
            found = Some(value.to_string());
        }
    }
    found
}

/// `defaults` without the fresh model's `--model` (and its value) when `extra` starts from a
/// checkpoint.
fn defaults_for(defaults: &[&'static str], extra: &[String]) -> Vec<&'static str> {
    let given = |flag| option_value(extra, flag).is_some();
    let from_checkpoint = given("--init") || given("--resume");
    let mut kept = Vec::with_capacity(defaults.len());
    let mut iter = defaults.iter();
    while let Some(&arg) = iter.next() {
        if from_checkpoint && arg == "--model" {
            iter.next();
        } else {
            kept.push(arg);
        }
    }
    kept
}

/// Whether a fresh run into the default checkpoint directory replaces the run there (the main
/// job, run again): not when resuming, nor in a directory the user named.
fn replaces_own_run(extra: &[String]) -> bool {
    option_value(extra, "--resume").is_none() && option_value(extra, "--checkpoint-dir").is_none()
}

/// Whether the run needs the project's kernels: on the GPU, or a CUDA backend asked for.
fn needs_kernels(gpu: bool, extra: &[String]) -> bool {
    match option_value(extra, "--device").as_deref() {
        Some("cuda" | "sim" | "sim-hopper") => true,
        Some("cpu") => false,
        _ => gpu,
    }
}

/// Whether `nvidia-smi -L` lists a GPU.
fn gpu_present() -> bool {
    std::process::Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|out| out.status.success() && out.stdout.starts_with(b"GPU "))
}

/// Trains with the defaults (GPU or CPU) plus `extra` trainer options, then samples.
pub fn run(extra: &[String]) -> Result<()> {
    let gpu = gpu_present();
    let (defaults, run_dir, device) =
        if gpu { (GPU_DEFAULTS, GPU_RUN_DIR, "cuda") } else { (DEFAULTS, RUN_DIR, "cpu") };
    if needs_kernels(gpu, extra) {
        build_ptx::run()?;
    }
    println!("training on the {}", if gpu { "GPU (nvidia-smi lists one)" } else { "CPU" });
    let mut train = trainer()?;
    train.arg("train").args(defaults_for(defaults, extra));
    if replaces_own_run(extra) {
        train.arg("--overwrite");
    }
    train.args(extra);
    cmd::run(&mut train)?;
    let dir = option_value(extra, "--checkpoint-dir").unwrap_or_else(|| run_dir.to_string());
    let device = option_value(extra, "--device").unwrap_or_else(|| device.to_string());
    println!("\nsample from {dir}:\n");
    cmd::run(trainer()?.args([
        "sample",
        "--device",
        &device,
        "--checkpoint",
        &dir,
        "--prompt",
        "ROMEO:",
        "--max-tokens",
        "120",
        "--temperature",
        "0.8",
    ]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &[&str]) -> Vec<String> {
        s.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn finds_the_last_checkpoint_dir() {
        assert_eq!(option_value(&args(&["--steps", "5"]), "--checkpoint-dir"), None);
        let dirs = args(&["--checkpoint-dir", "a", "--checkpoint-dir=b"]);
        assert_eq!(option_value(&dirs, "--checkpoint-dir"), Some("b".into()));
        assert_eq!(option_value(&args(&["--checkpoint-dirx=c"]), "--checkpoint-dir"), None);
    }

    /// Starting from a checkpoint drops the default `--model` (the trainer refuses both).
    #[test]
    fn a_checkpoint_replaces_the_default_model() {
        let fresh = defaults_for(DEFAULTS, &args(&["--steps", "5"]));
        assert_eq!(fresh, DEFAULTS);
        let resumed = defaults_for(DEFAULTS, &args(&["--resume=runs/shakespeare-d2"]));
        assert_eq!(resumed.len(), DEFAULTS.len() - 2);
        assert!(!resumed.contains(&"--model") && !resumed.contains(&"d2"), "{resumed:?}");
        assert!(!defaults_for(GPU_DEFAULTS, &args(&["--init", "x.bin"])).contains(&"d12"));
    }

    /// Run again, the main job replaces its own run; never one it resumes or one the user put
    /// elsewhere.
    #[test]
    fn only_the_default_run_is_replaced() {
        assert!(replaces_own_run(&args(&["--steps", "5"])));
        assert!(!replaces_own_run(&args(&["--resume", "runs/shakespeare-d2"])));
        assert!(!replaces_own_run(&args(&["--checkpoint-dir=mine"])));
    }

    /// The PTX is built for the GPU and for the CUDA backends asked for, not for the CPU.
    #[test]
    fn kernels_are_built_when_the_run_needs_them() {
        assert!(needs_kernels(true, &[]));
        assert!(!needs_kernels(false, &[]));
        assert!(needs_kernels(false, &args(&["--device", "sim"])));
        assert!(needs_kernels(false, &args(&["--device=sim-hopper"])));
        assert!(!needs_kernels(true, &args(&["--device", "cpu"])));
    }
}
