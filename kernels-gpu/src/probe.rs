//! Instruction probes (see `kernel_abi::probe`): one warp, one instruction, every lane's view
//! of the result written out. Launched with a single block of 32 threads.

use crate::arch::shfl::{FULL_MASK, shfl_down_f32, shfl_idx_f32};
use crate::arch::{cp_async, cvt, lane_id, ldmatrix, mma, smem, sync};
use crate::warp::{warp_max, warp_sum};
use kernel_abi::fragment::{self, Coord};
use kernel_abi::probe::{CpAsyncProbeParams, LdmatrixProbeParams, MmaProbeParams, WarpProbeParams};

/// Reads the accumulator fragment of `c` (16×8 row-major) for this lane.
///
/// # Safety
/// `c` must point to 128 readable f32 (the 16×8 tile); `lane < 32`.
#[inline(always)]
unsafe fn load_acc(c: *const f32, lane: u32) -> [f32; 4] {
    core::array::from_fn(|i| {
        let Coord { row, col } = fragment::m16n8_acc(lane, i as u32);
        // SAFETY: (row, col) lies in the 16×8 tile the launcher allocated.
        unsafe { *c.add((row * 8 + col) as usize) }
    })
}

/// Writes this lane's accumulator fragment to `d` (16×8 row-major).
///
/// # Safety
/// `d` must point to 128 writable f32 (the 16×8 tile); `lane < 32`.
#[inline(always)]
unsafe fn store_acc(d: *mut f32, lane: u32, v: [f32; 4]) {
    for (i, value) in v.into_iter().enumerate() {
        let Coord { row, col } = fragment::m16n8_acc(lane, i as u32);
        // SAFETY: (row, col) lies in the 16×8 tile the launcher allocated.
        unsafe { *d.add((row * 8 + col) as usize) = value };
    }
}

/// Packs this lane's m16n8k16 A and B fragments from 16-bit words in global memory.
///
/// # Safety
/// `p.a` and `p.b` must hold the 16×16 and 8×16 16-bit tiles (128 and 64 words, as the
/// `gpu-host` `mma` launcher checks); `lane < 32`.
#[inline(always)]
unsafe fn load_16bit_fragments(p: &MmaProbeParams, lane: u32) -> ([u32; 4], [u32; 2]) {
    let (a, b) = (p.a.as_ptr().cast::<u16>(), p.b.as_ptr().cast::<u16>());
    // SAFETY: fragment coordinates lie in the 16×16 A tile the launcher allocated.
    let a_elem = |i: u32| unsafe {
        let Coord { row, col } = fragment::m16n8k16_a(lane, i);
        *a.add((row * 16 + col) as usize) as u32
    };
    // SAFETY: fragment coordinates lie in the 8×16 B tile the launcher allocated.
    let b_elem = |i: u32| unsafe {
        let Coord { row: k, col: n } = fragment::m16n8k16_b(lane, i);
        *b.add((n * 16 + k) as usize) as u32
    };
    let af = core::array::from_fn(|r| a_elem(2 * r as u32) | a_elem(2 * r as u32 + 1) << 16);
    let bf = core::array::from_fn(|r| b_elem(2 * r as u32) | b_elem(2 * r as u32 + 1) << 16);
    (af, bf)
}

/// Probe of `mma.m16n8k16.bf16`.
///
/// # Safety
/// One block of 32 threads; buffers as `kernel_abi::probe::MmaProbeParams` describes.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_bf16(p: MmaProbeParams) {
    crate::entry::prologue();
    let lane = lane_id();
    // SAFETY: the launcher allocated the tiles; the whole warp executes the mma together.
    unsafe {
        let (a, b) = load_16bit_fragments(&p, lane);
        let d = mma::mma_m16n8k16_bf16(a, b, load_acc(p.c.as_ptr(), lane));
        store_acc(p.d.as_mut_ptr(), lane, d);
    }
}

/// Probe of `mma.m16n8k16.f16`.
///
/// # Safety
/// One block of 32 threads; buffers as `kernel_abi::probe::MmaProbeParams` describes.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_f16(p: MmaProbeParams) {
    crate::entry::prologue();
    let lane = lane_id();
    // SAFETY: the launcher allocated the tiles; the whole warp executes the mma together.
    unsafe {
        let (a, b) = load_16bit_fragments(&p, lane);
        let d = mma::mma_m16n8k16_f16(a, b, load_acc(p.c.as_ptr(), lane));
        store_acc(p.d.as_mut_ptr(), lane, d);
    }
}

