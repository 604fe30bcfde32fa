//! `cargo xtask build-ptx`: kernels-gpu → PTX, one module per target architecture.
//!
//! rustc's `nvptx64-nvidia-cuda` target has no prebuilt standard library here, so `core` is
//! built from source (`-Zbuild-std=core`, which needs a nightly toolchain and `rust-src`). The
//! crate is an `rlib` and the PTX is rustc's `--emit=asm` output (a `cdylib` would need the
//! unavailable `llvm-bitcode-linker`). See `../shared/docs/TOOLCHAIN.md` and docs/PTX.md.

use crate::cmd::{self, target_dir, workspace_root};
use anyhow::{Context, Result, bail, ensure};
use kernel_abi::{
    ALL_HOPPER_KERNELS, ALL_KERNELS, ALL_LAUNCH_BOUNDS, HOPPER_LAUNCH_BOUNDS, KernelSig,
    LaunchBounds,
};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A PTX target: the `-C target-cpu` it is compiled for and the GPUs `ptxas` checks it for.
pub struct PtxArch {
    /// LLVM target CPU and PTX `.target` (`sm_80`, `sm_90a`).
    pub name: &'static str,
    /// Architectures `check-ptx` assembles this module for.
    pub assemble_for: &'static [&'static str],
    /// Whether the module also exports kernel-abi's [`ALL_HOPPER_KERNELS`] (the device crate
    /// compiles them under `#[cfg(target_feature = "sm_90a")]`).
    pub hopper: bool,
    /// `-C target-feature` beyond the CPU's defaults, e.g. a newer PTX ISA version than LLVM
    /// picks for the CPU (empty: none).
    pub target_features: &'static str,
}

impl PtxArch {
    /// The entries this module must export: [`ALL_KERNELS`], plus [`ALL_HOPPER_KERNELS`] for
    /// the Hopper module.
    pub fn kernels(&self) -> impl Iterator<Item = &'static KernelSig> + use<> {
        let hopper: &'static [&'static [KernelSig]] =
            if self.hopper { ALL_HOPPER_KERNELS } else { &[] };
        ALL_KERNELS.iter().chain(hopper).flat_map(|family| family.iter())
    }
}

/// sm_80 is the portable module (mma.sync, cp.async, ldmatrix; the driver JIT-compiles it for
/// Hopper); sm_90a carries the Hopper-only paths (TMA, wgmma, setmaxnreg: the `gemm_wgmma_*`
/// entries) and runs on sm_90 only.
pub const ARCHES: &[PtxArch] = &[
    PtxArch {
        name: "sm_80",
        assemble_for: &["sm_80", "sm_90"],
        hopper: false,
        target_features: "",
    },
    // PTX ISA 8.3 (LLVM's default for sm_90a is 8.0) for `fence.proxy.tensormap`.
    PtxArch { name: "sm_90a", assemble_for: &["sm_90a"], hopper: true, target_features: "+ptx83" },
];

/// The PTX of one architecture, as written to `target/ptx/<arch>/kernels.ptx`.
pub struct BuiltPtx {
    /// The architecture.
    pub arch: &'static PtxArch,
    /// Path of the written module.
    pub path: PathBuf,
}

/// Where `build-ptx` writes the module of `arch` (gpu-host embeds it from there).
pub fn ptx_path(arch: &str) -> PathBuf {
    target_dir().join("ptx").join(arch).join("kernels.ptx")
}

/// Builds every architecture's PTX, validates it, and prints the entry points.
pub fn run() -> Result<Vec<BuiltPtx>> {
    let toolchain = Toolchain::detect()?;
    let mut built = Vec::new();
    for arch in ARCHES {
        let asm = compile(&toolchain, arch)?;
        let ptx = std::fs::read_to_string(&asm)
            .with_context(|| format!("reading rustc's PTX output {}", asm.display()))?;
        let entries = validate(&ptx, arch).with_context(|| format!("PTX for {}", arch.name))?;
        let ptx = apply_launch_bounds(&ptx, arch.hopper)
            .with_context(|| format!("PTX for {}", arch.name))?;
        let path = ptx_path(arch.name);
        if std::fs::read_to_string(&path).ok().as_deref() != Some(ptx.as_str()) {
            cmd::write_atomic(&path, ptx.as_bytes())?;
        }
        println!(
            "build-ptx: {} -> {} ({} kernels)",
            arch.name,
            path.strip_prefix(workspace_root()).unwrap_or(&path).display(),
            entries.len(),
        );
        print_wrapped("  ", entries.keys().map(String::as_str));
        built.push(BuiltPtx { arch, path });
    }
    Ok(built)
}

