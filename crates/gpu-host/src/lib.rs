//! Host side of the project's GPU kernels.
//!
//! - [`Device`]: what a kernel runtime offers (allocate, copy, launch, synchronize). [`Gpu`]
//!   implements it on CUDA through `cudarc`; the PTX simulator implements it on the CPU, so
//!   every launcher and test runs on both.
//! - [`DeviceView`] / [`DeviceViewMut`]: typed, borrow-checked windows into device buffers,
//!   the arguments of every launcher.
//! - [`tensor_map`]: TMA tensor-map descriptors, which [`Device::tensor_map`] encodes.
//! - [`kernels`]: one safe function per kernel. Each checks shapes, lengths and alignment and
//!   returns [`GpuError::InvalidArgument`] naming the argument, then launches.
//!
//! Nothing here panics on a machine without CUDA: [`Gpu::new`] returns
//! [`GpuError::NoDriver`] / [`GpuError::NoDevice`] / [`GpuError::PtxNotBuilt`].

mod cuda;
mod device;
mod element;
mod error;
mod kernel_times;
pub mod kernels;
#[cfg(test)]
mod mock;
pub mod provenance;
mod ptx;
pub mod tensor_map;
mod view;

pub use cuda::{DeviceEvent, Gpu, GpuInfo, KernelCode};
pub use device::{Device, DeviceBuffer, LaunchConfig, alloc_bytes, check_copy_len};
pub use element::DeviceElement;
pub use error::{GpuError, Result, SimErrorKind};
pub use kernel_times::{KernelRecorder, KernelTime, Span, SpanRecorder};
pub use ptx::{CUBIN_DIR_ENV, PDL_ENV, PTX_DIR_ENV, PtxArch, PtxModule, ptx_digest, ptx_module};
pub use tensor_map::{
    TensorMap, TensorMapCache, TensorMapDesc, TensorMapElem, TensorMapLayers, TensorMapSwizzle,
    upload_tensor_maps,
};
pub use view::{DeviceView, DeviceViewMut};
