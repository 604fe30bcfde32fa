//! LayerNorm forward, fused residual + forward, and backward (see `kernel_abi::layernorm`).

use super::check_len;
use super::elementwise::FloatElement;
use crate::device::{Device, LaunchConfig};
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::layernorm::{
    BACKWARD_CACHED_MAX_C, FORWARD_THREADS, LAYERNORM_BACKWARD_REDUCE, LayerNormBackwardParams,
    LayerNormBackwardReduceParams, LayerNormForwardParams, LayerNormKernels, REDUCE_CHANNELS,
    REDUCE_SHARED_BYTES, REDUCE_THREADS, backward_parts, backward_rows_per_block,
    backward_shared_bytes, backward_warps,
};
use kernel_abi::{DevicePtr, DevicePtrMut};

/// Where the forward saves the row statistics the backward needs (f32, one value per row).
pub struct LayerNormStats<'a> {
    /// Row means.
    pub mean: DeviceViewMut<'a, f32>,
    /// Row reciprocal standard deviations.
    pub rstd: DeviceViewMut<'a, f32>,
}

/// Buffers of [`layernorm_forward`].
pub struct LayerNormForward<'a, T> {
    /// Input rows, `rows × c`.
    pub inp: DeviceView<'a, T>,
    /// Scale, `c`.
    pub weight: DeviceView<'a, T>,
    /// Shift, `c`.
    pub bias: DeviceView<'a, T>,
    /// Normalised rows, `rows × c`.
    pub out: DeviceViewMut<'a, T>,
    /// The statistics for the backward, or `None` (evaluation).
    pub stats: Option<LayerNormStats<'a>>,
}

/// Buffers of [`residual_layernorm_forward`].
pub struct ResidualLayerNormForward<'a, T> {
    /// The residual stream, `rows × c`.
    pub inp1: DeviceView<'a, T>,
    /// The block output added to it, `rows × c`.
    pub inp2: DeviceView<'a, T>,
    /// `inp1 + inp2`, written (`rows × c`): the next residual stream.
    pub residual: DeviceViewMut<'a, T>,
    /// Scale, `c`.
    pub weight: DeviceView<'a, T>,
    /// Shift, `c`.
    pub bias: DeviceView<'a, T>,
    /// The layernorm of `residual`, `rows × c`.
    pub out: DeviceViewMut<'a, T>,
    /// The statistics for the backward, or `None` (evaluation).
    pub stats: Option<LayerNormStats<'a>>,
}

/// Buffers of [`layernorm_backward`].
pub struct LayerNormBackward<'a, T> {
    /// Gradient of the output, `rows × c`.
    pub dout: DeviceView<'a, T>,
    /// The forward's input, `rows × c`.
    pub inp: DeviceView<'a, T>,
    /// Scale, `c`.
    pub weight: DeviceView<'a, T>,
    /// Row means from the forward, `rows`.
    pub mean: DeviceView<'a, f32>,
    /// Row reciprocal standard deviations from the forward, `rows`.
    pub rstd: DeviceView<'a, f32>,
    /// Gradient of the input, `rows × c`, accumulated (`+=`).
    pub dinp: DeviceViewMut<'a, T>,
    /// Gradient of the scale, `c`: `beta ·` its values plus this batch's.
    pub dweight: DeviceViewMut<'a, f32>,
    /// Gradient of the shift, `c`: `beta ·` its values plus this batch's.
    pub dbias: DeviceViewMut<'a, f32>,
    /// Optionally the column sums of the updated `dinp` as stored, `c`: `beta ·` its values
    /// plus this batch's. In a residual block, the bias gradient of the projection whose output
    /// gradient `dinp` is, without reading `dinp` again.
    pub dinp_sum: Option<DeviceViewMut<'a, f32>>,
    /// Scale of the previous `dweight`, `dbias` and `dinp_sum`: 1 accumulates; 0 overwrites
    /// them without reading them (they may hold NaN).
    pub beta: f32,
    /// Workspace of at least [`layernorm_backward_scratch_len`] values (contents ignored).
    pub scratch: DeviceViewMut<'a, f32>,
}

/// Rows of a `len`-element buffer of `c`-channel rows, checking the shape.
fn rows_of(op: &'static str, arg: &'static str, len: usize, c: usize) -> Result<usize> {
    if c == 0 || c > u32::MAX as usize {
        return Err(GpuError::invalid(op, "c", format!("{c} channels (need 1..=u32::MAX)")));
    }
    if !len.is_multiple_of(c) {
        return Err(GpuError::invalid(op, arg, format!("has {len} elements, not rows of {c}")));
    }
    let rows = len / c;
    if rows > i32::MAX as usize {
        return Err(GpuError::invalid(op, arg, format!("{rows} rows (more than 2^31 - 1)")));
    }
    Ok(rows)
}

