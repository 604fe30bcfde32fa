//! Kernel handles: an entry-point name tied to its parameter struct.

use core::marker::PhantomData;
use core::mem::{align_of, size_of};

/// Marker for a `#[repr(C)]` struct that is passed by value as a kernel's only parameter.
///
/// # Safety
/// The implementing type must be `#[repr(C)]`, contain only plain data (integers, floats,
/// [`crate::DevicePtr`]s), and have no padding whose contents the device could read. Its
/// layout is what the device code's `extern "ptx-kernel" fn(P)` reads from the parameter space.
pub unsafe trait KernelParams: Copy + 'static {}

/// A kernel entry point of the PTX module, typed by its parameter struct.
pub struct Kernel<P> {
    name: &'static str,
    _params: PhantomData<fn(P)>,
}

impl<P: KernelParams> Kernel<P> {
    /// A handle for the `.entry` called `name` that takes one `P` by value.
    #[inline]
    pub const fn new(name: &'static str) -> Self {
        Self { name, _params: PhantomData }
    }

    /// The `.entry` name in the PTX.
    #[inline]
    pub const fn name(&self) -> &'static str {
        self.name
    }

    /// Name and parameter layout, for checking the built PTX against this crate.
    #[inline]
    pub const fn sig(&self) -> KernelSig {
        KernelSig { name: self.name, param_size: size_of::<P>(), param_align: align_of::<P>() }
    }
}

impl<P> Clone for Kernel<P> {
    #[inline]
    fn clone(&self) -> Self {
        *self
    }
}

impl<P> Copy for Kernel<P> {}

impl<P> core::fmt::Debug for Kernel<P> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Kernel({})", self.name)
    }
}

/// Name and by-value parameter layout of one entry point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelSig {
    /// The `.entry` name.
    pub name: &'static str,
    /// Size in bytes of the single by-value parameter.
    pub param_size: usize,
    /// Alignment in bytes of that parameter.
    pub param_align: usize,
}

/// The launch bounds of one entry point, which `cargo xtask build-ptx` writes into the PTX as
/// `.maxntid` / `.minnctapersm` (what CUDA C++'s `__launch_bounds__` emits; rustc has no
/// attribute for it): ptxas then keeps the kernel's registers low enough for
/// `min_blocks_per_sm` blocks of `max_threads` threads to share an SM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchBounds {
    /// The `.entry` name.
    pub name: &'static str,
    /// Largest block the kernel is launched with (`.maxntid max_threads, 1, 1`).
    pub max_threads: u32,
    /// Blocks that must fit on one SM at once (`.minnctapersm`).
    pub min_blocks_per_sm: u32,
}

impl LaunchBounds {
    /// The bounds of the entry `sig`.
    pub const fn new(sig: KernelSig, max_threads: u32, min_blocks_per_sm: u32) -> Self {
        Self { name: sig.name, max_threads, min_blocks_per_sm }
    }
}

/// Launch bounds of the entries that need them, grouped by kernel family.
pub const ALL_LAUNCH_BOUNDS: &[&[LaunchBounds]] = &[
    crate::gemm::LAUNCH_BOUNDS,
    crate::gemm::BIAS_GRAD_LAUNCH_BOUNDS,
    crate::gemm_wgmma::LAUNCH_BOUNDS,
    crate::flash::LAUNCH_BOUNDS,
];

/// Launch bounds only the sm_90a module's entries get (an occupancy that only Hopper's shared
/// memory allows, or that the sm_80 module could not reach without spilling).
pub const HOPPER_LAUNCH_BOUNDS: &[&[LaunchBounds]] = &[crate::layernorm::LAUNCH_BOUNDS];

/// Every entry point `kernels-gpu` must export from every module, grouped by kernel family.
pub const ALL_KERNELS: &[&[KernelSig]] = &[
    crate::elementwise::KERNELS,
    crate::probe::KERNELS,
    crate::gemm::KERNELS,
    crate::grad_norm::KERNELS,
    crate::adamw::KERNELS,
    crate::gelu::KERNELS,
    crate::layernorm::KERNELS,
    crate::classifier::KERNELS,
    crate::encoder::KERNELS,
    crate::flash::KERNELS,
    crate::attention::KERNELS,
    crate::transpose::KERNELS,
];

/// The entry points only the sm_90a module exports (Hopper instructions), grouped by family.
pub const ALL_HOPPER_KERNELS: &[&[KernelSig]] =
    &[crate::gemm_wgmma::KERNELS, crate::flash::HOPPER_KERNELS];
