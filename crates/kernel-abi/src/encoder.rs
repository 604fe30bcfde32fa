//! Encoder kernels: the token + position embedding and its deterministic backward.
//!
//! Shapes: `b` sequences of `t` tokens, `c` channels; `wte`/`dwte` are `(vp, c)` with at least
//! one row per token id, `wpe`/`dwpe` are `(max_t, c)` with `max_t >= t`; activations and
//! their gradients are `(b, t, c)`, row `r = bi * t + ti` of `b * t`.
//!
//! Both kernels use 16-byte accesses (8 channels per lane) when `c % 8 == 0` and every float
//! pointer of the launch is 16-byte aligned, and one channel per lane otherwise.

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// Threads per block of both encoder kernels (8 warps; each warp owns one work item).
pub const BLOCK_THREADS: u32 = 256;

/// Upper bound on the grid: the kernels loop over the remaining work items warp-stride.
pub const MAX_BLOCKS: u32 = 65_535;

/// Channels one lane handles on the 16-byte path.
pub const VECTOR_CHANNELS: u32 = 8;

/// `out[r, :] = round(wte[tokens[r], :] + wpe[r % t, :])` for every row `r < rows`, the sum
/// taken in f32 and rounded to nearest-even into `T`. One warp per row.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EncoderForwardParams<T: Copy> {
    /// `(rows, c)` output.
    pub out: DevicePtrMut<T>,
    /// `rows` token ids, each a row of `wte`.
    pub tokens: DevicePtr<u32>,
    /// Token embeddings, one row of `c` per id.
    pub wte: DevicePtr<T>,
    /// Position embeddings, at least `t` rows of `c`.
    pub wpe: DevicePtr<T>,
    /// `b * t`.
    pub rows: u32,
    /// Sequence length (positions per sequence).
    pub t: u32,
    /// Channels.
    pub c: u32,
}

/// Accumulates the encoder gradient into `dwte` and `dwpe`, deterministically.
///
/// The positions are grouped by token on the host: bucket `k` (of `buckets`) holds token
/// `bucket_tokens[k]` and the rows `positions[bucket_starts[k] .. bucket_starts[k + 1]]`, in
/// increasing order. Work item `(k, chunk)` adds those rows of `dout`, in that order, to
/// `dwte[bucket_tokens[k], chunk]`, starting from its current value; work item
/// `(buckets + ti, chunk)` adds rows `ti, t + ti, ..., (b - 1) * t + ti` to `dwpe[ti, chunk]`.
/// A chunk is the channels of one warp (32 lanes). Each output element is therefore the f32
/// sum `((d0 + g0) + g1) + ...` in increasing row order, on every run and every GPU.
///
/// The first `hot_buckets` buckets (the host orders them largest first; each of at least
/// [`HOT_BUCKET_ROWS`] rows) are split finer, as work items `(k, j)` over
/// [`hot_chunks_per_row`] chunks of 32 channels, one channel per lane: a warp then loads
/// [`HOT_BUCKET_ROWS`] rows of its channels at once, where the other items' lanes hold 8
/// channels and load 4 rows at a time. The sum is the same, in the same order; only the
/// latency of a long bucket's chain of rows shrinks (text repeats a few tokens at up to a
/// tenth of the positions: GPT-2's newline is 1,950 of the first 16,384 tokens of the bundled
/// Shakespeare, a chain that took the whole backward's 0.32 ms on an H100, against 0.05 ms
/// for as many mostly distinct ids).
/// Work items: `hot_buckets · hot_chunks_per_row(c)` hot ones, then `(buckets − hot_buckets +
/// t) · chunks_per_row(units_per_row(c, vector))`.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct EncoderBackwardParams<T: Copy> {
    /// `(vp, c)` token-embedding gradient, accumulated.
    pub dwte: DevicePtrMut<f32>,
    /// `(max_t, c)` position-embedding gradient, accumulated (rows `t..` untouched).
    pub dwpe: DevicePtrMut<f32>,
    /// `(b * t, c)` gradient of the encoder output.
    pub dout: DevicePtr<T>,
    /// The `b * t` rows, grouped by bucket.
    pub positions: DevicePtr<u32>,
    /// `buckets + 1` offsets into `positions`, non-decreasing, the last one `b * t`.
    pub bucket_starts: DevicePtr<u32>,
    /// The token of each bucket, distinct.
    pub bucket_tokens: DevicePtr<u32>,
    /// Number of buckets (distinct tokens of the batch).
    pub buckets: u32,
    /// How many of the first buckets take the hot work items (`<= buckets`).
    pub hot_buckets: u32,
    /// Batch size.
    pub b: u32,
    /// Sequence length.
    pub t: u32,
    /// Channels.
    pub c: u32,
}

