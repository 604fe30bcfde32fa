//! Flash attention forward against `cpu_ref::attention_forward` (on the widened inputs) and an
//! f64 log-sum-exp, and backward against `cpu_ref::attention_backward` and an f64 `D`, bf16 and
//! f16, at sequence lengths that are not multiples of the 64-row tiles (and T = 1), several
//! heads and sequences; the backward is bit-reproducible, and its column sums of dqkv (qkv's
//! bias gradient) match those of the gradient it stored bit for bit.

use cpu_ref::precision::Element;
use gpu_host::kernels::attention::AttentionShape;
use gpu_host::kernels::flash::{
    self, FlashBackward, FlashElement, FlashForward, flash_attention_backward,
    flash_attention_forward,
};
use gpu_host::kernels::gemm::GemmEngine;
use gpu_host::{Device, DeviceBuffer, GpuError, PtxArch};
use half::{bf16, f16};
use integration_tests::{
    TestRng, Tolerance, assert_bits_eq, assert_close, assert_close_in, kernel_tests, poisoned,
    small_sizes,
};

/// Shapes: one row, rows that are not a multiple of the 64-row tile, batches, heads, 3
/// sequences of 4 heads of 3 tiles (every grid dimension past 1: the kernels map x to the head,
/// y to the tile by its work, z to the sequence), and 5 tiles, whose heaviest blocks wrap the
/// backward wgmma kernels' three-stage rings; on a GPU, GPT-2's at B = 4.
fn shapes(dev: &impl Device) -> Vec<AttentionShape> {
    let mut shapes = vec![
        AttentionShape { b: 1, t: 1, c: 128, nh: 2 },
        AttentionShape { b: 1, t: 37, c: 128, nh: 2 },
        AttentionShape { b: 2, t: 64, c: 64, nh: 1 },
        AttentionShape { b: 1, t: 130, c: 64, nh: 1 },
        AttentionShape { b: 2, t: 70, c: 192, nh: 3 },
        AttentionShape { b: 3, t: 130, c: 256, nh: 4 },
        AttentionShape { b: 1, t: 260, c: 64, nh: 1 },
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

/// The flash kernels a device has: `mma.sync` everywhere, and wgmma (what `Auto` takes) on the
/// sm_90a module.
fn engines(dev: &impl Device) -> Vec<GemmEngine> {
    if dev.ptx_arch() == PtxArch::Sm90a {
        vec![GemmEngine::Wgmma, GemmEngine::MmaSync]
    } else {
        vec![GemmEngine::MmaSync]
    }
}

fn check_forward<T: FlashElement + Element>(dev: &impl Device) {
    for engine in engines(dev) {
        check_forward_on::<T>(dev, engine);
    }
}

fn check_forward_on<T: FlashElement + Element>(dev: &impl Device, engine: GemmEngine) {
    let mut rng = TestRng::new();
    // P is rounded to T before P·V: |Δout| ≲ 2^-p · max|v| (2^-8 bf16, 2^-11 f16), then the
    // output's own rounding (the one ulp `assert_close_in` adds).
    let abs = if <T as Element>::NAME == "bf16" { 8e-3 } else { 1e-3 };
    let rel = if <T as Element>::NAME == "bf16" { 2f32.powi(-8) } else { 2f32.powi(-11) };
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
        flash_attention_forward(dev, shape, engine, args).unwrap();
        let what = format!("flash_attention_forward_{} {engine:?} {shape:?}", <T as Element>::NAME);
        let got = dev.download(out.view()).unwrap();
        assert_close_in(&what, rng.seed(), &got, &want, Tolerance { abs, rel: 0.0 });
        // The relative rms error (measured on the simulator: at most 0.48 · 2^-p) catches what
        // the element bound misses, such as a rescaling of O off by a fraction of a percent.
        let g: Vec<f32> = got.iter().map(|x| x.to_f32()).collect();
        let rms = relative_rms(&g, &want, 1.0) / rel as f64;
        assert!(rms <= 1.0, "{what}: relative rms error {rms:.3} · 2^-p (seed {})", rng.seed());
        let scaled = relative_rms(&g, &want, 1.01) / rel as f64;
        assert!(scaled > 1.0, "{what}: a 1% scale error passes");
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
    // b·nh·t and 3·b·t·c wrap to 2 and 384 in 64 bits: checked, not wrapped.
    let wrapping = AttentionShape { b: 3, t: 0x5555_5555_5555_5556, c: 64, nh: 1 };
    let bad = [
        (AttentionShape { nh: 4, ..shape }, "shape"),
        (AttentionShape { t: 5, ..shape }, "qkv"),
        (AttentionShape { b: 0, ..shape }, "qkv"),
        (wrapping, "shape"),
        (AttentionShape { b: 1, t: 1 << 32, c: 64, nh: 1 }, "shape"),
        // 65536 tiles of 64 rows: past the grid's second dimension.
        (AttentionShape { b: 1, t: 64 << 16, c: 64, nh: 1 }, "shape"),
    ];
    for (s, arg) in bad {
        let args = FlashForward { qkv: qkv.view(), out: out.view_mut(), lse: lse.view_mut() };
        let err = flash_attention_forward(dev, s, GemmEngine::Auto, args).unwrap_err();
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
    let err = flash_attention_forward(dev, shape, GemmEngine::Auto, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "lse", .. }), "{err}");
    let wide = dev.alloc::<bf16>(4 * 3 * 128 + 1).unwrap();
    let misaligned = wide.view().slice(1..1 + 4 * 3 * 128).unwrap();
    let args = FlashForward { qkv: misaligned, out: out.view_mut(), lse: lse.view_mut() };
    let err = flash_attention_forward(dev, shape, GemmEngine::Auto, args).unwrap_err();
    assert!(err.to_string().contains("16-byte aligned"), "{err}");
    let mut wide_out = dev.alloc::<bf16>(4 * 128 + 1).unwrap();
    let out_at_1 = wide_out.view_mut().slice_mut(1..1 + 4 * 128).unwrap();
    let args = FlashForward { qkv: qkv.view(), out: out_at_1, lse: lse.view_mut() };
    let err = flash_attention_forward(dev, shape, GemmEngine::Auto, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "out", .. }), "{err}");
    // The wgmma kernel exists only in the sm_90a module.
    if dev.ptx_arch() != PtxArch::Sm90a {
        let args = FlashForward { qkv: qkv.view(), out: out.view_mut(), lse: lse.view_mut() };
        let err = flash_attention_forward(dev, shape, GemmEngine::Wgmma, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { arg: "engine", .. })
                && err.to_string().contains("sm_90a"),
            "{err}"
        );
    }
}

