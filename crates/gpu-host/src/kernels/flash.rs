//! Flash attention (see `kernel_abi::flash`): causal attention from the fused qkv activation
//! without the T×T scores, on tensor cores, for bf16 and f16 storage.

use super::attention::AttentionShape;
use super::check_aligned;
use super::check_len;
use crate::device::{Device, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::flash::{
    BLOCK_Q, FORWARD_SHARED_BYTES, FORWARD_THREADS, FlashForwardParams, FlashKernels, HD,
};

/// A storage type with flash attention kernels: `bf16`, `f16` (the tensor cores' 16-bit
/// inputs; f32 models take the materialised path).
pub trait FlashElement: DeviceElement<Abi: FlashKernels> {}

impl FlashElement for bf16 {}
impl FlashElement for f16 {}

/// Buffers of [`flash_attention_forward`].
pub struct FlashForward<'a, T> {
    /// (B, T, 3C) fused `[q | k | v]` rows.
    pub qkv: DeviceView<'a, T>,
    /// (B, T, C) output, written.
    pub out: DeviceViewMut<'a, T>,
    /// (B, NH, T) f32 log-sum-exp of each row's scaled scores, written (the backward's
    /// saved state: O(B·NH·T), no T×T buffer).
    pub lse: DeviceViewMut<'a, f32>,
}

/// Causal multi-head attention forward: `out` and the per-row log-sum-exp `lse`.
pub fn flash_attention_forward<D: Device, T: FlashElement>(
    dev: &D,
    shape: AttentionShape,
    mut args: FlashForward<'_, T>,
) -> Result<()> {
    const OP: &str = "flash_attention_forward";
    let AttentionShape { b, t, c, nh } = shape;
    if nh == 0 || !c.is_multiple_of(nh) || c / nh != HD as usize {
        return Err(GpuError::invalid(
            OP,
            "shape",
            format!("head size c / nh = {c} / {nh} must be {HD} (the kernels' head size)"),
        ));
    }
    let tiles = t.div_ceil(BLOCK_Q as usize);
    if b > u16::MAX as usize || nh > u16::MAX as usize || b * nh * t > u32::MAX as usize {
        return Err(GpuError::invalid(OP, "shape", format!("{shape:?} is too large")));
    }
    check_len(OP, "qkv", args.qkv.len(), shape.qkv_len(), "b·t·3c")?;
    check_len(OP, "out", args.out.len(), shape.out_len(), "b·t·c")?;
    check_len(OP, "lse", args.lse.len(), b * nh * t, "b·nh·t")?;
    check_aligned(OP, "qkv", args.qkv.addr(), 16)?;
    check_aligned(OP, "out", args.out.addr(), 4)?;
    if b * t == 0 {
        return Ok(());
    }
    let params = FlashForwardParams {
        qkv: args.qkv.ptr(),
        out: args.out.ptr(),
        lse: args.lse.ptr(),
        t: t as u32,
        nh: nh as u32,
        scale_log2: std::f32::consts::LOG2_E / (HD as f32).sqrt(),
        _pad: 0,
    };
    let config = LaunchConfig {
        grid: (tiles as u32, nh as u32, b as u32),
        block: (FORWARD_THREADS, 1, 1),
        shared_mem_bytes: FORWARD_SHARED_BYTES,
    };
    // SAFETY: the views hold the checked (b, t, c) shapes; qkv is 16-byte aligned (cp.async of
    // whole 16-byte chunks: rows of 3C 16-bit values with C a multiple of 64); `out` takes
    // 4-byte pair stores; shared memory holds the Q tile and two K/V stages.
    unsafe { dev.launch(T::Abi::FORWARD, config, params) }
}
