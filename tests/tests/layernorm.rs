//! LayerNorm forward, fused residual + forward, and backward against `cpu_ref` (run on the
//! widened inputs; results within a few f32 ulps of the f32 reference, plus one ulp for
//! 16-bit storage). Rows mix scales from 1e-2 to 10, so `EPS` matters in some of them and
//! a wrong epsilon fails. The backward's determinism is tested bit for bit.

use cpu_ref::precision::Element;
use gpu_host::kernels::elementwise::FloatElement;
use gpu_host::kernels::layernorm::{
    LayerNormBackward, LayerNormForward, LayerNormStats, ResidualLayerNormForward,
    layernorm_backward, layernorm_backward_scratch_len, layernorm_forward,
    residual_layernorm_forward,
};
use gpu_host::{Device, DeviceBuffer, GpuError};
use half::{bf16, f16};
use integration_tests::{
    TestRng, Tolerance, assert_bits_eq, assert_close, assert_close_in, assert_floats_eq,
    kernel_tests, poisoned, small_sizes,
};

/// The f32 reference sums each row sequentially (relative error up to ~c·2⁻²⁴ in its mean and
/// variance; the kernel's 32-way tree is more accurate), so the outputs (up to ~5) differ by a
/// few 1e-6. A wrong epsilon moves the small-scale rows' rstd by a percent or more.
const OUT: Tolerance = Tolerance { abs: 2e-5, rel: 2e-5 };
const MEAN: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };
const RSTD: Tolerance = Tolerance { abs: 0.0, rel: 2e-5 };

/// (rows, c): every residue of c mod 8 around one vector, a c that is not a multiple of the
/// warp's 256-channel span, GPT-2's 768, and on a GPU GPT-2 124M at B = 16, T = 1024.
fn shapes(dev: &impl Device) -> Vec<(usize, usize)> {
    let mut shapes: Vec<(usize, usize)> = (8..=16).map(|c| (13, c)).collect();
    shapes.extend([(9, 1), (13, 300), (11, 768), (1, 768)]);
    if !small_sizes(dev) {
        shapes.push((16 * 1024, 768));
    }
    shapes
}

/// Rows of `c` values `scale·(offset + u)`, `u` uniform in [-1, 1), with a per-row scale in
/// [1e-2, 10] (the variance is comparable to EPS at the small end) and offset in [-3, 3)
/// (a mean of up to 3 standard deviations: conditioned well enough for f32 tolerances),
/// rounded to `T`.
fn rows<T: Element>(rng: &mut TestRng, rows: usize, c: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * c);
    for _ in 0..rows {
        let scale = 10f32.powf(rng.scalar(-2.0, 1.0));
        let offset = scale * rng.scalar(-3.0, 3.0);
        out.extend(rng.uniform(c, -1.0, 1.0).into_iter().map(|u| T::from_f32(offset + scale * u)));
    }
    out
}

fn values<T: Element>(rng: &mut TestRng, n: usize, lo: f32, hi: f32) -> Vec<T> {
    rng.uniform(n, lo, hi).into_iter().map(T::from_f32).collect()
}

fn widen<T: Element>(x: &[T]) -> Vec<f32> {
    x.iter().map(|v| v.to_f32()).collect()
}

/// The f32 reference of the forward on widened inputs: (out, mean, rstd).
fn reference_forward<T: Element>(
    inp: &[T],
    weight: &[T],
    bias: &[T],
    rows: usize,
    c: usize,
) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let (mut out, mut mean, mut rstd) = (vec![0.0; rows * c], vec![0.0; rows], vec![0.0; rows]);
    let (x, w, b) = (widen(inp), widen(weight), widen(bias));
    cpu_ref::layernorm_forward(&mut out, &mut mean, &mut rstd, &x, &w, &b, rows, c);
    (out, mean, rstd)
}

