//! The PTX modules embedded at build time (see build.rs), and the cubins ptxas can make of
//! them ahead of time.

use sha2::{Digest, Sha256};

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

/// The variable naming a folder of precompiled cubins ([`cubin_file_name`]) that
/// [`Gpu::new`](crate::Gpu::new) loads instead of having the driver JIT-compile the PTX (tens
/// of seconds for the sm_90a module on a machine's first load). The GPU bundle sets it; unset
/// or empty, the PTX is loaded.
pub const CUBIN_DIR_ENV: &str = "GPU_HOST_CUBIN_DIR";

/// The name of the cubin of `arch`'s module assembled from the PTX text `ptx`:
/// `kernels-<arch>-<the first 16 hex digits of the text's SHA-256>.cubin`. The digest binds a
/// cubin to the exact PTX it was made from, so a stale one is never loaded.
/// `cargo xtask gpu-bundle` names the cubins it ships the same way.
pub fn cubin_file_name(arch: PtxArch, ptx: &str) -> String {
    let digest = Sha256::digest(ptx.as_bytes());
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    format!("kernels-{}-{hex}.cubin", arch.name())
}

const SM_80: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels_sm_80.ptx"));
const SM_90A: &str = include_str!(concat!(env!("OUT_DIR"), "/kernels_sm_90a.ptx"));

/// The embedded PTX text of `arch`, or `None` if it was not built before this crate.
pub fn embedded_ptx(arch: PtxArch) -> Option<&'static str> {
    let text = match arch {
        PtxArch::Sm80 => SM_80,
        PtxArch::Sm90a => SM_90A,
    };
    (!text.is_empty()).then_some(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cubin_names_carry_the_arch_and_the_ptx_digest() {
        // SHA-256("abc") = ba7816bf8f01cfea414140de5dae2223...
        assert_eq!(cubin_file_name(PtxArch::Sm90a, "abc"), "kernels-sm_90a-ba7816bf8f01cfea.cubin");
        assert_ne!(cubin_file_name(PtxArch::Sm80, "abc"), cubin_file_name(PtxArch::Sm80, "abd"));
    }

    #[test]
    fn cubins_run_only_within_their_major_version() {
        assert!(PtxArch::Sm80.cubin_runs_on(8, 0) && PtxArch::Sm80.cubin_runs_on(8, 9));
        assert!(!PtxArch::Sm80.cubin_runs_on(9, 0) && !PtxArch::Sm80.cubin_runs_on(10, 0));
        assert!(PtxArch::Sm90a.cubin_runs_on(9, 0) && !PtxArch::Sm90a.cubin_runs_on(10, 0));
    }
}
