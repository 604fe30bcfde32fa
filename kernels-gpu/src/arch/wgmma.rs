//! Warpgroup matrix multiply-accumulate (`wgmma.mma_async`, sm_90a), f32 accumulators.
//!
//! A *warpgroup* is 4 consecutive warps (128 threads, the first warp's index a multiple of 4).
//! `wgmma.mma_async` multiplies an m64×k tile of A by a k×n tile of B, both read from shared
//! memory through 64-bit *matrix descriptors* ([`desc_k_major_sw128`]), into the warpgroup's
//! registers: `D = A·B + D` (or `D = A·B` when `scale_d` is false). For m64n128 with f32
//! accumulators each thread holds 64 of them; thread `t` (warp `w = t / 32` of the group,
//! lane `l`, `g = l / 4`, `q = l % 4`) holds in register `i` row `16w + g + 8·((i / 2) % 2)`,
//! column `8·(i / 4) + 2q + i % 2`: registers `4j .. 4j + 4` are the `mma.sync` m16n8 C
//! fragment of n8 tile `j` of the warp's 16 rows.
//!
//! The instructions are asynchronous: a sequence is
//! [`fence`] (orders earlier register and shared-memory accesses before the wgmma reads them)
//! → `mma_*` … → [`commit_group`] (closes a group of this thread's wgmmas) →
//! [`wait_group`]`::<N>` (waits until at most N groups are pending). The accumulator
//! registers of a pending wgmma must not be read or written, and its shared-memory operands
//! must not be overwritten, until a `wait_group` covers it. All of them are `.sync.aligned`:
//! every thread of the warpgroup executes the same call site, converged.

use crate::unroll::unroll;
use core::arch::asm;

/// The descriptor of a K-major operand tile at shared address `addr` in the 128-byte swizzle
/// (rows of 128 bytes, 8-row groups 1024 bytes apart): start address `(addr & 0x3FFFF) >> 4`
/// (bits 0–13), leading byte offset 1 (bits 16–29, unused by swizzled K-major layouts),
/// stride byte offset 1024 >> 4 (bits 32–45), base offset 0 (bits 49–51: the swizzle pattern
/// is anchored at a 1024-aligned address) and swizzle mode 1 = 128B (bits 62–63).
///
/// For a tile at a 1024-aligned address `T`, the k-step `kk` of 32 bytes of K (one wgmma)
/// starts at `T + 32·kk` (the swizzle is applied to the full address, so the in-row offset
/// just moves the start), and row `r` (a multiple of 8) at `T + 128·r`.
#[inline(always)]
pub const fn desc_k_major_sw128(addr: u32) -> u64 {
    ((addr & 0x3_FFFF) >> 4) as u64 | 1 << 16 | (1024 >> 4) << 32 | 1 << 62
}

/// The descriptor of an M/N-major operand tile at shared address `addr` in the 128-byte
/// swizzle: atoms of 8 rows of K × 128 bytes (64 16-bit elements of M or N), K-adjacent atoms
/// 1024 bytes apart (stride byte offset, bits 32–45), M/N-adjacent atoms `mn_atom_stride`
/// bytes apart (leading byte offset, bits 16–29); start address, base offset and swizzle mode
/// as [`desc_k_major_sw128`]. These are the PTX ISA's canonical MN-major layout
/// `Swizzle<3,4,3> ∘ ((T,8,m),(8,k)):((1,T,LBO),(8T,SBO))` with T = 8 elements.
///
/// For a tile at a 1024-aligned address `T` holding rows of K of 128 bytes, the k-step `kk` of
/// 16 rows of K (one 16-bit wgmma) starts at `T + 2048·kk`.
#[inline(always)]
pub const fn desc_mn_major_sw128(addr: u32, mn_atom_stride: u32) -> u64 {
    ((addr & 0x3_FFFF) >> 4) as u64
        | ((mn_atom_stride as u64 >> 4) & 0x3FFF) << 16
        | (1024 >> 4) << 32
        | 1 << 62
}

/// `wgmma.fence.sync.aligned`: orders this thread's prior accesses to the accumulator
/// registers and to shared memory before the following `wgmma.mma_async` (required before
/// the first wgmma of a sequence and whenever the accumulators were touched in between).
///
/// # Safety
/// Every thread of the warpgroup executes this call site, converged. Minimum sm_90a.
#[inline(always)]
pub unsafe fn fence() {
    // SAFETY: convergence is the caller's contract; a compiler memory barrier too.
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack, preserves_flags)) }
}

/// `wgmma.commit_group.sync.aligned`: closes the group of this thread's `wgmma.mma_async`
/// issued since the last commit (an empty group if none).
///
/// # Safety
/// As [`fence`]. Minimum sm_90a.
#[inline(always)]
pub unsafe fn commit_group() {
    // SAFETY: convergence is the caller's contract.
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack, preserves_flags)) }
}

