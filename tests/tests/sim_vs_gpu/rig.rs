//! Hand-written PTX modules on either runtime: the simulator of the module, or the GPU with the
//! module loaded through cudarc, behind one launcher taking 64-bit parameters.

use std::sync::Arc;

use cudarc::driver::{CudaModule, LaunchConfig as CudaLaunchConfig, PushKernelArg};
use cudarc::nvrtc::Ptx;
use gpu_host::{Device, Gpu, LaunchConfig};
use ptx_sim::Simulator;

/// A runtime with a hand-written module loaded: its device (buffers, tensor maps) and a
/// launcher of the module's entries. Launch failures panic, naming the entry and runtime.
pub trait Rig {
    type Dev: Device;
    fn dev(&self) -> &Self::Dev;
    /// Launches `entry` with `params` (each a `.u64` parameter) and waits for it.
    fn launch(&self, entry: &'static str, config: LaunchConfig, params: &[u64]);
}

/// The simulator of a module.
pub struct SimRig(pub Simulator);

impl SimRig {
    /// The simulator of `ptx`; panics when it does not parse.
    pub fn load(ptx: &str) -> Self {
        Self(Simulator::from_ptx(ptx).unwrap_or_else(|e| panic!("the module parses: {e}")))
    }
}

impl Rig for SimRig {
    type Dev = Simulator;
    fn dev(&self) -> &Simulator {
        &self.0
    }
    fn launch(&self, entry: &'static str, config: LaunchConfig, params: &[u64]) {
        let bytes: Vec<u8> = params.iter().flat_map(|p| p.to_le_bytes()).collect();
        if let Err(e) = self.0.launch_bytes(entry, config, &bytes) {
            panic!("{entry} on the simulator: {e}");
        }
    }
}

/// A module loaded on the GPU.
pub struct GpuRig {
    gpu: &'static Gpu,
    module: Arc<CudaModule>,
}

impl GpuRig {
    /// `ptx` JIT-compiled on `gpu`; panics when the driver rejects it.
    pub fn load(gpu: &'static Gpu, ptx: &str) -> Self {
        let module = gpu
            .context()
            .load_module(Ptx::from_src(ptx))
            .unwrap_or_else(|e| panic!("the module loads on the GPU: {e}"));
        Self { gpu, module }
    }
}

impl Rig for GpuRig {
    type Dev = Gpu;
    fn dev(&self) -> &Gpu {
        self.gpu
    }
    fn launch(&self, entry: &'static str, config: LaunchConfig, params: &[u64]) {
        let function = self
            .module
            .load_function(entry)
            .unwrap_or_else(|e| panic!("entry {entry} of the module: {e}"));
        let stream = self.gpu.stream();
        let mut launch = stream.launch_builder(&function);
        for p in params {
            launch.arg(p);
        }
        let cfg = CudaLaunchConfig {
            grid_dim: config.grid,
            block_dim: config.block,
            shared_mem_bytes: config.shared_mem_bytes,
        };
        // SAFETY: the callers pass, for every pointer parameter, a live buffer of the size the
        // entry indexes (see the zoo and `hopper.rs`).
        unsafe { launch.launch(cfg) }.unwrap_or_else(|e| panic!("{entry} on the GPU: {e}"));
        stream.synchronize().unwrap_or_else(|e| panic!("{entry} on the GPU: {e}"));
    }
}
