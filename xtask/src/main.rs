//! `cargo xtask <command>`: the project's build, check and test automation.

mod bench;
mod build_ptx;
mod check_ptx;
mod cmd;
mod test;

use anyhow::Result;
use clap::{Parser, Subcommand};

/// Project automation for the GPT-2 Rust kernels workspace.
#[derive(Parser)]
#[command(name = "cargo xtask", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Compile the kernels-gpu crate to PTX for every target architecture
    /// (writes target/ptx/<arch>/kernels.ptx).
    BuildPtx,
    /// Assemble the PTX with ptxas (downloaded on first use) and report registers, shared
    /// memory, stack and spills per kernel; fails on spills or stack frames.
    CheckPtx,
    /// The full test pipeline: build-ptx, check-ptx, clippy, rustfmt, cargo test.
    Test,
    /// Benchmarks (GPU ones need a CUDA GPU).
    Bench {
        /// What to benchmark.
        #[command(subcommand)]
        which: BenchTarget,
    },
}

/// The benchmark groups of `cargo xtask bench`.
#[derive(Subcommand)]
enum BenchTarget {
    /// GEMM variants vs cuBLAS / cuBLASLt on 4096³ and the GPT-2 124M matmuls (CUDA GPU
    /// only); writes bench/gemm-<device>.md. Arguments after `--` go to `gpu-bench gemm`
    /// (see `cargo xtask bench gemm -- --help`).
    Gemm {
        /// Arguments for `gpu-bench gemm`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::BuildPtx => build_ptx::run().map(drop),
        Command::CheckPtx => check_ptx::run(),
        Command::Test => test::run(),
        Command::Bench { which: BenchTarget::Gemm { args } } => bench::gpu("gemm", &args),
    }
}
