//! [`gemm`] and [`gemm_split_k`]: validation, the engine's launch, the split-K reduction.

use super::{
    Activation, Epilogue, GemmEngine, GemmOutput, GemmSpec, GemmTypes, Layout, Precision, invalid,
    to_u32, wgmma,
};
use crate::device::{Device, LaunchConfig};
use crate::error::Result;
use crate::kernels::elementwise::fill;
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::gemm::{
    ACT_DGELU, ACT_GELU, ACT_NONE, GemmParams, SPLIT_REDUCE_THREADS, TAIL_BM, TAIL_BN, simt, tc,
};
use kernel_abi::gemm_wgmma::{WgmmaKernel, stream_k, wg};
use kernel_abi::{DevicePtr, DevicePtrMut};

fn check_ld(arg: &'static str, ld: usize, min: usize, what: &str) -> Result<()> {
    if ld < min.max(1) {
        return Err(invalid(arg, format!("{ld} is smaller than {what} ({min})")));
    }
    Ok(())
}

fn check_covers(arg: &'static str, len: usize, needed: usize) -> Result<()> {
    if len < needed {
        return Err(invalid(
            arg,
            format!(
                "has {len} elements, the shape, leading dimension and batch stride need {needed}"
            ),
        ));
    }
    Ok(())
}

/// Checks the shape, leading dimensions and batch of `spec` (not the views).
pub(super) fn validate(spec: &GemmSpec) -> Result<()> {
    let rows_cols = |layout, r, c| if layout == Layout::RowMajor { c } else { r };
    check_ld(
        "lda",
        spec.lda,
        rows_cols(spec.a_layout, spec.m, spec.k),
        "the stored row length of A",
    )?;
    check_ld(
        "ldb",
        spec.ldb,
        rows_cols(spec.b_layout, spec.k, spec.n),
        "the stored row length of B",
    )?;
    check_ld("ldc", spec.ldc, spec.n, "N")?;
    if spec.batch == 0 || spec.batch > 65_535 {
        return Err(invalid("batch", format!("{} is not in 1..=65535", spec.batch)));
    }
    // 32-bit dimensions first: the batch span below cannot overflow then.
    for (arg, value) in [
        ("m", spec.m),
        ("n", spec.n),
        ("k", spec.k),
        ("lda", spec.lda),
        ("ldb", spec.ldb),
        ("ldc", spec.ldc),
    ] {
        to_u32(arg, value)?;
    }
    if spec.whole_tiles > 0 && spec.whole_tiles >= spec.tiles_128() {
        return Err(invalid(
            "whole_tiles",
            format!(
                "{} leaves none of the {} tiles of 128 × 128 to split",
                spec.whole_tiles,
                spec.tiles_128()
            ),
        ));
    }
    if spec.batch > 1 && spec.m > 0 && spec.n > 0 {
        let matrix = (spec.m - 1) * spec.ldc + spec.n;
        if spec.stride_c < matrix {
            return Err(invalid(
                "stride_c",
                format!(
                    "{} makes batches of C overlap (each spans {matrix} elements)",
                    spec.stride_c
                ),
            ));
        }
    }
    Ok(())
}

/// `C = act(alpha · op(A) · op(B) + beta · C + bias)` on every batch (see the module docs and
/// `kernel_abi::gemm`), with the variant of `spec.precision` on the engine of
/// [`GemmSpec::engine_on`], in one pass (`spec.split_k` must not split K; see
/// [`gemm_split_k`]).
///
/// Errors (`GpuError::InvalidArgument`, before anything is launched): a precision that does not
/// take these element types, leading dimensions smaller than the stored rows, a batch count
/// outside 1..=65535, overlapping batches of C, a view shorter than the shape needs (bias:
/// N; column sums: [`col_sums_len`](super::col_sums_len)), a dimension that does not fit in
/// 32 bits, a `split_k` that splits K on some engine the spec may run on, column sums under
/// FP32, or [`GemmEngine::Wgmma`] where it does not apply (argument `engine`).
pub fn gemm<D: Device, I: GemmTypes<O>, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    a: DeviceView<'_, I>,
    b: DeviceView<'_, I>,
    c: DeviceViewMut<'_, O>,
    epilogue: Epilogue<'_, O>,
) -> Result<()> {
    if spec.max_slices() > 1 {
        return Err(invalid(
            "split_k",
            format!("{} needs an f32 workspace: call gemm_split_k", spec.split_k),
        ));
    }
    if spec.workspace_len() > 0 {
        return Err(invalid(
            "stream_k_blocks",
            "stream-K needs an f32 workspace for its partial tiles: call gemm_split_k",
        ));
    }
    launch(dev, spec, a, b, c, epilogue, None)
}

