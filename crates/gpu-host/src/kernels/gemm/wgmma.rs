//! The Hopper path of [`gemm`](fn@super::gemm): when it applies, the operands' tensor maps, and
//! the launch of a `gemm_wgmma_*` entry (see `kernel_abi::gemm_wgmma`).

use super::{GemmEngine, GemmSpec, Layout, Precision, WgmmaTile, invalid, to_u32};
use crate::device::{Device, LaunchConfig};
use crate::error::Result;
use crate::ptx::PtxArch;
use crate::tensor_map::{TensorMapDesc, TensorMapElem, TensorMapLayers, TensorMapSwizzle};
use kernel_abi::DevicePtr;
use kernel_abi::gemm::{GemmParams, units_per_batch};
use kernel_abi::gemm_wgmma::{TensorMap, WgmmaGemmParams, WgmmaKernel, wg};

/// The element type of the operands of `precision` (`None`: FP32, which has no wgmma form).
fn operand_elem(precision: Precision) -> Option<TensorMapElem> {
    match precision {
        Precision::Fp32 => None,
        Precision::Tf32 => Some(TensorMapElem::F32),
        Precision::Bf16 => Some(TensorMapElem::Bf16),
        Precision::Fp16 => Some(TensorMapElem::F16),
    }
}

/// Why the wgmma kernel cannot run `spec`, judging by the spec alone (precision, layouts, K,
/// batch strides), or `None`.
pub(super) fn shape_reason(spec: &GemmSpec) -> Option<String> {
    let Some(elem) = operand_elem(spec.precision) else {
        return Some("FP32 runs on the SIMT cores only (wgmma takes TF32, BF16 and FP16)".into());
    };
    let k_major = (spec.a_layout, spec.b_layout) == (Layout::RowMajor, Layout::ColMajor);
    if spec.precision == Precision::Tf32 && !k_major {
        return Some(format!(
            "wgmma reads TF32 operands K-major only (A row-major, B column-major), not {:?} / {:?}",
            spec.a_layout, spec.b_layout
        ));
    }
    if spec.k == 0 {
        return Some(
            "K is 0 (no product to compute; the mma.sync kernel applies C = beta·C + bias)".into(),
        );
    }
    let esize = elem.size_bytes() as usize;
    if spec.batch > 1 {
        for (name, stride, matrix) in [
            (
                "stride_a",
                spec.stride_a,
                matrix_elems(spec.a_layout == Layout::RowMajor, spec.m, spec.k, spec.lda),
            ),
            (
                "stride_b",
                spec.stride_b,
                matrix_elems(spec.b_layout == Layout::ColMajor, spec.n, spec.k, spec.ldb),
            ),
        ] {
            let aligned = stride.checked_mul(esize).is_some_and(|b| b.is_multiple_of(16));
            if stride < matrix || !aligned {
                return Some(format!(
                    "{name} = {stride}: TMA reads batches that start 16-byte aligned and do not \
                     overlap (each matrix spans {matrix} elements)"
                ));
            }
        }
    }
    None
}

/// Elements of one operand matrix as its tensor map describes it: `mn` (M or N) rows of K
/// `ld` apart when `k_major`, else K rows of M or N.
fn matrix_elems(k_major: bool, mn: usize, k: usize, ld: usize) -> usize {
    if k_major { mn * ld } else { k * ld }
}

/// Why the wgmma kernel cannot run `spec` on a runtime with the `arch` module and operands at
/// `a_addr` / `b_addr`, or `None`: the module, then [`shape_reason`], then the alignment TMA
/// needs (16-byte aligned base addresses and row strides).
pub(super) fn unsupported_reason(
    arch: PtxArch,
    spec: &GemmSpec,
    a_addr: u64,
    b_addr: u64,
) -> Option<String> {
    if arch != PtxArch::Sm90a {
        return Some(format!(
            "the runtime loaded the {} PTX module, which has no wgmma kernels (they are in the \
             sm_90a module: a compute capability 9.0 GPU, or ptx_sim::Simulator::hopper())",
            arch.name()
        ));
    }
    if let Some(reason) = shape_reason(spec) {
        return Some(reason);
    }
    let Some(elem) = operand_elem(spec.precision) else {
        return Some("FP32 has no wgmma kernel".into());
    };
    let esize = elem.size_bytes() as u64;
    for (name, addr) in [("A", a_addr), ("B", b_addr)] {
        if !addr.is_multiple_of(16) {
            return Some(format!("{name} at {addr:#x} is not 16-byte aligned (TMA needs it)"));
        }
    }
    for (name, ld) in [("lda", spec.lda), ("ldb", spec.ldb)] {
        let bytes = ld as u64 * esize;
        if !bytes.is_multiple_of(16) {
            return Some(format!(
                "{name} = {ld} makes rows of {bytes} bytes, not a multiple of 16 (TMA needs it)"
            ));
        }
    }
    None
}

