//! Flash attention forward against `cpu_ref::attention_forward` (on the widened inputs) and an
//! f64 log-sum-exp, bf16 and f16, at sequence lengths that are not multiples of the 64-row
//! tiles (and T = 1), several heads and sequences.

use cpu_ref::precision::Element;
use gpu_host::kernels::attention::AttentionShape;
use gpu_host::kernels::flash::{FlashElement, FlashForward, flash_attention_forward};
use gpu_host::{Device, DeviceBuffer, GpuError};
use half::{bf16, f16};
use integration_tests::{
    TestRng, Tolerance, assert_close, assert_close_in, kernel_tests, poisoned, small_sizes,
};

fn shapes(dev: &impl Device) -> Vec<AttentionShape> {
    let mut shapes = vec![
        AttentionShape { b: 1, t: 1, c: 128, nh: 2 },
        AttentionShape { b: 1, t: 37, c: 128, nh: 2 },
        AttentionShape { b: 2, t: 64, c: 64, nh: 1 },
        AttentionShape { b: 1, t: 130, c: 64, nh: 1 },
    ];
    if !small_sizes(dev) {
        shapes.push(AttentionShape { b: 4, t: 1024, c: 768, nh: 12 });
    }
    shapes
}

/// log Σ_{j ≤ i} exp(q_i·k_j / sqrt(hd)) per (b, h, i), in f64.
fn reference_lse(qkv: &[f32], s: AttentionShape) -> Vec<f32> {
    let hd = s.c / s.nh;
    let scale = 1.0 / (hd as f64).sqrt();
    let mut lse = Vec::with_capacity(s.b * s.nh * s.t);
    for b in 0..s.b {
        for h in 0..s.nh {
            for i in 0..s.t {
                let q = &qkv[(b * s.t + i) * 3 * s.c + h * hd..][..hd];
                let scores: Vec<f64> = (0..=i)
                    .map(|j| {
                        let k = &qkv[(b * s.t + j) * 3 * s.c + s.c + h * hd..][..hd];
                        q.iter().zip(k).map(|(a, b)| *a as f64 * *b as f64).sum::<f64>() * scale
                    })
                    .collect();
                let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                lse.push((max + scores.iter().map(|x| (x - max).exp()).sum::<f64>().ln()) as f32);
            }
        }
    }
    lse
}

fn check_forward<T: FlashElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    // P is rounded to T before P·V: |Δout| ≲ 2^-p · max|v| (2^-8 bf16, 2^-11 f16), then the
    // output's own rounding (the one ulp `assert_close_in` adds).
    let abs = if <T as Element>::NAME == "bf16" { 8e-3 } else { 1e-3 };
    for shape in shapes(dev) {
        let AttentionShape { b, t, c, nh } = shape;
        let qkv: Vec<T> =
            rng.uniform(b * t * 3 * c, -2.0, 2.0).into_iter().map(T::from_f32).collect();
        let wide: Vec<f32> = qkv.iter().map(|v| v.to_f32()).collect();
        let (mut want, mut att) = (vec![0.0; b * t * c], vec![0.0; b * nh * t * t]);
        cpu_ref::attention_forward(&mut want, &mut att, &wide, b, t, c, nh);
        let want_lse = reference_lse(&wide, shape);

        let dqkv = dev.upload(&qkv).unwrap();
        let mut out = poisoned::<_, T>(dev, b * t * c).unwrap();
        let mut lse = poisoned::<_, f32>(dev, b * nh * t).unwrap();
        let args = FlashForward { qkv: dqkv.view(), out: out.view_mut(), lse: lse.view_mut() };
        flash_attention_forward(dev, shape, args).unwrap();
        let what = format!("flash_attention_forward_{} {shape:?}", <T as Element>::NAME);
        let got = dev.download(out.view()).unwrap();
        assert_close_in(&what, rng.seed(), &got, &want, Tolerance { abs, rel: 0.0 });
        let got_lse = dev.download(lse.view()).unwrap();
        // Exact 16-bit products summed in f32, ex2/lg2.approx: a few f32 ulps of |lse|.
        assert_close(
            &format!("{what} lse"),
            rng.seed(),
            &got_lse,
            &want_lse,
            Tolerance { abs: 2e-5, rel: 4e-6 },
        );
    }
}

/// Shapes the kernels do not support and wrong lengths are errors naming the argument.
fn check_argument_errors(dev: &impl Device) {
    let shape = AttentionShape { b: 1, t: 4, c: 128, nh: 2 };
    let qkv = dev.alloc::<bf16>(4 * 3 * 128).unwrap();
    let mut out = dev.alloc::<bf16>(4 * 128).unwrap();
    let mut lse = dev.alloc::<f32>(8).unwrap();
    let bad = [
        (AttentionShape { nh: 4, ..shape }, "shape"),
        (AttentionShape { t: 5, ..shape }, "qkv"),
        (AttentionShape { b: 0, ..shape }, "qkv"),
    ];
    for (s, arg) in bad {
        let args = FlashForward { qkv: qkv.view(), out: out.view_mut(), lse: lse.view_mut() };
        let err = flash_attention_forward(dev, s, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "flash_attention_forward", arg: a, .. } if *a == arg),
            "{s:?}: {err}"
        );
    }
    let args = FlashForward {
        qkv: qkv.view(),
        out: out.view_mut(),
        lse: lse.view_mut().slice_mut(0..7).unwrap(),
    };
    let err = flash_attention_forward(dev, shape, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "lse", .. }), "{err}");
    let wide = dev.alloc::<bf16>(4 * 3 * 128 + 1).unwrap();
    let misaligned = wide.view().slice(1..1 + 4 * 3 * 128).unwrap();
    let args = FlashForward { qkv: misaligned, out: out.view_mut(), lse: lse.view_mut() };
    let err = flash_attention_forward(dev, shape, args).unwrap_err();
    assert!(err.to_string().contains("16-byte aligned"), "{err}");
}

kernel_tests! {
    flash_attention_forward_bf16 => check_forward::<bf16>;
    flash_attention_forward_f16 => check_forward::<f16>;
    flash_attention_argument_errors => check_argument_errors;
}