/// `Σ_d dout·out` per (b, h, i), in f64, from the 16-bit values.
fn reference_d<T: Element>(out: &[T], dout: &[T], s: AttentionShape) -> Vec<f32> {
    let hd = s.c / s.nh;
    let mut d = Vec::with_capacity(s.b * s.nh * s.t);
    for b in 0..s.b {
        for h in 0..s.nh {
            for i in 0..s.t {
                let at = (b * s.t + i) * s.c + h * hd;
                let o = &out[at..][..hd];
                let g = &dout[at..][..hd];
                d.push(
                    o.iter().zip(g).map(|(o, g)| o.to_f32() as f64 * g.to_f32() as f64).sum::<f64>()
                        as f32,
                );
            }
        }
    }
    d
}

/// Part `part` (0 = q, 1 = k, 2 = v) of a (B·T, 3C) gradient.
fn part_of<X: Copy>(dqkv: &[X], c: usize, part: usize) -> Vec<X> {
    dqkv.chunks(3 * c).flat_map(|row| row[part * c..][..c].iter().copied()).collect()
}

/// `‖scale · got − want‖ / ‖want‖`, in f64 (0 when `want` is 0).
fn relative_rms(got: &[f32], want: &[f32], scale: f32) -> f64 {
    let err: f64 = got.iter().zip(want).map(|(g, w)| ((scale * g - w) as f64).powi(2)).sum();
    let norm: f64 = want.iter().map(|w| (*w as f64).powi(2)).sum();
    if norm == 0.0 { 0.0 } else { (err / norm).sqrt() }
}

