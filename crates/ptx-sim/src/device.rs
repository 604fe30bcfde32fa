//! The simulator as a [`gpu_host::Device`]: buffers, copies and launches.

use crate::decode::{Kernels, decode_module};
use crate::exec::{self, Launch};
use crate::memory::{Allocation, Heap, SHARED_BASE};
use crate::parse::parse_module;
use crate::racecheck::Checks;
use gpu_host::{
    Device, DeviceBuffer, DeviceElement, DeviceView, DeviceViewMut, GpuError, LaunchConfig,
    PtxArch, Result, SimErrorKind, alloc_bytes, check_copy_len, embedded_ptx,
};
use kernel_abi::{Kernel, KernelParams};
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// Largest static + dynamic shared memory of a block: the opt-in limit of H100/H200
/// (227 KiB); an A100 allows 163 KiB.
pub const MAX_SHARED_PER_BLOCK: u32 = 227 * 1024;

/// Which checks the simulator runs (all on by default) and how it schedules blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SimOptions {
    /// Report shared-memory data races between barriers.
    pub racecheck: bool,
    /// Report accesses to shared bytes that a `cp.async` has not finished writing. When off,
    /// such reads silently return the stale contents (as a GPU might).
    pub async_copy_hazards: bool,
    /// Report reads of shared bytes that no thread of the block has written.
    pub uninitialized_shared: bool,
    /// Run the blocks of a launch in parallel on the rayon pool.
    pub parallel_blocks: bool,
    /// Device memory, in bytes: an allocation that would take the live allocations past it
    /// fails with [`GpuError::OutOfMemory`], as on a GPU (`None`: unlimited).
    pub memory_limit: Option<u64>,
}

impl Default for SimOptions {
    fn default() -> Self {
        Self {
            racecheck: true,
            async_copy_hazards: true,
            uninitialized_shared: true,
            parallel_blocks: true,
            memory_limit: None,
        }
    }
}

/// A CPU interpreter of a PTX module, usable wherever a [`gpu_host::Gpu`] is.
///
/// Launches run to completion inside [`Device::launch`] (or [`Simulator::launch_bytes`]), which
/// returns the kernel's first fault; [`Device::synchronize`] has nothing left to report.
pub struct Simulator {
    kernels: Kernels,
    heap: Arc<Heap>,
    options: SimOptions,
}

fn parse_error(detail: String) -> GpuError {
    GpuError::Sim { kind: SimErrorKind::Unsupported, detail }
}

impl Simulator {
    /// The simulator of the project's sm_80 module (embedded by `gpu-host` at build time);
    /// [`GpuError::PtxNotBuilt`] when `cargo xtask build-ptx` has not run.
    pub fn new() -> Result<Self> {
        let ptx = embedded_ptx(PtxArch::Sm80).ok_or(GpuError::PtxNotBuilt { arch: "sm_80" })?;
        Self::from_ptx(ptx)
    }

    /// The simulator of any PTX module text (64-bit addressing). Syntax errors fail here; a
    /// kernel using an instruction the simulator does not implement fails when launched
    /// (see [`Simulator::check_kernels`]).
    pub fn from_ptx(ptx: &str) -> Result<Self> {
        let module = parse_module(ptx).map_err(|e| parse_error(e.to_string()))?;
        if module.address_size != 64 {
            return Err(parse_error(format!(
                ".address_size {} (only 64 is supported)",
                module.address_size
            )));
        }
        Ok(Self {
            kernels: decode_module(&module),
            heap: Arc::new(Heap::default()),
            options: SimOptions::default(),
        })
    }

    /// The same simulator with other options.
    pub fn with_options(mut self, options: SimOptions) -> Self {
        self.options = options;
        self
    }

    /// The options in effect.
    pub fn options(&self) -> SimOptions {
        self.options
    }

    /// The `.entry` names of the module.
    pub fn kernel_names(&self) -> impl Iterator<Item = &str> {
        self.kernels.keys().map(String::as_str)
    }

    /// Fails, listing every kernel that uses PTX the simulator does not implement.
    pub fn check_kernels(&self) -> Result<()> {
        let errors: Vec<String> = self
            .kernels
            .values()
            .filter_map(|k| k.as_ref().err())
            .map(ToString::to_string)
            .collect();
        if errors.is_empty() {
            return Ok(());
        }
        Err(parse_error(errors.join("\n")))
    }

    /// Launches `kernel` with raw parameter bytes (for hand-written PTX whose parameters have
    /// no `kernel-abi` struct). Safe: every access the kernel makes is checked.
    pub fn launch_bytes(
        &self,
        kernel: &'static str,
        config: LaunchConfig,
        params: &[u8],
    ) -> Result<()> {
        let params: Vec<MaybeUninit<u8>> = params.iter().map(|b| MaybeUninit::new(*b)).collect();
        self.launch_raw(kernel, config, &params)
    }

