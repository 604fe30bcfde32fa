//! LayerNorm over the channel dimension (`nn.LayerNorm(c)`), forward, fused residual +
//! forward, and backward, for activations and parameters in f32, bf16 or f16 storage; the
//! statistics (`mean`, `rstd`) and the parameter gradients are f32.
//!
//! Rows are `rows × c`, row-major. Every kernel accepts any `c` (the backward: up to 6144) and
//! any element-aligned pointers: a row goes through 16-byte accesses when `c % 8 == 0` and
//! every pointer is 16-byte aligned, element by element otherwise.
//!
//! - **Forward** (one warp per row): `mean = Σx / c`, `var = Σ(x − mean)² / c` (two passes),
//!   `rstd = 1 / sqrt(var + EPS)` (`sqrt.rn`, `rcp.rn`), `out = (x − mean)·rstd·weight + bias`.
//!   `mean` / `rstd` may be null (evaluation).
//! - **Fused residual forward**: `residual = inp + inp2`, rounded to the storage type and
//!   written, then the forward of that rounded residual, in the same pass over the row.
//! - **Backward**: with `g = dout·weight` and `norm = (x − mean)·rstd`,
//!   `dinp += rstd·(g − mean(g) − norm·mean(g·norm))` (accumulated, as the residual stream's
//!   gradient), and per channel `dweight = β·dweight + Σ_rows dout·norm`, `dbias = β·dbias +
//!   Σ_rows dout` (β 1 accumulates; β 0 overwrites without reading them). Optionally also
//!   `dinp_sum = β·dinp_sum + Σ_rows dinp`, the column sums of the updated `dinp` as stored
//!   (rounded to its type): in a residual block, the bias gradient of the projection whose
//!   output gradient `dinp` is, from the values in hand instead of a second read of `dinp`.
//!   Deterministic: block `b` owns rows `[b·R, (b+1)·R)` (`R` from [`backward_rows_per_block`],
//!   a function of `c` alone), its warps take rows `w, w + W, …` in order and keep their own
//!   channel sums in shared memory (permuted against bank conflicts, [`backward_sum_word`]),
//!   the block writes its warps' sums, added in warp order, to its slot of `partials`, and
//!   [`LAYERNORM_BACKWARD_REDUCE`] adds the slots up: a block of
//!   [`REDUCE_GROUPS`] thread groups per [`REDUCE_CHANNELS`] channels (one per thread of a
//!   group), group `g` summing slots `g, g + REDUCE_GROUPS, …` in order, then group 0 adding
//!   the groups' sums in group order to `dweight` / `dbias` / `dinp_sum`. The result depends
//!   only on the inputs and `(rows, c)`: the same bits on every run and every GPU, whether
//!   `dinp` is summed or not. For 16-bit rows of at most [`BACKWARD_CACHED_MAX_C`] channels on
//!   the 16-byte path, `layernorm_backward_cached_<ty>` does the same with each warp's sums in
//!   registers until its rows are done: the same partition, additions and bits. The kernels
//!   that also sum `dinp` are their own entries (`layernorm_backward[_cached]_colsum_<ty>`),
//!   so that those that do not keep their registers.

use crate::kernel::{Kernel, KernelParams, KernelSig, LaunchBounds};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// The epsilon GPT-2's layernorms add to the variance.
pub const EPS: f32 = 1e-5;

/// Threads per block of the forward kernels (one warp per row): two warps. A warp finishes its
/// row and leaves, and the warps resident on an SM are all the loads in flight. In blocks of 8,
/// the bf16 residual + layernorm forward's 84 registers let two blocks share an SM (16 warps),
/// and an H100 ran it at 57% of its DRAM bandwidth with 32% of the issue slots busy, 43 µs a
/// call (Nsight Compute, 2026-11-27); in blocks of 2 they allow 11 (22 warps), each replaced as
/// soon as its two rows are done. Capping the registers at 80 for three blocks of 8 spilled.
pub const FORWARD_THREADS: u32 = 64;

