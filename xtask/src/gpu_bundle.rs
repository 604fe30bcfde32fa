//! `cargo xtask gpu-bundle [DIR]`: everything GPU-facing, built here, in one folder that a GPU
//! machine without Rust or network runs with one command (`DIR/run.sh`, docs/GPU.md).
//!
//! The bundle holds the release builds of every kernel test binary of `integration-tests`
//! (their `gpu::` tests and `sim_vs_gpu`), every binary of `gpu-bench` and `trainer`, and the
//! Python scripts under `bench/`, each executable stripped and xz-compressed (`xz -9`). The
//! executables are built without the PTX text (`GPU_HOST_EXTERNAL_PTX`, gpu-host's build.rs:
//! only its digest), which the bundle ships once, in `ptx/`, named after that digest
//! (embedded, the two modules took some 2.5 MB of each compressed executable); beside it the
//! cubins ptxas makes here of both modules ([`cubin`]: no JIT on the GPU machine), the bundled
//! Shakespeare shards (`data/shakespeare`, prepared here first if needed: the GPU machine has no
//! network), plus `run.sh` and a `MANIFEST.txt` (commit, date, files). It then rehearses the bundle here with a fake `nvidia-smi`
//! ([`rehearse`]): every step must fail only for want of a GPU driver.
//! Test binaries and benchmarks are discovered, never listed: a new `tests/tests/*.rs` file or
//! `gpu-bench` subcommand joins the next bundle by itself.

use crate::build_ptx;
use crate::cmd::{self, target_dir, workspace_root};
use crate::trainer_bin;
use anyhow::{Context, Result, bail};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

mod cubin;
mod glibc;
mod rehearse;

/// The runner, copied into every bundle.
const RUN_SH: &str = include_str!("gpu_bundle/run.sh");

/// The limit on what one call of the GPU machine can carry (docs/GPU.md).
const CARRY_LIMIT: u64 = 64 << 20;

/// One file to ship xz-compressed: where it was built, where it goes in the bundle, and
/// whether to strip it first (executables, not cubins).
struct PackJob {
    src: PathBuf,
    dest: PathBuf,
    strip: bool,
}

/// One executable to ship: its name in the bundle and where cargo built it.
struct Executable {
    name: String,
    path: PathBuf,
}

/// Builds the bundle into `dir` (default `target/gpu-bundle`) and prints its size and how to
/// run it.
pub fn run(dir: Option<PathBuf>) -> Result<()> {
    let dir = dir.unwrap_or_else(|| target_dir().join("gpu-bundle"));
    if dir.exists() && !dir.is_dir() {
        bail!("{} exists and is not a directory: name a folder for the bundle", dir.display());
    }
    let modules = build_ptx::run()?;
    let cubin_stage = target_dir().join("cubin");
    if cubin_stage.exists() {
        fs::remove_dir_all(&cubin_stage)
            .with_context(|| format!("removing {}", cubin_stage.display()))?;
    }
    let cubins = cubin::assemble_all(&modules, &cubin_stage)?;
    let ptx_dir = target_dir().join("ptx");
    let tests = cargo_executables(
        &["test", "--release", "--locked", "--package", "integration-tests", "--no-run"],
        "test",
        &ptx_dir,
    )?;
    let bins = cargo_executables(
        &[
            "build",
            "--release",
            "--locked",
            "--package",
            "gpu-bench",
            "--package",
            "trainer",
            "--bins",
        ],
        "bin",
        &ptx_dir,
    )?;
    if tests.is_empty() || bins.is_empty() {
        bail!("cargo built no test binaries or no benchmark/trainer binaries");
    }
    let exe_paths: Vec<&Path> = tests.iter().chain(&bins).map(|exe| exe.path.as_path()).collect();
    let glibc = glibc::check(&exe_paths)?;
    prepare_dir(&dir)?;
    let mut jobs = Vec::new();
    for (folder, exes) in [("tests", &tests), ("bin", &bins)] {
        for exe in exes {
            let dest = dir.join(folder).join(format!("{}.xz", exe.name));
            jobs.push(PackJob { src: exe.path.clone(), dest, strip: true });
        }
    }
    for cubin in cubins {
        let name = cubin.file_name().and_then(|n| n.to_str()).context("cubin has no name")?;
        let dest = dir.join("cubin").join(format!("{name}.xz"));
        jobs.push(PackJob { src: cubin, dest, strip: false });
    }
    for module in &modules {
        let text =
            fs::read(&module.path).with_context(|| format!("reading {}", module.path.display()))?;
        let name = cubin::file_name(module.arch.name, &text, "ptx");
        let dest = dir.join("ptx").join(format!("{name}.xz"));
        jobs.push(PackJob { src: module.path.clone(), dest, strip: false });
    }
    pack_all(&jobs)?;
    let mut files: Vec<PathBuf> = jobs.into_iter().map(|job| job.dest).collect();
    for script in python_scripts()? {
        let dest = dir.join("bench").join(script.file_name().context("script has no name")?);
        fs::create_dir_all(dest.parent().context("no parent")?)?;
        fs::copy(&script, &dest).with_context(|| format!("copying {}", script.display()))?;
        files.push(dest);
    }
    for shard in shakespeare_shards()? {
        let dest =
            dir.join("data/shakespeare").join(shard.file_name().context("shard has no name")?);
        fs::create_dir_all(dest.parent().context("no parent")?)?;
        fs::copy(&shard, &dest).with_context(|| format!("copying {}", shard.display()))?;
        files.push(dest);
    }
    let run_sh = dir.join("run.sh");
    cmd::write_executable_atomic(&run_sh, RUN_SH.as_bytes())?;
    files.push(run_sh);
    let manifest = manifest(&dir, &files, glibc)?;
    cmd::write_atomic(&dir.join("MANIFEST.txt"), manifest.as_bytes())?;
    fs::remove_file(dir.join(BUILDING_MARKER))?;
    report(&dir, &files)?;
    rehearse::run(&dir)
}

