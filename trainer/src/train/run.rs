//! `trainer train`: a whole training run, from options to checkpoints, metrics and plot.

use super::metrics::{MetricsLog, StepRecord, plot_losses};
use super::progress::Progress;
use super::session::{BatchShape, Session};
use crate::backend::ops::AttentionKind;
use crate::backend::{Backend, check_training_fits};
use crate::checkpoint::{
    ModelDtype, OptimizerState, checkpoint_files, latest_resumable, model_path, read_model,
    read_state, resolve_model_file, resumable_steps, state_path, write_model, write_state,
};
use crate::data::DataLoader;
use crate::error::{Error, Result};
use crate::io::ensure_writable_dir;
use crate::loss_scale::{LossScaleConfig, LossScaler};
use crate::mfu;
use crate::model::{Gpt2, Gpt2Config, ModelOptions, Params, checked_init};
use crate::optim::{AdamWConfig, LrConfig, LrSchedule};
use crate::report::group_digits;
use std::path::{Path, PathBuf};
use std::time::Instant;

/// Where the model of a run comes from.
#[derive(Clone, Debug, PartialEq)]
pub enum ModelSource {
    /// A freshly initialised model of these dimensions (seeded by [`TrainOptions::seed`]).
    Fresh(Gpt2Config),
    /// The parameters of an llm.c checkpoint, with fresh optimizer state.
    Init(PathBuf),
    /// The latest model + optimizer-state pair in a checkpoint directory.
    Resume(PathBuf),
}

/// Everything `trainer train` needs.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainOptions {
    /// The model.
    pub model: ModelSource,
    /// Glob of the training shards.
    pub train_data: String,
    /// Glob of the validation shards.
    pub val_data: Option<String>,
    /// Micro-batch size B.
    pub batch_size: usize,
    /// Sequence length T.
    pub seq_len: usize,
    /// Tokens per optimizer step (a multiple of B·T); `None` for B·T.
    pub total_batch_tokens: Option<usize>,
    /// Total optimizer steps of the run (a resumed run continues up to this).
    pub steps: u64,
    /// Peak learning rate.
    pub lr: f32,
    /// Cosine floor as a fraction of the peak.
    pub min_lr_frac: f32,
    /// Learning-rate schedule after warm-up.
    pub lr_schedule: LrSchedule,
    /// Linear warm-up steps.
    pub warmup_steps: u64,
    /// AdamW and clipping.
    pub adamw: AdamWConfig,
    /// Shuffle the training batches.
    pub shuffle: bool,
    /// Seed of the initialisation and the shuffling.
    pub seed: u64,
    /// Evaluate every this many steps (and at the last step); 0 never.
    pub val_every: u64,
    /// Batches per evaluation.
    pub val_batches: usize,
    /// Where to write checkpoints.
    pub checkpoint_dir: Option<PathBuf>,
    /// Write a checkpoint every this many steps (and at the end); 0 only at the end.
    pub checkpoint_every: u64,
    /// A run that does not resume may delete another run's checkpoints in `checkpoint_dir`
    /// (else they are an error: `sample` and `--resume` would pick the higher-step ones).
    pub overwrite: bool,
    /// Where to write the metrics (and, next to them, the loss plot).
    pub metrics_jsonl: Option<PathBuf>,
    /// Attention kind (`None`: the fastest for the backend's precision and the model).
    pub attention: Option<AttentionKind>,
    /// Fuse GELU into the matmuls and residual adds into the layernorms.
    pub fuse: bool,
}

/// What a finished run reports.
#[derive(Clone, Debug, PartialEq)]
pub struct TrainReport {
    /// The first step this run executed.
    pub first_step: u64,
    /// The loss of the last step.
    pub final_loss: f32,
    /// The last validation loss, if any evaluation ran.
    pub final_val_loss: Option<f32>,
    /// The last checkpoint written.
    pub last_checkpoint: Option<PathBuf>,
    /// The loss plot, if metrics were written.
    pub plot: Option<PathBuf>,
}

