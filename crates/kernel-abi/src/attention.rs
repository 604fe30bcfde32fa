//! The kernels of materialised causal attention (the T×T scores in memory, as PyTorch computes
//! attention without `scaled_dot_product_attention`); the matmuls between them are the batched
//! GEMM of [`crate::gemm`]. Storage is f32, bf16 or f16; arithmetic and row statistics are f32.
//!
//! Layouts, with `C = NH·hd`:
//! - `qkv` (B, T, 3, NH, hd): the output of the qkv projection, each row `[q | k | v]`;
//! - per-head `q`, `k`, `v`, `y` (B, NH, T, hd): one contiguous T×hd matrix per (batch, head);
//! - `out` (B, T, C): the heads side by side again;
//! - `att` (B, NH, T, T): one T×T matrix of scores or probabilities per (batch, head).
//!
//! Kernels:
//! - **Permute** `qkv → q, k, v` and its backward `dq, dk, dv → dqkv`; **unpermute** `y → out`
//!   and its backward `dout → dy`. Exact copies. Grid `(⌈T·chunks / 256⌉, NH, B)` with
//!   `chunks = ⌈hd / 8⌉`: thread `i` of the x dimension copies chunk `i % chunks` of row
//!   `i / chunks` of head `blockIdx.y` of batch `blockIdx.z` (all three parts for the
//!   permutes). Chunks move as 16-byte vectors when `hd % 8 == 0` and every pointer is 16-byte
//!   aligned, element by element otherwise.
//! - **Causal softmax forward**, one warp per row, grid `(⌈T / 8⌉, B·NH)`: row `t` of a T×T
//!   matrix becomes `p[j] = exp(scale·x[j] − m) / Σ_{k≤t} exp(scale·x[k] − m)` for `j ≤ t`
//!   (`m` the row maximum of `scale·x`, online, `ex2.approx` with log2(e) folded into the
//!   scale) and exactly 0 for `j > t`. Columns `j > t` of the input are never read. In place
//!   (`inp == out`) or out of place.
//! - **Causal softmax backward**, same geometry: `dpreatt[j] = p[j]·(dp[j] − Σ_{k≤t} p[k]·dp[k])
//!   ·scale` for `j ≤ t`, 0 for `j > t` (the gradient of the unscaled scores `q·k`, as
//!   `cpu_ref::attention_backward` computes it). In place (`dpreatt == datt`) or out of place.
//!
//! Both softmax kernels use 16-byte accesses when `T % 8 == 0` and every pointer is 16-byte
//! aligned, element by element otherwise.

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// Threads per block of the permute kernels.
pub const PERMUTE_THREADS: u32 = 256;

/// Threads per block of the softmax kernels (one warp per row).
pub const SOFTMAX_THREADS: u32 = 256;

/// Elements per chunk: one 16-byte vector of a 16-bit type.
pub const CHUNK: u32 = 8;

/// Sizes shared by the permute kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct HeadDims {
    /// Sequence length T.
    pub t: u32,
    /// Number of heads NH.
    pub nh: u32,
    /// Head size hd.
    pub hd: u32,
    /// `⌈hd / CHUNK⌉`.
    pub chunks: u32,
}

impl HeadDims {
    /// The dimensions of `nh` heads of size `hd` over `t` positions.
    #[inline]
    pub const fn new(t: u32, nh: u32, hd: u32) -> Self {
        Self { t, nh, hd, chunks: hd.div_ceil(CHUNK) }
    }
}

/// `permute`: `qkv` (B, T, 3, NH, hd) → `q`, `k`, `v` (B, NH, T, hd).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PermuteParams<T: Copy> {
    /// The fused projection output.
    pub qkv: DevicePtr<T>,
    /// Queries per head, written.
    pub q: DevicePtrMut<T>,
    /// Keys per head, written.
    pub k: DevicePtrMut<T>,
    /// Values per head, written.
    pub v: DevicePtrMut<T>,
    /// Sizes.
    pub dims: HeadDims,
}

/// `permute_backward`: `dq`, `dk`, `dv` (B, NH, T, hd) → `dqkv` (B, T, 3, NH, hd).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct PermuteBackwardParams<T: Copy> {
    /// Gradient of the queries.
    pub dq: DevicePtr<T>,
    /// Gradient of the keys.
    pub dk: DevicePtr<T>,
    /// Gradient of the values.
    pub dv: DevicePtr<T>,
    /// Gradient of the fused projection output, written.
    pub dqkv: DevicePtrMut<T>,
    /// Sizes.
    pub dims: HeadDims,
}

