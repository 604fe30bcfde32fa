//! GPT-2: dimensions, parameter layout, initialisation, forward and backward passes.

mod activations;
mod config;
mod gpt2;
mod init;
mod params;

pub use activations::{Activations, AttentionStore, GradScratch, Slab};
pub use config::{
    GPT2_MAX_SEQ_LEN, GPT2_VOCAB_SIZE, Gpt2Config, ModelSize, VOCAB_PAD_MULTIPLE, padded_vocab,
};
pub use gpt2::{Gpt2, ModelOptions};
pub use init::{INIT_STD, checked_init, gpt2_init};
pub use params::{NUM_PARAM_TENSORS, ParamKind, ParamLayout, Params};
