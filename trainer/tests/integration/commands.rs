//! The other commands: help, shard, sample, convert, bench.

use crate::common::{Files, arg, tiny, trainer, trainer_ok};
use trainer::checkpoint::{ModelDtype, read_model, write_model};
use trainer::data::Shard;
use trainer::model::{ParamKind, gpt2_init};

#[test]
fn train_help_lists_every_documented_flag() {
    let help = trainer_ok(&["train", "--help"]);
    for flag in [
        "--device",
        "--init",
        "--train-data",
        "--val-data",
        "--batch-size",
        "--seq-len",
        "--total-batch-tokens",
        "--steps",
        "--lr",
        "--min-lr-frac",
        "--lr-schedule",
        "--warmup-steps",
        "--beta1",
        "--beta2",
        "--eps",
        "--weight-decay",
        "--grad-clip",
        "--no-shuffle",
        "--seed",
        "--val-every",
        "--val-batches",
        "--checkpoint-dir",
        "--checkpoint-every",
        "--resume",
        "--metrics-jsonl",
        "--model",
        "--n-layer",
        "--n-head",
        "--n-embd",
        "--max-seq-len",
    ] {
        assert!(help.contains(flag), "`trainer train --help` does not mention {flag}");
    }
    for dims in ["d2", "d4", "d6", "d12", "L12 NH12 C768"] {
        assert!(help.contains(dims), "help does not document {dims}");
    }
}

#[test]
fn shard_command_writes_eot_separated_shards() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.txt"), dir.path().join("b.txt"));
    std::fs::write(&a, "Hello world").unwrap();
    std::fs::write(&b, " Hello").unwrap();
    let out = dir.path().join("shards");
    trainer_ok(&["shard", "--out-dir", &arg(&out), "--val-fraction", "0.4", &arg(&a), &arg(&b)]);
    let read = |name: &str| Shard::open(&out.join(name)).unwrap().read_all().unwrap();
    assert_eq!(read("train_000000.bin"), [50256, 15496, 995]);
    assert_eq!(read("val_000000.bin"), [50256, 18435]);

    // Shards an earlier sharding left in the directory are replaced, not mixed in.
    let stale = out.join("train_000007.bin");
    std::fs::copy(out.join("train_000000.bin"), &stale).unwrap();
    trainer_ok(&["shard", "--out-dir", &arg(&out), &arg(&a)]);
    assert!(!stale.exists());
    assert_eq!(read("train_000000.bin"), [50256, 15496, 995]);
}

/// `trainer shard` refuses what is not UTF-8 text in a regular file, and inputs without text.
#[test]
fn shard_command_refuses_what_is_not_text() {
    let dir = tempfile::tempdir().unwrap();
    let out = arg(&dir.path().join("shards"));
    let fails = |input: &std::path::Path, wanted: &str| {
        let result = trainer(&["shard", "--out-dir", &out, &arg(input)]);
        let stderr = String::from_utf8_lossy(&result.stderr).into_owned();
        assert!(!result.status.success() && stderr.contains(wanted), "{stderr}");
    };
    let binary = dir.path().join("bytes.txt");
    std::fs::write(&binary, b"ok\xff\xfe").unwrap();
    fails(&binary, "bytes.txt: not UTF-8 text (byte 2");
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, b"").unwrap();
    fails(&empty, "the inputs hold no text");
    fails(std::path::Path::new("/dev/null"), "/dev/null: not a regular file");
}

