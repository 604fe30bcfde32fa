//! Unit tests of the GEMM launchers: spec arithmetic, validation, split plans, engine and
//! tile choice, tensor maps.

use super::launch::validate;
use super::*;
use crate::device::Device;
use crate::error::GpuError;
use crate::ptx::PtxArch;
use crate::tensor_map::{TensorMapDesc, TensorMapElem, TensorMapLayers, TensorMapSwizzle};
use half::{bf16, f16};
use kernel_abi::gemm::{GemmParams, simt, tc};

#[test]
fn extents_follow_layout_ld_and_batch() {
    let mut s = GemmSpec::new(3, 5, 7, Layout::ColMajor, Layout::RowMajor, Precision::Bf16);
    assert_eq!((s.a_len(), s.b_len(), s.c_len()), (21, 35, 15));
    s.lda = 4;
    s.batch = 2;
    s.stride_a = 100;
    s.stride_c = 15;
    assert_eq!(s.a_len(), 100 + 6 * 4 + 3);
    assert_eq!(s.c_len(), 30);
    s.k = 0;
    assert_eq!(s.a_len(), 0);
}

#[test]
fn linear_helpers_pick_gpt2_layouts() {
    let f = GemmSpec::linear_forward(16384, 2304, 768, Precision::Bf16);
    assert_eq!((f.a_layout, f.b_layout, f.ldb), (Layout::RowMajor, Layout::ColMajor, 768));
    let dx = GemmSpec::linear_backward_input(16384, 768, 2304, Precision::Bf16);
    assert_eq!((dx.m, dx.n, dx.k, dx.ldb), (16384, 768, 2304, 768));
    let dw = GemmSpec::linear_backward_weight(16384, 768, 2304, Precision::Bf16);
    assert_eq!((dw.m, dw.n, dw.k, dw.lda, dw.beta), (2304, 768, 16384, 2304, 1.0));
    assert_eq!(f.flops(), 2.0 * 16384.0 * 2304.0 * 768.0);
}

#[test]
fn only_hopper_tf32_gemms_on_wgmma_truncate_their_operands() {
    let forward = |p| GemmSpec::linear_forward(16384, 2304, 768, p);
    let tf32 = forward(Precision::Tf32);
    assert!(tf32.truncates_tf32_operands(PtxArch::Sm90a));
    assert!(!tf32.truncates_tf32_operands(PtxArch::Sm80), "mma.sync rounds them");
    let mma = GemmSpec { engine: GemmEngine::MmaSync, ..tf32 };
    assert!(!mma.truncates_tf32_operands(PtxArch::Sm90a));
    let dw = GemmSpec::linear_backward_weight(16384, 768, 2304, Precision::Tf32);
    assert!(!dw.truncates_tf32_operands(PtxArch::Sm90a), "not K-major: mma.sync");
    for p in [Precision::Fp32, Precision::Bf16, Precision::Fp16] {
        assert!(!forward(p).truncates_tf32_operands(PtxArch::Sm90a), "{p:?}");
    }
}

#[test]
fn validation_names_the_argument() {
    let mut s = GemmSpec::new(4, 4, 4, Layout::RowMajor, Layout::RowMajor, Precision::Fp32);
    s.lda = 3;
    assert!(matches!(validate(&s), Err(GpuError::InvalidArgument { arg: "lda", .. })));
    s.lda = 4;
    s.batch = 2;
    s.stride_c = 10;
    assert!(matches!(validate(&s), Err(GpuError::InvalidArgument { arg: "stride_c", .. })));
    s.stride_c = 16;
    assert!(validate(&s).is_ok());
    s.batch = 70_000;
    assert!(matches!(validate(&s), Err(GpuError::InvalidArgument { arg: "batch", .. })));
}

#[test]
fn split_plans_have_no_empty_slices() {
    let mut s = GemmSpec::new(100, 100, 300, Layout::RowMajor, Layout::RowMajor, Precision::Bf16);
    assert_eq!(s.block_k(), 32);
    for (split, plan) in [(1, (1, 10)), (3, (3, 4)), (4, (4, 3)), (64, (10, 1))] {
        s.split_k = split;
        assert_eq!(s.split_plan(), plan, "split_k = {split}");
    }
    assert_eq!(s.workspace_len(), 10 * 100 * 100);
    s.k = 0;
    assert_eq!((s.split_plan(), s.workspace_len()), ((1, 0), 0));
}

#[test]
fn split_heuristic_targets_small_outputs_with_long_k() {
    let dw = |out, inp| GemmSpec::linear_backward_weight(16384, inp, out, Precision::Bf16);
    let a100 = |s: GemmSpec| s.with_split_k_for(108, PtxArch::Sm80).split_k;
    let h100 = |s: GemmSpec| s.with_split_k_for(132, PtxArch::Sm90a).split_k;
    // mma.sync, 2 blocks per SM: 216 block slots over 36, 108 and 144 tiles (at 144, one
    // block on 72 of the 108 SMs: 3 slices fill two waves).
    assert_eq!((a100(dw(768, 768)), a100(dw(2304, 768)), a100(dw(3072, 768))), (6, 2, 3));
    // wgmma, 1 persistent block per SM: 132 over 36 tiles; 108 already fill most SMs; 144 (fc
    // and fcproj) left 12 tiles for a second wave, measured at 59% of cuBLAS on an H200, and
    // at 61% split in 4: now a wave of 132 whole tiles, then the 12 others in 11 slices.
    let plan = |s: GemmSpec| {
        let s = s.with_split_k_for(132, PtxArch::Sm90a);
        (s.whole_tiles, s.split_k)
    };
    assert_eq!((plan(dw(768, 768)), plan(dw(2304, 768))), ((0, 3), (0, 1)));
    assert_eq!((plan(dw(3072, 768)), plan(dw(768, 3072))), ((132, 11), (132, 11)));
    let every = dw(3072, 768).with_every_tile_split_for(132, PtxArch::Sm90a);
    assert_eq!((every.whole_tiles, every.split_k), (0, 4), "the plan before the tail split");
    let tail = dw(3072, 768).with_split_k_for(132, PtxArch::Sm90a);
    assert_eq!(tail.workspace_len(), 12 * 11 * 128 * 128, "one block per tail tile and slice");
    // mma.sync, should the operands' alignment rule wgmma out, runs a tail split unsplit.
    let mma = GemmSpec { engine: GemmEngine::MmaSync, ..tail };
    assert_eq!((mma.split_plan(), mma.workspace_len()), ((1, 512), 0));
    // An H100 PCIe (114 SMs): a wave of 114 whole tiles, then 30 in 3 slices.
    let pcie = dw(3072, 768).with_split_k_for(114, PtxArch::Sm90a);
    assert_eq!((pcie.whole_tiles, pcie.split_k), (114, 3));
    // The classifier's gradient: 393 × 6 tiles, 18 waves, nothing to gain.
    assert_eq!(plan(dw(50304, 768)), (0, 1));
    let forced_mma = GemmSpec { engine: GemmEngine::MmaSync, ..dw(768, 768) };
    assert_eq!(h100(forced_mma), 7);
    // TF32 weight gradients run on mma.sync (wgmma reads TF32 K-major only), whose slower
    // math makes each slice's workspace cheaper: finer splits.
    let tf32 = GemmSpec::linear_backward_weight(16384, 768, 3072, Precision::Tf32);
    assert_eq!(h100(tf32), 9);
    let fwd = GemmSpec::linear_forward(16384, 768, 768, Precision::Bf16);
    assert_eq!((a100(fwd), h100(fwd)), (1, 1));
    let short = GemmSpec::new(128, 128, 64, Layout::RowMajor, Layout::RowMajor, Precision::Fp32);
    assert_eq!(a100(short), 1);
}

