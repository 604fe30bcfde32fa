//! A [`Device`] for launcher unit tests: host memory at made-up addresses, launches recorded
//! (kernel, configuration, parameters) instead of run.

use crate::device::{Device, DeviceBuffer, LaunchConfig, alloc_bytes, check_copy_len};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::ptx::PtxArch;
use crate::tensor_map::{TensorMap, TensorMapCache, TensorMapDesc, upload_tensor_maps};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::{Kernel, KernelParams};
use std::any::Any;
use std::marker::PhantomData;
use std::sync::Mutex;

/// One recorded launch.
pub(crate) struct Launched {
    pub name: &'static str,
    pub config: LaunchConfig,
    pub params: Box<dyn Any>,
}

impl std::fmt::Debug for Launched {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {:?}", self.name, self.config)
    }
}

impl Launched {
    /// The parameters, as the type the kernel takes.
    pub fn params<P: 'static>(&self) -> &P {
        self.params.downcast_ref().expect("parameter type of the launch")
    }
}

#[derive(Default)]
struct State {
    /// (base address, bytes) of every allocation.
    memory: Vec<(u64, Vec<u8>)>,
    launches: Vec<Launched>,
}

pub(crate) struct MockDevice {
    arch: PtxArch,
    sms: u32,
    state: Mutex<State>,
    tensor_maps: TensorMapCache<MockBuffer<u64>>,
}

pub(crate) struct MockBuffer<T> {
    addr: u64,
    len: usize,
    _elem: PhantomData<T>,
}

impl<T: DeviceElement> DeviceBuffer<T> for MockBuffer<T> {
    fn len(&self) -> usize {
        self.len
    }

    fn view(&self) -> DeviceView<'_, T> {
        // SAFETY: a made-up address no kernel dereferences (launches are only recorded).
        unsafe { DeviceView::from_raw_parts(self.addr, self.len) }
    }

    fn view_mut(&mut self) -> DeviceViewMut<'_, T> {
        // SAFETY: as above.
        unsafe { DeviceViewMut::from_raw_parts(self.addr, self.len) }
    }
}

impl MockDevice {
    pub fn new(arch: PtxArch, sms: u32) -> Self {
        Self { arch, sms, state: Mutex::default(), tensor_maps: TensorMapCache::default() }
    }

    /// The launches so far, removed.
    pub fn take_launches(&self) -> Vec<Launched> {
        std::mem::take(&mut self.state.lock().unwrap().launches)
    }

    /// Number of allocations so far.
    pub fn allocations(&self) -> usize {
        self.state.lock().unwrap().memory.len()
    }

    /// `len` bytes at `addr` of one allocation.
    pub fn read(&self, addr: u64, len: usize) -> Vec<u8> {
        let state = self.state.lock().unwrap();
        let (base, bytes) = state
            .memory
            .iter()
            .find(|(base, bytes)| (*base..*base + bytes.len() as u64).contains(&addr))
            .expect("address of a mock allocation");
        let at = (addr - base) as usize;
        bytes[at..at + len].to_vec()
    }

    /// The mock's "encoding": the descriptor's debug text, truncated to 128 bytes.
    pub fn encode(desc: &TensorMapDesc) -> TensorMap {
        let mut bytes = [0u8; 128];
        let text = format!("{:?}/{:?}/{:?}", desc.dims, desc.box_dims, desc.global_address);
        let n = text.len().min(128);
        bytes[..n].copy_from_slice(&text.as_bytes()[..n]);
        TensorMap { bytes }
    }
}

impl Device for MockDevice {
    type Buffer<T: DeviceElement> = MockBuffer<T>;

    fn describe(&self) -> String {
        format!("mock {}", self.arch.name())
    }

    fn ptx_arch(&self) -> PtxArch {
        self.arch
    }

    fn multiprocessors(&self) -> u32 {
        self.sms
    }

    /// An H100's 227 KB.
    fn max_shared_per_block(&self) -> u32 {
        227 * 1024
    }

    fn tensor_map(&self, desc: &TensorMapDesc) -> Result<TensorMap> {
        desc.validate()?;
        Ok(Self::encode(desc))
    }

    fn with_tensor_maps_in_memory<R>(
        &self,
        descs: &[TensorMapDesc],
        use_maps: impl FnOnce(u64) -> Result<R>,
    ) -> Result<R> {
        self.tensor_maps.with(descs, || upload_tensor_maps(self, descs), use_maps)
    }

    fn alloc<T: DeviceElement>(&self, len: usize) -> Result<MockBuffer<T>> {
        let bytes = alloc_bytes::<T>(len)?;
        let mut state = self.state.lock().unwrap();
        let addr = state
            .memory
            .last()
            .map_or(0x10_0000, |(base, b)| (base + b.len() as u64 + 4096).next_multiple_of(256));
        state.memory.push((addr, vec![0xff; bytes]));
        Ok(MockBuffer { addr, len, _elem: PhantomData })
    }

    fn copy_to_device<T: DeviceElement>(&self, src: &[T], dst: DeviceViewMut<'_, T>) -> Result<()> {
        check_copy_len("copy_to_device", src.len(), dst.len())?;
        let mut state = self.state.lock().unwrap();
        let src: &[u8] = bytemuck::cast_slice(src);
        let addr = dst.addr();
        let (base, bytes) = state
            .memory
            .iter_mut()
            .find(|(base, bytes)| (*base..*base + bytes.len() as u64).contains(&addr))
            .ok_or_else(|| GpuError::invalid("copy_to_device", "dst", "not a mock allocation"))?;
        let at = (addr - *base) as usize;
        bytes[at..at + src.len()].copy_from_slice(src);
        Ok(())
    }

    fn copy_to_host<T: DeviceElement>(&self, src: DeviceView<'_, T>, dst: &mut [T]) -> Result<()> {
        check_copy_len("copy_to_host", dst.len(), src.len())?;
        let bytes = self.read(src.addr(), src.num_bytes());
        bytemuck::cast_slice_mut(dst).copy_from_slice(&bytes);
        Ok(())
    }

    unsafe fn launch<P: KernelParams>(
        &self,
        kernel: Kernel<P>,
        config: LaunchConfig,
        params: P,
    ) -> Result<()> {
        config.check(kernel.name())?;
        let launched = Launched { name: kernel.name(), config, params: Box::new(params) };
        self.state.lock().unwrap().launches.push(launched);
        Ok(())
    }

    fn synchronize(&self) -> Result<()> {
        Ok(())
    }
}