/// The model, its origin, and the optimizer state of a resumed run.
struct Start {
    config: Gpt2Config,
    params: Params<Vec<f32>>,
    origin: String,
    state: Option<OptimizerState>,
}

fn load_start(opts: &TrainOptions) -> Result<Start> {
    match &opts.model {
        ModelSource::Fresh(config) => Ok(Start {
            config: *config,
            params: checked_init(config, opts.seed)?,
            origin: format!("fresh GPT-2 initialisation (seed {})", opts.seed),
            state: None,
        }),
        ModelSource::Init(path) => {
            let ckpt = read_model(&resolve_model_file(path)?)?;
            let origin = format!("initialised from {}", path.display());
            Ok(Start { config: ckpt.config, params: ckpt.params, origin, state: None })
        }
        ModelSource::Resume(dir) => {
            let step = latest_resumable(dir)?;
            let ckpt = read_model(&model_path(dir, step))?;
            let path = state_path(dir, step);
            let state = read_state(&path, &ckpt.config)?;
            if state.step != step {
                return Err(Error::bad_file(
                    &path,
                    format!("corrupt optimizer state: it records step {}", state.step),
                ));
            }
            let origin = format!("resumed from {} at step {step}", dir.display());
            Ok(Start { config: ckpt.config, params: ckpt.params, origin, state: Some(state) })
        }
    }
}

/// Fails unless the resumed run has the batch shape and data order of the checkpointed one.
fn check_resume(
    state: &OptimizerState,
    opts: &TrainOptions,
    accum: usize,
    loader: &DataLoader,
) -> Result<()> {
    let same = [
        ("--batch-size", state.batch_size, opts.batch_size as u64),
        ("--seq-len", state.seq_len, opts.seq_len as u64),
        ("gradient accumulation steps", state.grad_accum_steps, accum as u64),
        ("shuffling (--no-shuffle)", u64::from(state.shuffle), u64::from(opts.shuffle)),
        ("training shards", state.data_shards, loader.num_shards() as u64),
        ("training tokens", state.data_tokens, loader.num_tokens()),
    ];
    for (what, saved, now) in same {
        if saved != now {
            return Err(Error::invalid(format!(
                "cannot resume: {what} is {now} but the checkpoint was trained with {saved}"
            )));
        }
    }
    if state.shuffle && state.seed != opts.seed {
        return Err(Error::invalid(format!(
            "cannot resume: --seed is {} but the checkpoint shuffled with seed {}",
            opts.seed, state.seed
        )));
    }
    if state.step >= opts.steps {
        return Err(Error::invalid(format!(
            "nothing to do: the checkpoint has completed {} steps and --steps is {}",
            state.step, opts.steps
        )));
    }
    Ok(())
}

/// Deletes the checkpoints of another run in `dir` when `overwrite` allows it, else refuses
/// to mix this run's with them.
fn clear_earlier_checkpoints(dir: &Path, overwrite: bool) -> Result<()> {
    let earlier = checkpoint_files(dir)?;
    let Some(last) = earlier.last() else { return Ok(()) };
    if !overwrite {
        return Err(Error::invalid(format!(
            "--checkpoint-dir {} already holds another run's checkpoints ({} files, e.g. {}): \
             --resume {} continues that run, --overwrite deletes them first, or choose another \
             directory",
            dir.display(),
            earlier.len(),
            last.display(),
            dir.display()
        )));
    }
    earlier.iter().try_for_each(|f| std::fs::remove_file(f).map_err(|e| Error::io(f, e)))
}

fn grad_accum_steps(opts: &TrainOptions) -> Result<usize> {
    let (b, t) = (opts.batch_size, opts.seq_len);
    if b == 0 || t == 0 || opts.steps == 0 {
        return Err(Error::invalid("--batch-size, --seq-len and --steps must be positive"));
    }
    let Some(bt) = b.checked_mul(t).filter(|&bt| bt <= u32::MAX as usize) else {
        return Err(Error::invalid(format!(
            "--batch-size {b} × --seq-len {t} exceeds the {} tokens a micro-batch may hold",
            group_digits(u64::from(u32::MAX))
        )));
    };
    let total = opts.total_batch_tokens.unwrap_or(bt);
    if total == 0 || !total.is_multiple_of(bt) {
        return Err(Error::invalid(format!(
            "--total-batch-tokens {total} is not a positive multiple of B×T = {b}×{t} = {bt}"
        )));
    }
    if opts.val_every > 0 && opts.val_data.is_some() && opts.val_batches == 0 {
        return Err(Error::invalid("--val-batches must be positive"));
    }
    Ok(total / bt)
}

