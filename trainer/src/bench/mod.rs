//! `trainer bench`: time full training steps on synthetic tokens, and report them.

mod memory;
mod report;

pub use memory::{memory_lines, memory_markdown};
pub use report::{
    BenchOutcome, BenchRow, clock_name, kernel_section, markdown, op_lines, op_table,
    roofline_note, tile_name,
};

use crate::backend::Backend;
use crate::backend::TunedGemm;
use crate::backend::check_training_fits;
use crate::backend::op_times::OpTimes;
use crate::error::Result;
use crate::model::{Gpt2, Gpt2Config, ModelOptions, checked_init};
use crate::optim::AdamWConfig;
use crate::rng;
use crate::train::{BatchShape, BatchSource, Session};
use rand::RngExt;
use std::time::Instant;

/// Uniformly random tokens below the vocabulary size (timing does not depend on their values).
struct RandomTokens {
    vocab_size: u32,
    stream: rand_pcg::Pcg64,
}

impl BatchSource for RandomTokens {
    fn next_batch(&mut self, inputs: &mut [u32], targets: &mut [u32]) -> Result<()> {
        for tok in inputs.iter_mut().chain(targets.iter_mut()) {
            *tok = self.stream.random_range(0..self.vocab_size);
        }
        Ok(())
    }
}

/// Timings of a benchmark.
#[derive(Clone, Debug, PartialEq)]
pub struct BenchResult {
    /// Wall time of each timed step, in order.
    pub step_ms: Vec<f64>,
    /// Median of `step_ms`.
    pub median_ms: f64,
    /// Tokens per second at the median step time.
    pub tokens_per_sec: f64,
    /// Every op of one more step, timed (with [`BenchRun::op_times`]; else empty).
    pub ops: OpTimes,
    /// Every kernel of one more step after that, timed launch by launch (with
    /// [`BenchRun::op_times`], on the device backends; else empty).
    pub kernels: OpTimes,
    /// The GEMMs whose tile `--wgmma-tile tuned` chose by timing (during the first step).
    pub tuned: Vec<TunedGemm>,
}

/// The shape of a benchmark run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BenchRun {
    /// Batch size.
    pub b: usize,
    /// Sequence length.
    pub t: usize,
    /// Untimed steps first.
    pub warmup: usize,
    /// Timed steps.
    pub steps: usize,
    /// Then one more step with every op timed: where a step's time goes.
    pub op_times: bool,
}

/// Timed training steps and what they computed.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedSteps {
    /// The timings of the timed steps.
    pub timing: BenchResult,
    /// Every step's loss, warm-up included.
    pub losses: Vec<f32>,
    /// Steps the fp16 loss scaler skipped.
    pub skipped: usize,
}

/// Runs `warmup + steps` training steps of `session` on `data` at learning rate `lr` and times
/// the last `steps` (each ends with a synchronisation, so the wall time covers the device's
/// work); with [`BenchRun::op_times`], one more step with every op timed, then one with every
/// kernel launch timed (apart, so that neither's stamps inflate the other's times; neither in
/// the losses).
/// AdamW's step count advances with applied updates only, as under PyTorch's GradScaler.
pub fn timed_steps<B: Backend>(
    backend: &B,
    session: &mut Session<'_, B>,
    data: &mut dyn BatchSource,
    lr: f32,
    run: BenchRun,
) -> Result<TimedSteps> {
    let BenchRun { b, t, warmup, steps, op_times } = run;
    let (mut losses, mut step_ms, mut skipped) = (Vec::new(), Vec::new(), 0);
    for i in 0..warmup + steps {
        let timer = Instant::now();
        let update = (losses.len() - skipped) as u32 + 1;
        let out = session.train_step(data, lr, update)?;
        backend.synchronize()?;
        if i >= warmup {
            step_ms.push(timer.elapsed().as_secs_f64() * 1e3);
        }
        losses.push(out.loss);
        skipped += usize::from(out.skipped);
    }
    let (mut ops, mut kernels) = (OpTimes::default(), OpTimes::default());
    if op_times {
        // A failure here costs the profiles only: the timed steps above stand.
        let update = (losses.len() - skipped) as u32 + 1;
        let mut profiled = |update, start: &dyn Fn(), take: &dyn Fn() -> Result<OpTimes>| {
            start();
            let stepped = session.train_step(data, lr, update).and_then(|_| backend.synchronize());
            match (stepped, take()) {
                (Ok(()), Ok(times)) => times,
                (Err(e), _) | (_, Err(e)) => {
                    OpTimes { error: Some(e.to_string()), ..OpTimes::default() }
                }
            }
        };
        let recorder = backend.op_recorder();
        ops = profiled(update, &|| recorder.start(), &|| recorder.take());
        if ops.error.is_none() {
            let (start, take) = (|| backend.start_kernel_times(), || backend.take_kernel_times());
            kernels = profiled(update + 1, &start, &take);
        }
    }
    let mut sorted = step_ms.clone();
    sorted.sort_by(f64::total_cmp);
    let median_ms = sorted.get(sorted.len() / 2).copied().unwrap_or(f64::NAN);
    let tokens_per_sec = (b * t) as f64 / (median_ms / 1e3);
    let tuned = backend.tuned_gemms();
    let timing = BenchResult { step_ms, median_ms, tokens_per_sec, ops, kernels, tuned };
    Ok(TimedSteps { timing, losses, skipped })
}

/// Times `warmup + steps` training steps (forward, backward, norm, AdamW) of a fresh model of
/// `config` on `b × t` random tokens.
pub fn bench<B: Backend>(
    backend: &B,
    config: &Gpt2Config,
    options: ModelOptions,
    run: BenchRun,
) -> Result<BenchResult> {
    check_training_fits(backend, config, run.b.saturating_mul(run.t), 0)?;
    let model = Gpt2::new(backend, *config, &checked_init(config, 0)?, options)?;
    let adamw = AdamWConfig {
        beta1: 0.9,
        beta2: 0.95,
        eps: 1e-8,
        weight_decay: 0.0,
        decay_all: false,
        grad_clip: 1.0,
    };
    let shape = BatchShape { b: run.b, t: run.t, grad_accum_steps: 1 };
    let mut session = Session::new(backend, model, adamw, shape)?;
    let mut data = RandomTokens {
        vocab_size: config.vocab_size as u32,
        stream: rng::stream(0, &[rng::family::BENCH_TOKENS]),
    };
    Ok(timed_steps(backend, &mut session, &mut data, 1e-4, run)?.timing)
}
