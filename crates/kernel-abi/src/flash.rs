//! Flash attention (FlashAttention-2, `mma.sync`; on the sm_90a module the forward, dK/dV and
//! dQ kernels also on `wgmma`, [`WGMMA_THREADS`] per block, same grids): causal multi-head
//! attention straight from the fused qkv activation, never materialising the T×T scores.
//!
//! Layouts: `qkv` is (B, T, 3, NH, HD) (llm.c's `[q | k | v]` rows, head `h` owning channels
//! `h·HD..(h+1)·HD` of each part), `out` is (B, T, NH, HD) = (B, T, C), `lse` is (B, NH, T) f32:
//! the natural-log log-sum-exp of each row's scaled scores, which the backward recomputes the
//! probabilities from. Scores are scaled by `1/sqrt(HD)`; position `t` attends to `0..=t`.
//!
//! The forward: one block of [`FORWARD_WARPS`] warps per (head, query tile of [`BLOCK_Q`] rows,
//! sequence) = (`blockIdx.x`, `.y`, `.z`); each warp owns 16 query rows. The block walks the
//! key/value tiles of [`BLOCK_KV`] rows from 0 to its diagonal (tiles above the diagonal are
//! skipped, the diagonal one masked), double-buffered in shared memory through `cp.async`, and
//! keeps per row the running maximum and sum of `2^(s·scale·log2 e − max)` (online softmax in
//! f32) and the output accumulator in registers. Query tiles run heaviest first (`blockIdx.y` = y takes tile `tiles − 1 − y`, every
//! head of a sequence its tile before any head its next).
//!
//! The backward (FlashAttention-2) takes `dout` (B, T, NH, HD), `out` and `lse` from the
//! forward, and writes `dqkv` (B, T, 3, NH, HD) in two launches:
//! 1. `dq`: one block of [`BACKWARD_WARPS`] warps per (head, query tile of [`BLOCK_Q`] rows,
//!    sequence), each warp owning 16 query rows. Each lane first computes
//!    `D[b,h,i] = Σ_d dout[b,i,h,d] · out[b,i,h,d]` (f32) of its two rows and writes it to the
//!    (B, NH, T) buffer `d`; the block then walks the key/value tiles 0..=diagonal, recomputing
//!    `P` from `lse`, and accumulates `dQ = scale · dS·K` with `dS = P ∘ (dO·Vᵀ − D)`;
//! 2. `dkdv`: one block per (head, key/value tile of [`BLOCK_KV`] rows, sequence), each warp
//!    owning 16 key/value rows; the block walks the query tiles from its diagonal to the last,
//!    recomputing `Pᵀ` from `lse` and reading `D` from the dQ launch, and accumulates
//!    `dV = Pᵀ·dO` and `dK = scale · dSᵀ·Q` with `dSᵀ = Pᵀ ∘ (V·dOᵀ − D)` in registers.
//!
//! Every gradient element (and every `D`) is owned by one thread, so the backward is
//! deterministic (no atomics).

use crate::kernel::{Kernel, KernelParams, KernelSig, LaunchBounds};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// The head size the kernels are written for (every GPT-2 model's).
pub const HD: u32 = 64;
/// Query rows per block.
pub const BLOCK_Q: u32 = 64;
/// Key/value rows per tile.
pub const BLOCK_KV: u32 = 64;
/// Warps per block of the forward (16 query rows each).
pub const FORWARD_WARPS: u32 = BLOCK_Q / 16;
/// Threads per block of the forward.
pub const FORWARD_THREADS: u32 = FORWARD_WARPS * 32;
/// Dynamic shared memory of the forward: the Q tile and two stages of K and V tiles, 16-bit.
pub const FORWARD_SHARED_BYTES: u32 = (BLOCK_Q + 4 * BLOCK_KV) * HD * 2;

