//! Hopper's asynchronous instructions (sm_90a) on the simulator against the GPU, on
//! hand-written PTX. What the simulator assumes and the Hopper GEMM relies on:
//! - TMA tile loads (`cp.async.bulk.tensor.2d` and `.3d`, completing on an mbarrier) in every
//!   swizzle mode, with boxes partly outside the tensor (negative coordinates, zero fill), a
//!   rank-3 map's matrices (the Hopper GEMM's batches; one outside the batch) and the full
//!   box counted as transaction bytes (each map acquired first by
//!   `fence.proxy.tensormap::generic.acquire.sys`, as the GEMM does): the shared-memory
//!   image, byte for byte;
//! - `wgmma.mma_async` (bf16, f16, tf32) through descriptors of every swizzle mode and the
//!   interleaved layout, K-major and M/N-major (`imm-trans`), with A from registers, and with
//!   N = 256 (the Hopper GEMM's wide tile), accumulating into random accumulators: within the rounding of the f32 accumulation,
//!   relative to `Σ|a·b| + |c|` of each element;
//! - the mbarrier phase rules (`test_wait.parity` on a fresh barrier, arrival counts, pending
//!   transaction bytes) and the lane `elect.sync` picks: bit for bit.
//!
//! The operand tiles are loaded by TMA in panels of the swizzle width (16 bytes for the
//! interleaved layout) and the descriptors are built from the PTX ISA's canonical layouts
//! (section "Shared Memory Matrix Layout"); on the simulator the products are also checked
//! against a CPU product, so the simulator's layout model is tested here on every machine and
//! against the hardware when a Hopper GPU is present.

use gpu_host::{
    Device, DeviceBuffer, LaunchConfig, PtxArch, TensorMapDesc, TensorMapElem, TensorMapLayers,
    TensorMapSwizzle,
};
use half::{bf16, f16};
use integration_tests::{TestRng, gpu};

use super::rig::{GpuRig, Rig, SimRig};
use super::{Outputs, worst_relative};

/// Rounds the dynamic shared base up to 1024 bytes into `%r1` (the launches add 1024 bytes).
const ALIGN_SMEM: &str =
    "\tmov.u32 %r1, smem;\n\tadd.u32 %r1, %r1, 1023;\n\tand.b32 %r1, %r1, -1024;\n";
/// A 2-D TMA load (its operands follow).
const TMA_COPY_2D: &str =
    "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes";
/// What the thread issuing TMA loads runs on each tensor map first: the host copied the maps
/// into global memory (PTX ISA 8.3).
const ACQUIRE_MAP: &str = "fence.proxy.tensormap::generic.acquire.sys";

// ---------------------------------------------------------------------------------------------
// TMA boxes

/// One TMA load: a box of `box_dims` (inner elements, rows) at `at` of the test tensor; with
/// `layer`, through a rank-3 map of the [`TENSOR_LAYERS`] matrices, from that matrix. The inner
/// coordinate is a multiple of 16 bytes (the hardware's rule: an H200 raised an illegal
/// instruction for a bf16 box at 60, 2026-11-26).
struct BoxCase {
    elem: TensorMapElem,
    swizzle: TensorMapSwizzle,
    box_dims: [u32; 2],
    at: [i32; 2],
    layer: Option<i32>,
}

const BOXES: &[BoxCase] = &[
    BoxCase {
        elem: TensorMapElem::F32,
        swizzle: TensorMapSwizzle::None,
        box_dims: [16, 24],
        at: [0, 0],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::Bf16,
        swizzle: TensorMapSwizzle::None,
        box_dims: [8, 64],
        at: [96, -5],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::Bf16,
        swizzle: TensorMapSwizzle::B32,
        box_dims: [16, 32],
        at: [32, 70],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::Bf16,
        swizzle: TensorMapSwizzle::B64,
        box_dims: [32, 40],
        at: [-8, 3],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::Bf16,
        swizzle: TensorMapSwizzle::B128,
        box_dims: [64, 64],
        at: [56, 20],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::F16,
        swizzle: TensorMapSwizzle::B128,
        box_dims: [64, 64],
        at: [0, 0],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::F32,
        swizzle: TensorMapSwizzle::B128,
        box_dims: [32, 16],
        at: [-4, -2],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::F32,
        swizzle: TensorMapSwizzle::B64,
        box_dims: [16, 64],
        at: [40, 50],
        layer: None,
    },
    BoxCase {
        elem: TensorMapElem::Bf16,
        swizzle: TensorMapSwizzle::B128,
        box_dims: [64, 64],
        at: [56, 20],
        layer: Some(2),
    },
    BoxCase {
        elem: TensorMapElem::F32,
        swizzle: TensorMapSwizzle::B64,
        box_dims: [16, 40],
        at: [-4, 50],
        layer: Some(1),
    },
    BoxCase {
        elem: TensorMapElem::F16,
        swizzle: TensorMapSwizzle::B128,
        box_dims: [64, 16],
        at: [0, 0],
        layer: Some(3),
    },
];

