//! The PTX modules of this build (embedded at build time, or read from files in the GPU
//! bundle's builds; see build.rs), and the cubins ptxas can make of them ahead of time.

use crate::error::{GpuError, Result};
use std::env;
use std::path::PathBuf;
use std::sync::OnceLock;

/// A PTX module the project builds (`cargo xtask build-ptx`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PtxArch {
    /// Portable module: mma.sync, cp.async, ldmatrix; JIT-compiled for any GPU of sm_80 or
    /// newer.
    Sm80,
    /// Hopper module (wgmma, setmaxnreg paths); loads on compute capability 9.0 only.
    Sm90a,
}

impl PtxArch {
    /// The `.target` name (`sm_80`, `sm_90a`).
    pub fn name(self) -> &'static str {
        match self {
            PtxArch::Sm80 => "sm_80",
            PtxArch::Sm90a => "sm_90a",
        }
    }

    /// The best module for a GPU of compute capability `major.minor`, if any can run there.
    pub fn for_compute_capability(major: i32, minor: i32) -> Option<Self> {
        match (major, minor) {
            (9, 0) => Some(PtxArch::Sm90a),
            (m, _) if m >= 8 => Some(PtxArch::Sm80),
            _ => None,
        }
    }

    /// Whether a cubin ptxas made of this module (for `.target` [`PtxArch::name`]) runs on a GPU
    /// of compute capability `major.minor`: a cubin runs only within its major version, on the
    /// same or a later minor one.
    pub fn cubin_runs_on(self, major: i32, minor: i32) -> bool {
        match self {
            PtxArch::Sm80 => major == 8,
            PtxArch::Sm90a => (major, minor) == (9, 0),
        }
    }
}

/// The variable naming a folder of precompiled cubins ([`PtxModule::cubin_file_name`]) that
/// [`Gpu::new`](crate::Gpu::new) loads instead of having the driver JIT-compile the PTX (tens
/// of seconds for the sm_90a module on a machine's first load). The GPU bundle sets it; unset
/// or empty, the PTX is loaded.
pub const CUBIN_DIR_ENV: &str = "GPU_HOST_CUBIN_DIR";

/// The variable that, set to `1`, has [`Gpu::new`](crate::Gpu::new) launch every kernel with
/// programmatic dependent launch on a GPU that runs the sm_90a module (the driver's
/// programmatic stream serialization: a kernel may be scheduled while the one before it in the
/// stream finishes, and waits in its first instruction, `griddepcontrol.wait`, until that one
/// has completed). Opt-in and unmeasured: it hides the gap between kernels, 386 a bf16 training
/// step of GPT-2 124M; a GPU run of the trainer's benchmark with and without it decides.
/// [`Gpu::set_programmatic_launch`](crate::Gpu::set_programmatic_launch) sets it afterwards.
pub const PDL_ENV: &str = "GPU_HOST_PDL";

/// The variable naming the folder a build without embedded PTX text reads its modules from
/// ([`PtxModule::ptx_file_name`]). Only the GPU bundle's builds (`GPU_HOST_EXTERNAL_PTX` at
/// build time, see build.rs) need it: its fifteen executables would otherwise carry the same
/// 55 MB of PTX each. Its `run.sh` sets it.
pub const PTX_DIR_ENV: &str = "GPU_HOST_PTX_DIR";

/// A PTX module of this build: its text and the digest of that text, which names the files
/// made of it.
#[derive(Clone, Copy, Debug)]
pub struct PtxModule {
    /// The module's architecture.
    pub arch: PtxArch,
    /// The PTX text.
    pub text: &'static str,
    /// [`ptx_digest`] of the text, computed when the crate was built.
    pub digest: &'static str,
}

impl PtxModule {
    /// `kernels-<arch>-<digest>.cubin`: the digest binds a cubin to the exact PTX it was made
    /// from, so a stale one is never loaded. `cargo xtask gpu-bundle` names the cubins it ships
    /// the same way.
    pub fn cubin_file_name(&self) -> String {
        file_name(self.arch, self.digest, "cubin")
    }

    /// `kernels-<arch>-<digest>.ptx`: the module's text in the bundle's `ptx/` folder.
    pub fn ptx_file_name(&self) -> String {
        file_name(self.arch, self.digest, "ptx")
    }
}

/// `kernels-<arch>-<digest>.<extension>`.
fn file_name(arch: PtxArch, digest: &str, extension: &str) -> String {
    format!("kernels-{}-{digest}.{extension}", arch.name())
}

pub use digest::ptx_digest;

mod digest {
    include!("ptx_digest.rs");
}

/// What build.rs embedded of one module: the text (empty in a build that reads it from a
/// file) and the digest (empty when the module was not built).
struct Embedded {
    text: &'static str,
    digest: &'static str,
}

const SM_80: Embedded = Embedded {
    text: include_str!(concat!(env!("OUT_DIR"), "/kernels_sm_80.ptx")),
    digest: include_str!(concat!(env!("OUT_DIR"), "/kernels_sm_80.digest")),
};
const SM_90A: Embedded = Embedded {
    text: include_str!(concat!(env!("OUT_DIR"), "/kernels_sm_90a.ptx")),
    digest: include_str!(concat!(env!("OUT_DIR"), "/kernels_sm_90a.digest")),
};

