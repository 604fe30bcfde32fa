//! Flash attention backward on Hopper: the dK/dV and dQ kernels of [`super::backward`] with
//! their products on `wgmma` (sm_90a module only; `D` is computed as there). The building
//! blocks, and why the `mma.sync` kernels' tiles and lane ownership carry over, are in
//! [`super::wgmma`].
//!
//! The dK/dV kernel's products: `Sᵀ = K·Qᵀ` and `dPᵀ = V·dOᵀ` with both operands K-major in
//! shared memory; `dV += Pᵀ·dO` and `dK += dSᵀ·Q` with `Pᵀ`, `dSᵀ` as register A operands and
//! `dO`, `Q` M/N-major. The dQ kernel's: `S = Q·Kᵀ`, `dP = dO·Vᵀ`, `dQ += dS·K`.
//!
//! Both kernels stream their tiles in three stages (`BACKWARD_WGMMA_STAGES`): before the loop a
//! block issues its first two tiles, and each step the tile after next.
//!
//! Per tile the dK/dV kernel issues `Sᵀ` and `dPᵀ` as two wgmma groups (then the copies of the tile
//! after next, [`issue_ahead`]), turns `Sᵀ` into `Pᵀ` while `dPᵀ` runs, issues `dV += Pᵀ·dO`, forms
//! `dSᵀ` once `dPᵀ` is done (while `dV`'s group runs), issues `dK += dSᵀ·Q` and waits for
//! everything; the next step's `land` barrier then frees the stage. The dQ kernel does the same
//! with `S`, `dP` and `dQ += dS·K`. `D` is folded into the `dP` accumulators, which start at `−D`
//! (the first k-step accumulates): `dS = P ∘ acc`, and `D`'s registers are free before the products
//! run.

use super::backward::{BackwardBlock, causal_mask, causal_mask_transposed, store_rows};
use super::tile_count;
use super::wgmma::{
    StageRing, WgmmaFlashOp, aligned_smem_base, issue_ahead, product_acc, product_t, tiles_of,
};
use crate::arch::cp_async::{cp_async_ca_4, cp_async_commit_group};
use crate::arch::math::ex2_approx_f32;
use crate::arch::smem::ld_shared_v2_u32_at;
use crate::arch::wgmma::{self, hold, hold_words};
use crate::arch::{lane_id, thread_idx_x, warp_idx_x};
use crate::entry::entries;
use crate::gemm::tensor_op::{Bf16Op, F16Op};
use crate::unroll::unroll;
use core::f32::consts::LOG2_E;
use core::f32::math::mul_add;
use kernel_abi::flash::{
    BACKWARD_WGMMA_STAGES, BLOCK_KV, BLOCK_Q, DKDV_STATS_STAGE_BYTES, FlashBackwardParams,
};

/// The streamed tiles' stages (`BACKWARD_WGMMA_STAGES`): a step issues the tile after next.
type Ring = StageRing<BACKWARD_WGMMA_STAGES>;

/// Issues the copies of query tile `tile0 .. tile0 + 64`'s statistics from the (B, NH, T)
/// row starting at index `row_base` into the stats stage at `stage`
/// ([`DKDV_STATS_STAGE_BYTES`]): thread `i < 64` copies `lse[tile0 + i]` to word `i` and
/// `D[tile0 + i]` to word `64 + i`, zeros past `t` (zero-filled rows, whose products must
/// stay finite); the caller commits them as a group of their own. The indices are 32-bit
/// (`B·NH·T < 2³²`) and the buffers' addresses the launch's parameters, so that no 64-bit
/// address stays live across the tile loop (holding one spilled).
///
/// # Safety
/// Every thread of the block calls it; `row_base` is `(b·NH + h)·t` of a (b, h) inside the
/// buffers; the stage is not read until a covering wait and barrier, nor read by anyone since
/// the last barrier.
#[inline(always)]
unsafe fn issue_stats<T: Copy>(p: &FlashBackwardParams<T>, row_base: u32, stage: u32, tile0: u32) {
    let i = thread_idx_x();
    if i >= BLOCK_Q {
        return;
    }
    let pos = tile0 + i;
    let (at, bytes) = if pos < p.t { (row_base + pos, 4) } else { (row_base, 0) };
    // SAFETY: index `at` (position pos < t, or 0 with nothing read) of the caller's row of
    // both buffers; the stage holds 2 · BLOCK_Q words, i < BLOCK_Q.
    unsafe {
        cp_async_ca_4(stage + 4 * i, p.lse.as_ptr().add(at as usize).cast(), bytes);
        cp_async_ca_4(
            stage + 4 * (BLOCK_Q + i),
            p.d.as_mut_ptr().add(at as usize).cast_const().cast(),
            bytes,
        );
    }
}

