//! `cargo xtask ladder [ARGS]`: the speed ladder (`trainer ladder`, with the PTX built first).
//! On a GPU it times GPT-2 124M rung by rung against PyTorch and writes
//! `bench/ladder-<gpu>.md`; `--device sim` checks on the simulator that every rung trains.

use crate::build_ptx;
use crate::cmd;
use crate::trainer_bin::trainer;
use anyhow::Result;

/// Builds the PTX and the trainer, then runs `trainer ladder ARGS` from the workspace root.
pub fn run(args: &[String]) -> Result<()> {
    build_ptx::run()?;
    cmd::run(trainer()?.arg("ladder").args(args))
}