/// The test tensor: 77 rows of 200 bytes (100 16-bit or 50 f32 elements), rows 256 bytes apart;
/// as a rank-3 map, 3 such matrices, 20 KiB apart (matrix 0 is the rank-2 tensor).
const TENSOR_ROWS: u64 = 77;
const TENSOR_ROW_BYTES: u64 = 200;
const TENSOR_STRIDE: u64 = 256;
const TENSOR_LAYERS: u64 = 3;
const TENSOR_LAYER_STRIDE: u64 = 20 * 1024;

/// Bytes of a swizzle's span (0 without one).
fn swizzle_bytes(s: TensorMapSwizzle) -> u64 {
    s.span_bytes().map_or(0, u64::from)
}

/// `tma_box{rank}(out, map, x, y, z, bytes)`: thread 0 loads the box at (x, y) (and matrix z
/// at rank 3) with `bytes` expected transaction bytes; after the phase completes, the block
/// copies the box's shared image to `out`.
fn tma_entry(rank: u32) -> String {
    let coords = if rank == 3 { "%r5, %r6, %r11" } else { "%r5, %r6" };
    format!(
        ".visible .entry tma_box{rank}(.param .u64 p_out, .param .u64 p_map, .param .u64 p_x, \
         .param .u64 p_y, .param .u64 p_z, .param .u64 p_bytes)\n{{\n\
         \t.reg .pred %p<4>;\n\t.reg .b32 %r<16>;\n\t.reg .b64 %rd<8>;\n\
         \tld.param.u64 %rd0, [p_out];\n\tld.param.u64 %rd1, [p_map];\n\
         \tld.param.u64 %rd2, [p_x];\n\tcvt.u32.u64 %r5, %rd2;\n\
         \tld.param.u64 %rd2, [p_y];\n\tcvt.u32.u64 %r6, %rd2;\n\
         \tld.param.u64 %rd2, [p_z];\n\tcvt.u32.u64 %r11, %rd2;\n\
         \tld.param.u64 %rd2, [p_bytes];\n\tcvt.u32.u64 %r7, %rd2;\n\
         \tmov.u32 %r0, %tid.x;\n{ALIGN_SMEM}\tadd.u32 %r3, %r1, 16384;\n\
         \tsetp.ne.u32 %p0, %r0, 0;\n\t@%p0 bra INITED;\n\
         \tmbarrier.init.shared::cta.b64 [%r3], 1;\nINITED:\n\tbar.sync 0;\n\t@%p0 bra WAIT;\n\
         \tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], %r7;\n\
         \t{ACQUIRE_MAP} [%rd1], 128;\n\
         \tcp.async.bulk.tensor.{rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes \
          [%r1], [%rd1, {{{coords}}}], [%r3];\n\
         WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], 0;\n\t@!%p1 bra WAIT;\n\
         \tshl.b32 %r8, %r0, 2;\n\
         COPY:\n\tsetp.ge.u32 %p2, %r8, %r7;\n\t@%p2 bra DONE;\n\
         \tadd.u32 %r9, %r1, %r8;\n\tld.shared.u32 %r10, [%r9];\n\
         \tcvt.u64.u32 %rd3, %r8;\n\tadd.u64 %rd3, %rd3, %rd0;\n\tst.global.u32 [%rd3], %r10;\n\
         \tadd.u32 %r8, %r8, 512;\n\tbra COPY;\nDONE:\n\tret;\n}}\n"
    )
}

/// The bytes of the test tensor.
fn tma_tensor(seed: u64) -> Vec<u8> {
    TestRng::with_seed(seed).bytes((TENSOR_LAYERS * TENSOR_LAYER_STRIDE) as usize)
}

/// The shared image of every box of [`BOXES`], named after the case.
fn tma_outputs<R: Rig>(rig: &R, seed: u64) -> Outputs<u8> {
    let dev = rig.dev();
    let tensor = dev.upload(&tma_tensor(seed)).unwrap();
    let mut out = Vec::new();
    for case in BOXES {
        let esize = case.elem.size_bytes() as u64;
        let desc = TensorMapDesc {
            global_address: tensor.view().addr(),
            elem: case.elem,
            dims: [TENSOR_ROW_BYTES / esize, TENSOR_ROWS],
            row_stride_bytes: TENSOR_STRIDE,
            box_dims: case.box_dims,
            swizzle: case.swizzle,
            layers: case.layer.map(|_| TensorMapLayers {
                count: TENSOR_LAYERS,
                stride_bytes: TENSOR_LAYER_STRIDE,
            }),
        };
        let map = dev.upload(&dev.tensor_map(&desc).unwrap().bytes).unwrap();
        let bytes = case.box_dims[0] as u64 * case.box_dims[1] as u64 * esize;
        let image = dev.upload(&vec![0xa5u8; bytes as usize]).unwrap();
        let params = [
            image.view().addr(),
            map.view().addr(),
            case.at[0] as u32 as u64,
            case.at[1] as u32 as u64,
            case.layer.unwrap_or(0) as u32 as u64,
            bytes,
        ];
        let config = LaunchConfig {
            grid: (1, 1, 1),
            block: (128, 1, 1),
            shared_mem_bytes: 1024 + 16384 + 8,
        };
        rig.launch(if case.layer.is_some() { "tma_box3" } else { "tma_box2" }, config, &params);
        let name = format!(
            "tma {:?} swizzle {:?} box {}x{} at ({}, {}) of matrix {:?}",
            case.elem,
            case.swizzle,
            case.box_dims[0],
            case.box_dims[1],
            case.at[0],
            case.at[1],
            case.layer
        );
        out.push((name, dev.download(image.view()).unwrap()));
    }
    out
}

