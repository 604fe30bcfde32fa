//! The three tensor-core instructions the `mma.sync` GEMM is instantiated with.

use crate::arch::{cvt, mma};
use crate::elem::Elem;
use kernel_abi::{Bf16, F16};

/// One `mma.sync` flavour: its input element and how a warp multiplies one 16×8 tile.
pub trait TensorOp {
    /// Element type of A and B in memory.
    type In: Elem;
    /// K of one instruction (16 for 16-bit inputs, 8 for TF32).
    const K: u32;

    /// Turns a 32-bit fragment register as loaded from shared memory into the instruction's
    /// operand format (TF32: round the f32 to nearest, ties away; 16-bit: unchanged).
    fn prepare(word: u32) -> u32;

    /// `d = a · b + c` on one 16×8 tile.
    ///
    /// # Safety
    /// All 32 lanes of the warp execute it together. Minimum sm_80.
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4];

    /// 16 bytes of the matrix at `p`, of which the first `valid` elements are read and the rest
    /// are zero, as 4 little-endian words (the shared-memory image of one chunk).
    ///
    /// # Safety
    /// `p` must have `valid` readable elements (`valid` ≤ 16 bytes' worth).
    unsafe fn load_chunk(p: *const Self::In, valid: u32) -> [u32; 4];
}

/// `mma.sync.m16n8k16` with bf16 inputs.
pub struct Bf16Op;
/// `mma.sync.m16n8k16` with f16 inputs.
pub struct F16Op;
/// `mma.sync.m16n8k8` with TF32 inputs (f32 in memory).
pub struct Tf32Op;

/// 8 16-bit elements (`valid` of them read) packed as 4 words.
///
/// # Safety
/// `p` must have `valid` readable elements, as [`TensorOp::load_chunk`] requires.
#[inline(always)]
unsafe fn load_chunk_16(p: *const u16, valid: u32) -> [u32; 4] {
    // SAFETY: only the first `valid` elements are read (the caller's contract).
    let elem = |e: u32| if e < valid { unsafe { *p.add(e as usize) as u32 } } else { 0 };
    core::array::from_fn(|w| elem(2 * w as u32) | elem(2 * w as u32 + 1) << 16)
}

impl TensorOp for Bf16Op {
    type In = Bf16;
    const K: u32 = 16;
    #[inline(always)]
    fn prepare(word: u32) -> u32 {
        word
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded convergence contract.
        unsafe { mma::mma_m16n8k16_bf16(a, b, c) }
    }
    #[inline(always)]
    unsafe fn load_chunk(p: *const Bf16, valid: u32) -> [u32; 4] {
        // SAFETY: forwarded contract; Bf16 is a transparent u16.
        unsafe { load_chunk_16(p.cast(), valid) }
    }
}

impl TensorOp for F16Op {
    type In = F16;
    const K: u32 = 16;
    #[inline(always)]
    fn prepare(word: u32) -> u32 {
        word
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded convergence contract.
        unsafe { mma::mma_m16n8k16_f16(a, b, c) }
    }
    #[inline(always)]
    unsafe fn load_chunk(p: *const F16, valid: u32) -> [u32; 4] {
        // SAFETY: forwarded contract; F16 is a transparent u16.
        unsafe { load_chunk_16(p.cast(), valid) }
    }
}

impl TensorOp for Tf32Op {
    type In = f32;
    const K: u32 = 8;
    #[inline(always)]
    fn prepare(word: u32) -> u32 {
        cvt::f32_to_tf32(f32::from_bits(word))
    }
    #[inline(always)]
    unsafe fn mma(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
        // SAFETY: forwarded convergence contract.
        unsafe { mma::mma_m16n8k8_tf32(a, b, c) }
    }
    #[inline(always)]
    unsafe fn load_chunk(p: *const f32, valid: u32) -> [u32; 4] {
        core::array::from_fn(|e| {
            if (e as u32) < valid {
                // SAFETY: element e < valid is readable (the caller's contract).
                unsafe { (*p.add(e)).to_bits() }
            } else {
                0
            }
        })
    }
}