/// A forced 128 × 256 tile is never given a tail split, whose partial sums are 128 × 128
/// blocks: `bench gemm` forced it on 8192³, where `Auto`'s plan leaves 4 tiles past 31 whole
/// waves of 128 × 128, and the launch was refused (H100, 2026-11-27).
#[test]
fn a_forced_wide_tile_gets_no_tail_split() {
    let square =
        GemmSpec::new(8192, 8192, 8192, Layout::RowMajor, Layout::ColMajor, Precision::Bf16);
    let auto = square.with_split_k_for(132, PtxArch::Sm90a);
    assert!(auto.whole_tiles > 0, "the 128 × 128 plan splits the tail");
    let wide =
        GemmSpec { wgmma_tile: WgmmaTile::N256, ..square }.with_split_k_for(132, PtxArch::Sm90a);
    assert_eq!(wide.whole_tiles, 0);
    assert_eq!(super::wgmma::tile_for(&wide, 132).unwrap(), kernel_abi::gemm_wgmma::wg::N256);
}

/// `Tuned` times every tile that takes a GEMM, `Auto`'s first, and nothing where there is no
/// choice or where the tiles would change the bits.
#[test]
fn tuning_times_every_tile_that_takes_the_gemm_autos_first() {
    use WgmmaTile::{Deferred, N128, N256, PingPong};
    let tuned = |s: GemmSpec| GemmSpec { wgmma_tile: WgmmaTile::Tuned, ..s };
    let h100 = |s: GemmSpec| tuned_candidates(&tuned(s), PtxArch::Sm90a, 132);
    let fc = GemmSpec::linear_forward(16384, 3072, 768, Precision::Bf16);
    assert_eq!(h100(fc), [PingPong, N128, N256, Deferred], "Auto's ping-pong first");
    let fc_dx = GemmSpec::linear_backward_input(16384, 3072, 768, Precision::Fp16);
    assert_eq!(h100(fc_dx), [N256, N128, PingPong, Deferred], "Auto's wide tile first");
    // TF32 (forward layout only): no deferred entry.
    let tf32 = GemmSpec::linear_forward(16384, 768, 768, Precision::Tf32);
    assert_eq!(h100(tf32), [N256, N128, PingPong]);
    // The lm head's weight gradient, unsplit: the two tiles of the `cr` layout.
    let lm_dw = GemmSpec::linear_backward_weight(16384, 768, 50304, Precision::Bf16);
    assert_eq!(h100(lm_dw.with_split_k_for(132, PtxArch::Sm90a)), [N256, N128]);
    // Nothing to choose: split over K, stream-K, the sm_80 module, FP32, one SM's N ≤ 128.
    let fc_dw = GemmSpec::linear_backward_weight(16384, 768, 3072, Precision::Bf16);
    assert!(h100(fc_dw.with_split_k_for(132, PtxArch::Sm90a)).is_empty(), "split");
    let stream_k = GemmSpec { wgmma_tile: WgmmaTile::StreamK, ..fc_dw };
    let stream_k = stream_k.with_split_k_for(132, PtxArch::Sm90a);
    assert!(tuned_candidates(&stream_k, PtxArch::Sm90a, 132).is_empty(), "stream-K");
    assert!(tuned_candidates(&tuned(fc), PtxArch::Sm80, 108).is_empty());
    assert!(h100(GemmSpec::linear_forward(16384, 3072, 768, Precision::Fp32)).is_empty());
    let cc = GemmSpec::new(320, 200, 96, Layout::ColMajor, Layout::ColMajor, Precision::Bf16);
    assert_eq!(h100(cc), [N128, N256], "cc: no ping-pong or deferred entry");
}

/// The median of the timed calls, after one untimed call; on a runtime without a clock by the
/// host's, after a synchronisation.
#[test]
fn timing_takes_the_median_after_a_warm_up() {
    let dev = crate::mock::MockDevice::new(PtxArch::Sm90a, 4);
    let mut calls = 0;
    let ms = time_launches::<_, GpuError>(&dev, 3, || {
        calls += 1;
        Ok(())
    })
    .unwrap();
    assert_eq!(calls, 4, "one warm-up and three timed calls");
    assert!((0.0..1e3).contains(&ms), "{ms}");
    let mut calls = 0;
    let failed = time_launches(&dev, 3, || {
        calls += 1;
        Err(GpuError::invalid("gemm", "a", "planted"))
    });
    assert!(failed.is_err() && calls == 1, "the first error stops the timing");
}

#[test]
fn precisions_map_to_families() {
    let wide = simt::N128;
    assert_eq!(
        <f32 as GemmTypes<f32>>::kernels(Precision::Tf32, wide).unwrap().rc.name(),
        "gemm_tf32_rc_f32"
    );
    assert!(<f32 as GemmTypes<f32>>::kernels(Precision::Bf16, wide).is_none());
    assert_eq!(
        <bf16 as GemmTypes<f32>>::kernels(Precision::Bf16, wide).unwrap().cr.name(),
        "gemm_bf16_cr_f32"
    );
    assert!(<f16 as GemmTypes<f16>>::kernels(Precision::Bf16, wide).is_none());
    let simt = |tile| <f32 as GemmTypes<f32>>::kernels(Precision::Fp32, tile).unwrap().rr.name();
    assert_eq!((simt(wide), simt(simt::N64)), ("gemm_simt_rr_f32", "gemm_simt_n64_rr_f32"));
}

