//! The fused classifier against `cpu_ref::fused_classifier` (run on the widened logits):
//! losses and the in-place gradient, f32/bf16/f16 logits, GPT-2's odd V = 50257 in rows padded
//! to 50304 and unpadded (rows not 16-byte aligned), rows stored further apart than their width
//! (the gaps untouched), small vocabularies, unaligned views, the evaluation mode that leaves the
//! logits untouched, the gradient rounded to TF32, and out-of-range targets. The kernel that
//! stages the row in shared memory gives the bits of the one that reads it twice.

use cpu_ref::precision::{Element, round_tf32};
use gpu_host::kernels::classifier::{
    Classifier, ClassifierPath, LogitsGradient, Vocab, fused_classifier, fused_classifier_on,
};
use gpu_host::kernels::elementwise::FloatElement;
use gpu_host::{Device, DeviceBuffer, GpuError};
use half::{bf16, f16};
use integration_tests::{
    TestRng, Tolerance, assert_bits_eq, assert_close, assert_close_in, kernel_tests, poisoned,
    small_sizes, upload_at,
};
use rayon::prelude::*;

/// Losses (≈ ln V): the reference sums in f64, the kernel in f32 per thread, then merges.
const LOSS: Tolerance = Tolerance { abs: 1e-5, rel: 2e-6 };
/// Gradients `dloss·p`, relative: `ex2.approx` (2 ulp) and the f32 normaliser; the target's
/// `dloss·(p − 1)` cancels when `p ≈ 1`, hence an absolute part of a few f32 ulps of `dloss`.
fn grad_tolerance(dloss: f32) -> Tolerance {
    Tolerance { abs: 5e-7 * dloss as f64, rel: 1e-5 }
}

/// (rows, v, vp, ld): GPT-2's vocabulary padded and unpadded, densely stored and (unpadded) in
/// rows the trainer pads to 16 bytes, a vocabulary that fits in one vector, odd widths (rows
/// start at every alignment), rows narrower than their scalar head to the next 16-byte
/// boundary (vp = 5: up to 7 16-bit elements), strided rows of small vocabularies, and on a GPU
/// B·T = 16·1024 rows.
fn shapes(dev: &impl Device) -> Vec<(usize, usize, usize, usize)> {
    let mut shapes = vec![
        (3, 50257, 50304, 50304),
        (2, 50257, 50257, 50257),
        (2, 50257, 50257, 50264),
        (7, 5, 8, 8),
        (9, 19, 24, 24),
        (11, 13, 21, 21),
        (11, 13, 21, 24),
        (5, 3, 5, 5),
        (5, 3, 5, 9),
    ];
    if !small_sizes(dev) {
        shapes.push((16 * 1024, 50257, 50304, 50304));
    }
    shapes
}

/// Logits in [-8, 8) rounded to `T` (the padded columns get values too: they must not count).
fn logits<T: Element>(rng: &mut TestRng, n: usize) -> Vec<T> {
    rng.uniform(n, -8.0, 8.0).into_par_iter().map(T::from_f32).collect()
}

fn targets(rng: &mut TestRng, rows: usize, v: usize) -> Vec<u32> {
    rng.uniform(rows, 0.0, v as f32).into_iter().map(|t| (t as u32).min(v as u32 - 1)).collect()
}

/// The first `vp` columns of each of `rows` rows stored `ld` apart, and the columns `vp..ld`
/// (the gaps between rows).
fn split_rows<T: Element>(x: &[T], rows: usize, vp: usize, ld: usize) -> (Vec<T>, Vec<T>) {
    let row = |r: usize| &x[r * ld..(r + 1) * ld];
    let dense = (0..rows).flat_map(|r| row(r)[..vp].iter().copied()).collect();
    let gaps = (0..rows).flat_map(|r| row(r)[vp..].iter().copied()).collect();
    (dense, gaps)
}

/// Runs the classifier on `path` with `gradient` on `x` (`rows × ld`) uploaded `offset`
/// elements into a fresh buffer, the losses into a poisoned one; returns the logits' window and
/// the losses.
fn run_classifier<T: FloatElement + Element>(
    dev: &impl Device,
    (x, offset): (&[T], usize),
    (vocab, path): (Vocab, ClassifierPath),
    targets: &[u32],
    gradient: LogitsGradient,
) -> (Vec<T>, Vec<f32>) {
    let window = offset..offset + x.len();
    let mut buf = upload_at(dev, x, offset).unwrap();
    let dtgt = dev.upload(targets).unwrap();
    let mut losses = poisoned::<_, f32>(dev, targets.len()).unwrap();
    let args = Classifier {
        logits: buf.view_mut().slice_mut(window.clone()).unwrap(),
        losses: losses.view_mut(),
        targets: dtgt.view(),
    };
    fused_classifier_on(dev, path, vocab, gradient, args).unwrap();
    let logits = dev.download(buf.view().slice(window).unwrap()).unwrap();
    (logits, dev.download(losses.view()).unwrap())
}

