//! The speed ladder's machinery on the simulator: every rung trains the tiny model, all rungs
//! compute the same losses up to their precision, the report and chart are written, and the
//! CLI checks its arguments. (The timings are meaningless here; a GPU run measures them.)

use crate::common::{Files, arg, tiny, trainer, trainer_ok};
use gpu_host::kernels::classifier::ClassifierPath;
use gpu_host::kernels::gemm::{GemmEngine, WeightGrads, WgmmaTile};
use ptx_sim::Simulator;
use std::path::Path;
use trainer::backend::ResolvedDevice;
use trainer::data::write_shard;
use trainer::ladder::{self, LadderOptions, TorchMode, TorchVocabLoss};
use trainer::model::Gpt2Config;
use trainer::optim::AdamWConfig;
use trainer::report::ReportMeta;

fn options(work_dir: std::path::PathBuf) -> LadderOptions {
    LadderOptions {
        config: Gpt2Config {
            max_seq_len: 32,
            vocab_size: 96,
            padded_vocab_size: 128,
            num_layers: 2,
            num_heads: 2,
            channels: 128,
        },
        b: 2,
        t: 16,
        warmup: 1,
        steps: 1,
        lr: 1e-3,
        adamw: AdamWConfig {
            beta1: 0.9,
            beta2: 0.95,
            eps: 1e-8,
            weight_decay: 0.1,
            decay_all: false,
            grad_clip: 1.0,
        },
        rungs: ladder::RUNGS.iter().collect(),
        seed: 3,
        data: None,
        work_dir,
        torch: TorchMode::Off,
        torch_vocab_loss: TorchVocabLoss::Real,
        gemm_engine: GemmEngine::Auto,
        wgmma_tile: WgmmaTile::Auto,
        weight_grads: WeightGrads::Auto,
        classifier: ClassifierPath::Auto,
        op_times: false,
    }
}

/// The PyTorch side the ladder runs (and the GPU bundle carries).
fn torch_script() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/ladder_torch.py")
}

/// Every rung's losses against the same ladder's fp32 rung, within the rung's tolerance.
fn assert_rungs_train_alike(ladder: &ladder::Ladder) {
    assert_eq!(ladder.rungs.len(), ladder::RUNGS.len());
    let fp32 = ladder.result("fp32").unwrap().ours.as_ref().unwrap().steps.losses.clone();
    assert_eq!(fp32.len(), 2);
    assert!((fp32[0] - (96f32).ln()).abs() < 0.1, "initial loss {} is not near ln V", fp32[0]);
    for result in &ladder.rungs {
        let run = &result.ours.as_ref().unwrap_or_else(|e| panic!("{}: {e}", result.rung.id)).steps;
        assert_eq!(run.timing.step_ms.len(), 1);
        assert!(run.timing.tokens_per_sec > 0.0);
        let tolerance = ladder::loss_tolerance(result.rung.precision);
        for (step, (&ours, &reference)) in run.losses.iter().zip(&fp32).enumerate() {
            assert!(
                (ours - reference).abs() <= tolerance,
                "{} on {} step {step}: loss {ours} vs fp32 {reference} (tolerance {tolerance})",
                result.rung.id,
                ladder.device
            );
        }
    }
    // tf32 differs from fp32 only in the matmul inputs' rounding: close, not equal.
    let tf32 = &ladder.result("tf32").unwrap().ours.as_ref().unwrap().steps.losses;
    assert!((tf32[0] - fp32[0]).abs() < 1e-3);
}

/// Every rung's losses against PyTorch's, within the rung's tolerance (fp32 within 1e-4). The
/// loss covers the real vocabulary on both sides, so the padded rungs get no padding gap.
fn assert_agrees_with_torch(ladder: &ladder::Ladder, report: &str) {
    assert_eq!(ladder.options.torch_vocab_loss, TorchVocabLoss::Real);
    for result in &ladder.rungs {
        let agreement = ladder.torch_agreement(result);
        let agreement = agreement.unwrap_or_else(|| panic!("{}: {result:?}", result.rung.id));
        assert!(
            agreement.agrees,
            "{} on {}: {agreement:?}\n{report}",
            result.rung.id, ladder.device
        );
        assert_eq!(agreement.tolerance, ladder::loss_tolerance(result.rung.precision));
    }
    // fp32 on both sides: the same arithmetic up to summation order.
    let fp32 = ladder.torch_agreement(ladder.result("fp32").unwrap()).unwrap();
    assert!(fp32.max_diff < 1e-4, "{} {fp32:?}", ladder.device);
}

