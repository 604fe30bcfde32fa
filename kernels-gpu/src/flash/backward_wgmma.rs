//! Flash attention backward on Hopper: the dK/dV and dQ kernels of [`super::backward`] with
//! their products on `wgmma` (sm_90a module only; the `D` pre-pass is shared).
//!
//! The block is one warpgroup (the 4 warps of the `mma.sync` kernels) and the tiles, their
//! `cp.async` double buffering and their swizzle are the same: a 64 × 64 16-bit tile of
//! 128-byte rows XOR-swizzled by `kernel_abi::flash::tile_offset` *is* the 128-byte-swizzle
//! layout wgmma reads, once the tile starts at a 1024-byte aligned address (the dynamic shared
//! base is aligned up; the launch adds 1 KiB for that). Such a tile is
//! - K-major for an operand whose k runs along the head dimension (`K`, `V` as A of
//!   `Sᵀ = K·Qᵀ` and `dPᵀ = V·dOᵀ`, `Q`, `dO` as their B; `Q`, `dO` as A and `K`, `V` as B in
//!   the dQ kernel): k-step `kk` at byte `32·kk`;
//! - M/N-major for an operand whose k runs along the tile's rows (`dO` in `dV += Pᵀ·dO`, `Q` in
//!   `dK += dSᵀ·Q`, `K` in `dQ += dS·K`): k-step `kk` (16 rows) at byte `2048·kk`, the 64
//!   columns one swizzle atom.
//!
//! `Pᵀ` and `dSᵀ` (`P`, `dS` in the dQ kernel) never touch shared memory: the m64n64 f32
//! accumulator of a warpgroup gives each warp 16 rows in the `mma.sync` m16n8 layout, so two
//! adjacent n8 tiles rounded to 16 bits are the warp's part of the register A operand of the
//! next wgmma, exactly as in the `mma.sync` kernels. Each lane therefore owns the same rows and
//! columns as there, and the statistics, masks and stores are theirs.
//!
//! Per tile the dK/dV kernel issues `Sᵀ` and `dPᵀ` as two wgmma groups, turns `Sᵀ` into `Pᵀ`
//! while `dPᵀ` runs, issues `dV += Pᵀ·dO`, forms `dSᵀ` once `dPᵀ` is done (while `dV`'s group
//! runs), issues `dK += dSᵀ·Q` and waits for everything before the barrier that frees the
//! stage. The dQ kernel does the same with `S`, `dP` and `dQ += dS·K`. cp.async writes shared
//! memory through the generic proxy and wgmma reads it through the async proxy, so each thread
//! fences (`fence.proxy.async`) its landed copies before the barrier that publishes them.

use super::backward::{a_fragment, row_stats, store_rows};
use super::{FlashOp, Source, StreamPair, TILE_BYTES};
use crate::arch::cp_async::cp_async_commit_group;
use crate::arch::math::ex2_approx_f32;
use crate::arch::smem::dynamic_smem_base;
use crate::arch::sync::bar_sync;
use crate::arch::tma::fence_proxy_async_shared_cta;
use crate::arch::wgmma::{self, hold, hold_words};
use crate::arch::{block_idx_x, block_idx_y, block_idx_z, grid_dim_x, lane_id, warp_idx_x};
use crate::entry::entries;
use crate::gemm::tensor_op::{Bf16Op, F16Op};
use crate::unroll::unroll;
use core::f32::consts::LOG2_E;
use core::f32::math::mul_add;
use kernel_abi::flash::{
    BACKWARD_WGMMA_ALIGN, BLOCK_KV, BLOCK_Q, FlashBackwardParams, HD, WGMMA_THREADS,
};

const _: () = assert!(WGMMA_THREADS == 128, "one warpgroup per block");
const _: () = assert!(TILE_BYTES.is_multiple_of(BACKWARD_WGMMA_ALIGN), "tiles stay aligned");
const _: () = assert!(HD == 64 && BLOCK_Q == 64, "m64n64 products, 4 k-steps of 16");

/// Bytes between the k-steps of an M/N-major tile: 16 rows of 128 bytes.
const MN_K_STEP: u32 = 16 * 128;

