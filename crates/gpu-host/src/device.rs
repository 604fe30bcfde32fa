//! The runtime abstraction every launcher is written against.

use crate::cuda::DeviceEvent;
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::kernel_times::KernelTime;
use crate::ptx::PtxArch;
use crate::tensor_map::{TensorMap, TensorMapDesc};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::{Kernel, KernelParams};

/// Grid, block and dynamic shared memory of one launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchConfig {
    /// Blocks in x, y, z.
    pub grid: (u32, u32, u32),
    /// Threads per block in x, y, z.
    pub block: (u32, u32, u32),
    /// Bytes of dynamic shared memory per block.
    pub shared_mem_bytes: u32,
}

/// Largest grid in y and z, and threads per block, on every sm_80+ GPU.
const MAX_GRID_YZ: u32 = 65_535;
const MAX_BLOCK_THREADS: u64 = 1024;

impl LaunchConfig {
    /// A one-dimensional launch with no dynamic shared memory.
    pub fn linear(blocks: u32, threads: u32) -> Self {
        Self { grid: (blocks, 1, 1), block: (threads, 1, 1), shared_mem_bytes: 0 }
    }

    /// Threads per block.
    pub fn threads_per_block(&self) -> u64 {
        let (bx, by, bz) = self.block;
        u64::from(bx) * u64::from(by) * u64::from(bz)
    }

    /// Rejects shapes no sm_80+ GPU accepts, with an error naming `kernel`.
    pub fn check(&self, kernel: &'static str) -> Result<()> {
        let (gx, gy, gz) = self.grid;
        let bad = |arg, reason: String| Err(GpuError::invalid(kernel, arg, reason));
        let grid_ok = gx > 0 && gy > 0 && gz > 0 && gx <= i32::MAX as u32;
        if !grid_ok || gy > MAX_GRID_YZ || gz > MAX_GRID_YZ {
            return bad("grid", format!("{:?} is empty or too large", self.grid));
        }
        let threads = self.threads_per_block();
        if threads == 0 || threads > MAX_BLOCK_THREADS || self.block.2 > 64 {
            return bad("block", format!("{:?} must hold 1..=1024 threads", self.block));
        }
        Ok(())
    }
}

/// A device allocation of `len()` elements of `T`, freed on drop.
///
/// The free is ordered after the work already issued: a buffer may be dropped as soon as the
/// launches that use it have been issued (a [`crate::Gpu`] frees it stream-ordered, or
/// synchronises first where the driver has no stream-ordered allocator; the simulator's
/// launches have completed when they return).
pub trait DeviceBuffer<T: DeviceElement> {
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether the buffer has no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The whole buffer, read-only.
    fn view(&self) -> DeviceView<'_, T>;
    /// The whole buffer, writable.
    fn view_mut(&mut self) -> DeviceViewMut<'_, T>;
}

/// A kernel runtime: CUDA ([`crate::Gpu`]) or the PTX simulator.
///
/// Work is ordered as issued (one stream). Launchers in [`crate::kernels`] are generic over
/// this trait, so tests run the same code on every runtime.
pub trait Device {
    /// This runtime's buffer type.
    type Buffer<T: DeviceElement>: DeviceBuffer<T>;

    /// Human-readable description (device name and architecture).
    fn describe(&self) -> String;

    /// The PTX module this runtime loaded (which decides the kernels it has: the `sm_90a`
    /// module adds the Hopper entries, `kernel_abi::ALL_HOPPER_KERNELS`).
    fn ptx_arch(&self) -> PtxArch;

    /// Streaming multiprocessors, for sizing persistent grids (one block per SM).
    fn multiprocessors(&self) -> u32;

    /// The most shared memory (static and dynamic) one block may use here, with the opt-in
    /// past 48 KB that launches apply for themselves: what decides whether a kernel that
    /// stages a whole row in shared memory can run.
    fn max_shared_per_block(&self) -> u32;

    /// Encodes a TMA tensor map for kernels of this runtime: [`TensorMapDesc::validate`]
    /// first (an [`GpuError::InvalidArgument`] naming the field), then the runtime's encoding
    /// (the driver's on a GPU). The result is plain bytes: copy it to device memory (or a
    /// kernel parameter) for the kernel to use.
    fn tensor_map(&self, desc: &TensorMapDesc) -> Result<TensorMap>;