// SAFETY: both are #[repr(C)] structs of device pointers and u32; the only padding is the
// tail after the last field, which the device never reads.
unsafe impl<T: Copy + 'static> KernelParams for EncoderForwardParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for EncoderBackwardParams<T> {}

/// The encoder kernels for one activation type.
pub trait EncoderKernels: Copy + 'static {
    /// `encoder_forward_<ty>`.
    const FORWARD: Kernel<EncoderForwardParams<Self>>;
    /// `encoder_backward_<ty>` (dout of this type, f32 gradients).
    const BACKWARD: Kernel<EncoderBackwardParams<Self>>;
}

macro_rules! encoder_kernels {
    ($ty:ty, $fwd:ident = $fwd_name:literal, $bwd:ident = $bwd_name:literal) => {
        #[doc = concat!("`", $fwd_name, "`")]
        pub const $fwd: Kernel<EncoderForwardParams<$ty>> = Kernel::new($fwd_name);
        #[doc = concat!("`", $bwd_name, "`")]
        pub const $bwd: Kernel<EncoderBackwardParams<$ty>> = Kernel::new($bwd_name);

        impl EncoderKernels for $ty {
            const FORWARD: Kernel<EncoderForwardParams<Self>> = $fwd;
            const BACKWARD: Kernel<EncoderBackwardParams<Self>> = $bwd;
        }
    };
}

encoder_kernels!(
    f32,
    ENCODER_FORWARD_F32 = "encoder_forward_f32",
    ENCODER_BACKWARD_F32 = "encoder_backward_f32"
);
encoder_kernels!(
    Bf16,
    ENCODER_FORWARD_BF16 = "encoder_forward_bf16",
    ENCODER_BACKWARD_BF16 = "encoder_backward_bf16"
);
encoder_kernels!(
    F16,
    ENCODER_FORWARD_F16 = "encoder_forward_f16",
    ENCODER_BACKWARD_F16 = "encoder_backward_f16"
);

/// Every encoder entry point.
pub const KERNELS: &[KernelSig] = &[
    ENCODER_FORWARD_F32.sig(),
    ENCODER_FORWARD_BF16.sig(),
    ENCODER_FORWARD_F16.sig(),
    ENCODER_BACKWARD_F32.sig(),
    ENCODER_BACKWARD_BF16.sig(),
    ENCODER_BACKWARD_F16.sig(),
];

/// Whether a launch takes the 16-byte path: `c` a multiple of [`VECTOR_CHANNELS`] and every
/// float pointer (given OR-ed together) 16-byte aligned.
#[inline]
pub const fn vectorized(c: u32, addrs: u64) -> bool {
    c.is_multiple_of(VECTOR_CHANNELS) && addrs & 15 == 0
}

/// Lanes of work per row: `c / 8` on the 16-byte path, `c` otherwise.
#[inline]
pub const fn units_per_row(c: u32, vector: bool) -> u32 {
    if vector { c / VECTOR_CHANNELS } else { c }
}

/// Warp-sized chunks per row (`ceil(units / 32)`), the second index of a backward work item.
#[inline]
pub const fn chunks_per_row(units: u32) -> u32 {
    units.div_ceil(32)
}

/// Rows a hot work item loads at once (one per lane, then broadcast), and the fewest rows of
/// a bucket that takes the hot work items.
pub const HOT_BUCKET_ROWS: u32 = 32;

/// Chunks of 32 channels per row (`ceil(c / 32)`), the second index of a hot work item.
#[inline]
pub const fn hot_chunks_per_row(c: u32) -> u32 {
    c.div_ceil(32)
}

/// Work items of a backward launch (see [`EncoderBackwardParams`]).
#[inline]
pub const fn backward_items(p: BackwardItems) -> u64 {
    let hot = p.hot_buckets as u64 * hot_chunks_per_row(p.c) as u64;
    let chunks = chunks_per_row(units_per_row(p.c, p.vector)) as u64;
    hot + ((p.buckets as u64).saturating_sub(p.hot_buckets as u64) + p.t as u64) * chunks
}

/// What [`backward_items`] counts from.
#[derive(Clone, Copy, Debug)]
pub struct BackwardItems {
    /// Buckets of the batch.
    pub buckets: u32,
    /// The hot ones among them.
    pub hot_buckets: u32,
    /// Sequence length.
    pub t: u32,
    /// Channels.
    pub c: u32,
    /// Whether the launch takes the 16-byte path ([`vectorized`]).
    pub vector: bool,
}