/// `wgmma.wait_group.sync.aligned N`: waits until at most `N` of this thread's committed
/// wgmma groups are pending; the accumulators and shared-memory operands of the others are
/// then free.
///
/// # Safety
/// As [`fence`]. Minimum sm_90a.
#[inline(always)]
pub unsafe fn wait_group<const N: u32>() {
    // SAFETY: convergence is the caller's contract; not `nomem`, so the compiler keeps
    // memory accesses (and the accumulators' later uses, which are asm operands) after it.
    unsafe {
        asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack, preserves_flags))
    }
}

/// Pins the 32 accumulators of an m64n64 wgmma at this point of the program: an empty `asm!`
/// that reads and may rewrite each register, so the compiler moves no use of their values above
/// it (CUTLASS's `warpgroup_fence_operand`). Placed right after the [`wait_group`] that
/// completes the wgmmas writing them, it keeps their reads after the wait. Emits no instruction.
#[inline(always)]
pub fn hold(regs: &mut [f32; 32]) {
    unroll!(i in 0..16 => {
        // SAFETY: an empty instruction string (a PTX comment); the registers pass unchanged.
        unsafe {
            asm!("/* {0} {1} */", inout(reg32) regs[i], inout(reg32) regs[i + 16],
                options(nomem, nostack, preserves_flags))
        };
    });
}

/// [`hold`] for the register A fragments of 4 k-steps: their values stay alive up to this
/// point, after the [`wait_group`] that completes the wgmmas reading them.
#[inline(always)]
pub fn hold_words(frags: &[[u32; 4]; 4]) {
    unroll!(k in 0..4 => {
        let f = frags[k];
        // SAFETY: an empty instruction string (a PTX comment) reading the registers.
        unsafe {
            asm!("/* {0} {1} {2} {3} */", in(reg32) f[0], in(reg32) f[1], in(reg32) f[2],
                in(reg32) f[3], options(nomem, nostack, preserves_flags))
        };
    });
}

