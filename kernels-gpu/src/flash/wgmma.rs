//! The wgmma building blocks of the sm_90a flash attention kernels (the forward in
//! [`super::forward_wgmma`], the backward in [`super::backward_wgmma`]).
//!
//! The block is one warpgroup (the 4 warps of the `mma.sync` kernels) and the tiles, their
//! `cp.async` double buffering and their swizzle are the same: a 64 × 64 16-bit tile of
//! 128-byte rows XOR-swizzled by `kernel_abi::flash::tile_offset` *is* the 128-byte-swizzle
//! layout wgmma reads, once the tile starts at a 1024-byte aligned address (the dynamic shared
//! base is aligned up; the launch adds 1 KiB for that). Such a tile is
//! - K-major for an operand whose k runs along the head dimension (`S = Q·Kᵀ`-like products,
//!   [`product_t`]): k-step `kk` at byte `32·kk`;
//! - M/N-major for an operand whose k runs along the tile's rows (`O += P·V`-like products,
//!   [`product_acc`]): k-step `kk` (16 rows) at byte `2048·kk`, the 64 columns one swizzle atom.
//!
//! An m64n64 f32 accumulator gives each warp of the warpgroup 16 rows in the `mma.sync` m16n8
//! layout, so two adjacent n8 tiles rounded to 16 bits are the warp's part of the register A
//! operand of the next wgmma, exactly as in the `mma.sync` kernels: each lane owns the same rows
//! and columns as there, and the softmax, statistics, masks and stores are theirs.
//!
//! cp.async writes shared memory through the generic proxy and wgmma reads it through the async
//! proxy, so each thread fences (`fence.proxy.async`) its landed copies before the barrier that
//! publishes them ([`StageRing::land`]).
//!
//! A step of a kernel's tile loop starts with [`StageRing::land`] and issues a later tile's copies
//! with [`issue_ahead`] once its first products are issued, so that their address arithmetic (about
//! 70 SASS instructions a thread for two tiles, 90 with dK/dV's statistics) runs while the tensor
//! cores multiply. Issued at the step's start, as the `mma.sync` kernels' `StreamPair::step` does,
//! it stood between the barrier and the step's first wgmma. The forward streams K and V in two
//! stages (a step issues the next tile); the backward kernels stream theirs in
//! `kernel_abi::flash::BACKWARD_WGMMA_STAGES` = 3, so a step issues the tile after next and a copy
//! has two steps to land ([`StageRing`]).

use super::backward::a_fragment;
use super::{FlashOp, StreamPair, TILE_BYTES};
use crate::arch::cp_async::{cp_async_commit_group, cp_async_wait_group};
use crate::arch::smem::dynamic_smem_base;
use crate::arch::sync::bar_sync;
use crate::arch::tma::fence_proxy_async_shared_cta;
use crate::arch::wgmma::{self, hold, hold_words};
use crate::gemm::tensor_op::{Bf16Op, F16Op};
use crate::unroll::unroll;
use kernel_abi::flash::{HD, WGMMA_THREADS, WGMMA_TILE_ALIGN};

const _: () = assert!(WGMMA_THREADS == 128, "one warpgroup per block");
const _: () = assert!(TILE_BYTES.is_multiple_of(WGMMA_TILE_ALIGN), "tiles stay aligned");
const _: () = assert!(HD == 64, "m64n64 products, 4 k-steps of 16");

/// Bytes between the k-steps of an M/N-major tile: 16 rows of 128 bytes.
const MN_K_STEP: u32 = 16 * 128;

/// A 16-bit type with the m64n64k16 wgmmas the kernels issue.
pub(super) trait WgmmaFlashOp: FlashOp {
    /// `acc (=|+=) A·B` with A and B K-major tiles in shared memory.
    ///
    /// # Safety
    /// As `arch::wgmma::mma_m64n64k16_bf16`.
    unsafe fn mma_ss(acc: &mut [f32; 32], desc_a: u64, desc_b: u64, scale_d: bool);

    /// `acc += A·B` with A in registers and B an M/N-major tile in shared memory.
    ///
    /// # Safety
    /// As `arch::wgmma::mma_m64n64k16_bf16_rs`.
    unsafe fn mma_rs(acc: &mut [f32; 32], a: [u32; 4], desc_b: u64);
}

