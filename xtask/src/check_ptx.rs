//! `cargo xtask check-ptx`: assemble every PTX module with `ptxas -v` and report resources.
//!
//! No CUDA install is needed: `ptxas` comes from NVIDIA's PyPI wheel `nvidia-cuda-nvcc-cu12`
//! (pinned version and sha256), fetched once with `pip download` and cached under
//! `target/tools/`. Set `PTXAS=/path/to/ptxas` to use another one.

use crate::build_ptx;
use crate::cmd::{self, target_dir};
use anyhow::{Context, Result, bail, ensure};
use object::{Object, ObjectSection};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

const WHEEL_PACKAGE: &str = "nvidia-cuda-nvcc-cu12";
const WHEEL_VERSION: &str = "12.9.86";
const WHEEL_MEMBER: &str = "nvidia/cuda_nvcc/bin/ptxas";

/// (architecture as Rust names it, pip platform tag, sha256 of the wheel).
const WHEELS: &[(&str, &str, &str)] = &[
    (
        "x86_64",
        "manylinux2014_x86_64",
        "5d6a0d32fdc7ea39917c20065614ae93add6f577d840233237ff08e9a38f58f0",
    ),
    (
        "aarch64",
        "manylinux2014_aarch64",
        "44e1eca4d08926193a558d2434b1bf83d57b4d5743e0c431c0c83d51da1df62b",
    ),
];

/// Kernels allowed a stack frame or spills, each with the reason. Keep it short.
const ALLOWED_STACK: &[(&str, &str)] = &[];

/// `ptxas info` messages that `--warning-as-error` lets through but that mean a Hopper kernel
/// silently lost what it was written for, each with what it means.
const REJECTED_INFOS: &[(&str, &str)] = &[
    (
        "Potential Performance Loss",
        "ptxas disabled a feature: `setmaxnreg` ignored (no launch bounds reached the entry), \
         or wgmma serialised (accumulators touched by other instructions while in flight)",
    ),
    (
        "warpgroup.wait is injected",
        "wgmma accumulators are read on a path without a covering `wgmma.wait_group`",
    ),
];

/// Entry-name prefixes of kernels that compute per element with no IEEE f32 division (what
/// Rust's `/` on f32 compiles to: `div.rn.f32`, or `rcp.rn.f32` for `1.0 / x`), with the
/// reason. ptxas expands each such
/// division into a range check and a branch to a slow-path call, which serialises the
/// elements around it (in the GEMM epilogue's GELU: 128 calls per thread, one per output).
const NO_IEEE_DIVISION: &[(&str, &str)] = &[
    ("gemm_", "the epilogue's GELU divides per output: use `rcp_approx_f32`"),
    ("gelu_", "GELU divides per element: use `rcp_approx_f32`"),
];

/// The most SASS one kernel may have. The 16-bit Hopper GEMMs had about 100 KiB at commit
/// 66cb1ef; at d8b3498, their epilogue's four runs unrolled, 345 KiB, and on an H100 their
/// GELU epilogues ran 1.6× slower (both SM and memory throughput under 20%: the instruction
/// cache the suspect). A kernel past this budget has code grown by unrolling or inlining
/// that no one measured.
const CODE_BUDGET_BYTES: u64 = 192 << 10;

/// Resource usage of one kernel on one architecture, as `ptxas -v` reports it (shared
/// memory is the static allocation; dynamic shared memory is set per launch).
#[derive(Debug, Default, PartialEq)]
struct Usage {
    kernel: String,
    arch: String,
    registers: u32,
    shared_bytes: u32,
    stack_bytes: u32,
    spill_stores: u32,
    spill_loads: u32,
    /// SASS bytes (the cubin's `.text.<kernel>` section).
    code_bytes: u64,
}