/// The checked pointers common to both forward kernels.
struct ForwardPtrs<T> {
    weight: DevicePtr<T>,
    bias: DevicePtr<T>,
    mean: DevicePtrMut<f32>,
    rstd: DevicePtrMut<f32>,
}

fn forward_ptrs<T: FloatElement>(
    op: &'static str,
    rows: usize,
    c: usize,
    weight: &DeviceView<'_, T>,
    bias: &DeviceView<'_, T>,
    stats: &mut Option<LayerNormStats<'_>>,
) -> Result<ForwardPtrs<T::Abi>> {
    check_len(op, "weight", weight.len(), c, "c")?;
    check_len(op, "bias", bias.len(), c, "c")?;
    let (mean, rstd) = match stats {
        Some(s) => {
            check_len(op, "mean", s.mean.len(), rows, "one per row")?;
            check_len(op, "rstd", s.rstd.len(), rows, "one per row")?;
            (s.mean.ptr(), s.rstd.ptr())
        }
        None => (DevicePtrMut::null(), DevicePtrMut::null()),
    };
    Ok(ForwardPtrs { weight: weight.ptr(), bias: bias.ptr(), mean, rstd })
}

/// One warp per row.
fn forward_config(rows: usize) -> LaunchConfig {
    let warps = (FORWARD_THREADS / 32) as usize;
    LaunchConfig::linear(rows.div_ceil(warps) as u32, FORWARD_THREADS)
}

/// `out = layernorm(inp)·weight + bias` over rows of `c` channels, saving the statistics.
pub fn layernorm_forward<D: Device, T: FloatElement>(
    dev: &D,
    c: usize,
    mut args: LayerNormForward<'_, T>,
) -> Result<()> {
    const OP: &str = "layernorm_forward";
    let rows = rows_of(OP, "inp", args.inp.len(), c)?;
    check_len(OP, "out", args.out.len(), args.inp.len(), "length of inp")?;
    let ptrs = forward_ptrs(OP, rows, c, &args.weight, &args.bias, &mut args.stats)?;
    if rows == 0 {
        return Ok(());
    }
    let params = LayerNormForwardParams {
        inp: args.inp.ptr(),
        inp2: DevicePtr::null(),
        residual: DevicePtrMut::null(),
        weight: ptrs.weight,
        bias: ptrs.bias,
        out: args.out.ptr(),
        mean: ptrs.mean,
        rstd: ptrs.rstd,
        rows: rows as u32,
        c: c as u32,
    };
    // SAFETY: every view was checked against (rows, c); `out` and the statistics are
    // mutable borrows, so they overlap no input.
    unsafe { dev.launch(T::Abi::FORWARD, forward_config(rows), params) }
}

/// `residual = inp1 + inp2`, then `out = layernorm(residual)·weight + bias`, in one pass.
pub fn residual_layernorm_forward<D: Device, T: FloatElement>(
    dev: &D,
    c: usize,
    mut args: ResidualLayerNormForward<'_, T>,
) -> Result<()> {
    const OP: &str = "residual_layernorm_forward";
    let rows = rows_of(OP, "inp1", args.inp1.len(), c)?;
    for (arg, len) in
        [("inp2", args.inp2.len()), ("residual", args.residual.len()), ("out", args.out.len())]
    {
        check_len(OP, arg, len, args.inp1.len(), "length of inp1")?;
    }
    let ptrs = forward_ptrs(OP, rows, c, &args.weight, &args.bias, &mut args.stats)?;
    if rows == 0 {
        return Ok(());
    }
    let params = LayerNormForwardParams {
        inp: args.inp1.ptr(),
        inp2: args.inp2.ptr(),
        residual: args.residual.ptr(),
        weight: ptrs.weight,
        bias: ptrs.bias,
        out: args.out.ptr(),
        mean: ptrs.mean,
        rstd: ptrs.rstd,
        rows: rows as u32,
        c: c as u32,
    };
    // SAFETY: as in `layernorm_forward`; `residual` is written and then read back only by the
    // thread that wrote each element.
    unsafe { dev.launch(T::Abi::RESIDUAL_FORWARD, forward_config(rows), params) }
}

/// Blocks of the backward's first kernel for `rows × c`.
fn backward_blocks(rows: usize, c: usize) -> usize {
    rows.div_ceil(backward_rows_per_block(c as u32).max(1) as usize)
}

/// f32 values of scratch [`layernorm_backward`] needs for `rows` rows of `c` channels, with
/// or without [`LayerNormBackward::dinp_sum`] (`colsum`).
pub fn layernorm_backward_scratch_len(rows: usize, c: usize, colsum: bool) -> usize {
    backward_blocks(rows, c) * backward_parts(colsum) as usize * c
}

