//! `gpu-bench info`: the facts about the GPU that every report quotes (name, compute
//! capability, SMs, memory, L2, clocks, driver, and the cuBLAS the GEMM baselines load), read
//! from the driver through `gpu-host`.

use anyhow::{Context, Result};
use cudarc::driver::sys::CUdevice_attribute as Attr;
use gpu_host::{Device, Gpu};

/// Prints one `key: value` line per fact, then a `headline:` line for the bundle's summary.
pub fn run() -> Result<()> {
    let opened = std::time::Instant::now();
    let gpu = Gpu::new().map_err(|e| anyhow::anyhow!("gpu-bench info needs a CUDA GPU: {e}"))?;
    let open_seconds = opened.elapsed().as_secs_f64();
    let info = gpu.info();
    let ctx = gpu.context();
    let attribute = |a: Attr| ctx.attribute(a).with_context(|| format!("reading {a:?}"));
    let driver = driver_api_version();
    let cublas = crate::cublas::version().unwrap_or_else(|e| format!("missing: {e}"));
    let l2_mib = attribute(Attr::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)? as f64 / (1 << 20) as f64;
    let sm_clock_mhz = attribute(Attr::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)? / 1000;
    let mem_clock_mhz = attribute(Attr::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)? / 1000;
    let bus_bits = attribute(Attr::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?;
    let (major, minor) = info.compute_capability;
    let lines = [
        ("device", gpu.describe()),
        ("name", info.name.clone()),
        ("compute capability", format!("{major}.{minor}")),
        ("PTX module", info.ptx_arch.name().to_string()),
        ("kernel code", info.kernel_code.to_string()),
        (
            "context and module load",
            match info.kernel_code {
                gpu_host::KernelCode::Cubin(_) => format!("{open_seconds:.1} s"),
                gpu_host::KernelCode::Jit { .. } => format!(
                    "{open_seconds:.1} s (the driver JIT-compiles the PTX on a first load, then \
                     reuses its compute cache)"
                ),
            },
        ),
        ("multiprocessors", info.multiprocessors.to_string()),
        ("memory", format!("{:.1} GiB", info.total_memory as f64 / (1u64 << 30) as f64)),
        ("L2 cache", format!("{l2_mib:.1} MiB")),
        ("max shared memory per block", format!("{} KiB", info.max_shared_per_block / 1024)),
        ("max SM clock", format!("{sm_clock_mhz} MHz")),
        ("memory clock", format!("{mem_clock_mhz} MHz, {bus_bits}-bit bus")),
        ("CUDA driver API", driver.clone()),
        ("cuBLAS (GEMM baselines)", cublas.clone()),
    ];
    for (key, value) in &lines {
        println!("{key}: {value}");
    }
    let cublas_short = if cublas.starts_with("missing") { "missing" } else { &cublas };
    println!(
        "headline: {}, cc {major}.{minor}, {} SMs, L2 {l2_mib:.0} MiB, driver API {driver}, \
         cuBLAS {cublas_short}, kernels from the {}, opened in {open_seconds:.1} s",
        info.name,
        info.multiprocessors,
        info.kernel_code.label()
    );
    Ok(())
}

/// The CUDA version the driver supports (`cuDriverGetVersion`), as `major.minor`.
fn driver_api_version() -> String {
    let mut version = 0i32;
    // SAFETY: the driver is loaded (a `Gpu` exists) and `version` is a valid out-pointer.
    let status = unsafe { cudarc::driver::sys::cuDriverGetVersion(&mut version) };
    match status {
        cudarc::driver::sys::CUresult::CUDA_SUCCESS => {
            format!("{}.{}", version / 1000, (version % 1000) / 10)
        }
        err => format!("unknown ({err:?})"),
    }
}
