//! Asynchronous global → shared copies (`cp.async`, sm_80).
//!
//! Copies are issued, grouped with [`cp_async_commit_group`], and complete for the issuing
//! thread at [`cp_async_wait_group`]; other threads see the data only after a barrier.

use core::arch::asm;

/// `cp.async.cg.shared.global [dst], [src], 16, src_bytes`: copies `src_bytes` (0..=16) bytes
/// and zero-fills the rest of the 16-byte destination, bypassing L1.
///
/// # Safety
/// `dst` must be a 16-byte aligned shared address of 16 bytes; `src` a 16-byte aligned
/// global address with `src_bytes` readable bytes (pass any valid aligned address when
/// `src_bytes` is 0); `src_bytes <= 16`. The hardware reads only `src_bytes`, but
/// compute-sanitizer's memcheck reports all 16 bytes as read when `0 < src_bytes < 16`
/// (H200, CUDA 13, 2026-11-26), and so does ptx-sim: kernels keep the whole 16 bytes inside
/// the allocation, or load edge chunks otherwise. The destination must not be read before a
/// [`cp_async_wait_group`] that covers this copy. Minimum sm_80.
#[inline(always)]
pub unsafe fn cp_async_cg_16(dst: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: addresses, alignment and the size bound are the caller's contract.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {s};",
             "cp.async.cg.shared.global [{d}], [g], 16, {n}; }}",
             d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes,
             options(nostack, preserves_flags));
    }
}

/// `cp.async.ca.shared.global [dst], [src], 4, src_bytes`: copies `src_bytes` (0 or 4) bytes
/// and zero-fills the rest of the 4-byte destination, through L1.
///
/// # Safety
/// `dst` must be a 4-byte aligned shared address of 4 bytes; `src` a 4-byte aligned global
/// address, 4 readable bytes when `src_bytes` is 4 (any valid aligned address when it is 0);
/// `src_bytes` is 0 or 4. The destination must not be read before a [`cp_async_wait_group`]
/// that covers this copy. Minimum sm_80.
#[inline(always)]
pub unsafe fn cp_async_ca_4(dst: u32, src: *const u8, src_bytes: u32) {
    // SAFETY: addresses, alignment and the size bound are the caller's contract.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {s};",
             "cp.async.ca.shared.global [{d}], [g], 4, {n}; }}",
             d = in(reg32) dst, s = in(reg64) src, n = in(reg32) src_bytes,
             options(nostack, preserves_flags));
    }
}

/// `cp.async.commit_group`: closes the group of copies this thread issued since the last one.
///
/// # Safety
/// Always safe to execute. Minimum sm_80.
#[inline(always)]
pub unsafe fn cp_async_commit_group() {
    // SAFETY: no operands; ordering only.
    unsafe { asm!("cp.async.commit_group;", options(nostack, preserves_flags)) }
}

/// `cp.async.wait_group N`: waits until at most `N` of this thread's committed groups are
/// still pending.
///
/// # Safety
/// Always safe to execute; callers still need a barrier before reading data copied by other
/// threads. Minimum sm_80.
#[inline(always)]
pub unsafe fn cp_async_wait_group<const N: u32>() {
    // SAFETY: no memory operands; the asm is a compiler memory barrier.
    unsafe { asm!("cp.async.wait_group {n};", n = const N, options(nostack, preserves_flags)) }
}
