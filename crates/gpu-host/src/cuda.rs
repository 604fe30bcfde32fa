//! The CUDA runtime: one device, one stream, the project's PTX module.

use crate::device::{Device, DeviceBuffer, LaunchConfig, alloc_bytes, check_copy_len};
use crate::element::DeviceElement;
use crate::error::{DriverContext, GpuError, Result};
use crate::kernel_times::{KernelRecorder, KernelTime};
use crate::ptx::{CUBIN_DIR_ENV, PDL_ENV, PtxArch, PtxModule, ptx_module};
use crate::tensor_map::{
    TensorMap, TensorMapCache, TensorMapDesc, TensorMapElem, TensorMapSwizzle, upload_tensor_maps,
};
use crate::view::{DeviceView, DeviceViewMut};
use cudarc::driver::sys::{
    CUdevice_attribute, CUfunction_attribute, CUresult, CUtensorMap, CUtensorMapDataType,
    CUtensorMapFloatOOBfill, CUtensorMapInterleave, CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use cudarc::driver::{
    CudaContext, CudaFunction, CudaModule, CudaSlice, CudaStream, DevicePtr, DeviceRepr,
    DriverError, PushKernelArg, result,
};
use kernel_abi::{Kernel, KernelParams};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Static facts about the GPU in use.
#[derive(Clone, Debug)]
pub struct GpuInfo {
    /// Device name as the driver reports it.
    pub name: String,
    /// Compute capability (major, minor).
    pub compute_capability: (i32, i32),
    /// The PTX module loaded for it.
    pub ptx_arch: PtxArch,
    /// Where the module's machine code came from.
    pub kernel_code: KernelCode,
    /// Number of streaming multiprocessors.
    pub multiprocessors: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// Largest dynamic shared memory a block can opt into, in bytes.
    pub max_shared_per_block: u32,
    /// Whether kernels are launched with programmatic dependent launch ([`PDL_ENV`] is `1` and
    /// the module is sm_90a, whose kernels all start with `griddepcontrol.wait`).
    pub programmatic_launch: bool,
}

/// Where the machine code of a [`Gpu`]'s kernels came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelCode {
    /// A cubin ptxas assembled ahead of time from this build's PTX, found through
    /// [`CUBIN_DIR_ENV`].
    Cubin(PathBuf),
    /// The driver JIT-compiled this build's PTX (or took it from its compute cache).
    Jit {
        /// Why no cubin was used although [`CUBIN_DIR_ENV`] is set (none when it is unset).
        cubin_skipped: Option<String>,
    },
}

impl KernelCode {
    /// `cubin` or `PTX JIT`, for one-line descriptions.
    pub fn label(&self) -> &'static str {
        match self {
            KernelCode::Cubin(_) => "cubin",
            KernelCode::Jit { .. } => "PTX JIT",
        }
    }
}

impl std::fmt::Display for KernelCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            KernelCode::Cubin(path) => write!(f, "cubin {}", path.display()),
            KernelCode::Jit { cubin_skipped: None } => {
                f.write_str("PTX JIT-compiled by the driver")
            }
            KernelCode::Jit { cubin_skipped: Some(why) } => {
                write!(f, "PTX JIT-compiled by the driver ({why})")
            }
        }
    }
}

/// A timestamp in a GPU's stream of work: a CUDA event recorded with timing enabled
/// ([`Device::record_event`]).
pub struct DeviceEvent(cudarc::driver::CudaEvent);

impl DeviceEvent {
    /// Milliseconds of device time from `self` to the later `end` (waits for both).
    pub fn elapsed_ms(&self, end: &DeviceEvent) -> Result<f32> {
        self.0.elapsed_ms(&end.0).during("reading the time between two events")
    }
}

/// A CUDA GPU with the project's kernels loaded.
///
/// Everything is issued on one stream, so work runs in issue order and buffers need no
/// cross-stream event tracking (it is disabled).
pub struct Gpu {
    /// Declared first, so dropped first: its buffers are freed while the stream lives.
    tensor_maps: TensorMapCache<CudaBuffer<u64>>,
    ctx: Arc<CudaContext>,
    stream: Arc<CudaStream>,
    module: Arc<CudaModule>,
    functions: Mutex<HashMap<&'static str, LoadedFunction>>,
    info: GpuInfo,
    kernel_times: KernelRecorder<DeviceEvent>,
}

