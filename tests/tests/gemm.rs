//! GEMM kernels against `cpu_ref::gemm`: every precision, layout, output type, epilogue,
//! alpha/beta, batch, aligned and unaligned operands, edge shapes; the column sums of the
//! tensor-core epilogues (bit for bit) and the bias-gradient reductions; argument errors. Small shapes with several blocks and partial tiles everywhere;
//! the GPT-2 124M shapes too on a GPU.
//!
//! Tolerances are per element and scale with the magnitude of what was summed:
//! `S = |alpha|·Σ_k |a||b| + |beta·c| + |bias|`. The reference uses the same rounded inputs (TF32
//! rounding, or the 16-bit values themselves) and sums in f64, so the GPU may differ by its f32
//! accumulation (`(K + 8)·2^-23·S`), by GELU's `ex2.approx.f32` and f32 evaluation of
//! `x·sigmoid(2u)` (below `|v|·2^-21`, taken as `|v|·2^-18`), and by the rounding of the output
//! type. On the simulator, f32 outputs must also stay within a root-mean-square bound at the
//! typical error (`assert_rms_error`), which a constant off by 1e-5 exceeds. Elements outside
//! the M×N matrices (ld padding, gaps between batches, slack after the end) must keep their
//! initial bits: the launch must not write them.

use cpu_ref::gemm::{self as reference, Gemm, Rounding};
use cpu_ref::precision::Element;
use gpu_host::kernels::elementwise::{FloatElement, fill};
use gpu_host::kernels::gemm::{
    Activation, Epilogue, GemmEngine, GemmOutput, GemmSpec, GemmTypes, Layout, Precision,
    WgmmaTile, bias_grad, bias_grad_from_col_sums, bias_grad_workspace_len, col_sum_groups,
    col_sums_len, gemm, gemm_split_k,
};
use gpu_host::{Device, DeviceBuffer, DeviceElement, GpuError};
use half::{bf16, f16};
use integration_tests::{TestRng, assert_bits_eq, kernel_tests, poisoned, small_sizes, upload_at};
use std::fmt::Write;

const LAYOUTS: [(Layout, Layout); 4] = [
    (Layout::RowMajor, Layout::RowMajor),
    (Layout::RowMajor, Layout::ColMajor),
    (Layout::ColMajor, Layout::RowMajor),
    (Layout::ColMajor, Layout::ColMajor),
];

/// The activation a case runs.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Act {
    None,
    /// GELU, storing the pre-activation or not.
    Gelu {
        store: bool,
    },
    DGelu,
}

/// One launch: the spec, the epilogue, and element offsets of the A/B/C views and of the bias
/// and pre-activation views inside their buffers (an odd offset breaks 16-byte alignment and
/// exercises the fallback paths).
#[derive(Clone, Copy, Debug)]
struct Case {
    spec: GemmSpec,
    bias: bool,
    act: Act,
    offsets: [usize; 3],
    epilogue_offsets: [usize; 2],
    /// Whether the epilogue also writes its column sums (ignored under FP32, which has none).
    col_sums: bool,
}

impl Case {
    fn new(m: usize, n: usize, k: usize, layouts: (Layout, Layout), precision: Precision) -> Self {
        let spec = GemmSpec::new(m, n, k, layouts.0, layouts.1, precision);
        Self {
            spec,
            bias: false,
            act: Act::None,
            offsets: [0; 3],
            epilogue_offsets: [0; 2],
            col_sums: false,
        }
    }

    /// With the column sums, on the tensor-core precisions.
    fn summed(mut self) -> Self {
        self.col_sums = self.spec.precision != Precision::Fp32;
        self
    }

    /// Leading dimensions rounded up to a multiple of 8 elements plus 8 (16-byte aligned rows
    /// for every element type, with padding): the `cp.async` / vector paths.
    fn aligned(mut self) -> Self {
        let pad = |ld: usize| ld.next_multiple_of(8) + 8;
        let s = &mut self.spec;
        (s.lda, s.ldb, s.ldc) = (pad(s.lda), pad(s.ldb), pad(s.ldc));
        self
    }

    /// Leading dimensions one element longer than the rows (odd unless the rows are even):
    /// rows are not 16-byte aligned, so the element-wise fallback paths run.
    fn odd_padded(mut self) -> Self {
        let odd = |ld: usize| ld + 1 + ld % 2;
        let s = &mut self.spec;
        (s.lda, s.ldb, s.ldc) = (odd(s.lda), odd(s.ldb), odd(s.ldc));
        self
    }
}

fn layout_ref(l: Layout) -> reference::Layout {
    match l {
        Layout::RowMajor => reference::Layout::RowMajor,
        Layout::ColMajor => reference::Layout::ColMajor,
    }
}

/// The reference of `s` as run by `engine` (which decides how TF32 inputs are rounded).
fn reference_gemm(s: &GemmSpec, engine: GemmEngine) -> Gemm {
    Gemm {
        m: s.m,
        n: s.n,
        k: s.k,
        batch: s.batch,
        a_layout: layout_ref(s.a_layout),
        b_layout: layout_ref(s.b_layout),
        lda: s.lda,
        ldb: s.ldb,
        ldc: s.ldc,
        stride_a: s.stride_a,
        stride_b: s.stride_b,
        stride_c: s.stride_c,
        alpha: s.alpha,
        beta: s.beta,
        rounding: match (s.precision, engine) {
            (Precision::Tf32, GemmEngine::Wgmma) => Rounding::Tf32Truncate,
            (Precision::Tf32, _) => Rounding::Tf32,
            _ => Rounding::None,
        },
    }
}

/// One ulp of `O`, relative: the GPU and the reference round values that differ by their
/// accumulation error, so near a rounding midpoint they may land on neighbouring numbers.
fn output_rounding<O: DeviceElement>() -> f64 {
    match O::NAME {
        "bf16" => 2f64.powi(-7),
        "f16" => 2f64.powi(-10),
        _ => 2f64.powi(-23),
    }
}

fn poison<T: DeviceElement>() -> T {
    let mut v = T::zeroed();
    bytemuck::bytes_of_mut(&mut v).fill(0xff);
    v
}

fn random<T: Element>(rng: &mut TestRng, n: usize, lo: f32, hi: f32) -> Vec<T> {
    rng.uniform(n, lo, hi).into_iter().map(T::from_f32).collect()
}

/// Checks `got` against `want` element by element: inside the matrices (where `tol` is
/// `Some`) within the tolerance, elsewhere bit-identical (untouched).
fn assert_matches<O: DeviceElement + Element>(
    what: &str,
    seed: u64,
    got: &[O],
    want: &[O],
    tol: &[Option<f64>],
) {
    let mut bad = Vec::new();
    for i in 0..got.len() {
        let ok = match tol[i] {
            Some(t) => {
                let (g, w) = (got[i].to_f32() as f64, want[i].to_f32() as f64);
                (g - w).abs() <= t
            }
            None => bytemuck::bytes_of(&got[i]) == bytemuck::bytes_of(&want[i]),
        };
        if !ok {
            bad.push(i);
        }
    }
    if bad.is_empty() {
        return;
    }
    let mut msg = format!("{what}: {} of {} elements wrong", bad.len(), got.len());
    for &i in bad.iter().take(8) {
        let kind = if tol[i].is_some() { "in matrix" } else { "outside (must be untouched)" };
        let _ = write!(
            msg,
            "\n  [{i}] {kind}: got {:?} want {:?} tol {:?}",
            got[i].to_f32(),
            want[i].to_f32(),
            tol[i]
        );
    }
    panic!("{msg}\n  (TEST_SEED={seed} reproduces)");
}