/// The block tile of the wgmma kernel for `spec` on a GPU with `sms` SMs: `spec.wgmma_tile` when
/// set (an [`GpuError::InvalidArgument`](crate::GpuError::InvalidArgument) for `N256` or
/// `PingPong` without such an entry, [`GemmSpec::has_wgmma_entry`]; `StreamK` where
/// [`GemmSpec::with_split_k_for`] planned stream-K, else as `Auto`); under `Auto` (and `Tuned`,
/// whose choice is its caller's):
/// - the ping-pong schedule for an unbatched, unsplit 16-bit `rc` GEMM (a linear layer's
///   forward) with at least two 128×128 tiles per SM: on an H100 (2026-11-26) it ran GPT-2's
///   forward GEMMs 0.5–9.5% faster than the cooperative tiles (its consumers take turns, one's
///   epilogue overlapping the other's wgmmas), but its input gradients (`rr`) up to 32%
///   slower (the lm head's, K = 50304) and the batched attention `Q·Kᵀ` 6% slower;
/// - else 128×256 when there is the entry, N > 128, K is not split and the wide tiles still
///   give every SM at least one (`tiles_m · ceil(N / 256) · batch ≥ sms`: each block then
///   multiplies twice the columns per A tile it loads; with N ≤ 128 half of each wide tile or
///   more would be zeros: the attention's `P·V` (N = 64) ran at 67% of cuBLAS on them and at
///   102% on 128×128 tiles on an H100);
/// - else 128×128.
///
/// Heuristics from `cargo xtask bench gemm` and `trainer bench --wgmma-tile` on the GPU, which
/// time every tile.
pub(super) fn tile_for(spec: &GemmSpec, sms: u32) -> Result<wg::Tile> {
    let missing = |what: &str| {
        invalid(
            "wgmma_tile",
            format!(
                "{:?} has no {what} wgmma entry for A {:?}, B {:?} (ping-pong: A row-major \
                 only; deferred: 16-bit, A row-major only; stream-K: 16-bit, rc and cr only; TF32: \
                 A row-major, B column-major only)",
                spec.precision, spec.a_layout, spec.b_layout
            ),
        )
    };
    let split = spec.split_plan_for(GemmEngine::Wgmma).0 > 1;
    let tail_split = spec.whole_tiles > 0 && split;
    match spec.wgmma_tile {
        WgmmaTile::Deferred if split => Err(invalid(
            "wgmma_tile",
            "the deferred epilogue writes whole tiles: a GEMM split over K (split_k > 1) runs \
             on another tile",
        )),
        WgmmaTile::N256 if tail_split => Err(invalid(
            "wgmma_tile",
            "a tail split (whole_tiles > 0) keeps the partial sums of 128 × 128 tiles, not of \
             128 × 256 ones",
        )),
        WgmmaTile::N128 => Ok(wg::N128),
        WgmmaTile::StreamK if spec.stream_k_grid(GemmEngine::Wgmma).is_none() => {
            tile_for(&GemmSpec { wgmma_tile: WgmmaTile::Auto, ..*spec }, sms)
        }
        WgmmaTile::StreamK if split || spec.batch > 1 => Err(invalid(
            "stream_k_blocks",
            "stream-K shares the k-tiles of one batch's whole tiles: not with split_k > 1 or \
             batch > 1",
        )),
        WgmmaTile::StreamK if spec.has_wgmma_entry(WgmmaTile::StreamK) => Ok(wg::STREAM_K),
        WgmmaTile::StreamK => Err(missing("stream-K")),
        forced @ (WgmmaTile::N256 | WgmmaTile::PingPong | WgmmaTile::Deferred)
            if spec.has_wgmma_entry(forced) =>
        {
            Ok(forced.geometry())
        }
        WgmmaTile::N256 => Err(missing("128 × 256")),
        WgmmaTile::PingPong => Err(missing("ping-pong")),
        WgmmaTile::Deferred => Err(missing("deferred-epilogue")),
        WgmmaTile::Auto | WgmmaTile::Tuned => {
            let tiles = |bn: u32| spec.m.div_ceil(wg::BM as usize) * spec.n.div_ceil(bn as usize);
            let unsplit = spec.split_plan_for(GemmEngine::Wgmma).0 == 1;
            let forward = (spec.a_layout, spec.b_layout) == (Layout::RowMajor, Layout::ColMajor)
                && spec.batch == 1
                && matches!(spec.precision, Precision::Bf16 | Precision::Fp16);
            let pingpong = forward
                && unsplit
                && spec.has_wgmma_entry(WgmmaTile::PingPong)
                && tiles(wg::PINGPONG.bn) >= 2 * sms as usize;
            let fills = tiles(wg::N256.bn).saturating_mul(spec.batch) >= sms as usize;
            let narrow_n = spec.n <= wg::N128.bn as usize;
            let wide = spec.has_wgmma_entry(WgmmaTile::N256) && unsplit && fills && !narrow_n;
            Ok(if pingpong {
                wg::PINGPONG
            } else if wide {
                wg::N256
            } else {
                wg::N128
            })
        }
    }
}