const _: () = assert!(DKDV_STATS_STAGE_BYTES == 8 * BLOCK_Q, "lse, then D, f32");

/// `scale` times a lane's 16 columns `8n + 2·quad + c` (n < 8, c < 2) of one staged statistic
/// of a query tile, whose 64 f32 start at `lane_base − 8·quad` (zeros past `t`, as
/// [`issue_stats`] staged them).
///
/// # Safety
/// The statistic is a stats stage's `lse` or `D` part, landed and published by a barrier.
#[inline(always)]
unsafe fn staged_columns(lane_base: u32, scale: f32) -> [[f32; 2]; 8] {
    let mut out = [[0.0f32; 2]; 8];
    unroll!(const N in 0..8 => {
        // SAFETY: words 8N + 2·quad and the next of the statistic's 64, 8-byte aligned.
        let pair = unsafe { ld_shared_v2_u32_at::<{ 32 * N as u32 }>(lane_base) };
        out[N] = pair.map(|w| f32::from_bits(w) * scale);
    });
    out
}

/// dK and dV of one key/value tile on wgmma (see the module doc and [`super::backward`]).
///
/// # Safety
/// As the `mma.sync` dK/dV kernel, launched with `BACKWARD_DKDV_WGMMA_SHARED_BYTES` of
/// dynamic shared memory; sm_90a.
#[inline(always)]
unsafe fn dkdv<Op: WgmmaFlashOp>(p: FlashBackwardParams<Op::In>) {
    // SAFETY: every thread is here; the launch's tiles start at the aligned base.
    let block = unsafe { BackwardBlock::dkdv(&p, (aligned_smem_base(), BACKWARD_WGMMA_STAGES)) };
    let (kv_tile, tiles) = (block.tile, tile_count());
    let [sk, sv] = block.resident;
    let (rows, stats_base) = (block.rows, block.stats_base);
    let (warp, lane) = (warp_idx_x(), lane_id());
    let quad = lane % 4;
    let q_do = block.stream();
    let stats = block.tiles_end(BACKWARD_WGMMA_STAGES);
    // The launcher checked B·NH·T < 2³².
    let stats_row = stats_base as u32;
    // SAFETY: every thread is here; the stats' stages follow the tiles. The first tile's
    // statistics are a group of their own, after its Q and dO; the second tile's Q, dO and
    // statistics go into stage 1 as one group (an empty one without a second tile).
    unsafe {
        issue_stats(&p, stats_row, stats, kv_tile * BLOCK_Q);
        cp_async_commit_group();
        let second = (kv_tile + 1 < tiles).then(|| (kv_tile + 1) * BLOCK_Q);
        if let Some(row) = second {
            issue_stats(&p, stats_row, stats + DKDV_STATS_STAGE_BYTES, row);
        }
        issue_ahead(&q_do, 1, second);
    }
    let mut dk = [0.0f32; 32];
    let mut dv = [0.0f32; 32];
    let mut ring = Ring::new();
    let mut j = kv_tile;
    while j < tiles {
        let stage = ring.stage;
        let ahead_row = (j + 2 < tiles).then(|| (j + 2) * BLOCK_Q);
        // SAFETY: block-uniform, every step; one group per tile since this one's.
        let (qs, dos) = unsafe { ring.land(&q_do) };
        let lse_col = stats + stage * DKDV_STATS_STAGE_BYTES + 8 * quad;
        let d_col = lse_col + 4 * BLOCK_Q;
        // Sᵀ = K·Qᵀ, then dPᵀ − D = V·dOᵀ − D (the accumulators start at −D of their query
        // column, which frees D's registers before the products), two groups; then the
        // columns' `lse · log2 e`, once `Sᵀ` is done. Both statistics come from the stage,
        // copied a step ahead: loaded from global memory here, their latency held up the
        // products every step, and the `lse` loaded while the products ran took 16 registers
        // at the kernel's peak. (With −D loaded after `Sᵀ` is issued, ptxas waits for `Sᵀ`
        // before issuing `dPᵀ`.)
        let mut s = [0.0f32; 32];
        let mut dp = [0.0f32; 32];
        // SAFETY: this stage's statistics arrived with the step.
        let d = unsafe { staged_columns(d_col, -1.0) };
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => { dp[4 * n + e] = d[n][e & 1] });
        });
        hold(&mut dp);
        // SAFETY: warpgroup-uniform; K and V arrived with the first group, this stage's Q, dO
        // and statistics have landed. Every thread waited for the previous step's wgmmas
        // before this step's `land` barrier, after every read of that step's stage: the Q, dO
        // and statistics of the tile after next go there, one group, which that tile's `land`
        // waits for.
        let lse2 = unsafe {
            product_t::<Op, false>(&mut s, sk, qs);
            product_t::<Op, true>(&mut dp, sv, dos);
            let ahead = ring.ahead();
            if let Some(row) = ahead_row {
                issue_stats(&p, stats_row, stats + ahead * DKDV_STATS_STAGE_BYTES, row);
            }
            issue_ahead(&q_do, ahead, ahead_row);
            wgmma::wait_group::<1>();
            hold(&mut s);
            staged_columns(lse_col, LOG2_E)
        };
        // Pᵀ (masked below the diagonal: query < key; see the mma.sync kernel).
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => {
                let i = 4 * n + e;
                s[i] = ex2_approx_f32(mul_add(s[i], p.scale_log2, -lse2[n][e & 1]));
            });
        });
        if j == kv_tile {
            causal_mask_transposed(warp, lane, |n, e| s[4 * n + e] = 0.0);
        }
        // dV += Pᵀ·dO (one group), then dSᵀ = Pᵀ ∘ (dPᵀ − D) once dPᵀ (committed before dV)
        // is done.
        // SAFETY: warpgroup-uniform; this stage's dO is visible.
        let p_frags = unsafe {
            let p_frags = product_acc::<Op>(&mut dv, &s, dos);
            wgmma::wait_group::<1>();
            hold(&mut dp);
            p_frags
        };
        unroll!(i in 0..16 => {
            s[i] *= dp[i];
            s[i + 16] *= dp[i + 16];
        });
        // dK += dSᵀ·Q; every group done before the next step's `land`, whose barrier frees
        // this stage for the step after it to refill (no barrier of its own: `land`'s orders
        // every thread's reads of this stage before any copy into it).
        // SAFETY: warpgroup-uniform; this stage's Q is visible; the fragments of both products
        // stay alive until the wait.
        unsafe {
            let ds_frags = product_acc::<Op>(&mut dk, &s, qs);
            wgmma::wait_group::<0>();
            hold_words(&p_frags);
            hold_words(&ds_frags);
            hold(&mut dk);
            hold(&mut dv);
        }
        ring = ring.next();
        j += 1;
    }

    // SAFETY: this lane's rows of the warp's 16; the launcher checked dqkv's shape.
    unsafe {
        store_rows::<Op>(&p, &tiles_of(&dk), p.scale, rows, 1);
        store_rows::<Op>(&p, &tiles_of(&dv), 1.0, rows, 2);
    }
}

