//! The project's own PTX: every kernel decodes, and faults in real kernels are reported
//! through the `Device` trait.

use gpu_host::{Device, DeviceBuffer, GpuError, LaunchConfig, PtxArch, SimErrorKind, ptx_module};
use kernel_abi::elementwise::{FILL_F32, FillParams};
use kernel_abi::{ALL_KERNELS, Kernel};
use ptx_sim::Simulator;

fn built(arch: PtxArch) -> &'static str {
    ptx_module(arch).unwrap_or_else(|e| panic!("{e}")).text
}

#[test]
fn every_project_kernel_decodes() {
    for arch in [PtxArch::Sm80, PtxArch::Sm90a] {
        let sim = Simulator::from_ptx(built(arch)).unwrap();
        sim.check_kernels().unwrap_or_else(|e| panic!("{}: {e}", arch.name()));
        let names: Vec<&str> = sim.kernel_names().collect();
        for sig in ALL_KERNELS.iter().flat_map(|family| family.iter()) {
            assert!(names.contains(&sig.name), "{} lacks {}", arch.name(), sig.name);
        }
    }
}

#[test]
fn a_real_kernel_writing_past_its_buffer_is_caught() {
    let sim = Simulator::new().unwrap();
    let mut out = sim.alloc::<f32>(100).unwrap();
    let params = FillParams { out: out.view_mut().ptr(), n: 101, value: 1.0 };
    // SAFETY: deliberately wrong (n exceeds the buffer): the simulator checks every access.
    let err = unsafe { sim.launch(FILL_F32, LaunchConfig::linear(1, 256), params) }.unwrap_err();
    let GpuError::Sim { kind: SimErrorKind::OutOfBounds, detail } = &err else { panic!("{err}") };
    // 96 elements go through the 16-byte path; the scalar tail gives element 96 + t to thread t.
    assert!(
        detail.contains("kernel `fill_f32`")
            && detail.contains("thread (4,0,0)")
            && detail.contains("0 bytes past the end"),
        "{detail}"
    );
}

#[test]
fn a_kernel_missing_from_the_module_is_named() {
    let sim = Simulator::new().unwrap();
    const NOPE: Kernel<FillParams<f32>> = Kernel::new("no_such_kernel");
    let mut out = sim.alloc::<f32>(1).unwrap();
    let params = FillParams { out: out.view_mut().ptr(), n: 1, value: 1.0 };
    // SAFETY: the launch fails before running anything.
    let err = unsafe { sim.launch(NOPE, LaunchConfig::linear(1, 1), params) }.unwrap_err();
    assert!(matches!(err, GpuError::MissingKernel { name: "no_such_kernel" }), "{err}");
}