/// The modules read from [`PTX_DIR_ENV`], once per process: the text, or why it is missing.
static FROM_FILES: [OnceLock<std::result::Result<String, String>>; 2] =
    [OnceLock::new(), OnceLock::new()];

/// The PTX module of `arch` this binary was built with: the embedded text, or, in a build made
/// without it, the file [`PtxModule::ptx_file_name`] in the folder [`PTX_DIR_ENV`] names, read
/// once and checked against the embedded digest.
///
/// Errors: [`GpuError::PtxNotBuilt`] when `cargo xtask build-ptx` had not built the module
/// when this crate was built; [`GpuError::PtxFile`] when the file cannot be found or read, or
/// holds another text.
pub fn ptx_module(arch: PtxArch) -> Result<PtxModule> {
    let (embedded, slot) = match arch {
        PtxArch::Sm80 => (&SM_80, 0),
        PtxArch::Sm90a => (&SM_90A, 1),
    };
    if embedded.digest.is_empty() {
        return Err(GpuError::PtxNotBuilt { arch: arch.name() });
    }
    let mut module = PtxModule { arch, text: embedded.text, digest: embedded.digest };
    if module.text.is_empty() {
        let read = FROM_FILES[slot]
            .get_or_init(|| read_module(arch, module.digest, env::var_os(PTX_DIR_ENV)));
        module.text = read
            .as_deref()
            .map_err(|reason| GpuError::PtxFile { arch: arch.name(), reason: reason.clone() })?;
    }
    Ok(module)
}

/// The text of `arch`'s module of digest `digest` from the folder `dir`, or why not.
fn read_module(
    arch: PtxArch,
    digest: &str,
    dir: Option<std::ffi::OsString>,
) -> std::result::Result<String, String> {
    let dir = dir.filter(|dir| !dir.is_empty()).ok_or_else(|| {
        format!("{PTX_DIR_ENV} is not set (the GPU bundle's run.sh sets it to its PTX folder)")
    })?;
    let path = PathBuf::from(dir).join(file_name(arch, digest, "ptx"));
    let text =
        std::fs::read_to_string(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
    let found = ptx_digest(text.as_bytes());
    if found != digest {
        return Err(format!("{} holds a PTX of digest {found}", path.display()));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_carry_the_arch_and_the_ptx_digest() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(ptx_digest(b"abc"), "ba7816bf8f01cfea");
        let module = PtxModule { arch: PtxArch::Sm90a, text: "abc", digest: "ba7816bf8f01cfea" };
        assert_eq!(module.cubin_file_name(), "kernels-sm_90a-ba7816bf8f01cfea.cubin");
        assert_eq!(module.ptx_file_name(), "kernels-sm_90a-ba7816bf8f01cfea.ptx");
    }

    /// The embedded digest is the text's (in a build that embeds it).
    #[test]
    fn the_embedded_digest_is_the_texts() {
        for arch in [PtxArch::Sm80, PtxArch::Sm90a] {
            if let Ok(module) = ptx_module(arch)
                && std::ptr::eq(module.text, embedded_text(arch))
            {
                assert_eq!(module.digest, ptx_digest(module.text.as_bytes()));
            }
        }
    }

    fn embedded_text(arch: PtxArch) -> &'static str {
        match arch {
            PtxArch::Sm80 => SM_80.text,
            PtxArch::Sm90a => SM_90A.text,
        }
    }

    /// A build without the text reads it from the file named after its digest, and nothing
    /// else: no folder, no file, or a file of another text is an error saying so.
    #[test]
    fn a_module_file_must_hold_the_text_of_its_digest() {
        let dir = env::temp_dir().join(format!("gpu-host-ptx-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = ".version 8.0\n.target sm_90a\n";
        let digest = ptx_digest(text.as_bytes());
        let read = |dir| read_module(PtxArch::Sm90a, &digest, dir);
        let os = |p: &std::path::Path| Some(p.as_os_str().to_owned());
        let unset = read(None).unwrap_err();
        assert!(unset.starts_with("GPU_HOST_PTX_DIR is not set"), "{unset}");
        assert!(read(Some("".into())).unwrap_err().contains("is not set"));
        let missing = read(os(&dir)).unwrap_err();
        assert!(missing.starts_with("reading ") && missing.contains(&digest), "{missing}");
        let file = dir.join(format!("kernels-sm_90a-{digest}.ptx"));
        std::fs::write(&file, text).unwrap();
        assert_eq!(read(os(&dir)).unwrap(), text);
        std::fs::write(&file, "another PTX").unwrap();
        let other = read(os(&dir)).unwrap_err();
        assert!(other.ends_with(&format!("holds a PTX of digest {}", ptx_digest(b"another PTX"))));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cubins_run_only_within_their_major_version() {
        assert!(PtxArch::Sm80.cubin_runs_on(8, 0) && PtxArch::Sm80.cubin_runs_on(8, 9));
        assert!(!PtxArch::Sm80.cubin_runs_on(9, 0) && !PtxArch::Sm80.cubin_runs_on(10, 0));
        assert!(PtxArch::Sm90a.cubin_runs_on(9, 0) && !PtxArch::Sm90a.cubin_runs_on(10, 0));
    }
}
