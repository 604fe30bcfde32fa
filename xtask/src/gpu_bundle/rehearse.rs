//! The bundle rehearsed where it was built, without a GPU: `run.sh` over every stage (a few
//! steps of each) with a fake `nvidia-smi` first on `PATH`, and a `compute-sanitizer` and an
//! `ncu` that just run their command. Every step must then fail for want of a driver and for no other reason,
//! which shows that each command line `run.sh` gives a binary parses and finds its files
//! before a GPU machine's time is spent on it (docs/GPU.md).

use anyhow::{Context, Result, bail};
use std::fs;
use std::path::Path;
use std::process::Command;

/// What the fake tools say: one GPU listed, and a sanitizer that runs the command it wraps
/// (`compute-sanitizer --tool T --error-exitcode N BINARY ARGS...`).
const FAKE_NVIDIA_SMI: &str = "#!/bin/sh\ncase $1 in -L) echo 'GPU 0: Rehearsal (UUID: none)' ;; \
                               *) echo 'Rehearsal, 0.0, 9.0' ;; esac\n";
const FAKE_SANITIZER: &str = "#!/bin/sh\nshift 4\nexec \"$@\"\n";
/// `ncu` with the 14 words of options `run.sh` always gives it (`ncu_options`), then the
/// command.
const FAKE_NCU: &str = "#!/bin/sh\nshift 14\nexec \"$@\"\n";

/// Rehearses the bundle in `dir`; skipped on a machine with a real `nvidia-smi`, where the
/// rehearsal would run the GPU for real.
pub fn run(dir: &Path) -> Result<()> {
    let has_nvidia_smi = std::env::var_os("PATH")
        .is_some_and(|paths| std::env::split_paths(&paths).any(|p| p.join("nvidia-smi").is_file()));
    if has_nvidia_smi {
        println!(
            "gpu-bundle: rehearsal skipped (this machine has nvidia-smi: run the bundle itself)"
        );
        return Ok(());
    }
    let scratch = std::env::temp_dir().join(format!("gpu-bundle-rehearsal-{}", std::process::id()));
    let result = rehearse(dir, &scratch);
    let _ = fs::remove_dir_all(&scratch);
    let steps = result?;
    println!(
        "gpu-bundle: rehearsed without a GPU: all {steps} steps of run.sh reached their binary \
         and failed only for want of a driver"
    );
    Ok(())
}

/// Runs the rehearsal in `scratch`; returns the number of steps checked.
fn rehearse(dir: &Path, scratch: &Path) -> Result<usize> {
    let fake = scratch.join("bin");
    fs::create_dir_all(&fake)?;
    fs::create_dir_all(scratch.join("tmp"))?;
    for (name, script) in
        [("nvidia-smi", FAKE_NVIDIA_SMI), ("compute-sanitizer", FAKE_SANITIZER), ("ncu", FAKE_NCU)]
    {
        crate::cmd::write_executable_atomic(&fake.join(name), script.as_bytes())?;
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    let path = std::env::join_paths(std::iter::once(fake).chain(std::env::split_paths(&path)))?;
    let results = scratch.join("results");
    let out = Command::new("bash")
        .arg(dir.join("run.sh"))
        .args(["--budget", "300", "--out"])
        .arg(&results)
        .env("PATH", path)
        .env("TMPDIR", scratch.join("tmp"))
        .env("TESTS", "gemm sim_vs_gpu")
        // The sanitizer's probe fails here for want of a driver, which would end the stage
        // before the command lines this rehearsal is for.
        .env("SANITIZE_PROBE", "off")
        .env("TRAIN_PRECISIONS", "bf16")
        .env("LADDER_RUNGS", "fp32")
        .env("TRAIN_STEPS", "2")
        .env_remove("BENCHMARKS")
        .env_remove("RUN_BUDGET")
        .output()
        .context("running the bundle's run.sh for the rehearsal")?;
    let logs = results.join("logs");
    let mut checked = 0;
    let mut problems = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(&logs)
        .with_context(|| {
            format!(
                "the rehearsal wrote no logs; run.sh said:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            )
        })?
        .collect::<std::io::Result<_>>()?;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !name.ends_with(".log") {
            continue;
        }
        checked += 1;
        let log = fs::read_to_string(entry.path())?;
        if let Some(problem) = unexpected_failure(&log) {
            problems.push(format!("  logs/{name}: {problem}"));
        }
    }
    if checked == 0 {
        bail!("the rehearsal ran no step");
    }
    if !problems.is_empty() {
        bail!(
            "the bundle's rehearsal (run.sh with a fake nvidia-smi) found steps that fail for \
             another reason than the missing GPU driver:\n{}\nFix them before taking the bundle \
             to a GPU.",
            problems.join("\n")
        );
    }
    Ok(checked)
}

/// Why the log of a rehearsed step shows a failure other than the missing driver, if it does:
/// a usage error, or no sign of having reached the point where the GPU is opened.
fn unexpected_failure(log: &str) -> Option<String> {
    let usage = ["For more information, try '--help'", "unexpected argument", "invalid value"];
    let first_error = || {
        log.lines()
            .find(|l| l.starts_with("error") || l.starts_with("Error"))
            .or_else(|| log.lines().rev().find(|l| !l.trim().is_empty()))
            .unwrap_or("(empty log)")
            .chars()
            .take(200)
            .collect::<String>()
    };
    if usage.iter().any(|u| log.contains(u)) {
        return Some(first_error());
    }
    let reached_the_gpu = log.contains("no CUDA driver") || log.contains("skipped: no GPU");
    (!reached_the_gpu).then(first_error)
}

#[cfg(test)]
mod tests {
    use super::unexpected_failure;

    #[test]
    fn only_the_missing_driver_is_expected() {
        let driver =
            "error: --device cuda: no CUDA driver: libcuda.so (the NVIDIA driver) not found";
        assert_eq!(unexpected_failure(driver), None);
        assert_eq!(unexpected_failure("skipped: no GPU (no CUDA driver)\ntest result: ok."), None);
        let usage = "error: the argument '--model <MODEL>' cannot be used with '--resume <DIR>'\n\n\
                     For more information, try '--help'.\n";
        let why = unexpected_failure(usage).unwrap();
        assert!(why.starts_with("error: the argument '--model"), "{why}");
        let missing = "Error: reading /x/bench/ladder_torch.py: No such file or directory";
        assert_eq!(unexpected_failure(missing).unwrap(), missing);
    }
}
