//! `trainer ladder`: the speed ladder of GPT-2 training (fp32 → TF32 → bf16 → fused kernels →
//! flash attention → padded vocabulary, and fp16 with loss scaling beside bf16), our kernels
//! and PyTorch rung by rung, from one initial checkpoint on the same batches.
//!
//! Each rung builds a fresh model from the same parameters (written once as an llm.c
//! checkpoint, which the PyTorch script loads too), trains `warmup + steps` steps on the same
//! token windows (window `i` of the shard at step `i`, as `bench/ladder_torch.py` does), and
//! reports the median step time of the timed steps and every step's loss, so the report can
//! show that both sides train the same model to the same losses.

mod report;
mod rungs;
mod torch;

pub use report::{chart, loss_tolerance, markdown};
pub use rungs::{RUNGS, Rung, rung};
pub use torch::{TorchMode, TorchOps, TorchRun, TorchVocabLoss, pytorch_missing};

use crate::backend::{
    Backend, BackendJob, Compute, Precision, ResolvedDevice, check_training_fits,
};
use crate::bench::{BenchRun, TimedSteps, timed_steps};
use crate::checkpoint::{ModelDtype, write_model};
use crate::data::{DataLoader, write_shard};
use crate::error::{Error, Result};
use crate::mfu;
use crate::model::{Gpt2, Gpt2Config, ModelOptions, ParamKind, Params, checked_init};
use crate::optim::AdamWConfig;
use crate::rng;
use crate::train::{BatchShape, Session};
use gpu_host::kernels::classifier::ClassifierPath;
use gpu_host::kernels::gemm::{GemmEngine, WeightGrads, WgmmaTile};
use rand::RngExt;
use std::path::{Path, PathBuf};

/// What to run.
#[derive(Clone, Debug)]
pub struct LadderOptions {
    /// The model, with its padded vocabulary (the rungs before `vocab` use `Vp = V`).
    pub config: Gpt2Config,
    /// Micro-batch size B.
    pub b: usize,
    /// Sequence length T.
    pub t: usize,
    /// Untimed steps per rung.
    pub warmup: usize,
    /// Timed steps per rung (the median is reported).
    pub steps: usize,
    /// Constant learning rate.
    pub lr: f32,
    /// AdamW's settings (PyTorch gets the same).
    pub adamw: AdamWConfig,
    /// The rungs to run, in order.
    pub rungs: Vec<&'static Rung>,
    /// Seed of the initial parameters (and of the synthetic tokens).
    pub seed: u64,
    /// A token shard to train on; `None`: random tokens below V (for models with a toy
    /// vocabulary, on the simulator).
    pub data: Option<PathBuf>,
    /// Where the initial checkpoint and the token shard the PyTorch script reads are written.
    pub work_dir: PathBuf,
    /// Whether to run the PyTorch side, and its script.
    pub torch: TorchMode,
    /// The logits PyTorch's loss covers on the padded-vocabulary rungs.
    pub torch_vocab_loss: TorchVocabLoss,
    /// Our tensor-core GEMM kernels (`--gemm-engine`; `Auto`: wgmma on Hopper).
    pub gemm_engine: GemmEngine,
    /// The Hopper kernel's block tile (`--wgmma-tile`).
    pub wgmma_tile: WgmmaTile,
    /// The weight gradients' schedule on the Hopper kernel (`--weight-grads`).
    pub weight_grads: WeightGrads,
    /// Our fused classifier's kernel (`--classifier`).
    pub classifier: ClassifierPath,
    /// After each rung's timed steps, one more with every op timed (ours), and one under
    /// torch.profiler (PyTorch's).
    pub op_times: bool,
}

/// Our side of one rung.
#[derive(Clone, Debug, PartialEq)]
pub struct RungRun {
    /// Timings, losses and skipped steps.
    pub steps: TimedSteps,
    /// The backend, as it describes itself.
    pub backend: String,
}

/// Both sides of one rung.
#[derive(Clone, Debug)]
pub struct RungResult {
    /// The rung.
    pub rung: &'static Rung,
    /// Ours, or why it could not run.
    pub ours: std::result::Result<RungRun, String>,
    /// PyTorch's, when it ran (or why this rung could not).
    pub torch: Option<std::result::Result<TorchRun, String>>,
}