/// Shared memory the backward's per-warp `Σ dout·norm` and `Σ dout` may use per block (the
/// default limit): it sets the warps per block, [`backward_warps`]. The `colsum` kernels keep
/// a third array, `Σ dinp`, beside them: 72 KiB at most.
pub const BACKWARD_SHARED_BYTES: u32 = 48 * 1024;

/// Largest number of warps per block of the backward.
pub const BACKWARD_MAX_WARPS: u32 = 8;

/// Rows each warp of the backward handles per block.
pub const BACKWARD_ROWS_PER_WARP: u32 = 4;

/// Largest row `layernorm_backward_cached_<ty>` takes (GPT-2 small's 768): three chunks of 8
/// channels per lane, whose `Σ dout·norm` and `Σ dout` a warp keeps in 48 registers, and whose
/// `dout`, `inp` and `dinp` it loads at the start of each row, all at once. The launcher picks
/// it for bf16 and f16 when `c % 8 == 0`, `c` is at most this, and `dout`, `inp`, `weight` and
/// `dinp` are 16-byte aligned.
pub const BACKWARD_CACHED_MAX_C: u32 = 768;

/// Channels per block of the backward's reduction kernel (one per thread of each group): 8,
/// so that 768 channels make 96 blocks. With 32 until 2026-11-27 they made 24, and a call
/// took 10–11 µs on an H100 for 3 MB (2% of the SMs' throughput, 9% of the memory's: Nsight
/// Compute). The same additions in the same order.
pub const REDUCE_CHANNELS: u32 = 8;

/// Thread groups per block of the backward's reduction kernel: each sums every
/// `REDUCE_GROUPS`-th slot of `partials` (16 × 32 slots for GPT-2's 16384 rows of 768
/// channels). One thread per channel walking all 512 slots made the reduction a chain of 512
/// dependent loads on 3 SMs: the backward took 0.15 ms per call (680 GB/s) on an H200
/// (2026-11-26).
pub const REDUCE_GROUPS: u32 = 16;

/// Threads per block of the backward's reduction kernel.
pub const REDUCE_THREADS: u32 = REDUCE_GROUPS * REDUCE_CHANNELS;

/// Dynamic shared memory of a reduction block: each group's three sums per channel (two when
/// `dinp` is not summed).
pub const REDUCE_SHARED_BYTES: u32 = REDUCE_GROUPS * 3 * REDUCE_CHANNELS * 4;

/// Channel sums the backward keeps per channel: `Σ dout·norm` and `Σ dout`, and `Σ dinp` in the
/// `colsum` kernels (the order of the arrays in a warp's shared memory and of a block's slot
/// of `partials`).
#[inline]
pub const fn backward_parts(colsum: bool) -> u32 {
    if colsum { 3 } else { 2 }
}

/// Words of one of a backward warp's channel-sum arrays in shared memory: `c` rounded up to a
/// multiple of 8 (the arrays are permuted within groups of 8, [`backward_sum_word`]).
#[inline]
pub const fn backward_sums_len(c: u32) -> u32 {
    c.div_ceil(8) * 8
}

/// The word of channel `ch` in a backward warp's channel-sum array: channel `8j + k` (lane
/// `j % 32` owns chunk `j`) at `8j + (k + j/4) % 8`. Lane `l` updates channel `8l + k` at
/// word `8l + (k + l/4) % 8`, so the 32 lanes' updates of the same `k` fall in 32 different
/// banks (unpermuted, lanes `l` and `l + 4` would share one: an 8-way bank conflict).
#[inline]
pub const fn backward_sum_word(ch: u32) -> u32 {
    let chunk = ch / 8;
    chunk * 8 + (ch % 8 + chunk / 4) % 8
}

