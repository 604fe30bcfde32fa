//! The PTX modules embedded at build time (see build.rs).

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