    fn launch_raw(
        &self,
        name: &'static str,
        config: LaunchConfig,
        params: &[MaybeUninit<u8>],
    ) -> Result<()> {
        config.check(name)?;
        let kernel = match self.kernels.get(name) {
            None => return Err(GpuError::MissingKernel { name }),
            Some(Err(e)) => {
                return Err(GpuError::Sim {
                    kind: SimErrorKind::Unsupported,
                    detail: e.to_string(),
                });
            }
            Some(Ok(k)) => k,
        };
        if params.len() as u64 != kernel.param_size {
            return Err(GpuError::invalid(
                name,
                "params",
                format!("{} bytes given, the entry declares {}", params.len(), kernel.param_size),
            ));
        }
        let shared =
            (kernel.dynamic_shared_base - SHARED_BASE) as u64 + config.shared_mem_bytes as u64;
        if shared > MAX_SHARED_PER_BLOCK as u64 {
            return Err(GpuError::invalid(
                name,
                "shared_mem_bytes",
                format!(
                    "{shared} bytes of shared memory per block exceed the limit of {MAX_SHARED_PER_BLOCK}"
                ),
            ));
        }
        let global = self.heap.snapshot();
        let o = self.options;
        let launch = Launch {
            kernel,
            grid: [config.grid.0, config.grid.1, config.grid.2],
            block: [config.block.0, config.block.1, config.block.2],
            dynamic_shared: config.shared_mem_bytes,
            params,
            global: &global,
            checks: Checks {
                races: o.racecheck,
                async_copies: o.async_copy_hazards,
                uninitialized: o.uninitialized_shared,
            },
            parallel: o.parallel_blocks,
        };
        exec::run(&launch)
    }

    fn host_range<T: DeviceElement>(
        &self,
        op: &'static str,
        addr: u64,
        len: usize,
    ) -> Result<(Arc<Allocation>, u64)> {
        let bytes = (len * size_of::<T>()) as u64;
        self.heap.find(addr, bytes).ok_or_else(|| {
            GpuError::invalid(
                op,
                "view",
                format!("{bytes} bytes at {addr:#x} are not a live allocation of this simulator"),
            )
        })
    }
}

/// A buffer in the simulator's global memory, unmapped on drop.
pub struct SimBuffer<T> {
    alloc: Arc<Allocation>,
    heap: Arc<Heap>,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T> Drop for SimBuffer<T> {
    fn drop(&mut self) {
        self.heap.free(self.alloc.base);
    }
}

impl<T: DeviceElement> DeviceBuffer<T> for SimBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn view(&self) -> DeviceView<'_, T> {
        // SAFETY: the address and length are those of this live allocation, borrowed here.
        unsafe { DeviceView::from_raw_parts(self.alloc.base, self.len) }
    }

    fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        // SAFETY: as above, borrowed mutably.
        unsafe { DeviceViewMut::from_raw_parts(self.alloc.base, self.len) }
    }
}

impl Device for Simulator {
    type Buffer<T: DeviceElement> = SimBuffer<T>;

    fn describe(&self) -> String {
        format!("ptx-sim (CPU interpreter of the PTX, {} kernels)", self.kernels.len())
    }

    fn alloc<T: DeviceElement>(&self, len: usize) -> Result<SimBuffer<T>> {
        let bytes = alloc_bytes::<T>(len)?;
        if let Some(total) = self.options.memory_limit {
            let free = total.saturating_sub(self.heap.live_bytes());
            if bytes as u64 > free {
                return Err(GpuError::OutOfMemory {
                    bytes,
                    free: free as usize,
                    total: total as usize,
                });
            }
        }
        let alloc = self.heap.alloc(bytes as u64);
        Ok(SimBuffer { alloc, heap: self.heap.clone(), len, _elem: PhantomData })
    }

    fn copy_to_device<T: DeviceElement>(&self, src: &[T], dst: DeviceViewMut<'_, T>) -> Result<()> {
        check_copy_len("copy_to_device", src.len(), dst.len())?;
        let (alloc, offset) = self.host_range::<T>("copy_to_device", dst.addr(), dst.len())?;
        alloc.write(offset, bytemuck::cast_slice(src));
        Ok(())
    }

    fn copy_to_host<T: DeviceElement>(&self, src: DeviceView<'_, T>, dst: &mut [T]) -> Result<()> {
        check_copy_len("copy_to_host", dst.len(), src.len())?;
        let (alloc, offset) = self.host_range::<T>("copy_to_host", src.addr(), src.len())?;
        alloc.read(offset, bytemuck::cast_slice_mut(dst));
        Ok(())
    }

    unsafe fn launch<P: KernelParams>(
        &self,
        kernel: Kernel<P>,
        config: LaunchConfig,
        params: P,
    ) -> Result<()> {
        let mut bytes = vec![MaybeUninit::<u8>::uninit(); size_of::<P>()];
        // SAFETY: `bytes` holds size_of::<P>() bytes; this is an untyped copy of `params`'
        // bytes, so the padding of the struct stays (possibly) uninitialized `MaybeUninit`s.
        unsafe {
            std::ptr::copy_nonoverlapping(
                (&params as *const P).cast::<MaybeUninit<u8>>(),
                bytes.as_mut_ptr(),
                size_of::<P>(),
            );
        }
        self.launch_raw(kernel.name(), config, &bytes)
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn is_simulator(&self) -> bool {
        true
    }
}