#[test]
fn fp32_takes_the_narrow_simt_tile_up_to_64_columns() {
    let spec =
        |n| GemmSpec::new(1024, n, 1024, Layout::RowMajor, Layout::RowMajor, Precision::Fp32);
    assert_eq!((spec(1).simt_tile(), spec(64).simt_tile()), (simt::N64, simt::N64));
    assert_eq!((spec(65).simt_tile(), spec(1 << 40).simt_tile()), (simt::N128, simt::N128));
    // The split model counts the narrow tile's columns and its three blocks per SM: the
    // attention's dV = Pᵀ·dO per head (1024 × 64, K = 1024) over 12 heads has 96 tiles.
    let mut dv = spec(64);
    dv.batch = 12;
    assert_eq!(dv.with_split_k_for(132, PtxArch::Sm90a).split_k, 4);
}

#[test]
fn block_k_and_split_plan_follow_the_engine() {
    let mut s = GemmSpec::linear_forward(128, 128, 320, Precision::Bf16);
    assert_eq!(s.block_k_for(GemmEngine::MmaSync), 32);
    assert_eq!(s.block_k_for(GemmEngine::Wgmma), 64);
    assert_eq!(s.block_k(), 32, "Auto plans with the mma.sync tile");
    s.precision = Precision::Tf32;
    assert_eq!((s.block_k_for(GemmEngine::MmaSync), s.block_k_for(GemmEngine::Wgmma)), (16, 32));
    s.precision = Precision::Bf16;
    s.split_k = 4;
    // 10 mma.sync steps → 4 slices of 3; 5 wgmma steps → 3 slices of 2.
    assert_eq!(s.split_plan_for(GemmEngine::MmaSync), (4, 3));
    assert_eq!(s.split_plan_for(GemmEngine::Wgmma), (3, 2));
    assert_eq!(s.workspace_len(), 4 * 128 * 128, "Auto: the larger of the two");
    let forced = GemmSpec { engine: GemmEngine::Wgmma, ..s };
    assert_eq!((forced.split_plan(), forced.workspace_len()), ((3, 2), 3 * 128 * 128));
    let fp32 = GemmSpec { precision: Precision::Fp32, ..s };
    assert_eq!(fp32.workspace_len(), fp32.workspace_len_for(GemmEngine::MmaSync));
}

mod engines {
    use super::*;
    use crate::device::DeviceBuffer;
    use crate::mock::{Launched, MockDevice};
    use kernel_abi::gemm_wgmma::{TensorMap, WgmmaGemmParams, wg};
    use kernel_abi::{Bf16, F16};

    /// Runs `gemm_split_k` of `spec` (bf16 → bf16) on `dev` with operands `offset`
    /// elements into their buffers; returns the launches.
    fn run_bf16(
        dev: &MockDevice,
        spec: &GemmSpec,
        offset: usize,
        workspace: usize,
    ) -> Result<Vec<Launched>> {
        run_bf16_into::<bf16>(dev, spec, offset, workspace)
    }

    /// [`run_bf16`] with output type `O`.
    fn run_bf16_into<O: GemmOutput>(
        dev: &MockDevice,
        spec: &GemmSpec,
        offset: usize,
        workspace: usize,
    ) -> Result<Vec<Launched>>
    where
        bf16: GemmTypes<O>,
    {
        let a = dev.alloc::<bf16>(spec.a_len() + offset)?;
        let b = dev.alloc::<bf16>(spec.b_len() + offset)?;
        let mut c = dev.alloc::<O>(spec.c_len())?;
        let mut w = dev.alloc::<f32>(workspace)?;
        let (a, b) = (a.view().slice(offset..a.len())?, b.view().slice(offset..b.len())?);
        gemm_split_k(dev, spec, a, b, c.view_mut(), Epilogue::default(), w.view_mut())?;
        Ok(dev.take_launches())
    }

    #[test]
    fn auto_on_sm_80_runs_mma_sync() {
        let dev = MockDevice::new(PtxArch::Sm80, 132);
        let spec = GemmSpec::linear_forward(300, 200, 72, Precision::Bf16);
        assert_eq!(spec.engine_on(&dev, 0, 0).unwrap(), GemmEngine::MmaSync);
        let launches = run_bf16(&dev, &spec, 0, 0).unwrap();
        assert_eq!(launches.len(), 1);
        assert_eq!(launches[0].name, "gemm_bf16_rc_bf16");
        assert_eq!(launches[0].config.grid, (3 * 2, 1, 1));
        assert_eq!(launches[0].config.block, (tc::THREADS, 1, 1));
    }

    #[test]
    fn wgmma_forced_on_sm_80_names_the_reason() {
        let dev = MockDevice::new(PtxArch::Sm80, 132);
        let spec = GemmSpec {
            engine: GemmEngine::Wgmma,
            ..GemmSpec::linear_forward(300, 200, 72, Precision::Bf16)
        };
        let err = run_bf16(&dev, &spec, 0, 0).unwrap_err();
        assert!(
            matches!(&err, GpuError::InvalidArgument { op: "gemm", arg: "engine", .. }),
            "{err}"
        );
        assert!(err.to_string().contains("sm_80") && err.to_string().contains("sm_90a"));
        assert!(dev.take_launches().is_empty());
    }

