//! Flash attention (see `kernel_abi::flash`): causal attention from the fused qkv activation
//! without the T×T scores, on tensor cores, for bf16 and f16 storage: the forward, and the
//! backward's three launches (the `D` pre-pass, dK/dV, dQ).

use super::attention::AttentionShape;
use super::check_aligned;
use super::check_len;
use crate::device::{Device, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::kernels::gemm::GemmEngine;
use crate::ptx::PtxArch;
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::DevicePtrMut;
use kernel_abi::flash::{
    BACKWARD_DKDV_WGMMA_SHARED_BYTES, BACKWARD_SHARED_BYTES, BACKWARD_THREADS,
    BACKWARD_WGMMA_SHARED_BYTES, BLOCK_Q, FORWARD_SHARED_BYTES, FORWARD_THREADS,
    FORWARD_WGMMA_SHARED_BYTES, FlashBackwardParams, FlashForwardParams, FlashKernels, HD,
    WGMMA_THREADS,
};

/// A storage type with flash attention kernels: `bf16`, `f16` (the tensor cores' 16-bit
/// inputs; f32 models take the materialised path).
pub trait FlashElement: DeviceElement<Abi: FlashKernels> {}

impl FlashElement for bf16 {}
impl FlashElement for f16 {}

/// Checks that the kernels support `shape` (head size [`HD`]) and that its grid, its indices
/// and its buffer lengths fit their 16- and 32-bit ranges and `usize` (checked products: a
/// wrapped length would let views too short for the kernel pass the length checks).
fn check_shape(op: &'static str, shape: AttentionShape) -> Result<()> {
    let AttentionShape { b, t, c, nh } = shape;
    if nh == 0 || !c.is_multiple_of(nh) || c / nh != HD as usize {
        return Err(GpuError::invalid(
            op,
            "shape",
            format!("head size c / nh = {c} / {nh} must be {HD} (the kernels' head size)"),
        ));
    }
    let rows = b.checked_mul(nh).and_then(|bnh| bnh.checked_mul(t));
    let qkv = [b, t, c].iter().try_fold(3usize, |len, &f| len.checked_mul(f));
    let fits = b <= u16::MAX as usize
        && nh <= u16::MAX as usize
        && t.div_ceil(BLOCK_Q as usize) <= u16::MAX as usize
        && t <= u32::MAX as usize
        && rows.is_some_and(|rows| rows <= u32::MAX as usize)
        && qkv.is_some();
    if !fits {
        return Err(GpuError::invalid(op, "shape", format!("{shape:?} is too large")));
    }
    Ok(())
}

/// The tiled kernels' grid, `(NH, ⌈T / 64⌉, B)`: blocks start x fastest, so every head of a
/// sequence starts its heaviest tile before any head its next (the kernels map y to the tile
/// by its work; `kernels-gpu/src/flash.rs`, `seq_head`). [`check_shape`] bounds its sizes.
fn tiled_grid(shape: AttentionShape) -> (u32, u32, u32) {
    let tiles = shape.t.div_ceil(BLOCK_Q as usize);
    (shape.nh as u32, tiles as u32, shape.b as u32)
}

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

/// Whether `engine` puts the flash kernels of operation `op` on wgmma on `dev`: `Auto` where
/// the device runs the sm_90a module, `MmaSync` never, `Wgmma` there or an error naming the
/// module.
fn wgmma_for<D: Device>(dev: &D, op: &'static str, engine: GemmEngine) -> Result<bool> {
    let hopper = dev.ptx_arch() == PtxArch::Sm90a;
    match engine {
        GemmEngine::Auto => Ok(hopper),
        GemmEngine::MmaSync => Ok(false),
        GemmEngine::Wgmma if hopper => Ok(true),
        GemmEngine::Wgmma => Err(GpuError::invalid(
            op,
            "engine",
            format!(
                "the wgmma kernels are in the sm_90a module; this device runs {}",
                dev.ptx_arch().name()
            ),
        )),
    }
}

/// Causal multi-head attention forward: `out` and the per-row log-sum-exp `lse`. `engine`
/// picks the tensor-core instructions as for [`flash_attention_backward`].
pub fn flash_attention_forward<D: Device, T: FlashElement>(
    dev: &D,
    shape: AttentionShape,
    engine: GemmEngine,
    mut args: FlashForward<'_, T>,
) -> Result<()> {
    const OP: &str = "flash_attention_forward";
    let AttentionShape { b, t, nh, .. } = shape;
    check_shape(OP, shape)?;
    check_len(OP, "qkv", args.qkv.len(), shape.qkv_len(), "b·t·3c")?;
    check_len(OP, "out", args.out.len(), shape.out_len(), "b·t·c")?;
    check_len(OP, "lse", args.lse.len(), b * nh * t, "b·nh·t")?;
    check_aligned(OP, "qkv", args.qkv.addr(), 16)?;
    check_aligned(OP, "out", args.out.addr(), 4)?;
    let wgmma = wgmma_for(dev, OP, engine)?;
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
    let grid = tiled_grid(shape);
    let (kernel, config) = if wgmma {
        let config = LaunchConfig {
            grid,
            block: (WGMMA_THREADS, 1, 1),
            shared_mem_bytes: FORWARD_WGMMA_SHARED_BYTES,
        };
        (T::Abi::FORWARD_WGMMA, config)
    } else {
        let config = LaunchConfig {
            grid,
            block: (FORWARD_THREADS, 1, 1),
            shared_mem_bytes: FORWARD_SHARED_BYTES,
        };
        (T::Abi::FORWARD, config)
    };
    // SAFETY: the views hold the checked (b, t, c) shapes; qkv is 16-byte aligned (cp.async of
    // whole 16-byte chunks: rows of 3C 16-bit values with C a multiple of 64); `out` takes
    // 4-byte pair stores; shared memory holds the Q tile and two K/V stages (and 1 KiB to
    // align the wgmma kernel's tiles); the wgmma kernel is taken only from the sm_90a module.
    unsafe { dev.launch(kernel, config, params) }
}

/// Buffers of [`flash_attention_backward`].
pub struct FlashBackward<'a, T> {
    /// (B, T, 3C) fused `[q | k | v]` rows, the forward's input.
    pub qkv: DeviceView<'a, T>,
    /// (B, T, C) output of the forward.
    pub out: DeviceView<'a, T>,
    /// (B, T, C) gradient of the output.
    pub dout: DeviceView<'a, T>,
    /// (B, NH, T) log-sum-exp saved by the forward.
    pub lse: DeviceView<'a, f32>,
    /// (B, NH, T) f32 scratch, overwritten with `D = rowsum(dout ∘ out)` (by the dQ kernel).
    pub d_scratch: DeviceViewMut<'a, f32>,
    /// (B, T, 3C) gradient of qkv, written (not accumulated).
    pub dqkv: DeviceViewMut<'a, T>,
    /// Where the f32 column sums of `dqkv` as stored go, per 16 positions, or none ([`col_sums_len`]
    /// values, laid out as `kernel_abi::flash::FlashBackwardParams::col_sums`):
    /// `gemm::bias_grad_from_col_sums` over [`col_sum_groups`] rows adds them into qkv's bias
    /// gradient.
    pub col_sums: Option<DeviceViewMut<'a, f32>>,
}

