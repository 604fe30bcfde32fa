//! The sm_90 asynchronous instructions on hand-written PTX: a TMA + mbarrier + wgmma tile
//! product against a CPU product (with the PTX ISA's 128-byte swizzle and accumulator layout
//! written out here independently), zero-filled out-of-bounds boxes, elect.sync, and one
//! planted bug per rule the simulator enforces.

use crate::common;
use crate::common::expect_err;
use gpu_host::{
    Device, DeviceBuffer, GpuError, LaunchConfig, SimErrorKind, TensorMapDesc, TensorMapElem,
    TensorMapLayers, TensorMapSwizzle,
};
use half::bf16;
use ptx_sim::Simulator;

/// Rows of A (one warpgroup's 64), N of the wgmma, K of the tile (one 128-byte row of bf16).
const M: usize = 64;
const N: usize = 16;
const K: usize = 64;

/// The steps of the tile-product kernel a test may alter.
#[derive(Clone, Copy)]
struct Variant {
    /// Parity the consumers wait for (0 is right for the first phase).
    parity: u32,
    /// Issue `wgmma.fence` before the first wgmma.
    fence: bool,
    /// `wait_group` before `commit_group` (a bug).
    wait_before_commit: bool,
    /// Thread 0 overwrites the A tile by TMA while the wgmmas are in flight (a bug).
    reuse_stage_early: bool,
    /// Thread 0 arrives with `expect_tx` (without it the phase never completes).
    arrive: bool,
    /// Thread 0 writes a word of the B tile with `st.shared` after the wait, then `bar.sync`;
    /// `Some(true)` adds `fence.proxy.async` after the store.
    generic_store: Option<bool>,
    /// The scope at which thread 0 acquires the two tensor maps before its TMA loads
    /// (`fence.proxy.tensormap::generic.acquire.<scope>`; `None`: it does not, a bug).
    acquire_maps: Option<&'static str>,
    /// Bytes added to the start of A's descriptors (128: into the second row of the swizzle
    /// pattern, which needs the base-offset field the simulator does not model).
    a_start_offset: usize,
}

const GOOD: Variant = Variant {
    parity: 0,
    fence: true,
    wait_before_commit: false,
    reuse_stage_early: false,
    arrive: true,
    generic_store: None,
    acquire_maps: Some("sys"),
    a_start_offset: 0,
};

