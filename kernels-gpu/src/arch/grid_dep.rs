//! Programmatic dependent launch (sm_90): `griddepcontrol.wait` and
//! `griddepcontrol.launch_dependents`. A kernel launched with the driver's programmatic stream
//! serialization attribute may start while the kernel before it in the stream is still running;
//! `wait` blocks until that kernel (and so every earlier one) has completed and its memory is
//! visible, and `launch_dependents` lets the next kernel start once every block of this one has
//! called it or exited. Launched without the attribute, both do nothing. On sm_80 there is no
//! such launch, and both compile to nothing.

#[cfg(target_feature = "sm_90a")]
use core::arch::asm;

/// `griddepcontrol.wait`: returns once the grids this one depends on have completed and their
/// writes are visible. Every kernel calls it before its first global memory access
/// (`entry::entries!`), so none reads a result still being written.
#[inline(always)]
pub fn wait_for_prerequisites() {
    // SAFETY: no operands; it only blocks the thread.
    #[cfg(target_feature = "sm_90a")]
    unsafe {
        asm!("griddepcontrol.wait;", options(nostack, preserves_flags))
    }
}

/// `griddepcontrol.launch_dependents`: the next kernel in the stream may be scheduled once
/// every block of this grid has executed it or exited (its blocks then wait in
/// [`wait_for_prerequisites`]).
#[inline(always)]
pub fn launch_dependents() {
    // SAFETY: no operands; it only signals the launch unit.
    #[cfg(target_feature = "sm_90a")]
    unsafe {
        asm!("griddepcontrol.launch_dependents;", options(nostack, preserves_flags))
    }
}
