//! `cargo xtask bench ...`: builds what a benchmark measures, then runs it.

use crate::build_ptx;
use crate::cmd::workspace_root;
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
