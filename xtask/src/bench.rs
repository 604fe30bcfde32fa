//! `cargo xtask bench ...`: builds what a benchmark measures, then runs it.

use crate::build_ptx;
use crate::cmd::{self, workspace_root};
use crate::trainer_bin::trainer;
use anyhow::{Context, Result};
use std::process::Command;

/// Builds the PTX, then runs `gpu-bench <what> <args>` in release mode from the workspace
/// root, so the benchmark binary embeds the kernels just built. Exits with the benchmark's
/// status (its own error message is the one that matters).
pub fn gpu(what: &str, args: &[String]) -> Result<()> {
    build_ptx::run()?;
    let status = Command::new("cargo")
        .args(["run", "--release", "--locked", "--quiet", "--package", "gpu-bench", "--"])
        .arg(what)
        .args(args)
        .current_dir(workspace_root())
        .status()
        .context("could not start cargo")?;
    if !status.success() {
        std::process::exit(status.code().unwrap_or(1));
    }
    Ok(())
}

/// `cargo xtask bench cpu`: tokens/s and ms/step of the CPU trainer for d2 and d12 at B=4,
/// T=64 (median of 7 steps after 2 warm-up steps).
pub fn cpu() -> Result<()> {
    cmd::run(trainer()?.args([
        "bench",
        "--device",
        "cpu",
        "--model",
        "d2",
        "d12",
        "--batch-size",
        "4",
        "--seq-len",
        "64",
        "--warmup",
        "2",
        "--steps",
        "7",
    ]))
}
