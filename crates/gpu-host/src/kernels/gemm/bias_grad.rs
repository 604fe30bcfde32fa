//! [`bias_grad`]: column sums of an output gradient, the bias gradient of a linear layer; and
//! [`bias_grad_from_col_sums`], the same from the column sums a GEMM epilogue wrote.

use crate::device::{Device, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::Kernel;
use kernel_abi::gemm::{
    BIAS_GRAD_PARTIALS_BF16, BIAS_GRAD_PARTIALS_F16, BIAS_GRAD_PARTIALS_F32, BIAS_GRAD_REDUCE_BF16,
    BIAS_GRAD_REDUCE_F16, BIAS_GRAD_REDUCE_F32, BiasGradParams, BiasGradReduceParams, COL_SUM_ROWS,
    bias_grad as bg,
};

/// Element types of [`bias_grad`]: `dy` of `Self`, sums written as `O`: `f32 → f32`,
/// `bf16 → bf16 | f32`, `f16 → f16 | f32` (sums are f32 in every case).
pub trait BiasGradElement<O: BiasGradOutput>: DeviceElement {
    /// The first pass reading `dy` of this type.
    const PARTIALS: Kernel<BiasGradParams<Self::Abi>>;
}

/// Output types of [`bias_grad`].
pub trait BiasGradOutput: DeviceElement {
    /// The second pass writing sums of this type.
    const REDUCE: Kernel<BiasGradReduceParams<Self::Abi>>;
}

impl BiasGradOutput for f32 {
    const REDUCE: Kernel<BiasGradReduceParams<f32>> = BIAS_GRAD_REDUCE_F32;
}
impl BiasGradOutput for bf16 {
    const REDUCE: Kernel<BiasGradReduceParams<kernel_abi::Bf16>> = BIAS_GRAD_REDUCE_BF16;
}
impl BiasGradOutput for f16 {
    const REDUCE: Kernel<BiasGradReduceParams<kernel_abi::F16>> = BIAS_GRAD_REDUCE_F16;
}

impl BiasGradElement<f32> for f32 {
    const PARTIALS: Kernel<BiasGradParams<f32>> = BIAS_GRAD_PARTIALS_F32;
}
impl BiasGradElement<bf16> for bf16 {
    const PARTIALS: Kernel<BiasGradParams<kernel_abi::Bf16>> = BIAS_GRAD_PARTIALS_BF16;
}
impl BiasGradElement<f16> for f16 {
    const PARTIALS: Kernel<BiasGradParams<kernel_abi::F16>> = BIAS_GRAD_PARTIALS_F16;
}
impl BiasGradElement<f32> for bf16 {
    const PARTIALS: Kernel<BiasGradParams<kernel_abi::Bf16>> = BIAS_GRAD_PARTIALS_BF16;
}
impl BiasGradElement<f32> for f16 {
    const PARTIALS: Kernel<BiasGradParams<kernel_abi::F16>> = BIAS_GRAD_PARTIALS_F16;
}

/// f32 elements of workspace [`bias_grad`] needs for `rows` rows of `n` columns: one row of
/// `n` sums per slice of `kernel_abi::gemm::bias_grad::SLICE_ROWS` rows.
pub fn bias_grad_workspace_len(rows: usize, n: usize) -> usize {
    rows.div_ceil(bg::SLICE_ROWS as usize) * n
}

/// `db[n] = beta · db[n] + Σ_{m < rows} dy[m · ld + n]` for `n < db.len()`: the bias gradient of
/// a linear layer from its output gradient `dy` (rows × N, row-major, leading dimension `ld`).
/// Two launches: f32 column sums of each slice of rows into `workspace` (at least
/// [`bias_grad_workspace_len`] elements), then the slices added in order and rounded once.
/// Deterministic, the same bits on every GPU. `rows` is at most
/// `kernel_abi::gemm::bias_grad::MAX_ROWS` (8,388,480).
pub fn bias_grad<D: Device, T: BiasGradElement<O>, O: BiasGradOutput>(
    dev: &D,
    dy: DeviceView<'_, T>,
    rows: usize,
    ld: usize,
    db: DeviceViewMut<'_, O>,
    beta: f32,
    mut workspace: DeviceViewMut<'_, f32>,
) -> Result<()> {
    const OP: &str = "bias_grad";
    let n = db.len();
    if ld < n.max(1) {
        return Err(GpuError::invalid(OP, "ld", format!("{ld} is smaller than N = {n}")));
    }
    if rows > bg::MAX_ROWS as usize {
        let max = bg::MAX_ROWS;
        return Err(GpuError::invalid(OP, "rows", format!("{rows} exceeds {max}")));
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
    let workspace_len = bias_grad_workspace_len(rows, n);
    if workspace.len() < workspace_len {
        return Err(GpuError::invalid(
            OP,
            "workspace",
            format!("has {} f32, {rows} rows × {n} columns need {workspace_len}", workspace.len()),
        ));
    }
    if n == 0 {
        return Ok(());
    }
    let slices = bg::slices(rows as u32);
    let partials = BiasGradParams {
        dy: dy.ptr(),
        partials: workspace.ptr(),
        m: rows as u32,
        n: n as u32,
        ld: ld as u32,
        _pad: 0,
    };
    let config = LaunchConfig {
        grid: (n.div_ceil(bg::BLOCK_COLS as usize) as u32, slices, 1),
        block: (bg::THREADS, 1, 1),
        shared_mem_bytes: bg::PARTIALS_SHARED_BYTES,
    };
    if slices > 0 {
        // SAFETY: `dy` covers rows × N with leading dimension ld, the workspace holds slices ×
        // N f32; the launch geometry is the kernel's.
        unsafe { dev.launch(T::PARTIALS, config, partials)? };
    }
    // SAFETY: the first pass (same stream, so before) wrote slices × N partial sums.
    unsafe { reduce(dev, workspace.as_view(), slices, db, beta) }
}

/// Rows of column sums a GEMM of `batch` batches of `m` rows writes
/// ([`Epilogue::col_sums`](super::Epilogue::col_sums)): one per group of
/// `kernel_abi::gemm::COL_SUM_ROWS` rows of each batch, the `groups` of
/// [`bias_grad_from_col_sums`].
pub fn col_sum_groups(batch: usize, m: usize) -> usize {
    batch * m.div_ceil(COL_SUM_ROWS as usize)
}

/// f32 elements of the column sums a GEMM of `batch` batches of `m × n` writes: `n` per row
/// of [`col_sum_groups`].
pub fn col_sums_len(batch: usize, m: usize, n: usize) -> usize {
    col_sum_groups(batch, m) * n
}

/// `db[n] = beta · db[n] + Σ_g col_sums[g · N + n]` over the `groups` row groups (in order,
/// as [`bias_grad`]'s second pass): the bias gradient from the column sums a GEMM's epilogue
/// wrote of the output gradient it produced. N = `db.len()`; `col_sums` must hold `groups ·
/// N` values (`groups` = [`col_sum_groups`] of that GEMM, at most 2³² − 1).
/// Deterministic, the same bits on every GPU.
pub fn bias_grad_from_col_sums<D: Device, O: BiasGradOutput>(
    dev: &D,
    col_sums: DeviceView<'_, f32>,
    groups: usize,
    db: DeviceViewMut<'_, O>,
    beta: f32,
) -> Result<()> {
    const OP: &str = "bias_grad_from_col_sums";
    let n = db.len();
    let slices = u32::try_from(groups).map_err(|_| {
        GpuError::invalid(OP, "groups", format!("{groups} does not fit in 32 bits"))
    })?;
    u32::try_from(n)
        .map_err(|_| GpuError::invalid(OP, "db", format!("{n} does not fit in 32 bits")))?;
    let needed = groups * n;
    if col_sums.len() < needed {
        return Err(GpuError::invalid(
            OP,
            "col_sums",
            format!("has {} f32, {groups} groups × {n} columns need {needed}", col_sums.len()),
        ));
    }
    if n == 0 {
        return Ok(());
    }
    // SAFETY: `col_sums` holds groups × N values (checked above).
    unsafe { reduce(dev, col_sums, slices, db, beta) }
}

/// Launches the second pass: `db = beta · db + Σ_s partials[s · N ..]` over `slices` slices.
///
/// # Safety
/// `partials` holds `slices × db.len()` f32 written before (on the same stream); `db.len()`
/// fits in 32 bits and is not 0.
unsafe fn reduce<D: Device, O: BiasGradOutput>(
    dev: &D,
    partials: DeviceView<'_, f32>,
    slices: u32,
    mut db: DeviceViewMut<'_, O>,
    beta: f32,
) -> Result<()> {
    let n = db.len();
    let reduce = BiasGradReduceParams {
        partials: partials.ptr(),
        db: db.ptr(),
        n: n as u32,
        slices,
        beta,
        _pad: 0,
    };
    let config = LaunchConfig {
        grid: (n.div_ceil(bg::REDUCE_COLS as usize) as u32, 1, 1),
        block: (bg::REDUCE_THREADS, 1, 1),
        shared_mem_bytes: bg::REDUCE_SHARED_BYTES,
    };
    // SAFETY: `partials` holds slices × N sums (the caller's contract); `db` has N elements;
    // the launch geometry is the kernel's.
    unsafe { dev.launch(O::REDUCE, config, reduce) }
}
