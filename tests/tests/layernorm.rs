//! LayerNorm forward, fused residual + forward, and backward against `cpu_ref` (run on the
//! widened inputs; results within a few f32 ulps of the f32 reference, plus one ulp for
//! 16-bit storage). Rows mix scales from 1e-4 to 10, so `EPS` dominates some of them and
//! an epsilon wrong by 1e-4 fails. The backward's determinism is tested bit for bit.

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
    TestRng, Tolerance, alignment_cases, assert_bits_eq, assert_close, assert_close_in,
    assert_floats_eq, kernel_tests, poisoned, small_sizes, upload_at,
};
use kernel_abi::layernorm::{backward_parts, backward_rows_per_block, backward_warps};
use ptx_sim::Simulator;

/// The f32 reference sums each row sequentially (relative error up to ~c·2⁻²⁴ in its mean and
/// variance; the kernel's 32-way tree is more accurate), so the outputs (up to ~5) differ by a
/// few 1e-6. A wrong epsilon moves the small-scale rows' rstd by a percent or more.
const OUT: Tolerance = Tolerance { abs: 2e-5, rel: 2e-5 };
const MEAN: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };
const RSTD: Tolerance = Tolerance { abs: 0.0, rel: 2e-5 };

/// (rows, c): every residue of c mod 8 around one vector, a c that is not a multiple of the
/// warp's 256-channel span, GPT-2's 768, 1024 (the largest row the forward holds in
/// registers) and 1600 (past it: chunk by chunk), and on a GPU GPT-2 124M at B = 16, T = 1024.
fn shapes(dev: &impl Device) -> Vec<(usize, usize)> {
    let mut shapes: Vec<(usize, usize)> = (8..=16).map(|c| (13, c)).collect();
    shapes.extend([ALIGNMENT_SHAPE, (9, 1), (13, 300), (11, 768), (1, 768), (5, 1024), (3, 1600)]);
    if !small_sizes(dev) {
        shapes.push((16 * 1024, 768));
    }
    shapes
}