/// Where the bundle's executables are built: apart from the workspace's own builds, which
/// embed the PTX text (`GPU_HOST_EXTERNAL_PTX` changes gpu-host, so one shared folder would
/// rebuild every crate above it at each switch between the two).
fn build_dir() -> PathBuf {
    target_dir().join("gpu-bundle-build")
}

/// Runs `cargo <args> --message-format=json-render-diagnostics` in [`build_dir`], without the
/// PTX text of `ptx_dir` (only its digests) in the executables, and returns the executables it
/// built for targets of `kind` (`test`: `tests/*.rs`, named after the file; `bin`).
fn cargo_executables(args: &[&str], kind: &str, ptx_dir: &Path) -> Result<Vec<Executable>> {
    let output = cmd::output(
        Command::new("cargo")
            .args(args)
            .arg("--message-format=json-render-diagnostics")
            .env("CARGO_TARGET_DIR", build_dir())
            .env("GPU_HOST_EXTERNAL_PTX", ptx_dir)
            .current_dir(workspace_root()),
    )?;
    let mut exes = Vec::new();
    for line in output.lines() {
        let Ok(msg) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        let kinds = msg["target"]["kind"].as_array();
        if msg["reason"] != "compiler-artifact"
            || !kinds.is_some_and(|k| k.iter().any(|k| k == kind))
        {
            continue;
        }
        let (Some(path), Some(name)) = (msg["executable"].as_str(), msg["target"]["name"].as_str())
        else {
            continue;
        };
        exes.push(Executable { name: name.to_string(), path: PathBuf::from(path) });
    }
    exes.sort_by(|a, b| a.name.cmp(&b.name));
    exes.dedup_by(|a, b| a.name == b.name);
    Ok(exes)
}

/// The file that marks a bundle folder being filled (written first, removed once MANIFEST.txt
/// is): a build interrupted half-way leaves a folder the next build may replace.
const BUILDING_MARKER: &str = ".gpu-bundle-building";