fn check_forward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (r, c) in shapes(dev) {
        for offset in [0, 1] {
            let inp = rows::<T>(&mut rng, r, c);
            let weight = values::<T>(&mut rng, c, -2.0, 2.0);
            let bias = values::<T>(&mut rng, c, -1.0, 1.0);
            let (want, want_mean, want_rstd) = reference_forward(&inp, &weight, &bias, r, c);
            // `offset` shifts the input and output windows off 16-byte alignment.
            let mut dinp = poisoned::<_, T>(dev, offset + r * c).unwrap();
            dev.copy_to_device(&inp, dinp.view_mut().slice_mut(offset..offset + r * c).unwrap())
                .unwrap();
            let (dw, db) = (dev.upload(&weight).unwrap(), dev.upload(&bias).unwrap());
            let mut out = poisoned::<_, T>(dev, offset + r * c).unwrap();
            let (mut mean, mut rstd) =
                (poisoned::<_, f32>(dev, r).unwrap(), poisoned::<_, f32>(dev, r).unwrap());
            let args = LayerNormForward {
                inp: dinp.view().slice(offset..offset + r * c).unwrap(),
                weight: dw.view(),
                bias: db.view(),
                out: out.view_mut().slice_mut(offset..offset + r * c).unwrap(),
                stats: Some(LayerNormStats { mean: mean.view_mut(), rstd: rstd.view_mut() }),
            };
            layernorm_forward(dev, c, args).unwrap();
            let what = format!(
                "layernorm_forward_{} rows={r} c={c} offset={offset}",
                <T as Element>::NAME
            );
            let got = dev.download(out.view().slice(offset..offset + r * c).unwrap()).unwrap();
            assert_close_in(&what, rng.seed(), &got, &want, OUT);
            let got_mean = dev.download(mean.view()).unwrap();
            assert_close(&format!("{what} mean"), rng.seed(), &got_mean, &want_mean, MEAN);
            let got_rstd = dev.download(rstd.view()).unwrap();
            assert_close(&format!("{what} rstd"), rng.seed(), &got_rstd, &want_rstd, RSTD);

            // Without statistics (evaluation): the same output, bit for bit.
            let mut out2 = poisoned::<_, T>(dev, r * c).unwrap();
            let args = LayerNormForward {
                inp: dinp.view().slice(offset..offset + r * c).unwrap(),
                weight: dw.view(),
                bias: db.view(),
                out: out2.view_mut(),
                stats: None,
            };
            layernorm_forward(dev, c, args).unwrap();
            assert_bits_eq(
                &format!("{what} no stats"),
                rng.seed(),
                &dev.download(out2.view()).unwrap(),
                &got,
            );
        }
    }
}

fn check_residual_forward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (r, c) in shapes(dev) {
        let inp1 = rows::<T>(&mut rng, r, c);
        let inp2 = values::<T>(&mut rng, r * c, -1.0, 1.0);
        let weight = values::<T>(&mut rng, c, -2.0, 2.0);
        let bias = values::<T>(&mut rng, c, -1.0, 1.0);
        let mut sum = vec![0.0; r * c];
        cpu_ref::residual_forward(&mut sum, &widen(&inp1), &widen(&inp2));
        let want_residual: Vec<T> = sum.iter().map(|&v| T::from_f32(v)).collect();
        let (want, want_mean, want_rstd) = reference_forward(&want_residual, &weight, &bias, r, c);

        let (d1, d2) = (dev.upload(&inp1).unwrap(), dev.upload(&inp2).unwrap());
        let (dw, db) = (dev.upload(&weight).unwrap(), dev.upload(&bias).unwrap());
        let mut residual = poisoned::<_, T>(dev, r * c).unwrap();
        let mut out = poisoned::<_, T>(dev, r * c).unwrap();
        let (mut mean, mut rstd) =
            (poisoned::<_, f32>(dev, r).unwrap(), poisoned::<_, f32>(dev, r).unwrap());
        let args = ResidualLayerNormForward {
            inp1: d1.view(),
            inp2: d2.view(),
            residual: residual.view_mut(),
            weight: dw.view(),
            bias: db.view(),
            out: out.view_mut(),
            stats: Some(LayerNormStats { mean: mean.view_mut(), rstd: rstd.view_mut() }),
        };
        residual_layernorm_forward(dev, c, args).unwrap();
        let what = format!("residual_layernorm_forward_{} rows={r} c={c}", <T as Element>::NAME);
        let got_residual = dev.download(residual.view()).unwrap();
        assert_floats_eq(&format!("{what} residual"), rng.seed(), &got_residual, &want_residual);
        assert_close_in(&what, rng.seed(), &dev.download(out.view()).unwrap(), &want, OUT);
        assert_close(
            &format!("{what} mean"),
            rng.seed(),
            &dev.download(mean.view()).unwrap(),
            &want_mean,
            MEAN,
        );
        assert_close(
            &format!("{what} rstd"),
            rng.seed(),
            &dev.download(rstd.view()).unwrap(),
            &want_rstd,
            RSTD,
        );
    }
}