/// Warps per block of the backward's dK/dV and dQ kernels (16 rows each).
pub const BACKWARD_WARPS: u32 = BLOCK_KV / 16;
/// Threads per block of the backward's dK/dV and dQ kernels.
pub const BACKWARD_THREADS: u32 = BACKWARD_WARPS * 32;
/// Dynamic shared memory of the dK/dV and dQ kernels: two resident 64 × 64 16-bit tiles (K and
/// V, or Q and dO) and two stages of the two streamed ones: 48 KiB, the default limit.
pub const BACKWARD_SHARED_BYTES: u32 = 6 * BLOCK_KV * HD * 2;
/// Threads per block of the sm_90a kernels on wgmma (the forward, dK/dV and dQ): one warpgroup,
/// whose four warps own the same 16 rows each as the `mma.sync` kernels' warps.
pub const WGMMA_THREADS: u32 = 128;
/// Alignment of the wgmma kernels' tiles: the 128-byte swizzle pattern repeats every 1024
/// bytes, and a wgmma descriptor assumes the tile starts on such a boundary.
pub const WGMMA_TILE_ALIGN: u32 = 1024;
/// Dynamic shared memory of the sm_90a forward on wgmma: the tiles of [`FORWARD_SHARED_BYTES`]
/// and room to align the dynamic base up to [`WGMMA_TILE_ALIGN`].
pub const FORWARD_WGMMA_SHARED_BYTES: u32 = FORWARD_SHARED_BYTES + WGMMA_TILE_ALIGN;
/// Stages of each streamed tile (Q and dO, or K and V) in the backward's kernels on wgmma:
/// three, so that a tile's copies are issued two steps before the step that reads it. With the
/// `mma.sync` kernels' two stages (until 2026-11-28) they had the rest of one step to land, and
/// an H100 ran the dK/dV kernel at 36% of its SM throughput and 39% of its memory's, its L2
/// hit rate 76% (Nsight Compute, 2026-11-27): a step is about a microsecond of work, a copy from
/// DRAM under load about as long.
pub const BACKWARD_WGMMA_STAGES: u32 = 3;
/// Dynamic shared memory of the backward's dQ kernel on wgmma: two resident tiles, the two
/// streamed ones in [`BACKWARD_WGMMA_STAGES`] stages each (64 KiB), and room to align the
/// dynamic base up to [`WGMMA_TILE_ALIGN`]: 65 KiB, three blocks per SM.
pub const BACKWARD_WGMMA_SHARED_BYTES: u32 =
    (2 + 2 * BACKWARD_WGMMA_STAGES) * BLOCK_KV * HD * 2 + WGMMA_TILE_ALIGN;
/// One stage of a query tile's statistics in the dK/dV kernel on wgmma: the tile's
/// `BLOCK_Q` log-sum-exps, then its `BLOCK_Q` values of `D` (f32), copied with the tile's Q
/// and dO.
pub const DKDV_STATS_STAGE_BYTES: u32 = 2 * BLOCK_Q * 4;
/// Dynamic shared memory of the backward's dK/dV kernel on wgmma: [`BACKWARD_WGMMA_SHARED_BYTES`]
/// and [`BACKWARD_WGMMA_STAGES`] stages of statistics ([`DKDV_STATS_STAGE_BYTES`]) after the
/// tiles: 66.5 KiB, three blocks per SM.
pub const BACKWARD_DKDV_WGMMA_SHARED_BYTES: u32 =
    BACKWARD_WGMMA_SHARED_BYTES + BACKWARD_WGMMA_STAGES * DKDV_STATS_STAGE_BYTES;
const _: () = assert!(
    3 * (BACKWARD_DKDV_WGMMA_SHARED_BYTES + 1024) <= 227 * 1024,
    "three dK/dV blocks (and the 1 KiB the driver reserves each) fit a Hopper SM"
);
/// Byte offset of 16-byte chunk `chunk` (0..8) of row `row` in a shared-memory tile of 64
/// 16-bit columns (128-byte rows), XOR-swizzled so that the 8 rows one `ldmatrix` matrix reads,
/// and the 8 chunks of one row, fall in 8 different bank groups.
#[inline]
pub const fn tile_offset(row: u32, chunk: u32) -> u32 {
    row * 128 + ((chunk ^ (row % 8)) * 16)
}