/// Builds the PTX, assembles it for every target, prints the table, fails on spills.
pub fn run() -> Result<()> {
    let built = build_ptx::run()?;
    let ptxas = ptxas()?;
    let mut rows = Vec::new();
    let mut divisions = Vec::new();
    for module in &built {
        let ptx = std::fs::read_to_string(&module.path)
            .with_context(|| format!("reading {}", module.path.display()))?;
        divisions.extend(
            ieee_divisions(&ptx).into_iter().map(|d| format!("{} ({})", d, module.path.display())),
        );
        for target in module.arch.assemble_for {
            rows.extend(assemble(&ptxas, &module.path, target)?);
        }
    }
    rows.sort_by(|a, b| (&a.kernel, &a.arch).cmp(&(&b.kernel, &b.arch)));
    print_table(&rows);
    let offenders: Vec<String> = rows
        .iter()
        .filter(|u| u.stack_bytes + u.spill_stores + u.spill_loads > 0)
        .filter(|u| !ALLOWED_STACK.iter().any(|(k, _)| *k == u.kernel))
        .map(|u| {
            format!(
                "{} ({}): {} bytes stack, {} spill stores, {} spill loads",
                u.kernel, u.arch, u.stack_bytes, u.spill_stores, u.spill_loads
            )
        })
        .collect();
    ensure!(
        offenders.is_empty(),
        "kernels with a stack frame or spills (fix them, or allow-list them with a reason in \
         xtask/src/check_ptx.rs):\n  {}",
        offenders.join("\n  ")
    );
    let oversized: Vec<String> = rows
        .iter()
        .filter(|u| u.code_bytes > CODE_BUDGET_BYTES)
        .map(|u| format!("{} ({}): {:.1} KiB", u.kernel, u.arch, u.code_bytes as f64 / 1024.0))
        .collect();
    ensure!(
        oversized.is_empty(),
        "kernels over the code budget of {} KiB (see CODE_BUDGET_BYTES in \
         xtask/src/check_ptx.rs):\n  {}",
        CODE_BUDGET_BYTES >> 10,
        oversized.join("\n  ")
    );
    ensure!(
        divisions.is_empty(),
        "kernels with IEEE f32 divisions where none may be:\n  {}",
        divisions.join("\n  ")
    );
    println!(
        "check-ptx: {} kernel/arch pairs assembled, no spills, no stack frames, none over {} \
         KiB of code, no IEEE division in the GEMM and GELU kernels",
        rows.len(),
        CODE_BUDGET_BYTES >> 10
    );
    Ok(())
}

/// The entries of a PTX module that [`NO_IEEE_DIVISION`] covers and that contain a
/// `div.rn.f32` or `rcp.rn.f32`, each with the count and the reason.
fn ieee_divisions(ptx: &str) -> Vec<String> {
    ptx.split(".entry ")
        .skip(1)
        .filter_map(|body| {
            let name = body.split(|c: char| c == '(' || c.is_whitespace()).next()?;
            let (_, why) = NO_IEEE_DIVISION.iter().find(|(prefix, _)| name.starts_with(prefix))?;
            let count = body.matches("div.rn.f32").count() + body.matches("rcp.rn.f32").count();
            (count > 0).then(|| format!("{name}: {count} IEEE divisions ({why})"))
        })
        .collect()
}

/// Runs `ptxas -v` on `ptx` for `arch` and parses its report and the cubin's code sizes.
fn assemble(ptxas: &Path, ptx: &Path, arch: &str) -> Result<Vec<Usage>> {
    let cubin = target_dir().join("check-ptx").join(format!("kernels-{arch}.cubin"));
    std::fs::create_dir_all(cubin.parent().expect("a file in a folder"))?;
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .args(["-v", "--warning-as-error", "-o"])
        .arg(&cubin)
        .arg(ptx)
        .output()
        .with_context(|| format!("running {}", ptxas.display()))?;
    let report =
        format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if !out.status.success() {
        bail!("ptxas failed on {} for {arch}:\n{report}", ptx.display());
    }
    let rejected = rejected_infos(&report);
    ensure!(
        rejected.is_empty(),
        "ptxas reports lost performance features in {} for {arch}:\n  {}",
        ptx.display(),
        rejected.join("\n  ")
    );
    let mut rows = parse_report(&report, arch)?;
    let bytes = std::fs::read(&cubin).with_context(|| format!("reading {}", cubin.display()))?;
    let sizes = code_sizes(&bytes).with_context(|| format!("reading {}", cubin.display()))?;
    for row in &mut rows {
        row.code_bytes = *sizes.get(&row.kernel).with_context(|| {
            format!("{} has no code section `.text.{}`", cubin.display(), row.kernel)
        })?;
    }
    Ok(rows)
}

