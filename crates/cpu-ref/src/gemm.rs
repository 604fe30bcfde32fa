//! Reference GEMM: `C = act(alpha · op(A) · op(B) + beta · C + bias)`, batched, with the
//! layouts, leading dimensions and epilogues of the GPU GEMM (`kernel_abi::gemm`).
//!
//! Inputs are first rounded the way the GPU variant rounds them ([`Rounding`]: TF32 with
//! `cvt.rna`, or bf16/f16 storage), then multiplied and summed in **f64** (every product of two
//! f32 values is exact in f64), and the epilogue (scale, bias, GELU) is evaluated in f64 with
//! `std`'s `tanh`. Only the final store rounds, to the output type. The result is therefore the
//! exact answer to the rounded-input problem up to f64 rounding: GPU results differ from it by
//! their f32 accumulation and output rounding only, which is what the tests bound.

use crate::precision::{Element, round_tf32};
use half::{bf16, f16};
use kernel_abi::gelu::{CUBIC as GELU_CUBIC, SQRT_2_OVER_PI as GELU_SCALE};
use rayon::prelude::*;

/// Storage order of an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// `X(r, c) = x[r·ld + c]`.
    RowMajor,
    /// `X(r, c) = x[c·ld + r]`.
    ColMajor,
}

/// How inputs are rounded before they are multiplied.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rounding {
    /// Used as stored (FP32 SIMT, or 16-bit inputs already in their format).
    None,
    /// To TF32, nearest with ties away from zero (`cvt.rna.tf32.f32`).
    Tf32,
    /// To TF32 by dropping the 13 low mantissa bits (what `wgmma` does with f32 in shared
    /// memory).
    Tf32Truncate,
    /// To bf16, nearest-even.
    Bf16,
    /// To f16, nearest-even.
    F16,
}

impl Rounding {
    /// `x` rounded.
    pub fn apply(self, x: f32) -> f32 {
        match self {
            Rounding::None => x,
            Rounding::Tf32 => round_tf32(x),
            Rounding::Tf32Truncate => f32::from_bits(x.to_bits() & !0x1fff),
            Rounding::Bf16 => bf16::from_f32(x).to_f32(),
            Rounding::F16 => f16::from_f32(x).to_f32(),
        }
    }
}

/// Shape, layouts, strides and scalars of a (batched) GEMM. `A` is M×K, `B` is K×N, `C` is M×N
/// row-major; batch `z` of each matrix starts `z · stride` elements after batch 0.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Gemm {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C.
    pub n: usize,
    /// Columns of A, rows of B.
    pub k: usize,
    /// Number of independent products.
    pub batch: usize,
    /// Storage of A.
    pub a_layout: Layout,
    /// Storage of B.
    pub b_layout: Layout,
    /// Leading dimension of A.
    pub lda: usize,
    /// Leading dimension of B.
    pub ldb: usize,
    /// Leading dimension of C (and of the pre-activation).
    pub ldc: usize,
    /// Batch stride of A.
    pub stride_a: usize,
    /// Batch stride of B.
    pub stride_b: usize,
    /// Batch stride of C (and of the pre-activation).
    pub stride_c: usize,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the previous C (0: C is not read).
    pub beta: f32,
    /// Rounding of the inputs.
    pub rounding: Rounding,
}

/// What follows `v = alpha·A·B + beta·C + bias`, as the GPU epilogue applies it.
#[derive(Debug)]
pub enum Activation<'a, O> {
    /// `C = v`.
    None,
    /// `C = gelu(v)`; `v` (rounded to `O`) is stored to `pre_act` when given.
    Gelu {
        /// Receives the pre-activation (same ld and batch stride as C).
        pre_act: Option<&'a mut [O]>,
    },
    /// `C = v · gelu'(pre_act)`.
    DGelu {
        /// The forward pre-activation (same ld and batch stride as C).
        pre_act: &'a [O],
    },
}

/// GELU, tanh approximation: `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
pub fn gelu(x: f64) -> f64 {
    0.5 * x * (1.0 + (GELU_SCALE * (x + GELU_CUBIC * x * x * x)).tanh())
}