/// Rows of the column sums of a backward of `shape`: one per 16 positions of each sequence.
pub fn col_sum_groups(shape: AttentionShape) -> usize {
    crate::kernels::gemm::col_sum_groups(shape.b, shape.t)
}

/// f32 elements of the column sums of a backward of `shape`: `3C` per row of
/// [`col_sum_groups`].
pub fn col_sums_len(shape: AttentionShape) -> usize {
    col_sum_groups(shape) * 3 * shape.c
}

/// Causal multi-head attention backward: `dqkv` from the forward's input, output and
/// log-sum-exp, in two launches (dQ, which also writes `D = rowsum(dout ∘ out)` into
/// `d_scratch`, then dK/dV, which reads it). `engine` picks the tensor-core
/// instructions of both: [`GemmEngine::Auto`] takes wgmma when the device runs the
/// sm_90a module and `mma.sync` otherwise, [`GemmEngine::MmaSync`] always `mma.sync`, and
/// [`GemmEngine::Wgmma`] on another module is an error naming it. Deterministic: every
/// gradient element is computed by one thread in a fixed order.
pub fn flash_attention_backward<D: Device, T: FlashElement>(
    dev: &D,
    shape: AttentionShape,
    engine: GemmEngine,
    mut args: FlashBackward<'_, T>,
) -> Result<()> {
    const OP: &str = "flash_attention_backward";
    let AttentionShape { b, t, nh, .. } = shape;
    check_shape(OP, shape)?;
    check_len(OP, "qkv", args.qkv.len(), shape.qkv_len(), "b·t·3c")?;
    check_len(OP, "out", args.out.len(), shape.out_len(), "b·t·c")?;
    check_len(OP, "dout", args.dout.len(), shape.out_len(), "b·t·c")?;
    check_len(OP, "lse", args.lse.len(), b * nh * t, "b·nh·t")?;
    check_len(OP, "d_scratch", args.d_scratch.len(), b * nh * t, "b·nh·t")?;
    check_len(OP, "dqkv", args.dqkv.len(), shape.qkv_len(), "b·t·3c")?;
    check_aligned(OP, "qkv", args.qkv.addr(), 16)?;
    check_aligned(OP, "out", args.out.addr(), 16)?;
    check_aligned(OP, "dout", args.dout.addr(), 16)?;
    check_aligned(OP, "dqkv", args.dqkv.addr(), 4)?;
    let col_sums = match &mut args.col_sums {
        Some(sums) => {
            check_len(OP, "col_sums", sums.len(), col_sums_len(shape), "b·⌈t/16⌉·3c")?;
            sums.ptr()
        }
        None => DevicePtrMut::null(),
    };
    let wgmma = wgmma_for(dev, OP, engine)?;
    if b * t == 0 {
        return Ok(());
    }
    let params = FlashBackwardParams {
        qkv: args.qkv.ptr(),
        out: args.out.ptr(),
        dout: args.dout.ptr(),
        lse: args.lse.ptr(),
        d: args.d_scratch.ptr(),
        dqkv: args.dqkv.ptr(),
        col_sums,
        t: t as u32,
        nh: nh as u32,
        scale_log2: std::f32::consts::LOG2_E / (HD as f32).sqrt(),
        scale: 1.0 / (HD as f32).sqrt(),
    };
    let grid = tiled_grid(shape);
    let config =
        |threads, shared_mem_bytes| LaunchConfig { grid, block: (threads, 1, 1), shared_mem_bytes };
    let (dkdv, dq) = if wgmma {
        (
            (T::Abi::BACKWARD_DKDV_WGMMA, config(WGMMA_THREADS, BACKWARD_DKDV_WGMMA_SHARED_BYTES)),
            (T::Abi::BACKWARD_DQ_WGMMA, config(WGMMA_THREADS, BACKWARD_WGMMA_SHARED_BYTES)),
        )
    } else {
        let tiled = config(BACKWARD_THREADS, BACKWARD_SHARED_BYTES);
        ((T::Abi::BACKWARD_DKDV, tiled), (T::Abi::BACKWARD_DQ, tiled))
    };
    // SAFETY: the views hold the checked shapes; qkv, out and dout are 16-byte aligned
    // (cp.async and 16-byte loads of whole chunks of 64-value head rows); `dqkv` takes 4-byte
    // pair stores, the dQ kernel into the q part and the dK/dV kernel into the k and v parts,
    // and so into the column sums (whose length was checked) when there are any; the dQ kernel
    // writes `d_scratch` (B·NH·T values, checked) before the dK/dV kernel, launched after it on
    // the same stream, reads it; shared memory holds the two resident tiles and two stages of
    // the streamed ones (48 KiB, plus 1 KiB to align the wgmma kernels' tiles, and the wgmma
    // dK/dV kernel's two stages of query statistics); the wgmma kernels are taken only from
    // the sm_90a module.
    unsafe {
        dev.launch(dq.0, dq.1, params)?;
        dev.launch(dkdv.0, dkdv.1, params)
    }
}