/// The module: `k(out, maps)`, 128 threads; A tile at the dynamic shared base (1024-aligned),
/// B tile 8 KiB after it, the mbarrier after B. Each thread stores its 8 accumulators at
/// `out[8·tid ..]`.
fn module(v: Variant) -> String {
    let acc: Vec<String> = (0..N / 2).map(|i| format!("%f{i}")).collect();
    let acc = acc.join(", ");
    let desc = |reg: &str, base: &str, kk: usize| {
        let extra = if reg == "%rd3" { v.a_start_offset } else { 0 };
        format!(
            "\tcvt.u64.u32 {reg}, {base};\n\tadd.u64 {reg}, {reg}, {off};\n\tshr.u64 {reg}, {reg}, 4;\n\
             \tand.b64 {reg}, {reg}, 16383;\n\tor.b64 {reg}, {reg}, {bits};\n",
            off = 32 * kk + extra,
            bits = (1u64 << 16) | ((1024u64 >> 4) << 32) | (1u64 << 62),
        )
    };
    let mut mma = String::new();
    for kk in 0..K / 16 {
        mma += &desc("%rd3", "%r1", kk);
        mma += &desc("%rd4", "%r2", kk);
        let scale = if kk == 0 { "%p3" } else { "%p4" };
        mma += &format!(
            "\twgmma.mma_async.sync.aligned.m64n{N}k16.f32.bf16.bf16 {{{acc}}}, %rd3, %rd4, {scale}, 1, 1, 0, 0;\n"
        );
    }
    let (commit, wait) =
        ("\twgmma.commit_group.sync.aligned;\n", "\twgmma.wait_group.sync.aligned 0;\n");
    let retire =
        if v.wait_before_commit { format!("{wait}{commit}") } else { format!("{commit}{wait}") };
    let reuse = if v.reuse_stage_early {
        "\t@%p0 bra SKIPREUSE;\n\tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r4, %r4}], [%r3];\nSKIPREUSE:\n"
    } else {
        ""
    };
    let generic = match v.generic_store {
        None => String::new(),
        Some(fenced) => format!(
            "\t@%p0 bra SKIPST;\n\tst.shared.u32 [%r2], %r4;\n{}SKIPST:\n\tbar.sync 0;\n",
            if fenced { "\tfence.proxy.async.shared::cta;\n" } else { "" }
        ),
    };
    let stores: String =
        (0..N / 2).map(|i| format!("\tst.global.f32 [%rd5+{}], %f{i};\n", 4 * i)).collect();
    format!(
        ".version 8.3\n.target sm_90a\n.address_size 64\n\
         .extern .shared .align 1024 .b8 smem[];\n\
         .visible .entry k(\n\t.param .u64 k_out,\n\t.param .u64 k_maps\n)\n{{\n\
         \t.reg .pred %p<8>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\t.reg .f32 %f<{nacc}>;\n\
         \tld.param.u64 %rd0, [k_out];\n\tld.param.u64 %rd1, [k_maps];\n\
         \tmov.u32 %r0, %tid.x;\n\tmov.u32 %r1, smem;\n\tadd.u32 %r2, %r1, 8192;\n\
         \tadd.u32 %r3, %r1, 10240;\n\tmov.u32 %r4, 0;\n\
         \tsetp.ne.u32 %p0, %r0, 0;\n\tsetp.ne.u32 %p3, %r4, 0;\n\tsetp.eq.u32 %p4, %r4, 0;\n\
         \t@%p0 bra INITED;\n\tmbarrier.init.shared::cta.b64 [%r3], 1;\nINITED:\n\tbar.sync 0;\n\
         \t@%p0 bra WAIT;\n{arrive}\
         \tadd.u64 %rd2, %rd1, 128;\n{acquire}\
         \tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {{%r4, %r4}}], [%r3];\n\
         \tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r2], [%rd2, {{%r4, %r4}}], [%r3];\n\
         WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], {parity};\n\t@!%p1 bra WAIT;\n\
         {generic}{zero}{fence}{mma}{reuse}{retire}\
         \tmul.wide.u32 %rd5, %r0, {stride};\n\tadd.u64 %rd5, %rd5, %rd0;\n{stores}\tret;\n}}\n",
        nacc = N / 2,
        arrive = if v.arrive {
            "\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 10240;\n"
        } else {
            ""
        },
        parity = v.parity,
        acquire = v.acquire_maps.map_or(String::new(), |scope| format!(
            "\tfence.proxy.tensormap::generic.acquire.{scope} [%rd1], 128;\n\
             \tfence.proxy.tensormap::generic.acquire.{scope} [%rd2], 128;\n"
        )),
        zero = (0..N / 2).map(|i| format!("\tmov.f32 %f{i}, 0f00000000;\n")).collect::<String>(),
        fence = if v.fence { "\twgmma.fence.sync.aligned;\n" } else { "" },
        stride = 4 * N / 2,
    )
}

