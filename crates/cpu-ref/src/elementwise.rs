//! Elementwise ops: fill, add, scale, cast, TF32 rounding; and the transpose.

use crate::precision::Element;
use rayon::prelude::*;

/// `out[i] = value`.
pub fn fill<T: Element>(out: &mut [T], value: T) {
    out.fill(value);
}

/// `out[i] = round(a[i] + b[i])`, the sum taken in f32.
///
/// # Panics
/// If the three lengths differ.
pub fn add<T: Element>(a: &[T], b: &[T], out: &mut [T]) {
    assert_eq!(a.len(), out.len(), "add: a and out lengths differ");
    assert_eq!(b.len(), out.len(), "add: b and out lengths differ");
    out.par_iter_mut()
        .zip(a.par_iter().zip(b))
        .for_each(|(o, (x, y))| *o = T::from_f32(x.to_f32() + y.to_f32()));
}

/// `out[i] = round(alpha * x[i])`, the product taken in f32.
///
/// # Panics
/// If the lengths differ.
pub fn scale<T: Element>(x: &[T], alpha: f32, out: &mut [T]) {
    assert_eq!(x.len(), out.len(), "scale: x and out lengths differ");
    out.par_iter_mut().zip(x).for_each(|(o, v)| *o = T::from_f32(alpha * v.to_f32()));
}

/// `dst[i] = src[i]` converted through f32, rounding to nearest-even when narrowing.
///
/// # Panics
/// If the lengths differ.
pub fn cast<S: Element, D: Element>(src: &[S], dst: &mut [D]) {
    assert_eq!(src.len(), dst.len(), "cast: src and dst lengths differ");
    dst.par_iter_mut().zip(src).for_each(|(d, s)| *d = D::from_f32(s.to_f32()));
}

/// `dst[i] = round_tf32(src[i])` ([`crate::precision::round_tf32`]: `cvt.rna.tf32.f32`).
///
/// # Panics
/// If the lengths differ.
pub fn round_tf32(src: &[f32], dst: &mut [f32]) {
    assert_eq!(src.len(), dst.len(), "round_tf32: src and dst lengths differ");
    dst.par_iter_mut().zip(src).for_each(|(d, &s)| *d = crate::precision::round_tf32(s));
}

/// `dst = srcᵀ`: `src` is `rows × cols` and `dst` `cols × rows`, both row-major.
///
/// # Panics
/// If either length is not `rows · cols`.
pub fn transpose<T: Copy + Send + Sync>(src: &[T], rows: usize, cols: usize, dst: &mut [T]) {
    assert_eq!(src.len(), rows * cols, "transpose: src is not rows × cols");
    assert_eq!(dst.len(), rows * cols, "transpose: dst is not cols × rows");
    if rows == 0 {
        return;
    }
    dst.par_chunks_mut(rows).enumerate().for_each(|(c, out)| {
        out.iter_mut().enumerate().for_each(|(r, o)| *o = src[r * cols + c]);
    });
}