/// The exact derivative of [`gelu`] (llm.c's `gelu_backward` local gradient).
pub fn gelu_grad(x: f64) -> f64 {
    let t = (GELU_SCALE * (x + GELU_CUBIC * x * x * x)).tanh();
    0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * GELU_SCALE * (1.0 + 3.0 * GELU_CUBIC * x * x)
}

impl Gemm {
    /// A single dense GEMM: leading dimensions equal to the stored row lengths, batch 1,
    /// `alpha = 1`, `beta = 0`, no rounding.
    pub fn new(m: usize, n: usize, k: usize, a_layout: Layout, b_layout: Layout) -> Self {
        let lda = if a_layout == Layout::RowMajor { k } else { m };
        let ldb = if b_layout == Layout::RowMajor { n } else { k };
        Self {
            m,
            n,
            k,
            batch: 1,
            a_layout,
            b_layout,
            lda,
            ldb,
            ldc: n,
            stride_a: 0,
            stride_b: 0,
            stride_c: 0,
            alpha: 1.0,
            beta: 0.0,
            rounding: Rounding::None,
        }
    }

    /// Index of `A(m, k)` of batch `z`.
    pub fn a_index(&self, z: usize, m: usize, k: usize) -> usize {
        z * self.stride_a
            + match self.a_layout {
                Layout::RowMajor => m * self.lda + k,
                Layout::ColMajor => k * self.lda + m,
            }
    }

    /// Index of `B(k, n)` of batch `z`.
    pub fn b_index(&self, z: usize, k: usize, n: usize) -> usize {
        z * self.stride_b
            + match self.b_layout {
                Layout::RowMajor => k * self.ldb + n,
                Layout::ColMajor => n * self.ldb + k,
            }
    }

    /// Index of `C(m, n)` of batch `z`.
    pub fn c_index(&self, z: usize, m: usize, n: usize) -> usize {
        z * self.stride_c + m * self.ldc + n
    }

    /// Elements A must have (0 when nothing is read).
    pub fn a_len(&self) -> usize {
        let nonempty = self.batch > 0 && self.m > 0 && self.k > 0;
        if nonempty { self.a_index(self.batch - 1, self.m - 1, self.k - 1) + 1 } else { 0 }
    }

    /// Elements B must have (0 when nothing is read).
    pub fn b_len(&self) -> usize {
        let nonempty = self.batch > 0 && self.k > 0 && self.n > 0;
        if nonempty { self.b_index(self.batch - 1, self.k - 1, self.n - 1) + 1 } else { 0 }
    }

    /// Elements C (and the pre-activation) must have.
    pub fn c_len(&self) -> usize {
        let nonempty = self.batch > 0 && self.m > 0 && self.n > 0;
        if nonempty { self.c_index(self.batch - 1, self.m - 1, self.n - 1) + 1 } else { 0 }
    }

    /// `Σ_k round(A(m, k)) · round(B(k, n))` of batch `z` for every `m` in `rows` and every
    /// `n < N`, in f64, row by row (`rows.len() × N`). With `abs`, the sum of the absolute
    /// products instead (the magnitude an accumulation error scales with).
    ///
    /// # Panics
    /// If an index falls outside `a` or `b`.
    pub fn products<I: Element>(
        &self,
        a: &[I],
        b: &[I],
        z: usize,
        rows: &[usize],
        abs: bool,
    ) -> Vec<f64> {
        let load = |x: I| {
            let v = self.rounding.apply(x.to_f32());
            if abs { v.abs() } else { v }
        };
        // Gather both operands K-contiguous so the dot products stream.
        let bt: Vec<f32> = (0..self.n * self.k)
            .into_par_iter()
            .map(|i| load(b[self.b_index(z, i % self.k, i / self.k)]))
            .collect();
        let mut out = vec![0.0; rows.len() * self.n];
        out.par_chunks_mut(self.n.max(1)).zip(rows).for_each(|(row, &m)| {
            let at: Vec<f32> = (0..self.k).map(|k| load(a[self.a_index(z, m, k)])).collect();
            for (n, o) in row.iter_mut().enumerate() {
                let bn = &bt[n * self.k..(n + 1) * self.k];
                *o = at.iter().zip(bn).map(|(&x, &y)| x as f64 * y as f64).sum();
            }
        });
        out
    }
}

