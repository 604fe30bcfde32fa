//! GPT-2 training in the manner of llm.c, over a compute [`backend::Backend`].
//!
//! - [`backend`]: the op interface the model is written against; the CPU and CUDA backends.
//! - [`model`]: GPT-2 dimensions, parameters, initialisation, forward and backward.
//! - [`optim`]: AdamW with per-tensor weight decay, gradient clipping, LR schedules.
//! - [`loss_scale`]: the dynamic loss scaler of fp16 training.
//! - [`mfu`]: model FLOPs per token and the peaks of known GPUs.
//! - [`data`]: llm.c token shards, the batch loader, the GPT-2 tokenizer, bundled data.
//! - [`checkpoint`]: llm.c model checkpoints and the optimizer-state file.
//! - [`io`], [`rng`], [`error`]: atomic file writes, seeded random streams, the error type.
//! - [`train`], [`sample`], [`mod@bench`], [`ladder`]: the commands of the `trainer` binary;
//!   [`report`]: what their markdown reports share.

pub mod backend;
pub mod bench;
pub mod checkpoint;
pub mod data;
pub mod error;
pub mod io;
pub mod ladder;
pub mod loss_scale;
pub mod mfu;
pub mod model;
pub mod optim;
pub mod report;
pub mod rng;
pub mod sample;
pub mod train;

pub use error::{Error, Result};