    #[test]
    fn auto_on_sm_90a_runs_wgmma_with_tensor_maps() {
        let dev = MockDevice::new(PtxArch::Sm90a, 4);
        let spec = GemmSpec { lda: 80, ..GemmSpec::linear_forward(300, 200, 72, Precision::Bf16) };
        let launches = run_bf16(&dev, &spec, 0, 0).unwrap();
        assert_eq!(launches.len(), 1);
        let l = &launches[0];
        assert_eq!(l.name, "gemm_wgmma_bf16_rc_bf16");
        // 3 × 2 tiles, 1 slice = 6 units on min(6, 4 SMs) blocks.
        assert_eq!(l.config.grid, (4, 1, 1));
        assert_eq!(l.config.block, (wg::THREADS, 1, 1));
        assert_eq!(l.config.shared_mem_bytes, wg::N128.smem_bytes());
        let p = l.params::<WgmmaGemmParams<Bf16, Bf16>>();
        assert_eq!(p.units, 6);
        assert_eq!((p.gemm.tiles_m, p.gemm.tiles_n, p.gemm.split_k), (3, 2, 1));
        assert_eq!((p.gemm.k_tiles_per_split, p.gemm.lda, p.gemm.ldb), (2, 80, 72));
        assert_eq!(p.tmap_b.addr(), p.tmap_a.addr() + 128);
        assert!(p.tmap_a.is_aligned_to(64));
        let desc_a = TensorMapDesc {
            global_address: p.gemm.a.addr(),
            elem: TensorMapElem::Bf16,
            dims: [72, 300],
            row_stride_bytes: 160,
            box_dims: [64, 128],
            swizzle: TensorMapSwizzle::B128,
            layers: Some(TensorMapLayers { count: 1, stride_bytes: 300 * 160 }),
        };
        let desc_b = TensorMapDesc {
            global_address: p.gemm.b.addr(),
            dims: [72, 200],
            row_stride_bytes: 144,
            layers: Some(TensorMapLayers { count: 1, stride_bytes: 200 * 144 }),
            ..desc_a
        };
        let uploaded = dev.read(p.tmap_a.addr(), 2 * size_of::<TensorMap>());
        assert_eq!(uploaded[..128], MockDevice::encode(&desc_a).bytes);
        assert_eq!(uploaded[128..], MockDevice::encode(&desc_b).bytes);
        // Many units: still one block per SM; 8 × 4 tiles of 128 × 256 (forced: a forward GEMM
        // this size would take the ping-pong schedule) fill the 4 SMs.
        let big = GemmSpec {
            wgmma_tile: WgmmaTile::N256,
            ..GemmSpec::linear_forward(1024, 1024, 64, Precision::Bf16)
        };
        let launches = run_bf16(&dev, &big, 0, 0).unwrap();
        let l = &launches[0];
        assert_eq!((l.name, l.config.grid), ("gemm_wgmma_n256_bf16_rc_bf16", (4, 1, 1)));
        assert_eq!(l.config.shared_mem_bytes, wg::N256.smem_bytes());
        let p = l.params::<WgmmaGemmParams<Bf16, Bf16>>();
        assert_eq!((p.units, p.gemm.tiles_n), (32, 4));
        let b = dev.read(p.tmap_b.addr(), size_of::<TensorMap>());
        let desc_b = TensorMapDesc {
            global_address: p.gemm.b.addr(),
            dims: [64, 1024],
            row_stride_bytes: 128,
            box_dims: [64, 256],
            layers: Some(TensorMapLayers { count: 1, stride_bytes: 1024 * 128 }),
            ..desc_a
        };
        assert_eq!(b, MockDevice::encode(&desc_b).bytes);
    }

    #[test]
    fn a_gemm_config_prefers_its_tile_where_there_is_one() {
        let config = GemmConfig {
            precision: Precision::Fp16,
            engine: GemmEngine::Wgmma,
            wgmma_tile: WgmmaTile::N256,
            weight_grads: WeightGrads::Auto,
        };
        let fwd = config.apply(GemmSpec::linear_forward(64, 64, 64, Precision::Bf16));
        assert_eq!((fwd.precision, fwd.engine), (Precision::Fp16, GemmEngine::Wgmma));
        assert_eq!(fwd.wgmma_tile, WgmmaTile::N256);
        let dw = config.apply(GemmSpec::linear_backward_weight(64, 64, 64, Precision::Fp16));
        assert_eq!((dw.wgmma_tile, dw.beta), (WgmmaTile::N256, 1.0));
        let auto = GemmConfig::from(Precision::Bf16).apply(dw);
        assert_eq!((auto.engine, auto.wgmma_tile), (GemmEngine::Auto, WgmmaTile::Auto));
        let pingpong = GemmConfig { wgmma_tile: WgmmaTile::PingPong, ..config };
        let dx = GemmSpec::linear_backward_input(64, 64, 64, Precision::Fp16);
        assert_eq!(pingpong.apply(dx).wgmma_tile, WgmmaTile::PingPong);
        assert_eq!(pingpong.apply(dw).wgmma_tile, WgmmaTile::N128);
        // Only a forced tile falls back: `Auto` stays itself even where wgmma has no entry.
        let tf32_dx = GemmSpec::linear_backward_input(64, 64, 64, Precision::Tf32);
        assert_eq!(GemmConfig::from(Precision::Tf32).apply(tf32_dx).wgmma_tile, WgmmaTile::Auto);
    }

    #[test]
    fn wide_entries_are_every_layout_ping_pong_those_of_a_row_major() {
        let spec = |a_layout, b_layout, precision| GemmSpec {
            a_layout,
            b_layout,
            ..GemmSpec::linear_forward(64, 64, 64, precision)
        };
        let (r, c) = (Layout::RowMajor, Layout::ColMajor);
        for p in [Precision::Bf16, Precision::Fp16] {
            let layouts = [(r, r), (r, c), (c, r), (c, c)];
            let has = |tile| layouts.map(|(a, b)| spec(a, b, p).has_wgmma_entry(tile));
            assert_eq!(has(WgmmaTile::PingPong), [true, true, false, false], "{p:?}");
            for tile in [WgmmaTile::Auto, WgmmaTile::N128, WgmmaTile::N256] {
                assert_eq!(has(tile), [true; 4], "{p:?} {tile:?}");
            }
        }
        for tile in [WgmmaTile::N128, WgmmaTile::N256, WgmmaTile::PingPong] {
            assert!(spec(r, c, Precision::Tf32).has_wgmma_entry(tile));
            assert!(!spec(r, r, Precision::Tf32).has_wgmma_entry(tile));
            assert!(!spec(r, c, Precision::Fp32).has_wgmma_entry(tile));
        }
    }