/// [`gemm`] with K split into `spec.split_k` slices: the first launch writes each slice's f32
/// partial products to `workspace` (at least [`GemmSpec::workspace_len`] elements), a second
/// sums the slices in order (deterministic) and applies the epilogue. For outputs with few
/// tiles and a long K (see [`GemmSpec::with_split_k_for`]). With `split_k == 1` it is [`gemm`]
/// and the workspace is unused. The slices are those of [`GemmSpec::split_plan_for`] the
/// engine that runs (the `wgmma` kernel steps through K in larger tiles, so it may launch
/// fewer slices than `mma.sync` for the same `split_k`). A launch that splits writes no column
/// sums (`InvalidArgument` for `col_sums`).
pub fn gemm_split_k<D: Device, I: GemmTypes<O>, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    a: DeviceView<'_, I>,
    b: DeviceView<'_, I>,
    c: DeviceViewMut<'_, O>,
    epilogue: Epilogue<'_, O>,
    workspace: DeviceViewMut<'_, f32>,
) -> Result<()> {
    validate(spec)?;
    check_covers("workspace", workspace.len(), spec.workspace_len())?;
    launch(dev, spec, a, b, c, epilogue, Some(workspace))
}

/// Validates, picks the engine and launches (both passes when split).
fn launch<D: Device, I: GemmTypes<O>, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    a: DeviceView<'_, I>,
    b: DeviceView<'_, I>,
    mut c: DeviceViewMut<'_, O>,
    epilogue: Epilogue<'_, O>,
    workspace: Option<DeviceViewMut<'_, f32>>,
) -> Result<()> {
    let simt_tile = spec.simt_tile();
    let kernels = I::kernels(spec.precision, simt_tile).ok_or_else(|| {
        invalid(
            "precision",
            format!(
                "{:?} does not multiply {} into {} (this input type takes {:?})",
                spec.precision,
                I::NAME,
                O::NAME,
                I::PRECISIONS
            ),
        )
    })?;
    validate(spec)?;
    check_covers("a", a.len(), spec.a_len())?;
    check_covers("b", b.len(), spec.b_len())?;
    check_covers("c", c.len(), spec.c_len())?;
    let bias = match epilogue.bias {
        Some(bias) => {
            check_covers("bias", bias.len(), spec.n)?;
            bias.ptr()
        }
        None => DevicePtr::null(),
    };
    let (activation, pre_act_store, pre_act_load) = match epilogue.activation {
        Activation::None => (ACT_NONE, DevicePtrMut::null(), DevicePtr::null()),
        Activation::Gelu { pre_act: None } => (ACT_GELU, DevicePtrMut::null(), DevicePtr::null()),
        Activation::Gelu { pre_act: Some(mut pre) } => {
            check_covers("pre_act", pre.len(), spec.c_len())?;
            (ACT_GELU, pre.ptr(), DevicePtr::null())
        }
        Activation::DGelu { pre_act } => {
            check_covers("pre_act", pre_act.len(), spec.c_len())?;
            (ACT_DGELU, DevicePtrMut::null(), pre_act.ptr())
        }
    };
    let col_sums = match epilogue.col_sums {
        Some(mut sums) if spec.precision != Precision::Fp32 => {
            check_covers("col_sums", sums.len(), super::col_sums_len(spec.batch, spec.m, spec.n))?;
            sums.ptr()
        }
        Some(_) => {
            return Err(invalid(
                "col_sums",
                "the FP32 SIMT kernels write no column sums: use a tensor-core precision",
            ));
        }
        None => DevicePtrMut::null(),
    };
    let engine = spec.engine_on(dev, a.addr(), b.addr())?;
    if spec.m == 0 || spec.n == 0 {
        return Ok(());
    }
    let wgmma = match engine {
        GemmEngine::Wgmma => Some(wgmma_entry::<I, O>(spec, dev.multiprocessors())?),
        GemmEngine::Auto | GemmEngine::MmaSync => None,
    };
    let (bm, bn) = match (wgmma, spec.precision) {
        (Some((tile, _)), _) => (wg::BM, tile.bn),
        (None, Precision::Fp32) => (simt::BM, simt_tile.bn),
        (None, _) => (tc::BM, tc::BN),
    };
    let tiles_m = spec.m.div_ceil(bm as usize);
    let tiles_n = spec.n.div_ceil(bn as usize);
    let blocks = to_u32("m", tiles_m * tiles_n)?;
    let (slices, steps_per_slice) = spec.split_plan_for(engine);
    if slices > 65_535 {
        return Err(invalid("split_k", format!("{slices} slices exceed the grid's 65535")));
    }
    if slices > 1 && !col_sums.is_null() {
        return Err(invalid("col_sums", format!("a launch split in {slices} writes none")));
    }
    let stream_k = wgmma.is_some_and(|(tile, _)| tile.stream_k);
    let workspace = match (slices, workspace) {
        (_, Some(w)) if stream_k => stream_k_workspace(dev, spec, w)?,
        (_, None) if stream_k => {
            return Err(invalid("stream_k_blocks", "a stream-K launch needs a workspace"));
        }
        (1, _) => DevicePtrMut::null(),
        (_, Some(mut w)) => {
            check_covers("workspace", w.len(), spec.workspace_len_for(engine))?;
            w.ptr()
        }
        (_, None) => return Err(invalid("split_k", "a split launch needs a workspace")),
    };
    let params = GemmParams {
        a: a.ptr(),
        b: b.ptr(),
        c: c.ptr(),
        bias,
        pre_act_store,
        pre_act_load,
        workspace,
        col_sums,
        stride_a: spec.stride_a as u64,
        stride_b: spec.stride_b as u64,
        stride_c: spec.stride_c as u64,
        m: spec.m as u32,
        n: spec.n as u32,
        k: spec.k as u32,
        lda: spec.lda as u32,
        ldb: spec.ldb as u32,
        ldc: spec.ldc as u32,
        alpha: spec.alpha,
        beta: spec.beta,
        activation,
        tiles_m: tiles_m as u32,
        tiles_n: tiles_n as u32,
        split_k: slices as u32,
        k_tiles_per_split: steps_per_slice as u32,
        // `split_plan_for` splits a tail split only on wgmma.
        whole_tiles: if slices > 1 { spec.whole_tiles as u32 } else { 0 },
    };
    if let Some((tile, kernel)) = wgmma {
        // SAFETY: as for the mma.sync launch below (same views, shape and workspace checks);
        // `engine_on` established the wgmma preconditions (K ≥ 1, batches 16-byte aligned and
        // disjoint, layouts the precision's wgmma reads, 16-byte aligned operands and rows).
        unsafe { wgmma::launch(dev, spec, (tile, kernel), params) }?;
    } else {
        let (threads, smem) = match spec.precision {
            Precision::Fp32 => (simt_tile.threads(), simt::SMEM_BYTES),
            _ => (tc::THREADS, tc::SMEM_BYTES),
        };
        let config = LaunchConfig {
            grid: (blocks, slices as u32, spec.batch as u32),
            block: (threads, 1, 1),
            shared_mem_bytes: smem,
        };
        let kernel = kernels.get(spec.a_layout, spec.b_layout);
        // SAFETY: every view covers the elements the kernel reads or writes for this shape,
        // leading dimensions and batch strides (checked above); batches of C do not overlap;
        // the bias covers N; C and a stored pre-activation are distinct mutable borrows; a
        // split launch has a workspace of batch · slices · M · N f32 (checked above); the
        // grid, block and shared memory are the kernel family's.
        unsafe { dev.launch(kernel, config, params) }?;
    }
    if slices == 1 {
        return Ok(());
    }
    split_reduce::<D, I::Abi, O>(dev, spec, &params)
}

