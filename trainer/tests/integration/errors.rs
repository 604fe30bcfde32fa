//! Every bad input ends with one line on stderr naming the problem and a non-zero exit.

use crate::common::{Files, arg, tiny, trainer};
use trainer::checkpoint::{ModelDtype, write_model};
use trainer::data::write_shard;
use trainer::model::{ParamKind, gpt2_init};

/// Runs `trainer train` on `files` with `extra` options; returns stderr after checking the
/// exit status and that stderr is one `error:` line.
fn train_error(files: &Files, extra: &[&str]) -> String {
    let (ckpt, train) = (arg(&files.ckpt), arg(&files.train));
    let mut args = vec![
        "train",
        "--device",
        "cpu",
        "--init",
        &ckpt,
        "--train-data",
        &train,
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--steps",
        "2",
        "--val-every",
        "0",
    ];
    args.extend(extra);
    let out = trainer(&args);
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "trainer {args:?} should fail");
    assert_eq!(stderr.lines().count(), 1, "expected one line on stderr, got:\n{stderr}");
    assert!(stderr.starts_with("error: "), "{stderr}");
    assert!(stderr.matches("(os error").count() <= 1, "repeated cause: {stderr}");
    stderr
}

fn assert_mentions(stderr: &str, parts: &[&str]) {
    for part in parts {
        assert!(stderr.contains(part), "{stderr:?} does not mention {part:?}");
    }
}

fn files() -> Files {
    Files::new(&tiny(), 1, 200, 100)
}

/// Overwrites the 4 bytes of header word `i` of `path`.
fn patch_word(path: &std::path::Path, i: usize, value: i32) {
    let mut bytes = std::fs::read(path).unwrap();
    bytes[4 * i..4 * i + 4].copy_from_slice(&value.to_le_bytes());
    std::fs::write(path, bytes).unwrap();
}

fn truncate(path: &std::path::Path, by: usize) {
    let bytes = std::fs::read(path).unwrap();
    std::fs::write(path, &bytes[..bytes.len() - by]).unwrap();
}

#[test]
fn bad_checkpoints() {
    let f = files();
    let missing = arg(&f.path("missing.bin"));
    assert_mentions(&train_error(&f, &["--init", &missing]), &["missing.bin", "No such file"]);
    patch_word(&f.ckpt, 0, 1234);
    assert_mentions(
        &train_error(&f, &[]),
        &["init.bin", "not an llm.c model checkpoint", "magic 1234"],
    );
    patch_word(&f.ckpt, 0, 20240326);
    patch_word(&f.ckpt, 1, 7);
    assert_mentions(&train_error(&f, &[]), &["unsupported checkpoint version 7"]);
    patch_word(&f.ckpt, 1, 3);
    truncate(&f.ckpt, 10);
    assert_mentions(&train_error(&f, &[]), &["truncated checkpoint"]);
    // Dimensions whose size would wrap the size check (C = 2^30, Vp = 2^31 - 1) are refused
    // from the header, before anything is allocated.
    patch_word(&f.ckpt, 6, 1 << 30);
    patch_word(&f.ckpt, 7, i32::MAX);
    assert_mentions(
        &train_error(&f, &[]),
        &["init.bin", "corrupt checkpoint header", "model too large", "wte tensor"],
    );
    let dir = arg(f.dir.path());
    assert_mentions(&train_error(&f, &["--init", &dir]), &["holds no model checkpoint"]);
    let fifo = f.path("fifo.bin");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if made.is_ok_and(|s| s.success()) {
        let fifo = arg(&fifo);
        assert_mentions(&train_error(&f, &["--init", &fifo]), &["not a regular file"]);
    }
}

/// A fresh model too large for one tensor, or a training state too large for the host, is
/// refused before its initialisation.
#[test]
fn models_too_large_are_refused_at_once() {
    let f = files();
    let train = arg(&f.train);
    // A fresh model of `shape` fails, naming `why`.
    let fresh_fails = |shape: &[&str], why: &str| {
        let mut args = vec!["train", "--device", "cpu", "--train-data", &train, "--steps", "1"];
        args.extend(shape);
        let out = trainer(&args);
        assert!(!out.status.success(), "trainer {args:?} should fail");
        assert_mentions(&String::from_utf8_lossy(&out.stderr), &[why]);
    };
    let wide = ["--n-layer", "1", "--n-head", "1", "--n-embd", "100000", "--max-seq-len", "32"];
    fresh_fails(&wide, "model too large: its wte tensor would hold 5,030,400,000");
    let bench =
        ["bench", "--device", "cpu", "--model", "d2", "--padded-vocab", "100", "--steps", "1"];
    let out = trainer(&bench);
    assert!(!out.status.success(), "a padded vocabulary below V fails, without a panic");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_mentions(&stdout, &["padded vocabulary (100) is smaller than the vocabulary"]);
    assert!(!String::from_utf8_lossy(&out.stderr).contains("panicked"));
    let huge_batch = ["--model", "d2", "--batch-size", "100000", "--seq-len", "1024"];
    fresh_fails(
        &huge_batch,
        "out of host memory allocating the training state of a 2-layer, 128-channel GPT-2",
    );
    let bench = ["bench", "--device", "cpu", "--model", "d2", "--batch-size", "100000"];
    let out = trainer(&[&bench[..], &["--seq-len", "1024", "--steps", "1"]].concat());
    assert!(!out.status.success());
    assert_mentions(
        &String::from_utf8_lossy(&out.stdout),
        &["failed: backend: out of host memory allocating the training state"],
    );
}