/// Runs `case` with input type `I` and output type `O`, checks C (and a stored
/// pre-activation) against the reference and the column sums bit for bit against those of
/// the C it wrote (`cpu_ref::gemm::col_sums`, into a poisoned buffer with slack that must stay
/// untouched), and returns C's buffer.
fn run<D: Device, I, O>(dev: &D, rng: &mut TestRng, case: &Case) -> Vec<O>
where
    I: GemmTypes<O> + Element,
    O: GemmOutput + Element,
{
    let s = &case.spec;
    let [a_off, b_off, c_off] = case.offsets;
    // One element of slack keeps every allocation non-empty (K = 0 reads nothing).
    let a: Vec<I> = random(rng, a_off + s.a_len() + 1, -1.0, 1.0);
    let b: Vec<I> = random(rng, b_off + s.b_len() + 1, -1.0, 1.0);
    let c_total = c_off + s.c_len() + 5;
    let c0: Vec<O> =
        if s.beta != 0.0 { random(rng, c_total, -1.0, 1.0) } else { vec![poison(); c_total] };
    let bias: Option<Vec<O>> = case.bias.then(|| random(rng, s.n, -1.0, 1.0));
    let pre0: Vec<O> = match case.act {
        Act::DGelu => random(rng, c_total, -3.0, 3.0),
        _ => vec![poison(); c_total],
    };

    let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    let elem = std::mem::size_of::<I>() as u64;
    let engine = s
        .engine_on(
            dev,
            da.view().addr() + a_off as u64 * elem,
            db.view().addr() + b_off as u64 * elem,
        )
        .unwrap_or(GemmEngine::MmaSync);
    let g = reference_gemm(s, engine);
    // The pre-activation buffer sits `p_off` elements into its allocation, its elements
    // indexed like C's.
    let [bias_off, p_off] = case.epilogue_offsets;
    let mut dc = dev.upload(&c0).unwrap();
    let mut dpre = upload_at(dev, &pre0, p_off).unwrap();
    let dbias = bias.as_ref().map(|v| upload_at(dev, v, bias_off).unwrap());
    let sums_len = col_sums_len(s.batch, s.m, s.n);
    let mut dsums = case.col_sums.then(|| poisoned::<D, f32>(dev, sums_len + 3).unwrap());
    {
        let pre_range = p_off + c_off..p_off + c_total;
        let pre_view = dpre.view_mut().slice_mut(pre_range.clone()).unwrap();
        let activation = match case.act {
            Act::None => Activation::None,
            Act::Gelu { store } => Activation::Gelu { pre_act: store.then_some(pre_view) },
            Act::DGelu => Activation::DGelu { pre_act: dpre.view().slice(pre_range).unwrap() },
        };
        let bias_view = dbias.as_ref().map(|d| d.view().slice(bias_off..bias_off + s.n).unwrap());
        let col_sums = dsums.as_mut().map(|d| d.view_mut());
        let epilogue = Epilogue { bias: bias_view, activation, col_sums };
        let a_view = da.view().slice(a_off..a_off + s.a_len()).unwrap();
        let b_view = db.view().slice(b_off..b_off + s.b_len()).unwrap();
        let c_view = dc.view_mut().slice_mut(c_off..c_total).unwrap();
        let launched = if s.workspace_len() > 0 {
            let mut workspace = poisoned::<D, f32>(dev, s.workspace_len()).unwrap();
            gemm_split_k(dev, s, a_view, b_view, c_view, epilogue, workspace.view_mut())
        } else {
            gemm(dev, s, a_view, b_view, c_view, epilogue)
        };
        launched.unwrap_or_else(|e| panic!("launch of {case:?} failed: {e}"));
    }
    let got = dev.download(dc.view()).unwrap();
    let got_pre = dev.download(dpre.view().slice(p_off..p_off + c_total).unwrap()).unwrap();
    if let Some(dsums) = dsums {
        let mut want_sums = reference::col_sums(&g, &got[c_off..]);
        want_sums.extend([f32::from_bits(u32::MAX); 3]);
        let got_sums = dev.download(dsums.view()).unwrap();
        assert_bits_eq(&format!("column sums of {case:?}"), rng.seed(), &got_sums, &want_sums);
    }

    // Reference output and pre-activation, on the same buffers (so untouched regions match).
    let (a_in, b_in) = (&a[a_off..], &b[b_off..]);
    let (mut want, mut want_pre) = (c0.clone(), pre0.clone());
    let act = match case.act {
        Act::None => reference::Activation::None,
        Act::Gelu { store } => {
            reference::Activation::Gelu { pre_act: store.then_some(&mut want_pre[c_off..]) }
        }
        Act::DGelu => reference::Activation::DGelu { pre_act: &pre0[c_off..] },
    };
    reference::gemm(&g, a_in, b_in, &mut want[c_off..], bias.as_deref(), act);

    // Tolerances from the unrounded pre-activation v and the magnitude S of its terms.
    let mut v: Vec<f32> = c0[c_off..].iter().map(|x| x.to_f32()).collect();
    let bias_f32: Option<Vec<f32>> = bias.as_ref().map(|b| b.iter().map(|x| x.to_f32()).collect());
    reference::gemm(&g, a_in, b_in, &mut v, bias_f32.as_deref(), reference::Activation::None);
    let accumulation = (s.k as f64 + 8.0) * 2f64.powi(-23);
    let out_round = output_rounding::<O>();
    // The spacing of f16's subnormals (one ulp near zero, where the relative bound vanishes).
    let floor = if <O as DeviceElement>::NAME == "f16" { 2f64.powi(-24) } else { 1e-30 };
    let rows: Vec<usize> = (0..s.m).collect();
    let (mut tol, mut tol_pre) = (vec![None; c_total], vec![None; c_total]);
    let mut typical = vec![None; c_total];
    for z in 0..s.batch {
        let abs = g.products(a_in, b_in, z, &rows, true);
        for m in 0..s.m {
            for n in 0..s.n {
                let at = g.c_index(z, m, n);
                let old =
                    if s.beta != 0.0 { (s.beta * c0[c_off + at].to_f32()).abs() } else { 0.0 };
                let bias_mag = bias.as_ref().map_or(0.0, |b| b[n].to_f32().abs());
                let mag = s.alpha.abs() as f64 * abs[m * s.n + n] + (old + bias_mag) as f64;
                let err_v = accumulation * mag;
                let v = v[at] as f64;
                let want_abs = want[c_off + at].to_f32().abs() as f64;
                let t = match case.act {
                    Act::None => err_v,
                    Act::Gelu { .. } => 1.2 * err_v + v.abs() * 2f64.powi(-18),
                    Act::DGelu => {
                        let x = pre0[c_off + at].to_f32() as f64;
                        let dg = 0.5 + x.abs() * 0.8 * (1.0 + 0.135 * x * x);
                        1.2 * err_v + v.abs() * dg * 2f64.powi(-18)
                    }
                };
                tol[c_off + at] = Some(t + want_abs * out_round + floor);
                // A random walk of K f32 roundings of partial sums up to S, and GELU's own.
                let gelu = if case.act == Act::None { 0.0 } else { v.abs() * 2f64.powi(-21) };
                typical[c_off + at] = Some(mag * 2f64.powi(-24) + gelu + want_abs * out_round);
                tol_pre[c_off + at] = Some(err_v + v.abs() * out_round + floor);
            }
        }
    }
    let what = format!("{}→{} {case:?}", <I as DeviceElement>::NAME, <O as DeviceElement>::NAME);
    assert_matches(&what, rng.seed(), &got, &want, &tol);
    if <O as DeviceElement>::NAME == "f32" && small_sizes(dev) {
        assert_rms_error(&what, rng.seed(), &got, &want, &typical);
    }
    if case.act == (Act::Gelu { store: true }) {
        assert_matches(
            &format!("pre-activation of {what}"),
            rng.seed(),
            &got_pre,
            &want_pre,
            &tol_pre,
        );
    }
    got
}

/// Fails unless the root-mean-square difference of `got` and `want` over the matrix elements
/// (where `typical` is `Some`) is at most the root mean square of `typical`: per element
/// `2⁻²⁴·S` (a random walk of f32 roundings of partial sums up to S), GELU's `2⁻²¹·|v|` and
/// the output's rounding. That is far below the per-element worst case of [`assert_matches`]
/// (`(K + 8)·2⁻²³·S`), so that on the simulator an alpha, beta or bias off by 1e-5 fails;
/// measured there, every case's error is at most 0.35 of it.
fn assert_rms_error<O: DeviceElement + Element>(
    what: &str,
    seed: u64,
    got: &[O],
    want: &[O],
    typical: &[Option<f64>],
) {
    let (mut err, mut allowed) = (0.0, 0.0);
    for ((g, w), t) in got.iter().zip(want).zip(typical) {
        if let Some(t) = t {
            err += (g.to_f32() as f64 - w.to_f32() as f64).powi(2);
            allowed += t * t;
        }
    }
    assert!(
        err <= allowed,
        "{what}: root-mean-square error {:.3e} over the typical {:.3e}\n  (TEST_SEED={seed} \
         reproduces)",
        err.sqrt(),
        allowed.sqrt()
    );
}

/// A 2×2-block problem with partial tiles in M, N and K, for runtimes that interpret the PTX;
/// larger on a GPU.
fn small_shape<D: Device>(dev: &D) -> (usize, usize, usize) {
    if small_sizes(dev) { (130, 137, 167) } else { (517, 389, 263) }
}

