//! The Hopper GEMM (`gemm_wgmma_*`, sm_90a module only): the semantics of [`crate::gemm`]
//! computed by `wgmma.mma_async` from shared-memory tiles that the tensor memory accelerator
//! (TMA, `cp.async.bulk.tensor`) loads, in a warp-specialised, persistent kernel.
//!
//! # Operands
//! A and B are read through two *tensor maps* (128-byte descriptors of a 2-D global tensor and
//! of the box one TMA load copies) that the host encodes (`cuTensorMapEncodeTiled` on a GPU,
//! the simulator's own encoding on the simulator) and stores in global memory; the kernel gets
//! their addresses. A tensor map would normally be a `__grid_constant__` kernel parameter, but
//! rustc cannot mark a parameter that way (LLVM would copy it to local memory, which TMA cannot
//! read), so it lives in global memory, which the PTX ISA equally allows.
//!
//! Both operands are K-major: A row-major (M×K, `lda`) and B column-major (an `nn.Linear`
//! weight `W (N, K)`, `ldb`), the only layout pair `wgmma` takes for TF32. Each tensor map
//! describes the operand as rows (M or N) of K elements, with a box of [`wg::BK_BYTES`] bytes
//! of K by [`wg::BM`] (A) or [`wg::BN`] (B) rows, in the 128-byte swizzle. Elements outside
//! the tensor are zero-filled by TMA, so partial tiles need no masking in the main loop.
//!
//! # Everything else
//! The epilogue (alpha, beta, bias, GELU, GELU backward, output types), split-K (with the
//! same `gemm_split_reduce_*` second pass) and rasterisation are those of [`crate::gemm`],
//! through the embedded [`GemmParams`]; its `a`/`b` pointers are the operands the tensor maps
//! describe (the launcher fills both), `lda`/`ldb` their leading dimensions. Batches are not
//! supported (`gemm` falls back to the `mma.sync` kernel for them).

use crate::gemm::GemmParams;
use crate::kernel::{Kernel, KernelParams, KernelSig, LaunchBounds};
use crate::ptr::{Bf16, DevicePtr, F16};

/// An encoded TMA tensor map: 128 opaque bytes, 64-byte aligned (the driver's `CUtensorMap`).
#[repr(C, align(64))]
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct TensorMap {
    /// The encoding (the driver's, or the simulator's).
    pub bytes: [u8; 128],
}

impl core::fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "TensorMap({:02x?}..)", &self.bytes[..8])
    }
}

/// Launch parameters of the `gemm_wgmma_*` entries.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct WgmmaGemmParams<I: Copy, O: Copy> {
    /// Shapes, epilogue, split-K and rasterisation, as for the `mma.sync` kernels
    /// (`batch` must be 1: `stride_*` are unused).
    pub gemm: GemmParams<I, O>,
    /// Tensor map of A (K-major, box `BK_BYTES` of K × `BM` rows).
    pub tmap_a: DevicePtr<TensorMap>,
    /// Tensor map of B (K-major, box `BK_BYTES` of K × `BN` rows).
    pub tmap_b: DevicePtr<TensorMap>,
    /// Work units (`tiles_m · tiles_n · split_k`) the persistent grid walks: block `b` takes
    /// units `b, b + gridDim.x, …`; unit `u` is slice `u / tiles` of tile `u % tiles`.
    pub units: u32,
}

// SAFETY: #[repr(C)] struct of a GemmParams (itself KernelParams), two device pointers and a
// u32; the only padding is at the tail, which the device never reads.
unsafe impl<I: Copy + 'static, O: Copy + 'static> KernelParams for WgmmaGemmParams<I, O> {}