/// The shared image a TMA load of `case` must write, from the tensor's bytes: the box's rows in
/// order, zero outside the tensor (and outside the batch), each byte offset `o` moved to
/// `o ^ (((o >> 7) & (span / 16 - 1)) << 4)` (the swizzle `Swizzle<log2(span / 16), 4, 3>` of
/// the ISA's shared-memory layouts, on an image that starts 1024-byte aligned).
fn tma_expected(case: &BoxCase, tensor: &[u8]) -> Vec<u8> {
    let esize = case.elem.size_bytes() as usize;
    let row_bytes = case.box_dims[0] as usize * esize;
    let mut image = vec![0u8; row_bytes * case.box_dims[1] as usize];
    let mask = (swizzle_bytes(case.swizzle) as usize / 16).saturating_sub(1);
    let inner = (TENSOR_ROW_BYTES as usize / esize) as i64;
    let z = case.layer.unwrap_or(0) as i64;
    for r in 0..case.box_dims[1] as i64 {
        for e in 0..case.box_dims[0] as i64 {
            let (x, y) = (case.at[0] as i64 + e, case.at[1] as i64 + r);
            let inside = (0..inner).contains(&x)
                && (0..TENSOR_ROWS as i64).contains(&y)
                && (0..TENSOR_LAYERS as i64).contains(&z);
            if inside {
                let src = z as usize * TENSOR_LAYER_STRIDE as usize
                    + y as usize * TENSOR_STRIDE as usize
                    + x as usize * esize;
                let logical = r as usize * row_bytes + e as usize * esize;
                let at = logical ^ (((logical >> 7) & mask) << 4);
                image[at..at + esize].copy_from_slice(&tensor[src..src + esize]);
            }
        }
    }
    image
}

// ---------------------------------------------------------------------------------------------
// wgmma

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Bf16,
    F16,
    Tf32,
}

impl Kind {
    fn esize(self) -> usize {
        if self == Kind::Tf32 { 4 } else { 2 }
    }
    /// K of the tile: 128 bytes.
    fn k_tile(self) -> usize {
        128 / self.esize()
    }
    fn elem(self) -> TensorMapElem {
        match self {
            Kind::Bf16 => TensorMapElem::Bf16,
            Kind::F16 => TensorMapElem::F16,
            Kind::Tf32 => TensorMapElem::F32,
        }
    }
    /// The m64`n` wgmma of this kind.
    fn instruction(self, n: usize) -> String {
        match self {
            Kind::Bf16 => format!("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.bf16.bf16"),
            Kind::F16 => format!("wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16"),
            Kind::Tf32 => format!("wgmma.mma_async.sync.aligned.m64n{n}k8.f32.tf32.tf32"),
        }
    }
}

/// How an operand tile (64 rows of M, or N rows, × 128 bytes of K) lies in shared memory.
#[derive(Clone, Copy)]
enum Layout {
    /// In registers (A only, bf16/f16).
    Registers,
    /// In shared memory, K-major or M/N-major, with this swizzle.
    Smem { mn_major: bool, swizzle: TensorMapSwizzle },
}

const fn k_major(swizzle: TensorMapSwizzle) -> Layout {
    Layout::Smem { mn_major: false, swizzle }
}
const fn mn_major(swizzle: TensorMapSwizzle) -> Layout {
    Layout::Smem { mn_major: true, swizzle }
}

/// One wgmma test: an m64`n` tile over K = 128 bytes (4 instructions), its entry name. `n` is
/// 64, or 256 (the Hopper GEMM's wide tile) with a K-major B.
struct MmaCase {
    entry: &'static str,
    kind: Kind,
    a: Layout,
    b: Layout,
    n: usize,
}