/// Host copies of one backward problem.
struct BackwardCase<T> {
    rows: usize,
    c: usize,
    dout: Vec<T>,
    inp: Vec<T>,
    weight: Vec<T>,
    mean: Vec<f32>,
    rstd: Vec<f32>,
    dinp: Vec<T>,
    dweight: Vec<f32>,
    dbias: Vec<f32>,
}

impl<T: FloatElement + Element> BackwardCase<T> {
    fn new(rng: &mut TestRng, r: usize, c: usize) -> Self {
        let inp = rows::<T>(rng, r, c);
        let weight = values::<T>(rng, c, -2.0, 2.0);
        let (_, mean, rstd) = reference_forward(&inp, &weight, &weight, r, c);
        Self {
            rows: r,
            c,
            dout: values(rng, r * c, -1.0, 1.0),
            inp,
            weight,
            mean,
            rstd,
            dinp: values(rng, r * c, -1.0, 1.0),
            dweight: rng.uniform(c, -1.0, 1.0),
            dbias: rng.uniform(c, -1.0, 1.0),
        }
    }

    /// The f32 reference: (dinp, dweight, dbias) after accumulation.
    fn reference(&self) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let (mut dinp, mut dw, mut db) =
            (widen(&self.dinp), self.dweight.clone(), self.dbias.clone());
        cpu_ref::layernorm_backward(
            &mut dinp,
            &mut dw,
            &mut db,
            &widen(&self.dout),
            &widen(&self.inp),
            &widen(&self.weight),
            &self.mean,
            &self.rstd,
            self.rows,
            self.c,
        );
        (dinp, dw, db)
    }

    /// Runs the kernels on fresh device copies (scratch poisoned): (dinp, dweight, dbias).
    fn run<D: Device>(&self, dev: &D) -> (Vec<T>, Vec<f32>, Vec<f32>) {
        let up = |x: &[T]| dev.upload(x).unwrap();
        let (dout, inp, weight) = (up(&self.dout), up(&self.inp), up(&self.weight));
        let (mean, rstd) = (dev.upload(&self.mean).unwrap(), dev.upload(&self.rstd).unwrap());
        let mut dinp = up(&self.dinp);
        let (mut dw, mut db) =
            (dev.upload(&self.dweight).unwrap(), dev.upload(&self.dbias).unwrap());
        let mut scratch =
            poisoned::<_, f32>(dev, layernorm_backward_scratch_len(self.rows, self.c)).unwrap();
        let args = LayerNormBackward {
            dout: dout.view(),
            inp: inp.view(),
            weight: weight.view(),
            mean: mean.view(),
            rstd: rstd.view(),
            dinp: dinp.view_mut(),
            dweight: dw.view_mut(),
            dbias: db.view_mut(),
            scratch: scratch.view_mut(),
        };
        layernorm_backward(dev, self.c, args).unwrap();
        (
            dev.download(dinp.view()).unwrap(),
            dev.download(dw.view()).unwrap(),
            dev.download(db.view()).unwrap(),
        )
    }
}