/// Every layout combination, with 16-byte aligned padded rows (`cp.async` and vector paths,
/// zero-filled partial chunks at the K and M/N edges) and dense (unaligned rows, fallback
/// paths), alpha ≠ 1.
fn check_layouts<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (m, n, k) = small_shape(dev);
    for layouts in LAYOUTS {
        for aligned in [true, false] {
            let mut case = Case::new(m, n, k, layouts, precision);
            if aligned {
                case = case.aligned();
            }
            case.spec.alpha = rng.scalar(0.5, 2.0);
            run::<D, I, O>(dev, &mut rng, &case);
        }
    }
}

/// Bias, GELU (with and without the stored pre-activation), GELU backward, beta ≠ 0 and
/// beta = 1 accumulation, spread over the layouts, each with the column sums (M = 70: a
/// partial group of 16 rows); vector epilogue (aligned rows) except one case with dense,
/// unaligned rows; then aligned C with the bias, the stored pre-activation
/// or the loaded pre-activation alone off 16-byte alignment (each must turn the vector
/// epilogue off).
fn check_epilogues<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (m, n, k) = if small_sizes(dev) { (70, 150, 77) } else { (300, 500, 200) };
    let acts = [
        (Act::Gelu { store: true }, true, 0.0),
        (Act::Gelu { store: false }, false, 0.0),
        (Act::DGelu, false, 0.0),
        (Act::None, true, 1.0),
        (Act::DGelu, true, -0.5),
    ];
    for (i, (act, bias, beta)) in acts.into_iter().enumerate() {
        let mut case = Case::new(m, n, k, LAYOUTS[i % 4], precision).summed();
        if i != 2 {
            case = case.aligned();
        }
        case.act = act;
        case.bias = bias;
        case.spec.beta = beta;
        case.spec.alpha = if i % 2 == 0 { 1.0 } else { rng.scalar(-1.5, -0.5) };
        run::<D, I, O>(dev, &mut rng, &case);
    }
    let misaligned = [
        (Act::Gelu { store: true }, [1, 0]),
        (Act::Gelu { store: true }, [0, 1]),
        (Act::DGelu, [0, 1]),
    ];
    for (i, (act, epilogue_offsets)) in misaligned.into_iter().enumerate() {
        let mut case = Case::new(m, n, k, LAYOUTS[i + 1], precision).aligned();
        (case.act, case.bias, case.epilogue_offsets) = (act, true, epilogue_offsets);
        run::<D, I, O>(dev, &mut rng, &case);
    }
}

/// Batched products with gaps between batches, a broadcast operand (stride 0), a bias and the
/// column sums: aligned rows and strides, then odd ones; then aligned rows with one batch stride (of A, B
/// or C) alone odd, which must turn that operand's vector path off.
fn check_batched<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (m, n, k) = if small_sizes(dev) { (40, 136, 24) } else { (200, 264, 96) };
    for (i, layouts) in [LAYOUTS[1], LAYOUTS[2]].into_iter().enumerate() {
        let aligned = i == 0;
        let case = Case::new(m, n, k, layouts, precision).summed();
        let mut case = if aligned { case.aligned() } else { case.odd_padded() };
        let gap = |len: usize| if aligned { len.next_multiple_of(8) + 16 } else { len + 3 };
        let s = &mut case.spec;
        s.batch = 3;
        s.stride_a = gap(s.a_len());
        s.stride_b = if aligned { 0 } else { gap(s.b_len()) };
        s.stride_c = gap(s.c_len());
        s.beta = if aligned { 0.0 } else { 0.75 };
        case.bias = true;
        run::<D, I, O>(dev, &mut rng, &case);
    }
    for (odd, layouts) in ["a", "b", "c"].into_iter().zip(LAYOUTS) {
        let mut case = batches(Case::new(m, n, k, layouts, precision).aligned(), 2);
        let s = &mut case.spec;
        match odd {
            "a" => s.stride_a += 1,
            "b" => s.stride_b += 1,
            _ => s.stride_c += 1,
        }
        run::<D, I, O>(dev, &mut rng, &case);
    }
}

/// Aligned rows with N and K in every residue class mod 8 (M = 29, N = 64 + r, K = 32 + r),
/// in every layout: the partial 16-byte chunks of the K edge (`cp.async` zero fill) and of
/// the N edge (the epilogue's partial runs, and the column sums' element-wise stores), with a
/// bias and alpha ≠ 1. Each shape runs twice on the same inputs, with the column sums and
/// without: a 16-bit output then takes the packed staging (its partial runs and, N odd, the
/// bias's last element alone), which must give the general path's bits. M ≡ 13 (mod 16): in
/// the last 16 rows a warp writes, its lanes' fourth rows are in and out of the matrix, so a
/// warp barrier that LLVM duplicated into those branches would diverge.
fn check_residues<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    for r in 0..8 {
        for layouts in LAYOUTS {
            let mut case = Case::new(29, 64 + r, 32 + r, layouts, precision).aligned();
            (case.bias, case.spec.alpha) = (true, rng.scalar(0.5, 2.0));
            let (mut first, mut second) = rng.twins();
            let general = run::<D, I, O>(dev, &mut first, &case.summed());
            let packed = run::<D, I, O>(dev, &mut second, &case);
            let what = format!("N = {}, {layouts:?}: without the column sums", 64 + r);
            assert_bits_eq(&what, rng.seed(), &packed, &general);
        }
    }
}

/// Split-K: slices that divide the K steps and ones that do not, more slices requested than
/// there are K steps, with the epilogues (bias, GELU with stored pre-activation, GELU
/// backward, beta ≠ 0), batches, aligned and unaligned rows, N a multiple of 4 (16-byte
/// workspace rows) and not (131: the element-wise partial sums). The reduction sums the slices
/// in order, so a second launch on the same inputs gives the same bits.
fn check_split_k<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (m, n, k) = if small_sizes(dev) { (100, 136, 300) } else { (300, 264, 4000) };
    let cases = [
        (3, true, Act::Gelu { store: true }, true, 0.5, 1),
        (4, false, Act::DGelu, false, 0.0, 2),
        (64, true, Act::None, true, 1.0, 1),
    ];
    for (i, (split, aligned, act, bias, beta, batch)) in cases.into_iter().enumerate() {
        let n = if i == 1 { 131 } else { n };
        let case = Case::new(m, n, if i == 2 { 40 } else { k }, LAYOUTS[(i + 1) % 4], precision);
        let mut case = if aligned { case.aligned() } else { case.odd_padded() };
        (case.act, case.bias) = (act, bias);
        let s = &mut case.spec;
        (s.split_k, s.beta, s.batch) = (split, beta, batch);
        s.stride_a = s.a_len();
        s.stride_b = s.b_len();
        s.stride_c = s.c_len();
        assert!(s.split_plan().0 > 1, "case {i} must split: {:?}", s.split_plan());
        let (mut first, mut second) = rng.twins();
        let got = run::<D, I, O>(dev, &mut first, &case);
        if i < 2 {
            let again = run::<D, I, O>(dev, &mut second, &case);
            assert_bits_eq(&format!("split-K case {i}, second launch"), rng.seed(), &again, &got);
        }
    }
}

/// Operands that are not 16-byte aligned (odd leading dimensions, views starting one element
/// in), which take the element-wise fallback paths (two of them with the column sums), and
/// shapes at the edges, with the column sums: one element, K smaller than one instruction;
/// then K = 0 (`C = beta·C + bias`).
fn check_unaligned_and_edges<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (m, n, k) = if small_sizes(dev) { (67, 131, 37) } else { (301, 277, 131) };
    for (i, layouts) in LAYOUTS.into_iter().enumerate() {
        let mut case = Case::new(m, n, k, layouts, precision).odd_padded();
        case.offsets = [i % 2, (i + 1) % 2, 1];
        case.col_sums = i % 2 == 1 && precision != Precision::Fp32;
        case.bias = i == 2;
        run::<D, I, O>(dev, &mut rng, &case);
    }
    for (m, n, k) in [(1, 1, 1), (3, 9, 5), (129, 1, 7), (1, 129, 200)] {
        run::<D, I, O>(dev, &mut rng, &Case::new(m, n, k, LAYOUTS[1], precision).summed());
    }
    let mut zero_k = Case::new(5, 17, 0, LAYOUTS[2], precision);
    zero_k.spec.beta = 2.0;
    zero_k.bias = true;
    run::<D, I, O>(dev, &mut rng, &zero_k);
}

