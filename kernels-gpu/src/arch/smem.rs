//! Shared memory: the dynamic allocation's base address and 32/128-bit loads and stores.
//!
//! Addresses are 32-bit offsets in the `.shared` state space. The dynamic allocation is the
//! `extern .shared` array `dyn_smem` declared below; its size is the launch's
//! `shared_mem_bytes`, which the host launcher sets.

use core::arch::{asm, global_asm};

global_asm!(".extern .shared .align 16 .b8 dyn_smem[];");

/// Shared-space address of the block's dynamic shared memory (16-byte aligned).
///
/// # Safety
/// Always safe: returns an address, touches no memory. Minimum sm_20.
#[inline(always)]
pub fn dynamic_smem_base() -> u32 {
    let addr: u32;
    // SAFETY: takes the address of a symbol; no memory access.
    unsafe { asm!("mov.u32 {}, dyn_smem;", out(reg32) addr, options(pure, nomem, nostack)) };
    addr
}

/// `ld.shared.u32`.
///
/// # Safety
/// `addr` must be 4-byte aligned and inside the block's shared memory. Minimum sm_20.
#[inline(always)]
pub unsafe fn ld_shared_u32(addr: u32) -> u32 {
    let value: u32;
    // SAFETY: bounds and alignment are the caller's contract.
    unsafe {
        asm!("ld.shared.u32 {}, [{}];", out(reg32) value, in(reg32) addr,
             options(readonly, nostack, preserves_flags));
    }
    value
}

/// `st.shared.u32`.
///
/// # Safety
/// `addr` must be 4-byte aligned and inside the block's shared memory. Minimum sm_20.
#[inline(always)]
pub unsafe fn st_shared_u32(addr: u32, value: u32) {
    // SAFETY: bounds and alignment are the caller's contract.
    unsafe {
        asm!("st.shared.u32 [{}], {};", in(reg32) addr, in(reg32) value,
             options(nostack, preserves_flags));
    }
}

/// `ld.shared.f32`.
///
/// # Safety
/// As [`ld_shared_u32`]. Minimum sm_20.
#[inline(always)]
pub unsafe fn ld_shared_f32(addr: u32) -> f32 {
    // SAFETY: forwarded contract.
    f32::from_bits(unsafe { ld_shared_u32(addr) })
}

/// `st.shared.f32`.
///
/// # Safety
/// As [`st_shared_u32`]. Minimum sm_20.
#[inline(always)]
pub unsafe fn st_shared_f32(addr: u32, value: f32) {
    // SAFETY: forwarded contract.
    unsafe { st_shared_u32(addr, value.to_bits()) }
}

/// `st.shared.v2.u32`: 8 bytes.
///
/// # Safety
/// `addr` must be 8-byte aligned and the 8 bytes inside the block's shared memory.
/// Minimum sm_20.
#[inline(always)]
pub unsafe fn st_shared_v2_u32(addr: u32, v: [u32; 2]) {
    // SAFETY: bounds and alignment are the caller's contract.
    unsafe {
        asm!("st.shared.v2.u32 [{}], {{{}, {}}};", in(reg32) addr, in(reg32) v[0], in(reg32) v[1],
             options(nostack, preserves_flags));
    }
}

/// `ld.shared.v2.u32` at `addr + OFF`: 8 bytes. The byte offset `OFF` is an immediate of the
/// address (`[addr+OFF]`), so that the loads of a row share one address register.
///
/// # Safety
/// `addr + OFF` must be 8-byte aligned and the 8 bytes inside the block's shared memory.
/// Minimum sm_20.
#[inline(always)]
pub unsafe fn ld_shared_v2_u32_at<const OFF: u32>(addr: u32) -> [u32; 2] {
    let (a, b): (u32, u32);
    // SAFETY: bounds and alignment are the caller's contract.
    unsafe {
        asm!("ld.shared.v2.u32 {{{a}, {b}}}, [{addr}+{off}];",
             a = out(reg32) a, b = out(reg32) b, addr = in(reg32) addr, off = const OFF,
             options(readonly, nostack, preserves_flags));
    }
    [a, b]
}

/// `ld.shared.v4.u32`: 16 bytes.
///
/// # Safety
/// `addr` must be 16-byte aligned and the 16 bytes inside the block's shared memory.
/// Minimum sm_20.
#[inline(always)]
pub unsafe fn ld_shared_v4_u32(addr: u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: bounds and alignment are the caller's contract.
    unsafe {
        asm!("ld.shared.v4.u32 {{{}, {}, {}, {}}}, [{}];",
             out(reg32) a, out(reg32) b, out(reg32) c, out(reg32) d, in(reg32) addr,
             options(readonly, nostack, preserves_flags));
    }
    [a, b, c, d]
}

/// `st.shared.v4.u32`: 16 bytes.
///
/// # Safety
/// As [`ld_shared_v4_u32`]. Minimum sm_20.
#[inline(always)]
pub unsafe fn st_shared_v4_u32(addr: u32, v: [u32; 4]) {
    // SAFETY: bounds and alignment are the caller's contract.
    unsafe {
        asm!("st.shared.v4.u32 [{}], {{{}, {}, {}, {}}};",
             in(reg32) addr, in(reg32) v[0], in(reg32) v[1], in(reg32) v[2], in(reg32) v[3],
             options(nostack, preserves_flags));
    }
}