    #[test]
    fn the_wide_tile_needs_its_entry_whole_sms_and_no_split() {
        let dev = MockDevice::new(PtxArch::Sm90a, 16);
        let name = |spec: GemmSpec| run_bf16(&dev, &spec, 0, 1 << 20).map(|l| l[0].name);
        // A forward GEMM with two 128 × 128 tiles per SM (8 × 4 on 16 SMs) takes the
        // ping-pong schedule.
        let fwd = |n| GemmSpec::linear_forward(1024, n, 64, Precision::Bf16);
        assert_eq!(name(fwd(512)).unwrap(), "gemm_wgmma_pp_bf16_rc_bf16");
        // Otherwise (8 × 3 and 8 × 2 tiles of 128 × 128): 8 × 2 wide tiles fill 16 SMs; 8 × 1
        // do not.
        assert_eq!(name(fwd(384)).unwrap(), "gemm_wgmma_n256_bf16_rc_bf16");
        assert_eq!(name(fwd(256)).unwrap(), "gemm_wgmma_bf16_rc_bf16");
        // So do 2 batches of 8 × 1.
        let batched = GemmSpec {
            batch: 2,
            stride_a: 1024 * 64,
            stride_b: 256 * 64,
            stride_c: 1024 * 256,
            ..fwd(256)
        };
        assert_eq!(name(batched).unwrap(), "gemm_wgmma_n256_bf16_rc_bf16");
        // A batched one (the attention's Q·Kᵀ) with tiles enough for the ping-pong schedule
        // keeps the cooperative tiles; so does TF32.
        let batched_wide = GemmSpec {
            batch: 2,
            stride_a: 1024 * 64,
            stride_b: 512 * 64,
            stride_c: 1024 * 512,
            ..fwd(512)
        };
        assert_eq!(name(batched_wide).unwrap(), "gemm_wgmma_n256_bf16_rc_bf16");
        let tf32 = GemmSpec { precision: Precision::Tf32, ..fwd(512) };
        assert_eq!(super::super::wgmma::tile_for(&tf32, 16).unwrap(), wg::N256);
        assert_eq!(super::super::wgmma::tile_for(&fwd(512), 16).unwrap(), wg::PINGPONG);
        // N ≤ 128 (the attention's P·V, N = 64): 128 × 128, though 8 × 1 × 2 wide tiles would
        // fill the 16 SMs.
        let pv = GemmSpec {
            batch: 2,
            stride_a: 1024 * 1024,
            stride_b: 1024 * 64,
            stride_c: 1024 * 64,
            ..GemmSpec::new(1024, 64, 1024, Layout::RowMajor, Layout::RowMajor, Precision::Bf16)
        };
        assert_eq!(name(pv).unwrap(), "gemm_wgmma_bf16_rr_bf16");
        // dX (rr) and dW (cr: the lm head's, 50304 × 768 on the GPU) have the wide entries.
        let dx = GemmSpec::linear_backward_input(1024, 512, 512, Precision::Bf16);
        assert_eq!(name(dx).unwrap(), "gemm_wgmma_n256_bf16_rr_bf16");
        let dw = GemmSpec::linear_backward_weight(1024, 512, 4096, Precision::Bf16);
        assert_eq!(name(dw).unwrap(), "gemm_wgmma_n256_bf16_cr_bf16");
        // Too few wide tiles for the SMs (the qkv weight gradient's 18 × 3 on 132): narrow.
        let few = GemmSpec::linear_backward_weight(1024, 256, 1024, Precision::Bf16);
        assert_eq!(name(few).unwrap(), "gemm_wgmma_bf16_cr_bf16");
        // Split over K: narrow.
        let split =
            GemmSpec { split_k: 2, ..GemmSpec::linear_forward(1024, 512, 1024, Precision::Bf16) };
        assert_eq!(name(split).unwrap(), "gemm_wgmma_bf16_rc_bf16");
        // Forced.
        let narrow = GemmSpec { wgmma_tile: WgmmaTile::N128, ..fwd(512) };
        assert_eq!(name(narrow).unwrap(), "gemm_wgmma_bf16_rc_bf16");
        let wide = GemmSpec { wgmma_tile: WgmmaTile::N256, ..fwd(64) };
        assert_eq!(name(wide).unwrap(), "gemm_wgmma_n256_bf16_rc_bf16");
        let wide_dw = GemmSpec { wgmma_tile: WgmmaTile::N256, ..few };
        assert_eq!(name(wide_dw).unwrap(), "gemm_wgmma_n256_bf16_cr_bf16");
        let tf32_dx = GemmSpec { precision: Precision::Tf32, ..dx };
        let err =
            super::super::wgmma::tile_for(&GemmSpec { wgmma_tile: WgmmaTile::N256, ..tf32_dx }, 16)
                .unwrap_err();
        assert!(matches!(&err, GpuError::InvalidArgument { arg: "wgmma_tile", .. }), "{err}");
        // Ping-pong forced, on the entries of the A row-major layouts.
        let pingpong = GemmSpec { wgmma_tile: WgmmaTile::PingPong, ..fwd(256) };
        assert_eq!(name(pingpong).unwrap(), "gemm_wgmma_pp_bf16_rc_bf16");
        let pingpong_dx = GemmSpec { wgmma_tile: WgmmaTile::PingPong, ..dx };
        assert_eq!(name(pingpong_dx).unwrap(), "gemm_wgmma_pp_bf16_rr_bf16");
        let err = name(GemmSpec { wgmma_tile: WgmmaTile::PingPong, ..dw }).unwrap_err();
        assert!(err.to_string().contains("ping-pong"), "{err}");
    }

    #[test]
    fn the_deferred_tile_takes_whole_tiles_of_16_bit_a_row_major_gemms() {
        let dev = MockDevice::new(PtxArch::Sm90a, 16);
        let name = |spec: GemmSpec| run_bf16(&dev, &spec, 0, 1 << 20).map(|l| l[0].name);
        let deferred = |spec: GemmSpec| GemmSpec { wgmma_tile: WgmmaTile::Deferred, ..spec };
        let fwd = GemmSpec::linear_forward(1024, 512, 64, Precision::Bf16);
        assert_eq!(name(deferred(fwd)).unwrap(), "gemm_wgmma_de_bf16_rc_bf16");
        let dx = GemmSpec::linear_backward_input(1024, 512, 512, Precision::Bf16);
        assert_eq!(name(deferred(dx)).unwrap(), "gemm_wgmma_de_bf16_rr_bf16");
        // No entry for an M-major A (the weight gradients) or for TF32; a forced deferred tile
        // says so, and a model's configuration falls back to 128 × 128 instead.
        let dw = GemmSpec::linear_backward_weight(1024, 512, 4096, Precision::Bf16);
        let err = name(deferred(dw)).unwrap_err();
        assert!(err.to_string().contains("deferred"), "{err}");
        let tf32 = GemmSpec { precision: Precision::Tf32, ..fwd };
        assert!(!deferred(tf32).has_wgmma_entry(WgmmaTile::Deferred));
        let config = GemmConfig {
            precision: Precision::Bf16,
            engine: GemmEngine::Wgmma,
            wgmma_tile: WgmmaTile::Deferred,
            weight_grads: WeightGrads::Auto,
        };
        assert_eq!(config.apply(dw).wgmma_tile, WgmmaTile::N128);
        assert_eq!(config.apply(dx).wgmma_tile, WgmmaTile::Deferred);
        // With stream-K weight gradients: those on stream-K, the rest deferred where it has
        // entries.
        let both = GemmConfig { weight_grads: WeightGrads::StreamK, ..config };
        assert_eq!(both.apply_weight_grad(dw).wgmma_tile, WgmmaTile::StreamK);
        assert_eq!(both.apply(dx).wgmma_tile, WgmmaTile::Deferred);
        assert_eq!(config.apply_weight_grad(dw).wgmma_tile, WgmmaTile::N128);
        // Whole tiles only: split over K, an InvalidArgument naming the tile.
        let long_k = GemmSpec::linear_forward(1024, 512, 1024, Precision::Bf16);
        let split = GemmSpec { split_k: 2, ..deferred(long_k) };
        let err = super::super::wgmma::tile_for(&split, 16).unwrap_err();
        assert!(matches!(&err, GpuError::InvalidArgument { arg: "wgmma_tile", .. }), "{err}");
        assert!(err.to_string().contains("whole tiles"), "{err}");
        // Its shared memory: the 5 stages and each consumer warp's two staged pieces.
        assert_eq!(wg::DEFERRED.warp_staging_bytes(), 2 * wg::EPI_WARP_BYTES);
        let staged = 5 * wg::DEFERRED.stage_bytes() + 8 * 2 * wg::EPI_WARP_BYTES;
        assert!(wg::DEFERRED.smem_bytes() > staged);
    }