/// The FP32 SIMT kernel's 128 × 64 tile, which runs every FP32 GEMM with N ≤ 64 (the
/// attention's products with the head dimension): every layout with aligned and unaligned rows
/// (two row tiles, a partial one; N = 64 whole, then 37: a partial tile); N from 57 to 64 and K
/// from 41 to 48 in every layout (every residue class of the 4-float vectors and the `cp.async`
/// edge chunks); the epilogues; the attention's batched `P·V` (N = 64) with gaps and with a
/// broadcast operand; split-K, with and without aligned rows.
fn check_narrow_simt<D: Device>(dev: &D) {
    let mut rng = TestRng::new();
    let p = Precision::Fp32;
    let (m, k) = if small_sizes(dev) { (130, 45) } else { (517, 263) };
    for (i, layouts) in LAYOUTS.into_iter().enumerate() {
        for aligned in [true, false] {
            let n = if aligned { 64 } else { 37 };
            let case = Case::new(m, n, k, layouts, p);
            let mut case = if aligned { case.aligned() } else { case.odd_padded() };
            case.spec.alpha = rng.scalar(0.5, 2.0);
            case.offsets = if aligned { [0; 3] } else { [i % 2, (i + 1) % 2, 1] };
            run::<D, f32, f32>(dev, &mut rng, &case);
        }
        for r in 0..8 {
            let case = Case::new(20, 57 + r, 41 + r, layouts, p).aligned();
            run::<D, f32, f32>(dev, &mut rng, &case);
        }
    }
    let acts = [
        (Act::Gelu { store: true }, true, 0.0),
        (Act::DGelu, false, -0.5),
        (Act::None, true, 1.0),
        (Act::Gelu { store: false }, false, 0.0),
    ];
    for (i, (act, bias, beta)) in acts.into_iter().enumerate() {
        let mut case = Case::new(m, 64 - 3 * (i % 2), k, LAYOUTS[i], p).aligned();
        (case.act, case.bias, case.spec.beta) = (act, bias, beta);
        run::<D, f32, f32>(dev, &mut rng, &case);
    }
    let (r, c) = (Layout::RowMajor, Layout::ColMajor);
    let mut values = batches(Case::new(m, 64, 100, (r, r), p).aligned(), 3);
    values.spec.alpha = rng.scalar(0.5, 2.0);
    run::<D, f32, f32>(dev, &mut rng, &values);
    let mut broadcast = batches(Case::new(m, 61, 100, (c, r), p).odd_padded(), 2);
    (broadcast.spec.stride_b, broadcast.bias) = (0, true);
    run::<D, f32, f32>(dev, &mut rng, &broadcast);
    for (aligned, split, act) in [(true, 3, Act::Gelu { store: true }), (false, 4, Act::DGelu)] {
        let case = Case::new(100, if aligned { 64 } else { 61 }, 300, (c, c), p);
        let mut case = if aligned { case.aligned() } else { case.odd_padded() };
        (case.act, case.bias, case.spec.split_k, case.spec.beta) = (act, true, split, 0.5);
        assert!(case.spec.split_plan().0 > 1);
        run::<D, f32, f32>(dev, &mut rng, &case);
    }
}

/// The GPT-2 124M matmuls at B·T = 16384 (forward, input and weight gradients of qkv, attention
/// projection, fc, fc projection and the 50304-wide classifier), checked on a sample of rows;
/// weight gradients split K as `with_split_k_for` picks on a 132-SM GPU with the runtime's module. On the simulator the
/// same 15 matmuls shrink to 256 tokens, 96 channels (768 / 8) and a 786-wide classifier
/// (50304 / 64).
fn check_gpt2_shapes<
    D: Device,
    I: GemmTypes<O> + Element,
    O: FloatElement + GemmOutput + Element,
>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (tokens, scale, vocab) = if small_sizes(dev) { (256, 8, 786) } else { (16384, 1, 50304) };
    let c = 768 / scale;
    for (out_f, in_f) in [(3 * c, c), (c, c), (4 * c, c), (c, 4 * c), (vocab, c)] {
        let specs = [
            GemmSpec::linear_forward(tokens, out_f, in_f, precision),
            GemmSpec::linear_backward_input(tokens, in_f, out_f, precision),
            GemmSpec::linear_backward_weight(tokens, in_f, out_f, precision)
                .with_split_k_for(132, dev.ptx_arch()),
        ];
        for s in specs {
            check_sampled::<D, I, O>(dev, &mut rng, &s);
        }
    }
}

/// Runs `s` (bias on the forward shapes) and checks 24 sampled rows of C against f64 products.
fn check_sampled<D: Device, I: GemmTypes<O> + Element, O: FloatElement + GemmOutput + Element>(
    dev: &D,
    rng: &mut TestRng,
    s: &GemmSpec,
) {
    let a: Vec<I> = random(rng, s.a_len(), -1.0, 1.0);
    let b: Vec<I> = random(rng, s.b_len(), -1.0, 1.0);
    let (da, db) = (dev.upload(&a).unwrap(), dev.upload(&b).unwrap());
    let engine =
        s.engine_on(dev, da.view().addr(), db.view().addr()).unwrap_or(GemmEngine::MmaSync);
    let g = reference_gemm(s, engine);
    let c0: Vec<O> = if s.beta != 0.0 { random(rng, s.c_len(), -1.0, 1.0) } else { Vec::new() };
    let mut dc =
        if s.beta != 0.0 { dev.upload(&c0).unwrap() } else { dev.alloc(s.c_len()).unwrap() };
    if s.beta == 0.0 {
        fill(dev, dc.view_mut(), O::from_f32(f32::NAN)).unwrap();
    }
    let forward = s.b_layout == Layout::ColMajor;
    let bias: Vec<O> = if forward { random(rng, s.n, -1.0, 1.0) } else { Vec::new() };
    let dbias = dev.upload(&bias).unwrap();
    let epilogue = Epilogue { bias: forward.then(|| dbias.view()), ..Epilogue::default() };
    let mut workspace = dev.alloc::<f32>(s.workspace_len().max(1)).unwrap();
    gemm_split_k(dev, s, da.view(), db.view(), dc.view_mut(), epilogue, workspace.view_mut())
        .unwrap();
    let rows: Vec<usize> = (0..24).map(|i| i * (s.m - 1) / 23).collect();
    let products = g.products(&a, &b, 0, &rows, false);
    let magnitudes = g.products(&a, &b, 0, &rows, true);
    let (mut got, mut want, mut tol) = (Vec::new(), Vec::new(), Vec::new());
    for (r, &m) in rows.iter().enumerate() {
        let row = dev.download(dc.view().slice(m * s.ldc..m * s.ldc + s.n).unwrap()).unwrap();
        for n in 0..s.n {
            let old =
                if s.beta != 0.0 { s.beta as f64 * c0[m * s.ldc + n].to_f32() as f64 } else { 0.0 };
            let bias_n = if forward { bias[n].to_f32() as f64 } else { 0.0 };
            let v = s.alpha as f64 * products[r * s.n + n] + old + bias_n;
            let mag = magnitudes[r * s.n + n] + old.abs() + bias_n.abs();
            got.push(row[n]);
            want.push(O::from_f32(v as f32));
            tol.push(Some(
                (s.k as f64 + 8.0) * 2f64.powi(-23) * mag + v.abs() * output_rounding::<O>(),
            ));
        }
    }
    let what =
        format!("{}→{} GPT-2 shape {s:?}", <I as DeviceElement>::NAME, <O as DeviceElement>::NAME);
    assert_matches(&what, rng.seed(), &got, &want, &tol);
}