/// Rows of `c` values `scale·(offset + u)`, `u` uniform in [-1, 1), with a per-row scale in
/// [1e-4, 10] (at the small end the variance is far below EPS, so that rstd is about
/// EPS^-1/2 and an epsilon wrong by 1e-4 moves it by 5e-5, over `RSTD`) and offset in
/// [-3, 3) (a mean of up to 3 standard deviations: conditioned well enough for f32
/// tolerances), rounded to `T`.
fn rows<T: Element>(rng: &mut TestRng, rows: usize, c: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(rows * c);
    for _ in 0..rows {
        let scale = 10f32.powf(rng.scalar(-4.0, 1.0));
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

/// Offsets (in elements) of each buffer from 16-byte alignment, in the kernel's argument
/// order: all aligned, all off, and, on a shape of the vector path, each buffer off alone (so
/// that the vector path's test of every pointer is needed).
fn offset_cases<const N: usize>(shape: (usize, usize)) -> Vec<[usize; N]> {
    if shape == ALIGNMENT_SHAPE { alignment_cases() } else { vec![[0; N], [1; N]] }
}

/// The shape on which each buffer is misaligned alone: c % 8 == 0, so all-aligned buffers run
/// the vector path.
const ALIGNMENT_SHAPE: (usize, usize) = (3, 16);

fn check_forward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (r, c) in shapes(dev) {
        for offsets in offset_cases::<4>((r, c)) {
            forward_case::<T>(dev, &mut rng, (r, c), offsets);
        }
    }
}

/// `(out, Some((mean, rstd)))` of one forward run, the statistics when asked for.
type ForwardRun<T> = (Vec<T>, Option<(Vec<f32>, Vec<f32>)>);

/// Runs the forward on host rows `inp` and channel vectors `weight`, `bias`, with `[inp,
/// weight, bias, out]` placed `offsets` elements into fresh allocations (outputs poisoned),
/// saving the statistics when `stats`.
fn run_forward<T: FloatElement + Element>(
    dev: &impl Device,
    (inp, weight, bias): (&[T], &[T], &[T]),
    (r, c): (usize, usize),
    offsets: [usize; 4],
    stats: bool,
) -> ForwardRun<T> {
    let [o_inp, o_w, o_b, o_out] = offsets;
    let dinp = upload_at(dev, inp, o_inp).unwrap();
    let dw = upload_at(dev, weight, o_w).unwrap();
    let db = upload_at(dev, bias, o_b).unwrap();
    let mut out = poisoned::<_, T>(dev, o_out + r * c).unwrap();
    let (mut mean, mut rstd) =
        (poisoned::<_, f32>(dev, r).unwrap(), poisoned::<_, f32>(dev, r).unwrap());
    let args = LayerNormForward {
        inp: dinp.view().slice(o_inp..o_inp + r * c).unwrap(),
        weight: dw.view().slice(o_w..o_w + c).unwrap(),
        bias: db.view().slice(o_b..o_b + c).unwrap(),
        out: out.view_mut().slice_mut(o_out..o_out + r * c).unwrap(),
        stats: stats.then(|| LayerNormStats { mean: mean.view_mut(), rstd: rstd.view_mut() }),
    };
    layernorm_forward(dev, c, args).unwrap();
    let out = dev.download(out.view().slice(o_out..o_out + r * c).unwrap()).unwrap();
    let stats =
        stats.then(|| (dev.download(mean.view()).unwrap(), dev.download(rstd.view()).unwrap()));
    (out, stats)
}

/// One forward problem, with `[inp, weight, bias, out]` placed `offsets` elements into their
/// allocations.
fn forward_case<T: FloatElement + Element>(
    dev: &impl Device,
    rng: &mut TestRng,
    (r, c): (usize, usize),
    offsets: [usize; 4],
) {
    let inp = rows::<T>(rng, r, c);
    let weight = values::<T>(rng, c, -2.0, 2.0);
    let bias = values::<T>(rng, c, -1.0, 1.0);
    let (want, want_mean, want_rstd) = reference_forward(&inp, &weight, &bias, r, c);
    let data = (&inp[..], &weight[..], &bias[..]);
    let (got, stats) = run_forward(dev, data, (r, c), offsets, true);
    let (got_mean, got_rstd) = stats.unwrap();
    let what =
        format!("layernorm_forward_{} rows={r} c={c} offsets={offsets:?}", <T as Element>::NAME);
    assert_close_in(&what, rng.seed(), &got, &want, OUT);
    assert_close(&format!("{what} mean"), rng.seed(), &got_mean, &want_mean, MEAN);
    assert_close(&format!("{what} rstd"), rng.seed(), &got_rstd, &want_rstd, RSTD);

    // Without statistics (evaluation): the same output, bit for bit.
    let (no_stats, _) = run_forward(dev, data, (r, c), offsets, false);
    assert_bits_eq(&format!("{what} no stats"), rng.seed(), &no_stats, &got);
}

/// The forward's two paths, rows held in registers (aligned buffers, c <= 1024) and chunk by
/// chunk (here: every buffer one element off alignment), sum in the same order: the same
/// output and statistics, bit for bit, on the same data.
fn check_forward_paths_agree<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (r, c) in [(7, 768), (5, 1024), (6, 264)] {
        let inp = rows::<T>(&mut rng, r, c);
        let weight = values::<T>(&mut rng, c, -2.0, 2.0);
        let bias = values::<T>(&mut rng, c, -1.0, 1.0);
        let data = (&inp[..], &weight[..], &bias[..]);
        let (cached, stats) = run_forward(dev, data, (r, c), [0; 4], true);
        let (chunked, stats2) = run_forward(dev, data, (r, c), [1; 4], true);
        let ((mean, rstd), (mean2, rstd2)) = (stats.unwrap(), stats2.unwrap());
        let what = format!("layernorm_forward_{} rows={r} c={c}", <T as Element>::NAME);
        assert_bits_eq(&format!("{what} out"), rng.seed(), &cached, &chunked);
        assert_bits_eq(&format!("{what} mean"), rng.seed(), &mean, &mean2);
        assert_bits_eq(&format!("{what} rstd"), rng.seed(), &rstd, &rstd2);
    }
}