impl RungResult {
    /// Our losses, step by step, when our side ran.
    pub fn our_losses(&self) -> Option<&[f32]> {
        Some(&self.ours.as_ref().ok()?.steps.losses)
    }

    /// PyTorch's losses, step by step, when its side ran.
    pub fn torch_losses(&self) -> Option<&[f32]> {
        Some(&self.torch.as_ref()?.as_ref().ok()?.losses)
    }
}

/// The whole ladder.
#[derive(Clone, Debug)]
pub struct Ladder {
    /// The options it ran with.
    pub options: LadderOptions,
    /// The GPU's name, when the device is a GPU (the figures are real only then; elsewhere the
    /// ladder only checks that each rung trains).
    pub gpu: Option<String>,
    /// The device, in words.
    pub device: String,
    /// Our side ran the project's kernels (on a GPU or the simulator), not the CPU backend.
    pub kernels: bool,
    /// One entry per rung, in order.
    pub rungs: Vec<RungResult>,
    /// Why there is no PyTorch side, or why it is incomplete (still running or stopped).
    pub torch_note: Option<String>,
}

impl Ladder {
    /// Model FLOPs per token (6·N + 6·L·C·T, N counted with the unpadded vocabulary: padding
    /// is not useful work).
    pub fn flops_per_token(&self) -> f64 {
        mfu::flops_per_token(&self.options.config, self.options.t)
    }

    /// This GPU's peak in `precision`, if it is in the table.
    pub fn peak(&self, precision: Precision) -> Option<mfu::Peak> {
        mfu::peak(self.gpu.as_deref()?, precision)
    }

    /// MFU of `tokens_per_sec` in `rung`'s precision on this GPU, if its peak is known.
    pub fn mfu(&self, rung: &Rung, tokens_per_sec: f64) -> Option<f64> {
        Some(self.flops_per_token() * tokens_per_sec / self.peak(rung.precision)?.flops)
    }

    /// The result of rung `id`, if it ran.
    pub fn result(&self, id: &str) -> Option<&RungResult> {
        self.rungs.iter().find(|r| r.rung.id == id)
    }

    /// How closely our losses follow PyTorch's in `result`, when both sides ran it.
    ///
    /// The tolerance is [`loss_tolerance`] of the rung's precision, plus, on a padded-vocab
    /// rung with [`TorchVocabLoss::Padded`], ln(Vp/V): there PyTorch's softmax (nanoGPT's) also
    /// covers the padded logits and ours (llm.c's) does not, which puts PyTorch's first loss
    /// that much higher (the padded rows of wte start at zero; training pushes their logits
    /// down, so the gap shrinks).
    pub fn torch_agreement(&self, result: &RungResult) -> Option<LossAgreement> {
        let (ours, torch) = (result.our_losses()?, result.torch_losses()?);
        let max_diff = max_loss_diff(ours, torch);
        let c = &self.options.config;
        let padding_gap = if result.rung.padded_vocab
            && self.options.torch_vocab_loss == TorchVocabLoss::Padded
        {
            (c.padded_vocab_size as f32 / c.vocab_size as f32).ln()
        } else {
            0.0
        };
        let tolerance = loss_tolerance(result.rung.precision) + padding_gap;
        let agrees = ours.len() == torch.len() && max_diff <= tolerance; // false for NaN
        Some(LossAgreement { max_diff, tolerance, agrees })
    }
}

/// The largest |a − b| over the steps both ran; NaN when either side's loss is not finite in
/// a way that leaves no difference (NaN, or infinities on both sides), so that it never agrees.
pub(super) fn max_loss_diff(a: &[f32], b: &[f32]) -> f32 {
    let diffs = a.iter().zip(b).map(|(x, y)| (x - y).abs());
    diffs.fold(0.0, |m: f32, d| if m.is_nan() || d.is_nan() { f32::NAN } else { m.max(d) })
}

/// Our losses against PyTorch's on one rung (see [`Ladder::torch_agreement`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LossAgreement {
    /// The largest |ours − PyTorch| over the steps.
    pub max_diff: f32,
    /// The largest that still counts as the same training.
    pub tolerance: f32,
    /// Both sides ran the same number of steps and `max_diff <= tolerance`.
    pub agrees: bool,
}

/// What a report written before PyTorch's side ran says about it.
const TORCH_PENDING: &str = "PyTorch's side had not run when this report was written (the \
                             ladder was stopped, or is still running)";

