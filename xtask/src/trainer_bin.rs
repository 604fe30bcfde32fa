//! Building and running the `trainer` binary (release profile) for the train, data and bench
//! commands.

use crate::cmd::{self, target_dir, workspace_root};
use anyhow::Result;
use std::path::PathBuf;
use std::process::Command;

/// Builds `trainer` in release mode and returns a command running it from the workspace root
/// (so `data/` and `runs/` land there).
pub fn trainer() -> Result<Command> {
    cmd::run(
        Command::new("cargo")
            .args(["build", "--release", "--package", "trainer", "--bin", "trainer"])
            .current_dir(workspace_root()),
    )?;
    let exe: PathBuf = target_dir().join("release").join("trainer");
    let mut command = Command::new(exe);
    command.current_dir(workspace_root());
    Ok(command)
}