fn check_residual_forward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (r, c) in shapes(dev) {
        for offsets in offset_cases::<6>((r, c)) {
            residual_forward_case::<T>(dev, &mut rng, (r, c), offsets);
        }
    }
}

/// One fused residual + forward problem, with `[inp1, inp2, residual, weight, bias, out]`
/// placed `offsets` elements into their allocations.
fn residual_forward_case<T: FloatElement + Element>(
    dev: &impl Device,
    rng: &mut TestRng,
    (r, c): (usize, usize),
    offsets: [usize; 6],
) {
    let inp1 = rows::<T>(rng, r, c);
    let inp2 = values::<T>(rng, r * c, -1.0, 1.0);
    let weight = values::<T>(rng, c, -2.0, 2.0);
    let bias = values::<T>(rng, c, -1.0, 1.0);
    let mut sum = vec![0.0; r * c];
    cpu_ref::residual_forward(&mut sum, &widen(&inp1), &widen(&inp2));
    let want_residual: Vec<T> = sum.iter().map(|&v| T::from_f32(v)).collect();
    let (want, want_mean, want_rstd) = reference_forward(&want_residual, &weight, &bias, r, c);

    let [o1, o2, o_res, o_w, o_b, o_out] = offsets;
    let (d1, d2) = (upload_at(dev, &inp1, o1).unwrap(), upload_at(dev, &inp2, o2).unwrap());
    let (dw, db) = (upload_at(dev, &weight, o_w).unwrap(), upload_at(dev, &bias, o_b).unwrap());
    let mut residual = poisoned::<_, T>(dev, o_res + r * c).unwrap();
    let mut out = poisoned::<_, T>(dev, o_out + r * c).unwrap();
    let (mut mean, mut rstd) =
        (poisoned::<_, f32>(dev, r).unwrap(), poisoned::<_, f32>(dev, r).unwrap());
    let args = ResidualLayerNormForward {
        inp1: d1.view().slice(o1..o1 + r * c).unwrap(),
        inp2: d2.view().slice(o2..o2 + r * c).unwrap(),
        residual: residual.view_mut().slice_mut(o_res..o_res + r * c).unwrap(),
        weight: dw.view().slice(o_w..o_w + c).unwrap(),
        bias: db.view().slice(o_b..o_b + c).unwrap(),
        out: out.view_mut().slice_mut(o_out..o_out + r * c).unwrap(),
        stats: Some(LayerNormStats { mean: mean.view_mut(), rstd: rstd.view_mut() }),
    };
    residual_layernorm_forward(dev, c, args).unwrap();
    let what = format!(
        "residual_layernorm_forward_{} rows={r} c={c} offsets={offsets:?}",
        <T as Element>::NAME
    );
    let got_residual = dev.download(residual.view().slice(o_res..o_res + r * c).unwrap()).unwrap();
    assert_floats_eq(&format!("{what} residual"), rng.seed(), &got_residual, &want_residual);
    let got = dev.download(out.view().slice(o_out..o_out + r * c).unwrap()).unwrap();
    assert_close_in(&what, rng.seed(), &got, &want, OUT);
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

/// Host copies of one backward problem.
#[derive(Clone)]
struct BackwardCase<T> {
    rows: usize,
    c: usize,
    /// Element offsets of `[dout, inp, weight, dinp]` from 16-byte alignment.
    offsets: [usize; 4],
    dout: Vec<T>,
    inp: Vec<T>,
    weight: Vec<T>,
    mean: Vec<f32>,
    rstd: Vec<f32>,
    dinp: Vec<T>,
    /// The parameter gradients before the launch: random under `beta = 1`, NaN under 0
    /// (overwritten without being read).
    dweight: Vec<f32>,
    dbias: Vec<f32>,
    /// `dinp`'s column sums before the launch, as the gradients, when the `colsum` kernels run.
    dinp_sum: Option<Vec<f32>>,
    beta: f32,
}

/// What one backward run leaves.
struct BackwardRun<T> {
    dinp: Vec<T>,
    dweight: Vec<f32>,
    dbias: Vec<f32>,
    dinp_sum: Option<Vec<f32>>,
    /// The scratch: the first kernel's per-block sums first.
    partials: Vec<f32>,
}

impl<T: FloatElement + Element> BackwardCase<T> {
    fn new(
        rng: &mut TestRng,
        (r, c): (usize, usize),
        offsets: [usize; 4],
        beta: f32,
        colsum: bool,
    ) -> Self {
        let old_grads = |rng: &mut TestRng| {
            if beta == 0.0 { vec![f32::NAN; c] } else { rng.uniform(c, -1.0, 1.0) }
        };
        let inp = rows::<T>(rng, r, c);
        let weight = values::<T>(rng, c, -2.0, 2.0);
        let (_, mean, rstd) = reference_forward(&inp, &weight, &weight, r, c);
        Self {
            rows: r,
            c,
            offsets,
            dout: values(rng, r * c, -1.0, 1.0),
            inp,
            weight,
            mean,
            rstd,
            dinp: values(rng, r * c, -1.0, 1.0),
            dweight: old_grads(rng),
            dbias: old_grads(rng),
            dinp_sum: colsum.then(|| old_grads(rng)),
            beta,
        }
    }

    /// The f32 reference: (dinp, dweight, dbias) after accumulation (into zeros under
    /// `beta = 0`).
    fn reference(&self) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
        let old = |grad: &[f32]| grad.iter().map(|&g| self.beta * g).collect::<Vec<_>>();
        let (mut dw, mut db) = if self.beta == 0.0 {
            (vec![0.0; self.c], vec![0.0; self.c])
        } else {
            (old(&self.dweight), old(&self.dbias))
        };
        let mut dinp = widen(&self.dinp);
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

    /// Runs the kernels on fresh device copies (scratch poisoned).
    fn run<D: Device>(&self, dev: &D) -> BackwardRun<T> {
        let [o_dout, o_inp, o_w, o_dinp] = self.offsets;
        let (n, c) = (self.rows * self.c, self.c);
        let dout = upload_at(dev, &self.dout, o_dout).unwrap();
        let inp = upload_at(dev, &self.inp, o_inp).unwrap();
        let weight = upload_at(dev, &self.weight, o_w).unwrap();
        let (mean, rstd) = (dev.upload(&self.mean).unwrap(), dev.upload(&self.rstd).unwrap());
        let mut dinp = upload_at(dev, &self.dinp, o_dinp).unwrap();
        let (mut dw, mut db) =
            (dev.upload(&self.dweight).unwrap(), dev.upload(&self.dbias).unwrap());
        let mut dinp_sum = self.dinp_sum.as_ref().map(|sum| dev.upload(sum).unwrap());
        let colsum = dinp_sum.is_some();
        let scratch_len = layernorm_backward_scratch_len(self.rows, self.c, colsum);
        let mut scratch = poisoned::<_, f32>(dev, scratch_len).unwrap();
        let args = LayerNormBackward {
            dout: dout.view().slice(o_dout..o_dout + n).unwrap(),
            inp: inp.view().slice(o_inp..o_inp + n).unwrap(),
            weight: weight.view().slice(o_w..o_w + c).unwrap(),
            mean: mean.view(),
            rstd: rstd.view(),
            dinp: dinp.view_mut().slice_mut(o_dinp..o_dinp + n).unwrap(),
            dweight: dw.view_mut(),
            dbias: db.view_mut(),
            dinp_sum: dinp_sum.as_mut().map(|sum| sum.view_mut()),
            beta: self.beta,
            scratch: scratch.view_mut(),
        };
        layernorm_backward(dev, self.c, args).unwrap();
        BackwardRun {
            dinp: dev.download(dinp.view().slice(o_dinp..o_dinp + n).unwrap()).unwrap(),
            dweight: dev.download(dw.view()).unwrap(),
            dbias: dev.download(db.view()).unwrap(),
            dinp_sum: dinp_sum.map(|sum| dev.download(sum.view()).unwrap()),
            partials: dev.download(scratch.view()).unwrap(),
        }
    }
}

/// The `colsum` kernels' per-block `Σ dinp` as `kernel_abi::layernorm` documents them, from the
/// `dinp` they stored: block `b`'s warps `w` take rows `b·R + w, b·R + w + W, …`, each summing
/// them from 0.0 in order, and the block adds its warps' sums from 0.0 in warp order.
fn dinp_partials<T: Element>(dinp: &[T], rows: usize, c: usize) -> Vec<f32> {
    let per_block = backward_rows_per_block(c as u32) as usize;
    let warps = backward_warps(c as u32) as usize;
    let mut partials = Vec::new();
    for first in (0..rows).step_by(per_block) {
        let block_rows = first..rows.min(first + per_block);
        partials.extend((0..c).map(|ch| {
            (0..warps)
                .map(|w| block_rows.clone().skip(w).step_by(warps))
                .map(|rows| rows.fold(0.0f32, |sum, row| sum + dinp[row * c + ch].to_f32()))
                .fold(0.0f32, |total, warp| total + warp)
        }));
    }
    partials
}

/// The backward's shapes: the forward's, and on every device some that run several blocks
/// (a block takes `backward_rows_per_block(c)` rows, 32 up to c = 768), with fewer than 8
/// warps per block at c = 1024 and 1600: the per-block partial sums and their reduction. At
/// 1127 × 76, 36 blocks: the reduction's 16 groups take 2 or 3 slots each (`REDUCE_GROUPS`),
/// and its 10 blocks of 8 channels end in a partial one. No rows: the parameter gradients
/// stay (`beta = 1`) or become zeros (`beta = 0`).
fn backward_shapes(dev: &impl Device) -> Vec<(usize, usize)> {
    let mut shapes = shapes(dev);
    shapes.extend([(70, 768), (33, 1024), (40, 1600), (1127, 76), (0, 40), (0, 41)]);
    shapes
}

/// Every shape, the parameter gradients accumulated (`beta = 1`) in every other one and
/// overwritten (`beta = 0`, NaN before the launch) in the others; `dinp` summed too (the
/// `colsum` kernels) in every other pair of them, and on the shape of the alignment cases.
fn check_backward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (i, (r, c)) in backward_shapes(dev).into_iter().enumerate() {
        // The scalar path is the c % 8 != 0 shapes'; misaligned buffers take it too.
        let offsets =
            if (r, c) == ALIGNMENT_SHAPE { offset_cases::<4>((r, c)) } else { vec![[0; 4]] };
        let beta = if i % 2 == 0 { 1.0 } else { 0.0 };
        let colsums: &[bool] = match (r, c) == ALIGNMENT_SHAPE {
            true => &[false, true],
            false if i % 4 >= 2 => &[true],
            false => &[false],
        };
        for offsets in offsets {
            for &colsum in colsums {
                let case = BackwardCase::<T>::new(&mut rng, (r, c), offsets, beta, colsum);
                backward_case(dev, &mut rng, &case);
            }
        }
    }
}