/// Parameters of the forward.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FlashForwardParams<T: Copy> {
    /// (B, T, 3, NH, HD) input.
    pub qkv: DevicePtr<T>,
    /// (B, T, NH, HD) output.
    pub out: DevicePtrMut<T>,
    /// (B, NH, T) log-sum-exp of each row's scaled scores (natural log).
    pub lse: DevicePtrMut<f32>,
    /// Sequence length.
    pub t: u32,
    /// Heads.
    pub nh: u32,
    /// `log2(e) / sqrt(HD)`: scores times this are base-2 exponents.
    pub scale_log2: f32,
    /// Unused; keeps the struct free of implicit padding.
    pub _pad: u32,
}

// SAFETY: #[repr(C)] struct of device pointers, u32s and an f32, padded explicitly to 8 bytes.
unsafe impl<T: Copy + 'static> KernelParams for FlashForwardParams<T> {}

/// Parameters of the backward's dK/dV and dQ kernels.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct FlashBackwardParams<T: Copy> {
    /// (B, T, 3, NH, HD) input of the forward.
    pub qkv: DevicePtr<T>,
    /// (B, T, NH, HD) output of the forward.
    pub out: DevicePtr<T>,
    /// (B, T, NH, HD) gradient of the output.
    pub dout: DevicePtr<T>,
    /// (B, NH, T) log-sum-exp saved by the forward (natural log).
    pub lse: DevicePtr<f32>,
    /// (B, NH, T) `D = rowsum(dout ∘ out)`: written by the dQ kernel, read by the dK/dV
    /// kernel launched after it.
    pub d: DevicePtrMut<f32>,
    /// (B, T, 3, NH, HD) gradient: the dK/dV kernel writes the k and v parts, the dQ kernel
    /// the q part.
    pub dqkv: DevicePtrMut<T>,
    /// Column sums of `dqkv` as stored, or null (qkv's bias gradient, as
    /// `crate::gemm::GemmParams::col_sums`): for batch `b`, group `j` of 16 rows (positions)
    /// and channel `n < 3C`, `col_sums[(b·⌈T/16⌉ + j)·3C + n]`, the f32 sum of the group's
    /// stored gradients, added as `((s0 + s1) + (s2 + s3)) + ((s4 + s5) + (s6 + s7))` with
    /// `s_g` the sum from 0.0 of rows `16j + g` and `16j + g + 8` (rows at or past T skipped).
    pub col_sums: DevicePtrMut<f32>,
    /// Sequence length.
    pub t: u32,
    /// Heads.
    pub nh: u32,
    /// `log2(e) / sqrt(HD)`, as in the forward.
    pub scale_log2: f32,
    /// `1 / sqrt(HD)`: the scores' scale, applied to dK and dQ.
    pub scale: f32,
}

// SAFETY: #[repr(C)] struct of device pointers, u32s and f32s, no implicit padding.
unsafe impl<T: Copy + 'static> KernelParams for FlashBackwardParams<T> {}

/// The flash attention kernels of one 16-bit storage type.
pub trait FlashKernels: Copy + 'static {
    /// `flash_attention_forward_<ty>`.
    const FORWARD: Kernel<FlashForwardParams<Self>>;
    /// `flash_attention_backward_dkdv_<ty>`.
    const BACKWARD_DKDV: Kernel<FlashBackwardParams<Self>>;
    /// `flash_attention_backward_dq_<ty>`.
    const BACKWARD_DQ: Kernel<FlashBackwardParams<Self>>;
    /// `flash_attention_forward_wgmma_<ty>` (sm_90a module only).
    const FORWARD_WGMMA: Kernel<FlashForwardParams<Self>>;
    /// `flash_attention_backward_dkdv_wgmma_<ty>` (sm_90a module only).
    const BACKWARD_DKDV_WGMMA: Kernel<FlashBackwardParams<Self>>;
    /// `flash_attention_backward_dq_wgmma_<ty>` (sm_90a module only).
    const BACKWARD_DQ_WGMMA: Kernel<FlashBackwardParams<Self>>;
}