    #[test]
    fn wgmma_uploads_the_tensor_maps_of_a_gemm_once() {
        let dev = MockDevice::new(PtxArch::Sm90a, 4);
        let spec = GemmSpec::linear_forward(300, 200, 72, Precision::Bf16);
        let a = dev.alloc::<bf16>(spec.a_len()).unwrap();
        let b = dev.alloc::<bf16>(spec.b_len()).unwrap();
        let mut c = dev.alloc::<bf16>(spec.c_len()).unwrap();
        let mut run = |spec: &GemmSpec| {
            gemm(&dev, spec, a.view(), b.view(), c.view_mut(), Epilogue::default()).unwrap();
            let launch = &dev.take_launches()[0];
            launch.params::<WgmmaGemmParams<Bf16, Bf16>>().tmap_a.addr()
        };
        let first = run(&spec);
        let allocations = dev.allocations();
        // The next training step: same buffers and shapes, nothing uploaded.
        assert_eq!(run(&spec), first);
        assert_eq!(dev.allocations(), allocations);
        // Another shape over the same buffers: its own maps.
        let other = GemmSpec::linear_forward(300, 100, 72, Precision::Bf16);
        assert_ne!(run(&other), first);
        assert_eq!(dev.allocations(), allocations + 1);
        assert_eq!(run(&spec), first);
    }

    #[test]
    fn auto_on_sm_90a_falls_back_where_wgmma_does_not_apply() {
        let dev = MockDevice::new(PtxArch::Sm90a, 132);
        let fwd = GemmSpec::linear_forward(64, 64, 64, Precision::Bf16);
        let batched = GemmSpec { batch: 2, stride_a: 4096, stride_b: 4096, stride_c: 4096, ..fwd };
        let cases = [
            (
                "gemm_wgmma_bf16_rr_bf16",
                GemmSpec::linear_backward_input(64, 64, 64, Precision::Bf16),
            ),
            (
                "gemm_wgmma_bf16_cr_bf16",
                GemmSpec::linear_backward_weight(64, 64, 64, Precision::Bf16),
            ),
            ("gemm_wgmma_bf16_rc_bf16", batched),
            // Batches of A overlapping by a row.
            ("gemm_bf16_rc_bf16", GemmSpec { stride_a: 4032, ..batched }),
            ("gemm_bf16_rc_bf16", GemmSpec { lda: 65, ..fwd }),
            ("gemm_bf16_rc_bf16", GemmSpec { k: 0, ..fwd }),
        ];
        for (want, spec) in cases {
            let launches = run_bf16(&dev, &spec, 0, 0).unwrap();
            assert_eq!(launches[0].name, want, "{spec:?}");
        }
        // One work unit per tile, slice and batch.
        let launches = run_bf16(&dev, &batched, 0, 0).unwrap();
        assert_eq!(launches[0].params::<WgmmaGemmParams<Bf16, Bf16>>().units, 2);
        // A view starting one element into its buffer: not 16-byte aligned.
        assert_eq!(run_bf16(&dev, &fwd, 1, 0).unwrap()[0].name, "gemm_bf16_rc_bf16");
        assert_eq!(run_bf16(&dev, &fwd, 8, 0).unwrap()[0].name, "gemm_wgmma_bf16_rc_bf16");
        let forced = GemmSpec { engine: GemmEngine::Wgmma, ..fwd };
        let err = run_bf16(&dev, &forced, 1, 0).unwrap_err().to_string();
        assert!(err.contains("`engine`") && err.contains("not 16-byte aligned"), "{err}");
        let mma = GemmSpec { engine: GemmEngine::MmaSync, ..fwd };
        assert_eq!(run_bf16(&dev, &mma, 0, 0).unwrap()[0].name, "gemm_bf16_rc_bf16");
    }

    #[test]
    fn fp32_and_the_other_types_pick_their_entries() {
        let dev = MockDevice::new(PtxArch::Sm90a, 132);
        let a = dev.alloc::<f32>(65 * 64).unwrap();
        let mut c = dev.alloc::<f32>(65 * 64).unwrap();
        for (precision, n, want, threads) in [
            (Precision::Fp32, 64, "gemm_simt_n64_rc_f32", 128),
            (Precision::Fp32, 65, "gemm_simt_rc_f32", 256),
            (Precision::Tf32, 64, "gemm_wgmma_tf32_rc_f32", 384),
        ] {
            let spec = GemmSpec::linear_forward(64, n, 64, precision);
            let e = Epilogue::default();
            gemm(&dev, &spec, a.view(), a.view(), c.view_mut(), e).unwrap();
            let launch = &dev.take_launches()[0];
            assert_eq!((launch.name, launch.config.block.0), (want, threads));
        }
        let forced = GemmSpec {
            engine: GemmEngine::Wgmma,
            ..GemmSpec::linear_forward(64, 64, 64, Precision::Fp32)
        };
        let err =
            gemm(&dev, &forced, a.view(), a.view(), c.view_mut(), Epilogue::default()).unwrap_err();
        assert!(err.to_string().contains("FP32"), "{err}");
        let h = dev.alloc::<f16>(64 * 64).unwrap();
        let spec = GemmSpec::linear_forward(64, 64, 64, Precision::Fp16);
        gemm(&dev, &spec, h.view(), h.view(), c.view_mut(), Epilogue::default()).unwrap();
        let launches = dev.take_launches();
        assert_eq!(launches[0].name, "gemm_wgmma_f16_rc_f32");
        let _: &WgmmaGemmParams<F16, f32> = launches[0].params();
    }

