//! `cargo xtask test`: everything CI checks, in the order that fails fastest.

use crate::cmd::{self, workspace_root};
use anyhow::Result;
use std::process::Command;

/// build-ptx + check-ptx, then clippy and rustfmt (host workspace and the device crate), then
/// the workspace tests in release mode (they are numeric and much slower unoptimized).
pub fn run() -> Result<()> {
    crate::check_ptx::run()?;
    let root = workspace_root();
    let kernels = root.join("kernels-gpu/Cargo.toml");
    step("rustfmt", Command::new("cargo").args(["fmt", "--all", "--check"]))?;
    step(
        "rustfmt (kernels-gpu)",
        Command::new("cargo").args(["fmt", "--check", "--manifest-path"]).arg(&kernels),
    )?;
    step(
        "clippy",
        Command::new("cargo").args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    let toolchain = crate::build_ptx::Toolchain::detect()?;
    step(
        "clippy (kernels-gpu)",
        toolchain.device_cargo("clippy", "clippy").args(["--", "-D", "warnings"]),
    )?;
    step("tests", Command::new("cargo").args(["test", "--workspace", "--release", "--locked"]))?;
    println!("xtask test: all checks passed");
    Ok(())
}

fn step(name: &str, command: &mut Command) -> Result<()> {
    println!("xtask test: {name}");
    cmd::run(command.current_dir(workspace_root()))
}
