//! llm.c token shards: a header of 256 little-endian i32 (magic 20240520, version 1, token
//! count, then zeros) followed by the tokens as little-endian u16.

use crate::error::{Error, Result};
use crate::io::{decode_u16s, open_regular, read_i32s, write_atomic, write_i32s, write_u16s};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

/// First header value of a token shard.
pub const SHARD_MAGIC: i32 = 20_240_520;
/// The only shard version.
pub const SHARD_VERSION: i32 = 1;
/// Header length in i32 values.
pub const HEADER_INTS: usize = 256;
/// Header length in bytes.
pub const HEADER_BYTES: u64 = 4 * HEADER_INTS as u64;

/// Writes `tokens` as a shard at `path`, atomically.
pub fn write_shard(path: &Path, tokens: &[u16]) -> Result<()> {
    let count = i32::try_from(tokens.len()).map_err(|_| {
        Error::invalid(format!("{}: {} tokens do not fit one shard", path.display(), tokens.len()))
    })?;
    let mut header = [0i32; HEADER_INTS];
    header[..3].copy_from_slice(&[SHARD_MAGIC, SHARD_VERSION, count]);
    write_atomic(path, |w| {
        write_i32s(w, &header)?;
        write_u16s(w, tokens)
    })
}

/// An open shard whose header and size have been checked.
#[derive(Debug)]
pub struct Shard {
    path: PathBuf,
    file: File,
    num_tokens: usize,
}

impl Shard {
    /// Opens `path` and validates the header against the file size.
    pub fn open(path: &Path) -> Result<Self> {
        let (mut file, size) = open_regular(path)?;
        if size < HEADER_BYTES {
            return Err(Error::bad_file(
                path,
                format!(
                    "truncated token shard: {size} bytes, less than the {HEADER_BYTES}-byte header"
                ),
            ));
        }
        let header = read_i32s(&mut file, HEADER_INTS).map_err(|e| Error::io(path, e))?;
        if header[0] != SHARD_MAGIC {
            return Err(Error::bad_file(
                path,
                format!("not an llm.c token shard (magic {}, expected {SHARD_MAGIC})", header[0]),
            ));
        }
        if header[1] != SHARD_VERSION {
            return Err(Error::bad_file(
                path,
                format!("unsupported token shard version {} (expected {SHARD_VERSION})", header[1]),
            ));
        }
        let num_tokens = usize::try_from(header[2]).map_err(|_| {
            Error::bad_file(
                path,
                format!("corrupt token shard: negative token count {}", header[2]),
            )
        })?;
        let expected = HEADER_BYTES + 2 * num_tokens as u64;
        if size != expected {
            let what = if size < expected { "truncated" } else { "corrupt" };
            return Err(Error::bad_file(
                path,
                format!(
                    "{what} token shard: the header announces {num_tokens} tokens ({expected} bytes) but the file has {size} bytes"
                ),
            ));
        }
        Ok(Self { path: path.to_path_buf(), file, num_tokens })
    }

    /// The shard's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Number of tokens.
    pub fn num_tokens(&self) -> usize {
        self.num_tokens
    }

    /// Reads tokens `start .. start + out.len()`.
    pub fn read(&mut self, start: usize, out: &mut [u16]) -> Result<()> {
        assert!(start + out.len() <= self.num_tokens, "read past the end of a shard");
        let mut bytes = vec![0u8; 2 * out.len()];
        self.file
            .seek(SeekFrom::Start(HEADER_BYTES + 2 * start as u64))
            .and_then(|_| self.file.read_exact(&mut bytes))
            .map_err(|e| Error::io(&self.path, e))?;
        decode_u16s(&bytes, out);
        Ok(())
    }

    /// Reads every token.
    pub fn read_all(&mut self) -> Result<Vec<u16>> {
        let mut tokens = vec![0u16; self.num_tokens];
        self.read(0, &mut tokens)?;
        Ok(tokens)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.bin");
        let tokens: Vec<u16> = (0..1000u32).map(|i| (i * 7919 % 65_536) as u16).collect();
        write_shard(&path, &tokens).unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 1024 + 2000);
        let mut shard = Shard::open(&path).unwrap();
        assert_eq!(shard.num_tokens(), 1000);
        assert_eq!(shard.read_all().unwrap(), tokens);
        let mut window = [0u16; 5];
        shard.read(995, &mut window).unwrap();
        assert_eq!(window, tokens[995..]);
    }

    fn open_err(bytes: &[u8]) -> String {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.bin");
        std::fs::write(&path, bytes).unwrap();
        Shard::open(&path).unwrap_err().to_string()
    }

    fn header(magic: i32, version: i32, count: i32) -> Vec<u8> {
        let mut h = vec![0u8; 1024];
        for (i, v) in [magic, version, count].iter().enumerate() {
            h[4 * i..4 * i + 4].copy_from_slice(&v.to_le_bytes());
        }
        h
    }

    #[test]
    fn malformed_shards_are_rejected_with_the_reason() {
        assert!(open_err(&[1, 2, 3]).contains("truncated token shard"));
        assert!(open_err(&header(20_240_326, 1, 0)).contains("magic 20240326, expected 20240520"));
        assert!(open_err(&header(SHARD_MAGIC, 2, 0)).contains("version 2"));
        assert!(open_err(&header(SHARD_MAGIC, 1, -5)).contains("negative token count"));
        let mut short = header(SHARD_MAGIC, 1, 10);
        short.extend([0u8; 18]);
        let err = open_err(&short);
        assert!(err.contains("truncated") && err.contains("10 tokens"), "{err}");
        let mut long = header(SHARD_MAGIC, 1, 1);
        long.extend([0u8; 4]);
        assert!(open_err(&long).contains("corrupt token shard"));
        let dir = tempfile::tempdir().unwrap();
        let missing = Shard::open(&dir.path().join("nope.bin")).unwrap_err().to_string();
        assert!(missing.contains("nope.bin") && missing.contains("No such file"), "{missing}");
    }
}
