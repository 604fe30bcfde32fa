//! Materialised causal attention: the permutes (bit for bit), the causal softmax forward and
//! backward (against f64 references on the stored inputs), and the whole forward and backward
//! against `cpu_ref::attention_forward` / `attention_backward` in every GEMM precision.

use cpu_ref::precision::Element;
use gpu_host::kernels::attention::{
    AttentionBackward, AttentionElement, AttentionForward, AttentionShape, Permute,
    PermuteBackward, SoftmaxBackward, SoftmaxShape, attention_backward,
    attention_backward_scratch_len, attention_forward, attention_forward_scratch_len,
    attention_permute, attention_permute_backward, attention_unpermute,
    attention_unpermute_backward, causal_block_rows, causal_softmax_backward,
    causal_softmax_backward_in_place, causal_softmax_forward, causal_softmax_forward_in_place,
};
use gpu_host::kernels::elementwise::FloatElement;
use gpu_host::kernels::gemm::Precision;
use gpu_host::{Device, DeviceBuffer, GpuError};
use half::{bf16, f16};
use integration_tests::{
    TestRng, Tolerance, assert_bits_eq, assert_close_in, kernel_tests, poisoned, small_sizes,
    upload_at,
};

/// (b, t, c, nh): T = 1, T not a multiple of 8 or of the GEMM tiles, several tiles (T = 130),
/// head sizes 64 (vector paths) and 12 or 65 (scalar paths); GPT-2 124M at B = 4 on a GPU.
fn shapes(dev: &impl Device) -> Vec<AttentionShape> {
    let mut shapes = vec![
        AttentionShape { b: 1, t: 1, c: 128, nh: 2 },
        AttentionShape { b: 2, t: 37, c: 128, nh: 2 },
        AttentionShape { b: 1, t: 130, c: 128, nh: 2 },
        AttentionShape { b: 2, t: 20, c: 24, nh: 2 },
        AttentionShape { b: 1, t: 9, c: 195, nh: 3 },
    ];
    if !small_sizes(dev) {
        shapes.push(AttentionShape { b: 4, t: 1024, c: 768, nh: 12 });
    }
    shapes
}

fn values<T: Element>(rng: &mut TestRng, n: usize, lo: f32, hi: f32) -> Vec<T> {
    rng.uniform(n, lo, hi).into_iter().map(T::from_f32).collect()
}

fn widen<T: Element>(x: &[T]) -> Vec<f32> {
    x.iter().map(|v| v.to_f32()).collect()
}

fn narrow<T: Element>(x: &[f32]) -> Vec<T> {
    x.iter().map(|&v| T::from_f32(v)).collect()
}

/// `n` elements of random bits (NaNs included): the permutes must copy them exactly.
fn random_bits<T: FloatElement>(rng: &mut TestRng, n: usize) -> Vec<T> {
    bytemuck::cast_slice(&rng.bytes(n * size_of::<T>())).to_vec()
}

/// Index of element `i` of head `h` at position `ti` of batch `bi` in the per-head layout.
fn head_index(s: AttentionShape, bi: usize, h: usize, ti: usize, i: usize) -> usize {
    let hd = s.head_size();
    ((bi * s.nh + h) * s.t + ti) * hd + i
}

/// Calls `f(head_index, token_index)` for every element of `parts` token-major rows of
/// `parts · c` elements (the permutes' correspondence; part `p` in the per-head layout is the
/// `p`-th buffer, at offset `p · B·T·C` here).
fn for_each_element(s: AttentionShape, parts: usize, mut f: impl FnMut(usize, usize)) {
    let hd = s.head_size();
    for bi in 0..s.b {
        for ti in 0..s.t {
            for p in 0..parts {
                for h in 0..s.nh {
                    for i in 0..hd {
                        let token = ((bi * s.t + ti) * parts + p) * s.c + h * hd + i;
                        f(p * s.out_len() + head_index(s, bi, h, ti, i), token);
                    }
                }
            }
        }
    }
}