/// What a report written while PyTorch's side runs says about it.
const TORCH_RUNNING: &str = "PyTorch's side was still running when this report was written (or \
                             was stopped): the rungs without its figures had not finished there";

/// Runs the ladder on `device`; `log` receives a line per rung (and PyTorch's progress),
/// `partial` the ladder so far after each of our rungs and each of PyTorch's (to write a
/// report that survives the run being stopped).
pub fn run(
    device: &ResolvedDevice,
    options: &LadderOptions,
    log: &mut dyn FnMut(&str),
    partial: &mut dyn FnMut(&Ladder),
) -> Result<Ladder> {
    let LadderOptions { config, b, t, .. } = *options;
    config.validate()?;
    if options.rungs.is_empty() || options.steps == 0 || b == 0 || t == 0 {
        return Err(Error::invalid("the ladder needs rungs, timed steps, B > 0 and T > 0"));
    }
    crate::optim::check_lr(options.lr)?;
    options.adamw.validate()?;
    if let TorchMode::Required(script) = &options.torch {
        // Said before our rungs run, not after them.
        if let Some(reason) = torch::unavailable(script) {
            return Err(Error::invalid(format!("--torch on: {reason}")));
        }
    }
    std::fs::create_dir_all(&options.work_dir).map_err(|e| Error::io(&options.work_dir, e))?;
    let params = checked_init(&config, options.seed)?;
    let checkpoint = options.work_dir.join("ladder-init.bin");
    write_model(&checkpoint, &config, &params, ModelDtype::F32)?;
    let shard = token_shard(options)?;
    // Sequential windows (no shuffle), wrapping around: window i at step i, as the PyTorch
    // script reads them; the loader checks the length and every token it hands out.
    let pattern = glob::Pattern::escape(&shard.to_string_lossy());
    let mut data = DataLoader::open(&pattern, "--data", b, t, config.vocab_size, None)?;
    let (gpu, described) = match device {
        ResolvedDevice::Cuda(gpu) => (Some(gpu.info().name.clone()), gpu.info().name.clone()),
        ResolvedDevice::Sim(_) if device.is_hopper_sim() => {
            (None, "the PTX simulator of the sm_90a module (timings meaningless)".into())
        }
        ResolvedDevice::Sim(_) => (None, "the PTX simulator (timings meaningless)".into()),
        ResolvedDevice::Cpu => (None, "the CPU backend".into()),
    };
    let mut ladder = Ladder {
        options: options.clone(),
        gpu,
        device: described,
        kernels: !matches!(device, ResolvedDevice::Cpu),
        rungs: Vec::new(),
        torch_note: Some(TORCH_PENDING.into()),
    };
    for &rung in &options.rungs {
        let (config, params) =
            if rung.padded_vocab { (config, params.clone()) } else { unpadded(&config, &params) };
        data.reset()?;
        let job = RungJob { rung, options, config, params: &params, data: &mut data };
        let compute = Compute {
            precision: rung.precision,
            gemm_engine: options.gemm_engine,
            wgmma_tile: options.wgmma_tile,
            weight_grads: options.weight_grads,
            classifier: options.classifier,
        };
        let ours = device.run(compute, job).map_err(|e| e.to_string());
        match &ours {
            Ok(run) => log(&format!(
                "ours  {:6} {:9.0} tokens/s, {:8.1} ms/step{}; losses {}",
                rung.id,
                run.steps.timing.tokens_per_sec,
                run.steps.timing.median_ms,
                ladder
                    .mfu(rung, run.steps.timing.tokens_per_sec)
                    .map_or(String::new(), |m| format!(", MFU {:.1}%", 100.0 * m)),
                first_losses(&run.steps.losses)
            )),
            Err(e) => log(&format!("ours  {:6} failed: {e}", rung.id)),
        }
        ladder.rungs.push(RungResult { rung, ours, torch: None });
        partial(&ladder);
    }
    let torch_device = if ladder.gpu.is_some() { "cuda" } else { "cpu" };
    let inputs = torch::Inputs { checkpoint: &checkpoint, shard: &shard, device: torch_device };
    let mut each = |id: &str, run: &std::result::Result<torch::TorchRun, String>| {
        if let Some(result) = ladder.rungs.iter_mut().find(|r| r.rung.id == id) {
            result.torch = Some(run.clone());
        }
        ladder.torch_note = Some(TORCH_RUNNING.into());
        partial(&ladder);
    };
    // `each` has attached every rung PyTorch reported; what is left is whether its side is
    // complete.
    ladder.torch_note = torch::run(&options.torch, options, &inputs, log, &mut each)?.err();
    Ok(ladder)
}

