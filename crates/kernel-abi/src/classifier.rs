//! The fused classifier: per row of logits, the softmax over the `v` real columns of a
//! `vp`-wide row (`vp ≥ v`; columns `v..vp` are the padding that makes the vocabulary
//! GEMM-friendly), the f32 cross-entropy loss, and the gradient of the loss with respect to the
//! logits written in place of the logits.
//!
//! One block per row. The first pass over the row keeps a running (max, Σ exp) per thread
//! (online softmax, `ex2.approx` with log2(e) folded in), combined across the block; the loss is
//! `ln Σ exp(x − max) + max − x[target]`; the second pass writes
//! `dloss · (exp(x − max) / Σ − [col == target])` in columns `..v` and 0 in `v..vp`. Both
//! passes use 16-byte accesses on the row's 16-byte aligned middle whatever `vp` is (each row
//! has a scalar head up to its first aligned element and a scalar tail), so `vp = 50257` and
//! `vp = 50304` both take the fast path. Rows start `ld ≥ vp` elements apart; columns `vp..ld`
//! are never touched (the trainer pads the row stride to 16 bytes, so that the GEMMs reading
//! the gradient get aligned rows whatever `vp` is). With `write_grad == GRAD_SKIP` the logits are
//! only read (evaluation); with `GRAD_WRITE_TF32` each gradient is rounded to TF32 as it is
//! stored (f32 logits: the operand a TF32 GEMM on `wgmma`, which truncates its operands, can read
//! as it is). A target `≥ v` (which the launcher's checked token type rules out) gives a NaN loss
//! and no out-of-row access.
//!
//! Two kernels per type compute the same bits. `fused_classifier_<ty>` reads the row from
//! global memory in both passes, the second walking it backwards so that it re-reads first what
//! the first read last (the part most likely still in L2). `fused_classifier_staged_<ty>` reads
//! it from DRAM once: the block copies the row's body into shared memory with `cp.async` in
//! 16-byte units (a warp 512 contiguous bytes at a time, every thread's units in flight at
//! once), waits for all of them, and both passes read the vectors from there (the scalar head
//! and tail, at most 14 elements, from global memory); a row of GPT-2's padded vocabulary
//! takes [`staged_shared_bytes`] = 100,736 bytes in bf16 (two blocks per SM on an H100) and
//! 201,520 in f32 (one). Both take a thread's body vectors in the same order in the first
//! pass, so the normaliser, the losses and the gradients are the same bits.

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// Threads per block (one block per row).
pub const BLOCK_THREADS: u32 = 512;

/// Dynamic shared memory both kernels use to combine the warps' normalisers (8 bytes per
/// warp); the staged kernel's row follows it.
pub const NORMALISER_BYTES: u32 = BLOCK_THREADS / 32 * 8;

/// Most bytes between the end of the staged kernel's first plane of an f32 row and its second
/// plane: the second starts at the first's end rounded up to 128 bytes, plus 64, so that a
/// quarter-warp's copies into the two planes fall in different banks.
pub const STAGED_F32_PLANE_GAP: u32 = 112 + 64;

/// Dynamic shared memory of `fused_classifier_staged_<ty>` for rows of `vp` elements of
/// `elem_bytes` bytes: [`NORMALISER_BYTES`], then the row's body, at most `vp / 8` vectors of 8
/// elements, 16 bytes of each (all of a 16-bit vector) in one plane and f32's other 16 in a
/// second plane after it ([`STAGED_F32_PLANE_GAP`]), so that a warp's accesses to consecutive
/// vectors are contiguous.
pub const fn staged_shared_bytes(vp: u32, elem_bytes: u32) -> u64 {
    let gap = if elem_bytes == 4 { STAGED_F32_PLANE_GAP } else { 0 };
    NORMALISER_BYTES as u64 + (vp / 8) as u64 * 8 * elem_bytes as u64 + gap as u64
}

/// `write_grad`: losses only, the logits left as they are.
pub const GRAD_SKIP: u32 = 0;
/// `write_grad`: the gradient written in place of the logits.
pub const GRAD_WRITE: u32 = 1;
/// `write_grad`: the gradient written in place of the logits, each value rounded to TF32 (to
/// nearest, ties away from zero: `cvt.rna.tf32.f32`, as the `mma.sync` TF32 GEMMs round their
/// operands). For f32 logits.
pub const GRAD_WRITE_TF32: u32 = 2;