/// `unpermute`: `y` (B, NH, T, hd) → `out` (B, T, NH·hd).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnpermuteParams<T: Copy> {
    /// Attention output per head.
    pub y: DevicePtr<T>,
    /// The heads side by side, written.
    pub out: DevicePtrMut<T>,
    /// Sizes.
    pub dims: HeadDims,
}

/// `unpermute_backward`: `dout` (B, T, NH·hd) → `dy` (B, NH, T, hd).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct UnpermuteBackwardParams<T: Copy> {
    /// Gradient of the output.
    pub dout: DevicePtr<T>,
    /// Gradient of the per-head output, written.
    pub dy: DevicePtrMut<T>,
    /// Sizes.
    pub dims: HeadDims,
}

/// Causal scaled softmax forward over `B·NH` matrices of T×T (one per `blockIdx.y`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxForwardParams<T: Copy> {
    /// Pre-softmax scores (columns above the diagonal are not read).
    pub inp: DevicePtr<T>,
    /// Probabilities, written (may be `inp` itself): see `block_rows`.
    pub out: DevicePtrMut<T>,
    /// Sequence length T.
    pub t: u32,
    /// Factor of the scores (`1 / sqrt(hd)`).
    pub scale: f32,
    /// 0: every row is written in full (zeros above the diagonal). `b > 0`: row `r` is written
    /// up to the end of its block of `b` rows, columns `..min(T, (r / b + 1)·b)`, and the rest
    /// is left as it was: what the materialised attention's causal head GEMMs read.
    pub block_rows: u32,
    /// Zero (keeps the struct free of implicit padding).
    pub _pad: u32,
}

/// Causal scaled softmax backward over `B·NH` matrices of T×T (one per `blockIdx.y`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct SoftmaxBackwardParams<T: Copy> {
    /// The forward's probabilities (columns above the diagonal are not read).
    pub att: DevicePtr<T>,
    /// Gradient of the probabilities (columns above the diagonal are not read).
    pub datt: DevicePtr<T>,
    /// Gradient of the unscaled scores, written (may be `datt` itself): see `block_rows`.
    pub dpreatt: DevicePtrMut<T>,
    /// Sequence length T.
    pub t: u32,
    /// The forward's factor of the scores.
    pub scale: f32,
    /// The columns written, as in [`SoftmaxForwardParams::block_rows`].
    pub block_rows: u32,
    /// Zero (keeps the struct free of implicit padding).
    pub _pad: u32,
}

// SAFETY: #[repr(C)] structs of device pointers followed by `HeadDims` (16 bytes, 4-aligned,
// starting at an 8-byte boundary); no padding.
unsafe impl<T: Copy + 'static> KernelParams for PermuteParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for PermuteBackwardParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for UnpermuteParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for UnpermuteBackwardParams<T> {}
// SAFETY: #[repr(C)] structs of device pointers then a u32, an f32 and two u32 (16 bytes); no
// padding.
unsafe impl<T: Copy + 'static> KernelParams for SoftmaxForwardParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for SoftmaxBackwardParams<T> {}

/// The attention kernels of one storage type.
pub trait AttentionKernels: Copy + 'static {
    /// `attention_permute_<ty>`.
    const PERMUTE: Kernel<PermuteParams<Self>>;
    /// `attention_permute_backward_<ty>`.
    const PERMUTE_BACKWARD: Kernel<PermuteBackwardParams<Self>>;
    /// `attention_unpermute_<ty>`.
    const UNPERMUTE: Kernel<UnpermuteParams<Self>>;
    /// `attention_unpermute_backward_<ty>`.
    const UNPERMUTE_BACKWARD: Kernel<UnpermuteBackwardParams<Self>>;
    /// `causal_softmax_forward_<ty>`.
    const SOFTMAX_FORWARD: Kernel<SoftmaxForwardParams<Self>>;
    /// `causal_softmax_backward_<ty>`.
    const SOFTMAX_BACKWARD: Kernel<SoftmaxBackwardParams<Self>>;
}