/// The word of channel `ch` in a warp's `Σ dinp` array of `layernorm_backward_cached_colsum_*`,
/// which a lane updates as two 16-byte accesses per chunk of 8 channels: channel order, but
/// with the two halves of chunk `j` swapped when `j / 4` is odd. Lane `l` owns chunk `l + 32k`,
/// so a quarter warp's 8 lanes (which a 16-byte access serves together) reach the 32 banks
/// once each: lanes 0–3 at words `8l`, lanes 4–7 at `8l + 4`, and the other way round in the
/// second access. In plain channel order lanes `l` and `l + 4` met in a bank.
#[inline]
pub const fn backward_cached_dinp_word(ch: u32) -> u32 {
    ch ^ (ch / 32 % 2 * 4)
}

/// Shared memory of one backward warp for `c` channels: [`backward_parts`] arrays of
/// [`backward_sums_len`] f32 channel sums.
#[inline]
const fn backward_warp_shared_bytes(c: u32, colsum: bool) -> u64 {
    backward_parts(colsum) as u64 * 4 * backward_sums_len(c) as u64
}

/// Warps per block of the backward for `c` channels: as many as fit their `Σ dout·norm` and
/// `Σ dout` in [`BACKWARD_SHARED_BYTES`], at most [`BACKWARD_MAX_WARPS`]; 0 when not even one
/// fits (`c` > 6144).
#[inline]
pub const fn backward_warps(c: u32) -> u32 {
    let per_warp = backward_warp_shared_bytes(c, false);
    let fit = BACKWARD_SHARED_BYTES as u64 / if per_warp == 0 { 1 } else { per_warp };
    if fit > BACKWARD_MAX_WARPS as u64 { BACKWARD_MAX_WARPS } else { fit as u32 }
}

/// Dynamic shared memory of a backward block for `c` channels: its [`backward_warps`] warps'
/// channel sums, at most [`BACKWARD_SHARED_BYTES`], or 1.5 times that for the `colsum`
/// kernels.
#[inline]
pub const fn backward_shared_bytes(c: u32, colsum: bool) -> u32 {
    (backward_warps(c) as u64 * backward_warp_shared_bytes(c, colsum)) as u32
}

/// Rows per block of the backward for `c` channels.
#[inline]
pub const fn backward_rows_per_block(c: u32) -> u32 {
    backward_warps(c) * BACKWARD_ROWS_PER_WARP
}

/// Forward, plain or fused with the residual addition.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LayerNormForwardParams<T: Copy> {
    /// Input rows (plain), or the residual stream (fused).
    pub inp: DevicePtr<T>,
    /// Fused only: added to `inp` (null for the plain kernel).
    pub inp2: DevicePtr<T>,
    /// Fused only: `inp + inp2` is written here (null for the plain kernel).
    pub residual: DevicePtrMut<T>,
    /// Per-channel scale.
    pub weight: DevicePtr<T>,
    /// Per-channel shift.
    pub bias: DevicePtr<T>,
    /// Normalised output.
    pub out: DevicePtrMut<T>,
    /// Row means, or null.
    pub mean: DevicePtrMut<f32>,
    /// Row reciprocal standard deviations, or null.
    pub rstd: DevicePtrMut<f32>,
    /// Number of rows.
    pub rows: u32,
    /// Channels per row.
    pub c: u32,
}

/// Backward, first kernel: `dinp` and each block's channel sums.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LayerNormBackwardParams<T: Copy> {
    /// Gradient of the output.
    pub dout: DevicePtr<T>,
    /// The forward's input.
    pub inp: DevicePtr<T>,
    /// Per-channel scale.
    pub weight: DevicePtr<T>,
    /// Row means from the forward.
    pub mean: DevicePtr<f32>,
    /// Row reciprocal standard deviations from the forward.
    pub rstd: DevicePtr<f32>,
    /// Gradient of the input, accumulated.
    pub dinp: DevicePtrMut<T>,
    /// `blocks × parts·c` f32 ([`backward_parts`]): block `b`'s `Σ dout·norm` (first `c`),
    /// `Σ dout` (next `c`) and, in the `colsum` kernels, `Σ dinp` of the updated `dinp` as
    /// stored (last `c`).
    pub partials: DevicePtrMut<f32>,
    /// Number of rows.
    pub rows: u32,
    /// Channels per row.
    pub c: u32,
}