/// Every rung on the simulator, of the sm_80 module and of the sm_90a one (the kernels an
/// H100 runs: the Hopper GEMMs where `Auto` picks them), and, where `python3` can import torch
/// (CI installs it), the same rungs in PyTorch on the CPU through `bench/ladder_torch.py`: an
/// independent GPT-2 whose losses ours must follow in every rung.
#[test]
fn every_rung_trains_the_same_model_on_the_simulator_and_in_pytorch() {
    let dir = tempfile::tempdir().unwrap();
    let device = ResolvedDevice::Sim(Simulator::new().expect("cargo xtask build-ptx has run"));
    let mut options = options(dir.path().join("work"));
    options.torch = TorchMode::Auto(torch_script());
    let meta = ReportMeta { date: "2026-01-01", commit: "abc", command: "trainer ladder" };
    // After each of our rungs, the ladder so far (whose report says PyTorch has not run yet);
    // then, when PyTorch runs, after each of its rungs (the report says which have its
    // figures).
    let mut partials = Vec::new();
    let mut partial = |l: &ladder::Ladder| {
        let text = ladder::markdown(l, &meta);
        let with_torch = l.rungs.iter().filter(|r| r.torch.is_some()).count();
        let note = if text.contains("PyTorch's side had not run") {
            "pending"
        } else if text.contains("PyTorch's side is incomplete: PyTorch's side was still running") {
            "running"
        } else {
            "?"
        };
        partials.push((l.rungs.len(), with_torch, note));
    };
    let ladder = ladder::run(&device, &options, &mut |_| (), &mut partial).unwrap();
    let n = ladder::RUNGS.len();
    let mut expected: Vec<(usize, usize, &str)> = (1..=n).map(|k| (k, 0, "pending")).collect();
    if ladder.torch_note.is_none() {
        expected.extend((1..=n).map(|k| (n, k, "running")));
    }
    assert_eq!(partials, expected);
    assert!(ladder.gpu.is_none());
    assert_rungs_train_alike(&ladder);

    let text = ladder::markdown(&ladder, &meta);
    assert!(text.contains("timings below are meaningless"), "{text}");
    match &ladder.torch_note {
        Some(note) => {
            eprintln!("PyTorch's side not checked: {note}");
            assert!(note.contains("PyTorch is not importable"), "{note}");
            assert!(text.contains(&format!("No PyTorch side: {note}")), "{text}");
        }
        None => {
            assert_agrees_with_torch(&ladder, &text);
            assert!(!text.contains("**no**"), "{text}");
            assert!(text.contains("(`--torch-vocab-loss real`)"), "{text}");
            // Every rung but fp32 has both sides' drift from their fp32 rung (the ratio only
            // where PyTorch's is not 0: its CPU tf32 is fp32).
            let drift = text.split("## Drift from fp32").nth(1).expect(&text);
            for rung in ladder::RUNGS.iter().filter(|r| r.id != "fp32") {
                let row = drift.lines().find(|l| l.starts_with(&format!("| {} | ", rung.id)));
                let cells: Vec<&str> = row.expect(rung.id).split('|').map(str::trim).collect();
                assert!(
                    cells[2].parse::<f32>().is_ok() && cells[3].parse::<f32>().is_ok(),
                    "{drift}"
                );
            }
        }
    }
    for rung in &ladder::RUNGS {
        assert!(text.contains(&format!("\n| {} | {} |", rung.id, rung.change)), "{}", rung.id);
    }
    let png = dir.path().join("ladder.png");
    ladder::chart(&ladder, &png).unwrap();
    assert!(std::fs::read(&png).unwrap().starts_with(b"\x89PNG"));

    // The Hopper module, against the PyTorch run above (same checkpoint, batches, optimizer).
    let hopper = ResolvedDevice::Sim(Simulator::hopper().expect("cargo xtask build-ptx has run"));
    options.torch = TorchMode::Off;
    let mut on_hopper = ladder::run(&hopper, &options, &mut |_| (), &mut |_| ()).unwrap();
    assert!(on_hopper.device.contains("sm_90a"), "{}", on_hopper.device);
    assert_rungs_train_alike(&on_hopper);
    if ladder.torch_note.is_none() {
        for (ours, theirs) in on_hopper.rungs.iter_mut().zip(&ladder.rungs) {
            ours.torch = theirs.torch.clone();
        }
        assert_agrees_with_torch(&on_hopper, "");
    }
}

