//! The fused classifier (see `kernel_abi::classifier` for the contract).
//!
//! One block per row. A row is split into a scalar head (the elements before its first
//! 16-byte aligned address, fewer than 8), a body of whole 8-element vectors, and a scalar tail
//! (fewer than 8): rows of any width `vp` take the vector path for all but at most 14 elements.
//! Thread `t` takes head element `t`, body vectors `t, t + threads, …` and tail element `t`, in
//! both passes, so it rewrites exactly the elements it read. The staged kernel first copies
//! the row's body into shared memory and both passes read its vectors from there: it copies
//! the row in 16-byte units, each warp 512 contiguous bytes at a time, and waits for the
//! block's copies (`cp.async.wait_group`, then a barrier).

use crate::arch::cp_async::{cp_async_cg_16, cp_async_commit_group, cp_async_wait_group};
use crate::arch::cvt::f32_to_tf32;
use crate::arch::math::{ex2_approx_f32, lg2_approx_f32};
use crate::arch::smem::{dynamic_smem_base, ld_shared_f32, ld_shared_v4_u32, st_shared_f32};
use crate::arch::sync::bar_sync;
use crate::arch::{block_dim_x, block_idx_x, lane_id, thread_idx_x, warp_idx_x};
use crate::elem::{Elem, load_chunk, store_chunk};
use crate::entry::entries;
use crate::softmax::{Normaliser, valid_in};
use crate::unroll::unroll;
use core::f32::consts::{LN_2, LOG2_E};
use core::f32::math::mul_add;
use kernel_abi::classifier::{ClassifierParams, GRAD_SKIP, GRAD_WRITE_TF32, NORMALISER_BYTES};
use kernel_abi::{Bf16, F16};

/// The block's combined normaliser, the same in every thread: butterfly within each warp, then
/// every thread merges the warps' results in warp order.
///
/// # Safety
/// Block-uniform call site; dynamic shared memory holds 8 bytes per warp.
#[inline(always)]
unsafe fn block_normaliser(n: Normaliser) -> Normaliser {
    // SAFETY: the whole block, so every warp, is converged here (caller's contract).
    let n = unsafe { n.warp_merge() };
    let base = dynamic_smem_base();
    // SAFETY: 8 bytes per warp of shared memory; one writer per slot; the barriers order the
    // writes before the reads and the reads before any later reuse.
    unsafe {
        if lane_id() == 0 {
            st_shared_f32(base + warp_idx_x() * 8, n.max);
            st_shared_f32(base + warp_idx_x() * 8 + 4, n.sum);
        }
        bar_sync();
        let mut all = Normaliser::EMPTY;
        for w in 0..block_dim_x() / 32 {
            all = all.merge(Normaliser {
                max: ld_shared_f32(base + w * 8),
                sum: ld_shared_f32(base + w * 8 + 4),
            });
        }
        all
    }
}

/// The row's layout: `head` scalar elements, `body` 8-element vectors, then the tail up to `vp`.
struct RowSplit {
    head: usize,
    body: usize,
}

impl RowSplit {
    #[inline(always)]
    fn of<T>(row: *const T, vp: usize) -> Self {
        let misalignment = row as usize % 16;
        let head = if misalignment == 0 { 0 } else { (16 - misalignment) / size_of::<T>() };
        let head = if head > vp { vp } else { head };
        Self { head, body: (vp - head) / 8 }
    }

    /// Calls `chunk(col0, count, vector)` for this thread's pieces of the row: its head and
    /// tail element (`count` 1, scalar) and its body vectors (`count` 8, 16-byte aligned), from
    /// the row's start to its end.
    #[inline(always)]
    fn for_each(&self, vp: usize, mut chunk: impl FnMut(usize, usize, bool)) {
        let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
        if tid < self.head {
            chunk(tid, 1, false);
        }
        let mut j = tid;
        while j < self.body {
            chunk(self.head + 8 * j, 8, true);
            j += threads;
        }
        let tail = self.head + 8 * self.body + tid;
        if tail < vp {
            chunk(tail, 1, false);
        }
    }

    /// The same pieces as [`RowSplit::for_each`], from the row's end to its start: the second
    /// pass first re-reads what the first read last, the part of the row most likely still in
    /// L2 (a block's 100 KB row of GPT-2's vocabulary, times the blocks resident on 132 SMs,
    /// is about the size of an H100's L2).
    #[inline(always)]
    fn for_each_reversed(&self, vp: usize, mut chunk: impl FnMut(usize, usize, bool)) {
        let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
        let tail = self.head + 8 * self.body + tid;
        if tail < vp {
            chunk(tail, 1, false);
        }
        if tid < self.body {
            // This thread's last vector (adding instead of dividing: device code has no
            // panicking division).
            let mut j = tid;
            while j + threads < self.body {
                j += threads;
            }
            loop {
                chunk(self.head + 8 * j, 8, true);
                if j < threads {
                    break;
                }
                j -= threads;
            }
        }
        if tid < self.head {
            chunk(tid, 1, false);
        }
    }