fn check_permutes<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for s in shapes(dev) {
        for offset in [0, 1] {
            let what = format!("{} {s:?} offset={offset}", <T as Element>::NAME);
            let n = s.out_len();
            // `offset` shifts every buffer off 16-byte alignment (the scalar paths).
            let window = |len: usize| offset..offset + len;

            let qkv = random_bits::<T>(&mut rng, s.qkv_len());
            let mut want = vec![T::from_f32(0.0); 3 * n];
            for_each_element(s, 3, |head, token| want[head] = qkv[token]);
            let dqkv = upload_at(dev, &qkv, offset).unwrap();
            let mut heads = poisoned::<_, T>(dev, offset + 3 * n).unwrap();
            let (q, rest) =
                heads.view_mut().slice_mut(window(3 * n)).unwrap().split_at_mut(n).unwrap();
            let (k, v) = rest.split_at_mut(n).unwrap();
            let qkv_view = dqkv.view().slice(window(s.qkv_len())).unwrap();
            attention_permute(dev, s, Permute { qkv: qkv_view, q, k, v }).unwrap();
            let got = dev.download(heads.view().slice(window(3 * n)).unwrap()).unwrap();
            assert_bits_eq(&format!("attention_permute {what}"), rng.seed(), &got, &want);

            let grads = random_bits::<T>(&mut rng, 3 * n);
            let mut want = vec![T::from_f32(0.0); s.qkv_len()];
            for_each_element(s, 3, |head, token| want[token] = grads[head]);
            let dgrads = upload_at(dev, &grads, offset).unwrap();
            let mut out = poisoned::<_, T>(dev, offset + s.qkv_len()).unwrap();
            let g = dgrads.view().slice(window(3 * n)).unwrap();
            let args = PermuteBackward {
                dq: g.slice(0..n).unwrap(),
                dk: g.slice(n..2 * n).unwrap(),
                dv: g.slice(2 * n..3 * n).unwrap(),
                dqkv: out.view_mut().slice_mut(window(s.qkv_len())).unwrap(),
            };
            attention_permute_backward(dev, s, args).unwrap();
            let got = dev.download(out.view().slice(window(s.qkv_len())).unwrap()).unwrap();
            assert_bits_eq(&format!("attention_permute_backward {what}"), rng.seed(), &got, &want);

            let y = random_bits::<T>(&mut rng, n);
            let mut want = vec![T::from_f32(0.0); n];
            for_each_element(s, 1, |head, token| want[token] = y[head]);
            let dy = upload_at(dev, &y, offset).unwrap();
            let mut out = poisoned::<_, T>(dev, offset + n).unwrap();
            let (y_view, out_view) =
                (dy.view().slice(window(n)).unwrap(), out.view_mut().slice_mut(window(n)).unwrap());
            attention_unpermute(dev, s, y_view, out_view).unwrap();
            let got = dev.download(out.view().slice(window(n)).unwrap()).unwrap();
            assert_bits_eq(&format!("attention_unpermute {what}"), rng.seed(), &got, &want);

            // The backward of the unpermute inverts it: back to `y`.
            let mut back = poisoned::<_, T>(dev, offset + n).unwrap();
            let (out_view, back_view) = (
                out.view().slice(window(n)).unwrap(),
                back.view_mut().slice_mut(window(n)).unwrap(),
            );
            attention_unpermute_backward(dev, s, out_view, back_view).unwrap();
            let got = dev.download(back.view().slice(window(n)).unwrap()).unwrap();
            assert_bits_eq(&format!("attention_unpermute_backward {what}"), rng.seed(), &got, &y);
        }
    }
}

