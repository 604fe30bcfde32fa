//! `cargo xtask bench cpu`: tokens/s and ms/step of the CPU trainer for d2 and d12 at B=4,
//! T=64 (median of 7 steps after 2 warm-up steps).

use crate::cmd;
use crate::trainer_bin::trainer;
use anyhow::Result;

/// Runs the CPU trainer benchmark.
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
