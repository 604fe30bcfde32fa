//! 16-byte global-memory accesses.

use core::arch::asm;

/// `ld.global.nc.v4.u32`: 16 bytes through the read-only (non-coherent) data path.
///
/// # Safety
/// `ptr` must be a 16-byte aligned global address of 16 readable bytes that no thread of
/// this kernel writes (the non-coherent path may return stale data otherwise). Minimum sm_35.
#[inline(always)]
pub unsafe fn ld_global_nc_v4_u32(ptr: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: validity, alignment and read-only-ness are the caller's contract.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {p};",
             "ld.global.nc.v4.u32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
             p = in(reg64) ptr, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
             d = out(reg32) d, options(readonly, nostack, preserves_flags));
    }
    [a, b, c, d]
}

/// `ld.global.v4.u32`: 16 bytes through the coherent path (for data this kernel also writes,
/// e.g. in-place updates).
///
/// # Safety
/// `ptr` must be a 16-byte aligned global address of 16 readable bytes. Minimum sm_20.
#[inline(always)]
pub unsafe fn ld_global_v4_u32(ptr: *const u32) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    // SAFETY: validity and alignment are the caller's contract.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {p};",
             "ld.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [g]; }}",
             p = in(reg64) ptr, a = out(reg32) a, b = out(reg32) b, c = out(reg32) c,
             d = out(reg32) d, options(readonly, nostack, preserves_flags));
    }
    [a, b, c, d]
}

/// `st.global.v4.u32`: 16 bytes.
///
/// # Safety
/// `ptr` must be a 16-byte aligned global address of 16 writable bytes. Minimum sm_20.
#[inline(always)]
pub unsafe fn st_global_v4_u32(ptr: *mut u32, v: [u32; 4]) {
    // SAFETY: validity and alignment are the caller's contract.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {p};",
             "st.global.v4.u32 [g], {{{a}, {b}, {c}, {d}}}; }}",
             p = in(reg64) ptr, a = in(reg32) v[0], b = in(reg32) v[1], c = in(reg32) v[2],
             d = in(reg32) v[3], options(nostack, preserves_flags));
    }
}

/// `prefetch.global.L2 [ptr]`: asks L2 for the line holding `ptr` ahead of a load, a hint that
/// changes no value any load returns.
///
/// # Safety
/// `ptr` must be a global address inside an allocation. Minimum sm_20.
#[inline(always)]
pub unsafe fn prefetch_l2(ptr: *const u8) {
    // SAFETY: a prefetch reads nothing into the program; the address is the caller's contract.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {p};",
             "prefetch.global.L2 [g]; }}",
             p = in(reg64) ptr, options(readonly, nostack, preserves_flags));
    }
}

/// `atom.global.add.u32` (relaxed, GPU scope): adds `v` to the word at `ptr` and returns its
/// previous value.
///
/// # Safety
/// `ptr` must be a 4-byte aligned global address of a writable word. Minimum sm_20.
#[inline(always)]
pub unsafe fn atom_add_u32(ptr: *mut u32, v: u32) -> u32 {
    let old: u32;
    // SAFETY: validity and alignment are the caller's contract.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {p};",
             "atom.global.add.u32 {o}, [g], {v}; }}",
             p = in(reg64) ptr, v = in(reg32) v, o = out(reg32) old,
             options(nostack, preserves_flags));
    }
    old
}