/// Column sums: vector and scalar paths (odd ld), N in every residue class of the 8-column
/// lane runs and over several 256-column blocks, rows not a multiple of the 128-row slices (and
/// fewer than one, and more than the second pass's 16 groups take in one round), beta 0 and ≠ 0; the workspace poisoned; deterministic (a second launch gives
/// the same bits) and in the documented order (`cpu_ref::gemm::bias_grad_slices` and
/// `bias_grad_reduce`, bit for bit).
fn check_bias_grad<D: Device, T, O>(dev: &D)
where
    T: gpu_host::kernels::gemm::BiasGradElement<O> + Element,
    O: gpu_host::kernels::gemm::BiasGradOutput + Element,
{
    let mut rng = TestRng::new();
    let rows = if small_sizes(dev) { 300 } else { 16384 };
    let cases = [
        (rows, 64, 64, 0.0),
        (rows, 37, 40, 1.0),
        (rows, 8, 9, 0.5),
        (rows, 1, 1, 0.0),
        (rows, 130, 136, -1.0),
        (rows, 300, 300, 1.0),
        (rows, 515, 520, 0.0),
        (rows, 263, 264, 0.5),
        (rows, 774, 776, 1.0),
        (77, 70, 72, 1.0),
        // 258 slices: the second pass's first groups walk their slices in two rounds of 16.
        (2 * 16384 + 200, 9, 9, 1.0),
    ];
    for (rows, n, ld, beta) in cases {
        let dy: Vec<T> = random(&mut rng, (rows - 1) * ld + n, -1.0, 1.0);
        let db0: Vec<O> = random(&mut rng, n, -1.0, 1.0);
        let ddy = dev.upload(&dy).unwrap();
        let mut workspace = poisoned::<_, f32>(dev, bias_grad_workspace_len(rows, n)).unwrap();
        let mut ddb =
            if beta != 0.0 { dev.upload(&db0).unwrap() } else { poisoned(dev, n).unwrap() };
        bias_grad(dev, ddy.view(), rows, ld, ddb.view_mut(), beta, workspace.view_mut()).unwrap();
        let got = dev.download(ddb.view()).unwrap();
        let mut again =
            if beta != 0.0 { dev.upload(&db0).unwrap() } else { poisoned(dev, n).unwrap() };
        bias_grad(dev, ddy.view(), rows, ld, again.view_mut(), beta, workspace.view_mut()).unwrap();
        let again = dev.download(again.view()).unwrap();
        assert_bits_eq(&format!("bias_grad n={n}, second launch"), rng.seed(), &again, &got);
        // The documented order, bit for bit (a slice or group added out of order fails).
        let mut exact = db0.clone();
        let slices = reference::bias_grad_slices(&dy, rows, ld, n);
        reference::bias_grad_reduce(&slices, rows.div_ceil(128), &mut exact, beta);
        assert_bits_eq(
            &format!("bias_grad n={n} in the documented order"),
            rng.seed(),
            &got,
            &exact,
        );
        let mut want = db0.clone();
        reference::bias_grad(&dy, rows, ld, &mut want, beta);
        // The summation tree's depth bounds its rounding: 16 rows per lane, 8 warps, a
        // group's slices, 16 groups and beta's term (not the rows: a sequential sum's bound
        // would hide a slice left out).
        let depth = 16 + 8 + rows.div_ceil(128).div_ceil(16) + 16 + 1;
        let tol: Vec<Option<f64>> = want
            .iter()
            .enumerate()
            .map(|(col, w)| {
                let mag: f64 = (0..rows).map(|m| dy[m * ld + col].to_f32().abs() as f64).sum();
                let mag = mag + (beta * db0[col].to_f32()).abs() as f64;
                Some(
                    mag * depth as f64 * 2f64.powi(-23)
                        + w.to_f32().abs() as f64 * output_rounding::<O>(),
                )
            })
            .collect();
        let what = format!(
            "bias_grad {}→{} rows={rows} n={n} ld={ld} beta={beta}",
            <T as DeviceElement>::NAME,
            <O as DeviceElement>::NAME
        );
        assert_matches(&what, rng.seed(), &got, &want, &tol);
    }
}

/// The fused bias gradient: `dX = dY·W` with the GELU backward writes its column sums, and
/// `bias_grad_from_col_sums` adds them (beta 0.5) into the bias gradient of the layer whose
/// output `dX` is the gradient of: against `cpu_ref::gemm::bias_grad` of the stored `dX`, with
/// a bound from the summation tree's depth; M with a partial group, N in no vector width.
fn check_fused_bias_grad<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (m, n, k) = if small_sizes(dev) { (300, 137, 100) } else { (16384 + 300, 3077, 768) };
    let r = Layout::RowMajor;
    let s = GemmSpec::new(m, n, k, r, r, precision);
    let a: Vec<I> = random(&mut rng, s.a_len(), -1.0, 1.0);
    let b: Vec<I> = random(&mut rng, s.b_len(), -1.0, 1.0);
    let pre: Vec<O> = random(&mut rng, s.c_len(), -3.0, 3.0);
    let db0: Vec<f32> = rng.uniform(n, -1.0, 1.0);
    let (da, dbm, dpre) =
        (dev.upload(&a).unwrap(), dev.upload(&b).unwrap(), dev.upload(&pre).unwrap());
    let mut dc = poisoned::<D, O>(dev, s.c_len()).unwrap();
    let groups = col_sum_groups(1, m);
    let mut sums = poisoned::<D, f32>(dev, col_sums_len(1, m, n)).unwrap();
    let epilogue = Epilogue {
        activation: Activation::DGelu { pre_act: dpre.view() },
        col_sums: Some(sums.view_mut()),
        ..Epilogue::default()
    };
    gemm(dev, &s, da.view(), dbm.view(), dc.view_mut(), epilogue).unwrap();
    let mut ddb = dev.upload(&db0).unwrap();
    bias_grad_from_col_sums(dev, sums.view(), groups, ddb.view_mut(), 0.5).unwrap();
    let got = dev.download(ddb.view()).unwrap();
    // The second pass's documented order over the column sums, bit for bit (the sums
    // themselves are checked bit for bit against the stored output in `check_gemm`).
    let mut exact = db0.clone();
    reference::bias_grad_reduce(&dev.download(sums.view()).unwrap(), groups, &mut exact, 0.5);
    let names = (<I as DeviceElement>::NAME, <O as DeviceElement>::NAME);
    let what = format!("fused bias gradient {}→{} in the documented order", names.0, names.1);
    assert_bits_eq(&what, rng.seed(), &got, &exact);
    let dx = dev.download(dc.view()).unwrap();
    let mut want = db0.clone();
    reference::bias_grad(&dx, m, n, &mut want, 0.5);
    // 4 rows per lane, 4 row classes, a reduction group's row groups, 16 groups, beta's term.
    let depth = (4 + 4 + groups.div_ceil(16) + 16 + 1) as f64;
    let tol: Vec<Option<f64>> = (0..n)
        .map(|col| {
            let mag: f64 = (0..m).map(|row| dx[row * n + col].to_f32().abs() as f64).sum();
            Some((mag + (0.5 * db0[col]).abs() as f64) * depth * 2f64.powi(-23))
        })
        .collect();
    let what = format!("fused bias gradient {}→{}", names.0, names.1);
    assert_matches(&what, rng.seed(), &got, &want, &tol);
}