const MMAS: &[MmaCase] = {
    use Kind::*;
    use TensorMapSwizzle::*;
    const fn case(entry: &'static str, kind: Kind, a: Layout, b: Layout) -> MmaCase {
        MmaCase { entry, kind, a, b, n: 64 }
    }
    &[
        case("mma_bf16_k128_k128", Bf16, k_major(B128), k_major(B128)),
        case("mma_bf16_k64_k64", Bf16, k_major(B64), k_major(B64)),
        case("mma_bf16_k32_k32", Bf16, k_major(B32), k_major(B32)),
        case("mma_bf16_kint_kint", Bf16, k_major(None), k_major(None)),
        case("mma_f16_k128_k128", F16, k_major(B128), k_major(B128)),
        case("mma_tf32_k128_k128", Tf32, k_major(B128), k_major(B128)),
        case("mma_tf32_k32_k64", Tf32, k_major(B32), k_major(B64)),
        case("mma_bf16_mn128_mn128", Bf16, mn_major(B128), mn_major(B128)),
        case("mma_bf16_mn64_k128", Bf16, mn_major(B64), k_major(B128)),
        case("mma_f16_k128_mn32", F16, k_major(B128), mn_major(B32)),
        case("mma_bf16_mnint_mnint", Bf16, mn_major(None), mn_major(None)),
        case("mma_bf16_reg_mn128", Bf16, Layout::Registers, mn_major(B128)),
        case("mma_f16_reg_k64", F16, Layout::Registers, k_major(B64)),
        // The Hopper GEMM's wide tile: N = 256 rows of B.
        MmaCase { n: 256, ..case("mma_bf16_k128_k128_n256", Bf16, k_major(B128), k_major(B128)) },
        MmaCase { n: 256, ..case("mma_tf32_k64_k64_n256", Tf32, k_major(B64), k_major(B64)) },
    ]
};

/// Shared offsets of the A tile (0), the B tile (up to 256 rows) and the mbarrier from the
/// aligned base.
const B_TILE: u32 = 8192;
const MMA_BARRIER: u32 = B_TILE + 256 * 128;

/// Width in bytes of one TMA panel of a layout: the swizzle span, or one 16-byte column of
/// core matrices.
fn panel_bytes(swizzle: TensorMapSwizzle) -> u64 {
    swizzle_bytes(swizzle).max(16)
}

/// The descriptor of k-step `kk` (32 bytes of K) of a tile of `rows` rows (M or N; 64 when
/// M/N-major) at shared offset `tile` in `layout`, as (byte offset from the aligned base, the
/// constant high bits): the PTX ISA's canonical layouts for panels of `panel_bytes` × `rows`
/// stored one after another.
fn descriptor(layout: Layout, tile: u64, kk: u64, rows: u64) -> (u64, u64) {
    let Layout::Smem { mn_major, swizzle } = layout else { unreachable!("registers") };
    let span = swizzle_bytes(swizzle);
    let panel = rows * panel_bytes(swizzle);
    let (start, lbo, sbo) = match (mn_major, span) {
        // K-major: rows of K bytes; 8-row groups `SBO` apart; K panels follow each other.
        (false, 0) => (2 * kk * panel, panel, 128),
        (false, s) => ((32 * kk / s) * panel + (32 * kk) % s, 16, 8 * s),
        // M/N-major: k-step kk covers K rows 16kk.. (or 8kk.. for tf32, never M/N-major).
        (true, 0) => (kk * 16 * 16, 128, panel),
        (true, s) => (kk * 16 * s, panel, 8 * s),
    };
    let mode = match span {
        0 => 0u64,
        128 => 1,
        64 => 2,
        _ => 3,
    };
    (tile + start, ((lbo >> 4) << 16) | ((sbo >> 4) << 32) | (mode << 62))
}

/// The TMA loads of one operand tile of `rows` rows: (shared offset, inner coordinate) per
/// panel.
fn panels(kind: Kind, layout: Layout, tile: u64, rows: u64) -> Vec<(u64, u64)> {
    let Layout::Smem { swizzle, .. } = layout else { return Vec::new() };
    let width = panel_bytes(swizzle);
    (0..128 / width).map(|p| (tile + p * rows * width, p * width / kind.esize() as u64)).collect()
}

