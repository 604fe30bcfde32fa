//! [`entries!`]: the `extern "ptx-kernel"` entry points of a kernel family.

/// `entries! { "family"; name(Params) => body; ... }` defines, per line, the exported entry
/// `name` taking one `Params` by value and forwarding to the generic `body`. The host launcher
/// of `kernel_abi::<family>` validated the parameters and the launch geometry.
macro_rules! entries {
    ($family:literal; $($name:ident($params:ty) => $body:path;)*) => {$(
        #[doc = concat!("Entry point `", stringify!($name), "` (see `kernel_abi::", $family, "`).")]
        ///
        /// # Safety
        /// Launched by `gpu-host`, which validates the shapes, buffers and launch geometry.
        #[unsafe(no_mangle)]
        pub unsafe extern "ptx-kernel" fn $name(p: $params) {
            $crate::entry::prologue();
            // SAFETY: the host launcher validated the parameters and the launch.
            unsafe { $body(p) }
        }
    )*};
}

pub(crate) use entries;

/// The start of every kernel: under programmatic dependent launch the previous kernel in the
/// stream may still be running, so nothing is read before it has completed, and the next one
/// may then be scheduled ([`crate::arch::grid_dep`]).
#[inline(always)]
pub(crate) fn prologue() {
    crate::arch::grid_dep::wait_for_prerequisites();
    crate::arch::grid_dep::launch_dependents();
}