    /// The shared-memory slot of body vector `j` under `stage`: its first 16 bytes at
    /// `stage + 16j`; an f32 vector's other 16 in a second plane, at `stage + p + 16j` where
    /// `p` is `16·body` rounded up to 128 bytes, plus 64 (a gap of at most
    /// `kernel_abi::classifier::STAGED_F32_PLANE_GAP`).
    /// A warp's 16-byte reads of 32 consecutive vectors' halves are then 512 contiguous bytes
    /// (with the halves side by side, each read took two wavefronts), and the copies, whose
    /// quarter-warps write 64 bytes to each plane, fall in different banks (without the 64,
    /// two wavefronts each).
    #[inline(always)]
    fn slot(&self, stage: u32, j: usize) -> (u32, u32) {
        let first = stage + 16 * j as u32;
        let plane = ((16 * self.body as u32).next_multiple_of(128)) + 64;
        (first, first + plane)
    }

    /// Copies the row's body to shared memory from `stage` with `cp.async`, in 16-byte units
    /// (unit `u`: bytes `16u .. 16u + 16` of the body, half `u % halves` of vector
    /// `u / halves`, to that half's [`RowSplit::slot`]): thread `t` copies units `t, t +
    /// threads, …`, all in flight at once, so that a warp's copies read 512 contiguous bytes.
    /// The block then waits for all of them: a 16-bit vector is one unit, copied by the thread
    /// that reads it, but an f32 vector's second half is copied by the next thread.
    ///
    /// # Safety
    /// `row` is the row [`RowSplit::of`] split, `stage` 16-byte aligned with the slots of its
    /// `body` vectors ([`RowSplit::slot`]; `staged_shared_bytes` covers them) in shared memory
    /// that nothing else in the block touches; block-uniform call site.
    #[inline(always)]
    unsafe fn stage_body<T>(&self, row: *const T, stage: u32) {
        let halves = size_of::<T>() / 2;
        let (tid, threads) = (thread_idx_x() as usize, block_dim_x() as usize);
        let body = row.wrapping_add(self.head).cast::<u8>();
        let mut u = tid;
        while u < halves * self.body {
            let (first, second) = self.slot(stage, u / halves);
            let dst = if u % halves == 0 { first } else { second };
            // SAFETY: the unit's 16 bytes lie inside the row and are 16-byte aligned (the body
            // starts at the row's first aligned element); the destination is its half's slot.
            unsafe { cp_async_cg_16(dst, body.wrapping_add(16 * u), 16) };
            u += threads;
        }
        // SAFETY: commits and waits for this thread's copies; the barrier (block-uniform) makes
        // every thread's visible to the block.
        unsafe {
            cp_async_commit_group();
            cp_async_wait_group::<0>();
            bar_sync();
        }
    }

    /// The elements of this thread's piece `(col0, count, vector)` as f32: a body vector from
    /// its shared-memory slot under `stage` (staged), anything else from global memory.
    ///
    /// # Safety
    /// As [`load_chunk`] for `row.add(col0)`; staged vectors after [`RowSplit::stage_body`].
    #[inline(always)]
    unsafe fn load<T: Elem>(
        &self,
        row: *const T,
        stage: Option<u32>,
        piece: (usize, usize, bool),
    ) -> [f32; 8] {
        let (col0, count, vector) = piece;
        match stage {
            Some(stage) if vector => {
                let (first, second) = self.slot(stage, (col0 - self.head) / 8);
                let mut words = [0u32; 8];
                // SAFETY: a staged vector, waited for by the whole block.
                unsafe {
                    let lo = ld_shared_v4_u32(first);
                    unroll!(k in 0..4 => { words[k] = lo[k]; });
                    if size_of::<T>() == 4 {
                        let hi = ld_shared_v4_u32(second);
                        unroll!(k in 0..4 => { words[4 + k] = hi[k]; });
                    }
                }
                T::widen8(words)
            }
            // SAFETY: the caller's contract.
            _ => unsafe { load_chunk(row.add(col0), count, vector) },
        }
    }
}