fn describe_data(loader: &DataLoader, pattern: &str) -> String {
    format!(
        "{} shard(s), {} tokens, {} batches per epoch ({pattern})",
        loader.num_shards(),
        group_digits(loader.num_tokens()),
        group_digits(loader.batches_per_epoch())
    )
}

/// What the run prints before its first step.
struct Summary<'a> {
    backend: String,
    kernels: String,
    config: &'a Gpt2Config,
    origin: &'a str,
    train: &'a DataLoader,
    val: Option<(&'a DataLoader, usize)>,
    accum: usize,
    first_step: u64,
}

impl Summary<'_> {
    fn lines(&self, opts: &TrainOptions) -> Vec<String> {
        let Self { config, train, accum, first_step, .. } = *self;
        let (b, t) = (opts.batch_size, opts.seq_len);
        let num_params = config.num_params();
        let tokens_per_step = b * t * accum;
        vec![
            format!(
                "model    {}, {} parameters",
                config.describe(),
                group_digits(num_params as u64)
            ),
            format!("         {}", self.origin),
            format!("device   {}", self.backend),
            format!("         {}", self.kernels),
            format!(
                "train    {}{}",
                describe_data(train, &opts.train_data),
                if opts.shuffle {
                    format!(", shuffled (seed {})", opts.seed)
                } else {
                    String::new()
                }
            ),
            match (self.val, &opts.val_data) {
                (Some((v, val_batches)), Some(pattern)) => format!(
                    "val      {}; {val_batches} batches every {} steps",
                    describe_data(v, pattern),
                    opts.val_every
                ),
                _ => "val      none".to_string(),
            },
            format!(
                "batch    B={b} × T={t} = {} tokens, {accum} micro-batch(es) per step = {} tokens per step",
                b * t,
                tokens_per_step
            ),
            format!(
                "optim    AdamW lr {:e} ({:?}{}, {} warm-up steps), betas ({}, {}), eps {:e}, weight decay {} ({}), grad clip {}",
                opts.lr,
                opts.lr_schedule,
                if opts.lr_schedule == LrSchedule::Cosine {
                    format!(" to {}×", opts.min_lr_frac)
                } else {
                    String::new()
                },
                opts.warmup_steps,
                opts.adamw.beta1,
                opts.adamw.beta2,
                opts.adamw.eps,
                opts.adamw.weight_decay,
                if opts.adamw.decay_all { "all tensors" } else { "weight matrices" },
                if opts.adamw.grad_clip > 0.0 {
                    opts.adamw.grad_clip.to_string()
                } else {
                    "off".into()
                }
            ),
            format!("steps    {} .. {}", first_step, opts.steps),
        ]
    }
}