/// Prints `words` separated by spaces, wrapped at 100 columns, each line starting with
/// `indent`.
fn print_wrapped<'a>(indent: &str, words: impl Iterator<Item = &'a str>) {
    let mut line = String::from(indent);
    for word in words {
        if line.len() > indent.len() && line.len() + 1 + word.len() > 100 {
            println!("{line}");
            line = String::from(indent);
        }
        if line.len() > indent.len() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if line.len() > indent.len() {
        println!("{line}");
    }
}

/// How to invoke the toolchain that builds the device crate.
pub struct Toolchain {
    /// rustup toolchain name (`nightly`, or `stable` with `RUSTC_BOOTSTRAP`).
    name: &'static str,
    /// Whether unstable flags must be unlocked on a stable compiler.
    bootstrap: bool,
}

impl Toolchain {
    /// Picks nightly if installed, else stable with `RUSTC_BOOTSTRAP=1`; makes sure `rust-src`
    /// is present (installing it with rustup when missing).
    pub fn detect() -> Result<Self> {
        let has = |name: &str| {
            Command::new("rustup")
                .args(["run", name, "rustc", "--version"])
                .output()
                .is_ok_and(|o| o.status.success())
        };
        let toolchain = if has("nightly") {
            Toolchain { name: "nightly", bootstrap: false }
        } else if has("stable") {
            eprintln!(
                "build-ptx: no nightly toolchain; using stable with RUSTC_BOOTSTRAP=1 \
                 (install one with `rustup toolchain install nightly`)"
            );
            Toolchain { name: "stable", bootstrap: true }
        } else {
            bail!(
                "neither a nightly nor a stable toolchain is installed through rustup; \
                 install one with `rustup toolchain install nightly --component rust-src`"
            );
        };
        toolchain.ensure_rust_src()?;
        Ok(toolchain)
    }

    /// `cargo <subcommand>` of this toolchain for the device crate: nvptx64 target, `core`
    /// built from source, kernels-gpu's manifest, and a target folder of its own.
    pub fn device_cargo(&self, subcommand: &str, target_subdir: &str) -> Command {
        let mut cargo = Command::new("rustup");
        cargo
            .args(["run", self.name, "cargo", subcommand, "--release", "--locked"])
            .args(["--target", "nvptx64-nvidia-cuda", "-Zbuild-std=core"])
            .arg("--manifest-path")
            .arg(workspace_root().join("kernels-gpu/Cargo.toml"))
            .arg("--target-dir")
            .arg(target_dir().join("kernels-gpu").join(target_subdir))
            .env_remove("CARGO_ENCODED_RUSTFLAGS");
        if self.bootstrap {
            cargo.env("RUSTC_BOOTSTRAP", "1");
        }
        cargo
    }

    fn ensure_rust_src(&self) -> Result<()> {
        let sysroot = cmd::output(
            Command::new("rustup").args(["run", self.name, "rustc", "--print", "sysroot"]),
        )?;
        let core_src = Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library/core");
        if core_src.is_dir() {
            return Ok(());
        }
        eprintln!("build-ptx: adding the rust-src component to the {} toolchain", self.name);
        let added = Command::new("rustup")
            .args(["component", "add", "rust-src", "--toolchain", self.name])
            .status();
        ensure!(
            added.is_ok_and(|s| s.success()) && core_src.is_dir(),
            "the {0} toolchain has no rust-src (needed to build `core` for nvptx64) and \
             `rustup component add rust-src --toolchain {0}` failed; run it by hand",
            self.name
        );
        Ok(())
    }
}

/// The device build's `RUSTFLAGS` for `arch`.
fn rustflags(arch: &PtxArch) -> String {
    let mut flags = format!("-C target-cpu={} --emit=asm", arch.name);
    if !arch.target_features.is_empty() {
        flags += &format!(" -C target-feature={}", arch.target_features);
    }
    flags
}

/// Compiles kernels-gpu for `arch` and returns the path of rustc's PTX output.
fn compile(toolchain: &Toolchain, arch: &PtxArch) -> Result<PathBuf> {
    let mut cargo = toolchain.device_cargo("build", arch.name);
    cargo
        .args(["--message-format", "json-render-diagnostics"])
        .env("RUSTFLAGS", rustflags(arch))
        .stderr(std::process::Stdio::inherit());
    let messages = cmd::output(&mut cargo).context("building kernels-gpu")?;
    let rlib = messages
        .lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter(|msg| {
            msg["reason"] == "compiler-artifact" && msg["target"]["name"] == "kernels_gpu"
        })
        .flat_map(|msg| msg["filenames"].as_array().cloned().unwrap_or_default())
        .filter_map(|f| f.as_str().map(PathBuf::from))
        .find(|f| f.extension().is_some_and(|e| e == "rlib"))
        .context("cargo reported no kernels_gpu rlib")?;
    let asm = asm_path_for(&rlib)?;
    ensure!(asm.is_file(), "rustc wrote no PTX at {}", asm.display());
    Ok(asm)
}

/// `.../deps/libkernels_gpu-HASH.rlib` → `.../deps/kernels_gpu-HASH.s`.
fn asm_path_for(rlib: &Path) -> Result<PathBuf> {
    let stem = rlib.file_stem().and_then(|s| s.to_str()).context("odd rlib file name")?;
    let name = stem.strip_prefix("lib").unwrap_or(stem);
    let deps = if rlib.parent().is_some_and(|p| p.ends_with("deps")) {
        rlib.parent().map(Path::to_path_buf)
    } else {
        rlib.parent().map(|p| p.join("deps"))
    }
    .context("rlib has no folder")?;
    if name.contains('-') {
        return Ok(deps.join(format!("{name}.s")));
    }
    // An uplifted `libkernels_gpu.rlib` carries no hash: take the newest PTX in deps/.
    let newest = std::fs::read_dir(&deps)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|e| e == "s")
                && p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with(name))
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok());
    newest.with_context(|| format!("no {name}-*.s in {}", deps.display()))
}