/// Probe of `mma.m16n8k8.tf32` (inputs rounded with `cvt.rna.tf32.f32`).
///
/// # Safety
/// One block of 32 threads; buffers as `kernel_abi::probe::MmaProbeParams` describes.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_mma_tf32(p: MmaProbeParams) {
    crate::entry::prologue();
    let lane = lane_id();
    let (a, b) = (p.a.as_ptr().cast::<f32>(), p.b.as_ptr().cast::<f32>());
    // SAFETY: fragment coordinates lie in the 16×8 A and 8×8 B tiles the launcher allocated;
    // the whole warp executes the mma together.
    unsafe {
        let af = core::array::from_fn(|i| {
            let Coord { row, col } = fragment::m16n8k8_tf32_a(lane, i as u32);
            cvt::f32_to_tf32(*a.add((row * 8 + col) as usize))
        });
        let bf = core::array::from_fn(|i| {
            let Coord { row: k, col: n } = fragment::m16n8k8_tf32_b(lane, i as u32);
            cvt::f32_to_tf32(*b.add((n * 8 + k) as usize))
        });
        let d = mma::mma_m16n8k8_tf32(af, bf, load_acc(p.c.as_ptr(), lane));
        store_acc(p.d.as_mut_ptr(), lane, d);
    }
}

/// Probe of `ldmatrix` (`.x1/.x2/.x4`, with or without `.trans`).
///
/// # Safety
/// One block of 32 threads with 512 bytes of dynamic shared memory; buffers as
/// `kernel_abi::probe::LdmatrixProbeParams` describes.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_ldmatrix(p: LdmatrixProbeParams) {
    crate::entry::prologue();
    let lane = lane_id();
    let base = smem::dynamic_smem_base();
    // Row `lane % 8` of matrix `lane / 8` sits 16 bytes per row from the base.
    let row_addr = base + 16 * lane;
    // SAFETY: lane copies its 16-byte row (the launcher allocated 512 source bytes and 512
    // bytes of shared memory); the barrier and every ldmatrix run on the whole warp (the
    // branch on `matrices`/`trans` is uniform).
    unsafe {
        let src = p.src.as_ptr().cast::<u32>().add(4 * lane as usize);
        smem::st_shared_v4_u32(row_addr, [*src, *src.add(1), *src.add(2), *src.add(3)]);
        sync::bar_sync();
        let mut regs = [u32::MAX; 4];
        match (p.matrices, p.trans != 0) {
            (1, false) => regs[0] = ldmatrix::ldmatrix_x1(row_addr)[0],
            (1, true) => regs[0] = ldmatrix::ldmatrix_x1_trans(row_addr)[0],
            (2, false) => regs[..2].copy_from_slice(&ldmatrix::ldmatrix_x2(row_addr)),
            (2, true) => regs[..2].copy_from_slice(&ldmatrix::ldmatrix_x2_trans(row_addr)),
            (_, false) => regs = ldmatrix::ldmatrix_x4(row_addr),
            (_, true) => regs = ldmatrix::ldmatrix_x4_trans(row_addr),
        }
        let out = p.out.as_mut_ptr().add(4 * lane as usize);
        for (j, r) in regs.into_iter().enumerate() {
            *out.add(j) = r;
        }
    }
}

/// Probe of `cp.async` with zero-fill, commit and wait.
///
/// # Safety
/// One block of 32 threads with 512 bytes of dynamic shared memory; buffers as
/// `kernel_abi::probe::CpAsyncProbeParams` describes (both 16-byte aligned).
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_cp_async(p: CpAsyncProbeParams) {
    crate::entry::prologue();
    let lane = lane_id();
    let dst = smem::dynamic_smem_base() + 16 * lane;
    let offset = 16 * lane;
    let valid = p.src_bytes.saturating_sub(offset).min(16);
    // SAFETY: `src + offset` has `valid` readable bytes (the base is used, and nothing read,
    // when `valid` is 0); the barrier is reached by the whole block.
    unsafe {
        let src = if valid > 0 { p.src.as_ptr().add(offset as usize) } else { p.src.as_ptr() };
        cp_async::cp_async_cg_16(dst, src, valid);
        cp_async::cp_async_commit_group();
        cp_async::cp_async_wait_group::<0>();
        sync::bar_sync();
        let v = smem::ld_shared_v4_u32(smem::dynamic_smem_base() + 16 * ((lane + 1) % 32));
        let out = p.out.as_mut_ptr().cast::<u32>().add(4 * ((lane as usize + 1) % 32));
        for (j, w) in v.into_iter().enumerate() {
            *out.add(j) = w;
        }
    }
}

/// Probe of the warp shuffles and reductions.
///
/// # Safety
/// One block of 32 threads; buffers as `kernel_abi::probe::WarpProbeParams` describes.
#[unsafe(no_mangle)]
pub unsafe extern "ptx-kernel" fn probe_warp(p: WarpProbeParams) {
    crate::entry::prologue();
    let lane = lane_id();
    // SAFETY: 32 inputs and 128 outputs were allocated; all lanes run every shuffle together.
    unsafe {
        let x = *p.x.as_ptr().add(lane as usize);
        let results = [
            warp_sum(x),
            warp_max(x),
            shfl_idx_f32(FULL_MASK, x, (lane + 1) % 32),
            shfl_down_f32(FULL_MASK, x, 1),
        ];
        let out = p.out.as_mut_ptr().add(4 * lane as usize);
        for (j, r) in results.into_iter().enumerate() {
            *out.add(j) = r;
        }
    }
}
