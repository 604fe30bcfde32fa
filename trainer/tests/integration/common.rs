//! Shared helpers: tiny models, token files, running the binary.

use rand::{RngExt, SeedableRng};
use rand_pcg::Pcg64;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use tempfile::TempDir;
use trainer::backend::Backend;
use trainer::checkpoint::{ModelDtype, write_model};
use trainer::data::write_shard;
use trainer::model::{Gpt2, Gpt2Config, ModelOptions, Params, gpt2_init};
use trainer::optim::AdamWConfig;
use trainer::train::{BatchShape, BatchSource, Session};

/// L2 NH4 C64, V 300 padded to 384, maxT 64: small enough for an f64 reference.
pub fn tiny() -> Gpt2Config {
    Gpt2Config {
        max_seq_len: 64,
        vocab_size: 300,
        padded_vocab_size: 384,
        num_layers: 2,
        num_heads: 4,
        channels: 64,
    }
}

/// A token stream with structure to learn: mostly `next = prev + 7 (mod vocab)`, sometimes a
/// random jump.
pub fn tokens(n: usize, vocab: usize, seed: u64) -> Vec<u16> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut tok = 0usize;
    (0..n)
        .map(|_| {
            tok = if rng.random_range(0..4) == 0 {
                rng.random_range(0..vocab)
            } else {
                (tok + 7) % vocab
            };
            tok as u16
        })
        .collect()
}

/// Parameters uniform in [-scale, scale) (layernorm weights around 1), to exercise every
/// non-linearity more than GPT-2's small initialisation does.
pub fn random_params(config: &Gpt2Config, scale: f32, seed: u64) -> Params<Vec<f32>> {
    let mut rng = Pcg64::seed_from_u64(seed);
    let mut params = gpt2_init(config, seed);
    for (_, tensor) in params.iter_mut() {
        for x in tensor.iter_mut() {
            *x += rng.random_range(-scale..scale);
        }
    }
    params
}

/// A temporary directory with a checkpoint and train/val shards.
pub struct Files {
    pub dir: TempDir,
    pub ckpt: PathBuf,
    pub train: PathBuf,
    pub val: PathBuf,
}

impl Files {
    /// `config` initialised GPT-2 style with `seed`, `train_tokens` and `val_tokens` tokens.
    pub fn new(config: &Gpt2Config, seed: u64, train_tokens: usize, val_tokens: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let ckpt = dir.path().join("init.bin");
        write_model(&ckpt, config, &gpt2_init(config, seed), ModelDtype::F32).unwrap();
        let train = dir.path().join("train_000000.bin");
        write_shard(&train, &tokens(train_tokens, config.vocab_size, seed)).unwrap();
        let val = dir.path().join("val_000000.bin");
        write_shard(&val, &tokens(val_tokens, config.vocab_size, seed + 1)).unwrap();
        Self { dir, ckpt, train, val }
    }

    /// A path in the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}

/// `path` as a command-line argument.
pub fn arg(path: &Path) -> String {
    path.to_string_lossy().into_owned()
}

/// Runs the `trainer` binary.
pub fn trainer(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_trainer")).args(args).output().unwrap()
}

/// Runs the `trainer` binary and fails the test unless it succeeds.
pub fn trainer_ok(args: &[&str]) -> String {
    let out = trainer(args);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "trainer {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// The records of a metrics file.
pub fn metrics(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect()
}

/// The same batch every time.
pub struct FixedBatch {
    /// Input ids (B·T).
    pub inputs: Vec<u32>,
    /// Target ids (B·T).
    pub targets: Vec<u32>,
}

impl BatchSource for FixedBatch {
    fn next_batch(&mut self, inputs: &mut [u32], targets: &mut [u32]) -> trainer::Result<()> {
        inputs.copy_from_slice(&self.inputs);
        targets.copy_from_slice(&self.targets);
        Ok(())
    }
}

/// The batches of `batches` in turn: micro-batches that differ, so that a gradient
/// accumulation that overwrites instead of adding shows.
pub struct CyclingBatches {
    /// The batches, handed out in order, then again from the first.
    pub batches: Vec<FixedBatch>,
    /// The next one.
    pub next: usize,
}

impl BatchSource for CyclingBatches {
    fn next_batch(&mut self, inputs: &mut [u32], targets: &mut [u32]) -> trainer::Result<()> {
        let at = self.next % self.batches.len();
        let batch = &mut self.batches[at];
        self.next += 1;
        batch.next_batch(inputs, targets)
    }
}

/// AdamW at llm.c's test settings: no weight decay, no clipping.
pub fn plain_adamw() -> AdamWConfig {
    AdamWConfig {
        beta1: 0.9,
        beta2: 0.999,
        eps: 1e-8,
        weight_decay: 0.0,
        decay_all: false,
        grad_clip: 0.0,
    }
}

/// The loss and the parameter gradients of one forward/backward of `params` on `batch`.
pub fn one_step_grads<B: Backend>(
    backend: &B,
    config: &Gpt2Config,
    params: &Params<Vec<f32>>,
    options: ModelOptions,
    batch: &mut FixedBatch,
    (b, t): (usize, usize),
) -> (f32, Params<Vec<f32>>) {
    let model = Gpt2::new(backend, *config, params, options).unwrap();
    let shape = BatchShape { b, t, grad_accum_steps: 1 };
    let mut session = Session::new(backend, model, plain_adamw(), shape).unwrap();
    let loss = session.forward_backward(batch).unwrap();
    (loss, session.grads().unwrap())
}