/// `first_losses(&[10.98, 10.52, ..])` → `10.9800 10.5200 ..` (at most four).
fn first_losses(losses: &[f32]) -> String {
    let shown: Vec<String> = losses.iter().take(4).map(|l| format!("{l:.4}")).collect();
    shown.join(" ") + if losses.len() > 4 { " …" } else { "" }
}

/// The model with its vocabulary unpadded (`Vp = V`, `wte` cut to V rows).
fn unpadded(config: &Gpt2Config, params: &Params<Vec<f32>>) -> (Gpt2Config, Params<Vec<f32>>) {
    let config = config.unpadded();
    let mut params = params.clone();
    params[ParamKind::Wte].truncate(config.vocab_size * config.channels);
    (config, params)
}

/// The token shard to train on: `options.data`, or random tokens below V written to the work
/// folder.
fn token_shard(options: &LadderOptions) -> Result<PathBuf> {
    if let Some(path) = &options.data {
        return Ok(path.clone());
    }
    let bt = options.b * options.t;
    let count = (options.warmup + options.steps).max(1) * bt + 1;
    let vocab = u16::try_from(options.config.vocab_size)
        .map_err(|_| Error::invalid("synthetic tokens need a vocabulary below 65,536"))?;
    let mut stream = rng::stream(options.seed, &[rng::family::BENCH_TOKENS]);
    let tokens: Vec<u16> = (0..count).map(|_| stream.random_range(0..vocab)).collect();
    let path = options.work_dir.join("ladder-tokens.bin");
    write_shard(&path, &tokens)?;
    Ok(path)
}

/// One rung on one backend.
struct RungJob<'a> {
    rung: &'static Rung,
    options: &'a LadderOptions,
    config: Gpt2Config,
    params: &'a Params<Vec<f32>>,
    data: &'a mut DataLoader,
}

impl BackendJob for RungJob<'_> {
    type Output = RungRun;
    fn run<B: Backend>(self, backend: &B) -> Result<RungRun> {
        let LadderOptions { b, t, warmup, steps, lr, adamw, op_times, .. } = *self.options;
        let options = ModelOptions { attention: self.rung.attention, fuse: self.rung.fuse };
        let held = self.config.num_params().saturating_mul(4);
        check_training_fits(backend, &self.config, b.saturating_mul(t), held)?;
        let model = Gpt2::new(backend, self.config, self.params, options)?;
        let shape = BatchShape { b, t, grad_accum_steps: 1 };
        let mut session = Session::new(backend, model, adamw, shape)?;
        let run = BenchRun { b, t, warmup, steps, op_times };
        let steps = timed_steps(backend, &mut session, self.data, lr, run)?;
        Ok(RungRun { steps, backend: backend.describe() })
    }
}

/// The default work folder: a fresh folder under the system's temporary directory.
pub fn default_work_dir() -> PathBuf {
    std::env::temp_dir().join(format!("gpt2-ladder-{}", std::process::id()))
}

/// Removes the work folder's files (the checkpoint and the synthetic shard) and the folder.
pub fn remove_work_dir(dir: &Path) {
    for name in ["ladder-init.bin", "ladder-tokens.bin"] {
        let _ = std::fs::remove_file(dir.join(name));
    }
    let _ = std::fs::remove_dir(dir);
}

#[cfg(test)]
mod tests {
    use super::max_loss_diff;

    #[test]
    fn a_non_finite_loss_never_agrees() {
        assert_eq!(max_loss_diff(&[1.0, 2.0], &[1.5, 1.0]), 1.0);
        assert!(max_loss_diff(&[1.0, f32::NAN, 2.0], &[1.0, 1.0, 2.0]).is_nan());
        assert!(max_loss_diff(&[f32::INFINITY], &[f32::INFINITY]).is_nan());
        assert_eq!(max_loss_diff(&[f32::INFINITY], &[1.0]), f32::INFINITY);
        assert!(max_loss_diff(&[f32::NAN], &[1.0]).partial_cmp(&1e9).is_none());
    }
}