struct LoadedFunction {
    function: CudaFunction,
    /// Dynamic shared memory the function has been allowed so far (48 KiB by default).
    shared_limit: u32,
    /// The most threads per block a launch may have (`.maxntid`, registers, the GPU).
    max_threads: u32,
}

const DEFAULT_SHARED_LIMIT: u32 = 48 * 1024;

fn is_no_device(err: &DriverError) -> bool {
    err.0 == CUresult::CUDA_ERROR_NO_DEVICE
}

/// The cubin [`Gpu::new`] should load instead of the PTX `module` on compute capability `cc`,
/// given the value of [`CUBIN_DIR_ENV`]: `None` when that is unset or empty (load the PTX,
/// nothing to say), else the cubin's path or why there is none to load.
fn cubin_to_load(
    dir: Option<std::ffi::OsString>,
    module: &PtxModule,
    cc: (i32, i32),
) -> Option<std::result::Result<PathBuf, String>> {
    let dir = dir.filter(|dir| !dir.is_empty())?;
    if !module.arch.cubin_runs_on(cc.0, cc.1) {
        let name = module.arch.name();
        return Some(Err(format!(
            "a {name} cubin does not run on compute capability {}.{}",
            cc.0, cc.1
        )));
    }
    let path = PathBuf::from(dir).join(module.cubin_file_name());
    Some(match path.is_file() {
        true => Ok(path),
        false => Err(format!("no cubin of this PTX: {} is missing", path.display())),
    })
}

/// Loads the PTX `module`: from its cubin where [`cubin_to_load`] finds one, else from the
/// PTX, which the driver JIT-compiles. A cubin the driver rejects falls back to the PTX, and
/// [`KernelCode`] says why.
fn load_kernels(
    ctx: &Arc<CudaContext>,
    module: &PtxModule,
    cc: (i32, i32),
) -> Result<(Arc<CudaModule>, KernelCode)> {
    let arch = module.arch;
    let cubin_skipped = match cubin_to_load(std::env::var_os(CUBIN_DIR_ENV), module, cc) {
        None => None,
        Some(Err(why)) => Some(why),
        Some(Ok(path)) => {
            let loaded = std::fs::read(&path).map_err(|e| e.to_string()).and_then(|image| {
                ctx.load_module(cudarc::nvrtc::Ptx::from_binary(image)).map_err(|e| e.to_string())
            });
            match loaded {
                Ok(module) => return Ok((module, KernelCode::Cubin(path))),
                Err(e) => Some(format!("loading {} failed: {e}", path.display())),
            }
        }
    };
    let module = ctx.load_module(cudarc::nvrtc::Ptx::from_src(module.text)).map_err(|source| {
        GpuError::PtxLoad {
            arch: arch.name(),
            hint: match source.0 {
                CUresult::CUDA_ERROR_UNSUPPORTED_PTX_VERSION => {
                    " (the driver is older than the PTX ISA version: update the NVIDIA driver)"
                }
                _ => "",
            },
            source,
        }
    })?;
    Ok((module, KernelCode::Jit { cubin_skipped }))
}

impl Gpu {
    /// Opens GPU 0. See [`Gpu::with_ordinal`].
    pub fn new() -> Result<Self> {
        Self::with_ordinal(0)
    }

