//! Comparisons of kernel output against the CPU reference, element by element in parallel
//! (a GPU run compares ~10⁹ elements of GPT-2-sized outputs); the mismatches are listed in
//! index order.

use rayon::prelude::*;
use std::fmt::Write;

/// Per-element tolerance: `|got - want| <= abs + rel * |want|`.
#[derive(Clone, Copy, Debug)]
pub struct Tolerance {
    /// Absolute part.
    pub abs: f64,
    /// Relative part.
    pub rel: f64,
}

const SHOWN: usize = 8;

/// Fails (listing the first mismatches and the seed) unless every `got[i]` is within `tol` of
/// `want[i]`. NaN or infinity in `got` or in `want` always fails (a tolerance around a
/// non-finite reference would pass anything).
pub fn assert_close(what: &str, seed: u64, got: &[f32], want: &[f32], tol: Tolerance) {
    assert_eq!(got.len(), want.len(), "{what}: length {} != reference {}", got.len(), want.len());
    let bad: Vec<usize> = (0..got.len())
        .into_par_iter()
        .filter(|&i| {
            let (g, w) = (got[i] as f64, want[i] as f64);
            !g.is_finite() || !w.is_finite() || (g - w).abs() > tol.abs + tol.rel * w.abs()
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
pub fn assert_bits_eq<T: bytemuck::Pod + std::fmt::Debug + Sync>(
    what: &str,
    seed: u64,
    got: &[T],
    want: &[T],
) {
    assert_eq!(got.len(), want.len(), "{what}: length {} != reference {}", got.len(), want.len());
    let bad: Vec<usize> = (0..got.len())
        .into_par_iter()
        .filter(|&i| bytemuck::bytes_of(&got[i]) != bytemuck::bytes_of(&want[i]))
        .collect();
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
/// for `inf - inf`, NVIDIA GPUs the canonical `0x7fffffff`). An element of `got` that still
/// holds the poison of [`crate::poisoned`] (all bits set, a NaN) fails even where the
/// reference is another NaN: the kernel never wrote it. (Where `want` holds the poison too,
/// the element is one the kernel must leave alone.)
pub fn assert_floats_eq<T: cpu_ref::precision::Element + bytemuck::Pod>(
    what: &str,
    seed: u64,
    got: &[T],
    want: &[T],
) {
    assert_eq!(got.len(), want.len(), "{what}: length {} != reference {}", got.len(), want.len());
    let unwritten: Vec<usize> = (0..got.len())
        .into_par_iter()
        .filter(|&i| is_poison(&got[i]) && !is_poison(&want[i]))
        .collect();
    if let Some(&first) = unwritten.first() {
        panic!(
            "{what}: {} of {} elements still hold the poison (first [{first}]): never written\n  \
             (TEST_SEED={seed} reproduces)",
            unwritten.len(),
            got.len()
        );
    }
    let canonical = |v: &[T]| -> Vec<T> {
        v.par_iter().map(|x| if x.to_f32().is_nan() { T::from_f32(f32::NAN) } else { *x }).collect()
    };
    assert_bits_eq(what, seed, &canonical(got), &canonical(want));
}

/// Whether `x` has every bit set: the pattern [`crate::poisoned`] fills outputs with, which no
/// arithmetic of CPU or GPU produces (their NaNs are `0x7fc00000`, `0xffc00000`, `0x7fffffff`
/// and their 16-bit roundings).
fn is_poison<T: bytemuck::Pod>(x: &T) -> bool {
    bytemuck::bytes_of(x).iter().all(|&b| b == 0xff)
}

/// Fails (listing the first mismatches and the seed) unless every `got[i]` is within `tol` of
/// the f32 reference `want[i]`, plus, for 16-bit storage, one unit in the last place of `T` (a
/// result computed in f32 within `tol` of the reference and rounded once to `T` lands there).
/// NaN or infinity in `got` or in `want` always fails.
pub fn assert_close_in<T: cpu_ref::precision::Element + bytemuck::Pod>(
    what: &str,
    seed: u64,
    got: &[T],
    want: &[f32],
    tol: Tolerance,
) {
    assert_eq!(got.len(), want.len(), "{what}: length {} != reference {}", got.len(), want.len());
    let bad: Vec<usize> = (0..got.len())
        .into_par_iter()
        .filter(|&i| {
            let (g, w) = (got[i].to_f32() as f64, want[i] as f64);
            let f32_error = tol.abs + tol.rel * w.abs();
            let allowed = match size_of::<T>() {
                4 => f32_error,
                _ => f32_error + ulp_of::<T>(want[i]),
            };
            !g.is_finite() || !w.is_finite() || (g - w).abs() > allowed
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

/// The spacing of 16-bit `T` values at finite `x`: the distance from `x` rounded to `T` to the
/// next value away from zero, or, at the largest finite value and beyond (where `x` rounds to
/// infinity), the spacing just below it. Always finite, so that the allowance it joins is.
fn ulp_of<T: cpu_ref::precision::Element + bytemuck::Pod>(x: f32) -> f64 {
    let value = |magnitude: u16| bytemuck::cast::<u16, T>(magnitude).to_f32() as f64;
    let mut magnitude = bytemuck::cast::<T, u16>(T::from_f32(x)) & 0x7fff;
    while !value(magnitude).is_finite() {
        magnitude -= 1;
    }
    let above = value(magnitude + 1);
    if above.is_finite() {
        above - value(magnitude)
    } else {
        value(magnitude) - value(magnitude - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use half::{bf16, f16};

    fn fails(check: impl FnOnce() + std::panic::UnwindSafe) -> bool {
        std::panic::catch_unwind(check).is_err()
    }

    #[test]
    fn non_finite_references_fail() {
        let tol = Tolerance { abs: 1e-6, rel: 1e-5 };
        assert!(fails(|| assert_close("x", 0, &[1.0], &[f32::NAN], tol)));
        assert!(fails(|| assert_close("x", 0, &[1.0], &[f32::INFINITY], tol)));
        assert!(fails(|| assert_close_in::<f16>("x", 0, &[f16::ONE], &[f32::NAN], tol)));
        assert!(fails(|| assert_close_in::<f32>("x", 0, &[1.0], &[f32::NEG_INFINITY], tol)));
        assert_close("x", 0, &[1.0], &[1.0 + 5e-6], tol);
    }

    #[test]
    fn poison_never_equals_a_nan_reference() {
        let poison = bf16::from_bits(0xffff);
        assert!(fails(|| assert_floats_eq("x", 0, &[poison], &[bf16::NAN])));
        assert_floats_eq("x", 0, &[bf16::from_bits(0x7fff)], &[bf16::from_bits(0xffc0)]);
        assert_floats_eq("x", 0, &[poison], &[poison]);
    }

    #[test]
    fn the_ulp_allowance_stays_finite_at_the_top_of_the_range() {
        assert_eq!(ulp_of::<f16>(1.0), 2f64.powi(-10));
        assert_eq!(ulp_of::<f16>(65504.0), 32.0);
        assert_eq!(ulp_of::<f16>(1e6), 32.0);
        assert_eq!(ulp_of::<bf16>(-1.0), 2f64.powi(-7));
        assert_eq!(ulp_of::<bf16>(f32::MAX), 2f64.powi(127 - 7));
        let half = Tolerance { abs: 1e-3, rel: 1e-2 };
        assert!(fails(|| assert_close_in::<f16>("x", 0, &[f16::MAX], &[1e6], half)));
    }
}
