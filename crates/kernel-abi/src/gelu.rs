//! GELU (tanh approximation, GPT-2's `gelu_new`) as stand-alone kernels: the unfused rung of
//! the speed ladder (the GEMM epilogue has the fused one, computing the same function).
//!
//! `gelu(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`. The constants below are the only
//! definition: device code (these kernels and the GEMM epilogue) and the CPU references use
//! them. Device code evaluates the identical `x · sigmoid(2u)` form with `ex2.approx`
//! (relative error ~2⁻²²) and `rcp.approx` (1 ulp), not `tanh.approx` (2⁻¹¹).
//!
//! Both kernels take a flat length `n`, accept any `n` and any element-aligned pointers
//! (16-byte accesses when every pointer is 16-byte aligned, a scalar tail), in f32, bf16 or f16
//! storage with f32 arithmetic, rounding the result once to nearest-even.

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// √(2/π).
pub const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of the tanh approximation.
pub const CUBIC: f64 = 0.044_715;

/// Threads per block of both kernels.
pub const BLOCK_THREADS: u32 = 256;
/// Upper bound on the grid (the kernels loop grid-stride).
pub const MAX_BLOCKS: u32 = 65_535;

/// `out[i] = gelu(inp[i])` for `i < n`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GeluForwardParams<T: Copy> {
    /// Input (the pre-activation).
    pub inp: DevicePtr<T>,
    /// Output (must not overlap `inp` except exactly: in place is allowed).
    pub out: DevicePtrMut<T>,
    /// Number of elements.
    pub n: u64,
}

/// `dinp[i] = gelu'(inp[i]) · dout[i]` for `i < n` (written, not accumulated).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GeluBackwardParams<T: Copy> {
    /// The forward's input.
    pub inp: DevicePtr<T>,
    /// Gradient of the output.
    pub dout: DevicePtr<T>,
    /// Gradient of the input (may be `dout` itself: in place).
    pub dinp: DevicePtrMut<T>,
    /// Number of elements.
    pub n: u64,
}

// SAFETY: #[repr(C)] structs of device pointers and a u64; no padding.
unsafe impl<T: Copy + 'static> KernelParams for GeluForwardParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for GeluBackwardParams<T> {}

/// The GELU kernels of one storage type.
pub trait GeluKernels: Copy + 'static {
    /// `gelu_forward_<ty>`.
    const FORWARD: Kernel<GeluForwardParams<Self>>;
    /// `gelu_backward_<ty>`.
    const BACKWARD: Kernel<GeluBackwardParams<Self>>;
}

macro_rules! gelu_kernels {
    ($ty:ty, $fwd:ident = $fwd_name:literal, $bwd:ident = $bwd_name:literal) => {
        #[doc = concat!("`", $fwd_name, "`")]
        pub const $fwd: Kernel<GeluForwardParams<$ty>> = Kernel::new($fwd_name);
        #[doc = concat!("`", $bwd_name, "`")]
        pub const $bwd: Kernel<GeluBackwardParams<$ty>> = Kernel::new($bwd_name);

        impl GeluKernels for $ty {
            const FORWARD: Kernel<GeluForwardParams<Self>> = $fwd;
            const BACKWARD: Kernel<GeluBackwardParams<Self>> = $bwd;
        }
    };
}

gelu_kernels!(f32, GELU_FORWARD_F32 = "gelu_forward_f32", GELU_BACKWARD_F32 = "gelu_backward_f32");
gelu_kernels!(
    Bf16,
    GELU_FORWARD_BF16 = "gelu_forward_bf16",
    GELU_BACKWARD_BF16 = "gelu_backward_bf16"
);
gelu_kernels!(F16, GELU_FORWARD_F16 = "gelu_forward_f16", GELU_BACKWARD_F16 = "gelu_backward_f16");

/// Every GELU entry point.
pub const KERNELS: &[KernelSig] = &[
    GELU_FORWARD_F32.sig(),
    GELU_FORWARD_BF16.sig(),
    GELU_FORWARD_F16.sig(),
    GELU_BACKWARD_F32.sig(),
    GELU_BACKWARD_BF16.sig(),
    GELU_BACKWARD_F16.sig(),
];
