//! `--device` and `--precision`: which backend runs, in which arithmetic.

use super::{Backend, CpuBackend, CudaAct, CudaBackend, CudaOptions};
use crate::error::{Error, Result};
use gpu_host::kernels::classifier::ClassifierPath;
use gpu_host::kernels::gemm::{GemmEngine, WeightGrads, WgmmaTile};
use gpu_host::{Device, Gpu, GpuError, PtxArch};
use half::{bf16, f16};
use ptx_sim::Simulator;

/// Work generic over the backend: what [`ResolvedDevice::run`] runs once it has built the
/// backend of the requested device and precision (one monomorphised copy per backend type).
pub trait BackendJob {
    /// What the job returns.
    type Output;
    /// Runs the job on `backend`.
    fn run<B: Backend>(self, backend: &B) -> Result<Self::Output>;
}

/// Where the user asked to train.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeviceChoice {
    /// The CPU backend.
    Cpu,
    /// The CUDA backend on GPU 0.
    Cuda,
    /// The CUDA backend on the PTX simulator (slow, every check on; tiny models).
    Sim,
    /// The CUDA backend on the simulator of the sm_90a module (the Hopper kernels).
    SimHopper,
    /// CUDA when a usable GPU and driver are present, else the CPU.
    Auto,
}

/// A backend that can run here, with its runtime opened.
pub enum ResolvedDevice {
    /// [`super::CpuBackend`].
    Cpu,
    /// The CUDA backend on this GPU.
    Cuda(Gpu),
    /// The CUDA backend on the simulator (of the sm_80 module, or of the sm_90a one).
    Sim(Simulator),
}

/// What the backend computes with: the precision and which GEMM kernels run it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Compute {
    /// The arithmetic.
    pub precision: Precision,
    /// The tensor-core GEMM kernels (`--gemm-engine`): `Auto` takes the Hopper `wgmma`
    /// kernels where they apply, `MmaSync` the portable ones everywhere; the CPU ignores it.
    pub gemm_engine: GemmEngine,
    /// The Hopper kernel's block tile (`--wgmma-tile`; `Auto`: 128 × 256 where it fills the
    /// GPU, else 128 × 128).
    pub wgmma_tile: WgmmaTile,
    /// The weight gradients' schedule on the Hopper kernel (`--weight-grads`; `Auto`: as
    /// `wgmma_tile` says).
    pub weight_grads: WeightGrads,
    /// The fused classifier's kernel (`--classifier`; `Auto`: the row staged in shared memory
    /// where it fits and the gradient is written); the CPU ignores it.
    pub classifier: ClassifierPath,
}

impl From<Precision> for Compute {
    /// `precision` with the default (`Auto`) GEMM engine, tile and classifier kernel.
    fn from(precision: Precision) -> Self {
        Self {
            precision,
            gemm_engine: GemmEngine::Auto,
            wgmma_tile: WgmmaTile::Auto,
            weight_grads: WeightGrads::Auto,
            classifier: ClassifierPath::Auto,
        }
    }
}

impl ResolvedDevice {
    /// Whether this is the CPU.
    pub fn is_cpu(&self) -> bool {
        matches!(self, Self::Cpu)
    }

    /// Whether this is the simulator of the sm_90a module (`--device sim-hopper`).
    pub fn is_hopper_sim(&self) -> bool {
        matches!(self, Self::Sim(sim) if sim.ptx_arch() == PtxArch::Sm90a)
    }

    /// Builds the backend of this device for `compute` (a [`Precision`] alone: the default
    /// GEMM engine) and runs `job` on it. The CPU runs fp32 only.
    pub fn run<J: BackendJob>(&self, compute: impl Into<Compute>, job: J) -> Result<J::Output> {
        let compute = compute.into();
        match self {
            Self::Cpu if compute.precision == Precision::Fp32 => job.run(&CpuBackend::default()),
            Self::Cpu => Err(Error::invalid(format!(
                "the CPU backend computes in fp32 only; --precision {} needs --device cuda (or sim)",
                compute.precision.name()
            ))),
            Self::Cuda(gpu) => {
                let info = gpu.info();
                let options = CudaOptions {
                    compute,
                    multiprocessors: info.multiprocessors as usize,
                    gpu_name: Some(info.name.clone()),
                };
                run_on(gpu, options, job)
            }
            Self::Sim(sim) => {
                run_on(sim, CudaOptions { compute, multiprocessors: 1, gpu_name: None }, job)
            }
        }
    }
}

fn run_on<D: Device, J: BackendJob>(dev: &D, options: CudaOptions, job: J) -> Result<J::Output> {
    fn with<D: Device, A: CudaAct, J: BackendJob>(
        dev: &D,
        options: CudaOptions,
        job: J,
    ) -> Result<J::Output> {
        job.run(&CudaBackend::<D, A>::new(dev, options)?)
    }
    match options.compute.precision {
        Precision::Fp32 | Precision::Tf32 => with::<D, f32, J>(dev, options, job),
        Precision::Bf16 => with::<D, bf16, J>(dev, options, job),
        Precision::Fp16 => with::<D, f16, J>(dev, options, job),
    }
}

impl DeviceChoice {
    /// Opens the backend's runtime, or names why it cannot run.
    pub fn resolve(self) -> Result<ResolvedDevice> {
        match self {
            Self::Cpu => Ok(ResolvedDevice::Cpu),
            Self::Cuda => Gpu::new().map(ResolvedDevice::Cuda).map_err(|e| {
                Error::invalid(format!("--device cuda: {e}; use --device cpu (or auto)"))
            }),
            Self::Sim => Simulator::new().map(ResolvedDevice::Sim).map_err(|e| {
                Error::invalid(format!("--device sim: {e}; run `cargo xtask build-ptx` first"))
            }),
            Self::SimHopper => Simulator::hopper().map(ResolvedDevice::Sim).map_err(|e| {
                Error::invalid(format!(
                    "--device sim-hopper: {e}; run `cargo xtask build-ptx` first"
                ))
            }),
            Self::Auto => match Gpu::new() {
                Ok(gpu) => Ok(ResolvedDevice::Cuda(gpu)),
                Err(GpuError::NoDriver(_) | GpuError::NoDevice) => Ok(ResolvedDevice::Cpu),
                Err(e) => Err(Error::invalid(format!(
                    "a GPU is present but cannot be used: {e}; use --device cpu"
                ))),
            },
        }
    }
}

/// The arithmetic of training: the speed ladder's precisions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Precision {
    /// f32 storage, FP32 matmuls on the SIMT cores.
    Fp32,
    /// f32 storage, TF32 tensor-core matmuls.
    Tf32,
    /// bf16 activations and working weights, f32 master weights, gradients and optimizer
    /// state; bf16 tensor-core matmuls.
    Bf16,
    /// As bf16 with f16, and dynamic loss scaling.
    Fp16,
}

impl Precision {
    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Fp32 => "fp32",
            Self::Tf32 => "tf32",
            Self::Bf16 => "bf16",
            Self::Fp16 => "fp16",
        }
    }

    /// The GEMM mode of this precision.
    pub fn gemm(self) -> gpu_host::kernels::gemm::Precision {
        use gpu_host::kernels::gemm::Precision as G;
        match self {
            Self::Fp32 => G::Fp32,
            Self::Tf32 => G::Tf32,
            Self::Bf16 => G::Bf16,
            Self::Fp16 => G::Fp16,
        }
    }
}