/// Checks the PTX of `arch`: no undefined functions, and exactly the entry points kernel-abi
/// declares for it ([`PtxArch::kernels`]) with the parameter layouts it declares. Returns the
/// entries found (name → parameter size).
pub fn validate(ptx: &str, arch: &PtxArch) -> Result<BTreeMap<String, usize>> {
    let externs: Vec<&str> = ptx.lines().filter(|l| l.contains(".extern .func")).collect();
    ensure!(
        externs.is_empty(),
        "the PTX calls functions that are not defined in it (a non-inlined core or \
         kernel-abi function, or a panic path):\n  {}",
        externs.join("\n  ")
    );
    let entries = parse_entries(ptx)?;
    let expected: BTreeMap<&str, &KernelSig> = arch.kernels().map(|s| (s.name, s)).collect();
    for (name, (size, align)) in &entries {
        let sig = expected.get(name.as_str()).with_context(|| {
            let lists =
                if arch.hopper { "ALL_KERNELS or ALL_HOPPER_KERNELS" } else { "ALL_KERNELS" };
            format!("entry `{name}` is not declared in kernel-abi's {lists} (for {})", arch.name)
        })?;
        ensure!(
            sig.param_size == *size && sig.param_align == *align,
            "entry `{name}` takes {size} parameter bytes aligned to {align}, but kernel-abi \
             declares {} bytes aligned to {}",
            sig.param_size,
            sig.param_align
        );
    }
    let missing: Vec<&str> =
        expected.keys().copied().filter(|name| !entries.contains_key(*name)).collect();
    ensure!(missing.is_empty(), "kernel-abi declares entries missing from the PTX: {missing:?}");
    Ok(entries.into_iter().map(|(name, (size, _))| (name, size)).collect())
}