/// The workspace of a stream-K launch of `spec`, checked, its tiles' counters zeroed
/// (`kernel_abi::gemm_wgmma::stream_k`: the kernel counts the partial segments of each tile
/// in them).
fn stream_k_workspace<D: Device>(
    dev: &D,
    spec: &GemmSpec,
    mut workspace: DeviceViewMut<'_, f32>,
) -> Result<DevicePtrMut<f32>> {
    let needed = spec.workspace_len_for(GemmEngine::Wgmma);
    check_covers("workspace", workspace.len(), needed)?;
    let (_, tiles) = spec
        .stream_k_grid(GemmEngine::Wgmma)
        .ok_or_else(|| invalid("stream_k_blocks", "a stream-K launch without a stream-K plan"))?;
    let counters = needed - stream_k::counters_len(tiles)..needed;
    fill(dev, workspace.reborrow().slice_mut(counters)?, 0.0)?;
    Ok(workspace.ptr())
}

/// A Hopper entry and the block tile it was built for.
type TiledWgmma<I, O> = (wg::Tile, WgmmaKernel<I, O>);

/// The Hopper kernel's tile and entry for `spec` on a GPU with `sms` SMs
/// ([`wgmma::tile_for`]).
fn wgmma_entry<I: GemmTypes<O>, O: GemmOutput>(
    spec: &GemmSpec,
    sms: u32,
) -> Result<TiledWgmma<I::Abi, O::Abi>> {
    let entry = |tile| {
        I::wgmma_kernels(spec.precision, tile)
            .and_then(|family| family.get(spec.a_layout, spec.b_layout))
    };
    let tile = wgmma::tile_for(spec, sms)?;
    let kernel = entry(tile).ok_or_else(|| {
        invalid(
            "engine",
            format!(
                "{:?} has no wgmma kernel for A {:?}, B {:?}",
                spec.precision, spec.a_layout, spec.b_layout
            ),
        )
    })?;
    Ok((tile, kernel))
}