/// The kernel body; `STAGED`: the row's body read from DRAM once, into shared memory.
///
/// # Safety
/// Launched by `gpu-host`'s `fused_classifier` with one block of `BLOCK_THREADS` per row and
/// `NORMALISER_BYTES` of dynamic shared memory (staged: `staged_shared_bytes(vp, size of T)`),
/// after checking `0 < v <= vp <= ld`, that `logits` holds `rows × ld` elements and `losses` and
/// `targets` `rows` (targets are not checked: the body guards `target < v`); every thread
/// reaches [`block_normaliser`] (block-uniform flow).
#[inline(always)]
unsafe fn fused_classifier<T: Elem, const STAGED: bool>(p: ClassifierParams<T>) {
    let row = block_idx_x() as usize;
    let (v, vp, ld) = (p.v as usize, p.vp as usize, p.ld as usize);
    // SAFETY: the launcher checked `logits` holds `rows × ld` elements and `targets` `rows`,
    // and the grid has `rows` blocks.
    let (logits, target) =
        unsafe { (p.logits.as_mut_ptr().add(row * ld), *p.targets.as_ptr().add(row) as usize) };
    // Read before the barrier in `block_normaliser`, so before any thread overwrites it.
    let target_logit = if thread_idx_x() == 0 && target < v {
        // SAFETY: target < v <= vp, inside this row.
        unsafe { (*logits.add(target)).to_f32() }
    } else {
        0.0
    };
    let split = RowSplit::of(logits, vp);
    let stage = STAGED.then(|| dynamic_smem_base() + NORMALISER_BYTES);
    if let Some(stage) = stage {
        // SAFETY: the launcher gave `staged_shared_bytes(vp, …)`: a slot for each of the row's
        // at most `vp / 8` body vectors after the normaliser's bytes; `STAGED` is the kernel's.
        unsafe { split.stage_body(logits, stage) };
    }

    // Logits scaled to base-2 exponents: `2^(x·log2 e − m)` is `e^(x − m / log2 e)`, the
    // exponent one `fma` in both passes.
    let mut n = Normaliser::EMPTY;
    // SAFETY: `col0 + count <= vp`, 16-byte aligned when `vector`; the row is staged.
    split.for_each(vp, |col0, count, vector| unsafe {
        let x = split.load(logits, stage, (col0, count, vector));
        // A body vector below V (all but the row's last few): a count the compiler knows, no
        // per-element checks (12 → 9 instructions an element in the bf16 SASS).
        if vector && col0 + 8 <= v {
            n.add_scaled(x, 8, LOG2_E);
        } else {
            n.add_scaled(x, valid_in(col0, count, v), LOG2_E);
        }
    });
    // SAFETY: block-uniform; the launcher gave 8 bytes of shared memory per warp.
    let n = unsafe { block_normaliser(n) };
    if thread_idx_x() == 0 {
        let loss = if target < v {
            (lg2_approx_f32(n.sum) + n.max) * LN_2 - target_logit
        } else {
            f32::NAN
        };
        // SAFETY: row < rows.
        unsafe { *p.losses.as_mut_ptr().add(row) = loss };
    }
    if p.write_grad == GRAD_SKIP {
        return;
    }
    let scale = p.dloss / n.sum;
    let tf32 = p.write_grad == GRAD_WRITE_TF32;
    // `dloss` times the probability of logit `x`.
    let scaled_prob = |x: f32| ex2_approx_f32(mul_add(x, LOG2_E, -n.max)) * scale;
    let grad = |col: usize, x: f32| -> f32 {
        let g = if col >= v {
            0.0
        } else if col == target {
            scaled_prob(x) - p.dloss
        } else {
            scaled_prob(x)
        };
        if tf32 { f32::from_bits(f32_to_tf32(g)) } else { g }
    };
    // SAFETY: as above; each element is read and then written by the thread that owns it.
    let mut write = |col0: usize, count: usize, vector: bool| unsafe {
        let x = split.load(logits, stage, (col0, count, vector));
        // A body vector below V without the target, and no TF32 rounding (nearly every
        // vector): `grad`'s arithmetic without its per-element branches (25 → 9 instructions
        // an element in the bf16 SASS), which had made the kernel issue-bound: 84% of the
        // H100's issue slots busy at 61% of its DRAM bandwidth (Nsight Compute, 2026-11-27).
        let plain = vector && col0 + 8 <= v && (target < col0 || target >= col0 + 8) && !tf32;
        if plain {
            let mut g = [0.0f32; 8];
            unroll!(k in 0..8 => {
                g[k] = scaled_prob(x[k]);
            });
            T::store8(logits.add(col0), g);
        } else {
            let g = core::array::from_fn(|k| grad(col0 + k, x[k]));
            store_chunk(logits.add(col0), g, count, vector);
        }
    };
    if STAGED {
        split.for_each(vp, &mut write);
    } else {
        split.for_each_reversed(vp, &mut write);
    }
}

entries! { "classifier";
    fused_classifier_f32(ClassifierParams<f32>) => fused_classifier::<f32, false>;
    fused_classifier_bf16(ClassifierParams<Bf16>) => fused_classifier::<Bf16, false>;
    fused_classifier_f16(ClassifierParams<F16>) => fused_classifier::<F16, false>;
    fused_classifier_staged_f32(ClassifierParams<f32>) => fused_classifier::<f32, true>;
    fused_classifier_staged_bf16(ClassifierParams<Bf16>) => fused_classifier::<Bf16, true>;
    fused_classifier_staged_f16(ClassifierParams<F16>) => fused_classifier::<F16, true>;
}