/// Bad arguments are rejected before launch, naming the argument.
fn check_argument_errors(dev: &impl Device) {
    let a = dev.upload(&vec![0.0f32; 64]).unwrap();
    let mut c = dev.alloc::<f32>(64).unwrap();
    let s = GemmSpec::new(8, 8, 8, Layout::RowMajor, Layout::RowMajor, Precision::Fp32);
    let mut expect = |spec: GemmSpec, arg: &str| {
        let err =
            gemm(dev, &spec, a.view(), a.view(), c.view_mut(), Epilogue::default()).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "gemm", arg: got, .. } if *got == arg),
            "expected an error naming `{arg}`, got: {err}"
        );
    };
    expect(GemmSpec { lda: 7, ..s }, "lda");
    expect(GemmSpec { m: 9, ..s }, "a");
    expect(GemmSpec { precision: Precision::Bf16, ..s }, "precision");
    expect(GemmSpec { batch: 2, stride_c: 8, ..s }, "stride_c");
    expect(GemmSpec { batch: 0, ..s }, "batch");
    expect(GemmSpec { k: 64, split_k: 2, ..s }, "split_k");
    let short_bias = dev.upload(&[0.0f32; 7]).unwrap();
    let epilogue = Epilogue { bias: Some(short_bias.view()), ..Epilogue::default() };
    let err = gemm(dev, &s, a.view(), a.view(), c.view_mut(), epilogue).unwrap_err();
    assert!(err.to_string().contains("`bias`"), "unexpected error: {err}");
    let split = GemmSpec { m: 4, n: 4, k: 16, lda: 16, ldb: 4, ldc: 4, split_k: 2, ..s };
    let mut short = dev.alloc::<f32>(split.workspace_len() - 1).unwrap();
    let (av, cv, wv) = (a.view(), c.view_mut(), short.view_mut());
    let err = gemm_split_k(dev, &split, av, av, cv, Epilogue::default(), wv).unwrap_err();
    assert!(err.to_string().contains("`workspace`"), "unexpected error: {err}");
    let mut db = dev.alloc::<f32>(8).unwrap();
    let mut ws = dev.alloc::<f32>(bias_grad_workspace_len(9, 8)).unwrap();
    let err = bias_grad(dev, a.view(), 9, 8, db.view_mut(), 0.0, ws.view_mut()).unwrap_err();
    assert!(err.to_string().contains("`dy`"), "unexpected error: {err}");
    let mut short_ws = dev.alloc::<f32>(bias_grad_workspace_len(8, 8) - 1).unwrap();
    let err = bias_grad(dev, a.view(), 8, 8, db.view_mut(), 0.0, short_ws.view_mut()).unwrap_err();
    assert!(err.to_string().contains("`workspace`"), "unexpected error: {err}");
    // The row slices are the first pass's grid.y: at most 65535 of them.
    let rows = kernel_abi::gemm::bias_grad::MAX_ROWS as usize + 1;
    let err = bias_grad(dev, a.view(), rows, 8, db.view_mut(), 0.0, ws.view_mut()).unwrap_err();
    assert!(err.to_string().contains("`rows`"), "unexpected error: {err}");
    // Column sums: none from the SIMT kernels, none from a split launch, and a short buffer.
    let mut sums = dev.alloc::<f32>(col_sums_len(1, 8, 8)).unwrap();
    let epilogue = Epilogue { col_sums: Some(sums.view_mut()), ..Epilogue::default() };
    let err = gemm(dev, &s, a.view(), a.view(), c.view_mut(), epilogue).unwrap_err();
    assert!(err.to_string().contains("`col_sums`"), "unexpected error: {err}");
    let bf = dev.upload(&vec![bf16::ZERO; 1024]).unwrap();
    let mut cb = dev.alloc::<bf16>(64).unwrap();
    let sb = GemmSpec { precision: Precision::Bf16, ..s };
    let mut short_sums = dev.alloc::<f32>(col_sums_len(1, 8, 8) - 1).unwrap();
    let epilogue = Epilogue { col_sums: Some(short_sums.view_mut()), ..Epilogue::default() };
    let err = gemm(dev, &sb, bf.view(), bf.view(), cb.view_mut(), epilogue).unwrap_err();
    assert!(err.to_string().contains("`col_sums`"), "unexpected error: {err}");
    let split_bf = GemmSpec { k: 256, lda: 256, precision: Precision::Bf16, ..split };
    let mut ws = dev.alloc::<f32>(split_bf.workspace_len()).unwrap();
    let epilogue = Epilogue { col_sums: Some(sums.view_mut()), ..Epilogue::default() };
    let (bv, cv, wv) = (bf.view(), cb.view_mut(), ws.view_mut());
    let err = gemm_split_k(dev, &split_bf, bv, bv, cv, epilogue, wv).unwrap_err();
    assert!(err.to_string().contains("`col_sums`"), "unexpected error: {err}");
    let err = bias_grad_from_col_sums(dev, sums.view(), 2, db.view_mut(), 0.0).unwrap_err();
    assert!(err.to_string().contains("`col_sums`"), "unexpected error: {err}");
    // A batch stride whose span wraps past 2^64 (C's extent would wrap to 0): refused, not
    // launched on views too short for it.
    let wrapping = GemmSpec { batch: 2, stride_c: usize::MAX - 7, ..s };
    let err =
        gemm(dev, &wrapping, a.view(), a.view(), c.view_mut(), Epilogue::default()).unwrap_err();
    assert!(matches!(&err, GpuError::InvalidArgument { arg: "c", .. }), "{err}");
}

/// Instantiates the per-precision checks for one (input, output) type pair.
macro_rules! precision_tests {
    ($($name:ident: $in:ty => $out:ty, $precision:ident;)*) => {$(
        mod $name {
            use super::*;
            pub fn layouts(dev: &impl Device) {
                check_layouts::<_, $in, $out>(dev, Precision::$precision);
            }
            pub fn epilogues(dev: &impl Device) {
                check_epilogues::<_, $in, $out>(dev, Precision::$precision);
            }
            pub fn batched(dev: &impl Device) {
                check_batched::<_, $in, $out>(dev, Precision::$precision);
            }
            pub fn unaligned_and_edges(dev: &impl Device) {
                check_unaligned_and_edges::<_, $in, $out>(dev, Precision::$precision);
            }
            pub fn split_k(dev: &impl Device) {
                check_split_k::<_, $in, $out>(dev, Precision::$precision);
            }
            pub fn residues(dev: &impl Device) {
                check_residues::<_, $in, $out>(dev, Precision::$precision);
            }
        }
    )*};
}

precision_tests! {
    fp32: f32 => f32, Fp32;
    tf32: f32 => f32, Tf32;
    bf16_bf16: bf16 => bf16, Bf16;
    bf16_f32: bf16 => f32, Bf16;
    f16_f16: f16 => f16, Fp16;
    f16_f32: f16 => f32, Fp16;
}

/// The GPT-2 shapes in each training mode's types (GPU only).
fn gpt2_fp32(dev: &impl Device) {
    check_gpt2_shapes::<_, f32, f32>(dev, Precision::Fp32);
}

fn gpt2_tf32(dev: &impl Device) {
    check_gpt2_shapes::<_, f32, f32>(dev, Precision::Tf32);
}

fn gpt2_bf16(dev: &impl Device) {
    check_gpt2_shapes::<_, bf16, bf16>(dev, Precision::Bf16);
}

fn gpt2_f16(dev: &impl Device) {
    check_gpt2_shapes::<_, f16, f16>(dev, Precision::Fp16);
}

/// The fused bias gradient in each tensor-core precision's types.
fn col_sums_bias_bf16(dev: &impl Device) {
    check_fused_bias_grad::<_, bf16, bf16>(dev, Precision::Bf16);
}

fn col_sums_bias_f16_f32(dev: &impl Device) {
    check_fused_bias_grad::<_, f16, f32>(dev, Precision::Fp16);
}

fn col_sums_bias_tf32(dev: &impl Device) {
    check_fused_bias_grad::<_, f32, f32>(dev, Precision::Tf32);
}

kernel_tests! {
    gemm_fp32_layouts => fp32::layouts;
    gemm_fp32_epilogues => fp32::epilogues;
    gemm_fp32_batched => fp32::batched;
    gemm_fp32_unaligned_and_edges => fp32::unaligned_and_edges;
    gemm_fp32_split_k => fp32::split_k;
    gemm_fp32_residues => fp32::residues;
    gemm_fp32_narrow_tile => check_narrow_simt;
    gemm_fp32_gpt2_shapes => gpt2_fp32;
    gemm_tf32_layouts => tf32::layouts;
    gemm_tf32_epilogues => tf32::epilogues;
    gemm_tf32_batched => tf32::batched;
    gemm_tf32_unaligned_and_edges => tf32::unaligned_and_edges;
    gemm_tf32_split_k => tf32::split_k;
    gemm_tf32_residues => tf32::residues;
    gemm_tf32_gpt2_shapes => gpt2_tf32;
    gemm_bf16_layouts => bf16_bf16::layouts;
    gemm_bf16_epilogues => bf16_bf16::epilogues;
    gemm_bf16_batched => bf16_bf16::batched;
    gemm_bf16_unaligned_and_edges => bf16_bf16::unaligned_and_edges;
    gemm_bf16_split_k => bf16_bf16::split_k;
    gemm_bf16_residues => bf16_bf16::residues;
    gemm_bf16_gpt2_shapes => gpt2_bf16;
    gemm_bf16_f32out_layouts => bf16_f32::layouts;
    gemm_bf16_f32out_epilogues => bf16_f32::epilogues;
    gemm_bf16_f32out_batched => bf16_f32::batched;
    gemm_bf16_f32out_unaligned_and_edges => bf16_f32::unaligned_and_edges;
    gemm_bf16_f32out_split_k => bf16_f32::split_k;
    gemm_bf16_f32out_residues => bf16_f32::residues;
    gemm_f16_layouts => f16_f16::layouts;
    gemm_f16_epilogues => f16_f16::epilogues;
    gemm_f16_batched => f16_f16::batched;
    gemm_f16_unaligned_and_edges => f16_f16::unaligned_and_edges;
    gemm_f16_split_k => f16_f16::split_k;
    gemm_f16_residues => f16_f16::residues;
    gemm_f16_gpt2_shapes => gpt2_f16;
    gemm_f16_f32out_layouts => f16_f32::layouts;
    gemm_f16_f32out_epilogues => f16_f32::epilogues;
    gemm_f16_f32out_batched => f16_f32::batched;
    gemm_f16_f32out_unaligned_and_edges => f16_f32::unaligned_and_edges;
    gemm_f16_f32out_split_k => f16_f32::split_k;
    gemm_f16_f32out_residues => f16_f32::residues;
    fused_bias_grad_bf16 => col_sums_bias_bf16;
    fused_bias_grad_f16_to_f32 => col_sums_bias_f16_f32;
    fused_bias_grad_tf32 => col_sums_bias_tf32;
    bias_grad_f32 => check_bias_grad::<_, f32, f32>;
    bias_grad_bf16 => check_bias_grad::<_, bf16, bf16>;
    bias_grad_f16 => check_bias_grad::<_, f16, f16>;
    bias_grad_bf16_to_f32 => check_bias_grad::<_, bf16, f32>;
    bias_grad_f16_to_f32 => check_bias_grad::<_, f16, f32>;
    gemm_argument_errors => check_argument_errors;
}