/// `mma_*(out, maps, a, c)`: 128 threads. Thread 0 loads the A tile (map at `maps`) and the
/// B tile (map at `maps + 128`) by TMA in panels; every thread loads its n/2 accumulators
/// from `c[n/2·tid ..]` (and, for a register A, its fragments from the row-major A at `a`),
/// then 4 wgmmas accumulate and the accumulators are stored to `out[n/2·tid ..]`.
fn mma_entry(case: &MmaCase) -> String {
    assert!(case.n == 64 || matches!(case.b, Layout::Smem { mn_major: false, .. }));
    let (kind, n) = (case.kind, case.n as u64);
    let mut loads = String::new();
    for (map, layout, tile, rows) in
        [("%rd1", case.a, 0u64, 64), ("%rd4", case.b, B_TILE as u64, n)]
    {
        let panels = panels(kind, layout, tile, rows);
        if !panels.is_empty() {
            loads += &format!("\t{ACQUIRE_MAP} [{map}], 128;\n");
        }
        for (offset, x) in panels {
            loads += &format!(
                "\tadd.u32 %r5, %r1, {offset};\n\tmov.u32 %r6, {x};\n\
                 \t{TMA_COPY_2D} [%r5], [{map}, {{%r6, %r4}}], [%r3];\n"
            );
        }
    }
    // Every tile in shared memory is its rows × 128 bytes, whatever its panels.
    let in_smem = |l: &Layout| matches!(l, Layout::Smem { .. }) as u64;
    let tx = (in_smem(&case.a) * 64 + in_smem(&case.b) * n) * 128;
    let per_thread = n / 2;
    let acc: Vec<String> = (0..per_thread).map(|i| format!("%f{i}")).collect();
    let acc = acc.join(", ");
    let c_loads: String =
        (0..per_thread).map(|i| format!("\tld.global.f32 %f{i}, [%rd6+{}];\n", 4 * i)).collect();
    let stores: String =
        (0..per_thread).map(|i| format!("\tst.global.f32 [%rd6+{}], %f{i};\n", 4 * i)).collect();
    // A fragments (the mma.m16n8k16 A layout per warp): register i of k-step kk holds row
    // 16w + l/4 + 8(i % 2), elements 16kk + 8(i / 2) + 2(l % 4) + {0, 1}.
    let a_regs = match case.a {
        Layout::Registers => {
            let mut s = String::from(
                "\tshr.u32 %r7, %r0, 5;\n\tshl.b32 %r7, %r7, 4;\n\tand.b32 %r8, %r0, 31;\n\
                 \tshr.u32 %r8, %r8, 2;\n\tadd.u32 %r7, %r7, %r8;\n\tmul.wide.u32 %rd7, %r7, 128;\n\
                 \tand.b32 %r9, %r0, 3;\n\tmul.wide.u32 %rd8, %r9, 4;\n\tadd.u64 %rd7, %rd7, %rd8;\n\
                 \tadd.u64 %rd7, %rd7, %rd2;\n",
            );
            for kk in 0..4 {
                for i in 0..4 {
                    let offset = 1024 * (i % 2) + 16 * (i / 2) + 32 * kk;
                    s += &format!("\tld.global.u32 %r{}, [%rd7+{offset}];\n", 20 + 4 * kk + i);
                }
            }
            s
        }
        Layout::Smem { .. } => String::new(),
    };
    let trans = |l: Layout| matches!(l, Layout::Smem { mn_major: true, .. }) as u32;
    let mut mma = String::new();
    for kk in 0..4u64 {
        let desc = |reg: &str, layout: Layout, tile: u64, rows: u64| {
            let (offset, bits) = descriptor(layout, tile, kk, rows);
            format!(
                "\tcvt.u64.u32 {reg}, %r1;\n\tadd.u64 {reg}, {reg}, {offset};\n\tshr.u64 {reg}, {reg}, 4;\n\
                 \tand.b64 {reg}, {reg}, 16383;\n\tor.b64 {reg}, {reg}, {bits};\n"
            )
        };
        mma += &desc("%rd10", case.b, B_TILE as u64, n);
        let tail = match (kind, case.a) {
            (Kind::Tf32, _) => String::new(),
            (_, Layout::Registers) => format!(", {}", trans(case.b)),
            (_, a) => format!(", {}, {}", trans(a), trans(case.b)),
        };
        let a = match case.a {
            Layout::Registers => {
                let r = 20 + 4 * kk;
                format!("{{%r{r}, %r{}, %r{}, %r{}}}", r + 1, r + 2, r + 3)
            }
            a => {
                mma += &desc("%rd9", a, 0, 64);
                "%rd9".to_string()
            }
        };
        mma += &format!("\t{} {{{acc}}}, {a}, %rd10, %p5, 1, 1{tail};\n", kind.instruction(case.n));
    }
    format!(
        ".visible .entry {entry}(.param .u64 p_out, .param .u64 p_maps, .param .u64 p_a, \
         .param .u64 p_c)\n{{\n\
         \t.reg .pred %p<8>;\n\t.reg .b32 %r<40>;\n\t.reg .b64 %rd<16>;\n\t.reg .f32 %f<{per_thread}>;\n\
         \tld.param.u64 %rd0, [p_out];\n\tld.param.u64 %rd1, [p_maps];\n\
         \tld.param.u64 %rd2, [p_a];\n\tld.param.u64 %rd3, [p_c];\n\tadd.u64 %rd4, %rd1, 128;\n\
         \tmov.u32 %r0, %tid.x;\n{ALIGN_SMEM}\tadd.u32 %r3, %r1, {MMA_BARRIER};\n\tmov.u32 %r4, 0;\n\
         \tsetp.ne.u32 %p0, %r0, 0;\n\t@%p0 bra INITED;\n\
         \tmbarrier.init.shared::cta.b64 [%r3], 1;\nINITED:\n\tbar.sync 0;\n\t@%p0 bra WAIT;\n\
         \tmbarrier.arrive.expect_tx.shared::cta.b64 _, [%r3], {tx};\n{loads}\
         WAIT:\n\tmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], 0;\n\t@!%p1 bra WAIT;\n\
         \tmul.wide.u32 %rd5, %r0, {thread_bytes};\n\tadd.u64 %rd6, %rd3, %rd5;\n{c_loads}{a_regs}\
         \tsetp.eq.u32 %p5, %r0, %r0;\n\twgmma.fence.sync.aligned;\n{mma}\
         \twgmma.commit_group.sync.aligned;\n\twgmma.wait_group.sync.aligned 0;\n\
         \tadd.u64 %rd6, %rd0, %rd5;\n{stores}\tret;\n}}\n",
        entry = case.entry,
        thread_bytes = 4 * per_thread,
    )
}

