//! Comparisons of kernel output against the CPU reference.

use std::fmt::Write;

/// Per-element tolerance: `|got - want| <= abs + rel * |want|`.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    /// Absolute part.
    pub abs: f64,
    /// Relative part.
    pub rel: f64,
}

impl Tolerance {
    /// f32 arithmetic in a different order than the reference.
    pub const F32: Tolerance = Tolerance { abs: 1e-6, rel: 1e-5 };
    /// TF32 tensor-core inputs.
    pub const TF32: Tolerance = Tolerance { abs: 1e-4, rel: 1e-3 };
    /// bf16/f16 storage or inputs.
    pub const HALF: Tolerance = Tolerance { abs: 1e-3, rel: 1e-2 };
}

const SHOWN: usize = 8;

/// Fails (listing the first mismatches and the seed) unless every `got[i]` is within `tol` of
/// `want[i]`. NaN or infinity in `got` always fails.
pub fn assert_close(what: &str, seed: u64, got: &[f32], want: &[f32], tol: Tolerance) {
    assert_eq!(got.len(), want.len(), "{what}: length {} != reference {}", got.len(), want.len());
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| {
            let (g, w) = (got[i] as f64, want[i] as f64);
            !g.is_finite() || (g - w).abs() > tol.abs + tol.rel * w.abs()
        })
        .collect();
    if bad.is_empty() {
        return;
    }
    let mut msg =
        format!("{what}: {} of {} elements out of tolerance {tol:?}", bad.len(), got.len());
    for &i in bad.iter().take(SHOWN) {
        let _ = write!(msg, "\n  [{i}] got {} want {}", got[i], want[i]);
    }
    panic!("{msg}\n  (TEST_SEED={seed} reproduces)");
}

/// Fails (listing the first mismatches and the seed) unless `got` and `want` are identical
/// bit patterns, element by element: for exactly rounded operations.
pub fn assert_bits_eq<T: bytemuck::Pod + std::fmt::Debug>(
    what: &str,
    seed: u64,
    got: &[T],
    want: &[T],
) {
    assert_eq!(got.len(), want.len(), "{what}: length {} != reference {}", got.len(), want.len());
    let bits = |v: &T| bytemuck::bytes_of(v).to_vec();
    let bad: Vec<usize> = (0..got.len()).filter(|&i| bits(&got[i]) != bits(&want[i])).collect();
    if bad.is_empty() {
        return;
    }
    let mut msg = format!("{what}: {} of {} elements differ", bad.len(), got.len());
    for &i in bad.iter().take(SHOWN) {
        let _ = write!(msg, "\n  [{i}] got {:?} want {:?}", got[i], want[i]);
    }
    panic!("{msg}\n  (TEST_SEED={seed} reproduces)");
}

/// Like [`assert_bits_eq`] for float elements, except that every NaN equals every NaN: the
/// payload and sign of a NaN are not specified across CPU and GPU (x86 produces `0xffc00000`
/// for `inf - inf`, NVIDIA GPUs the canonical `0x7fffffff`).
pub fn assert_floats_eq<T: cpu_ref::precision::Element + bytemuck::Pod>(
    what: &str,
    seed: u64,
    got: &[T],
    want: &[T],
) {
    let canonical = |v: &[T]| -> Vec<T> {
        v.iter().map(|x| if x.to_f32().is_nan() { T::from_f32(f32::NAN) } else { *x }).collect()
    };
    assert_bits_eq(what, seed, &canonical(got), &canonical(want));
}

/// Fails (listing the first mismatches and the seed) unless every `got[i]` is within `tol` of
/// the f32 reference `want[i]`, plus, for 16-bit storage, one unit in the last place of `T` (a
/// result computed in f32 within `tol` of the reference and rounded once to `T` lands there).
/// NaN or infinity in `got` always fails.
pub fn assert_close_in<T: cpu_ref::precision::Element + bytemuck::Pod>(
    what: &str,
    seed: u64,
    got: &[T],
    want: &[f32],
    tol: Tolerance,
) {
    assert_eq!(got.len(), want.len(), "{what}: length {} != reference {}", got.len(), want.len());
    let bad: Vec<usize> = (0..got.len())
        .filter(|&i| {
            let (g, w) = (got[i].to_f32() as f64, want[i] as f64);
            let f32_error = tol.abs + tol.rel * w.abs();
            let allowed = match size_of::<T>() {
                4 => f32_error,
                _ => f32_error + ulp_of::<T>(want[i]),
            };
            !g.is_finite() || (g - w).abs() > allowed
        })
        .collect();
    if bad.is_empty() {
        return;
    }
    let mut msg = format!(
        "{what}: {} of {} elements out of tolerance ({})",
        bad.len(),
        got.len(),
        if size_of::<T>() == 4 {
            format!("{tol:?}")
        } else {
            format!("{tol:?} + 1 ulp of {}", T::NAME)
        }
    );
    for &i in bad.iter().take(SHOWN) {
        let _ = write!(msg, "\n  [{i}] got {} want {}", got[i].to_f32(), want[i]);
    }
    panic!("{msg}\n  (TEST_SEED={seed} reproduces)");
}

/// The spacing of 16-bit `T` values at `x`: the distance from `x` rounded to `T` to the next
/// value away from zero.
fn ulp_of<T: cpu_ref::precision::Element + bytemuck::Pod>(x: f32) -> f64 {
    let rounded = T::from_f32(x);
    let bits: u16 = bytemuck::cast(rounded);
    let next: T = bytemuck::cast(bits.wrapping_add(1));
    (next.to_f32() as f64 - rounded.to_f32() as f64).abs()
}