/// The CLI writes the report and its chart (with `--op-times`, where each rung's step went)
/// and rejects bad arguments.
#[test]
fn cli_writes_the_report_and_rejects_bad_arguments() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("bench/ladder.md");
    let args = ["ladder", "--device", "sim-hopper", "--rungs", "vocab", "--torch", "off"];
    let stdout = trainer_ok(&[&args[..], &["--op-times", "--out", &arg(&out)]].concat());
    assert!(stdout.contains("ours  vocab"), "{stdout}");
    let report = std::fs::read_to_string(&out).unwrap();
    assert!(report.contains("| vocab |") && !report.contains("| fp32 |"), "{report}");
    assert!(report.contains("the PTX simulator of the sm_90a module"), "{report}");
    let ops = report.split("## Where the steps' time goes").nth(1).expect(&report);
    assert!(ops.contains("### vocab: ") && ops.contains("by the host clock"), "{report}");
    assert!(ops.contains("| matmul backward lm head dW | 1 |"), "{report}");
    assert!(out.with_extension("png").is_file());

    let bad = trainer(&["ladder", "--device", "sim", "--rungs", "fp32,fp64"]);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("unknown rung 'fp64'"), "{err}");
    // PyTorch's side required: a missing script is an error before our rungs run (nothing is
    // written); a script that fails after them leaves the report written after our rung.
    let partial = dir.path().join("bench/partial.md");
    let required = |script: &std::path::Path| {
        trainer(&[
            "ladder",
            "--device",
            "sim",
            "--rungs",
            "vocab",
            "--torch",
            "on",
            "--torch-script",
            &arg(script),
            "--out",
            &arg(&partial),
        ])
    };
    let bad = required(&dir.path().join("none.py"));
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("--torch on") && err.contains("none.py"));
    assert!(!partial.exists(), "the missing script is found before any rung runs");
    let failing = dir.path().join("fails.py");
    std::fs::write(&failing, "import sys\nsys.exit(3)\n").unwrap();
    let bad = required(&failing);
    let err = String::from_utf8_lossy(&bad.stderr);
    assert!(!bad.status.success() && err.contains("--torch on"), "{err}");
    if trainer::ladder::pytorch_missing().is_none() {
        let report = std::fs::read_to_string(&partial).unwrap();
        assert!(report.contains("| vocab |") && report.contains("PyTorch's side had not run"));
    }
}

/// With `--op-times`, each side profiles one more step: our ops on the CPU backend's host
/// clock, PyTorch's operators through torch.profiler (where python3 imports torch), both
/// tabled in the report.
#[test]
fn op_times_profile_both_sides() {
    let dir = tempfile::tempdir().unwrap();
    let mut options = options(dir.path().join("work"));
    options.rungs = vec![ladder::rung("fp32").unwrap()];
    options.torch = TorchMode::Auto(torch_script());
    options.op_times = true;
    let ladder = ladder::run(&ResolvedDevice::Cpu, &options, &mut |_| (), &mut |_| ()).unwrap();
    let meta = ReportMeta { date: "2026-01-01", commit: "abc", command: "trainer ladder" };
    let text = ladder::markdown(&ladder, &meta);
    let section = text.split("## Where the steps' time goes").nth(1).expect(&text);
    assert!(
        section.contains("Ours: the ops sum to") && section.contains("| AdamW | 1 |"),
        "{text}"
    );
    if let Some(note) = &ladder.torch_note {
        eprintln!("PyTorch's side not checked: {note}");
        return;
    }
    let torch = ladder.rungs[0].torch.as_ref().unwrap().as_ref().unwrap();
    let ops = torch.ops.as_ref().expect("the script profiled the step");
    assert_eq!((ops.clock.as_deref(), &ops.error), (Some("cpu"), &None), "{ops:?}");
    assert!(!ops.ops.is_empty() && ops.ops.len() <= 15, "{ops:?}");
    assert!(ops.ops.windows(2).all(|w| w[0].ms >= w[1].ms), "slowest first: {ops:?}");
    assert!(ops.total_ms >= ops.ops.iter().map(|o| o.ms).sum::<f64>() - 1e-9, "{ops:?}");
    assert!(section.contains("slowest operators:") && section.contains("| `aten::"), "{text}");
}