/// Random bf16 operands: A (`rows` × `lda`) and B (N × `lda`), K-major.
fn operands(seed: u64, rows: usize, lda: usize) -> (Vec<bf16>, Vec<bf16>) {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        bf16::from_f32(((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0)
    };
    let a = (0..rows * lda).map(|_| next()).collect();
    let b = (0..N * lda).map(|_| next()).collect();
    (a, b)
}

/// The two tensor maps (A at 0, B at 128 bytes) for operands of `m` × `k` and N × `k`
/// elements stored with leading dimension `lda`.
fn maps(sim: &Simulator, a: u64, b: u64, (m, k, lda): (usize, usize, usize)) -> Vec<u8> {
    let desc = |addr, rows: usize, box_rows: u32| TensorMapDesc {
        global_address: addr,
        elem: TensorMapElem::Bf16,
        dims: [k as u64, rows as u64],
        row_stride_bytes: 2 * lda as u64,
        box_dims: [K as u32, box_rows],
        swizzle: TensorMapSwizzle::B128,
        layers: None,
    };
    let mut bytes = sim.tensor_map(&desc(a, m, M as u32)).unwrap().bytes.to_vec();
    bytes.extend_from_slice(&sim.tensor_map(&desc(b, N, N as u32)).unwrap().bytes);
    bytes
}

/// Runs the kernel on A (`m` × `k`, leading dimension `lda`) and B; returns D (64 × N,
/// row-major) read back through the accumulator layout, and the CPU product.
fn tile_product(v: Variant, m: usize, k: usize) -> Result<(Vec<f32>, Vec<f32>), GpuError> {
    let lda = K;
    let sim = Simulator::from_ptx(&module(v))?;
    let (a, b) = operands(7, m, lda);
    let (da, db) = (sim.upload(&a)?, sim.upload(&b)?);
    let map_bytes = maps(&sim, da.view().addr(), db.view().addr(), (m, k, lda));
    let dmaps = sim.upload(&map_bytes)?;
    let mut out = sim.upload(&vec![f32::NAN; 128 * N / 2])?;
    let mut params = out.view_mut().addr().to_le_bytes().to_vec();
    params.extend_from_slice(&dmaps.view().addr().to_le_bytes());
    let config = LaunchConfig { grid: (1, 1, 1), block: (128, 1, 1), shared_mem_bytes: 10240 + 64 };
    sim.launch_bytes("k", config, &params)?;
    let regs = sim.download(out.view())?;
    // The PTX ISA's wgmma D fragment: thread t (warp w, lane l), register i holds row
    // 16w + l/4 + 8·((i/2) % 2), column 8·(i/4) + 2·(l % 4) + i % 2.
    let mut d = vec![f32::NAN; M * N];
    for t in 0..128 {
        let (w, l) = (t / 32, t % 32);
        for i in 0..N / 2 {
            let row = 16 * w + l / 4 + 8 * ((i / 2) % 2);
            let col = 8 * (i / 4) + 2 * (l % 4) + i % 2;
            d[row * N + col] = regs[t * N / 2 + i];
        }
    }
    let mut want = vec![0f32; M * N];
    for r in 0..m.min(M) {
        for c in 0..N {
            let sum: f64 = (0..k).map(|x| a[r * lda + x].to_f64() * b[c * lda + x].to_f64()).sum();
            want[r * N + c] = sum as f32;
        }
    }
    Ok((d, want))
}

fn assert_close(got: &[f32], want: &[f32]) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        // f64 sums rounded once (per wgmma): within a few f32 ulps of the one-rounding sum.
        assert!((g - w).abs() <= 1e-5 * w.abs().max(1.0), "element {i}: {g} vs {w}");
    }
}

#[test]
fn tma_mbarrier_wgmma_tile_product_matches_the_cpu() {
    let (got, want) = tile_product(GOOD, M, K).unwrap();
    assert_close(&got, &want);
}

#[test]
fn tma_zero_fills_rows_and_columns_outside_the_tensor() {
    // 50 rows and 40 columns of K exist: the rest of the 64 × 64 box reads as zero, so the
    // product equals the CPU product over the existing elements only.
    let (got, want) = tile_product(GOOD, 50, 40).unwrap();
    assert_close(&got, &want);
    assert!(got[50 * N..].iter().all(|&x| x == 0.0));
}

/// Copies one 8 × 64 bf16 box (the 16-bit words 0, 1, …) with the 128-byte swizzle to
/// `dst_offset` bytes past the 1024-aligned dynamic shared base; the kernel copies those
/// shared bytes back verbatim after the wait.
fn swizzled_box(dst_offset: u32) -> Result<(Vec<u16>, Vec<u16>), GpuError> {
    swizzled_box_of(64, dst_offset, 0)
}