/// Each function's SASS bytes in a cubin: the size of its `.text.<name>` section.
fn code_sizes(cubin: &[u8]) -> Result<HashMap<String, u64>> {
    let file = object::File::parse(cubin).context("not an ELF file")?;
    Ok(file
        .sections()
        .filter_map(|s| Some((s.name().ok()?.strip_prefix(".text.")?.to_string(), s.size())))
        .collect())
}

/// The lines of a `ptxas -v` report that match [`REJECTED_INFOS`], each followed by its
/// meaning.
fn rejected_infos(report: &str) -> Vec<String> {
    report
        .lines()
        .filter_map(|line| {
            let (_, why) = REJECTED_INFOS.iter().find(|(pattern, _)| line.contains(pattern))?;
            Some(format!("{} ({why})", line.trim()))
        })
        .collect()
}

/// Parses `ptxas -v` output into one [`Usage`] per entry function.
fn parse_report(report: &str, arch: &str) -> Result<Vec<Usage>> {
    let mut rows: Vec<Usage> = Vec::new();
    let number_before = |line: &str, unit: &str| -> Option<u32> {
        let end = line.find(unit)?;
        line[..end].split(|c: char| !c.is_ascii_digit()).rfind(|s| !s.is_empty())?.parse().ok()
    };
    for line in report.lines() {
        if let Some(rest) = line.split("Compiling entry function '").nth(1) {
            let kernel = rest.split('\'').next().unwrap_or_default().to_string();
            rows.push(Usage { kernel, arch: arch.to_string(), ..Usage::default() });
            continue;
        }
        let Some(row) = rows.last_mut() else { continue };
        if line.contains("bytes stack frame") {
            row.stack_bytes = number_before(line, " bytes stack frame").unwrap_or(0);
            row.spill_stores = number_before(line, " bytes spill stores").unwrap_or(0);
            row.spill_loads = number_before(line, " bytes spill loads").unwrap_or(0);
        } else if line.contains(" registers") {
            row.registers = number_before(line, " registers").context("registers")?;
            row.shared_bytes = number_before(line, " bytes smem").unwrap_or(0);
        }
    }
    ensure!(!rows.is_empty(), "ptxas reported no entry functions for {arch}:\n{report}");
    Ok(rows)
}

fn print_table(rows: &[Usage]) {
    let width = rows.iter().map(|u| u.kernel.len()).max().unwrap_or(6).max(6);
    println!(
        "{:width$}  {:7}  {:>4}  {:>10}  {:>5}  {:>11}  {:>10}  {:>8}",
        "kernel", "arch", "regs", "smem B", "stack B", "spill st B", "spill ld B", "code KiB"
    );
    for u in rows {
        println!(
            "{:width$}  {:7}  {:>4}  {:>10}  {:>5}  {:>11}  {:>10}  {:>8.1}",
            u.kernel,
            u.arch,
            u.registers,
            u.shared_bytes,
            u.stack_bytes,
            u.spill_stores,
            u.spill_loads,
            u.code_bytes as f64 / 1024.0
        );
    }
}

/// `$PTXAS`, or the cached copy from the pinned wheel (downloaded on first use).
pub(crate) fn ptxas() -> Result<PathBuf> {
    if let Some(path) = std::env::var_os("PTXAS") {
        let path = PathBuf::from(path);
        ensure!(path.is_file(), "PTXAS={} is not a file", path.display());
        return Ok(path);
    }
    let cached = target_dir().join("tools").join(format!("ptxas-{WHEEL_VERSION}")).join("ptxas");
    if !cached.is_file() {
        download_ptxas(&cached)?;
    }
    Ok(cached)
}

