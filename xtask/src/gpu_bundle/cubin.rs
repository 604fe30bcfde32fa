//! The bundle's cubins: each PTX module assembled by ptxas here, ahead of time, so that the GPU
//! machine loads machine code instead of having its driver JIT-compile the PTX (tens of
//! seconds for the sm_90a module, paid once per fresh machine out of a short lease, and once
//! per process if its compute cache does not keep it).
//!
//! gpu-host loads a cubin only when `GPU_HOST_CUBIN_DIR` names its folder and the file name
//! carries the digest of the very PTX the binary was built with
//! (`gpu_host::PtxModule::cubin_file_name`), so a stale cubin is never used; without one it
//! falls back to the PTX.

use crate::build_ptx::BuiltPtx;
use crate::check_ptx;
use anyhow::{Context, Result, bail};
use std::path::{Path, PathBuf};
use std::process::Command;

// `ptx_digest`: gpu-host's own function (its build script includes the same file), so the
// names written here are the ones `gpu_host::PtxModule` looks for.
include!("../../../crates/gpu-host/src/ptx_digest.rs");

/// `kernels-<arch>-<ptx_digest(ptx)>.<extension>` (`cubin`, `ptx`): the names
/// `gpu_host::PtxModule` looks for (both pin the same test vector).
pub fn file_name(arch: &str, ptx: &[u8], extension: &str) -> String {
    format!("kernels-{arch}-{}.{extension}", ptx_digest(ptx))
}

/// Assembles every module for its own `.target` (`sm_80`, `sm_90a`), all at once, into
/// `dir`; returns the cubins written.
pub fn assemble_all(modules: &[BuiltPtx], dir: &Path) -> Result<Vec<PathBuf>> {
    let ptxas = check_ptx::ptxas()?;
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    std::thread::scope(|scope| {
        let handles: Vec<_> =
            modules.iter().map(|module| scope.spawn(|| assemble(&ptxas, module, dir))).collect();
        handles.into_iter().map(|h| h.join().expect("ptxas thread panicked")).collect()
    })
}

/// `ptxas -O3` (the driver JIT's level) of one module into `dir`, named by [`file_name`].
fn assemble(ptxas: &Path, module: &BuiltPtx, dir: &Path) -> Result<PathBuf> {
    let arch = module.arch.name;
    let ptx = std::fs::read(&module.path)
        .with_context(|| format!("reading {}", module.path.display()))?;
    let dest = dir.join(file_name(arch, &ptx, "cubin"));
    let tmp = dir.join(format!(".{arch}.{}.cubin", std::process::id()));
    let out = Command::new(ptxas)
        .arg(format!("-arch={arch}"))
        .args(["-O3", "-o"])
        .arg(&tmp)
        .arg(&module.path)
        .output()
        .with_context(|| format!("running {}", ptxas.display()))?;
    if !out.status.success() {
        bail!(
            "ptxas failed on {} for {arch}:\n{}",
            module.path.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // ptxas wrote a temporary file beside the destination: renaming it is the atomic write.
    std::fs::rename(&tmp, &dest).with_context(|| format!("renaming to {}", dest.display()))?;
    Ok(dest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_gpu_hosts() {
        // The vector gpu-host's `cubin_names_carry_the_arch_and_the_ptx_digest` pins too.
        assert_eq!(file_name("sm_90a", b"abc", "cubin"), "kernels-sm_90a-ba7816bf8f01cfea.cubin");
        assert_eq!(file_name("sm_80", b"abc", "ptx"), "kernels-sm_80-ba7816bf8f01cfea.ptx");
    }
}
