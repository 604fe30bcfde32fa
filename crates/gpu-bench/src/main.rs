//! `gpu-bench`: benchmarks of the project's kernels on a CUDA GPU, against the vendor
//! libraries in the same run. Normally started through `cargo xtask bench <what>`, which builds
//! the PTX first; on a machine without cargo (the GPU bundle, docs/GPU.md), run the binary
//! itself. Every benchmark prints a last line `headline: ...` that the bundle's summary quotes.

mod attention;
mod cublas;
mod data;
mod gemm;
mod info;
mod kernels;
mod report;
mod timing;

use anyhow::{Context, Result};
use clap::{CommandFactory, Parser, Subcommand};
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
    /// The memory-bound kernels (GELU, residual, layernorm, classifier, ...) at GPT-2 124M
    /// sizes: achieved GB/s against a device-to-device copy; writes bench/kernels-<device>.md.
    Kernels(kernels::Args),
    /// Attention forward and backward (our flash and materialised paths) at GPT-2 124M's heads
    /// and T = 1024..4096 against PyTorch's SDPA backends and materialised attention in the
    /// same run; writes bench/attention-<device>.md.
    Attention(attention::Args),
    /// The GPU's facts (name, compute capability, SMs, memory, L2, clocks, driver).
    Info,
    /// Prints the name of every benchmark, one per line (how the GPU bundle finds them).
    List,
}

/// Subcommands that are not benchmarks.
const NOT_BENCHMARKS: [&str; 3] = ["info", "list", "help"];

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Gemm(args) => gemm::run(&args),
        Command::Kernels(args) => kernels::run(&args),
        Command::Attention(args) => attention::run(&args),
        Command::Info => info::run(),
        Command::List => {
            for name in benchmark_names() {
                println!("{name}");
            }
            Ok(())
        }
    }
}

/// Every subcommand that is a benchmark, in declaration order.
fn benchmark_names() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_string())
        .filter(|name| !NOT_BENCHMARKS.contains(&name.as_str()))
        .collect()
}

/// Writes `text` to `path` atomically (temporary file in the same folder, then rename; the
/// temporary file removed on failure).
fn write_atomic(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("report");
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let written = std::fs::write(&tmp, text).and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_names_the_benchmarks_only() {
        assert_eq!(benchmark_names(), ["gemm", "kernels", "attention"]);
    }

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }
}