/// The rank-3 tensor maps of A and B for tiles `tile`, 128-byte swizzle, dimension 2 the
/// batch (`stride_a` / `stride_b` apart; one matrix, contiguous, when `batch == 1`). A K-major
/// operand (A row-major, B column-major) is described as rows (M or N, `ld` apart) of K
/// elements, box `wg::BK_BYTES` of K × `wg::BM` (A) / `tile.bn` (B) rows; an M/N-major one
/// (A column-major, B row-major) as rows of K (`ld` apart) of M or N elements, box 64
/// elements (128 bytes) × `BK` rows, which the kernel loads once per 64 rows of its tile.
/// `spec` must be one [`unsupported_reason`] accepts (not FP32).
fn operand_maps(
    spec: &GemmSpec,
    tile: wg::Tile,
    a_addr: u64,
    b_addr: u64,
) -> Result<[TensorMapDesc; 2]> {
    let elem = operand_elem(spec.precision)
        .ok_or_else(|| invalid("engine", "FP32 has no wgmma kernel"))?;
    let esize = elem.size_bytes();
    let bk = wg::BK_BYTES / esize;
    // `mn`: M or N; `k_major`: whether K is the contiguous dimension.
    let desc = |addr: u64, (mn, ld, stride): (usize, usize, usize), k_major: bool, box_rows| {
        let matrix = matrix_elems(k_major, mn, spec.k, ld);
        let stride = if spec.batch == 1 { matrix } else { stride };
        TensorMapDesc {
            global_address: addr,
            elem,
            dims: if k_major { [spec.k as u64, mn as u64] } else { [mn as u64, spec.k as u64] },
            row_stride_bytes: ld as u64 * esize as u64,
            box_dims: if k_major { [bk, box_rows] } else { [wg::BK_BYTES / esize, bk] },
            swizzle: TensorMapSwizzle::B128,
            layers: Some(TensorMapLayers {
                count: spec.batch as u64,
                stride_bytes: stride as u64 * esize as u64,
            }),
        }
    };
    Ok([
        desc(a_addr, (spec.m, spec.lda, spec.stride_a), spec.a_layout == Layout::RowMajor, wg::BM),
        desc(b_addr, (spec.n, spec.ldb, spec.stride_b), spec.b_layout == Layout::ColMajor, tile.bn),
    ])
}