    #[test]
    fn split_k_uses_the_plan_of_the_engine_that_runs() {
        let dev = MockDevice::new(PtxArch::Sm90a, 132);
        let mut spec = GemmSpec::linear_forward(128, 256, 320, Precision::Bf16);
        spec.split_k = 4;
        let launches = run_bf16(&dev, &spec, 0, spec.workspace_len()).unwrap();
        assert_eq!(launches.len(), 2);
        let p = launches[0].params::<WgmmaGemmParams<Bf16, Bf16>>();
        // 5 k tiles of 64 → 3 slices of 2 tiles; 1 × 2 output tiles.
        assert_eq!((p.gemm.split_k, p.gemm.k_tiles_per_split, p.units), (3, 2, 6));
        assert!(!p.gemm.workspace.is_null());
        assert_eq!(launches[1].name, "gemm_split_reduce_bf16");
        let reduce = launches[1].params::<GemmParams<f32, Bf16>>();
        assert_eq!((reduce.split_k, reduce.workspace.addr()), (3, p.gemm.workspace.addr()));
        // Auto asks for the larger (mma.sync) workspace; forced wgmma for its own.
        let wgmma_ws = 3 * 128 * 256;
        let err = run_bf16(&dev, &spec, 0, wgmma_ws).unwrap_err();
        assert!(err.to_string().contains("`workspace`"), "{err}");
        let forced = GemmSpec { engine: GemmEngine::Wgmma, ..spec };
        assert_eq!(run_bf16(&dev, &forced, 0, wgmma_ws).unwrap().len(), 2);
        // On sm_80 the same spec runs 4 mma.sync slices.
        let sm80 = MockDevice::new(PtxArch::Sm80, 132);
        let launches = run_bf16(&sm80, &spec, 0, spec.workspace_len()).unwrap();
        assert_eq!(launches[0].config.grid, (2, 4, 1));
    }

    /// A tail split: the persistent grid walks the whole tiles and the tail's slices, the
    /// reduction only the tail's blocks; mma.sync (sm_80) runs the spec unsplit; whole tiles
    /// that leave nothing to split and 128 × 256 tiles are refused.
    #[test]
    fn tail_split_launches_the_whole_tiles_and_the_tail_slices() {
        let dev = MockDevice::new(PtxArch::Sm90a, 4);
        // 3 × 2 tiles of 128 × 128; K = 640: 10 k-tiles of 64 → 3 slices of 4 k-tiles.
        let spec = GemmSpec {
            split_k: 3,
            whole_tiles: 4,
            ..GemmSpec::linear_backward_weight(640, 200, 304, Precision::Bf16)
        };
        assert_eq!(spec.workspace_len(), 2 * 3 * 128 * 128);
        let launches = run_bf16(&dev, &spec, 0, spec.workspace_len()).unwrap();
        let p = launches[0].params::<WgmmaGemmParams<Bf16, Bf16>>();
        assert_eq!((p.gemm.split_k, p.gemm.whole_tiles, p.units), (3, 4, 4 + 2 * 3));
        assert_eq!(launches[0].config.grid, (4, 1, 1));
        assert_eq!(launches[1].name, "gemm_split_reduce_bf16");
        let reduce = launches[1].params::<GemmParams<f32, Bf16>>();
        assert_eq!(reduce.whole_tiles, 4);
        let tail_runs = 2 * 128 * 128 / 8;
        assert_eq!(launches[1].config.grid.0 as usize, tail_runs / 256);
        let short = run_bf16(&dev, &spec, 0, spec.workspace_len() - 1).unwrap_err();
        assert!(short.to_string().contains("`workspace`"), "{short}");

        let sm80 = MockDevice::new(PtxArch::Sm80, 4);
        let launches = run_bf16(&sm80, &spec, 0, spec.workspace_len()).unwrap();
        assert_eq!(launches.len(), 1, "mma.sync runs a tail split unsplit");
        assert_eq!(launches[0].config.grid, (6, 1, 1));

        let all = GemmSpec { whole_tiles: 6, ..spec };
        let err = run_bf16(&dev, &all, 0, 1 << 20).unwrap_err();
        assert!(matches!(err, GpuError::InvalidArgument { arg: "whole_tiles", .. }), "{err}");
        let wide =
            GemmSpec { a_layout: Layout::RowMajor, lda: 640, wgmma_tile: WgmmaTile::N256, ..spec };
        let err = run_bf16(&dev, &wide, 0, 1 << 20).unwrap_err();
        assert!(matches!(err, GpuError::InvalidArgument { arg: "wgmma_tile", .. }), "{err}");
    }