/// Writes kernel-abi's [`LaunchBounds`] into the PTX: `.maxntid` and `.minnctapersm` after the
/// parameter list of each listed entry the module has (PTX "performance-tuning directives").
/// Fails if an entry with bounds is missing, unless it is one of [`ALL_HOPPER_KERNELS`], which
/// only the Hopper module exports ([`validate`] checks which entries each module has). The
/// Hopper module (`hopper`) also gets [`HOPPER_LAUNCH_BOUNDS`].
pub fn apply_launch_bounds(ptx: &str, hopper: bool) -> Result<String> {
    let hopper_bounds = HOPPER_LAUNCH_BOUNDS.iter().filter(|_| hopper);
    let bounds: BTreeMap<&str, &LaunchBounds> = ALL_LAUNCH_BOUNDS
        .iter()
        .chain(hopper_bounds)
        .flat_map(|family| family.iter())
        .map(|b| (b.name, b))
        .collect();
    let mut out = String::with_capacity(ptx.len() + 64 * bounds.len());
    let mut pending: Option<&LaunchBounds> = None;
    let mut applied = std::collections::BTreeSet::new();
    for line in ptx.lines() {
        out.push_str(line);
        out.push('\n');
        if let Some(rest) = line.trim().strip_prefix(".visible .entry ") {
            pending = bounds.get(rest.trim_end_matches('(').trim()).copied();
        } else if let Some(b) = pending.filter(|_| line.trim() == ")") {
            out.push_str(&format!(
                ".maxntid {}, 1, 1\n.minnctapersm {}\n",
                b.max_threads, b.min_blocks_per_sm
            ));
            applied.insert(b.name);
            pending = None;
        }
    }
    let hopper: Vec<&str> =
        ALL_HOPPER_KERNELS.iter().flat_map(|family| family.iter()).map(|s| s.name).collect();
    let missing: Vec<&str> = bounds
        .keys()
        .copied()
        .filter(|name| !applied.contains(name) && !hopper.contains(name))
        .collect();
    ensure!(
        missing.is_empty(),
        "launch bounds name {} entries missing from the PTX: {missing:?}",
        missing.len()
    );
    Ok(out)
}

/// `.entry name( .param .align A .b8 name_param_0[S] )` → name → (S, A). Every kernel of this
/// project takes exactly one by-value struct.
fn parse_entries(ptx: &str) -> Result<BTreeMap<String, (usize, usize)>> {
    let mut entries = BTreeMap::new();
    let mut lines = ptx.lines();
    while let Some(line) = lines.next() {
        let Some(rest) = line.trim().strip_prefix(".visible .entry ") else { continue };
        let name = rest.trim_end_matches('(').trim().to_string();
        let mut params = Vec::new();
        for line in lines.by_ref() {
            let line = line.trim().trim_end_matches(',');
            if line.starts_with(')') {
                break;
            }
            params.push(line.to_string());
        }
        let [param] = params.as_slice() else {
            bail!("entry `{name}` has {} parameters; kernels take one struct", params.len());
        };
        let layout = parse_struct_param(param)
            .with_context(|| format!("entry `{name}`: parameter `{param}` is not a struct"))?;
        entries.insert(name, layout);
    }
    Ok(entries)
}