/// Every shape through the kernel that reads the row twice, against the reference, then
/// through the staged one, the same bits; evaluation on both leaves the logits untouched.
/// Logits one element off their alignment on every shape but the B·T-row one (its rows are the
/// padded ones of the first shape, whose unaligned case runs here too).
fn check_classifier<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (rows, v, vp, ld) in shapes(dev) {
        let offsets: &[usize] = if rows > 1024 { &[0] } else { &[0, 1] };
        for &offset in offsets {
            let x = logits::<T>(&mut rng, rows * ld);
            let tgt = targets(&mut rng, rows, v);
            let dloss = 1.0 / rows as f32;
            let (dense, want_gaps) = split_rows(&x, rows, vp, ld);
            let mut want_grad: Vec<f32> = dense.par_iter().map(|v| v.to_f32()).collect();
            let mut want_loss = vec![0.0; rows];
            cpu_ref::fused_classifier(&mut want_grad, &mut want_loss, &tgt, dloss, rows, v, vp);

            let vocab = Vocab { v, vp, ld };
            let gradient = LogitsGradient::Write { dloss };
            let run =
                |path, gradient| run_classifier(dev, (&x, offset), (vocab, path), &tgt, gradient);
            let (got, got_loss) = run(ClassifierPath::TwoReads, gradient);
            let what = format!(
                "fused_classifier_{} rows={rows} v={v} vp={vp} ld={ld} offset={offset}",
                <T as Element>::NAME
            );
            assert_close(&format!("{what} losses"), rng.seed(), &got_loss, &want_loss, LOSS);
            let (got_grad, got_gaps) = split_rows(&got, rows, vp, ld);
            assert_close_in(
                &format!("{what} dlogits"),
                rng.seed(),
                &got_grad,
                &want_grad,
                grad_tolerance(dloss),
            );
            assert_bits_eq(&format!("{what} row gaps"), rng.seed(), &got_gaps, &want_gaps);

            let (staged, staged_loss) = run(ClassifierPath::Staged, gradient);
            assert_bits_eq(&format!("{what} staged losses"), rng.seed(), &staged_loss, &got_loss);
            assert_bits_eq(&format!("{what} staged logits"), rng.seed(), &staged, &got);

            // Evaluation on the same layout: the same losses, bit for bit, logits untouched.
            for path in [ClassifierPath::Auto, ClassifierPath::Staged] {
                let (eval_logits, eval_losses) = run(path, LogitsGradient::Skip);
                let what = format!("{what} eval on {path:?}");
                assert_bits_eq(&format!("{what} losses"), rng.seed(), &eval_losses, &got_loss);
                assert_bits_eq(&format!("{what} logits"), rng.seed(), &eval_logits, &x);
            }
        }
    }
}

/// A target outside the vocabulary gives a NaN loss for its row only, and no out-of-row access
/// (the simulator checks every access): the in-range row's loss and gradient match the
/// reference, and the other rows' gradients are the softmax (no target column), zero in the
/// padding.
fn check_out_of_range_target(dev: &impl Device) {
    let mut rng = TestRng::new();
    let (rows, v, vp) = (3, 19, 24);
    let x = logits::<f32>(&mut rng, rows * vp);
    let mut buf = dev.upload(&x).unwrap();
    let tgt = dev.upload(&[1u32, 19, 1_000_000]).unwrap();
    let mut losses = poisoned::<_, f32>(dev, rows).unwrap();
    let args =
        Classifier { logits: buf.view_mut(), losses: losses.view_mut(), targets: tgt.view() };
    fused_classifier(dev, Vocab::dense(v, vp), LogitsGradient::Write { dloss: 1.0 }, args).unwrap();
    let got = dev.download(losses.view()).unwrap();
    assert!(got[1].is_nan() && got[2].is_nan(), "losses {got:?}");
    let grad = dev.download(buf.view()).unwrap();
    let (mut want_grad, mut want_loss) = (x[..vp].to_vec(), [0.0]);
    cpu_ref::fused_classifier(&mut want_grad, &mut want_loss, &[1], 1.0, 1, v, vp);
    let seed = rng.seed();
    assert_close("in-range row's loss", seed, &got[..1], &want_loss, LOSS);
    assert_close("in-range row's dlogits", seed, &grad[..vp], &want_grad, grad_tolerance(1.0));
    for row in 1..rows {
        let g = &grad[row * vp..(row + 1) * vp];
        let sum: f32 = g[..v].iter().sum();
        let softmax = g[..v].iter().all(|p| p.is_finite() && *p > 0.0) && (sum - 1.0).abs() < 1e-5;
        assert!(softmax && g[v..].iter().all(|&p| p == 0.0), "row {row}'s gradient {g:?}");
    }
}

