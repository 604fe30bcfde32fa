//! `cargo xtask data`: prepare the bundled Shakespeare shards in `data/shakespeare`.

use crate::cmd;
use crate::trainer_bin::trainer;
use anyhow::Result;

/// Runs `trainer prepare-data` with `extra` options (e.g. `--sdist PATH`, `--force`).
pub fn run(extra: &[String]) -> Result<()> {
    cmd::run(trainer()?.arg("prepare-data").args(extra))
}
