//! Checkpoint + optimizer state reproduce the uninterrupted run bit for bit.

use crate::common::{Files, arg, metrics, tiny, trainer_ok};

fn run(files: &Files, extra: &[&str]) -> String {
    let (train, val) = (arg(&files.train), arg(&files.val));
    let mut args = vec![
        "train",
        "--device",
        "cpu",
        "--train-data",
        &train,
        "--val-data",
        &val,
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--total-batch-tokens",
        "64",
        "--steps",
        "8",
        "--lr",
        "3e-3",
        "--warmup-steps",
        "2",
        "--lr-schedule",
        "cosine",
        "--min-lr-frac",
        "0.1",
        "--weight-decay",
        "0.1",
        "--grad-clip",
        "0.5",
        "--seed",
        "5",
        "--val-every",
        "3",
        "--val-batches",
        "2",
    ];
    args.extend(extra);
    trainer_ok(&args)
}

/// The shard holds 5 windows of B·T = 32 tokens and a step takes two: the step-4 checkpoint
/// falls inside the second epoch, whose shuffled window order differs from the first's, and
/// the run goes on through two more epochs.
#[test]
fn resumed_run_reproduces_the_uninterrupted_run_bit_for_bit() {
    let files = Files::new(&tiny(), 11, 170, 500);
    let full_dir = files.path("full");
    let (ckpt, full, full_metrics) =
        (arg(&files.ckpt), arg(&full_dir), arg(&full_dir.join("metrics.jsonl")));
    run(
        &files,
        &[
            "--init",
            &ckpt,
            "--checkpoint-dir",
            &full,
            "--checkpoint-every",
            "4",
            "--metrics-jsonl",
            &full_metrics,
        ],
    );

    // Resume from a copy of the step-4 checkpoint and the metrics of the first half.
    let resumed_dir = files.path("resumed");
    std::fs::create_dir(&resumed_dir).unwrap();
    for name in ["model_00000004.bin", "state_00000004.bin", "metrics.jsonl"] {
        std::fs::copy(full_dir.join(name), resumed_dir.join(name)).unwrap();
    }
    let (resumed, resumed_metrics) = (arg(&resumed_dir), arg(&resumed_dir.join("metrics.jsonl")));
    let out = run(&files, &["--resume", &resumed, "--metrics-jsonl", &resumed_metrics]);
    assert!(out.contains("resumed from") && out.contains("at step 4"), "{out}");

    let strip_timing = |records: Vec<serde_json::Value>| -> Vec<serde_json::Value> {
        records
            .into_iter()
            .map(|mut r| {
                let obj = r.as_object_mut().unwrap();
                obj.remove("step_ms");
                obj.remove("tokens_per_sec");
                r
            })
            .collect()
    };
    let full_records = strip_timing(metrics(&full_dir.join("metrics.jsonl")));
    let resumed_records = strip_timing(metrics(&resumed_dir.join("metrics.jsonl")));
    assert_eq!(full_records.len(), 8);
    assert_eq!(
        resumed_records, full_records,
        "losses, norms, LRs and val losses must be identical"
    );
    for name in ["model_00000008.bin", "state_00000008.bin"] {
        let a = std::fs::read(full_dir.join(name)).unwrap();
        let b = std::fs::read(resumed_dir.join(name)).unwrap();
        assert!(a == b, "{name} differs between the full and the resumed run");
    }
}

#[test]
fn resume_rejects_a_different_batch_shape_or_finished_run() {
    let files = Files::new(&tiny(), 12, 3000, 500);
    let dir = files.path("run");
    let (ckpt, dir_arg) = (arg(&files.ckpt), arg(&dir));
    run(&files, &["--init", &ckpt, "--checkpoint-dir", &dir_arg]);
    let out = crate::common::trainer(&[
        "train",
        "--resume",
        &dir_arg,
        "--train-data",
        &arg(&files.train),
        "--batch-size",
        "4",
        "--seq-len",
        "16",
        "--total-batch-tokens",
        "64",
        "--steps",
        "10",
        "--seed",
        "5",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && err.contains("--batch-size is 4 but the checkpoint was trained with 2"),
        "{err}"
    );
    let out = crate::common::trainer(&[
        "train",
        "--resume",
        &dir_arg,
        "--train-data",
        &arg(&files.train),
        "--batch-size",
        "2",
        "--seq-len",
        "16",
        "--total-batch-tokens",
        "64",
        "--steps",
        "8",
        "--seed",
        "5",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("nothing to do"), "{err}");
}
