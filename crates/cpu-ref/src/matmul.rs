//! Linear layer (`nn.Linear`): `out = inp · weightᵀ + bias`, forward and backward.
//!
//! The three products (forward, input gradient, weight gradient) run on the `gemm` crate:
//! packed, cache-blocked micro-kernels chosen at run time for the CPU (AVX-512, AVX2+FMA or
//! SSE), parallel over the rayon pool. Measured against a hand-written cache-blocked,
//! register-tiled rayon loop (`examples/gemm_compare.rs`; numbers in `bench/cpu-trainer.md`)
//! it is several times faster on every GPT-2 shape, so it is what the reference uses.
//! Each output element is reduced over `k` in one fixed order by one thread, so results do
//! not depend on scheduling.

use rayon::prelude::*;

/// A matrix stored in a slice: element `(i, j)` is at `i * row_stride + j * col_stride`.
#[derive(Clone, Copy)]
struct Strided<'a> {
    data: &'a [f32],
    row_stride: usize,
    col_stride: usize,
}

impl<'a> Strided<'a> {
    /// A row-major `rows × cols` matrix.
    fn row_major(data: &'a [f32], cols: usize) -> Self {
        Self { data, row_stride: cols, col_stride: 1 }
    }

    /// The transpose of a row-major `cols × rows` matrix.
    fn transposed(data: &'a [f32], rows: usize) -> Self {
        Self { data, row_stride: 1, col_stride: rows }
    }

    /// Whether a `rows × cols` matrix with these strides fits in `data`.
    fn covers(&self, rows: usize, cols: usize) -> bool {
        rows == 0
            || cols == 0
            || (rows - 1) * self.row_stride + (cols - 1) * self.col_stride < self.data.len()
    }
}

/// `c (m×n, row-major) = a (m×k) · b (k×n)`, or `c += a · b` when `accumulate`.
fn sgemm(
    m: usize,
    n: usize,
    k: usize,
    a: Strided<'_>,
    b: Strided<'_>,
    c: &mut [f32],
    accumulate: bool,
) {
    assert_eq!(c.len(), m * n, "sgemm: output holds {} elements, not {m}×{n}", c.len());
    assert!(a.covers(m, k), "sgemm: lhs does not hold {m}×{k}");
    assert!(b.covers(k, n), "sgemm: rhs does not hold {k}×{n}");
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            c.fill(0.0);
        }
        return;
    }
    // SAFETY: the asserts above prove every element gemm reads lies inside `a.data` and
    // `b.data`, and every element it writes inside `c` (m×n, row stride n, column stride 1).
    // `c` is an exclusive borrow, so it aliases neither input. Strides fit in isize because
    // they index inside allocations.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c.as_mut_ptr(),
            1,
            n as isize,
            accumulate,
            a.data.as_ptr(),
            a.col_stride as isize,
            a.row_stride as isize,
            b.data.as_ptr(),
            b.col_stride as isize,
            b.row_stride as isize,
            1.0,
            1.0,
            false,
            false,
            false,
            gemm::Parallelism::Rayon(0),
        );
    }
}

/// Forward of a linear layer.
///
/// - `out`: (bt, oc), written: `out[r, o] = bias[o] + Σ_i inp[r, i] · weight[o, i]`
/// - `inp`: (bt, c)
/// - `weight`: (oc, c), the `nn.Linear` layout
/// - `bias`: (oc), or `None` for no bias
///
/// # Panics
/// If a length does not match the shapes.
pub fn matmul_forward(
    out: &mut [f32],
    inp: &[f32],
    weight: &[f32],
    bias: Option<&[f32]>,
    bt: usize,
    c: usize,
    oc: usize,
) {
    assert_eq!(out.len(), bt * oc, "matmul_forward: out must be bt×oc");
    assert_eq!(inp.len(), bt * c, "matmul_forward: inp must be bt×c");
    assert_eq!(weight.len(), oc * c, "matmul_forward: weight must be oc×c");
    if let Some(bias) = bias {
        assert_eq!(bias.len(), oc, "matmul_forward: bias must hold oc values");
        out.par_chunks_mut(oc.max(1)).for_each(|row| row.copy_from_slice(bias));
    }
    sgemm(
        bt,
        oc,
        c,
        Strided::row_major(inp, c),
        Strided::transposed(weight, c),
        out,
        bias.is_some(),
    );
}

