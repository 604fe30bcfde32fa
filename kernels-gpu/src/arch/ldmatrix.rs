//! `ldmatrix`: warp-wide loads of 8×8 matrices of 16-bit elements from shared memory into
//! mma fragments. Lane `8j + r` supplies the address of row `r` of matrix `j`; matrix `j`
//! arrives in destination register `j` (layout: `kernel_abi::fragment::ldmatrix`).

use core::arch::asm;

macro_rules! ldmatrix {
    ($(#[$doc:meta])* $name:ident, $shape:literal, $n:literal, [$($r:ident),+]) => {
        $(#[$doc])*
        ///
        /// # Safety
        /// All 32 lanes must execute this call site together. Each address-supplying lane
        /// passes a 16-byte aligned shared address of 16 readable bytes (other lanes' `addr`
        /// is ignored). Minimum sm_75.
        #[inline(always)]
        pub unsafe fn $name(addr: u32) -> [u32; $n] {
            $(let $r: u32;)+
            // SAFETY: convergence and address validity are the caller's contract.
            unsafe {
                asm!(concat!("ldmatrix.sync.aligned.m8n8.", $shape, ".shared.b16 {{",
                             ldmatrix!(@regs $($r),+), "}}, [{addr}];"),
                     $($r = out(reg32) $r,)+ addr = in(reg32) addr,
                     options(readonly, nostack, preserves_flags));
            }
            [$($r),+]
        }
    };
    (@regs $first:ident $(, $rest:ident)*) => {
        concat!("{", stringify!($first), "}" $(, ", {", stringify!($rest), "}")*)
    };
}

ldmatrix!(/// `ldmatrix.sync.aligned.m8n8.x1.shared.b16`: one matrix (lanes 0–7 give addresses).
    ldmatrix_x1, "x1", 1, [r0]);
ldmatrix!(/// `ldmatrix.sync.aligned.m8n8.x2.shared.b16`: two matrices (lanes 0–15).
    ldmatrix_x2, "x2", 2, [r0, r1]);
ldmatrix!(/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16`: four matrices (lanes 0–31).
    ldmatrix_x4, "x4", 4, [r0, r1, r2, r3]);
ldmatrix!(/// `ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16`: one matrix, transposed.
    ldmatrix_x1_trans, "x1.trans", 1, [r0]);
ldmatrix!(/// `ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16`: two matrices, transposed.
    ldmatrix_x2_trans, "x2.trans", 2, [r0, r1]);
ldmatrix!(/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16`: four matrices, transposed.
    ldmatrix_x4_trans, "x4.trans", 4, [r0, r1, r2, r3]);

macro_rules! ldmatrix_x4_at {
    ($(#[$doc:meta])* $name:ident, $shape:literal) => {
        $(#[$doc])*
        ///
        /// The byte offset `OFF` is an immediate of the address (`[addr+OFF]`): a tile walked
        /// at constant strides needs one address register per lane pattern, not one per load.
        ///
        /// # Safety
        /// As `ldmatrix_x4`, for the address `addr + OFF`. Minimum sm_75.
        #[inline(always)]
        pub unsafe fn $name<const OFF: u32>(addr: u32) -> [u32; 4] {
            let (r0, r1, r2, r3): (u32, u32, u32, u32);
            // SAFETY: convergence and address validity are the caller's contract.
            unsafe {
                asm!(concat!("ldmatrix.sync.aligned.m8n8.", $shape,
                             ".shared.b16 {{{r0}, {r1}, {r2}, {r3}}}, [{addr}+{off}];"),
                     r0 = out(reg32) r0, r1 = out(reg32) r1, r2 = out(reg32) r2,
                     r3 = out(reg32) r3, addr = in(reg32) addr, off = const OFF,
                     options(readonly, nostack, preserves_flags));
            }
            [r0, r1, r2, r3]
        }
    };
}

ldmatrix_x4_at!(/// `ldmatrix.sync.aligned.m8n8.x4.shared.b16` at `addr + OFF`.
    ldmatrix_x4_at, "x4");
ldmatrix_x4_at!(/// `ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16` at `addr + OFF`.
    ldmatrix_x4_trans_at, "x4.trans");