impl WgmmaFlashOp for Bf16Op {
    #[inline(always)]
    unsafe fn mma_ss(acc: &mut [f32; 32], desc_a: u64, desc_b: u64, scale_d: bool) {
        // SAFETY: forwarded contract.
        unsafe { wgmma::mma_m64n64k16_bf16::<false, false>(acc, desc_a, desc_b, scale_d) }
    }

    #[inline(always)]
    unsafe fn mma_rs(acc: &mut [f32; 32], a: [u32; 4], desc_b: u64) {
        // SAFETY: forwarded contract.
        unsafe { wgmma::mma_m64n64k16_bf16_rs::<true>(acc, a, desc_b, true) }
    }
}

impl WgmmaFlashOp for F16Op {
    #[inline(always)]
    unsafe fn mma_ss(acc: &mut [f32; 32], desc_a: u64, desc_b: u64, scale_d: bool) {
        // SAFETY: forwarded contract.
        unsafe { wgmma::mma_m64n64k16_f16::<false, false>(acc, desc_a, desc_b, scale_d) }
    }

    #[inline(always)]
    unsafe fn mma_rs(acc: &mut [f32; 32], a: [u32; 4], desc_b: u64) {
        // SAFETY: forwarded contract.
        unsafe { wgmma::mma_m64n64k16_f16_rs::<true>(acc, a, desc_b, true) }
    }
}

/// The dynamic shared base aligned up to the swizzle pattern's 1024 bytes.
#[inline(always)]
pub(super) fn aligned_smem_base() -> u32 {
    dynamic_smem_base().next_multiple_of(WGMMA_TILE_ALIGN)
}

/// `acc = A·Bᵀ` (or `acc += A·Bᵀ` when `ACCUMULATE`) over the 64 columns of two K-major tiles
/// (A's 64 rows, B's 64 rows), issued as one committed group. Its own [`wgmma::fence`] follows
/// every write to `acc` ([`hold`] keeps the compiler from sinking one, such as the
/// accumulators' initial values, below it).
///
/// # Safety
/// The warpgroup's 128 threads call it together; no pending wgmma uses `acc`; both tiles hold
/// their data (fenced for the async proxy and published by a barrier) and stay unwritten until
/// a `wait_group` covers the group.
#[inline(always)]
pub(super) unsafe fn product_t<Op: WgmmaFlashOp, const ACCUMULATE: bool>(
    acc: &mut [f32; 32],
    a_tile: u32,
    b_tile: u32,
) {
    hold(acc);
    // SAFETY: the caller's contract.
    unsafe { wgmma::fence() };
    unroll!(kk in 0..4 => {
        let at = 32 * kk as u32;
        // SAFETY: the caller's contract; k-step kk of both tiles.
        unsafe {
            Op::mma_ss(
                acc,
                wgmma::desc_k_major_sw128(a_tile + at),
                wgmma::desc_k_major_sw128(b_tile + at),
                ACCUMULATE || kk > 0,
            )
        };
    });
    // SAFETY: the caller's contract.
    unsafe { wgmma::commit_group() };
}

/// `acc += X·tile` with `X` the warpgroup's 64 × 64 f32 values in accumulator layout, rounded
/// to the storage type (its A fragments returned: they are read asynchronously and must stay
/// alive until the group is waited for), and `tile` M/N-major (k = its rows); one committed
/// group.
///
/// # Safety
/// As [`product_t`], for `acc` and `tile`; `x` is not written by a pending wgmma.
#[inline(always)]
pub(super) unsafe fn product_acc<Op: WgmmaFlashOp>(
    acc: &mut [f32; 32],
    x: &[f32; 32],
    tile: u32,
) -> [[u32; 4]; 4] {
    let mut a = [[0u32; 4]; 4];
    unroll!(kk in 0..4 => {
        a[kk] = a_fragment::<Op>(quad_of(x, 2 * kk), quad_of(x, 2 * kk + 1));
    });
    hold_words(&a);
    hold(acc);
    // SAFETY: the caller's contract; the fence orders the fragments' writes before the reads.
    unsafe {
        wgmma::fence();
        unroll!(kk in 0..4 => {
            Op::mma_rs(
                acc,
                a[kk],
                wgmma::desc_mn_major_sw128(tile + MN_K_STEP * kk as u32, TILE_BYTES),
            );
        });
        wgmma::commit_group();
    }
    a
}

