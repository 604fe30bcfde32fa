//! `cargo xtask train`: the main job. Trains on the bundled Shakespeare (prepared on first
//! use): GPT-2 124M in bf16 with flash attention on the GPU when `nvidia-smi` lists one, else
//! the small d2 model on the CPU; then prints a sample from the final checkpoint.

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
/// 2 idle CPU cores, depending on the CPU (val loss 10.8 -> 5.9). Later options override these (the trainer's flags
/// take the last occurrence).
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

/// The value of `--checkpoint-dir` in `args` (the last one wins), if any.
fn checkpoint_dir(args: &[String]) -> Option<String> {
    let mut found = None;
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        if arg == "--checkpoint-dir" {
            found = iter.next().cloned();
        } else if let Some(value) = arg.strip_prefix("--checkpoint-dir=") {
            found = Some(value.to_string());
        }
    }
    found
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
    println!("training on the {}", if gpu { "GPU (nvidia-smi lists one)" } else { "CPU" });
    let mut train = trainer()?;
    train.arg("train").args(defaults).args(extra);
    cmd::run(&mut train)?;
    let dir = checkpoint_dir(extra).unwrap_or_else(|| run_dir.to_string());
    println!("\nsample from {dir}:\n");
    cmd::run(trainer()?.args([
        "sample",
        "--device",
        device,
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

    #[test]
    fn finds_the_last_checkpoint_dir() {
        let args = |s: &[&str]| s.iter().map(|a| a.to_string()).collect::<Vec<_>>();
        assert_eq!(checkpoint_dir(&args(&["--steps", "5"])), None);
        assert_eq!(
            checkpoint_dir(&args(&["--checkpoint-dir", "a", "--checkpoint-dir=b"])),
            Some("b".into())
        );
    }
}