/// `bench/ladder_torch.py` refuses bad arguments and files with exit code 2 and a message
/// naming the problem, before any rung runs (so the GPU run's log says what was wrong).
#[test]
fn pytorch_script_names_bad_input() {
    if let Some(reason) = ladder::pytorch_missing() {
        eprintln!("PyTorch's side not checked: {reason}");
        return;
    }
    let files = Files::new(&tiny(), 5, 200, 10);
    let bytes = std::fs::read(&files.ckpt).unwrap();
    let truncated = files.path("truncated.bin");
    std::fs::write(&truncated, &bytes[..bytes.len() - 4]).unwrap();
    let not_llmc = files.path("not-llmc.bin");
    std::fs::write(&not_llmc, [&[0u8; 4][..], &bytes[4..]].concat()).unwrap();
    let out_of_vocab = files.path("out-of-vocab.bin");
    write_shard(&out_of_vocab, &[1, 2, 300, 4, 5, 6, 7, 8, 9, 10, 11]).unwrap();

    let run = |checkpoint: &Path, data: &Path, extra: &[&str]| {
        let out = std::process::Command::new("python3")
            .arg(torch_script())
            .args(["--checkpoint", &arg(checkpoint), "--data", &arg(data), "--device", "cpu"])
            .args(["--b", "1", "--warmup", "0", "--steps", "1"])
            .args(extra)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{extra:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{extra:?}: no rung may run");
        stderr
    };
    let fine = ["--t", "4", "--rungs", "fp32"];
    let cases: [(&Path, &Path, &[&str], &str); 6] = [
        (&truncated, &files.train, &fine, "truncated checkpoint"),
        (&not_llmc, &files.train, &fine, "not an llm.c checkpoint (magic 0"),
        (
            &files.ckpt,
            &out_of_vocab,
            &fine,
            "token 300 is outside the checkpoint's vocabulary of 300",
        ),
        (
            &files.ckpt,
            &files.train,
            &["--t", "65", "--rungs", "fp32"],
            "exceeds the checkpoint's maximum sequence length 64",
        ),
        (&files.ckpt, &files.train, &["--t", "4", "--rungs", "fp32,fp64"], "unknown rung 'fp64'"),
        (&files.ckpt, &files.ckpt, &fine, "not an llm.c token shard"),
    ];
    for (checkpoint, data, extra, expected) in cases {
        let stderr = run(checkpoint, data, extra);
        assert!(stderr.contains(expected), "{extra:?}: expected {expected:?} in {stderr}");
    }
}

/// `bench/tf32_rounding_torch.py`, the CPU experiment that traced the tf32 rung's drift to
/// wgmma's truncation, runs where `python3` imports torch (CI installs it): two steps of a
/// one-layer GPT-2 in each mode, every loss near ln V, the two TF32 modes' drifts from fp32
/// printed and small. Without torch it says so and passes.
#[test]
fn the_tf32_rounding_experiment_runs() {
    use std::process::Command;
    let imports = Command::new("python3").args(["-c", "import torch"]).status();
    if !imports.is_ok_and(|s| s.success()) {
        eprintln!("skipped: python3 cannot import torch");
        return;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../bench/tf32_rounding_torch.py");
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("tokens.bin");
    let tokens: Vec<u16> = (0..40u32).map(|i| ((i * 7919 + 13) % 50257) as u16).collect();
    write_shard(&data, &tokens).unwrap();
    let args = ["--b", "1", "--t", "8", "--steps", "2", "--layers", "1", "--data", &arg(&data)];
    let out = Command::new("python3").arg(&script).args(args).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8(out.stdout).unwrap();
    let lines: Vec<Vec<&str>> = stdout.lines().map(|l| l.split_whitespace().collect()).collect();
    let modes: Vec<&str> = lines.iter().map(|l| l[0]).collect();
    assert_eq!(modes, ["fp32", "trunc", "rna"], "{stdout}");
    for line in &lines {
        for loss in &line[1..3] {
            let loss: f32 = loss.parse().unwrap();
            assert!((loss - 50257f32.ln()).abs() < 1.0, "{stdout}");
        }
    }
    for line in &lines[1..] {
        assert_eq!(line[3], "drift", "{stdout}");
        for drift in &line[4..6] {
            assert!(drift.parse::<f32>().unwrap().abs() < 1e-2, "{stdout}");
        }
    }
}