/// [`swizzled_box`] with boxes of `box_cols` of the 64 columns, starting at column `x`.
fn swizzled_box_of(
    box_cols: u32,
    dst_offset: u32,
    x: i32,
) -> Result<(Vec<u16>, Vec<u16>), GpuError> {
    let body = "\
        \t@%p0 bra INITED;\n\tmbarrier.init.shared::cta.b64 [%r3], 1;\nINITED:\n\tbar.sync 0;\n\
        \t@%p0 bra WAIT;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 1024;\n\
        \tfence.proxy.tensormap::generic.acquire.sys [%rd1], 128;\n\
        \tcp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r9, %r4}], [%r3];\n\
        WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], 0;\n\t@!%p1 bra WAIT;\n\
        \tshl.b32 %r5, %r0, 3;\n\tadd.u32 %r6, %r1, %r5;\n\tld.shared.v2.u32 {%r7, %r8}, [%r6];\n\
        \tmul.wide.u32 %rd5, %r0, 8;\n\tadd.u64 %rd5, %rd5, %rd0;\n\tst.global.v2.u32 [%rd5], {%r7, %r8};\n";
    let ptx = format!(
        ".version 8.3\n.target sm_90a\n.address_size 64\n.extern .shared .align 1024 .b8 smem[];\n\
         .visible .entry k(\n\t.param .u64 k_out,\n\t.param .u64 k_maps\n)\n{{\n\
         \t.reg .pred %p<8>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\
         \tld.param.u64 %rd0, [k_out];\n\tld.param.u64 %rd1, [k_maps];\n\
         \tmov.u32 %r0, %tid.x;\n\tmov.u32 %r1, smem;\n\tadd.u32 %r3, %r1, 2048;\n\
         \tadd.u32 %r1, %r1, {dst_offset};\n\tmov.u32 %r4, 0;\n\tmov.u32 %r9, {x};\n\
         \tsetp.ne.u32 %p0, %r0, 0;\n{body}\tret;\n}}\n"
    );
    let sim = Simulator::from_ptx(&ptx)?;
    let src: Vec<u16> = (0..8 * 64).map(|i| i as u16).collect();
    let dsrc = sim.upload(&src)?;
    let map = sim.tensor_map(&TensorMapDesc {
        global_address: dsrc.view().addr(),
        elem: TensorMapElem::Bf16,
        dims: [64, 8],
        row_stride_bytes: 128,
        box_dims: [box_cols, 8],
        swizzle: TensorMapSwizzle::B128,
        layers: None,
    })?;
    let dmap = sim.upload(&map.bytes)?;
    let mut out = sim.upload(&vec![0u16; 8 * 64])?;
    let mut params = out.view_mut().addr().to_le_bytes().to_vec();
    params.extend_from_slice(&dmap.view().addr().to_le_bytes());
    let config = LaunchConfig { grid: (1, 1, 1), block: (128, 1, 1), shared_mem_bytes: 2048 + 8 };
    sim.launch_bytes("k", config, &params)?;
    Ok((src, sim.download(out.view())?))
}

#[test]
fn tma_writes_the_128_byte_swizzle_of_the_isa() {
    let (src, smem) = swizzled_box(0).unwrap();
    // 128B swizzle: 16-byte chunk c of row r is stored at chunk c ^ (r % 8) of that row.
    for r in 0..8 {
        for c in 0..8 {
            let stored = r * 64 + 8 * (c ^ r);
            let logical = r * 64 + 8 * c;
            assert_eq!(smem[stored..stored + 8], src[logical..logical + 8], "row {r} chunk {c}");
        }
    }
}

#[test]
fn a_128_byte_swizzled_box_must_start_on_a_1024_byte_boundary() {
    expect_err(swizzled_box(512), SimErrorKind::Misaligned, &["not 1024-byte aligned"]);
}

/// Rows narrower than the swizzle span are legal on the hardware, which places them in a way
/// the ISA does not write down: the simulator refuses them rather than guess.
#[test]
fn a_box_narrower_than_its_swizzle_span_is_not_modelled() {
    expect_err(
        swizzled_box_of(32, 0, 0),
        SimErrorKind::Unsupported,
        &["rows (64 bytes) are not exactly the map's 128-byte swizzle span"],
    );
}

/// The hardware raised an illegal instruction for a box whose inner coordinate is not a
/// multiple of 16 bytes (sim_vs_gpu on an H200, 2026-11-26): 4 bf16 columns are 8 bytes; 8 are
/// legal (the box then reaches past the tensor and is zero-filled there).
#[test]
fn a_box_whose_inner_coordinate_is_not_16_byte_aligned_is_refused() {
    expect_err(
        swizzled_box_of(64, 0, 4),
        SimErrorKind::Misaligned,
        &["inner coordinate 4: 4 × 2 bytes is not a multiple of 16"],
    );
    swizzled_box_of(64, 0, 8).unwrap();
}