/// (matrices, t, scale, block_rows): T = 1, T below, at and across the warp's 256-column span
/// (264: the 16-byte path past 256 columns; 300: scalar), T not a multiple of 8 (scalar path),
/// two head-size scales; rows written in full, and only to the end of their block of rows
/// (blocks of 12, 16 and 48 rows: a last partial block, block ends off the 8-column chunks);
/// B·NH = 48 at T = 1024 on a GPU, in full and in the attention's blocks of 128 rows.
fn softmax_shapes(dev: &impl Device) -> Vec<SoftmaxShape> {
    let shape = |matrices, t, hd: f32, block_rows| SoftmaxShape {
        matrices,
        t,
        scale: 1.0 / hd.sqrt(),
        block_rows,
    };
    let mut shapes = vec![
        shape(3, 1, 64.0, 0),
        shape(3, 7, 12.0, 0),
        shape(2, 8, 64.0, 0),
        shape(2, 37, 64.0, 0),
        shape(2, 64, 12.0, 0),
        shape(1, 300, 64.0, 0),
        shape(1, 264, 64.0, 0),
        shape(2, 37, 64.0, 12),
        shape(2, 64, 12.0, 16),
        shape(1, 264, 64.0, 48),
    ];
    if !small_sizes(dev) {
        shapes.push(shape(48, 1024, 64.0, 0));
        shapes.push(shape(48, 1024, 64.0, 128));
    }
    shapes
}

/// Whether the softmax kernels write column `col` of row `row` ([`SoftmaxShape::block_rows`]).
fn is_written(block_rows: usize, row: usize, col: usize) -> bool {
    block_rows == 0 || col < (row / block_rows + 1) * block_rows
}

/// Checks the entries of `got` (T×T matrices) that the kernels write, those of columns up to
/// the end of each row's block of `block_rows` rows (all when 0), against `want` within `tol`,
/// and exactly 0 above the diagonal; the entries after them must have kept `initial`'s bits.
fn assert_written<T: Element + bytemuck::Pod>(
    what: &str,
    seed: u64,
    (t, block_rows): (usize, usize),
    (got, initial): (&[T], &[T]),
    want: &[f32],
    tol: Tolerance,
) {
    let (mut got_w, mut want_w) = (Vec::new(), Vec::new());
    for (i, (g, init)) in got.iter().zip(initial).enumerate() {
        let (row, col) = ((i / t) % t, i % t);
        if !is_written(block_rows, row, col) {
            let kept = bytemuck::bytes_of(g) == bytemuck::bytes_of(init);
            assert!(kept, "{what}: [{i}] (row {row}, column {col}) is past its block: written");
            continue;
        }
        assert!(col <= row || g.to_f32() == 0.0, "{what}: [{i}] above the diagonal is not 0");
        got_w.push(*g);
        want_w.push(want[i]);
    }
    assert_close_in(what, seed, &got_w, &want_w, tol);
}

/// Calls `f(row, col, index)` for every element of the T×T matrices of `s`.
fn for_each_entry(s: SoftmaxShape, mut f: impl FnMut(usize, usize, usize)) {
    for m in 0..s.matrices {
        for row in 0..s.t {
            for col in 0..s.t {
                f(row, col, (m * s.t + row) * s.t + col);
            }
        }
    }
}

/// `x` with NaN above the diagonal of each matrix: the kernels must not read those entries.
fn masked_with_nan<T: Element>(s: SoftmaxShape, mut x: Vec<T>) -> Vec<T> {
    for_each_entry(s, |row, col, i| {
        if col > row {
            x[i] = T::from_f32(f32::NAN);
        }
    });
    x
}

/// The causal softmax of `scale · x` per row, in f64 (0 above the diagonal).
fn softmax_reference(s: SoftmaxShape, x: &[f32]) -> Vec<f64> {
    let mut p = vec![0.0; x.len()];
    for row_start in (0..x.len()).step_by(s.t.max(1)) {
        let row = (row_start / s.t) % s.t;
        let scores: Vec<f64> =
            x[row_start..=row_start + row].iter().map(|&v| v as f64 * s.scale as f64).collect();
        let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let sum: f64 = scores.iter().map(|v| (v - max).exp()).sum();
        for (j, v) in scores.iter().enumerate() {
            p[row_start + j] = (v - max).exp() / sum;
        }
    }
    p
}

