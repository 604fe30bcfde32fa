//! Shared-memory barriers with transaction counts (`mbarrier`, sm_90 forms).
//!
//! An mbarrier is an 8-byte object in shared memory that completes a *phase* once its pending
//! arrival count reaches zero and its pending transaction count (bytes that asynchronous
//! copies announced with `expect_tx` and report with `complete_tx`) is zero too; it then
//! re-arms itself with the count it was initialised with. Phases alternate parity 0, 1, 0, …;
//! a waiter names the parity of the phase it waits for (see [`try_wait_parity`]).
//!
//! Arrivals have release semantics and a successful wait acquire semantics at CTA scope, so
//! writes made before an arrive (or by the asynchronous copies the barrier tracked) are
//! visible after the wait. None of these wrappers is `nomem`: the compiler keeps memory
//! accesses on their side of them.

use core::arch::asm;

/// `mbarrier.init.shared::cta.b64 [bar], count`: initialises the barrier at `bar` for
/// `count` arrivals per phase, in phase 0 (so that parity 1 counts as completed).
///
/// # Safety
/// `bar` must be an 8-byte aligned shared address of 8 bytes that no thread uses as a barrier
/// until the initialisation is visible to it (a `bar.sync` after it, and
/// [`super::tma::fence_proxy_async_shared_cta`] before, for the asynchronous proxy);
/// `1 <= count < 2^20`. Minimum sm_80 (the `.shared::cta` form: PTX 7.8).
#[inline(always)]
pub unsafe fn init(bar: u32, count: u32) {
    // SAFETY: address, alignment and count range are the caller's contract.
    unsafe {
        asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count,
             options(nostack, preserves_flags));
    }
}

/// `mbarrier.arrive.shared::cta.b64 _, [bar]`: one arrival (release semantics, CTA scope).
///
/// # Safety
/// `bar` must be the shared address of an initialised barrier whose current phase still
/// expects an arrival from this caller (an arrival beyond the expected count is undefined).
/// Minimum sm_90 (with the sink `_` and `.shared::cta`: PTX 7.8).
#[inline(always)]
pub unsafe fn arrive(bar: u32) {
    // SAFETY: the barrier's validity and the arrival budget are the caller's contract.
    unsafe {
        asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar,
             options(nostack, preserves_flags));
    }
}

/// `mbarrier.arrive.expect_tx.shared::cta.b64 _, [bar], bytes`: raises the pending
/// transaction count of the current phase by `bytes`, then arrives once. The phase cannot
/// complete before asynchronous copies have reported (`complete_tx`) that many bytes.
///
/// # Safety
/// As [`arrive`]; `bytes < 2^20`, and copies completing exactly `bytes` bytes on this barrier
/// must be issued for this phase (otherwise it never completes). Minimum sm_90.
#[inline(always)]
pub unsafe fn arrive_expect_tx(bar: u32, bytes: u32) {
    // SAFETY: the barrier's validity and the transaction accounting are the caller's contract.
    unsafe {
        asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {n};", b = in(reg32) bar,
             n = in(reg32) bytes, options(nostack, preserves_flags));
    }
}

/// `mbarrier.try_wait.parity.shared::cta.b64 p, [bar], parity`: whether the phase of parity
/// `parity & 1` has completed, i.e. the barrier's current phase has the other parity (a fresh
/// barrier is in phase 0: parity 1 reads as completed, parity 0 as not). May block for a
/// system-dependent time before returning false. On true it acquires (CTA scope) what the
/// phase's arrivals released and its asynchronous copies wrote.
///
/// # Safety
/// `bar` must be the shared address of an initialised barrier, and the phase waited for must
/// be the current one or the one just before (parity waits cannot tell older phases apart).
/// Minimum sm_90.
#[inline(always)]
pub unsafe fn try_wait_parity(bar: u32, parity: u32) -> bool {
    let done: u32;
    // SAFETY: the barrier's validity is the caller's contract; the predicate lives in a scope
    // of its own and is turned into a register with `selp`.
    unsafe {
        asm!("{{ .reg .pred p;",
             "mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph};",
             "selp.u32 {d}, 1, 0, p; }}",
             b = in(reg32) bar, ph = in(reg32) parity, d = out(reg32) done,
             options(nostack, preserves_flags));
    }
    done != 0
}

/// Spins on [`try_wait_parity`] until the phase of parity `parity` has completed.
///
/// # Safety
/// As [`try_wait_parity`]; some thread (or asynchronous copy) must eventually complete that
/// phase, or this never returns. Minimum sm_90.
#[inline(always)]
pub unsafe fn wait(bar: u32, parity: u32) {
    // SAFETY: forwarded contract.
    while !unsafe { try_wait_parity(bar, parity) } {}
}