/// Thread 0 copies one unswizzled 8 × 16-element box with `copy` (a `cp.async.bulk.tensor`
/// of the map at `%rd1` into `[%r1]`, completing on `[%r3]`; `%r4` is 0 and `%r5` the
/// kernel's `z` parameter), then the block writes the box's shared image to the output.
fn copy_box(copy: &str, desc: TensorMapDesc, z: i32) -> Result<Vec<u16>, GpuError> {
    let body = format!(
        "\t@%p0 bra INITED;\n\tmbarrier.init.shared::cta.b64 [%r3], 1;\nINITED:\n\tbar.sync 0;\n\
         \t@%p0 bra WAIT;\n\tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], 256;\n\
         \tfence.proxy.tensormap::generic.acquire.sys [%rd1], 128;\n\
         \t{copy}\n\
         WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], 0;\n\t@!%p1 bra WAIT;\n\
         \tshl.b32 %r6, %r0, 3;\n\tadd.u32 %r6, %r1, %r6;\n\tld.shared.v2.u32 {{%r7, %r8}}, [%r6];\n\
         \tmul.wide.u32 %rd5, %r0, 8;\n\tadd.u64 %rd5, %rd5, %rd0;\n\tst.global.v2.u32 [%rd5], {{%r7, %r8}};\n"
    );
    let ptx = format!(
        ".version 8.3\n.target sm_90a\n.address_size 64\n.extern .shared .align 1024 .b8 smem[];\n\
         .visible .entry k(\n\t.param .u64 k_out,\n\t.param .u64 k_maps,\n\t.param .u32 k_z\n)\n{{\n\
         \t.reg .pred %p<8>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\
         \tld.param.u64 %rd0, [k_out];\n\tld.param.u64 %rd1, [k_maps];\n\tld.param.u32 %r5, [k_z];\n\
         \tmov.u32 %r0, %tid.x;\n\tmov.u32 %r1, smem;\n\tadd.u32 %r3, %r1, 1024;\n\tmov.u32 %r4, 0;\n\
         \tsetp.ne.u32 %p0, %r0, 0;\n{body}\tret;\n}}\n"
    );
    let sim = Simulator::from_ptx(&ptx)?;
    let words = desc.layers.map_or(8 * 16, |l| l.count * l.stride_bytes / 2);
    let src: Vec<u16> = (0..words).map(|i| i as u16 + 1).collect();
    let dsrc = sim.upload(&src)?;
    let map = sim.tensor_map(&TensorMapDesc { global_address: dsrc.view().addr(), ..desc })?;
    let dmap = sim.upload(&map.bytes)?;
    let mut out = sim.upload(&vec![0xffffu16; 8 * 16])?;
    let mut params = out.view_mut().addr().to_le_bytes().to_vec();
    params.extend_from_slice(&dmap.view().addr().to_le_bytes());
    params.extend_from_slice(&z.to_le_bytes());
    let config = LaunchConfig { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 1024 + 8 };
    sim.launch_bytes("k", config, &params)?;
    sim.download(out.view())
}

#[test]
fn tma_3d_loads_the_box_of_one_matrix_and_checks_the_rank() {
    const COPY_3D: &str = "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r4, %r4, %r5}], [%r3];";
    const COPY_2D: &str = "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r1], [%rd1, {%r4, %r4}], [%r3];";
    // Three 8 × 16 bf16 matrices of 256 bytes, 512 bytes apart; the source holds 8 × 16 × 3
    // 16-bit words numbered from 1, so matrix z starts at word 256·z.
    let desc = TensorMapDesc {
        global_address: 0,
        elem: TensorMapElem::Bf16,
        dims: [16, 8],
        row_stride_bytes: 32,
        box_dims: [16, 8],
        swizzle: TensorMapSwizzle::None,
        layers: Some(TensorMapLayers { count: 3, stride_bytes: 512 }),
    };
    for z in 0..3 {
        let got = copy_box(COPY_3D, desc, z).unwrap();
        let want: Vec<u16> = (0..128).map(|i| (256 * z as usize + i) as u16 + 1).collect();
        assert_eq!(got, want, "matrix {z}");
    }
    // Outside the batch the box is all zeros (and still completes its 256 bytes).
    for z in [-1, 3] {
        assert!(copy_box(COPY_3D, desc, z).unwrap().iter().all(|&x| x == 0), "matrix {z}");
    }
    // The instruction's dimensionality must be the map's rank.
    let why = "tensor copy through a rank-";
    expect_err(copy_box(COPY_2D, desc, 0), SimErrorKind::Unsupported, &["a 2-D", why, "3 "]);
    let rank2 = TensorMapDesc { layers: None, ..desc };
    expect_err(copy_box(COPY_3D, rank2, 0), SimErrorKind::Unsupported, &["a 3-D", why, "2 "]);
    assert_eq!(copy_box(COPY_2D, rank2, 0).unwrap(), (1..=128).collect::<Vec<u16>>());
}

