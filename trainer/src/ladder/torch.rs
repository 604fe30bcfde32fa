//! The PyTorch side of the ladder: `bench/ladder_torch.py`, run with the same checkpoint,
//! token shard, batch shape, optimizer settings and rungs, one JSON line per rung.

use super::LadderOptions;
use crate::backend::op_times::OpTime;
use crate::error::{Error, Result};
use serde::Deserialize;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Whether the ladder runs PyTorch's side (`--torch`), and the script that does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TorchMode {
    /// Ours only.
    Off,
    /// When `python3` can import torch; otherwise the report says why there is no PyTorch.
    Auto(PathBuf),
    /// Always; failing to run it is an error.
    Required(PathBuf),
}

impl TorchMode {
    /// The script PyTorch's side runs, unless it is off.
    pub fn script(&self) -> Option<&Path> {
        match self {
            TorchMode::Off => None,
            TorchMode::Auto(script) | TorchMode::Required(script) => Some(script),
        }
    }
}

/// The logits PyTorch's loss covers on the padded-vocabulary rungs (`--torch-vocab-loss`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TorchVocabLoss {
    /// Every row of wte, the padded ones too, as nanoGPT's `vocab_size=50304` does (the
    /// ladder's timings are of this); its losses differ from ours by up to ln(Vp/V).
    Padded,
    /// The real vocabulary only, as llm.c's and ours: both sides train the same model, so the
    /// padded rungs' losses must agree at their precision's tolerance (what the tests check).
    Real,
}

impl TorchVocabLoss {
    /// The script's `--loss-vocab` value.
    fn arg(self) -> &'static str {
        match self {
            TorchVocabLoss::Padded => "padded",
            TorchVocabLoss::Real => "real",
        }
    }
}

/// PyTorch's side of one rung, as the script prints it.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct TorchRun {
    /// What the rung is in PyTorch, in words.
    pub config: String,
    /// `torch.__version__`.
    pub torch: String,
    /// The device PyTorch ran on.
    pub device: String,
    /// Wall time of each timed step.
    pub step_ms: Vec<f64>,
    /// Median of `step_ms`.
    pub median_ms: f64,
    /// B·T over the median step time.
    pub tokens_per_sec: f64,
    /// Every step's loss, warm-up included.
    pub losses: Vec<f32>,
    /// With `--op-times`: one more step under torch.profiler.
    #[serde(default)]
    pub ops: Option<TorchOps>,
}

/// PyTorch's profile of one step (the script's `ops`).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct TorchOps {
    /// `cuda` (kernels by device self time) or `cpu` (operators by host self time).
    #[serde(default)]
    pub clock: Option<String>,
    /// The self times of everything profiled, summed.
    #[serde(default)]
    pub total_ms: f64,
    /// The slowest kernels or operators, slowest first (their self times).
    #[serde(default)]
    pub ops: Vec<OpTime>,
    /// Why there is no profile, where the profiler could not run.
    #[serde(default)]
    pub error: Option<String>,
}

/// One line of the script's output.
#[derive(Deserialize)]
struct Line {
    rung: String,
    ok: bool,
    #[serde(default)]
    error: Option<String>,
    #[serde(flatten)]
    run: serde_json::Value,
}

/// The files the script reads and the device it runs on.
pub(super) struct Inputs<'a> {
    pub checkpoint: &'a Path,
    pub shard: &'a Path,
    pub device: &'a str,
}

/// Per rung id: PyTorch's run or why that rung failed there.
pub(super) type TorchRuns = Vec<(String, std::result::Result<TorchRun, String>)>;

/// What [`run`] hands over after each rung PyTorch finishes: its id and its run (or why it
/// failed there).
pub(super) type EachRung<'a> = dyn FnMut(&str, &std::result::Result<TorchRun, String>) + 'a;