fn download_ptxas(dest: &Path) -> Result<()> {
    let arch = std::env::consts::ARCH;
    let &(_, platform, sha256) = WHEELS.iter().find(|(a, _, _)| *a == arch).with_context(|| {
        format!("no pinned ptxas wheel for {arch}; set PTXAS to a ptxas (CUDA 12.8 or newer)")
    })?;
    let download_dir = dest.with_file_name("wheel");
    // A wheel left by an interrupted run would fail the digest on every later run.
    if download_dir.exists() {
        std::fs::remove_dir_all(&download_dir)?;
    }
    std::fs::create_dir_all(&download_dir)?;
    eprintln!("check-ptx: fetching ptxas from PyPI ({WHEEL_PACKAGE}=={WHEEL_VERSION}, ~40 MB)");
    let pip = cmd::run(
        Command::new("python3")
            .args(["-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:"])
            .args(["--platform", platform, "--dest"])
            .arg(&download_dir)
            .arg(format!("{WHEEL_PACKAGE}=={WHEEL_VERSION}")),
    );
    pip.context(
        "could not download ptxas with `python3 -m pip download`; install pip, or set \
         PTXAS to an existing ptxas (CUDA 12.8 or newer)",
    )?;
    let wheel = std::fs::read_dir(&download_dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| p.extension().is_some_and(|e| e == "whl"))
        .context("pip downloaded no wheel")?;
    let bytes = std::fs::read(&wheel)?;
    let digest = Sha256::digest(&bytes);
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    ensure!(hex == sha256, "{} has sha256 {hex}, expected {sha256}", wheel.display());
    let mut archive = zip::ZipArchive::new(std::io::Cursor::new(bytes))?;
    let mut member = archive.by_name(WHEEL_MEMBER).context("ptxas missing from the wheel")?;
    let mut binary = Vec::new();
    member.read_to_end(&mut binary)?;
    cmd::write_executable_atomic(dest, &binary)?;
    std::fs::remove_dir_all(&download_dir)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_ptxas_reports() {
        let report = "ptxas info    : 0 bytes gmem\n\
            ptxas info    : Compiling entry function 'fill_f32' for 'sm_80'\n\
            ptxas info    : Function properties for fill_f32\n\
            \x20   16 bytes stack frame, 4 bytes spill stores, 8 bytes spill loads\n\
            ptxas info    : Used 40 registers, used 1 barriers, 8192 bytes smem, 376 bytes cmem[0]\n";
        assert!(rejected_infos(report).is_empty());
        let rows = parse_report(report, "sm_80").unwrap();
        assert_eq!(
            rows,
            vec![Usage {
                kernel: "fill_f32".into(),
                arch: "sm_80".into(),
                registers: 40,
                shared_bytes: 8192,
                stack_bytes: 16,
                spill_stores: 4,
                spill_loads: 8,
                code_bytes: 0,
            }]
        );
    }

    #[test]
    fn finds_ieee_divisions_in_covered_entries_only() {
        let ptx = ".visible .entry gemm_x(\n.param .u64 p\n)\n{\ndiv.rn.f32 %f1, %f2, %f3;\n\
            rcp.rn.f32 %f4, %f2;\n}\n\
            .visible .entry adamw_f32(\n)\n{\ndiv.rn.f32 %f1, %f2, %f3;\n}\n\
            .visible .entry gelu_forward_f32(\n)\n{\nrcp.approx.ftz.f32 %f1, %f2;\n}\n";
        let found = ieee_divisions(ptx);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("gemm_x: 2 IEEE divisions"), "{found:?}");
    }

    #[test]
    fn rejects_lost_hopper_features() {
        let report = "ptxas info    : (C7508) Potential Performance Loss: 'setmaxnreg' ignored; \
            unable to determine register count at entry.\n\
            ptxas info    : (C7517) warpgroup.wait is injected in around line 747 by compiler \
            to allow use of registers defined by GMMA in function 'k'\n\
            ptxas info    : Compiling entry function 'k' for 'sm_90a'\n";
        let rejected = rejected_infos(report);
        assert_eq!(rejected.len(), 2);
        assert!(rejected[0].contains("C7508") && rejected[1].contains("C7517"));
    }
}
