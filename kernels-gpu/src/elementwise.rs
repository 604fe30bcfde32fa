//! Elementwise kernels (see `kernel_abi::elementwise` for their contracts).
//!
//! Each thread handles chunks of 8 elements with 16-byte accesses when every pointer of the
//! launch is 16-byte aligned, grid-stride; the remaining `n % 8` elements (or all of them, for
//! unaligned pointers) go through a scalar grid-stride loop.

use crate::arch::{cvt, global, grid_stride_1d};
use crate::elem::Elem;
use crate::entry::entries;
use kernel_abi::elementwise::{AddParams, CastParams, FillParams, ScaleParams};
use kernel_abi::{Bf16, F16};

const CHUNK: u64 = 8;

/// Runs `vector(chunk_start)` over every whole 8-element chunk when `aligned`, then
/// `scalar(i)` over the elements left.
#[inline(always)]
pub(crate) fn for_each_chunk(
    n: u64,
    aligned: bool,
    mut vector: impl FnMut(u64),
    mut scalar: impl FnMut(u64),
) {
    let (start, stride) = grid_stride_1d();
    let vectorized = if aligned { n / CHUNK * CHUNK } else { 0 };
    let mut chunk = start;
    while chunk * CHUNK < vectorized {
        vector(chunk * CHUNK);
        chunk += stride;
    }
    let mut i = vectorized + start;
    while i < n {
        scalar(i);
        i += stride;
    }
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `fill` on a one-dimensional grid (grid-stride), with `out` a
/// live view of `n` elements.
#[inline(always)]
unsafe fn fill<T: Elem>(p: FillParams<T>) {
    let out = p.out.as_mut_ptr();
    let word = p.value.splat_word();
    for_each_chunk(
        p.n,
        p.out.is_aligned_to(16),
        // SAFETY: chunk in bounds and 16-byte aligned (8 elements of 2 or 4 bytes from an
        // aligned base); the launcher checked `out` holds `n` elements.
        |i| unsafe {
            let w = out.add(i as usize).cast::<u32>();
            global::st_global_v4_u32(w, [word; 4]);
            if size_of::<T>() == 4 {
                global::st_global_v4_u32(w.add(4), [word; 4]);
            }
        },
        // SAFETY: i < n.
        |i| unsafe { *out.add(i as usize) = p.value },
    );
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `add` / `add_assign` on a one-dimensional grid, after checking
/// that `a`, `b` and `out` hold `n` elements each; `out` (a mutable borrow) overlaps no input
/// except, in place, exactly `a`.
#[inline(always)]
unsafe fn add<T: Elem>(p: AddParams<T>) {
    let (a, b, out) = (p.a.as_ptr(), p.b.as_ptr(), p.out.as_mut_ptr());
    let aligned = p.a.is_aligned_to(16) && p.b.is_aligned_to(16) && p.out.is_aligned_to(16);
    for_each_chunk(
        p.n,
        aligned,
        // SAFETY: whole chunk in bounds of all three buffers, all 16-byte aligned.
        |i| unsafe {
            let (x, y) = (T::load8(a.add(i as usize)), T::load8(b.add(i as usize)));
            T::store8(out.add(i as usize), core::array::from_fn(|k| x[k] + y[k]));
        },
        // SAFETY: i < n.
        |i| unsafe {
            let i = i as usize;
            *out.add(i) = T::from_f32((*a.add(i)).to_f32() + (*b.add(i)).to_f32());
        },
    );
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `scale` / `scale_in_place` on a one-dimensional grid, after
/// checking that `x` and `out` hold `n` elements each; `out` is disjoint from `x` or, in place,
/// exactly `x`.
#[inline(always)]
unsafe fn scale<T: Elem>(p: ScaleParams<T>) {
    let (x, out, alpha) = (p.x.as_ptr(), p.out.as_mut_ptr(), p.alpha);
    for_each_chunk(
        p.n,
        p.x.is_aligned_to(16) && p.out.is_aligned_to(16),
        // SAFETY: whole chunk in bounds of both buffers, both 16-byte aligned.
        |i| unsafe {
            let v = T::load8(x.add(i as usize));
            T::store8(out.add(i as usize), v.map(|e| alpha * e));
        },
        // SAFETY: i < n.
        |i| unsafe {
            let i = i as usize;
            *out.add(i) = T::from_f32(alpha * (*x.add(i)).to_f32());
        },
    );
}

/// The kernel body of a conversion: `dst[i] = f(src[i])` through f32, stored as `D` (rounded
/// to nearest-even when narrowing).
///
/// # Safety
/// Launched by `gpu-host`'s `cast` or `round_tf32` (`round_tf32_in_place`) on a
/// one-dimensional grid, after checking that `src` and `dst` hold `n` elements each; `dst` is
/// disjoint from `src` or, in place, exactly `src`.
#[inline(always)]
unsafe fn convert<S: Elem, D: Elem>(p: CastParams<S, D>, f: impl Fn(f32) -> f32) {
    let (src, dst) = (p.src.as_ptr(), p.dst.as_mut_ptr());
    for_each_chunk(
        p.n,
        p.src.is_aligned_to(16) && p.dst.is_aligned_to(16),
        // SAFETY: whole chunk in bounds of both buffers, both 16-byte aligned.
        |i| unsafe { D::store8(dst.add(i as usize), S::load8(src.add(i as usize)).map(&f)) },
        // SAFETY: i < n.
        |i| unsafe {
            let i = i as usize;
            *dst.add(i) = D::from_f32(f((*src.add(i)).to_f32()));
        },
    );
}

/// The kernel body of `cast_*`: [`convert`] by the identity.
///
/// # Safety
/// As [`convert`].
#[inline(always)]
unsafe fn cast<S: Elem, D: Elem>(p: CastParams<S, D>) {
    // SAFETY: forwarded contract.
    unsafe { convert(p, |x| x) }
}

/// The kernel body of `round_tf32_f32`: [`convert`] by `cvt.rna.tf32.f32`.
///
/// # Safety
/// As [`convert`].
#[inline(always)]
unsafe fn round_tf32(p: CastParams<f32, f32>) {
    // SAFETY: forwarded contract.
    unsafe { convert(p, |x| f32::from_bits(cvt::f32_to_tf32(x))) }
}

entries! { "elementwise";
    fill_f32(FillParams<f32>) => fill::<f32>;
    fill_bf16(FillParams<Bf16>) => fill::<Bf16>;
    fill_f16(FillParams<F16>) => fill::<F16>;
    add_f32(AddParams<f32>) => add::<f32>;
    add_bf16(AddParams<Bf16>) => add::<Bf16>;
    add_f16(AddParams<F16>) => add::<F16>;
    scale_f32(ScaleParams<f32>) => scale::<f32>;
    scale_bf16(ScaleParams<Bf16>) => scale::<Bf16>;
    scale_f16(ScaleParams<F16>) => scale::<F16>;
    cast_f32_bf16(CastParams<f32, Bf16>) => cast::<f32, Bf16>;
    cast_bf16_f32(CastParams<Bf16, f32>) => cast::<Bf16, f32>;
    cast_f32_f16(CastParams<f32, F16>) => cast::<f32, F16>;
    cast_f16_f32(CastParams<F16, f32>) => cast::<F16, f32>;
    round_tf32_f32(CastParams<f32, f32>) => round_tf32;
}