/// The Hopper `wgmma` kernel (forced): partial tiles in M, N and K, alpha/beta, every
/// epilogue, split-K and the tail split (whole tiles and a split tail, batched, and a weight
/// gradient's, bit for bit twice), several units per block of the persistent grid, batches
/// with gaps between them, in the forward layout (A row-major, B column-major: K-major
/// operands) and, for BF16 and FP16, the other three (M/N-major A or B): the backward GEMMs
/// `dX = dY·W` with GELU backward (rr), `dW += dYᵀ·X` (cr, beta 1) and cc, and the batched
/// attention product `P·V` (rr) split over K; the 128 × 256 tiles (forced) of every layout, with a
/// partial second tile, the fused epilogue, split-K and β = 1; and the ping-pong kernel (forced) of
/// the same layouts, with the fused epilogue, split-K and, for 16-bit, GELU backward, with
/// blocks of one, two and three units; for 16-bit, the deferred epilogue (forced), fused,
/// bias-only, batched and GELU backward with column sums, the last bit for bit as the 128 ×
/// 128 tiles (as are the 128 × 256 and ping-pong tiles' fused forward and GELU-backward input
/// gradient: the tiles `WgmmaTile::Tuned` chooses between), and stream-K ([`check_stream_k`]). On a GPU `Auto` already picks the kernel for these
/// cases on Hopper; the simulator runs the sm_90a module. The GELU backward cases of every
/// tile (and the batched one) write the column sums too.
fn check_wgmma<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    precision: Precision,
) {
    let mut rng = TestRng::new();
    let (m, n, k) = if small_sizes(dev) { (200, 300, 150) } else { (517, 389, 263) };
    let rc = (Layout::RowMajor, Layout::ColMajor);
    let wgmma = |mut case: Case| {
        case.spec.engine = GemmEngine::Wgmma;
        case.aligned()
    };
    let mut plain = wgmma(Case::new(m, n, k, rc, precision));
    plain.spec.alpha = rng.scalar(0.5, 2.0);
    run::<D, I, O>(dev, &mut rng, &plain);
    // A long K (27 k-tiles in 16 bits, 54 in TF32) on each cooperative and ping-pong tile: its
    // ring (6, 4 and 6 stages) wraps several times inside a unit, so the producer waits on
    // every stage's empty barrier in both parities, whatever the other shapes give a block.
    for tile in [WgmmaTile::N128, WgmmaTile::N256, WgmmaTile::PingPong] {
        let mut long_k = wgmma(Case::new(70, 136, 1700, rc, precision));
        (long_k.spec.wgmma_tile, long_k.bias) = (tile, true);
        run::<D, I, O>(dev, &mut rng, &long_k);
    }
    let mut fused = wgmma(Case::new(m, n, k, rc, precision));
    (fused.bias, fused.act, fused.spec.beta) = (true, Act::Gelu { store: true }, 0.5);
    run::<D, I, O>(dev, &mut rng, &fused);
    let mut backward = wgmma(Case::new(m, n, k, rc, precision)).summed();
    backward.act = Act::DGelu;
    run::<D, I, O>(dev, &mut rng, &backward);
    let mut split = wgmma(Case::new(70, 90, 700, rc, precision));
    split.spec.split_k = 3;
    run::<D, I, O>(dev, &mut rng, &split);
    let mut batched = batches(wgmma(Case::new(70, 136, 100, rc, precision)).summed(), 3);
    (batched.bias, batched.spec.beta) = (true, 0.5);
    run::<D, I, O>(dev, &mut rng, &batched);
    let wide =
        |case: Case| Case { spec: GemmSpec { wgmma_tile: WgmmaTile::N256, ..case.spec }, ..case };
    let mut wide_fused = wide(wgmma(Case::new(150, 300, 100, rc, precision)));
    (wide_fused.bias, wide_fused.act) = (true, Act::Gelu { store: true });
    run::<D, I, O>(dev, &mut rng, &wide_fused);
    // The packed staging of a 16-bit output (alpha and a bias alone) on the wide tiles and the
    // ping-pong ones, N odd: partial runs at the N edge, the bias's last element alone.
    let mut wide_bias = wide(wgmma(Case::new(150, 301, 100, rc, precision)));
    (wide_bias.bias, wide_bias.spec.alpha) = (true, rng.scalar(0.5, 2.0));
    run::<D, I, O>(dev, &mut rng, &wide_bias);
    let mut wide_split = wide(wgmma(Case::new(70, 260, 700, rc, precision)));
    (wide_split.spec.split_k, wide_split.spec.beta) = (3, 0.5);
    run::<D, I, O>(dev, &mut rng, &wide_split);
    // Ping-pong: on the simulator's 4 SMs, 6 units leave two blocks with a unit for each
    // consumer and two with one (consumer 1 idle); 9 give block 0 units 0, 4, 8 (consumer 0
    // waits for its turn once). On a GPU, 9 × 33 tiles give every block 2 or 3 units.
    let pingpong = |case: Case| Case {
        spec: GemmSpec { wgmma_tile: WgmmaTile::PingPong, ..case.spec },
        ..case
    };
    let (pm, pn, pk) = if small_sizes(dev) { (m, n, k) } else { (1100, 4100, 136) };
    let mut pp_fused = pingpong(wgmma(Case::new(pm, pn, pk, rc, precision)));
    (pp_fused.bias, pp_fused.act, pp_fused.spec.beta) = (true, Act::Gelu { store: true }, 0.5);
    run::<D, I, O>(dev, &mut rng, &pp_fused);
    let mut pp_bias = pingpong(wgmma(Case::new(150, 301, 100, rc, precision)));
    pp_bias.bias = true;
    run::<D, I, O>(dev, &mut rng, &pp_bias);
    let mut pp_split = pingpong(wgmma(Case::new(70, 260, 700, rc, precision)));
    pp_split.spec.split_k = 3;
    run::<D, I, O>(dev, &mut rng, &pp_split);
    // Tail splits: of 3 × 2 tiles, 4 whole, the other 2 (in raster order (1, 1) and the
    // partial corner (2, 1)) in 3 slices; the fused epilogue on both paths; two batches.
    let tail = |case: Case, batch| {
        let mut case = batches(wgmma(case), batch);
        (case.spec.split_k, case.spec.whole_tiles) = (3, 4);
        case
    };
    let mut tail_fused = tail(Case::new(300, 200, 300, rc, precision), 2);
    (tail_fused.bias, tail_fused.act, tail_fused.spec.beta) =
        (true, Act::Gelu { store: true }, 0.5);
    run::<D, I, O>(dev, &mut rng, &tail_fused);
    if precision == Precision::Tf32 {
        return;
    }
    let (r, c) = (Layout::RowMajor, Layout::ColMajor);
    let mut dx = wgmma(Case::new(m + 5, n, k, (r, r), precision)).summed();
    dx.act = Act::DGelu;
    run::<D, I, O>(dev, &mut rng, &dx);
    // M ≡ 13 (mod 16) on the simulator: the epilogue's last rows diverge (see `check_residues`;
    // this case caught a duplicated warp barrier in the weight-gradient kernel).
    let mut dw = wgmma(Case::new(n + 1, m, k, (c, r), precision));
    dw.spec.beta = 1.0;
    run::<D, I, O>(dev, &mut rng, &dw);
    let mut cc = wgmma(Case::new(m, n, k, (c, c), precision));
    cc.spec.alpha = rng.scalar(0.5, 2.0);
    run::<D, I, O>(dev, &mut rng, &cc);
    let mut split_cr = wgmma(Case::new(90, 70, 700, (c, r), precision));
    split_cr.spec.split_k = 3;
    run::<D, I, O>(dev, &mut rng, &split_cr);
    let mut values = batches(wgmma(Case::new(100, 64, 200, (r, r), precision)), 2);
    values.spec.split_k = 2;
    run::<D, I, O>(dev, &mut rng, &values);
    // A weight gradient's tail split, twice: the same bits.
    let mut tail_dw = tail(Case::new(300, 200, 300, (c, r), precision), 1);
    tail_dw.spec.beta = 1.0;
    let (mut first, mut second) = rng.twins();
    let got = run::<D, I, O>(dev, &mut first, &tail_dw);
    let again = run::<D, I, O>(dev, &mut second, &tail_dw);
    assert_bits_eq("tail split, second launch", rng.seed(), &again, &got);
    let mut wide_dx = wide(wgmma(Case::new(150, 300, 100, (r, r), precision)).summed());
    wide_dx.act = Act::DGelu;
    run::<D, I, O>(dev, &mut rng, &wide_dx);
    // M-major A: a weight gradient accumulating (β = 1; `Auto` gives the lm head's these
    // tiles), and cc with the fused epilogue.
    let mut wide_dw = wide(wgmma(Case::new(150, 300, 100, (c, r), precision)));
    wide_dw.spec.beta = 1.0;
    run::<D, I, O>(dev, &mut rng, &wide_dw);
    let mut wide_cc = wide(wgmma(Case::new(150, 300, 100, (c, c), precision)));
    (wide_cc.bias, wide_cc.act) = (true, Act::Gelu { store: true });
    run::<D, I, O>(dev, &mut rng, &wide_cc);
    let mut pp_dx = pingpong(wgmma(Case::new(150, 300, 100, (r, r), precision)).summed());
    (pp_dx.act, pp_dx.spec.alpha) = (Act::DGelu, rng.scalar(0.5, 2.0));
    run::<D, I, O>(dev, &mut rng, &pp_dx);
    // Deferred epilogue: a tile's runs between the k-tiles of the block's next tile, the rest
    // after its mainloop (K = 150: 3 k-tiles for 8 runs), the last tile's after the block's
    // last mainloop. On the simulator's 4 SMs, 2 × 3 tiles give blocks of two units and of
    // one; 3 × 5 tiles with 10 k-tiles (K = 600) blocks of three and four, every run inside a
    // mainloop but the last tile's. The same bits as the 128 × 128 tiles.
    let deferred = |case: Case| Case {
        spec: GemmSpec { wgmma_tile: WgmmaTile::Deferred, ..case.spec },
        ..case
    };
    let mut de_fused = deferred(wgmma(Case::new(200, 300, 150, rc, precision)));
    (de_fused.bias, de_fused.act, de_fused.spec.beta) = (true, Act::Gelu { store: true }, 0.5);
    run::<D, I, O>(dev, &mut rng, &de_fused);
    let mut de_bias = deferred(wgmma(Case::new(150, 301, 100, rc, precision)));
    (de_bias.bias, de_bias.spec.alpha) = (true, rng.scalar(0.5, 2.0));
    run::<D, I, O>(dev, &mut rng, &de_bias);
    let de_batch = wgmma(Case::new(70, 136, 100, rc, precision)).summed();
    let mut de_batched = deferred(batches(de_batch, 3));
    (de_batched.bias, de_batched.spec.beta) = (true, 0.5);
    run::<D, I, O>(dev, &mut rng, &de_batched);
    let mut de_dx = deferred(wgmma(Case::new(300, 520, 600, (r, r), precision)).summed());
    de_dx.act = Act::DGelu;
    let (mut first, mut second) = rng.twins();
    let got = run::<D, I, O>(dev, &mut first, &de_dx);
    let narrow = Case { spec: GemmSpec { wgmma_tile: WgmmaTile::N128, ..de_dx.spec }, ..de_dx };
    let want = run::<D, I, O>(dev, &mut second, &narrow);
    assert_bits_eq("deferred against 128 × 128 tiles", rng.seed(), &got, &want);
    // The other tiles `WgmmaTile::Tuned` chooses between compute the same bits too (the trainer
    // tunes while it trains): the forward with a bias and GELU, and the input gradient with the
    // GELU backward and column sums, each against 128 × 128.
    let forward = || {
        let mut case = wgmma(Case::new(150, 300, 100, rc, precision));
        (case.bias, case.act) = (true, Act::Gelu { store: true });
        case
    };
    let input_gradient = || {
        let mut case = wgmma(Case::new(150, 300, 100, (r, r), precision)).summed();
        case.act = Act::DGelu;
        case
    };
    for tile in [WgmmaTile::N256, WgmmaTile::PingPong] {
        for case in [forward(), input_gradient()] {
            let (mut first, mut second) = rng.twins();
            let narrow =
                Case { spec: GemmSpec { wgmma_tile: WgmmaTile::N128, ..case.spec }, ..case };
            let want = run::<D, I, O>(dev, &mut first, &narrow);
            let case = Case { spec: GemmSpec { wgmma_tile: tile, ..narrow.spec }, ..narrow };
            let got = run::<D, I, O>(dev, &mut second, &case);
            assert_bits_eq(&format!("{tile:?} against 128 × 128 tiles"), rng.seed(), &got, &want);
        }
    }
    check_stream_k::<D, I, O>(dev, &mut rng, precision);
}