/// The forward's probabilities are relatively accurate to a few f32 ulps: `ex2.approx` (2 ulp),
/// the row sum and the division, plus the rounding of the exponent `x·scale·log2(e) − max`
/// (2 ulp of up to `2·|x|max·scale` in natural-log units). A scale off by 1% moves the
/// probabilities by several %.
fn softmax_forward_tolerance(s: SoftmaxShape, max_abs_x: f32) -> Tolerance {
    let exponent = 2.0 * max_abs_x as f64 * s.scale as f64;
    Tolerance { abs: 0.0, rel: (2.0 * exponent + 8.0) * 2f64.powi(-24) }
}

/// The backward's `scale·p·(dp − Σ p·dp)` in f32 with `|dp| ≤ 1`, `Σ p = 1`: the row sum (up to
/// `t/32 + 5` roundings in each lane's sequence and the butterfly) and the subtraction err by
/// `(t/32 + 6)·2⁻²⁴` absolutely before the factor `scale·p ≤ scale`, the products by 4 ulp.
fn softmax_backward_tolerance(s: SoftmaxShape) -> Tolerance {
    let ulp = 2f64.powi(-24);
    Tolerance { abs: s.scale as f64 * (s.t as f64 / 32.0 + 6.0) * ulp, rel: 4.0 * ulp }
}

fn check_softmax_forward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for s in softmax_shapes(dev) {
        for offset in [0, 1] {
            let what =
                format!("causal_softmax_forward_{} {s:?} offset={offset}", <T as Element>::NAME);
            let n = s.len();
            let window = offset..offset + n;
            let x = masked_with_nan(s, values::<T>(&mut rng, n, -30.0, 30.0));
            let want: Vec<f32> =
                softmax_reference(s, &widen(&x)).into_iter().map(|v| v as f32).collect();
            let mut inp = upload_at(dev, &x, offset).unwrap();
            let mut out = poisoned::<_, T>(dev, offset + n).unwrap();
            let out_view = out.view_mut().slice_mut(window.clone()).unwrap();
            causal_softmax_forward(dev, s, inp.view().slice(window.clone()).unwrap(), out_view)
                .unwrap();
            let got = dev.download(out.view().slice(window.clone()).unwrap()).unwrap();
            let poison = dev.download(poisoned::<_, T>(dev, n).unwrap().view()).unwrap();
            let tol = softmax_forward_tolerance(s, 30.0);
            let layout = (s.t, s.block_rows);
            assert_written(&what, rng.seed(), layout, (&got, &poison), &want, tol);

            causal_softmax_forward_in_place(
                dev,
                s,
                inp.view_mut().slice_mut(window.clone()).unwrap(),
            )
            .unwrap();
            let in_place = dev.download(inp.view().slice(window).unwrap()).unwrap();
            let tol = Tolerance { abs: 0.0, rel: 0.0 };
            let same = widen(&got);
            let what = format!("{what} in place");
            assert_written(&what, rng.seed(), layout, (&in_place, &x), &same, tol);
        }
    }
}

/// Rows of causal softmax probabilities of random scores, rounded to `T`.
fn probabilities<T: Element>(rng: &mut TestRng, s: SoftmaxShape) -> Vec<T> {
    let scores = rng.uniform(s.len(), -30.0, 30.0);
    softmax_reference(s, &scores).into_iter().map(|p| T::from_f32(p as f32)).collect()
}