/// One backward problem, twice (the second run bit for bit like the first).
fn backward_case<T: FloatElement + Element>(
    dev: &impl Device,
    rng: &mut TestRng,
    case: &BackwardCase<T>,
) {
    let (r, c, offsets, beta) = (case.rows, case.c, case.offsets, case.beta);
    let (want_dinp, want_dw, want_db) = case.reference();
    let run = case.run(dev);
    let (dinp, dw, db, partials) = (&run.dinp, &run.dweight, &run.dbias, &run.partials);
    let what = format!(
        "layernorm_backward_{} rows={r} c={c} offsets={offsets:?} beta={beta} colsum={}",
        <T as Element>::NAME,
        case.dinp_sum.is_some(),
    );
    // dinp: rstd (up to EPS^-1/2 ≈ 316 in the small-scale rows) multiplies the row sums'
    // rounding, so each row's absolute allowance grows with its rstd past 100.
    for row in 0..r {
        let scale = (f64::from(case.rstd[row]) / 100.0).max(1.0);
        let dinp_tol = Tolerance { abs: 2e-5 * scale, rel: 1e-5 };
        let cols = row * c..(row + 1) * c;
        let (got, want) = (&dinp[cols.clone()], &want_dinp[cols]);
        assert_close_in(&format!("{what} dinp row {row}"), rng.seed(), got, want, dinp_tol);
    }
    // Parameter gradients: sums over the rows in another order.
    let sum_tol = Tolerance { abs: 1e-5 * (r as f64).sqrt(), rel: 1e-5 };
    assert_close(&format!("{what} dweight"), rng.seed(), dw, &want_dw, sum_tol);
    assert_close(&format!("{what} dbias"), rng.seed(), db, &want_db, sum_tol);

    // The second pass's documented order over the first pass's sums, bit for bit.
    let blocks = r.div_ceil(backward_rows_per_block(c as u32) as usize);
    let (mut exact_dw, mut exact_db) = (case.dweight.clone(), case.dbias.clone());
    let mut exact_sum = case.dinp_sum.clone();
    let sum = exact_sum.as_deref_mut();
    cpu_ref::layernorm_backward_reduce(partials, blocks, &mut exact_dw, &mut exact_db, sum, beta);
    assert_bits_eq(&format!("{what} dweight in the documented order"), rng.seed(), dw, &exact_dw);
    assert_bits_eq(&format!("{what} dbias in the documented order"), rng.seed(), db, &exact_db);

    if let (Some(old), Some(got)) = (&case.dinp_sum, &run.dinp_sum) {
        // Σ dinp: the column sums of the dinp stored (checked above), within the error bound
        // of f32 sums of r + 1 terms in any order (r + 1 rounding units of Σ |term|: the small
        // rows' rstd makes terms of several hundred), and its block partials exactly the
        // documented order's.
        for ch in 0..c {
            let column = (0..r).map(|row| f64::from(dinp[row * c + ch].to_f32()));
            let old = if beta == 0.0 { 0.0 } else { f64::from(old[ch]) };
            let (sum, magnitude) =
                column.fold((old, old.abs()), |(sum, mag), x| (sum + x, mag + x.abs()));
            let bound = (r + 1) as f64 * f64::from(f32::EPSILON) * magnitude;
            let error = (f64::from(got[ch]) - sum).abs();
            assert!(
                error <= bound,
                "{what} dinp_sum[{ch}] = {} against {sum} (bound {bound:e})\n  \
                 (TEST_SEED={} reproduces)",
                got[ch],
                rng.seed()
            );
        }
        let exact = exact_sum.expect("summed");
        let documented = format!("{what} dinp_sum in the documented order");
        assert_bits_eq(&documented, rng.seed(), got, &exact);
        let parts = backward_parts(true) as usize;
        let block_sums: Vec<f32> = (0..blocks)
            .flat_map(|b| partials[(b * parts + 2) * c..][..c].iter().copied())
            .collect();
        let want_block_sums = dinp_partials(dinp, r, c);
        let what = format!("{what} Σ dinp per block");
        assert_bits_eq(&what, rng.seed(), &block_sums, &want_block_sums);
    }

    let again = case.run(dev);
    assert_bits_eq(&format!("{what} dinp, second run"), rng.seed(), &again.dinp, dinp);
    assert_bits_eq(&format!("{what} dweight, second run"), rng.seed(), &again.dweight, dw);
    assert_bits_eq(&format!("{what} dbias, second run"), rng.seed(), &again.dbias, db);
    if let (Some(again), Some(sum)) = (&again.dinp_sum, &run.dinp_sum) {
        assert_bits_eq(&format!("{what} dinp_sum, second run"), rng.seed(), again, sum);
    }
}