/// Computes the GEMM into `c` (and the pre-activation, for [`Activation::Gelu`] with storage):
/// for every batch `z`, row `m`, column `n`,
/// `v = alpha·Σ_k round(A)·round(B) + beta·C + bias[n]`, then the activation; everything in
/// f64, rounded once to `O`. Elements of `c` outside the M×N matrices are left untouched.
///
/// # Panics
/// If a buffer is shorter than the shape requires (`Gemm::a_len` etc., `n` for the bias).
pub fn gemm<I: Element, O: Element>(
    g: &Gemm,
    a: &[I],
    b: &[I],
    c: &mut [O],
    bias: Option<&[O]>,
    mut activation: Activation<'_, O>,
) {
    assert!(a.len() >= g.a_len(), "gemm: a has {} elements, needs {}", a.len(), g.a_len());
    assert!(b.len() >= g.b_len(), "gemm: b has {} elements, needs {}", b.len(), g.b_len());
    assert!(c.len() >= g.c_len(), "gemm: c has {} elements, needs {}", c.len(), g.c_len());
    if let Some(bias) = bias {
        assert!(bias.len() >= g.n, "gemm: bias has {} elements, needs {}", bias.len(), g.n);
    }
    match &activation {
        Activation::Gelu { pre_act: Some(p) } => assert!(p.len() >= g.c_len(), "gemm: pre_act"),
        Activation::DGelu { pre_act } => assert!(pre_act.len() >= g.c_len(), "gemm: pre_act"),
        _ => {}
    }
    let rows: Vec<usize> = (0..g.m).collect();
    for z in 0..g.batch {
        let products = g.products(a, b, z, &rows, false);
        for m in 0..g.m {
            for n in 0..g.n {
                let at = g.c_index(z, m, n);
                let mut v = g.alpha as f64 * products[m * g.n + n];
                if g.beta != 0.0 {
                    v += g.beta as f64 * c[at].to_f32() as f64;
                }
                if let Some(bias) = bias {
                    v += bias[n].to_f32() as f64;
                }
                v = match &mut activation {
                    Activation::None => v,
                    Activation::Gelu { pre_act } => {
                        if let Some(p) = pre_act {
                            p[at] = O::from_f32(v as f32);
                        }
                        gelu(v)
                    }
                    Activation::DGelu { pre_act } => v * gelu_grad(pre_act[at].to_f32() as f64),
                };
                c[at] = O::from_f32(v as f32);
            }
        }
    }
}

/// Bias gradient: `db[n] = beta·db[n] + Σ_m dy[m·ld + n]` for `n < db.len()`, summed in f64.
///
/// # Panics
/// If `dy` is shorter than `(m - 1)·ld + db.len()`.
pub fn bias_grad<T: Element, O: Element>(dy: &[T], m: usize, ld: usize, db: &mut [O], beta: f32) {
    let n = db.len();
    if m > 0 && n > 0 {
        assert!(dy.len() >= (m - 1) * ld + n, "bias_grad: dy has {} elements", dy.len());
    }
    db.par_iter_mut().enumerate().for_each(|(col, d)| {
        let mut sum: f64 = (0..m).map(|row| dy[row * ld + col].to_f32() as f64).sum();
        if beta != 0.0 {
            sum += beta as f64 * d.to_f32() as f64;
        }
        *d = O::from_f32(sum as f32);
    });
}