/// One m64nN wgmma: `acc` (N / 2 f32 per thread) in and out as tied registers, `scale_d`
/// turned into the instruction's predicate inside a scope of its own. The 16-bit forms take
/// the operands' majorness as const generics (the instruction's `imm-trans-a/b`). `$acc` is
/// the accumulator count and `[$i]` the register indices after 0.
macro_rules! wgmma_mma {
    ($(#[$doc:meta])* $name:ident, $instr:literal, transposable, $acc:literal, $idx:tt) => {
        wgmma_mma!(@fn $(#[$doc])* $name, $instr, ", 1, 1, {ta}, {tb}", $acc, $idx,
            [const TRANS_A: bool, const TRANS_B: bool],
            ta = const TRANS_A as u32, tb = const TRANS_B as u32);
    };
    ($(#[$doc:meta])* $name:ident, $instr:literal, k_major, $acc:literal, $idx:tt) => {
        wgmma_mma!(@fn $(#[$doc])* $name, $instr, ", 1, 1", $acc, $idx, []);
    };
    (@fn $(#[$doc:meta])* $name:ident, $instr:literal, $tail:literal, $acc:literal, $idx:tt,
     [$($generics:tt)*] $(, $op:ident = const $val:expr)*) => {
        $(#[$doc])*
        ///
        /// `desc_a`: the warpgroup's 64 rows of A, `desc_b`: the N rows (n) of B
        /// ([`desc_k_major_sw128`], or [`desc_mn_major_sw128`] for an operand whose `TRANS_*`
        /// is true). `scale_d` false: `acc = A·B` (the incoming values are ignored); true:
        /// `acc = A·B + acc`. Register `i` of thread `t` is the element the module docs give
        /// for m64n128, continued: registers `4j .. 4j + 4` are n8 tile `j`.
        ///
        /// # Safety
        /// Every thread of the warpgroup executes this call site, converged, after a [`fence`]
        /// that follows any other access to `acc`; the descriptors describe shared memory
        /// that holds the operands and is not written until a [`wait_group`] covers this
        /// wgmma, after which alone `acc` may be read. Minimum sm_90a.
        #[inline(always)]
        pub unsafe fn $name<$($generics)*>(
            acc: &mut [f32; $acc],
            desc_a: u64,
            desc_b: u64,
            scale_d: bool,
        ) {
            // SAFETY: convergence, operand validity and the asynchronous register rules are
            // the caller's contract.
            unsafe {
                wgmma_mma!(@asm $instr, $tail, acc, desc_a, desc_b, scale_d, $idx
                    $(, $op = const $val)*)
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, $instr:literal, register_a, $acc:literal, $idx:tt) => {
        $(#[$doc])*
        ///
        /// `a`: this thread's 4 registers of the warpgroup's 64 × 16 A tile (each warp's 16
        /// rows in the `mma.sync` m16n8k16 A fragment layout), `desc_b`: the N rows (n) of B
        /// ([`desc_k_major_sw128`], or [`desc_mn_major_sw128`] when `TRANS_B`). `scale_d` as
        /// for the shared-memory forms. Register `i` of `acc` as the module docs give it.
        ///
        /// # Safety
        /// As the shared-memory forms; besides, `a`'s registers are read asynchronously: the
        /// values must come from registers a [`fence`] ordered (written before it), and the
        /// compiler must not reuse them before a [`wait_group`] covers this wgmma (they are
        /// `in` operands of this asm; the caller keeps the values alive until the wait).
        /// Minimum sm_90a.
        #[inline(always)]
        pub unsafe fn $name<const TRANS_B: bool>(
            acc: &mut [f32; $acc],
            a: [u32; 4],
            desc_b: u64,
            scale_d: bool,
        ) {
            // SAFETY: convergence, operand validity and the asynchronous register rules are
            // the caller's contract.
            unsafe {
                wgmma_mma!(@asm_rs $instr, acc, a, desc_b, scale_d, $idx,
                    tb = const TRANS_B as u32)
            }
        }
    };
    (@asm_rs $instr:literal, $acc:ident, $a:ident, $b:ident, $s:ident, [$($i:literal)*],
     tb = const $tb:expr) => {
        asm!(concat!("{{ .reg .pred p;\n\tsetp.ne.b32 p, {s}, 0;\n\t", $instr, " {{{0}",
                     $(", {", $i, "}",)* "}}, {{{a0}, {a1}, {a2}, {a3}}}, {b}, p, 1, 1, {tb};",
                     "\n\t}}"),
             inout(reg32) $acc[0], $(inout(reg32) $acc[$i],)*
             a0 = in(reg32) $a[0], a1 = in(reg32) $a[1], a2 = in(reg32) $a[2],
             a3 = in(reg32) $a[3], b = in(reg64) $b, s = in(reg32) $s as u32,
             tb = const $tb, options(nostack, preserves_flags))
    };
    (@asm $instr:literal, $tail:literal, $acc:ident, $a:ident, $b:ident, $s:ident,
     [$($i:literal)*] $(, $op:ident = const $val:expr)*) => {
        asm!(concat!("{{ .reg .pred p;\n\tsetp.ne.b32 p, {s}, 0;\n\t", $instr, " {{{0}",
                     $(", {", $i, "}",)* "}}, {a}, {b}, p", $tail, ";\n\t}}"),
             inout(reg32) $acc[0], $(inout(reg32) $acc[$i],)*
             a = in(reg64) $a, b = in(reg64) $b, s = in(reg32) $s as u32,
             $($op = const $val,)*
             options(nostack, preserves_flags))
    };
}

wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16`: k16 of bf16 (32 bytes of K).
    mma_m64n128k16_bf16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16", transposable,
    64, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16`: k16 of f16 (32 bytes of K).
    mma_m64n128k16_f16, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16", transposable,
    64, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32`: k8 of TF32 (32 bytes of K),
    /// read from f32 in shared memory (the low 13 mantissa bits are ignored); K-major
    /// operands only.
    mma_m64n128k8_tf32, "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32", k_major,
    64, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16`: k16 of bf16, N = 256.
    mma_m64n256k16_bf16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16", transposable,
    128, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90
        91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114
        115 116 117 118 119 120 121 122 123 124 125 126 127
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16`: k16 of f16, N = 256.
    mma_m64n256k16_f16, "wgmma.mma_async.sync.aligned.m64n256k16.f32.f16.f16", transposable,
    128, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90
        91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114
        115 116 117 118 119 120 121 122 123 124 125 126 127
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32`: k8 of TF32, N = 256; K-major
    /// operands only.
    mma_m64n256k8_tf32, "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32", k_major,
    128, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32
        33 34 35 36 37 38 39 40 41 42 43 44 45 46 47 48 49 50 51 52 53 54 55 56 57 58 59 60 61
        62 63 64 65 66 67 68 69 70 71 72 73 74 75 76 77 78 79 80 81 82 83 84 85 86 87 88 89 90
        91 92 93 94 95 96 97 98 99 100 101 102 103 104 105 106 107 108 109 110 111 112 113 114
        115 116 117 118 119 120 121 122 123 124 125 126 127
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16`: k16 of bf16, N = 64 (flash
    /// attention's 64 × 64 tiles).
    mma_m64n64k16_bf16, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", transposable,
    32, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16`: k16 of f16, N = 64.
    mma_m64n64k16_f16, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", transposable,
    32, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16` with A from registers.
    mma_m64n64k16_bf16_rs, "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16", register_a,
    32, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    ]
}
wgmma_mma! {
    /// `wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16` with A from registers.
    mma_m64n64k16_f16_rs, "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16", register_a,
    32, [
        1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31
    ]
}