/// The column sums the backward writes of `dqkv` as stored, bit for bit (the order of
/// `kernel_abi::flash::FlashBackwardParams::col_sums`): per sequence, 16 positions, channel.
fn reference_col_sums<T: Element>(dqkv: &[T], s: AttentionShape) -> Vec<f32> {
    let (groups, width) = (s.t.div_ceil(16), 3 * s.c);
    let mut sums = vec![0.0f32; s.b * groups * width];
    for b in 0..s.b {
        for j in 0..groups {
            for n in 0..width {
                let class = |g: usize| {
                    let mut sum = 0.0f32;
                    for row in [16 * j + g, 16 * j + g + 8] {
                        if row < s.t {
                            sum += dqkv[(b * s.t + row) * width + n].to_f32();
                        }
                    }
                    sum
                };
                let pairs: Vec<f32> = (0..4).map(|k| class(2 * k) + class(2 * k + 1)).collect();
                sums[(b * groups + j) * width + n] = (pairs[0] + pairs[1]) + (pairs[2] + pairs[3]);
            }
        }
    }
    sums
}

/// Runs the backward on `engine` into fresh poisoned buffers, checks its column sums bit for
/// bit (their slack untouched); returns (dqkv, D).
fn run_backward<T: FlashElement + Element>(
    dev: &impl Device,
    shape: AttentionShape,
    engine: GemmEngine,
    qkv: &impl DeviceBuffer<T>,
    out: &impl DeviceBuffer<T>,
    dout: &impl DeviceBuffer<T>,
    lse: &impl DeviceBuffer<f32>,
) -> (Vec<T>, Vec<f32>) {
    let AttentionShape { b, t, c, nh } = shape;
    let mut d = poisoned::<_, f32>(dev, b * nh * t).unwrap();
    let mut dqkv = poisoned::<_, T>(dev, b * t * 3 * c).unwrap();
    let sums_len = flash::col_sums_len(shape);
    let mut sums = poisoned::<_, f32>(dev, sums_len + 3).unwrap();
    let args = FlashBackward {
        qkv: qkv.view(),
        out: out.view(),
        dout: dout.view(),
        lse: lse.view(),
        d_scratch: d.view_mut(),
        dqkv: dqkv.view_mut(),
        col_sums: Some(sums.view_mut().slice_mut(0..sums_len).unwrap()),
    };
    flash_attention_backward(dev, shape, engine, args).unwrap();
    let got = dev.download(dqkv.view()).unwrap();
    let mut want_sums = reference_col_sums(&got, shape);
    want_sums.extend([f32::from_bits(u32::MAX); 3]);
    let what = format!("column sums of {engine:?} {shape:?}");
    assert_bits_eq(&what, 0, &dev.download(sums.view()).unwrap(), &want_sums);
    (got, dev.download(d.view()).unwrap())
}

fn check_backward<T: FlashElement + Element>(dev: &impl Device) {
    for engine in engines(dev) {
        check_backward_on::<T>(dev, engine);
    }
}

