//! Global gradient norm: `sqrt(Σ x[i]²)` over one flat buffer, with a non-finite check.
//!
//! Two launches, in a fixed order that depends on `n` only (never on the GPU), so the same
//! inputs give the same bits on every run and every GPU:
//! 1. [`GradNormPartialsParams`]: [`partial_blocks`]`(n)` blocks of [`BLOCK_THREADS`] threads.
//!    The buffer is cut into 8-element chunks; chunk `c` belongs to global thread
//!    `c % (blocks · BLOCK_THREADS)`, which visits its chunks in increasing order and adds the
//!    squares of their elements, in element order, into one f32 accumulator. The last,
//!    partial chunk goes to its owner in the same way. Each thread's sum is widened to f64;
//!    a warp adds its 32 sums with a butterfly (offsets 16, 8, 4, 2, 1), then thread 0 adds
//!    the warp sums in warp order, starting from 0. Block `b` writes its f64 sum and its
//!    non-finite flag to `partials[2b]`, `partials[2b + 1]`.
//! 2. [`GradNormFinishParams`]: one block of [`BLOCK_THREADS`] threads; thread `t` adds
//!    partials `t, t + 256, …` in f64 starting from 0, then the same warp and block
//!    reduction; `out[0] = sqrt(total)` (f64, rounded to f32), `out[1] = 1.0` if any element
//!    was ±inf or NaN, else `0.0`.
//!
//! The thread ↔ element assignment does not depend on the pointer's alignment (aligned
//! buffers use 16-byte loads, others scalar loads of the same elements in the same order).

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// Threads per block of both passes.
pub const BLOCK_THREADS: u32 = 256;

/// Most blocks of the first pass (enough threads to fill any current GPU with 16-byte loads
/// in flight).
pub const MAX_PARTIAL_BLOCKS: u32 = 1024;

/// Elements per chunk (one 16-byte load of bf16/f16, two of f32).
pub const CHUNK: u64 = 8;

/// `u64` words of the workspace between the passes: two per first-pass block.
pub const WORKSPACE_WORDS: usize = 2 * MAX_PARTIAL_BLOCKS as usize;

/// Blocks of the first pass for `n` elements: one chunk per thread up to
/// [`MAX_PARTIAL_BLOCKS`], at least one block. A function of `n` only.
#[inline]
pub const fn partial_blocks(n: u64) -> u32 {
    let blocks = n.div_ceil(CHUNK).div_ceil(BLOCK_THREADS as u64);
    if blocks == 0 {
        1
    } else if blocks > MAX_PARTIAL_BLOCKS as u64 {
        MAX_PARTIAL_BLOCKS
    } else {
        blocks as u32
    }
}

/// First pass: per-block sums of squares of `x[0..n]` and non-finite flags.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GradNormPartialsParams<T: Copy> {
    /// The gradients.
    pub x: DevicePtr<T>,
    /// `2 · partial_blocks(n)` words: f64 bits of block `b`'s sum at `2b`, its non-finite
    /// flag (0 or 1) at `2b + 1`.
    pub partials: DevicePtrMut<u64>,
    /// Number of elements.
    pub n: u64,
}

/// Second pass: reduces the partials into `out[0..2]`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GradNormFinishParams {
    /// The first pass's partials.
    pub partials: DevicePtr<u64>,
    /// `[norm, non-finite flag]`.
    pub out: DevicePtrMut<f32>,
    /// Number of first-pass blocks.
    pub num_partials: u32,
}

// SAFETY: #[repr(C)] structs of device pointers and integers; the only padding is the tail
// after `num_partials`, which the device never reads.
unsafe impl<T: Copy + 'static> KernelParams for GradNormPartialsParams<T> {}
// SAFETY: as above.
unsafe impl KernelParams for GradNormFinishParams {}

/// The first-pass entry of one gradient type.
pub trait GradNormKernels: Copy + 'static {
    /// `grad_norm_partials_<ty>`.
    const PARTIALS: Kernel<GradNormPartialsParams<Self>>;
}

macro_rules! partials_kernel {
    ($ty:ty, $name:ident = $entry:literal) => {
        #[doc = concat!("`", $entry, "`")]
        pub const $name: Kernel<GradNormPartialsParams<$ty>> = Kernel::new($entry);

        impl GradNormKernels for $ty {
            const PARTIALS: Kernel<GradNormPartialsParams<Self>> = $name;
        }
    };
}

partials_kernel!(f32, GRAD_NORM_PARTIALS_F32 = "grad_norm_partials_f32");
partials_kernel!(Bf16, GRAD_NORM_PARTIALS_BF16 = "grad_norm_partials_bf16");
partials_kernel!(F16, GRAD_NORM_PARTIALS_F16 = "grad_norm_partials_f16");

/// `grad_norm_finish`.
pub const GRAD_NORM_FINISH: Kernel<GradNormFinishParams> = Kernel::new("grad_norm_finish");

/// Every gradient-norm entry point.
pub const KERNELS: &[KernelSig] = &[
    GRAD_NORM_PARTIALS_F32.sig(),
    GRAD_NORM_PARTIALS_BF16.sig(),
    GRAD_NORM_PARTIALS_F16.sig(),
    GRAD_NORM_FINISH.sig(),
];