/// `.param .align 8 .b8 x_param_0[24]` → (24, 8).
fn parse_struct_param(param: &str) -> Option<(usize, usize)> {
    let rest = param.strip_prefix(".param .align ")?;
    let (align, rest) = rest.split_once(' ')?;
    let size = rest.strip_prefix(".b8 ")?.split_once('[')?.1.strip_suffix(']')?;
    Some((size.parse().ok()?, align.parse().ok()?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_struct_parameters() {
        let ptx = ".visible .entry k(\n\t.param .align 8 .b8 k_param_0[24]\n)\n{\n}\n";
        let entries = parse_entries(ptx).unwrap();
        assert_eq!(entries["k"], (24, 8));
    }

    #[test]
    fn rejects_scalar_parameters_and_externs() {
        let ptx = ".visible .entry k(\n\t.param .u64 k_param_0\n)\n{\n}\n";
        assert!(parse_entries(ptx).is_err());
        for arch in ARCHES {
            assert!(validate(".extern .func foo();\n", arch).is_err());
        }
    }

    /// A module exporting `names` (parameters not checked by `apply_launch_bounds`).
    fn module(names: impl Iterator<Item = &'static str>) -> String {
        names.map(|n| format!(".visible .entry {n}(\n\t.param .b8 p[8]\n)\n{{\n}}\n")).collect()
    }

    fn is_hopper(name: &str) -> bool {
        ALL_HOPPER_KERNELS.iter().flat_map(|f| f.iter()).any(|s| s.name == name)
    }

    #[test]
    fn launch_bounds_follow_the_parameter_list() {
        let ptx = ".visible .entry gemm_simt_rr_f32(\n\t.param .align 8 .b8 p[8]\n)\n{\n}\n";
        let err = apply_launch_bounds(ptx, false).unwrap_err().to_string();
        assert!(err.contains("missing"), "{err}");
        let bounded = || ALL_LAUNCH_BOUNDS.iter().flat_map(|f| f.iter()).map(|b| b.name);
        let hopper_bounded = || HOPPER_LAUNCH_BOUNDS.iter().flat_map(|f| f.iter()).map(|b| b.name);
        let all = module(bounded().chain(hopper_bounded()));
        let out = apply_launch_bounds(&all, true).unwrap();
        assert!(out.contains(
            "layernorm_backward_bf16(\n\t.param .b8 p[8]\n)\n.maxntid 256, 1, 1\n.minnctapersm 4\n{"
        ));
        // The portable module leaves the Hopper-only bounds out.
        let out = apply_launch_bounds(&all, false).unwrap();
        assert!(out.contains("layernorm_backward_bf16(\n\t.param .b8 p[8]\n)\n{"));
        let out = apply_launch_bounds(&all, true).unwrap();
        assert!(out.contains(".visible .entry gemm_simt_rr_f32(\n\t.param .b8 p[8]\n)\n.maxntid 256, 1, 1\n.minnctapersm 2\n{"));
        assert!(out.contains("gemm_bf16_rc_bf16(\n\t.param .b8 p[8]\n)\n.maxntid 128, 1, 1\n"));
        assert!(out.contains(
            "gemm_wgmma_bf16_rc_bf16(\n\t.param .b8 p[8]\n)\n.maxntid 384, 1, 1\n.minnctapersm 1\n{"
        ));
        // The portable module has no Hopper entries: their bounds are skipped, not an error.
        let portable = module(bounded().filter(|n| !is_hopper(n)));
        let out = apply_launch_bounds(&portable, false).unwrap();
        assert!(!out.contains("gemm_wgmma") && out.contains(".maxntid 128, 1, 1\n"));
        // A missing non-Hopper entry still is.
        let short = module(bounded().filter(|n| *n != "gemm_tf32_rr_f32"));
        let err = apply_launch_bounds(&short, false).unwrap_err().to_string();
        assert!(err.contains("gemm_tf32_rr_f32"), "{err}");
    }

    #[test]
    fn each_module_exports_its_own_entries() {
        let entry = |s: &KernelSig| {
            format!(
                ".visible .entry {0}(\n\t.param .align {1} .b8 {0}_param_0[{2}]\n)\n{{\n}}\n",
                s.name, s.param_align, s.param_size
            )
        };
        let [portable, hopper] = ARCHES else { panic!("two architectures") };
        assert!(!portable.hopper && hopper.hopper);
        let base: String = portable.kernels().map(entry).collect();
        let full: String = hopper.kernels().map(entry).collect();
        assert!(full.len() > base.len());
        assert_eq!(validate(&base, portable).unwrap().len(), portable.kernels().count());
        assert_eq!(validate(&full, hopper).unwrap().len(), hopper.kernels().count());
        // The Hopper-only entries (the wgmma GEMMs and flash backward) are named.
        let err = validate(&full, portable).unwrap_err().to_string();
        assert!(err.contains("_wgmma_") && err.contains("not declared"), "{err}");
        let err = validate(&base, hopper).unwrap_err().to_string();
        assert!(err.contains("missing from the PTX") && err.contains("_wgmma_"), "{err}");
    }

    #[test]
    fn asm_path_follows_the_rlib_hash() {
        let p = asm_path_for(Path::new("/t/release/deps/libkernels_gpu-abc123.rlib")).unwrap();
        assert_eq!(p, Path::new("/t/release/deps/kernels_gpu-abc123.s"));
    }
}