/// The layernorm backward: `dinp += …`, `dweight = beta · dweight + …`, `dbias = beta · dbias +
/// …` and optionally `dinp_sum = beta · dinp_sum + Σ_rows dinp` (see `kernel_abi::layernorm`),
/// deterministic: the same bits on every run and every GPU. 16-bit rows of at most
/// `BACKWARD_CACHED_MAX_C` channels with `c % 8 == 0` and 16-byte aligned `dout`, `inp`,
/// `weight` and `dinp` run `layernorm_backward_cached_<ty>` (the same bits as the chunked
/// kernel); with `dinp_sum`, their `colsum` variants (the same bits for the rest). `c` is at
/// most 6144.
pub fn layernorm_backward<D: Device, T: FloatElement>(
    dev: &D,
    c: usize,
    mut args: LayerNormBackward<'_, T>,
) -> Result<()> {
    const OP: &str = "layernorm_backward";
    let rows = rows_of(OP, "dout", args.dout.len(), c)?;
    check_len(OP, "inp", args.inp.len(), args.dout.len(), "length of dout")?;
    check_len(OP, "dinp", args.dinp.len(), args.dout.len(), "length of dout")?;
    check_len(OP, "weight", args.weight.len(), c, "c")?;
    check_len(OP, "dweight", args.dweight.len(), c, "c")?;
    check_len(OP, "dbias", args.dbias.len(), c, "c")?;
    if let Some(dinp_sum) = &args.dinp_sum {
        check_len(OP, "dinp_sum", dinp_sum.len(), c, "c")?;
    }
    check_len(OP, "mean", args.mean.len(), rows, "one per row")?;
    check_len(OP, "rstd", args.rstd.len(), rows, "one per row")?;
    let colsum = args.dinp_sum.is_some();
    let warps = backward_warps(c as u32);
    if warps == 0 {
        return Err(GpuError::invalid(
            OP,
            "c",
            format!("{c} channels: the per-warp sums need c <= 6144"),
        ));
    }
    let needed = layernorm_backward_scratch_len(rows, c, colsum);
    if args.scratch.len() < needed {
        return Err(GpuError::invalid(
            OP,
            "scratch",
            format!(
                "has {} values, needs {needed} (layernorm_backward_scratch_len)",
                args.scratch.len()
            ),
        ));
    }
    if rows == 0 && args.beta == 1.0 {
        return Ok(());
    }
    let blocks = backward_blocks(rows, c);
    let partials = args.scratch.ptr();
    let params = LayerNormBackwardParams {
        dout: args.dout.ptr(),
        inp: args.inp.ptr(),
        weight: args.weight.ptr(),
        mean: args.mean.ptr(),
        rstd: args.rstd.ptr(),
        dinp: args.dinp.ptr(),
        partials,
        rows: rows as u32,
        c: c as u32,
    };
    let config = LaunchConfig {
        grid: (blocks as u32, 1, 1),
        block: (warps * 32, 1, 1),
        shared_mem_bytes: backward_shared_bytes(c as u32, colsum),
    };
    let (chunked, cached) = match colsum {
        false => (T::Abi::BACKWARD, T::Abi::BACKWARD_CACHED),
        true => (T::Abi::BACKWARD_COLSUM, T::Abi::BACKWARD_CACHED_COLSUM),
    };
    let cached = cached.filter(|_| {
        c.is_multiple_of(8)
            && c <= BACKWARD_CACHED_MAX_C as usize
            && params.dout.is_aligned_to(16)
            && params.inp.is_aligned_to(16)
            && params.weight.is_aligned_to(16)
            && params.dinp.is_aligned_to(16)
    });
    if rows > 0 {
        // SAFETY: every view was checked against (rows, c); `partials` holds `blocks ×
        // parts·c` values; shared memory holds each warp's arrays of channel sums; the cached
        // kernel's row width and alignment were checked just above.
        unsafe { dev.launch(cached.unwrap_or(chunked), config, params)? };
    }
    let reduce = LayerNormBackwardReduceParams {
        partials: partials.as_const(),
        dweight: args.dweight.ptr(),
        dbias: args.dbias.ptr(),
        dinp_sum: args.dinp_sum.as_mut().map_or(DevicePtrMut::null(), |sum| sum.ptr()),
        blocks: blocks as u32,
        c: c as u32,
        beta: args.beta,
        _pad: 0,
    };
    let config = LaunchConfig {
        grid: (c.div_ceil(REDUCE_CHANNELS as usize) as u32, 1, 1),
        block: (REDUCE_THREADS, 1, 1),
        shared_mem_bytes: REDUCE_SHARED_BYTES,
    };
    // SAFETY: `partials` was just written for `blocks` blocks (none when there are no rows:
    // the gradients become `beta ·` themselves); the gradients and `dinp_sum` hold `c` values;
    // shared memory holds the reduction's per-group sums.
    unsafe { dev.launch(LAYERNORM_BACKWARD_REDUCE, config, reduce) }
}