/// Registers `4n .. 4n + 4` of an accumulator: n8 tile `n` (the `mma.sync` C fragment).
#[inline(always)]
fn quad_of(acc: &[f32; 32], n: usize) -> [f32; 4] {
    [acc[4 * n], acc[4 * n + 1], acc[4 * n + 2], acc[4 * n + 3]]
}

/// The accumulator as the `mma.sync` kernels' 8 n8 tiles.
#[inline(always)]
pub(super) fn tiles_of(acc: &[f32; 32]) -> [[f32; 4]; 8] {
    let mut out = [[0.0f32; 4]; 8];
    unroll!(n in 0..8 => { out[n] = quad_of(acc, n) });
    out
}

/// The inverse of [`tiles_of`].
#[inline(always)]
pub(super) fn flat_of(tiles: &[[f32; 4]; 8]) -> [f32; 32] {
    let mut out = [0.0f32; 32];
    unroll!(n in 0..8 => {
        unroll!(e in 0..4 => { out[4 * n + e] = tiles[n][e] });
    });
    out
}

/// Issues the copies of a later tile (rows from `row`, when there is one) into `stage`, and commits
/// them, with any copy this thread issued since [`StageRing::land`] (the dK/dV kernel's
/// statistics), as one group, which the [`StageRing::land`] of that tile's step waits for.
///
/// # Safety
/// Block-uniform call site, after a step's [`StageRing::land`]; `stage` is not this step's, nor a
/// later step's that was issued already, and was last read (by threads and wgmmas) in an earlier
/// step, each thread waiting for its wgmmas before this step's [`StageRing::land`], whose barrier
/// orders those reads before these copies; the sources' buffers are as `Source::load` requires.
#[inline(always)]
pub(super) unsafe fn issue_ahead<T>(pair: &StreamPair<'_, T>, stage: u32, row: Option<u32>) {
    // SAFETY: the caller's contract.
    unsafe {
        if let Some(row) = row {
            pair.issue(stage, row);
        }
        cp_async_commit_group();
    }
}

/// A ring of `STAGES` stages walked one step at a time: this step's stage and the stage of the
/// tile `STAGES − 1` steps ahead, which the step issues (the stage the previous step read).
#[derive(Clone, Copy)]
pub(super) struct StageRing<const STAGES: u32> {
    pub stage: u32,
}

impl<const STAGES: u32> StageRing<STAGES> {
    /// The ring at the first step (stage 0).
    #[inline(always)]
    pub(super) fn new() -> Self {
        const { assert!(STAGES == 2 || STAGES == 3, "land's waits cover two or three stages") };
        Self { stage: 0 }
    }

    /// The start of a tile step for wgmma readers: waits until every copy this thread issued
    /// but the newest `STAGES − 2` groups (those of the tiles after this one) has landed, which
    /// leaves this stage's tiles (issued by [`issue_ahead`] during an earlier step or before the
    /// loop) landed, fences them for the async proxy and publishes them with a barrier. Returns
    /// this stage's two tile addresses.
    ///
    /// # Safety
    /// Block-uniform call site, in every step of the loop; exactly one group committed per tile
    /// since this stage's (an empty one where there was no tile to issue).
    #[inline(always)]
    pub(super) unsafe fn land<T>(self, pair: &StreamPair<'_, T>) -> (u32, u32) {
        // SAFETY: the caller's contract.
        unsafe {
            if STAGES == 2 {
                cp_async_wait_group::<0>();
            } else {
                cp_async_wait_group::<1>();
            }
            fence_proxy_async_shared_cta();
            bar_sync();
        }
        pair.tiles(self.stage)
    }

    /// The stage of the tile `STAGES − 1` steps ahead.
    #[inline(always)]
    pub(super) fn ahead(self) -> u32 {
        if self.stage == 0 { STAGES - 1 } else { self.stage - 1 }
    }

    /// The next step's ring.
    #[inline(always)]
    pub(super) fn next(self) -> Self {
        Self { stage: if self.stage == STAGES - 1 { 0 } else { self.stage + 1 } }
    }
}