/// Empties `dir` and marks it as a bundle being built, refusing to delete a folder that is
/// not a bundle (complete, or marked by an interrupted build).
fn prepare_dir(dir: &Path) -> Result<()> {
    if dir.exists() {
        let is_bundle = (dir.join("MANIFEST.txt").exists() && dir.join("run.sh").exists())
            || dir.join(BUILDING_MARKER).exists();
        let is_empty = fs::read_dir(dir)?.next().is_none();
        if !is_bundle && !is_empty {
            bail!(
                "{} exists and is not a GPU bundle (no MANIFEST.txt and run.sh): choose another \
                 folder",
                dir.display()
            );
        }
        fs::remove_dir_all(dir).with_context(|| format!("removing {}", dir.display()))?;
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    cmd::write_atomic(&dir.join(BUILDING_MARKER), b"a GPU bundle is being built here\n")
}

/// Packs every job, as many at a time as there are cores (`xz -9` takes several seconds and
/// ~700 MB per binary).
fn pack_all(jobs: &[PackJob]) -> Result<()> {
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    for batch in jobs.chunks(workers) {
        std::thread::scope(|scope| {
            let handles: Vec<_> = batch.iter().map(|job| scope.spawn(|| pack(job))).collect();
            handles.into_iter().try_for_each(|h| h.join().expect("packing thread panicked"))
        })?;
    }
    Ok(())
}

/// Copies `job.src` to a temporary file, strips it if asked, and writes it xz-compressed to
/// `job.dest`.
fn pack(job: &PackJob) -> Result<()> {
    let parent = job.dest.parent().context("destination has no folder")?;
    fs::create_dir_all(parent)?;
    let name = job.dest.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let copy = parent.join(format!(".{name}.{}.tmp", std::process::id()));
    fs::copy(&job.src, &copy).with_context(|| format!("copying {}", job.src.display()))?;
    if job.strip {
        cmd::run(Command::new("strip").arg("--strip-all").arg(&copy))
            .context("stripping the binary (install binutils for `strip`)")?;
    }
    let packed = Command::new("xz")
        .args(["-9", "--stdout", "--"])
        .arg(&copy)
        .output()
        .context("running `xz` (install xz-utils)")?;
    fs::remove_file(&copy)?;
    if !packed.status.success() {
        bail!("xz failed on {}: {}", job.src.display(), String::from_utf8_lossy(&packed.stderr));
    }
    cmd::write_atomic(&job.dest, &packed.stdout)
}

/// `bench/*.py`: scripts the benchmarks call (PyTorch baselines).
fn python_scripts() -> Result<Vec<PathBuf>> {
    let bench = workspace_root().join("bench");
    let mut scripts = Vec::new();
    if bench.is_dir() {
        for entry in fs::read_dir(&bench)? {
            let path = entry?.path();
            if path.extension().is_some_and(|e| e == "py") {
                scripts.push(path);
            }
        }
    }
    scripts.sort();
    Ok(scripts)
}

/// The Shakespeare train and val shards, prepared by `trainer prepare-data` when missing.
fn shakespeare_shards() -> Result<Vec<PathBuf>> {
    let data = workspace_root().join("data/shakespeare");
    let shards: Vec<PathBuf> =
        ["train_000000.bin", "val_000000.bin"].iter().map(|name| data.join(name)).collect();
    if !shards.iter().all(|s| s.is_file()) {
        cmd::run(trainer_bin::trainer()?.args(["prepare-data", "--data-dir"]).arg(&data))?;
    }
    Ok(shards)
}

/// `commit:`, `dirty:`, `built:`, `glibc:` and `files:` lines (run.sh reads the commit from
/// here).
fn manifest(dir: &Path, files: &[PathBuf], glibc: Option<glibc::GlibcVersion>) -> Result<String> {
    let git = |args: &[&str]| {
        cmd::output(Command::new("git").args(args).current_dir(workspace_root()))
            .map(|s| s.trim().to_string())
    };
    let commit = git(&["rev-parse", "--short=12", "HEAD"]).unwrap_or_else(|_| "unknown".into());
    let dirty = git(&["status", "--porcelain", "--untracked-files=no"])
        .map(|s| if s.is_empty() { "no" } else { "yes (uncommitted changes)" })
        .unwrap_or("unknown");
    let built = cmd::output(Command::new("date").args(["-u", "+%Y-%m-%d %H:%M UTC"]))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown".into());
    let glibc = glibc.map_or("none (static)".to_string(), |v| format!("{v} or newer"));
    let mut text =
        format!("commit: {commit}\ndirty: {dirty}\nbuilt: {built}\nglibc: {glibc}\nfiles:\n");
    for file in files {
        let rel = file.strip_prefix(dir).unwrap_or(file);
        text += &format!("  {} ({} KiB)\n", rel.display(), fs::metadata(file)?.len() >> 10);
    }
    Ok(text)
}

/// Prints the bundle's size and how to run it; fails if it is over the carry limit.
fn report(dir: &Path, files: &[PathBuf]) -> Result<()> {
    let mut total = 0;
    for file in files {
        total += fs::metadata(file)?.len();
    }
    let rel = dir.strip_prefix(workspace_root()).unwrap_or(dir);
    println!(
        "gpu-bundle: {} ({} files, {:.1} MiB)\n\
         run it on a GPU machine from the repository root (docs/GPU.md):\n  \
         bash {}/run.sh [info] [tests] [sanitize] [bench] [train] [ladder] [profile] --out DIR [--archive FILE.tar.gz] [--budget SECONDS]",
        dir.display(),
        files.len(),
        total as f64 / (1 << 20) as f64,
        rel.display()
    );
    if total > CARRY_LIMIT {
        bail!(
            "the bundle is {:.1} MiB, over the {} MiB a GPU machine call can carry",
            total as f64 / (1 << 20) as f64,
            CARRY_LIMIT >> 20
        );
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod run_sh_tests;

#[cfg(test)]
mod tests {
    /// A bundle folder that is a file is refused before anything is built.
    #[test]
    fn a_file_is_no_bundle_folder() {
        let file = std::env::temp_dir().join(format!("gpu-bundle-file-{}", std::process::id()));
        std::fs::write(&file, b"x").unwrap();
        let err = super::run(Some(file.clone())).unwrap_err().to_string();
        std::fs::remove_file(&file).unwrap();
        assert!(err.contains("exists and is not a directory"), "{err}");
    }

    /// A folder left by an interrupted build is replaced; one with other files is not.
    #[test]
    fn interrupted_bundles_are_replaced_other_folders_kept() {
        let dir = tempfile::tempdir().unwrap();
        let bundle = dir.path().join("bundle");
        super::prepare_dir(&bundle).unwrap();
        std::fs::write(bundle.join("half-packed.xz"), b"x").unwrap();
        super::prepare_dir(&bundle).unwrap();
        assert!(!bundle.join("half-packed.xz").exists());
        let other = dir.path().join("other");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join("notes.txt"), b"x").unwrap();
        let err = super::prepare_dir(&other).unwrap_err().to_string();
        assert!(err.contains("is not a GPU bundle"), "{err}");
        assert!(other.join("notes.txt").exists());
    }
}
