//! Embeds the PTX written by `cargo xtask build-ptx` (target/ptx/<arch>/kernels.ptx).
//!
//! A missing module is embedded as an empty string, so the crate always builds; `Gpu::new`
//! then reports "PTX not built" instead of launching anything.

use std::path::PathBuf;

const ARCHES: [&str; 2] = ["sm_80", "sm_90a"];

fn main() {
    println!("cargo:rerun-if-env-changed=CARGO_TARGET_DIR");
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| manifest.join("../../target"));
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    for arch in ARCHES {
        let src = target.join("ptx").join(arch).join("kernels.ptx");
        println!("cargo:rerun-if-changed={}", src.display());
        let ptx = std::fs::read_to_string(&src).unwrap_or_default();
        std::fs::write(out.join(format!("kernels_{arch}.ptx")), ptx).expect("writing OUT_DIR");
    }
}