/// The second pass of a split launch: sums the slices `params.workspace` holds into C and
/// applies the epilogue (the same for every engine).
fn split_reduce<D: Device, I: Copy + 'static, O: GemmOutput>(
    dev: &D,
    spec: &GemmSpec,
    params: &GemmParams<I, O::Abi>,
) -> Result<()> {
    let runs = if params.whole_tiles == 0 {
        spec.m * spec.n.div_ceil(8)
    } else {
        spec.tail_tiles() * (TAIL_BM * TAIL_BN / 8) as usize
    };
    let reduce_blocks = to_u32("m", runs.div_ceil(SPLIT_REDUCE_THREADS as usize))?;
    let reduce = GemmParams {
        a: DevicePtr::null(),
        b: DevicePtr::null(),
        c: params.c,
        bias: params.bias,
        pre_act_store: params.pre_act_store,
        pre_act_load: params.pre_act_load,
        workspace: params.workspace,
        col_sums: DevicePtrMut::null(),
        stride_a: 0,
        stride_b: 0,
        stride_c: params.stride_c,
        m: params.m,
        n: params.n,
        k: params.k,
        lda: 0,
        ldb: 0,
        ldc: params.ldc,
        alpha: params.alpha,
        beta: params.beta,
        activation: params.activation,
        tiles_m: params.tiles_m,
        tiles_n: params.tiles_n,
        split_k: params.split_k,
        k_tiles_per_split: params.k_tiles_per_split,
        whole_tiles: params.whole_tiles,
    };
    let config = LaunchConfig {
        grid: (reduce_blocks, 1, spec.batch as u32),
        block: (SPLIT_REDUCE_THREADS, 1, 1),
        shared_mem_bytes: 0,
    };
    // SAFETY: `params` is the first pass's, whose checks cover C, the pre-activation and the
    // bias; the reduction reads the workspace the first pass wrote (same stream, so in order)
    // and writes C and the pre-activation exactly as the one-pass epilogue does.
    unsafe { dev.launch(O::SPLIT_REDUCE, config, reduce) }
}