/// Backward, second kernel: `dweight[i] = beta · dweight[i] + Σ_b partials[b][i]`,
/// `dbias[i] = beta · dbias[i] + Σ_b partials[b][c + i]` and, when `dinp_sum` is not null,
/// `dinp_sum[i] = beta · dinp_sum[i] + Σ_b partials[b][2c + i]`, blocks in order. `beta == 0`
/// means none is read (they may hold NaN): a training step's first micro-batch writes the
/// gradients without zeroing them first.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LayerNormBackwardReduceParams {
    /// The first kernel's per-block sums, `parts·c` a block: 3 when `dinp_sum` is not null.
    pub partials: DevicePtr<f32>,
    /// Weight gradient (output; also input when `beta != 0`).
    pub dweight: DevicePtrMut<f32>,
    /// Bias gradient (output; also input when `beta != 0`).
    pub dbias: DevicePtrMut<f32>,
    /// Column sums of the updated `dinp` (output; also input when `beta != 0`), or null.
    pub dinp_sum: DevicePtrMut<f32>,
    /// Number of blocks of the first kernel.
    pub blocks: u32,
    /// Channels.
    pub c: u32,
    /// Scale of the previous `dweight`, `dbias` and `dinp_sum`: 1 accumulates, 0 overwrites.
    pub beta: f32,
    /// Zero (explicit padding to the pointers' alignment).
    pub _pad: u32,
}

// SAFETY: #[repr(C)] structs of device pointers and 32-bit fields; no padding (pointers first,
// the 32-bit fields pair up at the end).
unsafe impl<T: Copy + 'static> KernelParams for LayerNormForwardParams<T> {}
// SAFETY: as above.
unsafe impl<T: Copy + 'static> KernelParams for LayerNormBackwardParams<T> {}
// SAFETY: as above.
unsafe impl KernelParams for LayerNormBackwardReduceParams {}

/// The layernorm kernels of one storage type.
pub trait LayerNormKernels: Copy + 'static {
    /// `layernorm_forward_<ty>`.
    const FORWARD: Kernel<LayerNormForwardParams<Self>>;
    /// `residual_layernorm_forward_<ty>`.
    const RESIDUAL_FORWARD: Kernel<LayerNormForwardParams<Self>>;
    /// `layernorm_backward_<ty>`.
    const BACKWARD: Kernel<LayerNormBackwardParams<Self>>;
    /// `layernorm_backward_cached_<ty>` ([`BACKWARD_CACHED_MAX_C`]), for the 16-bit types.
    const BACKWARD_CACHED: Option<Kernel<LayerNormBackwardParams<Self>>>;
    /// `layernorm_backward_colsum_<ty>`: [`Self::BACKWARD`] also summing `dinp`.
    const BACKWARD_COLSUM: Kernel<LayerNormBackwardParams<Self>>;
    /// `layernorm_backward_cached_colsum_<ty>`: [`Self::BACKWARD_CACHED`] also summing `dinp`.
    const BACKWARD_CACHED_COLSUM: Option<Kernel<LayerNormBackwardParams<Self>>>;
}

macro_rules! layernorm_kernels {
    ($ty:ty, $fwd:ident = $fwd_name:literal, $res:ident = $res_name:literal,
     $bwd:ident = $bwd_name:literal, $colsum:ident = $colsum_name:literal,
     $cached:expr, $cached_colsum:expr) => {
        #[doc = concat!("`", $fwd_name, "`")]
        pub const $fwd: Kernel<LayerNormForwardParams<$ty>> = Kernel::new($fwd_name);
        #[doc = concat!("`", $res_name, "`")]
        pub const $res: Kernel<LayerNormForwardParams<$ty>> = Kernel::new($res_name);
        #[doc = concat!("`", $bwd_name, "`")]
        pub const $bwd: Kernel<LayerNormBackwardParams<$ty>> = Kernel::new($bwd_name);
        #[doc = concat!("`", $colsum_name, "`")]
        pub const $colsum: Kernel<LayerNormBackwardParams<$ty>> = Kernel::new($colsum_name);

        impl LayerNormKernels for $ty {
            const FORWARD: Kernel<LayerNormForwardParams<Self>> = $fwd;
            const RESIDUAL_FORWARD: Kernel<LayerNormForwardParams<Self>> = $res;
            const BACKWARD: Kernel<LayerNormBackwardParams<Self>> = $bwd;
            const BACKWARD_CACHED: Option<Kernel<LayerNormBackwardParams<Self>>> = $cached;
            const BACKWARD_COLSUM: Kernel<LayerNormBackwardParams<Self>> = $colsum;
            const BACKWARD_CACHED_COLSUM: Option<Kernel<LayerNormBackwardParams<Self>>> =
                $cached_colsum;
        }
    };
}