/// `flash_attention_forward_bf16`.
pub const FLASH_FORWARD_BF16: Kernel<FlashForwardParams<Bf16>> =
    Kernel::new("flash_attention_forward_bf16");
/// `flash_attention_forward_f16`.
pub const FLASH_FORWARD_F16: Kernel<FlashForwardParams<F16>> =
    Kernel::new("flash_attention_forward_f16");
/// `flash_attention_backward_dkdv_bf16`.
pub const FLASH_BACKWARD_DKDV_BF16: Kernel<FlashBackwardParams<Bf16>> =
    Kernel::new("flash_attention_backward_dkdv_bf16");
/// `flash_attention_backward_dkdv_f16`.
pub const FLASH_BACKWARD_DKDV_F16: Kernel<FlashBackwardParams<F16>> =
    Kernel::new("flash_attention_backward_dkdv_f16");
/// `flash_attention_backward_dq_bf16`.
pub const FLASH_BACKWARD_DQ_BF16: Kernel<FlashBackwardParams<Bf16>> =
    Kernel::new("flash_attention_backward_dq_bf16");
/// `flash_attention_backward_dq_f16`.
pub const FLASH_BACKWARD_DQ_F16: Kernel<FlashBackwardParams<F16>> =
    Kernel::new("flash_attention_backward_dq_f16");
/// `flash_attention_forward_wgmma_bf16`.
pub const FLASH_FORWARD_WGMMA_BF16: Kernel<FlashForwardParams<Bf16>> =
    Kernel::new("flash_attention_forward_wgmma_bf16");
/// `flash_attention_forward_wgmma_f16`.
pub const FLASH_FORWARD_WGMMA_F16: Kernel<FlashForwardParams<F16>> =
    Kernel::new("flash_attention_forward_wgmma_f16");
/// `flash_attention_backward_dkdv_wgmma_bf16`.
pub const FLASH_BACKWARD_DKDV_WGMMA_BF16: Kernel<FlashBackwardParams<Bf16>> =
    Kernel::new("flash_attention_backward_dkdv_wgmma_bf16");
/// `flash_attention_backward_dkdv_wgmma_f16`.
pub const FLASH_BACKWARD_DKDV_WGMMA_F16: Kernel<FlashBackwardParams<F16>> =
    Kernel::new("flash_attention_backward_dkdv_wgmma_f16");
/// `flash_attention_backward_dq_wgmma_bf16`.
pub const FLASH_BACKWARD_DQ_WGMMA_BF16: Kernel<FlashBackwardParams<Bf16>> =
    Kernel::new("flash_attention_backward_dq_wgmma_bf16");
/// `flash_attention_backward_dq_wgmma_f16`.
pub const FLASH_BACKWARD_DQ_WGMMA_F16: Kernel<FlashBackwardParams<F16>> =
    Kernel::new("flash_attention_backward_dq_wgmma_f16");

impl FlashKernels for Bf16 {
    const FORWARD: Kernel<FlashForwardParams<Self>> = FLASH_FORWARD_BF16;
    const BACKWARD_DKDV: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DKDV_BF16;
    const BACKWARD_DQ: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DQ_BF16;
    const FORWARD_WGMMA: Kernel<FlashForwardParams<Self>> = FLASH_FORWARD_WGMMA_BF16;
    const BACKWARD_DKDV_WGMMA: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DKDV_WGMMA_BF16;
    const BACKWARD_DQ_WGMMA: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DQ_WGMMA_BF16;
}
impl FlashKernels for F16 {
    const FORWARD: Kernel<FlashForwardParams<Self>> = FLASH_FORWARD_F16;
    const BACKWARD_DKDV: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DKDV_F16;
    const BACKWARD_DQ: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DQ_F16;
    const FORWARD_WGMMA: Kernel<FlashForwardParams<Self>> = FLASH_FORWARD_WGMMA_F16;
    const BACKWARD_DKDV_WGMMA: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DKDV_WGMMA_F16;
    const BACKWARD_DQ_WGMMA: Kernel<FlashBackwardParams<Self>> = FLASH_BACKWARD_DQ_WGMMA_F16;
}