/// Options that cannot mean what they say are errors, not silently ignored.
#[test]
fn contradictory_options() {
    let f = files();
    let big = usize::MAX / 16;
    let big = big.to_string();
    assert_mentions(
        &train_error(&f, &["--batch-size", &big, "--seq-len", "32"]),
        &["--batch-size", "× --seq-len 32", "tokens a micro-batch may hold"],
    );
    assert_mentions(
        &train_error(&f, &["--checkpoint-every", "1"]),
        &["--checkpoint-every needs --checkpoint-dir"],
    );
    let png = arg(&f.path("m.png"));
    assert_mentions(&train_error(&f, &["--metrics-jsonl", &png]), &["m.png", "needs another one"]);
    assert_mentions(
        &train_error(&f, &["--gemm-engine", "wgmma"]),
        &["--gemm-engine", "the CPU backend has none"],
    );
    assert_mentions(
        &train_error(&f, &["--classifier", "two-reads"]),
        &["--classifier", "the CPU backend has none"],
    );
    let file = f.path("a-file");
    std::fs::write(&file, b"x").unwrap();
    assert_mentions(
        &train_error(&f, &["--checkpoint-dir", &arg(&file)]),
        &["a-file exists and is not a directory"],
    );
}

/// Flash attention the kernels cannot run is refused before the model is built, naming the
/// option: fp32 activations, or heads other than 64 channels.
#[test]
fn flash_attention_it_cannot_run() {
    let f = files();
    assert_mentions(
        &train_error(&f, &["--attention", "flash"]),
        &["flash attention runs on bf16 or fp16", "--attention naive"],
    );
    let train = arg(&f.train);
    let args = [
        "train",
        "--device",
        "sim",
        "--precision",
        "bf16",
        "--attention",
        "flash",
        "--n-layer",
        "1",
        "--n-head",
        "4",
        "--n-embd",
        "64",
        "--max-seq-len",
        "32",
        "--batch-size",
        "1",
        "--seq-len",
        "16",
        "--steps",
        "1",
        "--val-every",
        "0",
        "--train-data",
        &train,
    ];
    let out = trainer(&args);
    assert!(!out.status.success());
    assert_mentions(
        &String::from_utf8_lossy(&out.stderr),
        &["heads of 64 channels; this model's are 16 (--n-embd 64 / --n-head 4)"],
    );
}