/// Geometry of the Hopper GEMM.
///
/// ```text
/// block = 3 warpgroups (384 threads)
///   warpgroup 0: producer. setmaxnreg.dec to PRODUCER_REGS; one elected thread of warp 0
///                issues the TMA loads of A and B for each stage, `arrive.expect_tx` on
///                full[s]; the other threads of the warpgroup exit.
///   warpgroups 1, 2: consumers. setmaxnreg.inc to CONSUMER_REGS; consumer g multiplies rows
///                64g .. 64g + 64 of the block tile with wgmma m64n128k16 (bf16, f16) or
///                m64n128k8 (tf32), 64 f32 accumulators per thread.
///
/// shared memory (1024-byte aligned base):
///   STAGES × [ A tile: BM rows × 128 B | B tile: BN rows × 128 B ]   128-byte swizzle
///   full[STAGES], empty[STAGES]: mbarriers (8 B each)
///   8 consumer warps × EPI_WARP_BYTES of epilogue staging
///
/// ring protocol, stage s = i % STAGES, phase parity (i / STAGES) & 1 of the i-th k-tile:
///   producer: wait empty[s] (parity ^ 1)  → arrive.expect_tx(full[s], STAGE_BYTES) → 2 TMA
///   consumer: wait full[s] (parity)       → wgmma × 4 → commit → wait_group 1
///             → lane 0 of each consumer warp arrives on empty[previous stage]
/// ```
pub mod wg {
    /// Block tile rows (two consumer warpgroups of 64 rows).
    pub const BM: u32 = 128;
    /// Block tile columns (the N of one wgmma).
    pub const BN: u32 = 128;
    /// Bytes of K per stage: one 128-byte swizzle row (64 16-bit or 32 f32 elements).
    pub const BK_BYTES: u32 = 128;
    /// Bytes of K one wgmma consumes (k16 of 16-bit or k8 of tf32).
    pub const WGMMA_K_BYTES: u32 = 32;
    /// Pipeline depth.
    pub const STAGES: u32 = 4;
    /// Consumer warpgroups.
    pub const CONSUMERS: u32 = 2;
    /// Threads per block: the producer warpgroup and the consumers.
    pub const THREADS: u32 = 128 * (1 + CONSUMERS);
    /// Registers per thread of the producer warpgroup after `setmaxnreg.dec`.
    pub const PRODUCER_REGS: u32 = 40;
    /// Registers per thread of the consumer warpgroups after `setmaxnreg.inc`.
    pub const CONSUMER_REGS: u32 = 232;
    /// Bytes of one A tile of one stage.
    pub const A_TILE_BYTES: u32 = BM * BK_BYTES;
    /// Bytes of one B tile of one stage.
    pub const B_TILE_BYTES: u32 = BN * BK_BYTES;
    /// Bytes of one stage (what its full barrier expects).
    pub const STAGE_BYTES: u32 = A_TILE_BYTES + B_TILE_BYTES;
    /// Offset of the mbarriers (full[0..STAGES], then empty[0..STAGES]).
    pub const BARRIERS_OFFSET: u32 = STAGES * STAGE_BYTES;
    /// Row stride (f32 words) of a consumer warp's epilogue staging buffer (16 rows × 64
    /// columns at a time), padded as the `mma.sync` kernel's.
    pub const EPI_ROW_WORDS: u32 = 64 + 8;
    /// Bytes of one consumer warp's staging buffer.
    pub const EPI_WARP_BYTES: u32 = 16 * EPI_ROW_WORDS * 4;
    /// Offset of the staging buffers.
    pub const EPILOGUE_OFFSET: u32 = BARRIERS_OFFSET + 2 * 8 * STAGES;
    /// Bytes used from the aligned base.
    pub const USED_BYTES: u32 = EPILOGUE_OFFSET + 4 * CONSUMERS * EPI_WARP_BYTES;
    /// Dynamic shared memory to request: the used bytes plus slack to align the base to the
    /// 1024 bytes of the 128-byte swizzle pattern.
    pub const SMEM_BYTES: u32 = USED_BYTES + 1024;
    const _: () = assert!(SMEM_BYTES <= 227 * 1024);
    const _: () = assert!(
        PRODUCER_REGS * 128 + CONSUMER_REGS * 128 * CONSUMERS <= 65536,
        "the register split must fit the SM's register file"
    );
}

/// The layout-fixed (A row-major, B column-major) Hopper entries of one input/output pair.
pub type WgmmaKernel<I, O> = Kernel<WgmmaGemmParams<I, O>>;

/// `gemm_wgmma_bf16_rc_bf16`.
pub const WGMMA_BF16_BF16: WgmmaKernel<Bf16, Bf16> = Kernel::new("gemm_wgmma_bf16_rc_bf16");
/// `gemm_wgmma_bf16_rc_f32`.
pub const WGMMA_BF16_F32: WgmmaKernel<Bf16, f32> = Kernel::new("gemm_wgmma_bf16_rc_f32");
/// `gemm_wgmma_f16_rc_f16`.
pub const WGMMA_F16_F16: WgmmaKernel<F16, F16> = Kernel::new("gemm_wgmma_f16_rc_f16");
/// `gemm_wgmma_f16_rc_f32`.
pub const WGMMA_F16_F32: WgmmaKernel<F16, f32> = Kernel::new("gemm_wgmma_f16_rc_f32");
/// `gemm_wgmma_tf32_rc_f32`: f32 in memory, read by wgmma as TF32 (the low 13 mantissa bits
/// ignored, i.e. truncated, unlike the `mma.sync` kernel's round-to-nearest).
pub const WGMMA_TF32_F32: WgmmaKernel<f32, f32> = Kernel::new("gemm_wgmma_tf32_rc_f32");

/// Every Hopper GEMM entry (exported by the sm_90a module only).
pub const KERNELS: &[KernelSig] = &[
    WGMMA_BF16_BF16.sig(),
    WGMMA_BF16_F32.sig(),
    WGMMA_F16_F16.sig(),
    WGMMA_F16_F32.sig(),
    WGMMA_TF32_F32.sig(),
];

/// One block of `wg::THREADS` per SM (its shared memory allows no second one), so that ptxas
/// budgets 168 registers per thread, which `setmaxnreg` redistributes.
pub const LAUNCH_BOUNDS: &[LaunchBounds] = &{
    let mut out = [LaunchBounds { name: "", max_threads: wg::THREADS, min_blocks_per_sm: 1 }; 5];
    let mut i = 0;
    while i < 5 {
        out[i].name = KERNELS[i].name;
        i += 1;
    }
    out
};