    /// Opens GPU `ordinal` and loads the PTX module for its architecture (its precompiled
    /// cubin where [`CUBIN_DIR_ENV`] names a folder that holds it, see [`KernelCode`]).
    ///
    /// Errors, in the order they are checked: [`GpuError::NoDriver`] (no libcuda, or it
    /// fails to initialise), [`GpuError::NoDevice`], [`GpuError::UnsupportedArch`],
    /// [`GpuError::PtxNotBuilt`] or [`GpuError::PtxFile`], [`GpuError::PtxLoad`]. Never panics.
    pub fn with_ordinal(ordinal: usize) -> Result<Self> {
        // SAFETY: only attempts to dlopen libcuda; cudarc panics on first use without it.
        if !unsafe { cudarc::driver::sys::is_culib_present() } {
            return Err(GpuError::NoDriver("libcuda.so (the NVIDIA driver) not found".into()));
        }
        let count = CudaContext::device_count().map_err(|e| match is_no_device(&e) {
            true => GpuError::NoDevice,
            false => GpuError::NoDriver(format!("driver initialisation failed: {e}")),
        })?;
        if ordinal >= count.max(0) as usize {
            return Err(if count <= 0 {
                GpuError::NoDevice
            } else {
                GpuError::invalid("Gpu::with_ordinal", "ordinal", format!("only {count} GPUs"))
            });
        }
        let ctx = CudaContext::new(ordinal).during("creating the CUDA context")?;
        // SAFETY: the runtime uses a single stream, so no cross-stream synchronisation is
        // needed for buffers allocated from here on.
        unsafe { ctx.disable_event_tracking() };
        let name = ctx.name().during("reading the device name")?;
        let (major, minor) = ctx.compute_capability().during("reading compute capability")?;
        let ptx_arch = PtxArch::for_compute_capability(major, minor)
            .ok_or_else(|| GpuError::UnsupportedArch { name: name.clone(), major, minor })?;
        let ptx = ptx_module(ptx_arch)?;
        let (module, kernel_code) = load_kernels(&ctx, &ptx, (major, minor))?;
        let attribute = |a| ctx.attribute(a).during("reading device attributes");
        let info = GpuInfo {
            name,
            compute_capability: (major, minor),
            ptx_arch,
            kernel_code,
            multiprocessors: attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
            )? as u32,
            total_memory: ctx.total_mem().during("reading device memory size")?,
            max_shared_per_block: attribute(
                CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
            )? as u32,
            // The sm_80 module has no `griddepcontrol.wait`: its kernels must not start early.
            programmatic_launch: ptx_arch == PtxArch::Sm90a
                && std::env::var_os(PDL_ENV).is_some_and(|v| v == "1"),
        };
        let stream = ctx.default_stream();
        Ok(Self {
            tensor_maps: TensorMapCache::default(),
            ctx,
            stream,
            module,
            functions: Mutex::new(HashMap::new()),
            info,
            kernel_times: KernelRecorder::default(),
        })
    }

    /// A timing event recorded in the stream after the work issued so far.
    fn event(&self) -> Result<DeviceEvent> {
        let timed = cudarc::driver::sys::CUevent_flags::CU_EVENT_DEFAULT;
        let event = self.stream.record_event(Some(timed)).during("recording an event")?;
        Ok(DeviceEvent(event))
    }

    /// Static facts about this GPU.
    pub fn info(&self) -> &GpuInfo {
        &self.info
    }

    /// The cudarc context (for baselines such as cuBLAS in benchmarks).
    pub fn context(&self) -> &Arc<CudaContext> {
        &self.ctx
    }

    /// The stream all work is issued on.
    pub fn stream(&self) -> &Arc<CudaStream> {
        &self.stream
    }

    /// Turns programmatic dependent launch ([`GpuInfo::programmatic_launch`]) on or off for
    /// this GPU's later launches; [`PDL_ENV`] sets it when the GPU is opened. An
    /// `InvalidArgument` on a GPU that runs the sm_80 module, whose kernels do not wait for
    /// the one before them.
    pub fn set_programmatic_launch(&mut self, on: bool) -> Result<()> {
        if on && self.info.ptx_arch != PtxArch::Sm90a {
            return Err(GpuError::invalid(
                "Gpu::set_programmatic_launch",
                "on",
                "the sm_80 module's kernels have no griddepcontrol.wait".to_string(),
            ));
        }
        self.info.programmatic_launch = on;
        Ok(())
    }

    /// Launches `function` with programmatic stream serialization allowed
    /// ([`GpuInfo::programmatic_launch`]): it may be scheduled before the previous kernel in
    /// the stream has completed, and its `griddepcontrol.wait` holds it until then.
    ///
    /// # Safety
    /// As [`Device::launch`]; `function` is a kernel of the sm_90a module (all of which start
    /// with that wait) and `params` its parameter struct.
    unsafe fn launch_programmatic<P: KernelParams>(
        &self,
        function: &CudaFunction,
        config: &LaunchConfig,
        params: &mut ByValue<P>,
    ) -> std::result::Result<(), DriverError> {
        use cudarc::driver::sys;
        self.ctx.bind_to_thread()?;
        let mut attribute = sys::CUlaunchAttribute {
            id: sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION,
            pad: [0; 4],
            value: sys::CUlaunchAttributeValue { programmaticStreamSerializationAllowed: 1 },
        };
        let launch = sys::CUlaunchConfig {
            gridDimX: config.grid.0,
            gridDimY: config.grid.1,
            gridDimZ: config.grid.2,
            blockDimX: config.block.0,
            blockDimY: config.block.1,
            blockDimZ: config.block.2,
            sharedMemBytes: config.shared_mem_bytes,
            hStream: self.stream.cu_stream(),
            attrs: &mut attribute,
            numAttrs: 1,
        };
        let mut args = [(params as *mut ByValue<P>).cast::<std::ffi::c_void>()];
        // SAFETY: the configuration and its one attribute live through the call; `args` holds
        // the address of the single by-value parameter struct the kernel takes (the caller's
        // contract), which the driver copies before returning.
        unsafe {
            sys::cuLaunchKernelEx(
                &launch,
                function.cu_function(),
                args.as_mut_ptr(),
                std::ptr::null_mut(),
            )
        }
        .result()
    }

    /// The function `name`, checked to accept `config`'s block and allowed its dynamic shared
    /// memory.
    fn function(&self, name: &'static str, config: &LaunchConfig) -> Result<CudaFunction> {
        // The module and attribute calls act on the calling thread's current context.
        self.ctx.bind_to_thread().during(name)?;
        let mut functions = self.functions.lock().unwrap_or_else(|p| p.into_inner());
        if !functions.contains_key(name) {
            let function = self.module.load_function(name).map_err(|e| match e.0 {
                CUresult::CUDA_ERROR_NOT_FOUND => GpuError::MissingKernel { name },
                _ => GpuError::Driver { op: name, source: e },
            })?;
            let max_threads = function
                .get_attribute(CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
                .during(name)? as u32;
            let shared_limit = DEFAULT_SHARED_LIMIT;
            functions.insert(name, LoadedFunction { function, shared_limit, max_threads });
        }
        let loaded = functions.get_mut(name).expect("inserted above");
        let threads = config.threads_per_block();
        if threads > u64::from(loaded.max_threads) {
            return Err(GpuError::invalid(
                name,
                "block",
                format!(
                    "{threads} threads per block exceed the {} this kernel allows here (its \
                     .maxntid, or its registers)",
                    loaded.max_threads
                ),
            ));
        }
        let shared_bytes = config.shared_mem_bytes;
        if shared_bytes > loaded.shared_limit {
            if shared_bytes > self.info.max_shared_per_block {
                return Err(GpuError::invalid(
                    name,
                    "shared_mem_bytes",
                    format!(
                        "{shared_bytes} bytes exceeds the device limit of {} per block",
                        self.info.max_shared_per_block
                    ),
                ));
            }
            loaded
                .function
                .set_attribute(
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    shared_bytes as i32,
                )
                .during(name)?;
            loaded.shared_limit = shared_bytes;
        }
        Ok(loaded.function.clone())
    }

    fn out_of_memory(&self, bytes: usize, err: DriverError) -> GpuError {
        if err.0 != CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return GpuError::Driver { op: "allocating device memory", source: err };
        }
        let (free, total) = self.ctx.mem_get_info().unwrap_or((0, self.info.total_memory));
        GpuError::OutOfMemory { bytes, free, total }
    }
}