/// `scale · p · (dp − Σ p·dp)` per row in f64 (0 above the diagonal).
fn softmax_backward_reference(s: SoftmaxShape, p: &[f32], dp: &[f32]) -> Vec<f32> {
    let mut out = vec![0.0; p.len()];
    for row_start in (0..p.len()).step_by(s.t.max(1)) {
        let row = (row_start / s.t) % s.t;
        let live = row_start..=row_start + row;
        let dot: f64 = live.clone().map(|i| p[i] as f64 * dp[i] as f64).sum();
        for i in live {
            out[i] = (s.scale as f64 * p[i] as f64 * (dp[i] as f64 - dot)) as f32;
        }
    }
    out
}

fn check_softmax_backward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for s in softmax_shapes(dev) {
        for offset in [0, 1] {
            let what =
                format!("causal_softmax_backward_{} {s:?} offset={offset}", <T as Element>::NAME);
            let n = s.len();
            let window = offset..offset + n;
            let p = masked_with_nan(s, probabilities::<T>(&mut rng, s));
            let dp = masked_with_nan(s, values::<T>(&mut rng, n, -1.0, 1.0));
            let want = softmax_backward_reference(s, &widen(&p), &widen(&dp));
            let upload = |x: &[T]| upload_at(dev, x, offset).unwrap();
            let (att, mut datt) = (upload(&p), upload(&dp));
            let mut dpreatt = poisoned::<_, T>(dev, offset + n).unwrap();
            let args = SoftmaxBackward {
                att: att.view().slice(window.clone()).unwrap(),
                datt: datt.view().slice(window.clone()).unwrap(),
                dpreatt: dpreatt.view_mut().slice_mut(window.clone()).unwrap(),
            };
            causal_softmax_backward(dev, s, args).unwrap();
            let got = dev.download(dpreatt.view().slice(window.clone()).unwrap()).unwrap();
            let poison = dev.download(poisoned::<_, T>(dev, n).unwrap().view()).unwrap();
            let layout = (s.t, s.block_rows);
            let tol = softmax_backward_tolerance(s);
            assert_written(&what, rng.seed(), layout, (&got, &poison), &want, tol);

            let att_view = att.view().slice(window.clone()).unwrap();
            let grad = datt.view_mut().slice_mut(window.clone()).unwrap();
            causal_softmax_backward_in_place(dev, s, att_view, grad).unwrap();
            let in_place = dev.download(datt.view().slice(window).unwrap()).unwrap();
            let tol = Tolerance { abs: 0.0, rel: 0.0 };
            let what = format!("{what} in place");
            assert_written(&what, rng.seed(), layout, (&in_place, &dp), &widen(&got), tol);
        }
    }
}

/// Per-element tolerance of the whole path relative to the largest reference value `scale`:
/// the tensor-core GEMMs round their inputs to the precision's unit `u` (TF32 2⁻¹¹, bf16 2⁻⁸,
/// f16 2⁻¹¹), and the 16-bit paths also store the scores, probabilities and gradients rounded
/// to `u`; FP32 accumulates dot products of length hd and T with errors growing about as
/// `(√T + √hd)·2⁻²⁴`. The errors measured on the simulator stay below a quarter of this.
fn whole_path_tolerance(precision: Precision, s: AttentionShape, scale: f64) -> Tolerance {
    let u = match precision {
        Precision::Fp32 => ((s.t as f64).sqrt() + (s.head_size() as f64).sqrt()) * 2f64.powi(-24),
        Precision::Tf32 | Precision::Fp16 => 2f64.powi(-11),
        Precision::Bf16 => 2f64.powi(-8),
    };
    Tolerance { abs: 4.0 * u * scale, rel: 4.0 * u }
}

fn max_abs(x: &[f32]) -> f64 {
    x.iter().fold(0.0, |m, v| m.max(v.abs() as f64))
}

fn check_forward<T: AttentionElement + Element>(dev: &impl Device, precision: Precision) {
    check_forward_shapes::<T>(dev, precision, &shapes(dev));
}