fn check_backward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (r, c) in shapes(dev) {
        let case = BackwardCase::<T>::new(&mut rng, r, c);
        let (want_dinp, want_dw, want_db) = case.reference();
        let (dinp, dw, db) = case.run(dev);
        let what = format!("layernorm_backward_{} rows={r} c={c}", <T as Element>::NAME);
        // dinp: rstd (up to 100 in the small-scale rows) amplifies the row sums' rounding.
        let dinp_tol = Tolerance { abs: 2e-5, rel: 1e-5 };
        assert_close_in(&format!("{what} dinp"), rng.seed(), &dinp, &want_dinp, dinp_tol);
        // Parameter gradients: sums over the rows in another order.
        let sum_tol = Tolerance { abs: 1e-5 * (r as f64).sqrt(), rel: 1e-5 };
        assert_close(&format!("{what} dweight"), rng.seed(), &dw, &want_dw, sum_tol);
        assert_close(&format!("{what} dbias"), rng.seed(), &db, &want_db, sum_tol);

        let (dinp2, dw2, db2) = case.run(dev);
        assert_bits_eq(&format!("{what} dinp, second run"), rng.seed(), &dinp2, &dinp);
        assert_bits_eq(&format!("{what} dweight, second run"), rng.seed(), &dw2, &dw);
        assert_bits_eq(&format!("{what} dbias, second run"), rng.seed(), &db2, &db);
    }
}

/// Bad shapes are rejected before launch, naming the argument.
fn check_argument_errors(dev: &impl Device) {
    let x = dev.upload(&[1.0f32; 24]).unwrap();
    let w = dev.upload(&[1.0f32; 8]).unwrap();
    let mut out = dev.alloc::<f32>(24).unwrap();
    for (c, arg) in [(7, "inp"), (6, "weight"), (0, "c")] {
        let args = LayerNormForward {
            inp: x.view(),
            weight: w.view(),
            bias: w.view(),
            out: out.view_mut(),
            stats: None,
        };
        let err = layernorm_forward(dev, c, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "layernorm_forward", arg: a, .. } if *a == arg),
            "c = {c}: {err}"
        );
    }

    let (mut mean, mut rstd) = (dev.alloc::<f32>(3).unwrap(), dev.alloc::<f32>(2).unwrap());
    let stats = LayerNormStats { mean: mean.view_mut(), rstd: rstd.view_mut() };
    let args = LayerNormForward {
        inp: x.view(),
        weight: w.view(),
        bias: w.view(),
        out: out.view_mut(),
        stats: Some(stats),
    };
    let err = layernorm_forward(dev, 8, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "rstd", .. }), "{err}");

    let stats3 = dev.upload(&[1.0f32; 3]).unwrap();
    let (mut dinp, mut dw, mut db) =
        (dev.alloc::<f32>(24).unwrap(), dev.alloc::<f32>(8).unwrap(), dev.alloc::<f32>(8).unwrap());
    let mut scratch = dev.alloc::<f32>(layernorm_backward_scratch_len(3, 8) - 1).unwrap();
    let args = LayerNormBackward {
        dout: x.view(),
        inp: x.view(),
        weight: w.view(),
        mean: stats3.view(),
        rstd: stats3.view(),
        dinp: dinp.view_mut(),
        dweight: dw.view_mut(),
        dbias: db.view_mut(),
        scratch: scratch.view_mut(),
    };
    let err = layernorm_backward(dev, 8, args).unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: "layernorm_backward", arg: "scratch", .. }),
        "{err}"
    );
}

kernel_tests! {
    layernorm_forward_f32 => check_forward::<f32>;
    layernorm_forward_bf16 => check_forward::<bf16>;
    layernorm_forward_f16 => check_forward::<f16>;
    residual_layernorm_forward_f32 => check_residual_forward::<f32>;
    residual_layernorm_forward_bf16 => check_residual_forward::<bf16>;
    residual_layernorm_forward_f16 => check_residual_forward::<f16>;
    layernorm_backward_f32 => check_backward::<f32>;
    layernorm_backward_bf16 => check_backward::<bf16>;
    layernorm_backward_f16 => check_backward::<f16>;
    layernorm_argument_errors => check_argument_errors;
}
