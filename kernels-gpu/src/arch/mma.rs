//! Tensor-core matrix multiply-accumulate (`mma.sync`, warp-wide), f32 accumulators.
//!
//! `d = a · b + c` on one 16×8 output tile; fragment layouts are in
//! `kernel_abi::fragment` (A row-major, B column-major: `.row.col`).

use core::arch::asm;

macro_rules! mma {
    ($(#[$doc:meta])* $name:ident, $instr:literal) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// All 32 lanes of the warp must execute this call site together. Minimum sm_80.
        #[inline(always)]
        pub unsafe fn $name(a: [u32; 4], b: [u32; 2], c: [f32; 4]) -> [f32; 4] {
            let [mut d0, mut d1, mut d2, mut d3] = c;
            // SAFETY: warp convergence is the caller's contract; operands are registers.
            unsafe {
                asm!(concat!($instr, " {{{d0}, {d1}, {d2}, {d3}}}, {{{a0}, {a1}, {a2}, {a3}}}, ",
                             "{{{b0}, {b1}}}, {{{d0}, {d1}, {d2}, {d3}}};"),
                     d0 = inout(reg32) d0, d1 = inout(reg32) d1,
                     d2 = inout(reg32) d2, d3 = inout(reg32) d3,
                     a0 = in(reg32) a[0], a1 = in(reg32) a[1],
                     a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                     b0 = in(reg32) b[0], b1 = in(reg32) b[1],
                     options(nomem, nostack, preserves_flags));
            }
            [d0, d1, d2, d3]
        }
    };
}

mma!(/// `mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32`: A 16×16 and B 16×8 in bf16
     /// (two per register, `kernel_abi::fragment::m16n8k16_a/_b`).
    mma_m16n8k16_bf16, "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
mma!(/// `mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32`: as the bf16 form, in f16.
    mma_m16n8k16_f16, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
mma!(/// `mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`: A 16×8 and B 8×8 in tf32, one
     /// element per register (`kernel_abi::fragment::m16n8k8_tf32_a/_b`; convert with
     /// `cvt::f32_to_tf32`).
    mma_m16n8k8_tf32, "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
