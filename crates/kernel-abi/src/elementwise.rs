//! Elementwise kernels: fill, add, scale, precision casts and TF32 rounding.
//!
//! All of them take a flat length `n`, accept any `n` (a scalar tail follows the 16-byte
//! vectorized body) and any element-aligned pointers (16-byte accesses are used when every
//! pointer of the launch is 16-byte aligned). `out` may alias an input (in-place update).

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// Threads per block of every elementwise kernel.
pub const BLOCK_THREADS: u32 = 256;

/// Upper bound on the grid: the kernels loop grid-stride over the rest.
pub const MAX_BLOCKS: u32 = 65_535;

/// `out[i] = value` for `i < n`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FillParams<T: Copy> {
    /// Destination.
    pub out: DevicePtrMut<T>,
    /// Number of elements.
    pub n: u64,
    /// Value written to every element.
    pub value: T,
}

/// `out[i] = a[i] + b[i]` for `i < n`, computed in f32 and rounded to nearest-even into `T`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AddParams<T: Copy> {
    /// First input.
    pub a: DevicePtr<T>,
    /// Second input.
    pub b: DevicePtr<T>,
    /// Destination (may alias `a` or `b`).
    pub out: DevicePtrMut<T>,
    /// Number of elements.
    pub n: u64,
}

/// `out[i] = alpha * x[i]` for `i < n`, computed in f32 and rounded to nearest-even into `T`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ScaleParams<T: Copy> {
    /// Input.
    pub x: DevicePtr<T>,
    /// Destination (may alias `x`).
    pub out: DevicePtrMut<T>,
    /// Number of elements.
    pub n: u64,
    /// Multiplier.
    pub alpha: f32,
}

/// `dst[i] = convert(src[i])` for `i < n`; narrowing conversions round to nearest-even.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CastParams<S: Copy, D: Copy> {
    /// Source.
    pub src: DevicePtr<S>,
    /// Destination (must not overlap `src`).
    pub dst: DevicePtrMut<D>,
    /// Number of elements.
    pub n: u64,
}

// SAFETY: all four are #[repr(C)] structs of device pointers, u64, f32 and the 16-bit element
// types; the only padding is the tail after `value`/`alpha`, which the device never reads.
unsafe impl<T: Copy + 'static> KernelParams for FillParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for AddParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for ScaleParams<T> {}
// SAFETY: as above.
unsafe impl<S: Copy + 'static, D: Copy + 'static> KernelParams for CastParams<S, D> {}

/// The elementwise kernels that exist for one storage type.
pub trait ElementwiseKernels: Copy + 'static {
    /// `fill_<ty>`.
    const FILL: Kernel<FillParams<Self>>;
    /// `add_<ty>`.
    const ADD: Kernel<AddParams<Self>>;
    /// `scale_<ty>`.
    const SCALE: Kernel<ScaleParams<Self>>;
}

macro_rules! elementwise_kernels {
    ($ty:ty, $fill:ident = $fill_name:literal, $add:ident = $add_name:literal,
     $scale:ident = $scale_name:literal) => {
        #[doc = concat!("`", $fill_name, "`")]
        pub const $fill: Kernel<FillParams<$ty>> = Kernel::new($fill_name);
        #[doc = concat!("`", $add_name, "`")]
        pub const $add: Kernel<AddParams<$ty>> = Kernel::new($add_name);
        #[doc = concat!("`", $scale_name, "`")]
        pub const $scale: Kernel<ScaleParams<$ty>> = Kernel::new($scale_name);

        impl ElementwiseKernels for $ty {
            const FILL: Kernel<FillParams<Self>> = $fill;
            const ADD: Kernel<AddParams<Self>> = $add;
            const SCALE: Kernel<ScaleParams<Self>> = $scale;
        }
    };
}

elementwise_kernels!(f32, FILL_F32 = "fill_f32", ADD_F32 = "add_f32", SCALE_F32 = "scale_f32");
elementwise_kernels!(
    Bf16,
    FILL_BF16 = "fill_bf16",
    ADD_BF16 = "add_bf16",
    SCALE_BF16 = "scale_bf16"
);
elementwise_kernels!(F16, FILL_F16 = "fill_f16", ADD_F16 = "add_f16", SCALE_F16 = "scale_f16");

/// `cast_f32_bf16`: f32 → bf16, round to nearest-even.
pub const CAST_F32_BF16: Kernel<CastParams<f32, Bf16>> = Kernel::new("cast_f32_bf16");
/// `cast_bf16_f32`: bf16 → f32 (exact).
pub const CAST_BF16_F32: Kernel<CastParams<Bf16, f32>> = Kernel::new("cast_bf16_f32");
/// `cast_f32_f16`: f32 → f16, round to nearest-even (overflow to ±inf, subnormals kept).
pub const CAST_F32_F16: Kernel<CastParams<f32, F16>> = Kernel::new("cast_f32_f16");
/// `cast_f16_f32`: f16 → f32 (exact).
pub const CAST_F16_F32: Kernel<CastParams<F16, f32>> = Kernel::new("cast_f16_f32");

/// `round_tf32_f32`: `dst[i] = cvt.rna.tf32.f32(src[i])`, an f32 rounded to TF32 (10 mantissa
/// bits) to nearest with ties away from zero, the low 13 bits cleared; NaN and infinities pass
/// through and a finite value that rounds past the largest TF32 becomes infinity. `dst` may also
/// be exactly `src` (in place). The operands of a Hopper `wgmma` TF32 GEMM, which reads them by
/// truncation, are rounded with it first.
pub const ROUND_TF32_F32: Kernel<CastParams<f32, f32>> = Kernel::new("round_tf32_f32");

/// Every elementwise entry point.
pub const KERNELS: &[KernelSig] = &[
    FILL_F32.sig(),
    FILL_BF16.sig(),
    FILL_F16.sig(),
    ADD_F32.sig(),
    ADD_BF16.sig(),
    ADD_F16.sig(),
    SCALE_F32.sig(),
    SCALE_BF16.sig(),
    SCALE_F16.sig(),
    CAST_F32_BF16.sig(),
    CAST_BF16_F32.sig(),
    CAST_F32_F16.sig(),
    CAST_F16_F32.sig(),
    ROUND_TF32_F32.sig(),
];