fn check_backward_on<T: FlashElement + Element>(dev: &impl Device, engine: GemmEngine) {
    let mut rng = TestRng::new();
    // P and dS are rounded to T before their products (relative 2^-p: 2^-8 bf16, 2^-11 f16),
    // as are `out` (in D) and the gradients themselves: the largest element error measured on
    // the simulator is 1.4 · 2^-p of the part's largest magnitude, the relative rms error
    // 0.77 · 2^-p (both over many seeds); the bounds are about twice that.
    let rel = if <T as Element>::NAME == "bf16" { 2f32.powi(-8) } else { 2f32.powi(-11) };
    const MAX_FACTOR: f32 = 3.0;
    const RMS_FACTOR: f64 = 1.5;
    for shape in shapes(dev) {
        let AttentionShape { b, t, c, nh } = shape;
        let qkv: Vec<T> =
            rng.uniform(b * t * 3 * c, -2.0, 2.0).into_iter().map(T::from_f32).collect();
        let dout: Vec<T> = rng.uniform(b * t * c, -1.0, 1.0).into_iter().map(T::from_f32).collect();
        let wide: Vec<f32> = qkv.iter().map(|v| v.to_f32()).collect();
        let dout_wide: Vec<f32> = dout.iter().map(|v| v.to_f32()).collect();
        let (mut want_out, mut att) = (vec![0.0; b * t * c], vec![0.0; b * nh * t * t]);
        cpu_ref::attention_forward(&mut want_out, &mut att, &wide, b, t, c, nh);
        let mut want = vec![0.0; b * t * 3 * c];
        cpu_ref::attention_backward(&mut want, &dout_wide, &wide, &att, b, t, c, nh);

        let dqkv_in = dev.upload(&qkv).unwrap();
        let ddout = dev.upload(&dout).unwrap();
        let mut out = poisoned::<_, T>(dev, b * t * c).unwrap();
        let mut lse = poisoned::<_, f32>(dev, b * nh * t).unwrap();
        let args = FlashForward { qkv: dqkv_in.view(), out: out.view_mut(), lse: lse.view_mut() };
        flash_attention_forward(dev, shape, GemmEngine::Auto, args).unwrap();
        let (got, got_d) = run_backward(dev, shape, engine, &dqkv_in, &out, &ddout, &lse);
        let what =
            format!("flash_attention_backward_{} {engine:?} {shape:?}", <T as Element>::NAME);

        let out_host = dev.download(out.view()).unwrap();
        // 64 products summed in f32: a few f32 ulps of the terms' magnitude.
        let want_d = reference_d(&out_host, &dout, shape);
        assert_close(
            &format!("{what} D"),
            rng.seed(),
            &got_d,
            &want_d,
            Tolerance { abs: 1e-5, rel: 1e-5 },
        );
        for (part, name) in ["dq", "dk", "dv"].into_iter().enumerate() {
            let g: Vec<f32> = part_of(&got, c, part).iter().map(|x| x.to_f32()).collect();
            let w = part_of(&want, c, part);
            let what = format!("{what} {name}");
            let max = w.iter().fold(0.0f32, |m, x| m.max(x.abs()));
            // With one key (T = 1), dS = P·(dP − D) is 0 up to f32 rounding: a floor for it.
            let abs = MAX_FACTOR * rel * max + 1e-6;
            assert_close(&what, rng.seed(), &g, &w, Tolerance { abs: abs as f64, rel: 0.0 });
            let rms = relative_rms(&g, &w, 1.0) / rel as f64;
            assert!(
                rms <= RMS_FACTOR,
                "{what}: relative rms error {rms:.3} · 2^-p (seed {})",
                rng.seed()
            );
            // The rms bound is what catches a scale error that the element bound misses (for
            // bf16, 1% is about two ulps of the largest values).
            let scaled = relative_rms(&g, &w, 1.01) / rel as f64;
            assert!(max < 1e-3 || scaled > RMS_FACTOR, "{what}: a 1% scale error passes");
        }
        // Deterministic: a second run gives the same bits.
        let (again, again_d) = run_backward(dev, shape, engine, &dqkv_in, &out, &ddout, &lse);
        assert_bits_eq(&format!("{what} rerun"), rng.seed(), &again, &got);
        assert_bits_eq(&format!("{what} rerun D"), rng.seed(), &again_d, &got_d);
    }
}

