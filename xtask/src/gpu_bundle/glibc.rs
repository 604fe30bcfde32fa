//! The newest glibc the bundle's executables ask for, read from their ELF version needs.
//!
//! The GPU machine has no Rust toolchain, so the executables built here must run on its
//! image's glibc: a binary that needs a newer one stops at the loader ("version `GLIBC_2.xx'
//! not found") and every step of a GPU session fails. The bundle is refused here instead.

use anyhow::{Context, Result, bail};
use object::Endianness;
use object::elf::FileHeader64;
use object::read::elf::FileHeader;
use std::fmt;
use std::fs;
use std::path::Path;

/// The newest glibc a bundled executable may need: Ubuntu 22.04's, the oldest glibc among the
/// Ubuntu bases of NVIDIA's CUDA 13 images. (The GPU image's Python 3.12.3 points to Ubuntu
/// 24.04 and glibc 2.39, which nobody has read there yet.)
pub const NEWEST_ALLOWED: GlibcVersion = GlibcVersion { major: 2, minor: 35 };

/// A glibc symbol version, `GLIBC_<major>.<minor>[.<patch>]` (the patch never matters here).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct GlibcVersion {
    major: u32,
    minor: u32,
}

impl GlibcVersion {
    /// Parses a version-need name such as `GLIBC_2.34`; `None` for other libraries' versions
    /// (`GCC_3.0`) and for `GLIBC_PRIVATE`.
    fn parse(name: &str) -> Option<Self> {
        let mut parts = name.strip_prefix("GLIBC_")?.split('.');
        let major = parts.next()?.parse().ok()?;
        let minor = parts.next()?.parse().ok()?;
        Some(GlibcVersion { major, minor })
    }
}

impl fmt::Display for GlibcVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

/// The newest `GLIBC_*` version the 64-bit ELF executable at `path` needs, or `None` when it
/// needs none (a static binary).
pub fn newest_needed(path: &Path) -> Result<Option<GlibcVersion>> {
    let data = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
    let what = || format!("{} is not a readable 64-bit ELF executable", path.display());
    let header = FileHeader64::<Endianness>::parse(&*data).with_context(what)?;
    let endian = header.endian().with_context(what)?;
    let sections = header.sections(endian, &*data).with_context(what)?;
    let Some((mut needs, link)) = sections.gnu_verneed(endian, &*data).with_context(what)? else {
        return Ok(None);
    };
    let strings = sections.strings(endian, &*data, link).with_context(what)?;
    let mut newest = None;
    while let Some((_, mut versions)) = needs.next().with_context(what)? {
        while let Some(version) = versions.next().with_context(what)? {
            let name = version.name(endian, strings).with_context(what)?;
            let parsed = std::str::from_utf8(name).ok().and_then(GlibcVersion::parse);
            newest = newest.max(parsed);
        }
    }
    Ok(newest)
}

/// Fails, naming the executables, when any of `paths` needs a glibc newer than
/// [`NEWEST_ALLOWED`]; otherwise returns the newest one they need.
pub fn check(paths: &[&Path]) -> Result<Option<GlibcVersion>> {
    let mut newest = None;
    let mut too_new = Vec::new();
    for path in paths {
        let needed = newest_needed(path)?;
        if let Some(version) = needed.filter(|v| *v > NEWEST_ALLOWED) {
            too_new.push(format!("{} (glibc {version})", path.display()));
        }
        newest = newest.max(needed);
    }
    if !too_new.is_empty() {
        bail!(
            "these executables need a glibc newer than {NEWEST_ALLOWED}, which the GPU machine's \
             image may not have: {}. Build the bundle on a machine with an older glibc \
             (e.g. Debian 12 or Ubuntu 22.04)",
            too_new.join(", ")
        );
    }
    Ok(newest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_names_parse_and_order() {
        let v = |name| GlibcVersion::parse(name);
        assert_eq!(v("GLIBC_2.34"), Some(GlibcVersion { major: 2, minor: 34 }));
        assert_eq!(v("GLIBC_2.2.5"), Some(GlibcVersion { major: 2, minor: 2 }));
        assert_eq!(v("GLIBC_PRIVATE"), None);
        assert_eq!(v("GCC_3.0"), None);
        assert!(v("GLIBC_2.9") < v("GLIBC_2.10"));
        assert_eq!(GlibcVersion { major: 2, minor: 35 }.to_string(), "2.35");
    }

    /// This test binary links glibc dynamically, as the bundle's executables do.
    #[test]
    fn the_glibc_this_test_binary_needs_is_read() {
        let newest = newest_needed(&std::env::current_exe().unwrap()).unwrap();
        assert!(newest.is_some_and(|v| v >= GlibcVersion { major: 2, minor: 2 }), "{newest:?}");
    }

    #[test]
    fn a_file_that_is_not_elf_is_named() {
        let path = std::env::temp_dir().join(format!("glibc-not-elf-{}", std::process::id()));
        fs::write(&path, b"#!/bin/sh\necho not an executable\n").unwrap();
        let err = newest_needed(&path).unwrap_err().to_string();
        fs::remove_file(&path).unwrap();
        assert!(err.contains("is not a readable 64-bit ELF executable"), "{err}");
    }
}