/// A checkpoint whose parameters are not finite makes `sample` fail, not print garbage.
#[test]
fn sample_refuses_non_finite_logits() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nan.bin");
    let mut params = gpt2_init(&tiny(), 1);
    params.0[ParamKind::Wte.index()][0] = f32::NAN;
    write_model(&path, &tiny(), &params, ModelDtype::F32).unwrap();
    let ckpt = arg(&path);
    let out = trainer(&["sample", "--device", "cpu", "--checkpoint", &ckpt, "--prompt", "x"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{stderr}");
    assert!(stderr.contains("parameters are not finite"), "{stderr}");
}

#[test]
fn sample_is_seeded_and_decodes_text() {
    let files = Files::new(&tiny(), 3, 200, 100);
    let ckpt = arg(&files.ckpt);
    let sample = |seed: &str| {
        trainer_ok(&[
            "sample",
            "--device",
            "cpu",
            "--checkpoint",
            &ckpt,
            "--prompt",
            "x",
            "--max-tokens",
            "12",
            "--seed",
            seed,
        ])
    };
    let first = sample("1");
    assert_eq!(first, sample("1"), "same seed, same text");
    assert!(first.starts_with('x'));
    assert_ne!(first, sample("2"), "another seed, another text");
    assert!(first.trim_end().chars().count() > 1, "nothing generated: {first:?}");
    let greedy = ["sample", "--checkpoint", &ckpt, "--prompt", "x", "--temperature", "0"];
    assert_eq!(trainer_ok(&greedy), trainer_ok(&greedy));
}

#[test]
fn convert_writes_bf16_checkpoints_that_load_and_sample() {
    let files = Files::new(&tiny(), 3, 200, 100);
    let bf16 = files.path("bf16.bin");
    let out = trainer_ok(&["convert", &arg(&files.ckpt), &arg(&bf16)]);
    assert!(out.contains("llm.c version 5"), "{out}");
    let (f32_ckpt, bf16_ckpt) = (read_model(&files.ckpt).unwrap(), read_model(&bf16).unwrap());
    assert_eq!((f32_ckpt.dtype, bf16_ckpt.dtype), (ModelDtype::F32, ModelDtype::Bf16));
    assert_eq!(bf16_ckpt.config, f32_ckpt.config);
    for (exact, rounded) in f32_ckpt.params.0.iter().zip(&bf16_ckpt.params.0) {
        let expected: Vec<f32> = exact.iter().map(|&x| half::bf16::from_f32(x).to_f32()).collect();
        assert_eq!(rounded, &expected);
    }
    let back = files.path("back.bin");
    trainer_ok(&["convert", "--dtype", "f32", &arg(&bf16), &arg(&back)]);
    assert_eq!(read_model(&back).unwrap().params, bf16_ckpt.params, "bf16 -> f32 is exact");
    let text =
        trainer_ok(&["sample", "--device", "cpu", "--checkpoint", &arg(&bf16), "--prompt", "x"]);
    assert!(text.starts_with('x'), "{text}");
    let out = trainer(&["convert", &arg(&files.path("missing.bin")), &arg(&back)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("missing.bin"), "{err}");
}

#[test]
fn sample_rejects_bad_input() {
    let out = trainer(&["sample", "--checkpoint", "/nonexistent/model.bin"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("/nonexistent/model.bin"), "{err}");
    let files = Files::new(&tiny(), 3, 200, 100);
    let out = trainer(&["sample", "--checkpoint", &arg(&files.ckpt), "--temperature=-1"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--temperature"), "{err}");
    let out = trainer(&["sample", "--checkpoint", &arg(&files.ckpt)]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("pass a prompt"), "{err}");
}

#[test]
fn fresh_model_dimensions_come_from_model_and_overrides() {
    let files = Files::new(&tiny(), 3, 400, 100);
    let out = trainer_ok(&[
        "train",
        "--device",
        "cpu",
        "--model",
        "d2",
        "--n-layer",
        "1",
        "--n-embd",
        "64",
        "--max-seq-len",
        "32",
        "--train-data",
        &arg(&files.train),
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--steps",
        "1",
        "--val-every",
        "0",
    ]);
    assert!(out.contains("L1 NH2 C64 maxT32 V50257 (Vp 50304)"), "{out}");
    assert!(out.contains("fresh GPT-2 initialisation (seed 1337)"), "{out}");
}

/// `trainer bench --precision fp32,bf16 --report` on the CPU: fp32 is timed, bf16 (which the
/// CPU backend cannot run) becomes a failed row without stopping the run, the report holds
/// both, and the command fails at the end naming how many failed.
#[test]
fn bench_times_each_precision_and_reports_failures() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("bench/trainer.md");
    let args = [
        "bench",
        "--device",
        "cpu",
        "--model",
        "d2",
        "--batch-size",
        "1",
        "--seq-len",
        "8",
        "--warmup",
        "0",
        "--steps",
        "1",
        "--precision",
        "fp32,bf16",
        "--report",
        &arg(&report),
    ];
    let out = trainer(&args);
    let (stdout, stderr) =
        (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(!out.status.success() && stderr.contains("1 of 2 configurations failed"), "{stderr}");
    assert!(stdout.contains("headline: B=1 T=8: d2 fp32: "), "{stdout}");
    assert!(stdout.contains("d2 bf16: failed: the CPU backend computes in fp32 only"), "{stdout}");
    let md = std::fs::read_to_string(&report).unwrap();
    assert!(md.contains("Not a GPU: the timings below are meaningless"), "{md}");
    assert!(md.contains("| d2 | fp32 | naive | yes | 1 | 8 | 0 + 1 |"), "{md}");
    assert!(md.contains("| d2 | bf16 | flash | yes | 1 | 8 | 0 + 1 | – |"), "{md}");
}

/// A list of precisions is for `trainer bench` only.
#[test]
fn train_takes_one_precision() {
    let files = Files::new(&tiny(), 3, 400, 100);
    let (train, ckpt) = (arg(&files.train), arg(&files.ckpt));
    let args = ["train", "--device", "cpu", "--init", &ckpt, "--train-data", &train];
    let out = trainer(&[&args[..], &["--precision", "fp32,bf16"]].concat());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("--precision takes one value here"), "{err}");
}

/// Hyperparameters outside their domain are refused before anything runs, naming the option.
#[test]
fn train_rejects_hyperparameters_out_of_range() {
    let cases = [
        ("--lr=-1", "--lr -1 must be finite and not negative"),
        ("--lr=nan", "--lr NaN must be finite and not negative"),
        ("--min-lr-frac=1.5", "--min-lr-frac 1.5 must be in [0, 1]"),
        ("--beta1=1", "--beta1 1 must be in [0, 1)"),
        ("--beta2=-0.1", "--beta2 -0.1 must be in [0, 1)"),
        ("--eps=0", "--eps 0 must be positive and finite"),
        ("--weight-decay=inf", "--weight-decay inf must be finite and not negative"),
        ("--grad-clip=-1", "--grad-clip -1 must be finite and not negative"),
    ];
    let files = Files::new(&tiny(), 3, 400, 100);
    let (train, ckpt) = (arg(&files.train), arg(&files.ckpt));
    for (flag, message) in cases {
        let args = ["train", "--device", "cpu", "--init", &ckpt, "--train-data", &train, flag];
        let out = trainer(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(message), "{flag}: {err}");
    }
}

/// `trainer bench` checks its shape (and that a memory profile has a simulator to take it)
/// before timing anything.
#[test]
fn bench_rejects_empty_or_too_long_runs() {
    let base = ["bench", "--device", "cpu", "--model", "d2", "--batch-size", "1"];
    for (extra, message) in [
        (["--steps", "0"], "--batch-size, --seq-len and --steps must be positive"),
        (["--seq-len", "0"], "--batch-size, --seq-len and --steps must be positive"),
        (["--seq-len", "2048"], "--seq-len 2048 exceeds d2's maximum sequence length 1024"),
        (["--memory-profile", "--steps=1"], "--memory-profile needs --device sim or sim-hopper"),
        (["--report", "/"], "--report /: a directory; name the report's file"),
    ] {
        let args: Vec<&str> = base.iter().chain(&extra).copied().collect();
        let out = trainer(&args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success() && err.contains(message), "{extra:?}: {err}");
    }
}

/// Off a GPU, `trainer bench` defaults to small shapes: B=4, T=64, 2 warm-up and 7 timed steps.
#[test]
fn bench_defaults_off_a_gpu_are_small() {
    let stdout = trainer_ok(&["bench", "--device", "cpu", "--model", "d2"]);
    assert!(stdout.contains("B=4 T=64") && stdout.contains("median of 7 steps after 2 warm-up"));
    assert!(stdout.contains("headline: B=4 T=64: d2 fp32: "), "{stdout}");
}