/// dQ of one query tile on wgmma, and `D` of its rows (see the module doc and
/// [`super::backward`]).
///
/// # Safety
/// As the `mma.sync` dQ kernel, with [`dkdv`]'s geometry; launched before [`dkdv`].
#[inline(always)]
unsafe fn dq<Op: WgmmaFlashOp>(p: FlashBackwardParams<Op::In>) {
    // SAFETY: every thread is here; the launch's tiles start at the aligned base.
    let block = unsafe { BackwardBlock::dq(&p, (aligned_smem_base(), BACKWARD_WGMMA_STAGES)) };
    let (q_tile, [sq, sdo], rows) = (block.tile, block.resident, block.rows);
    let quad = lane_id() % 4;
    let kv = block.stream();
    let kv_tiles = q_tile + 1;
    // SAFETY: block-uniform; stage 1 is not read before the loop's second step. The second
    // tile's K and V, as one group (an empty one without a second tile), in flight while `D`
    // is computed.
    unsafe { issue_ahead(&kv, 1, (kv_tiles > 1).then_some(BLOCK_KV)) };
    // SAFETY: the launch's parameters.
    let stats = unsafe { block.rows_stats(&p) };
    let mut dq = [0.0f32; 32];
    let mut ring = Ring::new();
    let mut j = 0;
    while j < kv_tiles {
        let ahead_row = (j + 2 < kv_tiles).then(|| (j + 2) * BLOCK_KV);
        // SAFETY: block-uniform, every step; one group per tile since this one's.
        let (ks, vs) = unsafe { ring.land(&kv) };

        // S = Q·Kᵀ and dP − D = dO·Vᵀ − D (from accumulators holding −D of their row), two
        // groups.
        let mut s = [0.0f32; 32];
        let mut dp = [0.0f32; 32];
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => { dp[4 * n + e] = -stats[e / 2].1 });
        });
        hold(&mut dp);
        // SAFETY: warpgroup-uniform; Q and dO arrived with the first group, this stage's K and
        // V have landed; every thread waited for the previous step's wgmmas before this step's
        // `land` barrier, so that step's stage is free for the tile after next.
        unsafe {
            product_t::<Op, false>(&mut s, sq, ks);
            product_t::<Op, true>(&mut dp, sdo, vs);
            issue_ahead(&kv, ring.ahead(), ahead_row);
            wgmma::wait_group::<1>();
            hold(&mut s);
        }
        // P (masked above the diagonal: key > query).
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => {
                let i = 4 * n + e;
                s[i] = ex2_approx_f32(mul_add(s[i], p.scale_log2, -stats[e / 2].0));
            });
        });
        if j == q_tile {
            causal_mask(q_tile, quad, rows, |n, e| s[4 * n + e] = 0.0);
        }
        // dS = P ∘ (dP − D), then dQ += dS·K; every group done before the next step's `land`,
        // whose barrier frees this stage for the step after it to refill.
        // SAFETY: warpgroup-uniform; this stage's K is visible; the fragments stay alive until
        // the wait.
        unsafe {
            wgmma::wait_group::<0>();
            hold(&mut dp);
            unroll!(n in 0..8 => {
                unroll!(e in 0..4 => {
                    let i = 4 * n + e;
                    s[i] *= dp[i];
                });
            });
            let ds_frags = product_acc::<Op>(&mut dq, &s, ks);
            wgmma::wait_group::<0>();
            hold_words(&ds_frags);
            hold(&mut dq);
        }
        ring = ring.next();
        j += 1;
    }

    // SAFETY: this lane's rows of the warp's 16; the launcher checked dqkv's shape.
    unsafe { store_rows::<Op>(&p, &tiles_of(&dq), p.scale, rows, 0) };
}

entries! { "flash";
    flash_attention_backward_dkdv_wgmma_bf16(FlashBackwardParams<kernel_abi::Bf16>) => dkdv::<Bf16Op>;
    flash_attention_backward_dkdv_wgmma_f16(FlashBackwardParams<kernel_abi::F16>) => dkdv::<F16Op>;
    flash_attention_backward_dq_wgmma_bf16(FlashBackwardParams<kernel_abi::Bf16>) => dq::<Bf16Op>;
    flash_attention_backward_dq_wgmma_f16(FlashBackwardParams<kernel_abi::F16>) => dq::<F16Op>;
}