/// Backward of a linear layer.
///
/// - `dinp`: (bt, c), written: `dinp = dout · weight`
/// - `dweight`: (oc, c), accumulated: `dweight += doutᵀ · inp`
/// - `dbias`: (oc), accumulated: `dbias[o] += Σ_r dout[r, o]` (in row order); `None` when
///   the layer has no bias
/// - `dout`: (bt, oc); `inp`: (bt, c); `weight`: (oc, c)
///
/// Parameter gradients accumulate (gradient accumulation and the tied embedding rely on it);
/// the input gradient is overwritten.
///
/// # Panics
/// If a length does not match the shapes.
#[allow(
    clippy::too_many_arguments,
    reason = "llm.c's signature (buffers, then explicit shapes), kept for side-by-side reading"
)]
pub fn matmul_backward(
    dinp: &mut [f32],
    dweight: &mut [f32],
    dbias: Option<&mut [f32]>,
    dout: &[f32],
    inp: &[f32],
    weight: &[f32],
    bt: usize,
    c: usize,
    oc: usize,
) {
    matmul_backward_input(dinp, dout, weight, bt, c, oc);
    matmul_backward_weight(dweight, dout, inp, bt, c, oc);
    if let Some(dbias) = dbias {
        matmul_backward_bias(dbias, dout, bt, oc);
    }
}

/// The input gradient of [`matmul_backward`]: `dinp = dout · weight`, written.
///
/// # Panics
/// If a length does not match the shapes.
pub fn matmul_backward_input(
    dinp: &mut [f32],
    dout: &[f32],
    weight: &[f32],
    bt: usize,
    c: usize,
    oc: usize,
) {
    assert_eq!(dinp.len(), bt * c, "matmul_backward: dinp must be bt×c");
    assert_eq!(dout.len(), bt * oc, "matmul_backward: dout must be bt×oc");
    assert_eq!(weight.len(), oc * c, "matmul_backward: weight must be oc×c");
    sgemm(bt, c, oc, Strided::row_major(dout, oc), Strided::row_major(weight, c), dinp, false);
}

/// The weight gradient of [`matmul_backward`]: `dweight += doutᵀ · inp`.
///
/// # Panics
/// If a length does not match the shapes.
pub fn matmul_backward_weight(
    dweight: &mut [f32],
    dout: &[f32],
    inp: &[f32],
    bt: usize,
    c: usize,
    oc: usize,
) {
    assert_eq!(dweight.len(), oc * c, "matmul_backward: dweight must be oc×c");
    assert_eq!(dout.len(), bt * oc, "matmul_backward: dout must be bt×oc");
    assert_eq!(inp.len(), bt * c, "matmul_backward: inp must be bt×c");
    sgemm(oc, c, bt, Strided::transposed(dout, oc), Strided::row_major(inp, c), dweight, true);
}

