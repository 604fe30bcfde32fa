//! The simulator as a [`gpu_host::Device`]: buffers, copies and launches.

use crate::decode::{Kernels, decode_module};
use crate::exec::{self, Launch};
use crate::memory::{Allocation, Heap, SHARED_BASE};
use crate::parse::parse_module;
use crate::profile::{InstrCounts, InstrProfile, KernelProfile};
use crate::racecheck::Checks;
use crate::tensor_map;
use gpu_host::{
    Device, DeviceBuffer, DeviceElement, DeviceView, DeviceViewMut, GpuError, KernelRecorder,
    KernelTime, LaunchConfig, PtxArch, Result, SimErrorKind, TensorMap, TensorMapCache,
    TensorMapDesc, alloc_bytes, check_copy_len, ptx_module, upload_tensor_maps,
};
use kernel_abi::{Kernel, KernelParams};
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::mem::MaybeUninit;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Instant;

/// Largest static + dynamic shared memory of a block: the opt-in limit of H100/H200
/// (227 KiB); an A100 allows 163 KiB.
pub const MAX_SHARED_PER_BLOCK: u32 = 227 * 1024;

/// The SM count the simulator reports ([`Device::multiprocessors`]): small, so that the
/// persistent kernels, which launch one block per SM, loop over several work units per block
/// even at test sizes.
const SIM_MULTIPROCESSORS: u32 = 4;

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
    tensor_maps: TensorMapCache<SimBuffer<u64>>,
    /// Launches so far, by kernel (what a profiler's kernel summary would list).
    launches: Mutex<BTreeMap<&'static str, u64>>,
    /// While a memory profile is being taken: per kernel, its launches and counts.
    memory_profile: Mutex<Option<BTreeMap<&'static str, (u64, InstrCounts)>>>,
    /// [`Device::start_kernel_times`]'s recording, on the host clock.
    kernel_times: KernelRecorder<Instant>,
    kernels: Kernels,
    heap: Arc<Heap>,
    options: SimOptions,
    /// The module's `.target`: `sm_90a` → Sm90a, anything else → Sm80.
    arch: PtxArch,
}

fn parse_error(detail: String) -> GpuError {
    GpuError::Sim { kind: SimErrorKind::Unsupported, detail }
}

impl Simulator {
    /// The simulator of the project's sm_80 module (`gpu_host::ptx_module`);
    /// [`GpuError::PtxNotBuilt`] when `cargo xtask build-ptx` has not run.
    pub fn new() -> Result<Self> {
        Self::from_ptx(ptx_module(PtxArch::Sm80)?.text)
    }

    /// The simulator of the project's sm_90a module (the Hopper kernels: TMA, mbarriers,
    /// `wgmma`), as a compute capability 9.0 GPU loads it; [`GpuError::PtxNotBuilt`] when
    /// `cargo xtask build-ptx` has not built it.
    pub fn hopper() -> Result<Self> {
        Self::from_ptx(ptx_module(PtxArch::Sm90a)?.text)
    }

