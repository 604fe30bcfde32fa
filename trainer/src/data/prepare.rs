//! Turns text documents into train/val token shards.

use super::{EOT, Tokenizer, write_shard};
use crate::error::{Error, Result};
use rayon::prelude::*;
use std::path::{Path, PathBuf};

/// How to split and shard a corpus.
#[derive(Clone, Debug)]
pub struct ShardingOptions {
    /// Fraction of the tokens (the end of the token stream) that goes to validation.
    pub val_fraction: f64,
    /// Largest number of tokens in one shard.
    pub shard_tokens: usize,
}

impl Default for ShardingOptions {
    fn default() -> Self {
        Self { val_fraction: 0.1, shard_tokens: 100_000_000 }
    }
}

/// What [`write_shards`] wrote.
#[derive(Clone, Debug, PartialEq)]
pub struct ShardSummary {
    /// Training shards, in order.
    pub train: Vec<PathBuf>,
    /// Validation shards, in order.
    pub val: Vec<PathBuf>,
    /// Training tokens.
    pub train_tokens: usize,
    /// Validation tokens.
    pub val_tokens: usize,
}

/// Deletes the shards (`train_NNNNNN.bin`, `val_NNNNNN.bin`) an earlier sharding left in
/// `dir`, so that globs over the new ones cannot pick them up.
fn remove_shards(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))? {
        let path = entry.map_err(|e| Error::io(dir, e))?.path();
        let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let digits = ["train_", "val_"]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .and_then(|rest| rest.strip_suffix(".bin"));
        if digits.is_some_and(|d| d.len() == 6 && d.bytes().all(|b| b.is_ascii_digit())) {
            std::fs::remove_file(&path).map_err(|e| Error::io(&path, e))?;
        }
    }
    Ok(())
}

/// Tokenizes `documents` (in the given order, EOT before each), splits the token stream into
/// train (the first `1 - val_fraction`) and val (the rest), and writes
/// `out_dir/{train,val}_NNNNNN.bin`, replacing the shards an earlier run left there; inputs
/// without any text are an error.
pub fn write_shards(
    documents: &[String],
    out_dir: &Path,
    options: &ShardingOptions,
) -> Result<ShardSummary> {
    if !(0.0..1.0).contains(&options.val_fraction) {
        return Err(Error::invalid(format!(
            "the validation fraction must be in [0, 1), got {}",
            options.val_fraction
        )));
    }
    if options.shard_tokens == 0 || options.shard_tokens > i32::MAX as usize {
        return Err(Error::invalid(format!(
            "shards hold 1 to {} tokens (llm.c's header counts them in an i32), got {}",
            i32::MAX,
            options.shard_tokens
        )));
    }
    let tokenizer = Tokenizer::new();
    let encoded: Vec<Vec<u32>> = documents.par_iter().map(|d| tokenizer.encode(d)).collect();
    let mut stream: Vec<u16> = Vec::with_capacity(encoded.iter().map(|d| d.len() + 1).sum());
    for doc in encoded {
        stream.push(EOT as u16);
        stream.extend(doc.into_iter().map(|t| t as u16));
    }
    if stream.len() == documents.len() {
        return Err(Error::invalid("the inputs hold no text to tokenize"));
    }
    let val_tokens = (stream.len() as f64 * options.val_fraction).round() as usize;
    let (train, val) = stream.split_at(stream.len() - val_tokens);
    std::fs::create_dir_all(out_dir).map_err(|e| Error::io(out_dir, e))?;
    remove_shards(out_dir)?;
    let write = |split: &str, tokens: &[u16]| -> Result<Vec<PathBuf>> {
        tokens
            .chunks(options.shard_tokens)
            .enumerate()
            .map(|(i, chunk)| {
                let path = out_dir.join(format!("{split}_{i:06}.bin"));
                write_shard(&path, chunk).map(|()| path)
            })
            .collect()
    };
    Ok(ShardSummary {
        train: write("train", train)?,
        val: write("val", val)?,
        train_tokens: train.len(),
        val_tokens: val.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::data::Shard;

    #[test]
    fn documents_become_eot_separated_train_and_val_shards() {
        let dir = tempfile::tempdir().unwrap();
        let docs = vec!["Hello world".to_string(), " Hello".to_string()];
        let options = ShardingOptions { val_fraction: 0.4, shard_tokens: 2 };
        let summary = write_shards(&docs, dir.path(), &options).unwrap();
        // stream: EOT Hello world EOT ' Hello' -> 5 tokens, 2 to val
        assert_eq!((summary.train_tokens, summary.val_tokens), (3, 2));
        assert_eq!(summary.train.len(), 2);
        let read = |p: &Path| Shard::open(p).unwrap().read_all().unwrap();
        let train: Vec<u16> = summary.train.iter().flat_map(|p| read(p)).collect();
        assert_eq!(train, [50256, 15496, 995]);
        assert_eq!(read(&summary.val[0]), [50256, 18435]);
        let bad = ShardingOptions { val_fraction: 1.0, shard_tokens: 2 };
        assert!(write_shards(&docs, dir.path(), &bad).is_err());
        // Refused before the earlier shards are replaced.
        let too_big = ShardingOptions { val_fraction: 0.4, shard_tokens: 1 << 31 };
        assert!(write_shards(&docs, dir.path(), &too_big).is_err());
        assert_eq!(read(&summary.val[0]), [50256, 18435]);
    }
}