/// A kernel parameter struct passed by value (`cuLaunchKernel` copies its bytes).
#[repr(transparent)]
struct ByValue<P>(P);

// SAFETY: `P: KernelParams` is a #[repr(C)] plain-data struct whose layout the kernel reads.
unsafe impl<P: KernelParams> DeviceRepr for ByValue<P> {}

/// A device allocation on a [`Gpu`]: `len` elements (an empty buffer allocates one, since the
/// driver refuses empty allocations).
pub struct CudaBuffer<T> {
    /// Owns the memory (freed, ordered after the launches issued, on drop).
    _allocation: CudaSlice<T>,
    addr: u64,
    len: usize,
}

impl<T: DeviceElement> DeviceBuffer<T> for CudaBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn view(&self) -> DeviceView<'_, T> {
        // SAFETY: the address and length lie within the live allocation borrowed here.
        unsafe { DeviceView::from_raw_parts(self.addr, self.len) }
    }

    fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        // SAFETY: as above, borrowed mutably.
        unsafe { DeviceViewMut::from_raw_parts(self.addr, self.len) }
    }
}

impl Device for Gpu {
    type Buffer<T: DeviceElement> = CudaBuffer<T>;

    fn describe(&self) -> String {
        let i = &self.info;
        format!(
            "{} (compute {}.{}, {} SMs, {:.1} GiB, PTX {}, {}{})",
            i.name,
            i.compute_capability.0,
            i.compute_capability.1,
            i.multiprocessors,
            i.total_memory as f64 / (1u64 << 30) as f64,
            i.ptx_arch.name(),
            i.kernel_code.label(),
            if i.programmatic_launch { ", programmatic dependent launch" } else { "" }
        )
    }