/// The inputs of one wgmma case: A (64 × K) and B (n × K) as the tensor cores see them
/// (tf32: the upper 19 bits), the accumulators in thread-register order, and the global
/// images of A and B (K-major: row-major rows of K; M/N-major: K rows of 64).
struct MmaInputs {
    a: Vec<f64>,
    b: Vec<f64>,
    c: Vec<f32>,
    a_bytes: Vec<u8>,
    b_bytes: Vec<u8>,
}

/// `rows` × K random values of `kind` in [-1, 1], as values and as bytes laid out K-major or
/// (`transposed`) M/N-major.
fn operand(rng: &mut TestRng, kind: Kind, transposed: bool, rows: usize) -> (Vec<f64>, Vec<u8>) {
    let k = kind.k_tile();
    let raw = rng.uniform(rows * k, -1.0, 1.0);
    let mut values = vec![0f64; rows * k];
    let mut bytes = vec![0u8; rows * k * kind.esize()];
    for r in 0..rows {
        for c in 0..k {
            let x = raw[r * k + c];
            let at = if transposed { c * rows + r } else { r * k + c } * kind.esize();
            let (value, le): (f64, Vec<u8>) = match kind {
                Kind::Bf16 => {
                    let h = bf16::from_f32(x);
                    (h.to_f64(), h.to_bits().to_le_bytes().to_vec())
                }
                Kind::F16 => {
                    let h = f16::from_f32(x);
                    (h.to_f64(), h.to_bits().to_le_bytes().to_vec())
                }
                Kind::Tf32 => {
                    (f32::from_bits(x.to_bits() & !0x1fff) as f64, x.to_le_bytes().to_vec())
                }
            };
            values[r * k + c] = value;
            bytes[at..at + le.len()].copy_from_slice(&le);
        }
    }
    (values, bytes)
}

fn mma_inputs(case: &MmaCase, rng: &mut TestRng) -> MmaInputs {
    let is_mn = |l: Layout| matches!(l, Layout::Smem { mn_major: true, .. });
    let (a, a_bytes) = operand(rng, case.kind, is_mn(case.a), 64);
    let (b, b_bytes) = operand(rng, case.kind, is_mn(case.b), case.n);
    let c = rng.uniform(128 * case.n / 2, -1.0, 1.0);
    MmaInputs { a, b, c, a_bytes, b_bytes }
}

/// The PTX ISA's wgmma D fragment (m64nN, f32): thread t (warp w = t / 32, lane l), register
/// i holds row 16w + l/4 + 8((i/2) % 2), column 8(i/4) + 2(l % 4) + i % 2.
fn d_coord(t: usize, i: usize) -> (usize, usize) {
    let (w, l) = (t / 32, t % 32);
    (16 * w + l / 4 + 8 * ((i / 2) % 2), 8 * (i / 4) + 2 * (l % 4) + i % 2)
}

/// The exact product `c + A·Bᵀ` and its scale `|c| + Σ|a·b|`, in thread-register order.
fn mma_reference(case: &MmaCase, inputs: &MmaInputs) -> (Vec<f64>, Vec<f64>) {
    let (k, per_thread) = (case.kind.k_tile(), case.n / 2);
    (0..128 * per_thread)
        .map(|j| {
            let (row, col) = d_coord(j / per_thread, j % per_thread);
            let terms = (0..k).map(|x| inputs.a[row * k + x] * inputs.b[col * k + x]);
            let c = inputs.c[j] as f64;
            (c + terms.clone().sum::<f64>(), c.abs() + terms.map(f64::abs).sum::<f64>())
        })
        .unzip()
}