    /// Runs `use_maps` (which launches kernels that read their tensor maps from global
    /// memory) with the device address of `descs` encoded ([`Device::tensor_map`]), 128 bytes
    /// each one after another from a 64-byte aligned address. The maps stay valid for every
    /// launch `use_maps` issues, whatever other threads do meanwhile. Runtimes keep them in a
    /// [`crate::TensorMapCache`], so asking again for the same descriptors uploads nothing.
    fn with_tensor_maps_in_memory<R>(
        &self,
        descs: &[TensorMapDesc],
        use_maps: impl FnOnce(u64) -> Result<R>,
    ) -> Result<R>;

    /// Allocates `len` elements with unspecified contents.
    fn alloc<T: DeviceElement>(&self, len: usize) -> Result<Self::Buffer<T>>;

    /// Copies `src` into `dst` (same length).
    fn copy_to_device<T: DeviceElement>(&self, src: &[T], dst: DeviceViewMut<'_, T>) -> Result<()>;

    /// Copies `src` into `dst` (same length), waiting for earlier work that writes `src`.
    fn copy_to_host<T: DeviceElement>(&self, src: DeviceView<'_, T>, dst: &mut [T]) -> Result<()>;

    /// Launches `kernel` with `params`.
    ///
    /// # Safety
    /// Every pointer in `params` must come from a live view of this device that covers what
    /// the kernel will access given the other parameters and `config`; the typed launchers in
    /// [`crate::kernels`] establish this.
    unsafe fn launch<P: KernelParams>(
        &self,
        kernel: Kernel<P>,
        config: LaunchConfig,
        params: P,
    ) -> Result<()>;

    /// Waits for all issued work and reports any asynchronous failure.
    fn synchronize(&self) -> Result<()>;

    /// Records a timestamp after the work issued so far, on a runtime with a device clock (a
    /// CUDA GPU: an event in its stream); `None` on the simulator, whose launches have finished
    /// when they return.
    fn record_event(&self) -> Result<Option<DeviceEvent>> {
        Ok(None)
    }

    /// Starts timing every kernel launch, discarding an unfinished recording: on a CUDA GPU by
    /// events around each launch (device time), on the simulator by the host clock. A no-op on
    /// a runtime that records nothing.
    fn start_kernel_times(&self) {}

    /// Ends the recording of [`Device::start_kernel_times`] (waiting for the device): each
    /// kernel's launches and summed time, in the order of their first launch. Empty when none
    /// was started or the runtime records nothing.
    fn take_kernel_times(&self) -> Result<Vec<KernelTime>> {
        Ok(Vec::new())
    }

    /// Whether this runtime interprets the PTX on the CPU (the PTX simulator). Only for tests
    /// whose full sizes are too slow to interpret: they may pick smaller sizes on it (keeping
    /// the edge cases), never skip it.
    fn is_simulator(&self) -> bool {
        false
    }

    /// Allocates a buffer holding a copy of `src`.
    fn upload<T: DeviceElement>(&self, src: &[T]) -> Result<Self::Buffer<T>> {
        let mut buffer = self.alloc(src.len())?;
        self.copy_to_device(src, buffer.view_mut())?;
        Ok(buffer)
    }

    /// Copies a view back into a new vector.
    fn download<T: DeviceElement>(&self, src: DeviceView<'_, T>) -> Result<Vec<T>> {
        let mut host = vec![T::zeroed(); src.len()];
        self.copy_to_host(src, &mut host)?;
        Ok(host)
    }
}

/// Fails unless the host and device sides of a copy have the same length (for [`Device`]
/// implementations).
pub fn check_copy_len(op: &'static str, host: usize, device: usize) -> Result<()> {
    if host != device {
        return Err(GpuError::invalid(
            op,
            "dst",
            format!("host side has {host} elements, device side {device}"),
        ));
    }
    Ok(())
}

/// Size in bytes of `len` elements of `T`, or an error if it overflows (for [`Device`]
/// implementations' `alloc`).
pub fn alloc_bytes<T: DeviceElement>(len: usize) -> Result<usize> {
    len.checked_mul(size_of::<T>()).ok_or_else(|| {
        GpuError::invalid("alloc", "len", format!("{len} elements overflow usize bytes"))
    })
}