/// The bias gradient of [`matmul_backward`]: `dbias[o] += Σ_r dout[r, o]`, in row order.
///
/// # Panics
/// If a length does not match the shapes.
pub fn matmul_backward_bias(dbias: &mut [f32], dout: &[f32], bt: usize, oc: usize) {
    assert_eq!(dbias.len(), oc, "matmul_backward: dbias must hold oc values");
    assert_eq!(dout.len(), bt * oc, "matmul_backward: dout must be bt×oc");
    const COLS: usize = 64;
    dbias.par_chunks_mut(COLS).enumerate().for_each(|(chunk, db)| {
        let cols = chunk * COLS..chunk * COLS + db.len();
        for row in dout.chunks_exact(oc) {
            for (d, g) in db.iter_mut().zip(&row[cols.clone()]) {
                *d += g;
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::*;

    fn naive_forward(
        inp: &[f64],
        w: &[f64],
        bias: Option<&[f64]>,
        bt: usize,
        c: usize,
        oc: usize,
    ) -> Vec<f64> {
        let mut out = vec![0.0; bt * oc];
        for r in 0..bt {
            for o in 0..oc {
                let mut acc = bias.map_or(0.0, |b| b[o]);
                for i in 0..c {
                    acc += inp[r * c + i] * w[o * c + i];
                }
                out[r * oc + o] = acc;
            }
        }
        out
    }

    #[test]
    fn forward_matches_naive_f64_on_odd_and_blocked_shapes() {
        let mut rng = rng(1);
        for &(bt, c, oc) in &[(1, 1, 1), (7, 5, 3), (37, 29, 131), (300, 257, 130), (64, 512, 96)] {
            let inp = uniform(&mut rng, bt * c, 1.0);
            let w = uniform(&mut rng, oc * c, 1.0);
            let bias = uniform(&mut rng, oc, 1.0);
            let mut out = vec![f32::NAN; bt * oc];
            matmul_forward(&mut out, &inp, &w, Some(&bias), bt, c, oc);
            let want = naive_forward(&f64s(&inp), &f64s(&w), Some(&f64s(&bias)), bt, c, oc);
            assert_close("out (bias)", &out, &want, 1e-5 * (c as f64).sqrt());
            let mut out = vec![f32::NAN; bt * oc];
            matmul_forward(&mut out, &inp, &w, None, bt, c, oc);
            let want = naive_forward(&f64s(&inp), &f64s(&w), None, bt, c, oc);
            assert_close("out (no bias)", &out, &want, 1e-5 * (c as f64).sqrt());
        }
    }

    #[test]
    fn backward_matches_finite_differences_and_accumulates() {
        let mut rng = rng(2);
        let (bt, c, oc) = (5, 7, 6);
        let inp = uniform(&mut rng, bt * c, 1.0);
        let w = uniform(&mut rng, oc * c, 1.0);
        let bias = uniform(&mut rng, oc, 1.0);
        let dout = uniform(&mut rng, bt * oc, 1.0);
        let dw0 = uniform(&mut rng, oc * c, 1.0);
        let db0 = uniform(&mut rng, oc, 1.0);
        let mut dinp = vec![f32::NAN; bt * c];
        let (mut dw, mut db) = (dw0.clone(), db0.clone());
        matmul_backward(&mut dinp, &mut dw, Some(&mut db), &dout, &inp, &w, bt, c, oc);

        let (inp64, w64, b64, g) = (f64s(&inp), f64s(&w), f64s(&bias), f64s(&dout));
        let loss = |i: &[f64], w: &[f64], b: &[f64]| {
            weighted_sum(&naive_forward(i, w, Some(b), bt, c, oc), &g)
        };
        let want_dinp = numerical_grad(|x| loss(x, &w64, &b64), &inp64);
        let want_dw: Vec<f64> = numerical_grad(|x| loss(&inp64, x, &b64), &w64)
            .iter()
            .zip(&dw0)
            .map(|(d, &d0)| d + f64::from(d0))
            .collect();
        let want_db: Vec<f64> = numerical_grad(|x| loss(&inp64, &w64, x), &b64)
            .iter()
            .zip(&db0)
            .map(|(d, &d0)| d + f64::from(d0))
            .collect();
        assert_close("dinp", &dinp, &want_dinp, 1e-5);
        assert_close("dweight", &dw, &want_dw, 1e-5);
        assert_close("dbias", &db, &want_db, 1e-5);
    }

    #[test]
    fn backward_matches_naive_f64_on_blocked_shapes_without_bias() {
        let mut rng = rng(3);
        let (bt, c, oc) = (130, 67, 257);
        let inp = uniform(&mut rng, bt * c, 1.0);
        let w = uniform(&mut rng, oc * c, 1.0);
        let dout = uniform(&mut rng, bt * oc, 1.0);
        let mut dinp = vec![f32::NAN; bt * c];
        let mut dw = vec![0.0; oc * c];
        matmul_backward(&mut dinp, &mut dw, None, &dout, &inp, &w, bt, c, oc);
        let (inp64, w64, g) = (f64s(&inp), f64s(&w), f64s(&dout));
        let mut want_dinp = vec![0.0; bt * c];
        let mut want_dw = vec![0.0; oc * c];
        for r in 0..bt {
            for o in 0..oc {
                for i in 0..c {
                    want_dinp[r * c + i] += g[r * oc + o] * w64[o * c + i];
                    want_dw[o * c + i] += g[r * oc + o] * inp64[r * c + i];
                }
            }
        }
        assert_close("dinp", &dinp, &want_dinp, 1e-5 * (oc as f64).sqrt());
        assert_close("dweight", &dw, &want_dw, 1e-5 * (bt as f64).sqrt());
    }

    #[test]
    fn results_do_not_depend_on_the_thread_count() {
        let mut rng = rng(4);
        let (bt, c, oc) = (256, 768, 1024);
        let inp = uniform(&mut rng, bt * c, 1.0);
        let w = uniform(&mut rng, oc * c, 1.0);
        let dout = uniform(&mut rng, bt * oc, 1.0);
        let run = |threads: usize| {
            let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().unwrap();
            pool.install(|| {
                let mut out = vec![0.0; bt * oc];
                matmul_forward(&mut out, &inp, &w, None, bt, c, oc);
                let mut dinp = vec![0.0; bt * c];
                let mut dw = vec![0.0; oc * c];
                matmul_backward(&mut dinp, &mut dw, None, &dout, &inp, &w, bt, c, oc);
                (out, dinp, dw)
            })
        };
        assert!(run(1) == run(3), "matmul results changed with the number of threads");
    }
}