layernorm_kernels!(
    f32,
    LAYERNORM_FORWARD_F32 = "layernorm_forward_f32",
    RESIDUAL_LAYERNORM_FORWARD_F32 = "residual_layernorm_forward_f32",
    LAYERNORM_BACKWARD_F32 = "layernorm_backward_f32",
    LAYERNORM_BACKWARD_COLSUM_F32 = "layernorm_backward_colsum_f32",
    None,
    None
);
layernorm_kernels!(
    Bf16,
    LAYERNORM_FORWARD_BF16 = "layernorm_forward_bf16",
    RESIDUAL_LAYERNORM_FORWARD_BF16 = "residual_layernorm_forward_bf16",
    LAYERNORM_BACKWARD_BF16 = "layernorm_backward_bf16",
    LAYERNORM_BACKWARD_COLSUM_BF16 = "layernorm_backward_colsum_bf16",
    Some(LAYERNORM_BACKWARD_CACHED_BF16),
    Some(LAYERNORM_BACKWARD_CACHED_COLSUM_BF16)
);
layernorm_kernels!(
    F16,
    LAYERNORM_FORWARD_F16 = "layernorm_forward_f16",
    RESIDUAL_LAYERNORM_FORWARD_F16 = "residual_layernorm_forward_f16",
    LAYERNORM_BACKWARD_F16 = "layernorm_backward_f16",
    LAYERNORM_BACKWARD_COLSUM_F16 = "layernorm_backward_colsum_f16",
    Some(LAYERNORM_BACKWARD_CACHED_F16),
    Some(LAYERNORM_BACKWARD_CACHED_COLSUM_F16)
);

/// `layernorm_backward_cached_bf16` ([`BACKWARD_CACHED_MAX_C`]).
pub const LAYERNORM_BACKWARD_CACHED_BF16: Kernel<LayerNormBackwardParams<Bf16>> =
    Kernel::new("layernorm_backward_cached_bf16");
/// `layernorm_backward_cached_f16` ([`BACKWARD_CACHED_MAX_C`]).
pub const LAYERNORM_BACKWARD_CACHED_F16: Kernel<LayerNormBackwardParams<F16>> =
    Kernel::new("layernorm_backward_cached_f16");
/// `layernorm_backward_cached_colsum_bf16` ([`BACKWARD_CACHED_MAX_C`]).
pub const LAYERNORM_BACKWARD_CACHED_COLSUM_BF16: Kernel<LayerNormBackwardParams<Bf16>> =
    Kernel::new("layernorm_backward_cached_colsum_bf16");
/// `layernorm_backward_cached_colsum_f16` ([`BACKWARD_CACHED_MAX_C`]).
pub const LAYERNORM_BACKWARD_CACHED_COLSUM_F16: Kernel<LayerNormBackwardParams<F16>> =
    Kernel::new("layernorm_backward_cached_colsum_f16");

/// `layernorm_backward_reduce`: the backward's second kernel (all storage types).
pub const LAYERNORM_BACKWARD_REDUCE: Kernel<LayerNormBackwardReduceParams> =
    Kernel::new("layernorm_backward_reduce");

