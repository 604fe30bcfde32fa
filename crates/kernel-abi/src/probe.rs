//! Instruction probes: single-warp kernels that run one tensor-core, `ldmatrix`, `cp.async` or
//! warp-shuffle operation on data from global memory and write what every lane got.
//!
//! They pin the `arch` wrappers and the [`crate::fragment`] algebra to the hardware (on a GPU)
//! and to the simulator's model of it. Launch each with one block of 32 threads.

use crate::kernel::{Kernel, KernelParams, KernelSig};
use crate::ptr::{DevicePtr, DevicePtrMut};

/// One `mma.sync` on a single tile: `d = a · b + c`.
///
/// Layouts in global memory, all row-major and dense:
/// - 16-bit variants (m16n8k16): `a` is 16×16 (M×K) and `b` is 8×16 (N×K, i.e. B column-major),
///   as raw 16-bit words;
/// - tf32 variant (m16n8k8): `a` is 16×8 and `b` is 8×8 (N×K) f32 values, rounded to tf32
///   (nearest, ties away) by the kernel;
/// - `c` and `d` are 16×8 f32.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct MmaProbeParams {
    /// A tile (16-bit words or f32 bits, see above).
    pub a: DevicePtr<u32>,
    /// B tile, N×K.
    pub b: DevicePtr<u32>,
    /// Accumulator input, 16×8 f32.
    pub c: DevicePtr<f32>,
    /// Result, 16×8 f32.
    pub d: DevicePtrMut<f32>,
}

/// `ldmatrix` of four 8×8 matrices of 16-bit words stored row-major one after another
/// (`src` is 32 rows × 8 columns): the kernel copies `src` to shared memory, lane `l` points at
/// row `l % 8` of matrix `l / 8`, and lane `l` writes its destination register `j` to
/// `out[l * 4 + j]` (registers it did not load are written as `0xFFFF_FFFF`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct LdmatrixProbeParams {
    /// 256 16-bit words.
    pub src: DevicePtr<u16>,
    /// 128 words: 4 per lane.
    pub out: DevicePtrMut<u32>,
    /// Which instruction: 1, 2 or 4 matrices (`.x1/.x2/.x4`).
    pub matrices: u32,
    /// Nonzero for `.trans`.
    pub trans: u32,
}

/// `cp.async` with zero-fill: lane `l` copies 16 bytes from `src + 16 l` into shared memory,
/// reading only `min(16, src_bytes - 16 l)` of them (0 when past the end) and zero-filling the
/// rest; after `cp.async.wait_group 0` and a barrier, shared memory (512 bytes) is copied to
/// `out`. The source holds whole 16-byte windows past `src_bytes` (compute-sanitizer's memcheck
/// counts all 16 bytes of a partial copy as read): bytes the hardware must not copy.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct CpAsyncProbeParams {
    /// Source bytes (`src_bytes` rounded up to a multiple of 16 readable).
    pub src: DevicePtr<u8>,
    /// 512 bytes.
    pub out: DevicePtrMut<u8>,
    /// Number of valid source bytes.
    pub src_bytes: u32,
}

/// Warp collectives on 32 f32 values `x[lane]`: lane `l` writes, at `out[l * 4 ..]`, the warp
/// sum, the warp max (butterfly reductions), `x[(l + 1) % 32]` (shuffle-index) and
/// `x[min(l + 1, 31)]` (shuffle-down by one).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WarpProbeParams {
    /// 32 inputs.
    pub x: DevicePtr<f32>,
    /// 128 outputs.
    pub out: DevicePtrMut<f32>,
}

// SAFETY: #[repr(C)] structs of device pointers and u32s; padding only at the tail.
unsafe impl KernelParams for MmaProbeParams {}
// SAFETY: as above.
unsafe impl KernelParams for LdmatrixProbeParams {}
// SAFETY: as above.
unsafe impl KernelParams for CpAsyncProbeParams {}
// SAFETY: as above.
unsafe impl KernelParams for WarpProbeParams {}

/// `mma.sync.m16n8k16.row.col.f32.bf16.bf16.f32`.
pub const PROBE_MMA_BF16: Kernel<MmaProbeParams> = Kernel::new("probe_mma_bf16");
/// `mma.sync.m16n8k16.row.col.f32.f16.f16.f32`.
pub const PROBE_MMA_F16: Kernel<MmaProbeParams> = Kernel::new("probe_mma_f16");
/// `mma.sync.m16n8k8.row.col.f32.tf32.tf32.f32`.
pub const PROBE_MMA_TF32: Kernel<MmaProbeParams> = Kernel::new("probe_mma_tf32");
/// `ldmatrix.sync.aligned.m8n8{.x1,.x2,.x4}{,.trans}.shared.b16`.
pub const PROBE_LDMATRIX: Kernel<LdmatrixProbeParams> = Kernel::new("probe_ldmatrix");
/// `cp.async.cg.shared.global` with `src-size`, `commit_group`, `wait_group`.
pub const PROBE_CP_ASYNC: Kernel<CpAsyncProbeParams> = Kernel::new("probe_cp_async");
/// `shfl.sync` bfly/idx/down and the warp reductions built on them.
pub const PROBE_WARP: Kernel<WarpProbeParams> = Kernel::new("probe_warp");

/// Every probe entry point.
pub const KERNELS: &[KernelSig] = &[
    PROBE_MMA_BF16.sig(),
    PROBE_MMA_F16.sig(),
    PROBE_MMA_TF32.sig(),
    PROBE_LDMATRIX.sig(),
    PROBE_CP_ASYNC.sig(),
    PROBE_WARP.sig(),
];