/// The bias gradient's first pass bit for bit (`kernel_abi::gemm::bias_grad`): element
/// `s·n + col` is slice `s`'s sum of column `col < n`, the f32 sum from 0.0 of its 8 warps'
/// sums in warp order, warp `w`'s the f32 sum from 0.0 of rows `128s + w + 8i` (`i < 16`, in
/// order, rows past `m` skipped).
///
/// # Panics
/// If `dy` is shorter than `(m - 1)·ld + n`.
pub fn bias_grad_slices<T: Element>(dy: &[T], m: usize, ld: usize, n: usize) -> Vec<f32> {
    use kernel_abi::gemm::bias_grad::{SLICE_ROWS, THREADS};
    let (slice_rows, warps) = (SLICE_ROWS as usize, THREADS as usize / 32);
    if m > 0 && n > 0 {
        assert!(dy.len() >= (m - 1) * ld + n, "bias_grad_slices: dy has {} elements", dy.len());
    }
    let slices = m.div_ceil(slice_rows);
    let mut out = vec![0.0f32; slices * n];
    out.par_chunks_mut(n.max(1)).enumerate().for_each(|(s, row)| {
        for (col, total) in row.iter_mut().enumerate() {
            *total = (0..warps).fold(0.0f32, |total, w| {
                let rows = (0..slice_rows / warps).map(|i| s * slice_rows + w + warps * i);
                total
                    + rows.filter(|&r| r < m).fold(0.0f32, |sum, r| sum + dy[r * ld + col].to_f32())
            });
        }
    });
    out
}

/// The bias gradient's second pass bit for bit (`kernel_abi::gemm::bias_grad`): `db[col] =
/// S + beta·db[col]` in f32 (the product rounded, then the sum; `db` not read when `beta` is
/// 0), rounded to `O`, with `S` the f32 sum from 0.0 of the 16 groups' sums in order, group
/// `g`'s the f32 sum from 0.0 of `partials[s·N + col]` for `s = g, g + 16, …` below `slices`.
///
/// # Panics
/// If `partials` is shorter than `slices · db.len()`.
pub fn bias_grad_reduce<O: Element>(partials: &[f32], slices: usize, db: &mut [O], beta: f32) {
    use kernel_abi::gemm::bias_grad::{REDUCE_COLS, REDUCE_THREADS};
    let groups = (REDUCE_THREADS / REDUCE_COLS) as usize;
    let n = db.len();
    assert!(partials.len() >= slices * n, "bias_grad_reduce: {} partials", partials.len());
    db.par_iter_mut().enumerate().for_each(|(col, d)| {
        let mut sum = grouped_sum(slices, groups, |s| partials[s * n + col]);
        if beta != 0.0 {
            sum += beta * d.to_f32();
        }
        *d = O::from_f32(sum);
    });
}

/// The f32 sum from 0.0 of `groups` group sums in group order, group `g`'s the f32 sum from
/// 0.0 of `value(s)` for `s = g, g + groups, …` below `count`: the order of the GPU's second
/// reduction passes ([`bias_grad_reduce`], `crate::layernorm_backward_reduce`).
pub(crate) fn grouped_sum(count: usize, groups: usize, value: impl Fn(usize) -> f32) -> f32 {
    let group = |g: usize| (g..count).step_by(groups).fold(0.0f32, |t, s| t + value(s));
    (0..groups).fold(0.0f32, |sum, g| sum + group(g))
}

/// Rows per group of [`col_sums`] (`kernel_abi::gemm::COL_SUM_ROWS`).
pub const COL_SUM_ROWS: usize = 16;