    fn ptx_arch(&self) -> PtxArch {
        self.info.ptx_arch
    }

    fn multiprocessors(&self) -> u32 {
        self.info.multiprocessors
    }

    fn max_shared_per_block(&self) -> u32 {
        self.info.max_shared_per_block
    }

    fn tensor_map(&self, desc: &TensorMapDesc) -> Result<TensorMap> {
        const OP: &str = "cuTensorMapEncodeTiled";
        desc.validate()?;
        // cudarc panics on a missing symbol; drivers before CUDA 12.0 lack this one (they
        // cannot load the sm_90a module either, but the call must not panic on them).
        // SAFETY: a symbol lookup in the loaded driver library; the pointer is not called.
        let present = unsafe { cudarc::driver::sys::culib().get::<*const ()>(OP.as_bytes()) };
        if present.is_err() {
            return Err(GpuError::NoDriver(format!("the driver has no {OP} (CUDA 12.0+ needed)")));
        }
        let data_type = match desc.elem {
            TensorMapElem::F32 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
            TensorMapElem::Bf16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
            TensorMapElem::F16 => CUtensorMapDataType::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        };
        let swizzle = match desc.swizzle {
            TensorMapSwizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
            TensorMapSwizzle::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
            TensorMapSwizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
            TensorMapSwizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
        };
        // Dimension 0 is contiguous: the strides are those of dimensions 1 (and 2). A rank-3
        // box takes one matrix.
        let layers = desc.layers.map_or((1, 0), |l| (l.count, l.stride_bytes));
        let global_dim: [u64; 3] = [desc.dims[0], desc.dims[1], layers.0];
        let global_strides: [u64; 2] = [desc.row_stride_bytes, layers.1];
        let box_dim: [u32; 3] = [desc.box_dims[0], desc.box_dims[1], 1];
        let element_strides: [u32; 3] = [1, 1, 1];
        let mut map = CUtensorMap { opaque: [0; 16] };
        self.ctx.bind_to_thread().during(OP)?;
        // SAFETY: `map` is a writable CUtensorMap; the arrays hold at least the rank's lengths
        // (rank, rank - 1, rank, rank) and outlive the call; the address is only encoded, not
        // dereferenced.
        let result = unsafe {
            cudarc::driver::sys::cuTensorMapEncodeTiled(
                &mut map,
                data_type,
                desc.rank(),
                desc.global_address as *mut std::ffi::c_void,
                global_dim.as_ptr(),
                global_strides.as_ptr(),
                box_dim.as_ptr(),
                element_strides.as_ptr(),
                CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
                swizzle,
                CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                // NONE fills out-of-bounds elements with zeros (the other mode is NaN).
                CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
            )
        };
        result.result().during(OP)?;
        let mut bytes = [0u8; 128];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(map.opaque) {
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        Ok(TensorMap { bytes })
    }

    fn with_tensor_maps_in_memory<R>(
        &self,
        descs: &[TensorMapDesc],
        use_maps: impl FnOnce(u64) -> Result<R>,
    ) -> Result<R> {
        self.tensor_maps.with(descs, || upload_tensor_maps(self, descs), use_maps)
    }

    fn alloc<T: DeviceElement>(&self, len: usize) -> Result<CudaBuffer<T>> {
        let bytes = alloc_bytes::<T>(len)?;
        // SAFETY: device memory of plain-data elements; contents are unspecified but every
        // bit pattern is a valid `T` (DeviceElement contract).
        let slice = unsafe { self.stream.alloc::<T>(len.max(1)) }
            .map_err(|e| self.out_of_memory(bytes, e))?;
        let addr = slice.device_ptr(&self.stream).0;
        Ok(CudaBuffer { _allocation: slice, addr, len })
    }

    fn copy_to_device<T: DeviceElement>(&self, src: &[T], dst: DeviceViewMut<'_, T>) -> Result<()> {
        check_copy_len("copy_to_device", src.len(), dst.len())?;
        if src.is_empty() {
            return Ok(());
        }
        self.ctx.bind_to_thread().during("copy_to_device")?;
        // SAFETY: `dst` is a live view of `src.len()` elements on this device; the driver
        // stages pageable host memory before returning, so `src` may be reused afterwards.
        unsafe { result::memcpy_htod_async(dst.addr(), src, self.stream.cu_stream()) }
            .during("copy_to_device")
    }

    fn copy_to_host<T: DeviceElement>(&self, src: DeviceView<'_, T>, dst: &mut [T]) -> Result<()> {
        check_copy_len("copy_to_host", dst.len(), src.len())?;
        if dst.is_empty() {
            return Ok(());
        }
        self.ctx.bind_to_thread().during("copy_to_host")?;
        // SAFETY: `src` is a live view of `dst.len()` elements; the stream is synchronised
        // before `dst` is used.
        unsafe { result::memcpy_dtoh_async(dst, src.addr(), self.stream.cu_stream()) }
            .during("copy_to_host")?;
        self.stream.synchronize().during("copy_to_host")
    }

    unsafe fn launch<P: KernelParams>(
        &self,
        kernel: Kernel<P>,
        config: LaunchConfig,
        params: P,
    ) -> Result<()> {
        let name = kernel.name();
        config.check(name)?;
        let function = self.function(name, &config)?;
        let mut params = ByValue(params);
        let stamp = || self.event();
        if self.info.programmatic_launch {
            // SAFETY: as below; `programmatic_launch` holds only for the sm_90a module.
            let mut launch =
                || unsafe { self.launch_programmatic(&function, &config, &mut params) };
            return self.kernel_times.time(|| name, stamp, || launch().during(name));
        }
        let mut launch = self.stream.launch_builder(&function);
        launch.arg(&params);
        let cfg = cudarc::driver::LaunchConfig {
            grid_dim: config.grid,
            block_dim: config.block,
            shared_mem_bytes: config.shared_mem_bytes,
        };
        // SAFETY: the caller guarantees the pointers in `params` cover what the kernel
        // accesses; the parameter layout matches the kernel (checked by build-ptx).
        self.kernel_times.time(
            || name,
            stamp,
            || unsafe { launch.launch(cfg) }.map(drop).during(name),
        )
    }

    fn synchronize(&self) -> Result<()> {
        self.stream.synchronize().during("synchronize")
    }

    fn record_event(&self) -> Result<Option<DeviceEvent>> {
        self.event().map(Some)
    }

    fn start_kernel_times(&self) {
        self.kernel_times.start();
    }

    fn take_kernel_times(&self) -> Result<Vec<KernelTime>> {
        self.synchronize()?;
        self.kernel_times.take_kernel_times(|start, end| Ok(f64::from(start.elapsed_ms(end)?)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cubin is the one named after this very PTX, in the folder the variable names, on a
    /// GPU it runs on; anything else loads the PTX, saying why (nothing when unset or empty).
    #[test]
    fn the_cubin_loaded_is_the_one_of_this_ptx() {
        let dir = std::env::temp_dir().join(format!("gpu-host-cubins-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let text = ".version 8.0\n.target sm_90a\n";
        let module = PtxModule { arch: PtxArch::Sm90a, text, digest: "0123456789abcdef" };
        let cubin = dir.join("kernels-sm_90a-0123456789abcdef.cubin");
        std::fs::write(&cubin, b"\x7fELF").unwrap();
        let os = |p: &std::path::Path| Some(p.as_os_str().to_owned());
        assert_eq!(cubin_to_load(None, &module, (9, 0)), None);
        assert_eq!(cubin_to_load(Some("".into()), &module, (9, 0)), None);
        assert_eq!(cubin_to_load(os(&dir), &module, (9, 0)), Some(Ok(cubin)));
        let another = PtxModule { digest: "fedcba9876543210", ..module };
        let stale = cubin_to_load(os(&dir), &another, (9, 0));
        assert!(stale.unwrap().unwrap_err().starts_with("no cubin of this PTX"));
        let sm_80 = PtxModule { arch: PtxArch::Sm80, ..module };
        let elsewhere = cubin_to_load(os(&dir), &sm_80, (9, 0)).unwrap().unwrap_err();
        assert_eq!(elsewhere, "a sm_80 cubin does not run on compute capability 9.0");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