/// Runs the script over `options.rungs`, calling `each` as every rung's result arrives.
/// `Ok(Err(note))`: no PyTorch side (or a failed one), and why.
pub(super) fn run(
    mode: &TorchMode,
    options: &LadderOptions,
    inputs: &Inputs<'_>,
    log: &mut dyn FnMut(&str),
    each: &mut EachRung<'_>,
) -> Result<std::result::Result<TorchRuns, String>> {
    let (script, required) = match mode {
        TorchMode::Off => return Ok(Err("PyTorch was not run (--torch off)".into())),
        TorchMode::Auto(script) => (script, false),
        TorchMode::Required(script) => (script, true),
    };
    let missing = |note: String| {
        if required { Err(Error::invalid(format!("--torch on: {note}"))) } else { Ok(Err(note)) }
    };
    if let Some(reason) = unavailable(script) {
        return missing(reason);
    }
    match run_script(script, options, inputs, log, each) {
        Ok(runs) if required => {
            let failed: Vec<String> = options
                .rungs
                .iter()
                .filter_map(|rung| match runs.iter().find(|(id, _)| id == rung.id) {
                    Some((_, Ok(_))) => None,
                    Some((_, Err(why))) => Some(format!("{}: {why}", rung.id)),
                    None => Some(format!("{}: no result", rung.id)),
                })
                .collect();
            if failed.is_empty() {
                Ok(Ok(runs))
            } else {
                missing(format!("PyTorch's side failed on {}", failed.join("; ")))
            }
        }
        Ok(runs) => Ok(Ok(runs)),
        // Our rungs have run: a PyTorch failure becomes a note in the report (unless required).
        Err(e) => missing(e.to_string()),
    }
}

/// Why PyTorch's side cannot run `script` at all (no importable torch, no such script), or
/// `None`.
pub fn unavailable(script: &Path) -> Option<String> {
    if !script.is_file() {
        return Some(format!("the PyTorch script {} is missing", script.display()));
    }
    pytorch_missing()
}

/// Why `python3` cannot import torch, or `None` when it can.
pub fn pytorch_missing() -> Option<String> {
    match Command::new("python3").args(["-c", "import torch"]).output() {
        Ok(out) if out.status.success() => None,
        Ok(out) => {
            let err = String::from_utf8_lossy(&out.stderr);
            let reason = err.lines().last().unwrap_or("").trim().to_string();
            Some(format!("PyTorch is not importable by python3 ({reason})"))
        }
        Err(e) => Some(format!("python3 could not be run ({e})")),
    }
}

/// Runs `script` and collects its rungs, handing each to `each` as it arrives; any failure
/// (spawn, output, exit status) is an error.
fn run_script(
    script: &Path,
    options: &LadderOptions,
    inputs: &Inputs<'_>,
    log: &mut dyn FnMut(&str),
    each: &mut EachRung<'_>,
) -> Result<TorchRuns> {
    let ids: Vec<&str> = options.rungs.iter().map(|r| r.id).collect();
    let a = &options.adamw;
    let mut child = Command::new("python3")
        .arg(script)
        .arg("--checkpoint")
        .arg(inputs.checkpoint)
        .arg("--data")
        .arg(inputs.shard)
        .args(["--b", &options.b.to_string(), "--t", &options.t.to_string()])
        .args(["--warmup", &options.warmup.to_string(), "--steps", &options.steps.to_string()])
        .args(["--rungs", &ids.join(","), "--device", inputs.device])
        .args(["--lr", &options.lr.to_string(), "--weight-decay", &a.weight_decay.to_string()])
        .args(["--beta1", &a.beta1.to_string(), "--beta2", &a.beta2.to_string()])
        .args(["--eps", &a.eps.to_string(), "--grad-clip", &a.grad_clip.to_string()])
        .args(["--loss-vocab", options.torch_vocab_loss.arg()])
        .args(options.op_times.then_some("--op-times"))
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| Error::io(script, e))?;
    let stdout = child.stdout.take().expect("stdout is piped");
    let mut runs = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.map_err(|e| Error::io(script, e))?;
        let parsed: Line = serde_json::from_str(&line).map_err(|e| {
            Error::bad_file(script, format!("unexpected output line {line:?}: {e}"))
        })?;
        let run = if parsed.ok {
            Ok(serde_json::from_value::<TorchRun>(parsed.run).map_err(|e| {
                Error::bad_file(script, format!("incomplete result for {}: {e}", parsed.rung))
            })?)
        } else {
            Err(parsed.error.unwrap_or_else(|| "failed without a message".into()))
        };
        match &run {
            Ok(r) => log(&format!(
                "torch {:6} {:9.0} tokens/s, {:8.1} ms/step; losses {}",
                parsed.rung,
                r.tokens_per_sec,
                r.median_ms,
                super::first_losses(&r.losses)
            )),
            Err(e) => log(&format!("torch {:6} failed: {e}", parsed.rung)),
        }
        each(&parsed.rung, &run);
        runs.push((parsed.rung, run));
    }
    let status = child.wait().map_err(|e| Error::io(script, e))?;
    if !status.success() {
        return Err(Error::invalid(format!("{} exited with {status}", script.display())));
    }
    Ok(runs)
}