fn check_forward_shapes<T: AttentionElement + Element>(
    dev: &impl Device,
    precision: Precision,
    shapes: &[AttentionShape],
) {
    let mut rng = TestRng::new();
    for &s in shapes {
        let what = format!("attention_forward {precision:?} {s:?}");
        let qkv = values::<T>(&mut rng, s.qkv_len(), -1.0, 1.0);
        let (mut want_out, mut want_att) = (vec![0.0; s.out_len()], vec![0.0; s.att_len()]);
        cpu_ref::attention_forward(&mut want_out, &mut want_att, &widen(&qkv), s.b, s.t, s.c, s.nh);

        let dqkv = dev.upload(&qkv).unwrap();
        let mut out = poisoned::<_, T>(dev, s.out_len()).unwrap();
        let mut att = poisoned::<_, T>(dev, s.att_len()).unwrap();
        let mut scratch = poisoned::<_, T>(dev, attention_forward_scratch_len(s)).unwrap();
        let args = AttentionForward {
            qkv: dqkv.view(),
            out: out.view_mut(),
            att: att.view_mut(),
            scratch: scratch.view_mut(),
        };
        attention_forward(dev, s, precision, args).unwrap();
        let got_out = dev.download(out.view()).unwrap();
        let tol = whole_path_tolerance(precision, s, max_abs(&want_out));
        assert_close_in(&format!("{what} out"), rng.seed(), &got_out, &want_out, tol);
        let got_att = dev.download(att.view()).unwrap();
        let poison = dev.download(poisoned::<_, T>(dev, s.att_len()).unwrap().view()).unwrap();
        let tol = whole_path_tolerance(precision, s, 1.0);
        let layout = (s.t, causal_block_rows(s.t));
        let what = format!("{what} att");
        assert_written(&what, rng.seed(), layout, (&got_att, &poison), &want_att, tol);
    }
}

fn check_backward<T: AttentionElement + Element>(dev: &impl Device, precision: Precision) {
    check_backward_shapes::<T>(dev, precision, &shapes(dev));
}

fn check_backward_shapes<T: AttentionElement + Element>(
    dev: &impl Device,
    precision: Precision,
    shapes: &[AttentionShape],
) {
    let mut rng = TestRng::new();
    for &s in shapes {
        let what = format!("attention_backward {precision:?} {s:?}");
        let qkv = values::<T>(&mut rng, s.qkv_len(), -1.0, 1.0);
        let dout = values::<T>(&mut rng, s.out_len(), -1.0, 1.0);
        let (mut out, mut att) = (vec![0.0; s.out_len()], vec![0.0; s.att_len()]);
        cpu_ref::attention_forward(&mut out, &mut att, &widen(&qkv), s.b, s.t, s.c, s.nh);
        // Both sides start from the same saved probabilities, rounded to the storage type.
        let att = narrow::<T>(&att);
        let mut want = vec![0.0; s.qkv_len()];
        let (qkv32, dout32, att32) = (widen(&qkv), widen(&dout), widen(&att));
        cpu_ref::attention_backward(&mut want, &dout32, &qkv32, &att32, s.b, s.t, s.c, s.nh);

        // The columns the forward does not write hold NaN: the backward must not read them.
        let mut saved = att.clone();
        for (i, p) in saved.iter_mut().enumerate() {
            if !is_written(causal_block_rows(s.t), (i / s.t) % s.t, i % s.t) {
                *p = T::from_f32(f32::NAN);
            }
        }
        let (ddout, dqkv, datt) =
            (dev.upload(&dout).unwrap(), dev.upload(&qkv).unwrap(), dev.upload(&saved).unwrap());
        let mut grad = poisoned::<_, T>(dev, s.qkv_len()).unwrap();
        let mut scratch = poisoned::<_, T>(dev, attention_backward_scratch_len(s)).unwrap();
        let args = AttentionBackward {
            dout: ddout.view(),
            qkv: dqkv.view(),
            att: datt.view(),
            dqkv: grad.view_mut(),
            scratch: scratch.view_mut(),
        };
        attention_backward(dev, s, precision, args).unwrap();
        let got = dev.download(grad.view()).unwrap();
        let tol = whole_path_tolerance(precision, s, max_abs(&want));
        assert_close_in(&format!("{what} dqkv"), rng.seed(), &got, &want, tol);

        // Deterministic: a second run into fresh poisoned buffers gives the same bits.
        let mut again = poisoned::<_, T>(dev, s.qkv_len()).unwrap();
        let mut scratch = poisoned::<_, T>(dev, attention_backward_scratch_len(s)).unwrap();
        let args = AttentionBackward {
            dout: ddout.view(),
            qkv: dqkv.view(),
            att: datt.view(),
            dqkv: again.view_mut(),
            scratch: scratch.view_mut(),
        };
        attention_backward(dev, s, precision, args).unwrap();
        let again = dev.download(again.view()).unwrap();
        assert_bits_eq(&format!("{what} dqkv, second run"), rng.seed(), &again, &got);
    }
}

