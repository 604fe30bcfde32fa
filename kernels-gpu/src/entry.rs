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
            // SAFETY: the host launcher validated the parameters and the launch.
            unsafe { $body(p) }
        }
    )*};
}

pub(crate) use entries;
