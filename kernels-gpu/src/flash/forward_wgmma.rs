//! Flash attention forward on Hopper: the kernel of [`super::forward`] with its two products on
//! `wgmma` (sm_90a module only; the building blocks are in [`super::wgmma`]).
//!
//! Per key/value tile: `S = Q·Kᵀ` with both operands K-major in shared memory (Q resident,
//! read by the warpgroup once per tile instead of once per warp through `ldmatrix`), the
//! online softmax of the `mma.sync` kernel on the accumulators (the same lanes own the same
//! rows and columns), then `O += P·V` with `P` as the register A operand and V M/N-major. `O`
//! is rescaled by the softmax between the two products, so the kernel waits for each product
//! before the next step; three or four blocks per SM overlap one block's softmax with
//! another's products.

use super::wgmma::{
    StageRing, WgmmaFlashOp, aligned_smem_base, flat_of, issue_ahead, product_acc, product_t,
    tiles_of,
};
use super::{ForwardBlock, RowState, online_softmax, store_output};
use crate::arch::wgmma::{self, hold, hold_words};
use crate::entry::entries;
use crate::gemm::tensor_op::{Bf16Op, F16Op};
use kernel_abi::flash::{BLOCK_KV, FlashForwardParams};

/// The forward of one query tile on wgmma (see the module doc and [`super::forward`]).
///
/// # Safety
/// As the `mma.sync` forward, launched with `FORWARD_WGMMA_SHARED_BYTES` of dynamic shared
/// memory and `WGMMA_THREADS` threads; sm_90a.
#[inline(always)]
unsafe fn forward<Op: WgmmaFlashOp>(p: FlashForwardParams<Op::In>) {
    // SAFETY: every thread, at the start; the aligned base leaves room for the five tiles.
    let block = unsafe { ForwardBlock::start(&p, aligned_smem_base()) };
    let (q_tile, sq) = (block.q_tile, block.sq);
    let kv = block.kv();
    let kv_tiles = q_tile + 1;
    let mut o = [0.0f32; 32];
    let mut state = RowState::new();
    let mut ring = StageRing::<2>::new();
    let mut j = 0;
    while j < kv_tiles {
        let next_row = (j + 1 < kv_tiles).then(|| (j + 1) * BLOCK_KV);
        // SAFETY: block-uniform, every step; one group per tile (the first with Q).
        let (ks, vs) = unsafe { ring.land(&kv) };

        let mut s = [0.0f32; 32];
        // SAFETY: warpgroup-uniform; Q arrived with the first group, this stage's K has landed;
        // every thread waited for the previous step's wgmmas before this step's `land`
        // barrier, so the other stage is free for the next tile.
        unsafe {
            product_t::<Op, false>(&mut s, sq, ks);
            issue_ahead(&kv, ring.ahead(), next_row);
            wgmma::wait_group::<0>();
            hold(&mut s);
        }
        let (mut s8, mut o8) = (tiles_of(&s), tiles_of(&o));
        // SAFETY: all lanes are here (the loop bounds are block-uniform).
        unsafe { online_softmax(&mut s8, &mut o8, &mut state, j == q_tile, p.scale_log2) };
        (s, o) = (flat_of(&s8), flat_of(&o8));

        // O += P·V; the group done before the next step's `land`, whose barrier frees this
        // stage for the step after it to refill.
        // SAFETY: warpgroup-uniform; this stage's V is visible; the fragments stay alive until
        // the wait.
        unsafe {
            let p_frags = product_acc::<Op>(&mut o, &s, vs);
            wgmma::wait_group::<0>();
            hold_words(&p_frags);
            hold(&mut o);
        }
        ring = ring.next();
        j += 1;
    }

    // SAFETY: all lanes are here; `rows` are this lane's rows of the warp's 16.
    unsafe { store_output::<Op>(&p, &tiles_of(&o), &state, block.rows) };
}

entries! { "flash";
    flash_attention_forward_wgmma_bf16(FlashForwardParams<kernel_abi::Bf16>) => forward::<Bf16Op>;
    flash_attention_forward_wgmma_f16(FlashForwardParams<kernel_abi::F16>) => forward::<F16Op>;
}