fn check_forward_fp32(dev: &impl Device) {
    check_forward::<f32>(dev, Precision::Fp32);
}
fn check_forward_tf32(dev: &impl Device) {
    check_forward::<f32>(dev, Precision::Tf32);
}
fn check_forward_bf16(dev: &impl Device) {
    check_forward::<bf16>(dev, Precision::Bf16);
}
fn check_forward_fp16(dev: &impl Device) {
    check_forward::<f16>(dev, Precision::Fp16);
}
fn check_backward_fp32(dev: &impl Device) {
    check_backward::<f32>(dev, Precision::Fp32);
}
fn check_backward_tf32(dev: &impl Device) {
    check_backward::<f32>(dev, Precision::Tf32);
}
fn check_backward_bf16(dev: &impl Device) {
    check_backward::<bf16>(dev, Precision::Bf16);
}
fn check_backward_fp16(dev: &impl Device) {
    check_backward::<f16>(dev, Precision::Fp16);
}

/// The whole path on the sm_90a module, where `Auto` runs the batched head GEMMs on the wgmma
/// kernel wherever their rows are 16-byte aligned (every one at T = 72, head size 64; only
/// the head-size-K ones at T = 130): BF16 and FP16, forward and backward.
#[test]
fn attention_on_the_hopper_module() {
    let dev = integration_tests::hopper_sim();
    let shapes = [
        AttentionShape { b: 2, t: 72, c: 128, nh: 2 },
        AttentionShape { b: 1, t: 130, c: 128, nh: 2 },
    ];
    check_forward_shapes::<bf16>(dev, Precision::Bf16, &shapes);
    check_backward_shapes::<bf16>(dev, Precision::Bf16, &shapes);
    check_forward_shapes::<f16>(dev, Precision::Fp16, &shapes);
    check_backward_shapes::<f16>(dev, Precision::Fp16, &shapes);
}

/// Asserts `result` is an `InvalidArgument` of `op` naming `arg`.
fn assert_names(result: Result<(), GpuError>, op: &str, arg: &str) {
    let err = result.unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: o, arg: a, .. } if *o == op && *a == arg),
        "expected {op}: `{arg}`, got {err}"
    );
}

