//! `trainer`: train GPT-2, sample from it, prepare data, benchmark. See `trainer --help`.

mod cli;
mod commands;

use anyhow::Result;
use clap::Parser;
use cli::{Cli, Command};
use std::process::ExitCode;

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(args) => commands::train(*args),
        Command::Sample(args) => commands::sample(args),
        Command::Convert(args) => commands::convert(&args),
        Command::Shard(args) => commands::shard(args),
        Command::PrepareData(args) => commands::prepare_data(args),
        Command::Bench(args) => commands::bench(args),
        Command::Ladder(args) => commands::ladder(&args),
    }
}