/// The column sums a GEMM epilogue writes of its output `c` (as stored, laid out as `g`'s C),
/// bit for bit: for batch `z`, group `j` of [`COL_SUM_ROWS`] rows and column `n`, element
/// `(z·⌈M/16⌉ + j)·N + n` is `(s0 + s1) + (s2 + s3)` in f32, `s_r` the f32 sum from 0.0 of
/// rows `16j + r + 4i` (`i < 4`, in order, rows past M skipped). Their sum over the groups is
/// the bias gradient of the layer whose output gradient `c` is.
///
/// # Panics
/// If `c` is shorter than `g.c_len()`.
pub fn col_sums<O: Element>(g: &Gemm, c: &[O]) -> Vec<f32> {
    assert!(c.len() >= g.c_len(), "col_sums: c has {} elements", c.len());
    let groups = g.m.div_ceil(COL_SUM_ROWS);
    let mut out = vec![0.0f32; g.batch * groups * g.n];
    for z in 0..g.batch {
        for j in 0..groups {
            for n in 0..g.n {
                let class = |r: usize| {
                    let mut s = 0.0f32;
                    for i in 0..4 {
                        let m = COL_SUM_ROWS * j + r + 4 * i;
                        if m < g.m {
                            s += c[g.c_index(z, m, n)].to_f32();
                        }
                    }
                    s
                };
                out[(z * groups + j) * g.n + n] = (class(0) + class(1)) + (class(2) + class(3));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The definition, one element at a time, in f64 — no gathering, no parallelism.
    fn naive(g: &Gemm, a: &[f32], b: &[f32], c: &[f32], bias: Option<&[f32]>) -> Vec<f64> {
        let mut out: Vec<f64> = c.iter().map(|&x| x as f64).collect();
        for z in 0..g.batch {
            for m in 0..g.m {
                for n in 0..g.n {
                    let mut dot = 0.0;
                    for k in 0..g.k {
                        let x = g.rounding.apply(a[g.a_index(z, m, k)]) as f64;
                        dot += x * g.rounding.apply(b[g.b_index(z, k, n)]) as f64;
                    }
                    let at = g.c_index(z, m, n);
                    let old = if g.beta != 0.0 { g.beta as f64 * c[at] as f64 } else { 0.0 };
                    out[at] = g.alpha as f64 * dot + old + bias.map_or(0.0, |b| b[n] as f64);
                }
            }
        }
        out
    }

    /// Deterministic values in [-1, 1) without a random-number dependency.
    fn values(n: usize, seed: u64) -> Vec<f32> {
        let mut state = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            })
            .collect()
    }

    #[test]
    fn bias_grad_in_the_kernels_order_is_the_bias_gradient() {
        let (m, ld, n) = (300, 40, 37);
        let dy = values((m - 1) * ld + n, 5);
        let db0 = values(n, 6);
        let mut want = db0.clone();
        bias_grad(&dy, m, ld, &mut want, 0.5);
        let mut got = db0.clone();
        bias_grad_reduce(&bias_grad_slices(&dy, m, ld, n), m.div_ceil(128), &mut got, 0.5);
        for (g, w) in got.iter().zip(&want) {
            assert!((g - w).abs() <= 1e-5, "{g} against {w}");
        }
    }

    const LAYOUTS: [Layout; 2] = [Layout::RowMajor, Layout::ColMajor];

    #[test]
    fn matches_the_definition_for_every_layout_ld_batch_and_scalar() {
        for a_layout in LAYOUTS {
            for b_layout in LAYOUTS {
                let mut g = Gemm::new(5, 7, 3, a_layout, b_layout);
                g.lda += 2;
                g.ldb += 1;
                g.ldc += 3;
                g.batch = 3;
                g.stride_a = g.a_len() + 1;
                g.stride_b = g.b_len();
                g.stride_c = g.c_len() + 4;
                g.alpha = -1.5;
                g.beta = 0.5;
                g.rounding = Rounding::Bf16;
                let (a, b) = (values(g.a_len(), 1), values(g.b_len(), 2));
                let c0 = values(g.c_len(), 3);
                let bias = values(g.n, 4);
                let want = naive(&g, &a, &b, &c0, Some(&bias));
                let mut c = c0.clone();
                gemm(&g, &a, &b, &mut c, Some(&bias), Activation::None);
                for (i, (&got, &want)) in c.iter().zip(&want).enumerate() {
                    assert!((got as f64 - want).abs() <= 1e-6 * want.abs().max(1.0), "[{i}]");
                }
            }
        }
    }

    #[test]
    fn beta_zero_ignores_c_and_padding_is_untouched() {
        let mut g = Gemm::new(2, 3, 4, Layout::RowMajor, Layout::ColMajor);
        g.ldc = 5;
        let (a, b) = (values(g.a_len(), 5), values(g.b_len(), 6));
        let mut c = vec![f32::NAN; g.c_len()];
        gemm(&g, &a, &b, &mut c, None, Activation::None);
        for m in 0..2 {
            assert!(c[m * 5..m * 5 + 3].iter().all(|x| x.is_finite()));
            if m == 0 {
                assert!(c[3].is_nan() && c[4].is_nan());
            }
        }
    }

    #[test]
    fn gelu_matches_known_values_and_its_derivative() {
        assert_eq!(gelu(0.0), 0.0);
        assert!((gelu(1.0) - 0.841_191_990_608_276_8).abs() < 1e-12);
        assert!((gelu(-3.0) - -0.003_637_392_081_772_994).abs() < 1e-12);
        for x in [-6.0, -2.5, -1.0, -0.3, 0.0, 0.2, 1.0, 3.0, 7.0] {
            let h = 1e-6;
            let fd = (gelu(x + h) - gelu(x - h)) / (2.0 * h);
            assert!((gelu_grad(x) - fd).abs() < 1e-8, "x = {x}");
        }
    }

    #[test]
    fn gelu_epilogues_store_and_use_the_pre_activation() {
        let mut g = Gemm::new(3, 4, 5, Layout::ColMajor, Layout::RowMajor);
        g.alpha = 0.75;
        let (a, b) = (values(g.a_len(), 7), values(g.b_len(), 8));
        let bias = values(g.n, 9);
        let mut plain = vec![0.0f32; g.c_len()];
        gemm(&g, &a, &b, &mut plain, Some(&bias), Activation::None);
        let (mut out, mut pre) = (vec![0.0f32; g.c_len()], vec![0.0f32; g.c_len()]);
        gemm(&g, &a, &b, &mut out, Some(&bias), Activation::Gelu { pre_act: Some(&mut pre) });
        assert_eq!(pre, plain);
        for (o, p) in out.iter().zip(&plain) {
            assert!((*o as f64 - gelu(*p as f64)).abs() < 1e-6);
        }
        let mut back = vec![0.0f32; g.c_len()];
        gemm(&g, &a, &b, &mut back, None, Activation::DGelu { pre_act: &pre });
        let mut unbiased = vec![0.0f32; g.c_len()];
        gemm(&g, &a, &b, &mut unbiased, None, Activation::None);
        for i in 0..back.len() {
            let want = unbiased[i] as f64 * gelu_grad(pre[i] as f64);
            assert!((back[i] as f64 - want).abs() < 1e-6);
        }
    }

    #[test]
    fn rounding_modes_round_the_inputs() {
        let x = 1.0 + 3.0 * f32::EPSILON;
        assert_eq!(Rounding::None.apply(x), x);
        assert_eq!(Rounding::Tf32.apply(x), 1.0);
        assert_eq!(Rounding::Bf16.apply(1.0 + 1.0 / 128.0), 1.0 + 1.0 / 128.0);
        assert_eq!(Rounding::Bf16.apply(1.0 + 1.0 / 512.0), 1.0);
        assert_eq!(Rounding::F16.apply(1.0 + 1.0 / 4096.0), 1.0);
        // A product whose inputs lose bits under TF32.
        let mut g = Gemm::new(1, 1, 1, Layout::RowMajor, Layout::RowMajor);
        g.rounding = Rounding::Tf32;
        let mut c = [0.0f32];
        gemm(&g, &[x], &[x], &mut c, None, Activation::None);
        assert_eq!(c[0], 1.0);
    }

    #[test]
    fn abs_products_bound_the_products() {
        let g = Gemm::new(4, 6, 9, Layout::ColMajor, Layout::ColMajor);
        let (a, b) = (values(g.a_len(), 10), values(g.b_len(), 11));
        let rows = [0, 2, 3];
        let p = g.products(&a, &b, 0, &rows, false);
        let q = g.products(&a, &b, 0, &rows, true);
        assert!(p.iter().zip(&q).all(|(x, y)| x.abs() <= *y && *y > 0.0));
    }

    #[test]
    fn bias_grad_sums_columns() {
        let dy = values(5 * 7, 12);
        let mut db = vec![1.0f32; 4];
        bias_grad(&dy, 5, 7, &mut db, 2.0);
        for (n, d) in db.iter().enumerate() {
            let want: f64 = (0..5).map(|m| dy[m * 7 + n] as f64).sum::<f64>() + 2.0;
            assert!((*d as f64 - want).abs() < 1e-6);
        }
    }
}
