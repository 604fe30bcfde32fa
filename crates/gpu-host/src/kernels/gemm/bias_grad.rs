//! [`bias_grad`]: column sums of an output gradient, the bias gradient of a linear layer.

use crate::device::{Device, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::Kernel;
use kernel_abi::gemm::{
    BIAS_GRAD_BF16, BIAS_GRAD_BF16_F32, BIAS_GRAD_F16, BIAS_GRAD_F16_F32, BIAS_GRAD_F32,
    BiasGradParams, bias_grad as bg,
};

/// Element types of [`bias_grad`]: `dy` of `Self`, sums written as `O`: `f32 → f32`,
/// `bf16 → bf16 | f32`, `f16 → f16 | f32` (sums are f32 in every case).
pub trait BiasGradElement<O: DeviceElement>: DeviceElement {
    /// The kernel of this pair of types.
    const KERNEL: Kernel<BiasGradParams<Self::Abi, O::Abi>>;
}

impl BiasGradElement<f32> for f32 {
    const KERNEL: Kernel<BiasGradParams<f32, f32>> = BIAS_GRAD_F32;
}
impl BiasGradElement<bf16> for bf16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::Bf16, kernel_abi::Bf16>> = BIAS_GRAD_BF16;
}
impl BiasGradElement<f16> for f16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::F16, kernel_abi::F16>> = BIAS_GRAD_F16;
}
impl BiasGradElement<f32> for bf16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::Bf16, f32>> = BIAS_GRAD_BF16_F32;
}
impl BiasGradElement<f32> for f16 {
    const KERNEL: Kernel<BiasGradParams<kernel_abi::F16, f32>> = BIAS_GRAD_F16_F32;
}

/// `db[n] = beta · db[n] + Σ_{m < rows} dy[m · ld + n]` for `n < db.len()`: the bias gradient of
/// a linear layer from its output gradient `dy` (rows × N, row-major, leading dimension `ld`).
/// f32 sums in a fixed order (deterministic), rounded once. `rows` is at most
/// `u32::MAX - THREADS` (the kernel's 32-bit row loop steps by a block's threads).
pub fn bias_grad<D: Device, T: BiasGradElement<O>, O: DeviceElement>(
    dev: &D,
    dy: DeviceView<'_, T>,
    rows: usize,
    ld: usize,
    mut db: DeviceViewMut<'_, O>,
    beta: f32,
) -> Result<()> {
    const OP: &str = "bias_grad";
    let n = db.len();
    if ld < n.max(1) {
        return Err(GpuError::invalid(OP, "ld", format!("{ld} is smaller than N = {n}")));
    }
    // 32-bit fields first (then the length below cannot overflow); the kernel's row loop
    // steps by a block's threads in 32 bits, so rows stop a block short of 2^32.
    let max_rows = (u32::MAX - bg::THREADS) as usize;
    if rows > max_rows {
        return Err(GpuError::invalid(OP, "rows", format!("{rows} exceeds {max_rows}")));
    }
    for (arg, value) in [("ld", ld), ("db", n)] {
        u32::try_from(value)
            .map_err(|_| GpuError::invalid(OP, arg, format!("{value} does not fit in 32 bits")))?;
    }
    let needed = if rows == 0 || n == 0 { 0 } else { (rows - 1) * ld + n };
    if dy.len() < needed {
        return Err(GpuError::invalid(
            OP,
            "dy",
            format!(
                "has {} elements, rows × N with leading dimension {ld} need {needed}",
                dy.len()
            ),
        ));
    }
    if n == 0 {
        return Ok(());
    }
    let params = BiasGradParams {
        dy: dy.ptr(),
        db: db.ptr(),
        m: rows as u32,
        n: n as u32,
        ld: ld as u32,
        beta,
    };
    let config = LaunchConfig {
        grid: (n.div_ceil(bg::COLS as usize) as u32, 1, 1),
        block: (bg::THREADS, 1, 1),
        shared_mem_bytes: bg::THREADS / 32 * bg::COLS * 4,
    };
    // SAFETY: `dy` covers rows × N with leading dimension ld, `db` has N elements; the launch
    // geometry is the kernel's.
    unsafe { dev.launch(T::KERNEL, config, params) }
}
