//! `cargo xtask train`: the main job. Trains the default small model on the bundled
//! Shakespeare (prepared on first use), on the GPU when the CUDA backend exists and a GPU is
//! present (`--device auto`), else on the CPU; then prints a sample from the final checkpoint.

use crate::cmd;
use crate::trainer_bin::trainer;
use anyhow::Result;

/// Where the default run writes its checkpoints, metrics and plot.
const RUN_DIR: &str = "runs/shakespeare-d2";

/// The default run: d2 (L2 NH2 C128, 7M parameters) on B=8 × T=64 for 1000 steps: about 80 s
/// on 2 idle CPU cores (val loss 10.8 -> 5.9). Later options override these (the trainer's flags take the last
/// occurrence).
const DEFAULTS: &[&str] = &[
    "--device",
    "auto",
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

/// Trains with the defaults plus `extra` trainer options, then samples.
pub fn run(extra: &[String]) -> Result<()> {
    let mut train = trainer()?;
    train.arg("train").args(DEFAULTS).args(extra);
    cmd::run(&mut train)?;
    let dir = checkpoint_dir(extra).unwrap_or_else(|| RUN_DIR.to_string());
    println!("\nsample from {dir}:\n");
    cmd::run(trainer()?.args([
        "sample",
        "--device",
        "auto",
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