/// Every layernorm entry point.
pub const KERNELS: &[KernelSig] = &[
    LAYERNORM_FORWARD_F32.sig(),
    LAYERNORM_FORWARD_BF16.sig(),
    LAYERNORM_FORWARD_F16.sig(),
    RESIDUAL_LAYERNORM_FORWARD_F32.sig(),
    RESIDUAL_LAYERNORM_FORWARD_BF16.sig(),
    RESIDUAL_LAYERNORM_FORWARD_F16.sig(),
    LAYERNORM_BACKWARD_F32.sig(),
    LAYERNORM_BACKWARD_BF16.sig(),
    LAYERNORM_BACKWARD_F16.sig(),
    LAYERNORM_BACKWARD_CACHED_BF16.sig(),
    LAYERNORM_BACKWARD_CACHED_F16.sig(),
    LAYERNORM_BACKWARD_COLSUM_F32.sig(),
    LAYERNORM_BACKWARD_COLSUM_BF16.sig(),
    LAYERNORM_BACKWARD_COLSUM_F16.sig(),
    LAYERNORM_BACKWARD_CACHED_COLSUM_BF16.sig(),
    LAYERNORM_BACKWARD_CACHED_COLSUM_F16.sig(),
    LAYERNORM_BACKWARD_REDUCE.sig(),
];

/// Blocks of the backward that must share a Hopper SM: four of 8 warps (64 registers a thread,
/// and 4 × 48 KiB of shared memory). GPT-2 124M's 16384 rows make 512 blocks, and at 71
/// registers (three blocks per SM) an H100 ran them as 1.29 waves, the last with a quarter of
/// the SMs busy: 85 µs a call, 32% of the memory bandwidth (Nsight Compute, 2026-11-26). Four
/// per SM are 528 slots on 132 SMs: one wave. Only the sm_90a module has the bound
/// (`kernel::HOPPER_LAUNCH_BOUNDS`): an A100's 164 KiB of shared memory holds three such
/// blocks anyway, and 64 registers made the sm_80 build spill.
pub const BACKWARD_BLOCKS_PER_SM: u32 = 4;

/// Blocks of `layernorm_backward_cached_<ty>` that must share a Hopper SM: two of 8 warps (128
/// registers a thread: 48 channel sums and three chunks each of `dout`, `inp` and `dinp`). GPT-2
/// 124M's 512 blocks make 1.94 waves of 264, 16 warps an SM, each with a whole row's loads in
/// flight at once and the next row's requested into L2.
pub const BACKWARD_CACHED_BLOCKS_PER_SM: u32 = 2;

/// Blocks of `layernorm_backward_colsum_<ty>` that must share a Hopper SM: three of 8 warps (at
/// most 85 registers a thread; ptxas takes 71 to 78), as many as their 72 KiB of shared memory
/// allow at `c` = 768. At the plain kernel's 64 registers, the third array's updates spilled.
pub const BACKWARD_COLSUM_BLOCKS_PER_SM: u32 = 3;