/// Runs training on `backend` as `opts` says, printing a summary and progress.
pub fn run<B: Backend>(backend: &B, opts: &TrainOptions) -> Result<TrainReport> {
    let accum = grad_accum_steps(opts)?;
    let lr = LrConfig {
        lr: opts.lr,
        min_lr_frac: opts.min_lr_frac,
        schedule: opts.lr_schedule,
        warmup_steps: opts.warmup_steps,
        total_steps: opts.steps,
    };
    lr.validate()?;
    opts.adamw.validate()?;
    let (b, t) = (opts.batch_size, opts.seq_len);
    let tokens = b.saturating_mul(t);
    if let ModelSource::Fresh(config) = &opts.model {
        check_training_fits(backend, config, tokens, 0)?;
    }
    let start = load_start(opts)?;
    let config = start.config;
    if !matches!(opts.model, ModelSource::Fresh(_)) {
        let moments = start.state.as_ref().map_or(0, |_| 2);
        check_training_fits(backend, &config, tokens, (1 + moments) * 4 * config.num_params())?;
    }
    if t > config.max_seq_len {
        return Err(Error::invalid(format!(
            "--seq-len {t} exceeds the model's maximum sequence length {}",
            config.max_seq_len
        )));
    }
    let shuffle_seed = opts.shuffle.then_some(opts.seed);
    let mut train_data =
        DataLoader::open(&opts.train_data, "--train-data", b, t, config.vocab_size, shuffle_seed)?;
    let mut val_data = match (&opts.val_data, opts.val_every) {
        (Some(pattern), every) if every > 0 => {
            Some(DataLoader::open(pattern, "--val-data", b, t, config.vocab_size, None)?)
        }
        _ => None,
    };
    let first_step = match &start.state {
        Some(state) => {
            check_resume(state, opts, accum, &train_data)?;
            train_data.seek(state.data_position).map_err(|e| {
                Error::invalid(format!("cannot resume from the optimizer state: {e}"))
            })?;
            state.step
        }
        None => 0,
    };
    let checkpoint_dir = opts.checkpoint_dir.clone().or_else(|| match &opts.model {
        ModelSource::Resume(dir) => Some(dir.clone()),
        _ => None,
    });
    match &checkpoint_dir {
        Some(dir) => {
            ensure_writable_dir(dir)?;
            if first_step == 0 {
                clear_earlier_checkpoints(dir, opts.overwrite)?;
            }
        }
        None if opts.checkpoint_every > 0 => {
            return Err(Error::invalid("--checkpoint-every needs --checkpoint-dir"));
        }
        None => {}
    }
    let mut metrics = match &opts.metrics_jsonl {
        Some(path) => Some(MetricsLog::open(path, first_step)?),
        None => None,
    };

    let model_options =
        ModelOptions::resolve(opts.attention, opts.fuse, backend.precision(), &config);
    let model = Gpt2::new(backend, config, &start.params, model_options)?;
    let shape = BatchShape { b, t, grad_accum_steps: accum };
    let mut session = Session::new(backend, model, opts.adamw, shape)?;
    if let Some(state) = &start.state {
        session.set_moments(&state.m, &state.v)?;
        if let Some((scale, clean_steps)) = state.loss_scale {
            let config = LossScaleConfig::default();
            session.set_scaler(LossScaler::resumed(config, scale, clean_steps));
        }
    }
    let val_batches = val_data.as_ref().map_or(0, |v| {
        opts.val_batches.min(usize::try_from(v.batches_per_epoch()).unwrap_or(usize::MAX))
    });

    let tokens_per_step = b * t * accum;
    let peak = backend.gpu_name().and_then(|name| mfu::peak(name, backend.precision()));
    let flops_per_step = mfu::flops_per_token(&config, t) * tokens_per_step as f64;
    let progress = Progress::new(first_step, opts.steps);
    let summary = Summary {
        backend: backend.describe(),
        kernels: format!(
            "{} attention, {}; MFU {}",
            model_options.attention.name(),
            if model_options.fuse {
                "fused GELU and residual+layernorm"
            } else {
                "unfused (--no-fuse)"
            },
            match peak {
                Some(p) => format!("against the {} peak of {:.1} TFLOP/s", p.gpu, p.flops / 1e12),
                None => "not reported (no GPU of known peak)".to_string(),
            }
        ),
        config: &config,
        origin: &start.origin,
        train: &train_data,
        val: val_data.as_ref().map(|v| (v, val_batches)),
        accum,
        first_step,
    };
    for line in summary.lines(opts) {
        progress.println(&line);
    }

    let mut last_checkpoint = None;
    let mut final_loss = f32::NAN;
    let mut final_val_loss = None;
    for step in first_step..opts.steps {
        let last = step + 1 == opts.steps;
        let val_loss = match &mut val_data {
            Some(val) if step % opts.val_every == 0 || last => {
                val.reset()?;
                let loss = session.evaluate(val, val_batches)?;
                final_val_loss = Some(loss);
                Some(loss)
            }
            _ => None,
        };
        let step_lr = lr.at(step);
        let timer = Instant::now();
        let update = u32::try_from(step + 1).map_err(|_| Error::invalid("too many steps"))?;
        let out = match session.train_step(&mut train_data, step_lr, update) {
            Ok(out) => out,
            Err(Error::Diverged(why)) => {
                progress.finish();
                return Err(diverged(step, &why, checkpoint_dir.as_deref()));
            }
            Err(other) => return Err(other),
        };
        backend.synchronize()?;
        let seconds = timer.elapsed().as_secs_f64();
        final_loss = out.loss;
        let record = StepRecord {
            step,
            train_loss: out.loss,
            lr: step_lr,
            grad_norm: (!out.skipped).then_some(out.grad_norm),
            step_ms: seconds * 1e3,
            tokens_per_sec: tokens_per_step as f64 / seconds,
            mfu: peak.map(|p| flops_per_step / seconds / p.flops),
            loss_scale: out.loss_scale,
            skipped: out.skipped,
            val_loss,
        };
        progress.step(&record, opts.steps);
        if let Some(metrics) = &mut metrics {
            metrics.append(record)?;
        }
        let due = opts.checkpoint_every > 0 && (step + 1) % opts.checkpoint_every == 0;
        if let Some(dir) = checkpoint_dir.as_ref().filter(|_| due || last) {
            let saved = save_checkpoint(&session, dir, step + 1, opts, accum, &train_data)?;
            last_checkpoint = Some(saved);
        }
    }
    progress.finish();
    let plot = match &metrics {
        Some(log) => {
            let path = log.plot_path();
            plot_losses(log.records(), &path)?;
            Some(path)
        }
        None => None,
    };
    Ok(TrainReport { first_step, final_loss, final_val_loss, last_checkpoint, plot })
}