/// Each case's accumulators after the 4 wgmmas, in thread-register order.
fn mma_outputs<R: Rig>(rig: &R, seed: u64) -> Vec<(&'static MmaCase, MmaInputs, Vec<f32>)> {
    let dev = rig.dev();
    let mut rng = TestRng::with_seed(seed.wrapping_add(1));
    MMAS.iter()
        .map(|case| {
            let inputs = mma_inputs(case, &mut rng);
            let (da, db) =
                (dev.upload(&inputs.a_bytes).unwrap(), dev.upload(&inputs.b_bytes).unwrap());
            let mut maps = Vec::new();
            for (buf, layout, rows) in [(&da, case.a, 64), (&db, case.b, case.n as u64)] {
                let (mn_major, swizzle) = match layout {
                    Layout::Smem { mn_major, swizzle } => (mn_major, swizzle),
                    // An unused map (the kernel loads no A tile): any valid one.
                    Layout::Registers => (false, TensorMapSwizzle::B128),
                };
                let esize = case.kind.esize() as u64;
                let inner = if mn_major { rows } else { case.kind.k_tile() as u64 };
                let box_rows = if mn_major { 64 } else { rows as u32 };
                let desc = TensorMapDesc {
                    global_address: buf.view().addr(),
                    elem: case.kind.elem(),
                    dims: [inner, rows * 128 / (inner * esize)],
                    row_stride_bytes: inner * esize,
                    box_dims: [(panel_bytes(swizzle) / esize) as u32, box_rows],
                    swizzle,
                    layers: None,
                };
                maps.extend_from_slice(&dev.tensor_map(&desc).unwrap().bytes);
            }
            let dmaps = dev.upload(&maps).unwrap();
            let dc = dev.upload(&inputs.c).unwrap();
            let out = dev.upload(&vec![f32::NAN; 128 * case.n / 2]).unwrap();
            let params =
                [out.view().addr(), dmaps.view().addr(), da.view().addr(), dc.view().addr()];
            let config = LaunchConfig {
                grid: (1, 1, 1),
                block: (128, 1, 1),
                shared_mem_bytes: 1024 + MMA_BARRIER + 8,
            };
            rig.launch(case.entry, config, &params);
            let got = dev.download(out.view()).unwrap();
            (case, inputs, got)
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// mbarrier phases and elect.sync

/// Lane masks of the `elect.sync` probe: warp 0 elects among all lanes, warp 1 among these.
const ELECT_MASK_WARP1: u32 = 0x0ff0_0f00;

/// `sync_probe(out)`, 64 threads. Thread 0 walks a barrier of count 2 through its phases with
/// `test_wait.parity`, setting bit j of `out[0]` for the j-th query that reports complete:
/// fresh barrier parity 0 and 1, after one arrival parity 0, after two parity 0 and 1, and
/// after `expect_tx` of 64 bytes and two more arrivals parity 1. Then every lane of a mask
/// (all of warp 0, [`ELECT_MASK_WARP1`] of warp 1) runs `elect.sync` and writes
/// `leader << 1 | elected` to `out[1 + tid]`; lanes outside the mask write `u32::MAX`.
fn sync_entry() -> String {
    let query = |parity: u32, bit: u32| {
        format!(
            "\tmbarrier.test_wait.parity.shared::cta.b64 %p1, [%r1], {parity};\n\
             \tselp.u32 %r11, {}, 0, %p1;\n\tor.b32 %r10, %r10, %r11;\n",
            1u32 << bit
        )
    };
    let arrive = "\tmbarrier.arrive.shared::cta.b64 %rd5, [%r1];\n";
    let walk = [
        "\tmbarrier.init.shared::cta.b64 [%r1], 2;\n".to_string(),
        query(0, 0),
        query(1, 1),
        arrive.to_string(),
        query(0, 2),
        arrive.to_string(),
        query(0, 3),
        query(1, 4),
        "\tmbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%r1], 64;\n".to_string(),
        arrive.to_string(),
        arrive.to_string(),
        query(1, 5),
    ]
    .concat();
    format!(
        ".visible .entry sync_probe(.param .u64 p_out)\n{{\n\
         \t.reg .pred %p<8>;\n\t.reg .b32 %r<24>;\n\t.reg .b64 %rd<8>;\n\
         \tld.param.u64 %rd0, [p_out];\n\tmov.u32 %r0, %tid.x;\n{ALIGN_SMEM}\
         \tmov.u32 %r10, 0;\n\tsetp.ne.u32 %p0, %r0, 0;\n\t@%p0 bra ELECT;\n{walk}\
         \tst.global.u32 [%rd0], %r10;\n\
         ELECT:\n\tbar.sync 0;\n\
         \tand.b32 %r12, %r0, 31;\n\tshr.u32 %r13, %r0, 5;\n\tmov.u32 %r16, -1;\n\
         \tsetp.ne.u32 %p2, %r13, 0;\n\t@%p2 bra WARP1;\n\
         \telect.sync %r16|%p3, 0xffffffff;\n\tbra RECORD;\n\
         WARP1:\n\tshr.u32 %r14, {ELECT_MASK_WARP1}, %r12;\n\tand.b32 %r14, %r14, 1;\n\
         \tsetp.eq.u32 %p4, %r14, 0;\n\t@%p4 bra STORE;\n\
         \telect.sync %r16|%p3, {ELECT_MASK_WARP1};\n\
         RECORD:\n\tselp.u32 %r17, 1, 0, %p3;\n\tshl.b32 %r16, %r16, 1;\n\tor.b32 %r16, %r16, %r17;\n\
         STORE:\n\tmul.wide.u32 %rd1, %r0, 4;\n\tadd.u64 %rd1, %rd1, %rd0;\n\
         \tst.global.u32 [%rd1+4], %r16;\n\tret;\n}}\n"
    )
}

/// What `sync_probe` must write, from the PTX ISA: a fresh barrier's phase 0 is incomplete and
/// the phase of parity 1 before it counts as complete; two arrivals complete phase 0; pending
/// transaction bytes keep phase 1 open. The elected lane is the lowest of the mask.
fn sync_expected() -> Vec<u32> {
    let mut want = vec![0b00_1010];
    for t in 0..64u32 {
        let (warp, lane) = (t / 32, t % 32);
        let mask = if warp == 0 { u32::MAX } else { ELECT_MASK_WARP1 };
        let leader = mask.trailing_zeros();
        want.push(if mask >> lane & 1 == 0 {
            u32::MAX
        } else {
            leader << 1 | (lane == leader) as u32
        });
    }
    want
}

fn sync_outputs<R: Rig>(rig: &R) -> Vec<u32> {
    let dev = rig.dev();
    let out = dev.upload(&vec![0xdead_beefu32; 65]).unwrap();
    let config = LaunchConfig { grid: (1, 1, 1), block: (64, 1, 1), shared_mem_bytes: 1024 + 8 };
    rig.launch("sync_probe", config, &[out.view().addr()]);
    dev.download(out.view()).unwrap()
}

// ---------------------------------------------------------------------------------------------
// The module and the tests

/// The whole module: `tma_box2`, `tma_box3`, one `mma_*` entry per [`MMAS`] case, `sync_probe`.
fn hopper_ptx() -> String {
    let mut ptx = String::from(
        ".version 8.3\n.target sm_90a\n.address_size 64\n.extern .shared .align 16 .b8 smem[];\n\n",
    );
    ptx += &tma_entry(2);
    ptx += &tma_entry(3);
    for case in MMAS {
        ptx += &mma_entry(case);
    }
    ptx += &sync_entry();
    ptx
}

/// On every machine: the module runs on the simulator, whose TMA images are the boxes of the
/// tensor in the ISA's swizzles, whose wgmma products match the CPU to within one f32 rounding
/// per instruction and whose barrier phases and elections follow
/// the PTX ISA.
#[test]
fn hopper_instructions_run_on_the_simulator() {
    let rig = SimRig::load(&hopper_ptx());
    rig.0.check_kernels().expect("the simulator implements every instruction of the module");
    let seed = TestRng::new().seed();
    let tensor = tma_tensor(seed);
    for (case, (name, image)) in BOXES.iter().zip(tma_outputs(&rig, seed)) {
        assert!(
            image == tma_expected(case, &tensor),
            "{name}: the simulator's shared image differs from the ISA's (TEST_SEED={seed})"
        );
    }
    for (case, inputs, got) in mma_outputs(&rig, seed) {
        let (want, scale) = mma_reference(case, &inputs);
        let worst = worst_relative(&got, &want, &scale);
        assert!(
            worst <= 5.0 * f64::powi(2.0, -24),
            "{}: the simulator's product is {worst:.2e} (of Σ|a·b| + |c|) from the CPU's (TEST_SEED={seed})",
            case.entry
        );
    }
    assert_eq!(
        sync_outputs(&rig),
        sync_expected(),
        "mbarrier phases / elect.sync on the simulator"
    );
}

/// On a Hopper GPU: TMA images and the barrier/election probe bit for bit, wgmma products
/// within 2⁻¹⁸ of `Σ|a·b| + |c|` (four f32 roundings on each side leave < 2⁻²¹).
#[test]
fn hopper_instructions_agree() {
    let Some(gpu) = gpu() else { return };
    if gpu.ptx_arch() != PtxArch::Sm90a {
        eprintln!("sim_vs_gpu: skipped the Hopper instructions: {} is not sm_90", gpu.describe());
        return;
    }
    let ptx = hopper_ptx();
    let (on_gpu, on_sim) = (GpuRig::load(gpu, &ptx), SimRig::load(&ptx));
    let seed = TestRng::new().seed();
    let mut failures = Vec::new();
    for ((name, g), (_, s)) in tma_outputs(&on_gpu, seed).iter().zip(&tma_outputs(&on_sim, seed)) {
        if let Some(i) = (0..g.len()).find(|&i| g[i] != s[i]) {
            failures.push(format!(
                "{name}: first difference at byte {i}: gpu {:#04x} sim {:#04x}",
                g[i], s[i]
            ));
        }
    }
    for ((case, inputs, g), (_, _, s)) in
        mma_outputs(&on_gpu, seed).iter().zip(mma_outputs(&on_sim, seed))
    {
        let (_, scale) = mma_reference(case, inputs);
        let sim: Vec<f64> = s.iter().map(|v| *v as f64).collect();
        let worst = worst_relative(g, &sim, &scale);
        eprintln!("sim_vs_gpu: {}: largest difference {worst:.2e} of Σ|a·b| + |c|", case.entry);
        if worst > f64::powi(2.0, -18) {
            failures.push(format!(
                "{}: gpu and simulator differ by {worst:.2e} of Σ|a·b| + |c|",
                case.entry
            ));
        }
    }
    let (g, s) = (sync_outputs(&on_gpu), sync_outputs(&on_sim));
    if g != s {
        failures.push(format!("sync_probe: gpu {g:x?}\n  sim {s:x?}"));
    }
    assert!(
        failures.is_empty(),
        "Hopper instructions: simulator and GPU disagree (TEST_SEED={seed}):\n{}",
        failures.join("\n")
    );
    eprintln!(
        "sim_vs_gpu: {} TMA boxes, {} wgmma layouts, mbarrier phases and elect.sync agree on {} (seed {seed})",
        BOXES.len(),
        MMAS.len(),
        gpu.describe()
    );
}