/// Parameters of the fused classifier.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct ClassifierParams<T: Copy> {
    /// `rows` rows of `vp` logits, `ld` elements apart, overwritten with their gradient unless
    /// `write_grad == GRAD_SKIP`.
    pub logits: DevicePtrMut<T>,
    /// `rows` losses, written.
    pub losses: DevicePtrMut<f32>,
    /// `rows` target token ids, each `< v`.
    pub targets: DevicePtr<u32>,
    /// Number of rows.
    pub rows: u32,
    /// Real vocabulary size.
    pub v: u32,
    /// Padded row length (`≥ v`).
    pub vp: u32,
    /// Gradient of the reduced loss with respect to each row's loss (e.g. `1 / rows`).
    pub dloss: f32,
    /// [`GRAD_SKIP`], [`GRAD_WRITE`] or [`GRAD_WRITE_TF32`].
    pub write_grad: u32,
    /// Elements between the starts of consecutive rows (`≥ vp`).
    pub ld: u32,
}

// SAFETY: #[repr(C)] struct of device pointers, u32s and an f32, a multiple of 8 bytes (no
// implicit padding).
unsafe impl<T: Copy + 'static> KernelParams for ClassifierParams<T> {}

/// The classifier kernels of one storage type.
pub trait ClassifierKernels: Copy + 'static {
    /// `fused_classifier_<ty>`: both passes read the row from global memory.
    const FUSED: Kernel<ClassifierParams<Self>>;
    /// `fused_classifier_staged_<ty>`: the row read once, into shared memory.
    const FUSED_STAGED: Kernel<ClassifierParams<Self>>;
}

/// `fused_classifier_f32`.
pub const FUSED_CLASSIFIER_F32: Kernel<ClassifierParams<f32>> = Kernel::new("fused_classifier_f32");
/// `fused_classifier_bf16`.
pub const FUSED_CLASSIFIER_BF16: Kernel<ClassifierParams<Bf16>> =
    Kernel::new("fused_classifier_bf16");
/// `fused_classifier_f16`.
pub const FUSED_CLASSIFIER_F16: Kernel<ClassifierParams<F16>> = Kernel::new("fused_classifier_f16");

/// `fused_classifier_staged_f32`.
pub const FUSED_CLASSIFIER_STAGED_F32: Kernel<ClassifierParams<f32>> =
    Kernel::new("fused_classifier_staged_f32");
/// `fused_classifier_staged_bf16`.
pub const FUSED_CLASSIFIER_STAGED_BF16: Kernel<ClassifierParams<Bf16>> =
    Kernel::new("fused_classifier_staged_bf16");
/// `fused_classifier_staged_f16`.
pub const FUSED_CLASSIFIER_STAGED_F16: Kernel<ClassifierParams<F16>> =
    Kernel::new("fused_classifier_staged_f16");

impl ClassifierKernels for f32 {
    const FUSED: Kernel<ClassifierParams<Self>> = FUSED_CLASSIFIER_F32;
    const FUSED_STAGED: Kernel<ClassifierParams<Self>> = FUSED_CLASSIFIER_STAGED_F32;
}
impl ClassifierKernels for Bf16 {
    const FUSED: Kernel<ClassifierParams<Self>> = FUSED_CLASSIFIER_BF16;
    const FUSED_STAGED: Kernel<ClassifierParams<Self>> = FUSED_CLASSIFIER_STAGED_BF16;
}
impl ClassifierKernels for F16 {
    const FUSED: Kernel<ClassifierParams<Self>> = FUSED_CLASSIFIER_F16;
    const FUSED_STAGED: Kernel<ClassifierParams<Self>> = FUSED_CLASSIFIER_STAGED_F16;
}

/// Every classifier entry point.
pub const KERNELS: &[KernelSig] = &[
    FUSED_CLASSIFIER_F32.sig(),
    FUSED_CLASSIFIER_BF16.sig(),
    FUSED_CLASSIFIER_F16.sig(),
    FUSED_CLASSIFIER_STAGED_F32.sig(),
    FUSED_CLASSIFIER_STAGED_BF16.sig(),
    FUSED_CLASSIFIER_STAGED_F16.sig(),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpt2_row_staged_fits_an_h100_twice_in_bf16_and_once_in_f32() {
        assert_eq!(staged_shared_bytes(50304, 2), 100_736);
        assert_eq!(staged_shared_bytes(50304, 4), 201_520);
        // 228 KB of shared memory per SM, 1 KB of it reserved per block, 227 KB per block.
        assert!(2 * (staged_shared_bytes(50304, 2) + 1024) <= 228 * 1024);
        assert!(staged_shared_bytes(50304, 4) <= 227 * 1024);
        // A vector's bytes: 16 for the 16-bit types, 32 for f32; the body starts aligned.
        assert_eq!(staged_shared_bytes(8, 2) - staged_shared_bytes(7, 2), 16);
        assert_eq!(NORMALISER_BYTES % 16, 0);
    }
}
