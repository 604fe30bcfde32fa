//! fill, add, scale and cast over f32, bf16 and f16 buffers, and TF32 rounding of f32 ones.

use super::check_len;
use super::transpose::{TransposeRounding, transpose};
use crate::device::{Device, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::Result;
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::Kernel;
use kernel_abi::attention::AttentionKernels;
use kernel_abi::classifier::ClassifierKernels;
use kernel_abi::elementwise::{
    AddParams, BLOCK_THREADS, CAST_BF16_F32, CAST_F16_F32, CAST_F32_BF16, CAST_F32_F16, CastParams,
    ElementwiseKernels, FillParams, MAX_BLOCKS, ROUND_TF32_F32, ScaleParams,
};
use kernel_abi::encoder::EncoderKernels;
use kernel_abi::gelu::GeluKernels;
use kernel_abi::grad_norm::GradNormKernels;
use kernel_abi::layernorm::LayerNormKernels;

/// A storage type of activations and parameters, `f32`, `bf16` or `f16`: one that has every
/// elementwise, encoder, GELU, layernorm, classifier, gradient-norm and attention kernel.
pub trait FloatElement:
    DeviceElement<
    Abi: ElementwiseKernels
             + EncoderKernels
             + GeluKernels
             + LayerNormKernels
             + ClassifierKernels
             + GradNormKernels
             + AttentionKernels,
>
{
    /// [`round_tf32`] for f32; bf16 and f16, which have no TF32 form, refuse (an
    /// [`InvalidArgument`](crate::GpuError::InvalidArgument)).
    fn round_tf32<D: Device>(
        dev: &D,
        src: DeviceView<'_, Self>,
        dst: DeviceViewMut<'_, Self>,
    ) -> Result<()>;

    /// [`round_tf32_in_place`] for f32; bf16 and f16 refuse, as [`FloatElement::round_tf32`].
    fn round_tf32_in_place<D: Device>(dev: &D, x: DeviceViewMut<'_, Self>) -> Result<()>;

    /// [`transpose`] of a `rows × cols` matrix, rounded to TF32, for f32; bf16 and f16 refuse,
    /// as [`FloatElement::round_tf32`].
    fn transpose_tf32<D: Device>(
        dev: &D,
        src: DeviceView<'_, Self>,
        shape: (usize, usize),
        dst: DeviceViewMut<'_, Self>,
    ) -> Result<()>;
}

impl FloatElement for f32 {
    fn round_tf32<D: Device>(
        dev: &D,
        src: DeviceView<'_, f32>,
        dst: DeviceViewMut<'_, f32>,
    ) -> Result<()> {
        round_tf32(dev, src, dst)
    }

    fn round_tf32_in_place<D: Device>(dev: &D, x: DeviceViewMut<'_, f32>) -> Result<()> {
        round_tf32_in_place(dev, x)
    }

    fn transpose_tf32<D: Device>(
        dev: &D,
        src: DeviceView<'_, f32>,
        shape: (usize, usize),
        dst: DeviceViewMut<'_, f32>,
    ) -> Result<()> {
        transpose(dev, src, shape, dst, TransposeRounding::Tf32)
    }
}

macro_rules! no_tf32 {
    ($ty:ty) => {
        impl FloatElement for $ty {
            fn round_tf32<D: Device>(
                _: &D,
                _: DeviceView<'_, $ty>,
                _: DeviceViewMut<'_, $ty>,
            ) -> Result<()> {
                Err(no_tf32(<$ty as DeviceElement>::NAME))
            }

            fn round_tf32_in_place<D: Device>(_: &D, _: DeviceViewMut<'_, $ty>) -> Result<()> {
                Err(no_tf32(<$ty as DeviceElement>::NAME))
            }

            fn transpose_tf32<D: Device>(
                _: &D,
                _: DeviceView<'_, $ty>,
                _: (usize, usize),
                _: DeviceViewMut<'_, $ty>,
            ) -> Result<()> {
                Err(no_tf32(<$ty as DeviceElement>::NAME))
            }
        }
    };
}

no_tf32!(bf16);
no_tf32!(f16);

fn no_tf32(ty: &str) -> crate::GpuError {
    crate::GpuError::invalid("round_tf32", "src", format!("TF32 rounding takes f32, not {ty}"))
}

/// Grid for `n` elements at 8 per thread-iteration (the kernels loop grid-stride); also the
/// GELU kernels' grid, which use the same block size and grid bound.
pub(crate) fn config(n: usize) -> LaunchConfig {
    let chunks = n.div_ceil(8) as u64;
    let blocks = chunks.div_ceil(BLOCK_THREADS as u64).clamp(1, MAX_BLOCKS as u64) as u32;
    LaunchConfig::linear(blocks, BLOCK_THREADS)
}

/// `out[i] = value` for every element.
pub fn fill<D: Device, T: FloatElement>(
    dev: &D,
    mut out: DeviceViewMut<'_, T>,
    value: T,
) -> Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    let params = FillParams { out: out.ptr(), n: out.len() as u64, value: value.to_abi() };
    // SAFETY: `out` is a live view of `n` elements; the kernel writes exactly those.
    unsafe { dev.launch(T::Abi::FILL, config(out.len()), params) }
}

/// `out[i] = a[i] + b[i]` (f32 arithmetic, rounded to `T`).
pub fn add<D: Device, T: FloatElement>(
    dev: &D,
    a: DeviceView<'_, T>,
    b: DeviceView<'_, T>,
    mut out: DeviceViewMut<'_, T>,
) -> Result<()> {
    check_len("add", "a", a.len(), out.len(), "length of out")?;
    check_len("add", "b", b.len(), out.len(), "length of out")?;
    if out.is_empty() {
        return Ok(());
    }
    let params = AddParams { a: a.ptr(), b: b.ptr(), out: out.ptr(), n: out.len() as u64 };
    // SAFETY: all three views cover `n` elements.
    unsafe { dev.launch(T::Abi::ADD, config(out.len()), params) }
}

/// `acc[i] += x[i]` in place (the residual connection).
pub fn add_assign<D: Device, T: FloatElement>(
    dev: &D,
    mut acc: DeviceViewMut<'_, T>,
    x: DeviceView<'_, T>,
) -> Result<()> {
    check_len("add_assign", "x", x.len(), acc.len(), "length of acc")?;
    if acc.is_empty() {
        return Ok(());
    }
    let out = acc.ptr();
    let params = AddParams { a: out.as_const(), b: x.ptr(), out, n: acc.len() as u64 };
    // SAFETY: both views cover `n` elements; the kernel reads each element of `acc` before
    // writing it, in the same thread.
    unsafe { dev.launch(T::Abi::ADD, config(acc.len()), params) }
}

/// `out[i] = alpha * x[i]` (f32 arithmetic, rounded to `T`).
pub fn scale<D: Device, T: FloatElement>(
    dev: &D,
    x: DeviceView<'_, T>,
    alpha: f32,
    mut out: DeviceViewMut<'_, T>,
) -> Result<()> {
    check_len("scale", "x", x.len(), out.len(), "length of out")?;
    if out.is_empty() {
        return Ok(());
    }
    let params = ScaleParams { x: x.ptr(), out: out.ptr(), n: out.len() as u64, alpha };
    // SAFETY: both views cover `n` elements.
    unsafe { dev.launch(T::Abi::SCALE, config(out.len()), params) }
}

/// `x[i] *= alpha` in place.
pub fn scale_in_place<D: Device, T: FloatElement>(
    dev: &D,
    mut x: DeviceViewMut<'_, T>,
    alpha: f32,
) -> Result<()> {
    if x.is_empty() {
        return Ok(());
    }
    let out = x.ptr();
    let params = ScaleParams { x: out.as_const(), out, n: x.len() as u64, alpha };
    // SAFETY: the view covers `n` elements; each is read before it is written, same thread.
    unsafe { dev.launch(T::Abi::SCALE, config(x.len()), params) }
}

/// A conversion between storage types with a cast kernel.
pub trait CastTo<D: DeviceElement>: DeviceElement {
    /// The kernel converting `Self` to `D`.
    const KERNEL: Kernel<CastParams<Self::Abi, D::Abi>>;
}

impl CastTo<bf16> for f32 {
    const KERNEL: Kernel<CastParams<f32, kernel_abi::Bf16>> = CAST_F32_BF16;
}
impl CastTo<f32> for bf16 {
    const KERNEL: Kernel<CastParams<kernel_abi::Bf16, f32>> = CAST_BF16_F32;
}
impl CastTo<f16> for f32 {
    const KERNEL: Kernel<CastParams<f32, kernel_abi::F16>> = CAST_F32_F16;
}
impl CastTo<f32> for f16 {
    const KERNEL: Kernel<CastParams<kernel_abi::F16, f32>> = CAST_F16_F32;
}

/// `dst[i] = src[i]` converted (round to nearest-even when narrowing).
pub fn cast<D: Device, S: CastTo<T>, T: DeviceElement>(
    dev: &D,
    src: DeviceView<'_, S>,
    dst: DeviceViewMut<'_, T>,
) -> Result<()> {
    convert(dev, "cast", S::KERNEL, src, dst)
}

/// Launches `kernel` (named `op` in errors), a `CastParams` kernel, from `src` into `dst`.
fn convert<D: Device, S: DeviceElement, T: DeviceElement>(
    dev: &D,
    op: &'static str,
    kernel: Kernel<CastParams<S::Abi, T::Abi>>,
    src: DeviceView<'_, S>,
    mut dst: DeviceViewMut<'_, T>,
) -> Result<()> {
    check_len(op, "src", src.len(), dst.len(), "length of dst")?;
    if dst.is_empty() {
        return Ok(());
    }
    let params = CastParams { src: src.ptr(), dst: dst.ptr(), n: dst.len() as u64 };
    // SAFETY: both views cover `n` elements and cannot overlap (one is borrowed mutably).
    unsafe { dev.launch(kernel, config(dst.len()), params) }
}

/// `dst[i] = src[i]` rounded to TF32 (`cvt.rna.tf32.f32`: nearest, ties away from zero, the low
/// 13 bits cleared; see `kernel_abi::elementwise::ROUND_TF32_F32`), as f32. What a TF32 GEMM on
/// `mma.sync` does to its operands, done ahead of one on `wgmma`, which truncates them.
pub fn round_tf32<D: Device>(
    dev: &D,
    src: DeviceView<'_, f32>,
    dst: DeviceViewMut<'_, f32>,
) -> Result<()> {
    convert(dev, "round_tf32", ROUND_TF32_F32, src, dst)
}

/// [`round_tf32`] of `x` into itself.
pub fn round_tf32_in_place<D: Device>(dev: &D, mut x: DeviceViewMut<'_, f32>) -> Result<()> {
    if x.is_empty() {
        return Ok(());
    }
    let dst = x.ptr();
    let params = CastParams { src: dst.as_const(), dst, n: x.len() as u64 };
    // SAFETY: the view covers `n` elements; each is read before it is written, same thread.
    unsafe { dev.launch(ROUND_TF32_F32, config(x.len()), params) }
}