    /// The simulator of any PTX module text (64-bit addressing). Syntax errors fail here; a
    /// kernel using an instruction the simulator does not implement fails when launched
    /// (see [`Simulator::check_kernels`]). Its [`Device::ptx_arch`] is `Sm90a` when the
    /// `.target` line names `sm_90a`, else `Sm80`.
    pub fn from_ptx(ptx: &str) -> Result<Self> {
        let module = parse_module(ptx).map_err(|e| parse_error(e.to_string()))?;
        if module.address_size != 64 {
            return Err(parse_error(format!(
                ".address_size {} (only 64 is supported)",
                module.address_size
            )));
        }
        let arch = match module.target.iter().any(|t| t == "sm_90a") {
            true => PtxArch::Sm90a,
            false => PtxArch::Sm80,
        };
        Ok(Self {
            tensor_maps: TensorMapCache::default(),
            launches: Mutex::default(),
            memory_profile: Mutex::default(),
            kernel_times: KernelRecorder::default(),
            kernels: decode_module(&module),
            heap: Arc::new(Heap::default()),
            options: SimOptions::default(),
            arch,
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

    /// How many times each kernel has been launched on this simulator (launches that failed
    /// their argument checks do not count), like a profiler's kernel summary: tests use it to
    /// see which kernels a job ran.
    pub fn launch_counts(&self) -> BTreeMap<&'static str, u64> {
        self.launches.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    /// Starts a memory-access profile of every launch from now on ([`crate::profile`]),
    /// discarding any unfinished one. Launches run somewhat slower meanwhile.
    pub fn start_memory_profile(&self) {
        *self.memory_profile.lock().unwrap_or_else(PoisonError::into_inner) = Some(BTreeMap::new());
    }

    /// Ends the memory profile: each kernel launched since [`Simulator::start_memory_profile`]
    /// with its memory instructions' counts, in program order (empty when none was started).
    pub fn take_memory_profile(&self) -> Vec<KernelProfile> {
        let taken = self.memory_profile.lock().unwrap_or_else(PoisonError::into_inner).take();
        let mut kernels = Vec::new();
        for (name, (launches, counts)) in taken.unwrap_or_default() {
            let Some(Ok(kernel)) = self.kernels.get(name) else { continue };
            let mut counts: Vec<_> = counts.into_iter().collect();
            counts.sort_by_key(|(pc, _)| *pc);
            let instrs = counts
                .into_iter()
                .map(|(pc, (kind, stats))| {
                    let info = &kernel.info[pc as usize];
                    InstrProfile { line: info.line, text: info.text.clone(), kind, stats }
                })
                .collect();
            kernels.push(KernelProfile { kernel: name.to_string(), launches, instrs });
        }
        kernels
    }

    /// How many device allocations this simulator has made, freed ones included (a
    /// `cuMemAlloc` count): tests use it to see that a training step allocates nothing once
    /// the first one has run.
    pub fn allocation_count(&self) -> u64 {
        self.heap.allocation_count()
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
        let threads = config.threads_per_block();
        if let Some(max) = kernel.bounds.max_threads
            && threads > max
        {
            return Err(GpuError::invalid(
                name,
                "block",
                format!("{threads} threads per block exceed the entry's .maxntid of {max}"),
            ));
        }
        if let Some(required) = kernel.bounds.required_block
            && required != <[u32; 3]>::from(config.block)
        {
            return Err(GpuError::invalid(
                name,
                "block",
                format!("the block {:?} is not the entry's .reqntid {required:?}", config.block),
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
        *self.launches.lock().unwrap_or_else(PoisonError::into_inner).entry(name).or_default() += 1;
        let global = self.heap.snapshot();
        let o = self.options;
        let profiling =
            self.memory_profile.lock().unwrap_or_else(PoisonError::into_inner).is_some();
        let counts = profiling.then(|| Mutex::new(InstrCounts::new()));
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
            profile: counts.as_ref(),
        };
        let result = exec::run(&launch);
        if let Some(counts) = counts {
            let counts = counts.into_inner().unwrap_or_else(PoisonError::into_inner);
            let mut profile = self.memory_profile.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(kernels) = profile.as_mut() {
                let (launches, total) = kernels.entry(name).or_default();
                *launches += 1;
                crate::profile::merge(total, counts);
            }
        }
        result
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
        format!(
            "ptx-sim (CPU interpreter of the {} PTX, {} kernels)",
            self.arch.name(),
            self.kernels.len()
        )
    }

    fn ptx_arch(&self) -> PtxArch {
        self.arch
    }

    /// `SIM_MULTIPROCESSORS` (4), so that persistent kernels loop.
    fn multiprocessors(&self) -> u32 {
        SIM_MULTIPROCESSORS
    }

    /// [`MAX_SHARED_PER_BLOCK`], which every launch is checked against.
    fn max_shared_per_block(&self) -> u32 {
        MAX_SHARED_PER_BLOCK
    }

    fn tensor_map(&self, desc: &TensorMapDesc) -> Result<TensorMap> {
        desc.validate()?;
        Ok(tensor_map::encode(desc))
    }

    fn with_tensor_maps_in_memory<R>(
        &self,
        descs: &[TensorMapDesc],
        use_maps: impl FnOnce(u64) -> Result<R>,
    ) -> Result<R> {
        self.tensor_maps.with(descs, || upload_tensor_maps(self, descs), use_maps)
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
        let now = || Ok(Instant::now());
        self.kernel_times.time(
            || kernel.name(),
            now,
            || self.launch_raw(kernel.name(), config, &bytes),
        )
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }

    fn start_kernel_times(&self) {
        self.kernel_times.start();
    }

    fn take_kernel_times(&self) -> Result<Vec<KernelTime>> {
        self.kernel_times.take_kernel_times(|start, end| Ok((*end - *start).as_secs_f64() * 1e3))
    }

    fn is_simulator(&self) -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpu_host::kernels::gemm::{Epilogue, GemmEngine, GemmSpec, Precision, gemm};
    use gpu_host::{TensorMapElem, TensorMapSwizzle};
    use half::bf16;

    fn module(target: &str) -> String {
        format!(".version 8.0\n.target {target}\n.address_size 64\n")
    }

    #[test]
    fn the_target_line_decides_the_arch() {
        let sm80 = Simulator::from_ptx(&module("sm_80")).unwrap();
        let sm90a = Simulator::from_ptx(&module("sm_90a")).unwrap();
        let sm90 = Simulator::from_ptx(&module("sm_90")).unwrap();
        assert_eq!(sm80.ptx_arch(), PtxArch::Sm80);
        assert_eq!(sm90a.ptx_arch(), PtxArch::Sm90a);
        assert_eq!(sm90.ptx_arch(), PtxArch::Sm80);
        assert_eq!(sm90a.multiprocessors(), SIM_MULTIPROCESSORS);
        assert!(sm90a.describe().contains("sm_90a"));
    }

    #[test]
    fn tensor_maps_are_validated_then_encoded() {
        let sim = Simulator::from_ptx(&module("sm_90a")).unwrap();
        let desc = TensorMapDesc {
            global_address: 0x7f00_0000_0000,
            elem: TensorMapElem::F32,
            dims: [40, 7],
            row_stride_bytes: 160,
            box_dims: [32, 128],
            swizzle: TensorMapSwizzle::B128,
            layers: None,
        };
        let map = sim.tensor_map(&desc).unwrap();
        let decoded = tensor_map::decode(&map.bytes).unwrap();
        assert_eq!(
            (decoded.dims, decoded.box_dims, decoded.elem_bytes),
            ([40, 7, 1], [32, 128], 4)
        );
        let bad = TensorMapDesc { row_stride_bytes: 168, ..desc };
        let err = sim.tensor_map(&bad).unwrap_err();
        assert!(matches!(err, GpuError::InvalidArgument { arg: "row_stride_bytes", .. }), "{err}");
    }

    #[test]
    fn hopper_loads_the_sm_90a_module() {
        match Simulator::hopper() {
            Ok(sim) => assert_eq!(sim.ptx_arch(), PtxArch::Sm90a),
            Err(e) => assert!(matches!(e, GpuError::PtxNotBuilt { arch: "sm_90a" }), "{e}"),
        }
    }

    /// A bf16 `nn.Linear` forward on the sm_80 simulator: `Auto` runs the `mma.sync` kernel
    /// (correctly), `Wgmma` is refused with the reason.
    #[test]
    fn gemm_engines_on_the_sm_80_simulator() {
        let sim = Simulator::new().expect("the sm_80 PTX (cargo xtask build-ptx)");
        assert_eq!(sim.ptx_arch(), PtxArch::Sm80);
        let (m, n, k) = (20, 24, 40);
        let spec = GemmSpec::linear_forward(m, n, k, Precision::Bf16);
        let value = |i: usize| bf16::from_f32(((i * 7 % 13) as f32 - 6.0) / 8.0);
        let x: Vec<bf16> = (0..m * k).map(value).collect();
        let w: Vec<bf16> = (0..n * k).map(|i| value(i + 5)).collect();
        let (xd, wd) = (sim.upload(&x).unwrap(), sim.upload(&w).unwrap());
        let mut y = sim.alloc::<f32>(m * n).unwrap();
        assert_eq!(
            spec.engine_on(&sim, xd.view().addr(), wd.view().addr()).unwrap(),
            GemmEngine::MmaSync
        );
        gemm(&sim, &spec, xd.view(), wd.view(), y.view_mut(), Epilogue::default()).unwrap();
        let got = sim.download(y.view()).unwrap();
        for (i, got) in got.iter().enumerate() {
            let (r, c) = (i / n, i % n);
            let want: f32 = (0..k).map(|j| x[r * k + j].to_f32() * w[c * k + j].to_f32()).sum();
            assert!(
                (got - want).abs() <= 1e-4 * (1.0 + want.abs()),
                "y[{r}][{c}] = {got}, want {want}"
            );
        }
        let forced = GemmSpec { engine: GemmEngine::Wgmma, ..spec };
        let err = gemm(&sim, &forced, xd.view(), wd.view(), y.view_mut(), Epilogue::default())
            .unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "gemm", arg: "engine", .. }),
            "{err}"
        );
        assert!(err.to_string().contains("sm_80 PTX module"), "{err}");
    }
}