macro_rules! attention_kernels {
    ($ty:ty, $permute:ident = $permute_name:literal,
     $permute_bwd:ident = $permute_bwd_name:literal,
     $unpermute:ident = $unpermute_name:literal,
     $unpermute_bwd:ident = $unpermute_bwd_name:literal,
     $softmax:ident = $softmax_name:literal,
     $softmax_bwd:ident = $softmax_bwd_name:literal) => {
        #[doc = concat!("`", $permute_name, "`")]
        pub const $permute: Kernel<PermuteParams<$ty>> = Kernel::new($permute_name);
        #[doc = concat!("`", $permute_bwd_name, "`")]
        pub const $permute_bwd: Kernel<PermuteBackwardParams<$ty>> = Kernel::new($permute_bwd_name);
        #[doc = concat!("`", $unpermute_name, "`")]
        pub const $unpermute: Kernel<UnpermuteParams<$ty>> = Kernel::new($unpermute_name);
        #[doc = concat!("`", $unpermute_bwd_name, "`")]
        pub const $unpermute_bwd: Kernel<UnpermuteBackwardParams<$ty>> =
            Kernel::new($unpermute_bwd_name);
        #[doc = concat!("`", $softmax_name, "`")]
        pub const $softmax: Kernel<SoftmaxForwardParams<$ty>> = Kernel::new($softmax_name);
        #[doc = concat!("`", $softmax_bwd_name, "`")]
        pub const $softmax_bwd: Kernel<SoftmaxBackwardParams<$ty>> = Kernel::new($softmax_bwd_name);

        impl AttentionKernels for $ty {
            const PERMUTE: Kernel<PermuteParams<Self>> = $permute;
            const PERMUTE_BACKWARD: Kernel<PermuteBackwardParams<Self>> = $permute_bwd;
            const UNPERMUTE: Kernel<UnpermuteParams<Self>> = $unpermute;
            const UNPERMUTE_BACKWARD: Kernel<UnpermuteBackwardParams<Self>> = $unpermute_bwd;
            const SOFTMAX_FORWARD: Kernel<SoftmaxForwardParams<Self>> = $softmax;
            const SOFTMAX_BACKWARD: Kernel<SoftmaxBackwardParams<Self>> = $softmax_bwd;
        }
    };
}

attention_kernels!(
    f32,
    ATTENTION_PERMUTE_F32 = "attention_permute_f32",
    ATTENTION_PERMUTE_BACKWARD_F32 = "attention_permute_backward_f32",
    ATTENTION_UNPERMUTE_F32 = "attention_unpermute_f32",
    ATTENTION_UNPERMUTE_BACKWARD_F32 = "attention_unpermute_backward_f32",
    CAUSAL_SOFTMAX_FORWARD_F32 = "causal_softmax_forward_f32",
    CAUSAL_SOFTMAX_BACKWARD_F32 = "causal_softmax_backward_f32"
);
attention_kernels!(
    Bf16,
    ATTENTION_PERMUTE_BF16 = "attention_permute_bf16",
    ATTENTION_PERMUTE_BACKWARD_BF16 = "attention_permute_backward_bf16",
    ATTENTION_UNPERMUTE_BF16 = "attention_unpermute_bf16",
    ATTENTION_UNPERMUTE_BACKWARD_BF16 = "attention_unpermute_backward_bf16",
    CAUSAL_SOFTMAX_FORWARD_BF16 = "causal_softmax_forward_bf16",
    CAUSAL_SOFTMAX_BACKWARD_BF16 = "causal_softmax_backward_bf16"
);
attention_kernels!(
    F16,
    ATTENTION_PERMUTE_F16 = "attention_permute_f16",
    ATTENTION_PERMUTE_BACKWARD_F16 = "attention_permute_backward_f16",
    ATTENTION_UNPERMUTE_F16 = "attention_unpermute_f16",
    ATTENTION_UNPERMUTE_BACKWARD_F16 = "attention_unpermute_backward_f16",
    CAUSAL_SOFTMAX_FORWARD_F16 = "causal_softmax_forward_f16",
    CAUSAL_SOFTMAX_BACKWARD_F16 = "causal_softmax_backward_f16"
);

/// Every attention entry point.
pub const KERNELS: &[KernelSig] = &[
    ATTENTION_PERMUTE_F32.sig(),
    ATTENTION_PERMUTE_BF16.sig(),
    ATTENTION_PERMUTE_F16.sig(),
    ATTENTION_PERMUTE_BACKWARD_F32.sig(),
    ATTENTION_PERMUTE_BACKWARD_BF16.sig(),
    ATTENTION_PERMUTE_BACKWARD_F16.sig(),
    ATTENTION_UNPERMUTE_F32.sig(),
    ATTENTION_UNPERMUTE_BF16.sig(),
    ATTENTION_UNPERMUTE_F16.sig(),
    ATTENTION_UNPERMUTE_BACKWARD_F32.sig(),
    ATTENTION_UNPERMUTE_BACKWARD_BF16.sig(),
    ATTENTION_UNPERMUTE_BACKWARD_F16.sig(),
    CAUSAL_SOFTMAX_FORWARD_F32.sig(),
    CAUSAL_SOFTMAX_FORWARD_BF16.sig(),
    CAUSAL_SOFTMAX_FORWARD_F16.sig(),
    CAUSAL_SOFTMAX_BACKWARD_F32.sig(),
    CAUSAL_SOFTMAX_BACKWARD_BF16.sig(),
    CAUSAL_SOFTMAX_BACKWARD_F16.sig(),
];