/// Wrong lengths and misaligned buffers of the backward are errors naming the argument.
fn check_backward_argument_errors(dev: &impl Device) {
    let shape = AttentionShape { b: 1, t: 4, c: 128, nh: 2 };
    let qkv = dev.alloc::<bf16>(4 * 3 * 128).unwrap();
    let out = dev.alloc::<bf16>(4 * 128).unwrap();
    let dout = dev.alloc::<bf16>(4 * 128 + 8).unwrap();
    let lse = dev.alloc::<f32>(8).unwrap();
    let mut d = dev.alloc::<f32>(8).unwrap();
    let mut dqkv = dev.alloc::<bf16>(4 * 3 * 128).unwrap();
    let n = 4 * 128;
    let cases = [
        (AttentionShape { nh: 1, ..shape }, 0..n, 8, 3 * n, "shape"),
        (AttentionShape { t: 5, ..shape }, 0..n, 8, 3 * n, "qkv"),
        (shape, 1..n + 1, 8, 3 * n, "dout"),
        (shape, 0..n - 1, 8, 3 * n, "dout"),
        (shape, 0..n, 7, 3 * n, "d_scratch"),
        (shape, 0..n, 8, 3 * n - 2, "dqkv"),
        (AttentionShape { b: 3, t: 0x5555_5555_5555_5556, c: 64, nh: 1 }, 0..n, 8, 3 * n, "shape"),
    ];
    for (s, dout_range, d_len, dqkv_len, arg) in cases {
        let dout_at = dout_range.start;
        let args = FlashBackward {
            qkv: qkv.view(),
            out: out.view(),
            dout: dout.view().slice(dout_range).unwrap(),
            lse: lse.view(),
            d_scratch: d.view_mut().slice_mut(0..d_len).unwrap(),
            dqkv: dqkv.view_mut().slice_mut(0..dqkv_len).unwrap(),
            col_sums: None,
        };
        let err = flash_attention_backward(dev, s, GemmEngine::Auto, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "flash_attention_backward", arg: a, .. } if *a == arg),
            "{s:?} dout at {dout_at}: {err}"
        );
    }
    // Column sums one value short.
    let mut short_sums = dev.alloc::<f32>(flash::col_sums_len(shape) - 1).unwrap();
    let args = FlashBackward {
        qkv: qkv.view(),
        out: out.view(),
        dout: dout.view().slice(0..n).unwrap(),
        lse: lse.view(),
        d_scratch: d.view_mut(),
        dqkv: dqkv.view_mut(),
        col_sums: Some(short_sums.view_mut()),
    };
    let err = flash_attention_backward(dev, shape, GemmEngine::Auto, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "col_sums", .. }), "{err}");
    // qkv and out one element off 16-byte alignment, dqkv off 4-byte alignment.
    let wide_qkv = dev.alloc::<bf16>(3 * n + 1).unwrap();
    let wide_out = dev.alloc::<bf16>(n + 1).unwrap();
    let mut wide_dqkv = dev.alloc::<bf16>(3 * n + 1).unwrap();
    for arg in ["qkv", "out", "dqkv"] {
        let (qkv_at, out_at, dqkv_at) =
            (usize::from(arg == "qkv"), usize::from(arg == "out"), usize::from(arg == "dqkv"));
        let args = FlashBackward {
            qkv: wide_qkv.view().slice(qkv_at..qkv_at + 3 * n).unwrap(),
            out: wide_out.view().slice(out_at..out_at + n).unwrap(),
            dout: dout.view().slice(0..n).unwrap(),
            lse: lse.view(),
            d_scratch: d.view_mut(),
            dqkv: wide_dqkv.view_mut().slice_mut(dqkv_at..dqkv_at + 3 * n).unwrap(),
            col_sums: None,
        };
        let err = flash_attention_backward(dev, shape, GemmEngine::Auto, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { arg: a, .. } if *a == arg),
            "{arg} misaligned: {err}"
        );
    }
    // The wgmma kernels exist only in the sm_90a module.
    if dev.ptx_arch() != PtxArch::Sm90a {
        let args = FlashBackward {
            qkv: qkv.view(),
            out: out.view(),
            dout: dout.view().slice(0..n).unwrap(),
            lse: lse.view(),
            d_scratch: d.view_mut(),
            dqkv: dqkv.view_mut(),
            col_sums: None,
        };
        let err = flash_attention_backward(dev, shape, GemmEngine::Wgmma, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { arg: "engine", .. })
                && err.to_string().contains("sm_90a"),
            "{err}"
        );
    }
}

kernel_tests! {
    flash_attention_forward_bf16 => check_forward::<bf16>;
    flash_attention_forward_f16 => check_forward::<f16>;
    flash_attention_argument_errors => check_argument_errors;
    flash_attention_backward_bf16 => check_backward::<bf16>;
    flash_attention_backward_f16 => check_backward::<f16>;
    flash_attention_backward_argument_errors => check_backward_argument_errors;
}

/// The sm_90a module's forward and backward on the simulator, on wgmma and on `mma.sync`, with
/// every check of the sm_80 module's tests; on a Hopper GPU the `gpu::` tests run both.
mod hopper_sim {
    use super::*;

    #[test]
    fn flash_attention_forward_bf16() {
        check_forward::<bf16>(integration_tests::hopper_sim());
    }

    #[test]
    fn flash_attention_forward_f16() {
        check_forward::<f16>(integration_tests::hopper_sim());
    }

    #[test]
    fn flash_attention_backward_bf16() {
        check_backward::<bf16>(integration_tests::hopper_sim());
    }

    #[test]
    fn flash_attention_backward_f16() {
        check_backward::<f16>(integration_tests::hopper_sim());
    }
}