/// Bad shapes, lengths and precisions are rejected before launch, naming the argument.
fn check_argument_errors(dev: &impl Device) {
    let s = AttentionShape { b: 1, t: 4, c: 16, nh: 2 };
    let qkv = dev.upload(&vec![1.0f32; s.qkv_len()]).unwrap();
    let mut out = dev.alloc::<f32>(s.out_len()).unwrap();
    let mut att = dev.alloc::<f32>(s.att_len()).unwrap();
    let mut scratch = dev.alloc::<f32>(attention_backward_scratch_len(s)).unwrap();
    let mut forward = |s: AttentionShape, precision, att_len: usize, scratch_len: usize| {
        let args = AttentionForward {
            qkv: qkv.view(),
            out: out.view_mut(),
            att: att.view_mut().slice_mut(0..att_len).unwrap(),
            scratch: scratch.view_mut().slice_mut(0..scratch_len).unwrap(),
        };
        attention_forward(dev, s, precision, args)
    };
    let (fp32, full) = (Precision::Fp32, attention_forward_scratch_len(s));
    forward(s, fp32, s.att_len(), full).unwrap();
    let op = "attention_forward";
    assert_names(forward(AttentionShape { c: 15, ..s }, fp32, s.att_len(), full), op, "c");
    assert_names(forward(AttentionShape { nh: 0, ..s }, fp32, s.att_len(), full), op, "nh");
    let wide = AttentionShape { b: 1, t: 1, c: 1 << 32, nh: 2 };
    assert_names(forward(wide, fp32, s.att_len(), full), op, "c");
    let many = AttentionShape { b: 300, t: 1, c: 600, nh: 300 };
    assert_names(forward(many, fp32, s.att_len(), full), op, "b");
    assert_names(forward(AttentionShape { t: 5, ..s }, fp32, s.att_len(), full), op, "qkv");
    assert_names(forward(s, fp32, s.att_len() - 1, full), op, "att");
    assert_names(forward(s, fp32, s.att_len(), full - 1), op, "scratch");
    assert_names(forward(s, Precision::Bf16, s.att_len(), full), op, "precision");

    let mut dqkv = dev.alloc::<f32>(s.qkv_len()).unwrap();
    let args = AttentionBackward {
        dout: out.view(),
        qkv: qkv.view(),
        att: att.view(),
        dqkv: dqkv.view_mut(),
        scratch: scratch.view_mut().slice_mut(0..attention_forward_scratch_len(s)).unwrap(),
    };
    assert_names(
        attention_backward(dev, s, Precision::Tf32, args),
        "attention_backward",
        "scratch",
    );

    let soft = s.softmax();
    let short = dev.alloc::<f32>(soft.len() - 1).unwrap();
    assert_names(
        causal_softmax_forward(dev, soft, short.view(), att.view_mut()),
        "causal_softmax_forward",
        "inp",
    );
    let mut grad = dev.alloc::<f32>(soft.len() - 1).unwrap();
    assert_names(
        causal_softmax_backward_in_place(dev, soft, att.view(), grad.view_mut()),
        "causal_softmax_backward_in_place",
        "grad",
    );
    let (q, k) = scratch.view_mut().split_at_mut(s.out_len()).unwrap();
    let (k, v) = k.split_at_mut(s.out_len()).unwrap();
    let v = v.slice_mut(0..s.out_len() - 1).unwrap();
    assert_names(
        attention_permute(dev, s, Permute { qkv: qkv.view(), q, k, v }),
        "attention_permute",
        "v",
    );
}

kernel_tests! {
    attention_permutes_f32 => check_permutes::<f32>;
    attention_permutes_bf16 => check_permutes::<bf16>;
    attention_permutes_f16 => check_permutes::<f16>;
    causal_softmax_forward_f32 => check_softmax_forward::<f32>;
    causal_softmax_forward_bf16 => check_softmax_forward::<bf16>;
    causal_softmax_forward_f16 => check_softmax_forward::<f16>;
    causal_softmax_backward_f32 => check_softmax_backward::<f32>;
    causal_softmax_backward_bf16 => check_softmax_backward::<bf16>;
    causal_softmax_backward_f16 => check_softmax_backward::<f16>;
    attention_forward_fp32 => check_forward_fp32;
    attention_forward_tf32 => check_forward_tf32;
    attention_forward_bf16 => check_forward_bf16;
    attention_forward_fp16 => check_forward_fp16;
    attention_backward_fp32 => check_backward_fp32;
    attention_backward_tf32 => check_backward_tf32;
    attention_backward_bf16 => check_backward_bf16;
    attention_backward_fp16 => check_backward_fp16;
    attention_argument_errors => check_argument_errors;
}