/// Every flash attention entry point.
pub const KERNELS: &[KernelSig] = &[
    FLASH_FORWARD_BF16.sig(),
    FLASH_FORWARD_F16.sig(),
    FLASH_BACKWARD_DKDV_BF16.sig(),
    FLASH_BACKWARD_DKDV_F16.sig(),
    FLASH_BACKWARD_DQ_BF16.sig(),
    FLASH_BACKWARD_DQ_F16.sig(),
];

/// The entry points only the sm_90a module exports: the kernels on wgmma.
pub const HOPPER_KERNELS: &[KernelSig] = &[
    FLASH_FORWARD_WGMMA_BF16.sig(),
    FLASH_FORWARD_WGMMA_F16.sig(),
    FLASH_BACKWARD_DKDV_WGMMA_BF16.sig(),
    FLASH_BACKWARD_DKDV_WGMMA_F16.sig(),
    FLASH_BACKWARD_DQ_WGMMA_BF16.sig(),
    FLASH_BACKWARD_DQ_WGMMA_F16.sig(),
];

/// Three blocks per SM for the forward and dQ kernels (128 threads: at most 168 registers, 40
/// and 48 KiB of shared memory), two for dK/dV (its two f32 accumulators hold it near 255).
/// Without the bound, ptxas allocated 172 registers to the forward on sm_90 after a change that
/// saved instructions, which would have left two blocks per SM instead of three.
pub const LAUNCH_BOUNDS: &[LaunchBounds] = &[
    LaunchBounds::new(FLASH_FORWARD_BF16.sig(), FORWARD_THREADS, 3),
    LaunchBounds::new(FLASH_FORWARD_F16.sig(), FORWARD_THREADS, 3),
    LaunchBounds::new(FLASH_BACKWARD_DKDV_BF16.sig(), BACKWARD_THREADS, 2),
    LaunchBounds::new(FLASH_BACKWARD_DKDV_F16.sig(), BACKWARD_THREADS, 2),
    LaunchBounds::new(FLASH_BACKWARD_DQ_BF16.sig(), BACKWARD_THREADS, 3),
    LaunchBounds::new(FLASH_BACKWARD_DQ_F16.sig(), BACKWARD_THREADS, 3),
    LaunchBounds::new(FLASH_FORWARD_WGMMA_BF16.sig(), WGMMA_THREADS, 4),
    LaunchBounds::new(FLASH_FORWARD_WGMMA_F16.sig(), WGMMA_THREADS, 4),
    LaunchBounds::new(FLASH_BACKWARD_DKDV_WGMMA_BF16.sig(), WGMMA_THREADS, 3),
    LaunchBounds::new(FLASH_BACKWARD_DKDV_WGMMA_F16.sig(), WGMMA_THREADS, 3),
    LaunchBounds::new(FLASH_BACKWARD_DQ_WGMMA_BF16.sig(), WGMMA_THREADS, 3),
    LaunchBounds::new(FLASH_BACKWARD_DQ_WGMMA_F16.sig(), WGMMA_THREADS, 3),
];

#[cfg(test)]
mod tests {
    use super::*;

    /// The swizzle is a bijection on each row and spreads an ldmatrix's 8 rows over 8 chunks.
    #[test]
    fn swizzle_is_conflict_free() {
        for row in 0..64 {
            let mut chunks: [bool; 8] = [false; 8];
            for c in 0..8 {
                let off = tile_offset(row, c);
                assert_eq!(off / 128, row);
                chunks[((off % 128) / 16) as usize] = true;
            }
            assert!(chunks.iter().all(|&x| x));
        }
        for c in 0..8 {
            for r0 in (0..64).step_by(8) {
                let mut banks = [false; 8];
                for r in r0..r0 + 8 {
                    banks[((tile_offset(r, c) % 128) / 16) as usize] = true;
                }
                assert!(banks.iter().all(|&x| x), "chunk {c} rows {r0}..");
            }
        }
    }
}