/// The error for a non-finite loss or gradient norm at `step`. The parameters that produced it
/// are those after `step` updates: a checkpoint of exactly that step is not good, so it is
/// removed (a later `--resume` then starts from the last good one), and the message names the
/// last good checkpoint: the latest earlier one in the checkpoint directory.
fn diverged(step: u64, why: &str, checkpoint_dir: Option<&Path>) -> Error {
    let mut removed = String::new();
    let mut last_good = "none written".to_string();
    if let Some(dir) = checkpoint_dir {
        let model = model_path(dir, step);
        if model.is_file() {
            let _ = std::fs::remove_file(state_path(dir, step));
            let _ = std::fs::remove_file(&model);
            removed = format!(" (removed {}, whose parameters give it)", model.display());
        }
        let mut earlier =
            resumable_steps(dir).unwrap_or_default().into_iter().filter(|&s| s < step);
        if let Some(good) = earlier.next_back() {
            last_good = model_path(dir, good).display().to_string();
        }
    }
    Error::Diverged(format!(
        "training stopped at step {step}: {why}{removed}; the parameters were not updated. Last good checkpoint: {last_good}"
    ))
}

/// Writes `model_<step>.bin` then `state_<step>.bin` into `dir`; returns the model path.
fn save_checkpoint<B: Backend>(
    session: &Session<'_, B>,
    dir: &Path,
    step: u64,
    opts: &TrainOptions,
    accum: usize,
    train_data: &DataLoader,
) -> Result<PathBuf> {
    let config = session.model().config();
    let path = model_path(dir, step);
    write_model(&path, config, &session.params()?, ModelDtype::F32)?;
    let [m, v] = session.moments()?;
    let state = OptimizerState {
        step,
        batch_size: opts.batch_size as u64,
        seq_len: opts.seq_len as u64,
        grad_accum_steps: accum as u64,
        shuffle: opts.shuffle,
        seed: opts.seed,
        data_position: train_data.position(),
        data_shards: train_data.num_shards() as u64,
        data_tokens: train_data.num_tokens(),
        loss_scale: session.scaler().map(|s| (s.scale(), s.clean_steps())),
        m,
        v,
    };
    write_state(&state_path(dir, step), config, &state)?;
    Ok(path)
}