/// Launch bounds of the backward kernels in the sm_90a module ([`BACKWARD_BLOCKS_PER_SM`],
/// [`BACKWARD_CACHED_BLOCKS_PER_SM`], [`BACKWARD_COLSUM_BLOCKS_PER_SM`]; the cached `colsum`
/// kernels as the cached ones).
pub const LAUNCH_BOUNDS: &[LaunchBounds] = &{
    let threads = BACKWARD_MAX_WARPS * 32;
    let (blocks, cached) = (BACKWARD_BLOCKS_PER_SM, BACKWARD_CACHED_BLOCKS_PER_SM);
    let colsum = BACKWARD_COLSUM_BLOCKS_PER_SM;
    [
        LaunchBounds::new(LAYERNORM_BACKWARD_F32.sig(), threads, blocks),
        LaunchBounds::new(LAYERNORM_BACKWARD_BF16.sig(), threads, blocks),
        LaunchBounds::new(LAYERNORM_BACKWARD_F16.sig(), threads, blocks),
        LaunchBounds::new(LAYERNORM_BACKWARD_CACHED_BF16.sig(), threads, cached),
        LaunchBounds::new(LAYERNORM_BACKWARD_CACHED_F16.sig(), threads, cached),
        LaunchBounds::new(LAYERNORM_BACKWARD_COLSUM_F32.sig(), threads, colsum),
        LaunchBounds::new(LAYERNORM_BACKWARD_COLSUM_BF16.sig(), threads, colsum),
        LaunchBounds::new(LAYERNORM_BACKWARD_COLSUM_F16.sig(), threads, colsum),
        LaunchBounds::new(LAYERNORM_BACKWARD_CACHED_COLSUM_BF16.sig(), threads, cached),
        LaunchBounds::new(LAYERNORM_BACKWARD_CACHED_COLSUM_F16.sig(), threads, cached),
    ]
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The permutation maps the channels one to one into the array, and the 32 lanes'
    /// updates of the same element of their chunks hit 32 different banks in every pass.
    /// A block's shared memory is its warps' two arrays each: 48 KiB at GPT-2 small's
    /// c = 768 (8 warps), 37.5 KiB at XL's 1600 (3 warps), none past 6144; the `colsum`
    /// kernels' three arrays 72 KiB and 56.25 KiB, the same warps.
    #[test]
    fn backward_blocks_fit_their_shared_memory() {
        let fit = |c, colsum| (backward_warps(c), backward_shared_bytes(c, colsum));
        assert_eq!(fit(768, false), (8, 48 * 1024));
        assert_eq!(fit(1600, false), (3, 38_400));
        assert_eq!(fit(6145, false), (0, 0));
        assert_eq!(fit(768, true), (8, 72 * 1024));
        assert_eq!(fit(1600, true), (3, 57_600));
        for c in [1, 7, 300, 1000, 6144] {
            assert!(backward_shared_bytes(c, false) <= BACKWARD_SHARED_BYTES, "c = {c}");
            assert!(backward_shared_bytes(c, true) <= BACKWARD_SHARED_BYTES / 2 * 3, "c = {c}");
        }
    }

    /// Channel `ch`'s word is in its own chunk of 8, one to one, and each 16-byte access of a
    /// quarter warp (lanes `8q..8q + 8`, half `h` of each lane's chunk) covers the 32 banks.
    #[test]
    fn cached_dinp_sums_are_a_conflict_free_permutation() {
        for ch in 0..1024 {
            let word = backward_cached_dinp_word(ch);
            assert_eq!((word / 8, backward_cached_dinp_word(word)), (ch / 8, ch), "{ch}");
        }
        for chunk_base in [0, 32, 64] {
            for quarter in 0..4 {
                for half in 0..2 {
                    let mut banks = [false; 32];
                    for lane in 8 * quarter..8 * quarter + 8 {
                        let first = 8 * (chunk_base + lane) + 4 * half;
                        let word = backward_cached_dinp_word(first);
                        assert!(word.is_multiple_of(4), "16-byte aligned");
                        for b in word..word + 4 {
                            assert!(!banks[(b % 32) as usize], "quarter {quarter} half {half}");
                            banks[(b % 32) as usize] = true;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn backward_sums_are_a_conflict_free_permutation() {
        for c in [1, 7, 8, 100, 128, 768, 1000, 1600, 6144] {
            let len = backward_sums_len(c);
            assert!(len >= c && len < c + 8 && len.is_multiple_of(8), "c = {c}");
            let mut seen = [false; 6144];
            for ch in 0..c {
                let word = backward_sum_word(ch) as usize;
                assert!(word < len as usize && !seen[word], "c = {c}, channel {ch}");
                seen[word] = true;
            }
        }
        for pass in 0..3 {
            for k in 0..8 {
                let mut banks = [false; 32];
                for lane in 0..32 {
                    banks[(backward_sum_word(8 * (lane + 32 * pass) + k) % 32) as usize] = true;
                }
                assert!(banks.iter().all(|&hit| hit), "pass {pass}, element {k}");
            }
        }
    }
}
