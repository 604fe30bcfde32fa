//! Global gradient norm with the non-finite check (two deterministic passes).

use super::check_len;
use super::elementwise::FloatElement;
use crate::device::{Device, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::grad_norm::{
    BLOCK_THREADS, GRAD_NORM_FINISH, GradNormFinishParams, GradNormKernels, GradNormPartialsParams,
    WORKSPACE_WORDS, partial_blocks,
};

/// `u64` words the workspace of [`grad_norm`] must hold (at least).
pub const GRAD_NORM_WORKSPACE_LEN: usize = WORKSPACE_WORDS;

/// Dynamic shared memory of both passes: 16 bytes per warp for the block reduction.
const SHARED_BYTES: u32 = BLOCK_THREADS / 32 * 16;

/// Writes `out = [‖grads‖₂, nonfinite]`: the L2 norm of every element (squares summed in f32
/// per thread, f64 across threads, in the fixed order of `kernel_abi::grad_norm`: the same bits
/// for the same `grads` on every run and GPU, whatever the view's alignment) and `1.0` if any
/// element is ±inf or NaN, else `0.0`. `workspace` (at least [`GRAD_NORM_WORKSPACE_LEN`]
/// words, contents irrelevant) carries the per-block partials between the two launches.
pub fn grad_norm<D: Device, T: FloatElement>(
    dev: &D,
    grads: DeviceView<'_, T>,
    mut workspace: DeviceViewMut<'_, u64>,
    mut out: DeviceViewMut<'_, f32>,
) -> Result<()> {
    const OP: &str = "grad_norm";
    if workspace.len() < GRAD_NORM_WORKSPACE_LEN {
        return Err(GpuError::invalid(
            OP,
            "workspace",
            format!("has {} words, needs {GRAD_NORM_WORKSPACE_LEN}", workspace.len()),
        ));
    }
    check_len(OP, "out", out.len(), 2, "[norm, nonfinite]")?;
    let n = grads.len() as u64;
    let blocks = partial_blocks(n);
    let mut config = LaunchConfig::linear(blocks, BLOCK_THREADS);
    config.shared_mem_bytes = SHARED_BYTES;
    let partials = workspace.ptr();
    let params = GradNormPartialsParams { x: grads.ptr(), partials, n };
    // SAFETY: `grads` covers `n` elements; `workspace` holds two words per block (checked
    // above: `blocks <= MAX_PARTIAL_BLOCKS`); the launch has the kernel's block size and
    // shared memory.
    unsafe { dev.launch(<T as DeviceElement>::Abi::PARTIALS, config, params)? };
    let mut config = LaunchConfig::linear(1, BLOCK_THREADS);
    config.shared_mem_bytes = SHARED_BYTES;
    let params = GradNormFinishParams {
        partials: partials.as_const(),
        out: out.ptr(),
        num_partials: blocks,
    };
    // SAFETY: the first pass wrote `blocks` partials into `workspace`; `out` holds 2 f32.
    unsafe { dev.launch(GRAD_NORM_FINISH, config, params) }
}