/// A 16-bit type with the m64n64k16 wgmmas the kernels issue.
trait WgmmaFlashOp: FlashOp {
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

/// `scale` times the values `tile0 + 8n + 2·quad + c` (n < 8, c < 2: a lane's 16 columns of a
/// query tile) of the (B, NH, T) f32 row at `row_base` of `buf`, 0 past `t` (zero-filled rows,
/// whose products must stay finite); without the bounds checks when the whole tile is inside.
/// The dK/dV kernel loads `−D` (into the `dPᵀ` accumulators) before its products and `lse`
/// while they run, so that the two never occupy registers together.
///
/// # Safety
/// `row_base` is `(b·NH + h)·t` of a (b, h) inside `buf`.
#[inline(always)]
unsafe fn tile_columns(
    buf: *const f32,
    row_base: usize,
    tile0: u32,
    quad: u32,
    t: u32,
    scale: f32,
) -> [[f32; 2]; 8] {
    let mut out = [[0.0f32; 2]; 8];
    let pos = |n: usize, c: usize| tile0 + n as u32 * 8 + 2 * quad + c as u32;
    let whole = tile0 + BLOCK_Q <= t;
    unroll!(n in 0..8 => {
        unroll!(c in 0..2 => {
            if whole || pos(n, c) < t {
                // SAFETY: pos < t inside the caller's row.
                out[n][c] = unsafe { *buf.add(row_base + pos(n, c) as usize) } * scale;
            }
        });
    });
    out
}

/// The dynamic shared base aligned up to the swizzle pattern's 1024 bytes.
#[inline(always)]
fn aligned_smem_base() -> u32 {
    dynamic_smem_base().next_multiple_of(BACKWARD_WGMMA_ALIGN)
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
unsafe fn product_t<Op: WgmmaFlashOp, const ACCUMULATE: bool>(
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
unsafe fn product_acc<Op: WgmmaFlashOp>(
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
fn tiles_of(acc: &[f32; 32]) -> [[f32; 4]; 8] {
    let mut out = [[0.0f32; 4]; 8];
    unroll!(n in 0..8 => { out[n] = quad_of(acc, n) });
    out
}

/// One step of a tile stream for wgmma readers: [`StreamPair::issue_and_wait`], then this
/// thread's landed copies fenced for the async proxy, then the barrier that publishes them.
///
/// # Safety
/// As `StreamPair::step`; no wgmma reads the other stage any more (every thread waited for its
/// groups before the barrier that ended the previous step).
#[inline(always)]
unsafe fn step<T>(pair: &StreamPair<'_, T>, stage: u32, next_row: Option<u32>) -> (u32, u32) {
    // SAFETY: the caller's contract.
    unsafe {
        let tiles = pair.issue_and_wait(stage, next_row);
        fence_proxy_async_shared_cta();
        bar_sync();
        tiles
    }
}

/// dK and dV of one key/value tile on wgmma (see the module doc and [`super::backward`]).
///
/// # Safety
/// As the `mma.sync` dK/dV kernel, launched with `BACKWARD_WGMMA_SHARED_BYTES` of dynamic
/// shared memory; sm_90a.
#[inline(always)]
unsafe fn dkdv<Op: WgmmaFlashOp>(p: FlashBackwardParams<Op::In>) {
    let (kv_tile, tiles) = (block_idx_x(), grid_dim_x());
    let (b, h) = (block_idx_z(), block_idx_y());
    let kv0 = kv_tile * BLOCK_KV;
    let channels = p.nh * HD;
    let part = |i: u32| Source::new(p.qkv.as_ptr(), p.t, 3 * channels, b, i * channels, h);
    let (q_src, k_src, v_src) = (part(0), part(1), part(2));
    let do_src = Source::new(p.dout.as_ptr(), p.t, channels, b, 0, h);
    let sk = aligned_smem_base();
    let sv = sk + TILE_BYTES;
    let sq = sv + TILE_BYTES;
    let sdo = sq + 2 * TILE_BYTES;
    let (warp, lane) = (warp_idx_x(), lane_id());
    let (g, quad) = (lane / 4, lane % 4);
    let rows = [kv0 + warp * 16 + g, kv0 + warp * 16 + g + 8];
    let stats_base = ((b * p.nh + h) * p.t) as usize;

    // SAFETY: block-uniform calls; the tiles are inside the launch's shared memory.
    unsafe {
        k_src.load(sk, kv0);
        v_src.load(sv, kv0);
        q_src.load(sq, kv0);
        do_src.load(sdo, kv0);
        cp_async_commit_group();
    }

    let q_do = StreamPair { first: (&q_src, sq), second: (&do_src, sdo) };
    let mut dk = [0.0f32; 32];
    let mut dv = [0.0f32; 32];
    let mut j = kv_tile;
    while j < tiles {
        let next_row = (j + 1 < tiles).then(|| (j + 1) * BLOCK_Q);
        // SAFETY: block-uniform; the previous step waited for all its wgmmas and ended with a
        // barrier.
        let (qs, dos) = unsafe { step(&q_do, (j - kv_tile) % 2, next_row) };
        // Sᵀ = K·Qᵀ, then dPᵀ − D = V·dOᵀ − D (the accumulators start at −D of their query
        // column, which frees D's registers before the products), two groups; the columns'
        // `lse · log2 e` load while they run.
        let tile0 = j * BLOCK_Q;
        // SAFETY: stats_base is this block's (b, h) row.
        let d = unsafe { tile_columns(p.d.as_ptr(), stats_base, tile0, quad, p.t, -1.0) };
        let mut s = [0.0f32; 32];
        let mut dp = [0.0f32; 32];
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => { dp[4 * n + e] = d[n][e & 1] });
        });
        hold(&mut dp);
        // SAFETY: warpgroup-uniform; K and V arrived with the first group, this stage's Q and
        // dO with the step; stats_base as above.
        let lse2 = unsafe {
            product_t::<Op, false>(&mut s, sk, qs);
            product_t::<Op, true>(&mut dp, sv, dos);
            let lse2 = tile_columns(p.lse.as_ptr(), stats_base, tile0, quad, p.t, LOG2_E);
            wgmma::wait_group::<1>();
            hold(&mut s);
            lse2
        };
        // Pᵀ (masked below the diagonal: query < key; see the mma.sync kernel).
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => {
                let i = 4 * n + e;
                s[i] = ex2_approx_f32(mul_add(s[i], p.scale_log2, -lse2[n][e & 1]));
            });
        });
        if j == kv_tile {
            let first = |r: i32| (warp * 16 + g) as i32 + 8 * r - 2 * quad as i32;
            let first = [first(0), first(1)];
            unroll!(n in 0..8 => {
                unroll!(e in 0..4 => {
                    if ((8 * n + (e & 1)) as i32) < first[e / 2] {
                        s[4 * n + e] = 0.0;
                    }
                });
            });
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
        // dK += dSᵀ·Q; every group done, and the block past it, before the next step refills
        // this stage.
        // SAFETY: warpgroup-uniform; this stage's Q is visible; the fragments of both products
        // stay alive until the wait.
        unsafe {
            let ds_frags = product_acc::<Op>(&mut dk, &s, qs);
            wgmma::wait_group::<0>();
            hold_words(&p_frags);
            hold_words(&ds_frags);
            hold(&mut dk);
            hold(&mut dv);
            bar_sync();
        }
        j += 1;
    }

    // SAFETY: this lane's rows of the warp's 16; the launcher checked dqkv's shape.
    unsafe {
        store_rows::<Op>(&p, &tiles_of(&dk), p.scale, rows, 1);
        store_rows::<Op>(&p, &tiles_of(&dv), 1.0, rows, 2);
    }
}

