//! The tensor memory accelerator (TMA): bulk tensor copies global → shared described by a
//! tensor map, completing on an mbarrier, and bulk prefetches into L2 (sm_90).
//!
//! TMA and `wgmma` access shared memory through the *asynchronous proxy*; ordinary loads and
//! stores (and `mbarrier.init`) go through the generic proxy. Ordering between the two needs
//! [`fence_proxy_async_shared_cta`]; between TMA writes and their readers the mbarrier's
//! `complete_tx` / wait pair is enough.
//!
//! A tensor map the host copied into global memory is read by the TMA unit through the
//! *tensormap proxy*, which may cache it: before its first use, the issuing thread acquires it
//! with [`fence_proxy_tensormap_acquire_sys`] (the CUDA Programming Guide's rule for maps
//! passed in global memory rather than as `__grid_constant__` parameters, which rustc cannot
//! declare).

use core::arch::asm;
use kernel_abi::gemm_wgmma::TensorMap;

/// `cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [dst],
/// [tmap, {x, y, z}], [bar]`: copies the box of the rank-3 tensor described by `tmap` (a batch
/// of matrices; a box takes one) whose first element is at inner (contiguous) coordinate `x`,
/// row `y` of matrix `z` into shared memory at `dst`, laid out (and swizzled) as the tensor
/// map says; elements outside the tensor are zero-filled. On completion the copy reports the
/// box's byte size to the mbarrier at `bar` (`complete_tx`), whether or not part of the box
/// was out of bounds.
///
/// # Safety
/// `tmap` must be the generic address of a valid rank-3 tensor map in global memory, 64-byte
/// aligned and not modified while the copy may read it; `dst` a shared address of the box's
/// size aligned as the swizzle mode requires (1024 bytes for the 128-byte swizzle), which no
/// thread reads or writes until `bar`'s phase completes; `bar` an initialised mbarrier whose
/// current phase expects these bytes (`mbarrier.arrive.expect_tx`); `x` times the element
/// size a multiple of 16 bytes (otherwise the hardware raises an illegal instruction). Minimum
/// sm_90.
#[inline(always)]
pub unsafe fn load_3d(dst: u32, tmap: *const TensorMap, [x, y, z]: [i32; 3], bar: u32) {
    // SAFETY: the tensor map, destination and barrier are the caller's contract.
    unsafe {
        asm!("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \
              [{d}], [{m}, {{{x}, {y}, {z}}}], [{b}];",
             d = in(reg32) dst, m = in(reg64) tmap, x = in(reg32) x, y = in(reg32) y,
             z = in(reg32) z, b = in(reg32) bar, options(nostack, preserves_flags));
    }
}

/// `cp.async.bulk.prefetch.L2.global [ptr], bytes`: asks the TMA unit to bring `bytes` bytes
/// from `ptr` into L2, asynchronously; nothing completes or is waited for (a hint, without
/// effect on what any load returns).
///
/// # Safety
/// `ptr` must be a 16-byte aligned global address and `bytes` a multiple of 16, the bytes
/// inside one allocation. Minimum sm_90.
#[inline(always)]
pub unsafe fn prefetch_l2_bulk(ptr: *const u8, bytes: u32) {
    // SAFETY: the address range is the caller's contract; the instruction writes nothing.
    unsafe {
        asm!("{{ .reg .b64 g; cvta.to.global.u64 g, {p};",
             "cp.async.bulk.prefetch.L2.global [g], {n}; }}",
             p = in(reg64) ptr, n = in(reg32) bytes, options(nostack, preserves_flags));
    }
}

/// `fence.proxy.tensormap::generic.acquire.sys [tmap], 128`: makes the 128-byte tensor map at
/// `tmap`, written through the generic proxy (here: copied from the host before the launch,
/// hence system scope), visible to this thread's later TMA operations through the tensormap
/// proxy, so that no copy cached from an earlier map at the same address is used.
///
/// # Safety
/// `tmap` must be the generic address of a 64-byte aligned, 128-byte tensor map in global
/// memory. Minimum sm_90, PTX ISA 8.3.
#[inline(always)]
pub unsafe fn fence_proxy_tensormap_acquire_sys(tmap: *const TensorMap) {
    // SAFETY: the address is the caller's contract; ordering only (not `nomem`: a compiler
    // memory barrier too).
    unsafe {
        asm!("fence.proxy.tensormap::generic.acquire.sys [{m}], 128;", m = in(reg64) tmap,
             options(nostack, preserves_flags));
    }
}

/// `fence.proxy.async.shared::cta`: orders this thread's generic-proxy accesses to shared
/// memory (e.g. `mbarrier.init`, `st.shared`) before its later asynchronous-proxy accesses
/// (TMA, `wgmma`), and the reverse, at CTA scope.
///
/// # Safety
/// Always safe to execute. Minimum sm_90.
#[inline(always)]
pub unsafe fn fence_proxy_async_shared_cta() {
    // SAFETY: no operands; ordering only (not `nomem`: a compiler memory barrier too).
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack, preserves_flags)) }
}
