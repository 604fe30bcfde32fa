//! AdamW over every parameter tensor of one arena, in one launch.
//!
//! The parameters (f32 master weights), their moments `m`, `v` (f32), their gradients (`G`:
//! f32, bf16 or f16) and optionally a working copy of the parameters (`W`: bf16 or f16) are
//! flat buffers indexed alike. A table of [`AdamWTensor`]s in device memory names the tensors
//! (offset, length, weight decay); block row `blockIdx.y` updates tensor `blockIdx.y`,
//! grid-stride over `blockIdx.x`. Elements outside every tensor are not touched.
//!
//! Per element, in this order and in f32 (exactly `cpu_ref::adamw_update`'s expression):
//!
//! ```text
//! g = grad_scale · grad
//! m = beta1 · m + (1 - beta1) · g
//! v = beta2 · v + (1 - beta2) · g · g
//! p -= lr · ((m / bias_correction1) / (sqrt(v / bias_correction2) + eps) + weight_decay · p)
//! working = round(p)
//! ```
//!
//! `round` is to nearest-even, or for a bf16 working copy optionally stochastic: the f32 bits
//! plus the low 16 bits of [`stochastic_bits`]`(seed, element index in the arena)`, truncated
//! to bf16 (NaN is rounded to nearest instead).

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// Threads per block.
pub const BLOCK_THREADS: u32 = 256;

/// Most blocks per tensor (`gridDim.x`); threads loop grid-stride over the rest.
pub const MAX_BLOCKS_PER_TENSOR: u32 = 1024;

/// Most tensors in one launch (`gridDim.y`).
pub const MAX_TENSORS: u32 = 65_535;

/// Elements per chunk (16-byte accesses) of the vectorized path.
pub const CHUNK: u64 = 8;

/// One tensor of the arena: elements `offset .. offset + len` of every buffer.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWTensor {
    /// First element in the arena.
    pub offset: u64,
    /// Number of elements.
    pub len: u32,
    /// Decoupled weight decay of this tensor (0 for tensors that are not decayed).
    pub weight_decay: f32,
}

/// One AdamW step over the tensors of `tensors` (one per `blockIdx.y`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct AdamWParams<G: Copy, W: Copy> {
    /// f32 master weights, updated in place.
    pub params: DevicePtrMut<f32>,
    /// Gradients.
    pub grads: DevicePtr<G>,
    /// First moments, updated in place.
    pub m: DevicePtrMut<f32>,
    /// Second moments, updated in place.
    pub v: DevicePtrMut<f32>,
    /// Working copy of the parameters, written after the update; null for none.
    pub working: DevicePtrMut<W>,
    /// `gridDim.y` tensor descriptors.
    pub tensors: DevicePtr<AdamWTensor>,
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Added to the root of the corrected second moment.
    pub eps: f32,
    /// `1 - beta1^t`.
    pub bias_correction1: f32,
    /// `1 - beta2^t`.
    pub bias_correction2: f32,
    /// Factor applied to every gradient first (clipping × 1/loss scale).
    pub grad_scale: f32,
    /// Seed of the stochastic rounding.
    pub seed: u32,
    /// 1: round the bf16 working copy stochastically; 0: to nearest-even.
    pub stochastic: u32,
}

// SAFETY: #[repr(C)] structs of u64, u32 and f32 without interior padding (16 bytes).
unsafe impl KernelParams for AdamWTensor {}
// SAFETY: #[repr(C)] struct of device pointers, f32 and u32; the only padding is the tail
// after `stochastic`, which the device never reads.
unsafe impl<G: Copy + 'static, W: Copy + 'static> KernelParams for AdamWParams<G, W> {}

/// lowbias32 (C. Wellons, "hash-prospector"): a bijective 32-bit integer mixer.
#[inline]
pub const fn mix32(mut x: u32) -> u32 {
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x = x.wrapping_mul(0x846c_a68b);
    x ^= x >> 16;
    x
}

/// The random bits of element `index` under `seed` (counter-based: no state, same bits on
/// every run and device): `mix32(lo(index) ^ mix32(seed ^ 0x9e3779b9 ^ mix32(hi(index))))`.
/// For a fixed seed and high half, distinct low halves get distinct bits.
#[inline]
pub const fn stochastic_bits(seed: u32, index: u64) -> u32 {
    let key = mix32(seed ^ 0x9e37_79b9 ^ mix32((index >> 32) as u32));
    mix32(index as u32 ^ key)
}

/// The AdamW entry of one (gradient, working copy) type pair.
pub trait AdamWKernel<W: Copy + 'static>: Copy + 'static {
    /// `adamw_<grad>_<working>`.
    const ADAMW: Kernel<AdamWParams<Self, W>>;
}

macro_rules! adamw_kernel {
    ($g:ty, $w:ty, $name:ident = $entry:literal) => {
        #[doc = concat!("`", $entry, "`")]
        pub const $name: Kernel<AdamWParams<$g, $w>> = Kernel::new($entry);

        impl AdamWKernel<$w> for $g {
            const ADAMW: Kernel<AdamWParams<Self, $w>> = $name;
        }
    };
}

adamw_kernel!(f32, Bf16, ADAMW_F32_BF16 = "adamw_f32_bf16");
adamw_kernel!(f32, F16, ADAMW_F32_F16 = "adamw_f32_f16");
adamw_kernel!(Bf16, Bf16, ADAMW_BF16_BF16 = "adamw_bf16_bf16");
adamw_kernel!(Bf16, F16, ADAMW_BF16_F16 = "adamw_bf16_f16");
adamw_kernel!(F16, Bf16, ADAMW_F16_BF16 = "adamw_f16_bf16");
adamw_kernel!(F16, F16, ADAMW_F16_F16 = "adamw_f16_f16");

/// Every AdamW entry point.
pub const KERNELS: &[KernelSig] = &[
    ADAMW_F32_BF16.sig(),
    ADAMW_F32_F16.sig(),
    ADAMW_BF16_BF16.sig(),
    ADAMW_BF16_F16.sig(),
    ADAMW_F16_BF16.sig(),
    ADAMW_F16_F16.sig(),
];