#[test]
fn waiting_for_the_wrong_parity_waits_for_a_phase_that_never_comes() {
    // The producer (warp 0) runs first: phase 0 completes, and parity 1 is then the phase
    // after it, which nothing completes.
    let v = Variant { parity: 1, ..GOOD };
    expect_err(
        tile_product(v, M, K),
        SimErrorKind::Deadlock,
        &["1 phases completed", "try_wait.parity.shared::cta.b64 %p1, [%r3], 1"],
    );
}

#[test]
fn a_wgmma_without_wgmma_fence_after_register_writes_is_reported() {
    let v = Variant { fence: false, ..GOOD };
    expect_err(tile_product(v, M, K), SimErrorKind::AsyncProxyHazard, &["wgmma.fence"]);
}

#[test]
fn waiting_before_committing_leaves_the_accumulators_in_flight() {
    let v = Variant { wait_before_commit: true, ..GOOD };
    expect_err(tile_product(v, M, K), SimErrorKind::AsyncProxyHazard, &["still in flight"]);
}

#[test]
fn overwriting_a_stage_a_wgmma_still_reads_is_reported() {
    let v = Variant { reuse_stage_early: true, ..GOOD };
    expect_err(
        tile_product(v, M, K),
        SimErrorKind::AsyncProxyHazard,
        &["may still be reading", "wait_group"],
    );
}

#[test]
fn a_phase_nothing_can_complete_is_a_deadlock() {
    let v = Variant { arrive: false, ..GOOD };
    expect_err(
        tile_product(v, M, K),
        SimErrorKind::Deadlock,
        &["mbarrier", "0 phases completed", "1 of 1 arrivals pending", "tx-count -10240"],
    );
}

#[test]
fn generic_stores_read_by_wgmma_need_fence_proxy_async() {
    let v = Variant { generic_store: Some(false), ..GOOD };
    expect_err(tile_product(v, M, K), SimErrorKind::AsyncProxyHazard, &["fence.proxy.async"]);
    let v = Variant { generic_store: Some(true), ..GOOD };
    tile_product(v, M, K).unwrap();
}

#[test]
fn tma_through_a_tensor_map_not_acquired_at_system_scope_is_reported() {
    let v = Variant { acquire_maps: None, ..GOOD };
    expect_err(
        tile_product(v, M, K),
        SimErrorKind::AsyncProxyHazard,
        &["has not acquired:", "fence.proxy.tensormap::generic.acquire.sys"],
    );
    let v = Variant { acquire_maps: Some("gpu"), ..GOOD };
    expect_err(tile_product(v, M, K), SimErrorKind::AsyncProxyHazard, &["at system scope"]);
    let v = Variant { a_start_offset: 128, ..GOOD };
    expect_err(
        tile_product(v, M, K),
        SimErrorKind::Unsupported,
        &["128 bytes into its 1024-byte swizzle pattern", "not modelled"],
    );
}

/// `griddepcontrol.wait` and `.launch_dependents` (programmatic dependent launch, which every
/// project kernel starts with on sm_90a) run as no-ops: the simulator runs launches one after
/// another. The instruction without either form is refused.
#[test]
fn griddepcontrol_runs_as_a_no_op() {
    let body = "\tgriddepcontrol.wait;\n\tgriddepcontrol.launch_dependents;\n\
                \tmov.u32 %r1, 7;\n\tst.global.u32 [%rd0], %r1;\n";
    assert_eq!(common::run1(body, 1), [7]);
    expect_err(
        common::run("\tgriddepcontrol;\n", LaunchConfig::linear(1, 1), &[], 1),
        SimErrorKind::Unsupported,
        &["griddepcontrol needs .wait or .launch_dependents"],
    );
}

