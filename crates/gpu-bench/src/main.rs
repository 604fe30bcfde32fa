//! `gpu-bench`: benchmarks of the project's kernels on a CUDA GPU, against the vendor
//! libraries in the same run. Normally started through `cargo xtask bench <what>`, which builds
//! the PTX first; on a machine without cargo, run the binary itself.

mod cublas;
mod gemm;
mod report;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use std::path::Path;

/// GPU benchmarks (CUDA events, warm-up, median; inputs rotated past the L2 cache).
#[derive(Parser)]
#[command(name = "gpu-bench", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// GEMM variants vs cuBLAS / cuBLASLt on 4096³ and the GPT-2 124M matmuls; writes
    /// bench/gemm-<device>.md.
    Gemm(gemm::Args),
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Gemm(args) => gemm::run(&args),
    }
}

/// Writes `text` to `path` atomically (temporary file in the same folder, then rename).
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(".{}.tmp", std::process::id()));
    std::fs::write(&tmp, text).with_context(|| format!("writing {}", tmp.display()))?;
    std::fs::rename(&tmp, path).with_context(|| format!("renaming to {}", path.display()))
}
