//! Embeds the PTX written by `cargo xtask build-ptx` (target/ptx/<arch>/kernels.ptx) and each
//! module's digest (`ptx_digest`: it names the module's cubin and PTX files).
//!
//! A missing module is embedded as an empty text and digest, so the crate always builds;
//! `Gpu::new` then reports "PTX not built" instead of launching anything.
//!
//! With `GPU_HOST_EXTERNAL_PTX=<dir>` (the GPU bundle's build) the modules are read from
//! `<dir>/<arch>/kernels.ptx` and only their digests are embedded: such a binary reads the text
//! at run time from the file named after the digest (`gpu_host::PTX_DIR_ENV`), so the bundle
//! ships the modules once instead of inside each of its executables.

use std::path::PathBuf;

include!("src/ptx_digest.rs");

const ARCHES: [&str; 2] = ["sm_80", "sm_90a"];
const EXTERNAL_ENV: &str = "GPU_HOST_EXTERNAL_PTX";

fn main() {
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    println!("cargo:rerun-if-env-changed={EXTERNAL_ENV}");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let external = std::env::var_os(EXTERNAL_ENV).filter(|dir| !dir.is_empty()).map(PathBuf::from);
    let ptx_dir = external.clone().unwrap_or_else(|| {
        std::env::var_os("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|| manifest.join("../../target"))
            .join("ptx")
    });
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    for arch in ARCHES {
        let src = ptx_dir.join(arch).join("kernels.ptx");
        println!("cargo:rerun-if-changed={}", src.display());
        let ptx = std::fs::read_to_string(&src).unwrap_or_default();
        let digest = if ptx.is_empty() { String::new() } else { ptx_digest(ptx.as_bytes()) };
        let text = if external.is_some() { "" } else { ptx.as_str() };
        std::fs::write(out.join(format!("kernels_{arch}.ptx")), text).expect("writing OUT_DIR");
        std::fs::write(out.join(format!("kernels_{arch}.digest")), digest)
            .expect("writing OUT_DIR");
    }
}