/// Launches the first (or only) pass of a GEMM on the wgmma `kernel` of tiles `tile`: `params`
/// as for the `mma.sync` kernel (tiles of `wg::BM` × `tile.bn`, the split plan of the wgmma
/// engine, and the tail split's `whole_tiles`), with the two tensor maps
/// ([`Device::with_tensor_maps_in_memory`]: uploaded once per operand buffers and shape, then
/// reused) and a persistent grid of `min(units, SMs)` blocks over the work units
/// (`units_per_batch · batch`, see `kernel_abi::gemm::work_unit`), or for the stream-K tile
/// the planned grid ([`GemmSpec::stream_k_grid`]) over the tiles' k-tiles.
///
/// # Safety
/// `params` must be valid for `kernel` as the checks of `super::launch` establish
/// (views covering A, B, C, the bias, the pre-activation and the workspace), and `spec` one
/// that [`unsupported_reason`] accepts for `dev` and the operand addresses; `kernel` an entry
/// of `tile`.
pub(super) unsafe fn launch<D: Device, I: Copy + 'static, O: Copy + 'static>(
    dev: &D,
    spec: &GemmSpec,
    (tile, kernel): (wg::Tile, WgmmaKernel<I, O>),
    params: GemmParams<I, O>,
) -> Result<()> {
    let descs = operand_maps(spec, tile, params.a.addr(), params.b.addr())?;
    let tiles = to_u32("m", params.tiles_m as usize * params.tiles_n as usize)?;
    let (units, grid) = match spec.stream_k_grid(GemmEngine::Wgmma) {
        Some((grid, stream_tiles)) if tile.stream_k && stream_tiles == tiles => (tiles, grid),
        _ if tile.stream_k => {
            return Err(invalid("stream_k_blocks", "a stream-K launch without a stream-K plan"));
        }
        _ => {
            let (split_k, whole_tiles) = (params.split_k, params.whole_tiles);
            let per_batch = units_per_batch(tiles, split_k, whole_tiles) as u64;
            let units = to_u32("m", (per_batch * spec.batch as u64) as usize)?;
            (units, units.min(dev.multiprocessors().max(1)))
        }
    };
    let config = LaunchConfig {
        grid: (grid, 1, 1),
        block: (wg::THREADS, 1, 1),
        shared_mem_bytes: tile.smem_bytes(),
    };
    dev.with_tensor_maps_in_memory(&descs, |maps| {
        let params = WgmmaGemmParams {
            gemm: params,
            tmap_a: DevicePtr::from_addr(maps),
            tmap_b: DevicePtr::from_addr(maps + size_of::<TensorMap>() as u64),
            units,
        };
        // SAFETY: the caller's contract covers `params.gemm`; the tensor maps describe
        // exactly the batches of A (M × K, lda, stride_a) and B (K × N, ldb, stride_b) in
        // their layouts, which the views cover, and stay in device memory for this launch
        // (the runtime's contract for `with_tensor_maps_in_memory`); the grid, block and
        // shared memory are those `kernel_abi::gemm_wgmma` specifies.
        unsafe { dev.launch(kernel, config, params) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forward(precision: Precision) -> GemmSpec {
        GemmSpec::linear_forward(300, 200, 72, precision)
    }

    #[test]
    fn applies_to_aligned_forward_gemms_on_sm_90a() {
        for p in [Precision::Tf32, Precision::Bf16, Precision::Fp16] {
            assert_eq!(unsupported_reason(PtxArch::Sm90a, &forward(p), 0x1000, 0x2000), None);
        }
    }

    #[test]
    fn applies_to_every_layout_of_16_bit_gemms() {
        for (a_layout, b_layout) in [
            (Layout::RowMajor, Layout::RowMajor),
            (Layout::ColMajor, Layout::RowMajor),
            (Layout::ColMajor, Layout::ColMajor),
        ] {
            let s = GemmSpec { a_layout, b_layout, lda: 304, ldb: 304, ..forward(Precision::Bf16) };
            assert_eq!(unsupported_reason(PtxArch::Sm90a, &s, 0x1000, 0x2000), None);
        }
    }

    #[test]
    fn reasons_name_what_does_not_fit() {
        let why = |spec: &GemmSpec, a, b| unsupported_reason(PtxArch::Sm90a, spec, a, b).unwrap();
        let s = forward(Precision::Bf16);
        assert!(unsupported_reason(PtxArch::Sm80, &s, 0, 0).unwrap().contains("sm_80"));
        assert!(why(&forward(Precision::Fp32), 0, 0).contains("FP32"));
        let rr = GemmSpec { b_layout: Layout::RowMajor, ldb: 200, ..s };
        assert_eq!(unsupported_reason(PtxArch::Sm90a, &rr, 0, 0), None);
        let tf32_rr = GemmSpec { precision: Precision::Tf32, ..rr };
        assert!(why(&tf32_rr, 0, 0).contains("TF32 operands K-major only"));
        // Batches: 16-byte aligned, not overlapping (A: 300 rows of 72; B: 200 rows of 72).
        let batched = GemmSpec { batch: 12, stride_a: 300 * 72, stride_b: 200 * 72, ..s };
        assert_eq!(unsupported_reason(PtxArch::Sm90a, &batched, 0, 0), None);
        let padded = GemmSpec { stride_a: 300 * 72 + 8, stride_b: 200 * 72 + 64, ..batched };
        assert_eq!(unsupported_reason(PtxArch::Sm90a, &padded, 0, 0), None);
        assert!(why(&GemmSpec { stride_a: 300 * 72 + 4, ..batched }, 0, 0).contains("stride_a"));
        assert!(why(&GemmSpec { stride_b: 200 * 72 - 8, ..batched }, 0, 0).contains("overlap"));
        assert!(why(&GemmSpec { stride_b: 0, ..batched }, 0, 0).contains("stride_b = 0"));
        assert!(why(&GemmSpec { k: 0, ..s }, 0, 0).contains("K is 0"));
        assert!(why(&s, 0x1008, 0).contains("A at 0x1008"));
        assert!(why(&s, 0, 0x2002).contains("B at 0x2002"));
        assert!(why(&GemmSpec { lda: 76, ..s }, 0, 0).contains("lda = 76"));
        assert!(why(&GemmSpec { ldb: 73, ..s }, 0, 0).contains("ldb = 73"));
        // TF32: 4-byte elements, so a multiple of 4 elements suffices.
        let tf32 = GemmSpec { lda: 76, ldb: 76, ..forward(Precision::Tf32) };
        assert_eq!(unsupported_reason(PtxArch::Sm90a, &tf32, 0, 0), None);
    }

    #[test]
    fn operand_maps_follow_the_layouts_in_boxes_of_one_swizzle_row() {
        let s = GemmSpec { lda: 80, ldb: 96, ..forward(Precision::Bf16) };
        let [a, b] = operand_maps(&s, wg::N128, 0x1000, 0x2000).unwrap();
        assert_eq!((a.global_address, a.elem), (0x1000, TensorMapElem::Bf16));
        assert_eq!((a.dims, a.row_stride_bytes, a.box_dims), ([72, 300], 160, [64, 128]));
        assert_eq!((b.dims, b.row_stride_bytes, b.box_dims), ([72, 200], 192, [64, 128]));
        assert_eq!((a.swizzle, b.swizzle), (TensorMapSwizzle::B128, TensorMapSwizzle::B128));
        // Batch 1: one matrix, its stride the matrix itself.
        let one = |stride_bytes| Some(TensorMapLayers { count: 1, stride_bytes });
        assert_eq!((a.layers, b.layers), (one(300 * 160), one(200 * 192)));
        assert!(a.validate().is_ok() && b.validate().is_ok());
        let batched = GemmSpec { batch: 5, stride_a: 300 * 80 + 8, stride_b: 200 * 96, ..s };
        let [a, b] = operand_maps(&batched, wg::N128, 0x1000, 0x2000).unwrap();
        let five = |stride_bytes| Some(TensorMapLayers { count: 5, stride_bytes });
        assert_eq!((a.layers, b.layers), (five(2 * (300 * 80 + 8)), five(200 * 192)));
        assert!(a.validate().is_ok() && b.validate().is_ok());
        // dW = dYᵀ·X (A column-major: K rows of M; B row-major: K rows of N).
        let cr = GemmSpec {
            a_layout: Layout::ColMajor,
            b_layout: Layout::RowMajor,
            lda: 304,
            ldb: 208,
            ..forward(Precision::Bf16)
        };
        let [a, b] = operand_maps(&cr, wg::N128, 0x1000, 0x2000).unwrap();
        assert_eq!((a.dims, a.row_stride_bytes, a.box_dims), ([300, 72], 608, [64, 64]));
        assert_eq!((b.dims, b.row_stride_bytes, b.box_dims), ([200, 72], 416, [64, 64]));
        // M/N-major matrices are K rows long.
        assert_eq!((a.layers, b.layers), (one(72 * 608), one(72 * 416)));
        assert!(a.validate().is_ok() && b.validate().is_ok());
        let [a, _] = operand_maps(&forward(Precision::Tf32), wg::N128, 0x1000, 0x2000).unwrap();
        assert_eq!((a.elem, a.row_stride_bytes, a.box_dims), (TensorMapElem::F32, 288, [32, 128]));
        assert!(operand_maps(&forward(Precision::Fp32), wg::N128, 0, 0).is_err());
    }
}