    #[test]
    fn stream_k_is_planned_for_the_weight_gradients_and_launched_with_its_grid() {
        let sms = 132;
        let dev = MockDevice::new(PtxArch::Sm90a, 4);
        let stream_k = |spec: GemmSpec| {
            GemmSpec { wgmma_tile: WgmmaTile::StreamK, ..spec }
                .with_split_k_for(sms, PtxArch::Sm90a)
        };
        // fc's weight gradient: 3072 × 768 in 24 × 3 tiles of 128 × 256, 256 k-tiles each.
        let fc = stream_k(GemmSpec::linear_backward_weight(16384, 768, 3072, Precision::Bf16));
        assert_eq!((fc.stream_k_blocks, fc.split_k, fc.whole_tiles), (sms, 1, 0));
        assert_eq!(fc.stream_k_grid(GemmEngine::Wgmma), Some((132, 72)));
        let slots = 2 * 132 * 128 * 256;
        assert_eq!(fc.workspace_len(), slots + 72 * 8);
        assert_eq!(fc.stream_k_grid(GemmEngine::MmaSync), None);
        // Where the stream-K entries do not apply (TF32; a batch): `Auto`'s plan.
        let tf32 = GemmSpec::linear_forward(16384, 768, 3072, Precision::Tf32);
        let plain = tf32.with_split_k_for(sms, PtxArch::Sm90a);
        assert_eq!(stream_k(tf32), plain);
        assert_eq!(stream_k(tf32).wgmma_tile, WgmmaTile::Auto);
        let batched = GemmSpec { batch: 2, stride_a: 1 << 24, stride_b: 1 << 24, ..fc };
        assert_eq!(stream_k(batched).stream_k_blocks, 0);

        // On the mock's 4 SMs, planned for 4 blocks: 304 × 520 → 3 × 3 tiles, K = 600 → 10
        // k-tiles; the launch zeroes the 72 counters, then runs the 4 blocks over the 9 tiles.
        let spec = GemmSpec {
            wgmma_tile: WgmmaTile::StreamK,
            ..GemmSpec::linear_backward_weight(600, 520, 304, Precision::Bf16)
        }
        .with_split_k_for(4, PtxArch::Sm90a);
        let len = spec.workspace_len();
        assert_eq!(len, 2 * 4 * 128 * 256 + 9 * 8);
        let run = |workspace| run_bf16_into::<f32>(&dev, &spec, 0, workspace);
        let launches = run(len).unwrap();
        assert_eq!(launches.len(), 2);
        let fill = launches[0].params::<kernel_abi::elementwise::FillParams<f32>>();
        assert_eq!(fill.n, 9 * 8);
        assert_eq!(launches[1].name, "gemm_wgmma_sk_bf16_cr_f32");
        assert_eq!(launches[1].config.grid, (4, 1, 1));
        let p = launches[1].params::<WgmmaGemmParams<Bf16, f32>>();
        assert_eq!((p.units, p.gemm.tiles_m, p.gemm.tiles_n, p.gemm.split_k), (9, 3, 3, 1));
        assert_eq!(p.gemm.workspace.addr() + 4 * (len as u64 - 72), fill.out.addr());
        let short = run(len - 1).unwrap_err();
        assert!(short.to_string().contains("`workspace`"), "{short}");
        // Without a workspace (`gemm`), or split as well: an InvalidArgument saying why.
        let a = dev.alloc::<bf16>(spec.a_len()).unwrap();
        let b = dev.alloc::<bf16>(spec.b_len()).unwrap();
        let mut c = dev.alloc::<f32>(spec.c_len()).unwrap();
        let err =
            gemm(&dev, &spec, a.view(), b.view(), c.view_mut(), Epilogue::default()).unwrap_err();
        assert!(matches!(&err, GpuError::InvalidArgument { arg: "stream_k_blocks", .. }), "{err}");
        let split = GemmSpec { split_k: 2, ..spec };
        let err = super::super::wgmma::tile_for(&split, 4).unwrap_err();
        assert!(matches!(&err, GpuError::InvalidArgument { arg: "stream_k_blocks", .. }), "{err}");
        let launches = run_bf16(&dev, &spec, 0, len).unwrap();
        assert_eq!(launches[1].name, "gemm_wgmma_sk_bf16_cr_bf16");
        // `rr` has no stream-K entry.
        let rr = GemmSpec { a_layout: Layout::RowMajor, lda: 600, ..spec };
        let err = super::super::wgmma::tile_for(&rr, 4).unwrap_err();
        assert!(err.to_string().contains("stream-K"), "{err}");
        // Not planned (no `with_split_k_for`): the tile `Auto` picks.
        let unplanned = GemmSpec { stream_k_blocks: 0, ..spec };
        let auto = GemmSpec { wgmma_tile: WgmmaTile::Auto, ..unplanned };
        let tile_for = |spec| super::super::wgmma::tile_for(spec, 4).unwrap();
        assert_eq!(tile_for(&unplanned), tile_for(&auto));
    }

    #[test]
    fn gemm_rejects_a_split_on_any_candidate_engine() {
        let dev = MockDevice::new(PtxArch::Sm90a, 132);
        let a = dev.alloc::<bf16>(64 * 64).unwrap();
        let mut c = dev.alloc::<bf16>(64 * 64).unwrap();
        // K = 64: 2 mma.sync steps (splits), 1 wgmma step (does not).
        let spec = GemmSpec { split_k: 2, ..GemmSpec::linear_forward(64, 64, 64, Precision::Bf16) };
        let err =
            gemm(&dev, &spec, a.view(), a.view(), c.view_mut(), Epilogue::default()).unwrap_err();
        assert!(matches!(err, GpuError::InvalidArgument { arg: "split_k", .. }), "{err}");
        let forced = GemmSpec { engine: GemmEngine::Wgmma, ..spec };
        gemm(&dev, &forced, a.view(), a.view(), c.view_mut(), Epilogue::default()).unwrap();
        assert_eq!(dev.take_launches().len(), 1);
    }
}

/// The cost model behind the split choice: the second wave of 12 tiles costs as much as the
/// first of 132, four slices even the waves out, and more slices than that pay more in
/// workspace than they save.
#[test]
fn split_cost_weighs_idle_sms_against_workspace_traffic() {
    use super::spec::{SplitModel, split_cost};
    let fc_dw = SplitModel {
        tiles: 144,
        steps: 256,
        multiprocessors: 132,
        per_sm: 1,
        slice_overhead: 4.0 * 200.0 / 16384.0,
    };
    let cost = |s| split_cost(&fc_dw, (0, s));
    assert!((cost(1) - 2.0 * 132.0 / 144.0).abs() < 1e-12, "{}", cost(1));
    assert!(cost(4) < 0.75 * cost(1), "{} vs {}", cost(4), cost(1));
    assert!(cost(4) < cost(3) && cost(4) < cost(5) && cost(5) < cost(16));
    // The tail split: one wave of 132 whole tiles, then the other 12 in 11 slices, one per
    // SM (24 steps each): 280 steps on the busiest SM against the ideal 279.3, and partial
    // sums for 12 tiles only.
    let tail = |s| split_cost(&fc_dw, (132, s));
    let steps = 256.0 + 24.0;
    let want = steps / (144.0 * 256.0 / 132.0) + fc_dw.slice_overhead * 11.0 * 12.0 / 144.0;
    assert!((tail(11) - want).abs() < 1e-12, "{} vs {want}", tail(11));
    assert!(tail(11) < tail(10) && tail(11) < tail(12) && tail(11) < 0.8 * cost(4));
    // A whole number of waves without a split costs its ideal.
    let full = SplitModel { tiles: 264, ..fc_dw };
    assert!((split_cost(&full, (0, 1)) - 1.0).abs() < 1e-12);
}