#[test]
fn elect_sync_elects_the_lowest_member() {
    let body = "\tmov.u32 %r1, 0xfffffff0;\n\tsetp.ge.u32 %p2, %r60, 4;\n\t@!%p2 bra DONE;\n\
                \telect.sync %r2|%p1, %r1;\n\tselp.u32 %r3, 100, 0, %p1;\n\tadd.u32 %r3, %r3, %r2;\n\
                \tmul.wide.u32 %rd2, %r60, 4;\n\tadd.u64 %rd2, %rd2, %rd0;\n\tst.global.u32 [%rd2], %r3;\nDONE:\n";
    let out = common::run(body, common::block(32), &[], 32).unwrap();
    assert!(out[..4].iter().all(|&x| x == u32::MAX));
    assert_eq!(out[4], 104);
    assert!(out[5..].iter().all(|&x| x == 4));
}

/// `setmaxnreg` (like every `wgmma.*`) is issued by the four warps of a warpgroup together:
/// all four pass; one warp alone, warps at different instructions and a block without the
/// whole warpgroup are errors naming the rule.
#[test]
fn warpgroup_instructions_need_the_whole_warpgroup() {
    let setmaxnreg = "\tsetmaxnreg.inc.sync.aligned.u32 232;\n";
    let warp_is =
        |cond: &str, n: u32| format!("\tshr.u32 %r1, %r0, 5;\n\tsetp.{cond}.u32 %p1, %r1, {n};\n");
    common::run(setmaxnreg, common::block(128), &[], 1).unwrap();

    let only_warp_0 = format!("{}\t@%p1 bra DONE;\n{setmaxnreg}DONE:\n", warp_is("ne", 0));
    expect_err(
        common::run(&only_warp_0, common::block(128), &[], 1),
        SimErrorKind::IllegalCollective,
        &["warp 1 executed 0 of the 1 warpgroup-scope instructions", "together"],
    );

    let split = format!(
        "{}\t@%p1 bra OTHER;\n{setmaxnreg}\tbra.uni DONE;\nOTHER:\n{setmaxnreg}DONE:\n",
        warp_is("eq", 2)
    );
    expect_err(
        common::run(&split, common::block(128), &[], 1),
        SimErrorKind::IllegalCollective,
        &["warpgroup-scope instruction 1 of warp 2", "another warp of the warpgroup"],
    );

    expect_err(
        common::run(setmaxnreg, common::block(64), &[], 1),
        SimErrorKind::IllegalCollective,
        &["the block has no warp 2", "four whole warps"],
    );
}

/// An arrival beyond the expected count while the phase still waits for its transaction bytes
/// is reported (it used to underflow the pending count).
#[test]
fn an_extra_arrival_before_the_bytes_land_is_an_error() {
    let body = "\tmov.u32 %r1, smem;\n\tsetp.ne.u32 %p0, %r0, 0;\n\t@%p0 bra DONE;\n\
                \tmbarrier.init.shared::cta.b64 [%r1], 1;\n\
                \tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r1], 1024;\n\
                \tmbarrier.arrive.shared::cta.b64 _, [%r1];\nDONE:\n";
    let config = LaunchConfig { shared_mem_bytes: 16, ..common::block(32) };
    expect_err(
        common::run(body, config, &[], 1),
        SimErrorKind::AsyncProxyHazard,
        &["beyond its 1 expected arrivals", "waits for 1024 transaction bytes"],
    );
}

/// `cp.async.bulk.prefetch.L2.global` changes nothing, but its address and size must be
/// multiples of 16 and its bytes inside one allocation (`out`: 64 words here).
#[test]
fn bulk_l2_prefetch_checks_alignment_and_bounds() {
    let run = |operands: &str| {
        let body =
            format!("\tcp.async.bulk.prefetch.L2.global {operands};\n\tst.global.u32 [%rd0], %r0;");
        let ptx = common::kernel(&body)
            .replace(".version 7.8", ".version 8.0")
            .replace(".target sm_80", ".target sm_90a");
        let sim = Simulator::from_ptx(&ptx)?;
        common::run_on(&sim, common::block(1), &[], 64)
    };
    let out = run("[%rd0], 256").unwrap();
    assert_eq!(out[0], 0);
    assert!(out[1..].iter().all(|&w| w == u32::MAX));
    assert_eq!(run("[%rd0+240], 16").unwrap()[0], 0);
    expect_err(run("[%rd0+8], 16"), SimErrorKind::Misaligned, &["bulk L2 prefetch", "16"]);
    expect_err(run("[%rd0], 24"), SimErrorKind::Misaligned, &["24 bytes"]);
    expect_err(run("[%rd0+16], 256"), SimErrorKind::OutOfBounds, &["bulk L2 prefetch"]);
}