/// `WriteTf32` stores exactly `Write`'s gradient rounded to TF32 (`cpu_ref::precision::round_tf32`,
/// ties away from zero), with the same losses, the row gaps untouched, on every shape (aligned
/// and not); bf16 logits are refused.
fn check_tf32_gradient(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (rows, v, vp, ld) in shapes(dev) {
        for offset in [0, 1] {
            let what = format!("TF32 gradient rows={rows} v={v} vp={vp} ld={ld} offset={offset}");
            let x = logits::<f32>(&mut rng, rows * ld);
            let tgt = targets(&mut rng, rows, v);
            let vocab = (Vocab { v, vp, ld }, ClassifierPath::Auto);
            let run = |gradient| run_classifier(dev, (&x, offset), vocab, &tgt, gradient);
            let dloss = 1.0 / rows as f32;
            let (plain, plain_losses) = run(LogitsGradient::Write { dloss });
            let (rounded, losses) = run(LogitsGradient::WriteTf32 { dloss });
            assert_bits_eq(&format!("{what} losses"), rng.seed(), &losses, &plain_losses);
            let (plain_grad, _) = split_rows(&plain, rows, vp, ld);
            let want: Vec<f32> = plain_grad.iter().map(|&g| round_tf32(g)).collect();
            let (got, got_gaps) = split_rows(&rounded, rows, vp, ld);
            assert_bits_eq(&format!("{what} dlogits"), rng.seed(), &got, &want);
            let (_, gaps) = split_rows(&x, rows, vp, ld);
            assert_bits_eq(&format!("{what} row gaps"), rng.seed(), &got_gaps, &gaps);
        }
    }
    let mut x = dev.upload(&[bf16::from_f32(0.5); 8]).unwrap();
    let mut losses = dev.alloc::<f32>(1).unwrap();
    let tgt = dev.upload(&[0u32]).unwrap();
    let args = Classifier { logits: x.view_mut(), losses: losses.view_mut(), targets: tgt.view() };
    let gradient = LogitsGradient::WriteTf32 { dloss: 1.0 };
    let err = fused_classifier(dev, Vocab::dense(5, 8), gradient, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "gradient", .. }), "{err}");
}

/// Bad shapes and factors are rejected before launch, naming the argument.
fn check_argument_errors(dev: &impl Device) {
    let mut x = dev.upload(&[0.5f32; 24]).unwrap();
    let mut losses = dev.alloc::<f32>(3).unwrap();
    let tgt = dev.upload(&[0u32; 3]).unwrap();
    let cases: [(Vocab, LogitsGradient, &str); 6] = [
        (Vocab::dense(9, 8), LogitsGradient::Skip, "vocab"),
        (Vocab::dense(0, 8), LogitsGradient::Skip, "vocab"),
        (Vocab { v: 5, vp: 8, ld: 7 }, LogitsGradient::Skip, "vocab"),
        (Vocab::dense(5, 7), LogitsGradient::Skip, "logits"),
        (Vocab { v: 5, vp: 6, ld: 7 }, LogitsGradient::Skip, "logits"),
        (Vocab::dense(5, 8), LogitsGradient::Write { dloss: f32::NAN }, "dloss"),
    ];
    for (vocab, gradient, arg) in cases {
        let args =
            Classifier { logits: x.view_mut(), losses: losses.view_mut(), targets: tgt.view() };
        let err = fused_classifier(dev, vocab, gradient, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "fused_classifier", arg: a, .. } if *a == arg),
            "{vocab:?}: {err}"
        );
    }
    let args = Classifier { logits: x.view_mut(), losses: losses.view_mut(), targets: tgt.view() };
    let err = fused_classifier(dev, Vocab::dense(5, 6), LogitsGradient::Skip, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "losses", .. }), "{err}");

    // A row too wide to stage: `Staged` is refused, `Auto` reads it twice.
    let vp = (dev.max_shared_per_block() / 4 + 8) as usize;
    let mut wide = dev.upload(&vec![0.5f32; vp]).unwrap();
    let mut loss = poisoned::<_, f32>(dev, 1).unwrap();
    let tgt = dev.upload(&[3u32]).unwrap();
    let vocab = Vocab::dense(vp, vp);
    for path in [ClassifierPath::Staged, ClassifierPath::Auto] {
        let args =
            Classifier { logits: wide.view_mut(), losses: loss.view_mut(), targets: tgt.view() };
        let done =
            fused_classifier_on(dev, path, vocab, LogitsGradient::Write { dloss: 1.0 }, args);
        match path {
            ClassifierPath::Staged => {
                let err = done.unwrap_err();
                assert!(matches!(&err, GpuError::InvalidArgument { arg: "path", .. }), "{err}");
            }
            _ => done.unwrap(),
        }
    }
    let want = (vp as f32).ln();
    let got = dev.download(loss.view()).unwrap()[0];
    assert!((got - want).abs() <= 1e-5 * want, "loss of {vp} equal logits: {got} vs {want}");
}

kernel_tests! {
    fused_classifier_f32 => check_classifier::<f32>;
    fused_classifier_bf16 => check_classifier::<bf16>;
    fused_classifier_f16 => check_classifier::<f16>;
    classifier_tf32_gradient => check_tf32_gradient;
    classifier_out_of_range_target => check_out_of_range_target;
    classifier_argument_errors => check_argument_errors;
}