/// The backward's two kernels for 16-bit rows: `layernorm_backward_cached_<ty>` (aligned
/// buffers, c <= 768, c % 8 == 0) and the chunked `layernorm_backward_<ty>` (here: every buffer
/// one element off alignment) add in the same order: the same `dinp`, per-block sums and
/// parameter gradients, bit for bit; their `colsum` variants too, `Σ dinp` included, and with
/// the same `dinp` and parameter gradients as without it. Several blocks, a last one with
/// fewer rows than warps, a row narrower than a warp's span (c = 264: lanes past it hold no
/// chunk) and one of a single chunk. Which kernel runs is tested by
/// `layernorm_backward_picks_its_kernel`.
fn check_backward_paths_agree<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (r, c) in [(70, 768), (37, 264), (9, 8)] {
        let case = BackwardCase::<T>::new(&mut rng, (r, c), [0; 4], 1.0, true);
        let plain = BackwardCase { dinp_sum: None, ..case.clone() };
        let misaligned = |case: &BackwardCase<T>| BackwardCase { offsets: [1; 4], ..case.clone() };
        for (case, colsum) in [(&plain, "plain"), (&case, "colsum")] {
            let cached = case.run(dev);
            let chunked = misaligned(case).run(dev);
            let what = format!(
                "layernorm_backward {colsum} paths, {} rows={r} c={c}",
                <T as Element>::NAME
            );
            assert_bits_eq(&format!("{what} dinp"), rng.seed(), &cached.dinp, &chunked.dinp);
            assert_bits_eq(
                &format!("{what} dweight"),
                rng.seed(),
                &cached.dweight,
                &chunked.dweight,
            );
            assert_bits_eq(&format!("{what} dbias"), rng.seed(), &cached.dbias, &chunked.dbias);
            let (cached_sum, chunked_sum) = (&cached.dinp_sum, &chunked.dinp_sum);
            if let (Some(cached_sum), Some(chunked_sum)) = (cached_sum, chunked_sum) {
                assert_bits_eq(&format!("{what} dinp_sum"), rng.seed(), cached_sum, chunked_sum);
            }
            let (cached, chunked) = (&cached.partials, &chunked.partials);
            assert_bits_eq(&format!("{what} block sums"), rng.seed(), cached, chunked);
        }
        let (plain, summed) = (plain.run(dev), case.run(dev));
        let what =
            format!("layernorm_backward colsum or not, {} rows={r} c={c}", <T as Element>::NAME);
        assert_bits_eq(&format!("{what} dinp"), rng.seed(), &plain.dinp, &summed.dinp);
        assert_bits_eq(&format!("{what} dweight"), rng.seed(), &plain.dweight, &summed.dweight);
        assert_bits_eq(&format!("{what} dbias"), rng.seed(), &plain.dbias, &summed.dbias);
    }
}

