//! File helpers: atomic writes and little-endian arrays.

use crate::error::{Error, Result};
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Opens a regular file for reading, with its size. Anything else (a directory, a FIFO, a
/// device) is an error naming it, checked before opening: a FIFO would block the open, a
/// device never end.
pub fn open_regular(path: &Path) -> Result<(File, u64)> {
    let meta = std::fs::metadata(path).map_err(|e| Error::io(path, e))?;
    if !meta.is_file() {
        let what = if meta.is_dir() { "a directory" } else { "not a regular file" };
        return Err(Error::bad_file(path, format!("{what}, where a file is needed")));
    }
    let file = File::open(path).map_err(|e| Error::io(path, e))?;
    Ok((file, meta.len()))
}

/// Elements converted per block when writing or reading arrays.
const BLOCK: usize = 1 << 16;

/// Writes `path` atomically: `write` fills a temporary file in the same directory, which is
/// flushed to disk and renamed over `path`, so readers see the old file or the whole new one.
pub fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<File>) -> io::Result<()>,
) -> Result<()> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp{}", std::process::id()));
    let result = (|| {
        let mut out = BufWriter::new(File::create(&tmp)?);
        write(&mut out)?;
        let file = out.into_inner().map_err(io::IntoInnerError::into_error)?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    result.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        Error::io(path, e)
    })
}

/// Creates `dir` (and parents) and checks a file can be written in it.
pub fn ensure_writable_dir(dir: &Path) -> Result<()> {
    if dir.exists() && !dir.is_dir() {
        return Err(Error::invalid(format!("{} exists and is not a directory", dir.display())));
    }
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let probe = dir.join(format!(".write-test{}", std::process::id()));
    File::create(&probe).map_err(|e| {
        Error::invalid(format!("{}: cannot create files in this directory: {e}", dir.display()))
    })?;
    std::fs::remove_file(&probe).map_err(|e| Error::io(dir, e))
}

/// Writes `values` as little-endian i32.
pub fn write_i32s(out: &mut impl Write, values: &[i32]) -> io::Result<()> {
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    out.write_all(&bytes)
}

/// Writes `values` as little-endian f32.
pub fn write_f32s(out: &mut impl Write, values: &[f32]) -> io::Result<()> {
    for block in values.chunks(BLOCK) {
        let bytes: Vec<u8> = block.iter().flat_map(|v| v.to_le_bytes()).collect();
        out.write_all(&bytes)?;
    }
    Ok(())
}

/// Writes `values` as little-endian u16.
pub fn write_u16s(out: &mut impl Write, values: &[u16]) -> io::Result<()> {
    for block in values.chunks(BLOCK) {
        let bytes: Vec<u8> = block.iter().flat_map(|v| v.to_le_bytes()).collect();
        out.write_all(&bytes)?;
    }
    Ok(())
}

/// Reads `n` little-endian i32.
pub fn read_i32s(input: &mut impl Read, n: usize) -> io::Result<Vec<i32>> {
    let mut bytes = vec![0u8; 4 * n];
    input.read_exact(&mut bytes)?;
    Ok(bytes.chunks_exact(4).map(|b| i32::from_le_bytes([b[0], b[1], b[2], b[3]])).collect())
}

/// Reads `out.len()` little-endian f32 into `out`.
pub fn read_f32s_into(input: &mut impl Read, out: &mut [f32]) -> io::Result<()> {
    let mut bytes = vec![0u8; 4 * BLOCK.min(out.len())];
    for block in out.chunks_mut(BLOCK) {
        let bytes = &mut bytes[..4 * block.len()];
        input.read_exact(bytes)?;
        for (v, b) in block.iter_mut().zip(bytes.chunks_exact(4)) {
            *v = f32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        }
    }
    Ok(())
}

/// Reads `out.len()` little-endian bf16 into `out`, widened to f32.
pub fn read_bf16s_into(input: &mut impl Read, out: &mut [f32]) -> io::Result<()> {
    let mut bytes = vec![0u8; 2 * BLOCK.min(out.len())];
    for block in out.chunks_mut(BLOCK) {
        let bytes = &mut bytes[..2 * block.len()];
        input.read_exact(bytes)?;
        for (v, b) in block.iter_mut().zip(bytes.chunks_exact(2)) {
            *v = half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32();
        }
    }
    Ok(())
}

/// Decodes little-endian u16 from `bytes` into `out` (same count).
pub fn decode_u16s(bytes: &[u8], out: &mut [u16]) {
    for (v, b) in out.iter_mut().zip(bytes.chunks_exact(2)) {
        *v = u16::from_le_bytes([b[0], b[1]]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces_whole_file_and_leaves_no_temp() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        write_atomic(&path, |w| write_f32s(w, &[1.0, -2.5])).unwrap();
        write_atomic(&path, |w| write_f32s(w, &[3.0])).unwrap();
        let mut values = [0.0f32];
        read_f32s_into(&mut File::open(&path).unwrap(), &mut values).unwrap();
        assert_eq!(values, [3.0]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1, "temp file left behind");
    }

    #[test]
    fn failed_write_keeps_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.bin");
        write_atomic(&path, |w| write_i32s(w, &[7])).unwrap();
        let err = write_atomic(&path, |_| Err(io::Error::other("disk on fire"))).unwrap_err();
        assert!(err.to_string().contains("disk on fire"));
        assert_eq!(read_i32s(&mut File::open(&path).unwrap(), 1).unwrap(), [7]);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }

    #[test]
    fn unwritable_dir_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("plain-file");
        std::fs::write(&file, b"x").unwrap();
        let err = ensure_writable_dir(&file.join("sub")).unwrap_err();
        assert!(err.to_string().contains("plain-file"), "{err}");
    }
}