/// dQ of one query tile on wgmma (see the module doc and [`super::backward`]).
///
/// # Safety
/// As [`dkdv`]: the same launcher, parameters and geometry, launched right after it.
#[inline(always)]
unsafe fn dq<Op: WgmmaFlashOp>(p: FlashBackwardParams<Op::In>) {
    let q_tile = grid_dim_x() - 1 - block_idx_x();
    let (b, h) = (block_idx_z(), block_idx_y());
    let q0 = q_tile * BLOCK_Q;
    let channels = p.nh * HD;
    let part = |i: u32| Source::new(p.qkv.as_ptr(), p.t, 3 * channels, b, i * channels, h);
    let (q_src, k_src, v_src) = (part(0), part(1), part(2));
    let do_src = Source::new(p.dout.as_ptr(), p.t, channels, b, 0, h);
    let sq = aligned_smem_base();
    let sdo = sq + TILE_BYTES;
    let sk = sdo + TILE_BYTES;
    let sv = sk + 2 * TILE_BYTES;
    let (warp, lane) = (warp_idx_x(), lane_id());
    let (g, quad) = (lane / 4, lane % 4);
    let rows = [q0 + warp * 16 + g, q0 + warp * 16 + g + 8];
    let stats_base = ((b * p.nh + h) * p.t) as usize;
    // SAFETY: stats_base is this block's (b, h) row.
    let stats = unsafe { [row_stats(&p, stats_base, rows[0]), row_stats(&p, stats_base, rows[1])] };

    // SAFETY: block-uniform calls; the tiles are inside the launch's shared memory.
    unsafe {
        q_src.load(sq, q0);
        do_src.load(sdo, q0);
        k_src.load(sk, 0);
        v_src.load(sv, 0);
        cp_async_commit_group();
    }

    let kv = StreamPair { first: (&k_src, sk), second: (&v_src, sv) };
    let kv_tiles = q_tile + 1;
    let mut dq = [0.0f32; 32];
    let mut j = 0;
    while j < kv_tiles {
        let next_row = (j + 1 < kv_tiles).then(|| (j + 1) * BLOCK_KV);
        // SAFETY: block-uniform; the previous step waited for all its wgmmas and ended with a
        // barrier.
        let (ks, vs) = unsafe { step(&kv, j % 2, next_row) };

        // S = Q·Kᵀ and dP − D = dO·Vᵀ − D (from accumulators holding −D of their row), two
        // groups.
        let mut s = [0.0f32; 32];
        let mut dp = [0.0f32; 32];
        unroll!(n in 0..8 => {
            unroll!(e in 0..4 => { dp[4 * n + e] = -stats[e / 2].1 });
        });
        hold(&mut dp);
        // SAFETY: warpgroup-uniform; Q and dO arrived with the first group, this stage's K and
        // V with the step.
        unsafe {
            product_t::<Op, false>(&mut s, sq, ks);
            product_t::<Op, true>(&mut dp, sdo, vs);
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
            unroll!(n in 0..8 => {
                unroll!(e in 0..4 => {
                    let col = q_tile * BLOCK_KV + n as u32 * 8 + 2 * quad + (e as u32 & 1);
                    if col > rows[e / 2] {
                        s[4 * n + e] = 0.0;
                    }
                });
            });
        }
        // dS = P ∘ (dP − D), then dQ += dS·K; every group done, and the block past it, before
        // the next step refills this stage.
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
            bar_sync();
        }
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