/// The backward launches `layernorm_backward_cached_<ty>` exactly for 16-bit rows of at most
/// 768 channels, `c % 8 == 0`, with `dout`, `inp`, `weight` and `dinp` 16-byte aligned, and
/// the `colsum` variant of its kernel when `dinp` is summed. On a simulator of its own: the
/// shared one's kernel times would mix in concurrent tests' launches.
#[test]
fn layernorm_backward_picks_its_kernel() {
    fn first_kernel<T: FloatElement + Element>(
        sim: &Simulator,
        shape: (usize, usize),
        offsets: [usize; 4],
        colsum: bool,
    ) -> String {
        let case = BackwardCase::<T>::new(&mut TestRng::new(), shape, offsets, 1.0, colsum);
        sim.start_kernel_times();
        case.run(sim);
        sim.take_kernel_times().unwrap()[0].name.to_string()
    }
    let sim = Simulator::new().unwrap();
    for colsum in [false, true] {
        let suffix = if colsum { "colsum_" } else { "" };
        let cached = |ty: &str| format!("layernorm_backward_cached_{suffix}{ty}");
        let chunked = |ty: &str| format!("layernorm_backward_{suffix}{ty}");
        let kernel = |shape, offsets| first_kernel::<bf16>(&sim, shape, offsets, colsum);
        assert_eq!(kernel((5, 768), [0; 4]), cached("bf16"));
        assert_eq!(first_kernel::<f16>(&sim, (5, 8), [0; 4], colsum), cached("f16"));
        assert_eq!(kernel((5, 776), [0; 4]), chunked("bf16"));
        assert_eq!(kernel((5, 764), [0; 4]), chunked("bf16"));
        assert_eq!(first_kernel::<f32>(&sim, (5, 768), [0; 4], colsum), chunked("f32"));
        for i in 0..4 {
            let mut offsets = [0; 4];
            offsets[i] = 1;
            let got = first_kernel::<f16>(&sim, (5, 768), offsets, colsum);
            assert_eq!(got, chunked("f16"), "{offsets:?}");
        }
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
    // Scratch one value short (the `colsum` kernels need a third more); a column sum of the
    // wrong length.
    let mut sum = dev.alloc::<f32>(8).unwrap();
    let mut short_sum = dev.alloc::<f32>(7).unwrap();
    for (colsum, short_scratch, arg) in
        [(false, true, "scratch"), (true, true, "scratch"), (true, false, "dinp_sum")]
    {
        let len = layernorm_backward_scratch_len(3, 8, colsum) - usize::from(short_scratch);
        let mut scratch = dev.alloc::<f32>(len).unwrap();
        let dinp_sum = match (colsum, short_scratch) {
            (false, _) => None,
            (true, true) => Some(sum.view_mut()),
            (true, false) => Some(short_sum.view_mut()),
        };
        let args = LayerNormBackward {
            dout: x.view(),
            inp: x.view(),
            weight: w.view(),
            mean: stats3.view(),
            rstd: stats3.view(),
            dinp: dinp.view_mut(),
            dweight: dw.view_mut(),
            dbias: db.view_mut(),
            dinp_sum,
            beta: 1.0,
            scratch: scratch.view_mut(),
        };
        let err = layernorm_backward(dev, 8, args).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "layernorm_backward", arg: a, .. } if *a == arg),
            "colsum {colsum}: {err}"
        );
    }

    // One warp's channel sums no longer fit in shared memory past 6144 channels.
    let c = 6145;
    let row = dev.upload(&vec![1.0f32; c]).unwrap();
    let stats1 = dev.upload(&[1.0f32]).unwrap();
    let (mut dinp, mut dw, mut db) =
        (dev.alloc::<f32>(c).unwrap(), dev.alloc::<f32>(c).unwrap(), dev.alloc::<f32>(c).unwrap());
    let mut scratch = dev.alloc::<f32>(4 * c).unwrap();
    let args = LayerNormBackward {
        dout: row.view(),
        inp: row.view(),
        weight: row.view(),
        mean: stats1.view(),
        rstd: stats1.view(),
        dinp: dinp.view_mut(),
        dweight: dw.view_mut(),
        dbias: db.view_mut(),
        dinp_sum: None,
        beta: 1.0,
        scratch: scratch.view_mut(),
    };
    let err = layernorm_backward(dev, c, args).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "c", .. }), "{err}");
}

kernel_tests! {
    layernorm_forward_f32 => check_forward::<f32>;
    layernorm_forward_bf16 => check_forward::<bf16>;
    layernorm_forward_f16 => check_forward::<f16>;
    layernorm_forward_paths_agree_f32 => check_forward_paths_agree::<f32>;
    layernorm_forward_paths_agree_bf16 => check_forward_paths_agree::<bf16>;
    residual_layernorm_forward_f32 => check_residual_forward::<f32>;
    residual_layernorm_forward_bf16 => check_residual_forward::<bf16>;
    residual_layernorm_forward_f16 => check_residual_forward::<f16>;
    layernorm_backward_f32 => check_backward::<f32>;
    layernorm_backward_bf16 => check_backward::<bf16>;
    layernorm_backward_f16 => check_backward::<f16>;
    layernorm_backward_paths_agree_bf16 => check_backward_paths_agree::<bf16>;
    layernorm_backward_paths_agree_f16 => check_backward_paths_agree::<f16>;
    layernorm_argument_errors => check_argument_errors;
}