/// Stream-K: 3 × 3 tiles of 128 × 256 with 10 k-tiles each (K = 600), 90
/// iterations shared by grids of 2 (whole tiles inside each block's range, the middle tile
/// split in two), 4 (a partial segment at both ends of every block), 7 and 13 (blocks inside a
/// tile, tiles split three and four ways), with the workspace's slots poisoned: the weight
/// gradient (`cr`, β = 1), and `rc` with α, β, a bias, GELU with its pre-activation stored and
/// the column sums, whose rows the last warp of each tile writes. The same bits on a second
/// launch (each grid adds the segments in its own grouping: within tolerance of the
/// reference).
fn check_stream_k<D: Device, I: GemmTypes<O> + Element, O: GemmOutput + Element>(
    dev: &D,
    rng: &mut TestRng,
    precision: Precision,
) {
    let (r, c) = (Layout::RowMajor, Layout::ColMajor);
    let stream = |m, n, layouts, blocks| {
        let mut case = Case::new(m, n, 600, layouts, precision);
        case.spec.engine = GemmEngine::Wgmma;
        case.spec.wgmma_tile = WgmmaTile::StreamK;
        case.spec.stream_k_blocks = blocks;
        case.aligned()
    };
    for blocks in [2, 4, 7, 13] {
        let mut dw = stream(300, 520, (c, r), blocks);
        dw.spec.beta = 1.0;
        run::<D, I, O>(dev, rng, &dw);
    }
    let mut fused = stream(300, 520, (r, c), 4).summed();
    (fused.bias, fused.act) = (true, Act::Gelu { store: true });
    (fused.spec.alpha, fused.spec.beta) = (rng.scalar(0.5, 2.0), 0.5);
    run::<D, I, O>(dev, rng, &fused);
    let mut dw = stream(260, 300, (c, r), 5);
    dw.spec.beta = 1.0;
    let (mut first, mut second) = rng.twins();
    let got = run::<D, I, O>(dev, &mut first, &dw);
    let again = run::<D, I, O>(dev, &mut second, &dw);
    assert_bits_eq("stream-K, second launch", rng.seed(), &again, &got);
}

/// `case` as `batch` batches, each matrix followed by a gap that keeps the next one 16-byte
/// aligned.
fn batches(mut case: Case, batch: usize) -> Case {
    let gap = |len: usize| len.next_multiple_of(8) + 16;
    let s = &mut case.spec;
    (s.stride_a, s.stride_b, s.stride_c) = (gap(s.a_len()), gap(s.b_len()), gap(s.c_len()));
    s.batch = batch;
    case
}

macro_rules! wgmma_tests {
    ($($name:ident: $in:ty => $out:ty, $precision:ident;)*) => {
        mod wgmma_sim {
            use super::*;
            $(
                #[test]
                fn $name() {
                    check_wgmma::<_, $in, $out>(integration_tests::hopper_sim(), Precision::$precision);
                }
            )*
        }
        mod wgmma_gpu {
            use super::*;
            $(
                #[test]
                fn $name() {
                    let Some(gpu) = integration_tests::gpu() else { return };
                    if gpu.ptx_arch() == gpu_host::PtxArch::Sm90a {
                        check_wgmma::<_, $in, $out>(gpu, Precision::$precision);
                    }
                }
            )*
        }
    };
}

wgmma_tests! {
    gemm_wgmma_bf16: bf16 => bf16, Bf16;
    gemm_wgmma_bf16_f32out: bf16 => f32, Bf16;
    gemm_wgmma_f16: f16 => f16, Fp16;
    gemm_wgmma_f16_f32out: f16 => f32, Fp16;
    gemm_wgmma_tf32: f32 => f32, Tf32;
}