/// A run that does not resume refuses a checkpoint directory holding another run's
/// checkpoints (`sample` and `--resume` would take the higher-step ones) unless told to
/// delete them.
#[test]
fn runs_do_not_mix_their_checkpoints() {
    let f = files();
    let (ckpt, train, dir) = (arg(&f.ckpt), arg(&f.train), arg(&f.path("run")));
    let run = |steps: &str, extra: &[&str]| {
        let start = if extra.contains(&"--resume") { [].as_slice() } else { &["--init", &ckpt] };
        let mut args = vec!["train", "--device", "cpu"];
        args.extend(start);
        args.extend([
            "--train-data",
            &train,
            "--batch-size",
            "2",
            "--seq-len",
            "16",
            "--val-every",
            "0",
            "--checkpoint-dir",
            &dir,
            "--steps",
            steps,
        ]);
        args.extend(extra);
        trainer(&args)
    };
    assert!(run("3", &[]).status.success());
    let again = run("2", &[]);
    assert!(!again.status.success());
    assert_mentions(
        &String::from_utf8_lossy(&again.stderr),
        &["already holds another run's checkpoints", "--resume", "--overwrite"],
    );
    assert!(run("2", &["--overwrite"]).status.success());
    let mut left: Vec<String> = std::fs::read_dir(f.path("run"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["model_00000002.bin", "state_00000002.bin"]);
    assert!(run("4", &["--resume", &dir]).status.success(), "resuming is not a fresh run");
}

#[test]
fn bad_shards() {
    let f = files();
    let nothing = arg(&f.path("nothing_*.bin"));
    assert_mentions(
        &train_error(&f, &["--train-data", &nothing]),
        &["--train-data", "matches no files"],
    );
    patch_word(&f.train, 0, 20240326);
    assert_mentions(&train_error(&f, &[]), &["train_000000.bin", "not an llm.c token shard"]);
    patch_word(&f.train, 0, 20240520);
    patch_word(&f.train, 1, 2);
    assert_mentions(&train_error(&f, &[]), &["unsupported token shard version 2"]);
    patch_word(&f.train, 1, 1);
    truncate(&f.train, 3);
    assert_mentions(&train_error(&f, &[]), &["truncated token shard", "200 tokens"]);
    let val = arg(&f.path("val_*.bin"));
    patch_word(&f.val, 0, 5);
    let stderr = train_error(&f, &["--train-data", &val, "--val-data", &val, "--val-every", "1"]);
    assert_mentions(&stderr, &["val_000000.bin", "not an llm.c token shard"]);
}

#[test]
fn bad_data_for_the_model() {
    let f = files();
    let mut tokens = vec![1u16; 100];
    tokens[40] = 300; // == V of the tiny model
    write_shard(&f.train, &tokens).unwrap();
    assert_mentions(&train_error(&f, &[]), &["token id 300 at position 40", "vocabulary size 300"]);
    write_shard(&f.train, &[1u16; 32]).unwrap();
    assert_mentions(
        &train_error(&f, &[]),
        &["data shorter than one batch", "32 tokens", "needs 33"],
    );
    assert_mentions(
        &train_error(&f, &["--seq-len", "65"]),
        &["--seq-len 65", "maximum sequence length 64"],
    );
    assert_mentions(
        &train_error(&f, &["--total-batch-tokens", "40"]),
        &["--total-batch-tokens 40", "multiple"],
    );
}

#[test]
fn unwritable_outputs() {
    let f = files();
    let blocker = f.path("a-file");
    std::fs::write(&blocker, b"x").unwrap();
    let under_file = arg(&blocker.join("ckpts"));
    assert_mentions(&train_error(&f, &["--checkpoint-dir", &under_file]), &["a-file/ckpts"]);
    let metrics = arg(&blocker.join("m.jsonl"));
    assert_mentions(&train_error(&f, &["--metrics-jsonl", &metrics]), &["a-file"]);
}

#[test]
fn unavailable_device() {
    let f = files();
    assert_mentions(&train_error(&f, &["--device", "cuda"]), &["--device cuda", "--device cpu"]);
}

#[test]
fn non_finite_loss_stops_without_touching_the_checkpoints() {
    let f = files();
    let config = tiny();
    let mut params = gpt2_init(&config, 1);
    params[ParamKind::Lnfw][3] = f32::NAN;
    write_model(&f.ckpt, &config, &params, ModelDtype::F32).unwrap();
    let dir = f.path("ckpts");
    let stderr = train_error(&f, &["--checkpoint-dir", &arg(&dir), "--checkpoint-every", "1"]);
    assert_mentions(&stderr, &["training stopped at step 0", "NaN", "none written"]);
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);

    // Two good steps, then a resume with a learning rate that explodes the weights: the
    // checkpoint written after the exploding update is removed and the one before it named.
    write_model(&f.ckpt, &config, &gpt2_init(&config, 1), ModelDtype::F32).unwrap();
    let every_step =
        ["--checkpoint-dir", &arg(&dir), "--checkpoint-every", "1", "--grad-clip", "0"];
    let (ckpt, train) = (arg(&f.ckpt), arg(&f.train));
    let common = [
        "train",
        "--train-data",
        &train,
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--val-every",
        "0",
    ];
    crate::common::trainer_ok(
        &[&common[..], &every_step, &["--init", &ckpt, "--steps", "2"]].concat(),
    );
    let out = trainer(
        &[&common[..], &every_step, &["--resume", &arg(&dir), "--steps", "6", "--lr", "1e35"]]
            .concat(),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert_mentions(
        &stderr,
        &["training stopped at step 3", "removed", "model_00000003.bin", "Last good checkpoint"],
    );
    let last = stderr.split("Last good checkpoint: ").nth(1).unwrap().trim();
    assert!(last.ends_with("model_00000002.bin"), "{stderr}");
    trainer::checkpoint::read_model(std::path::Path::new(last)).unwrap();
    assert_eq!(trainer::checkpoint::latest_resumable(&dir).unwrap(), 2);
}
