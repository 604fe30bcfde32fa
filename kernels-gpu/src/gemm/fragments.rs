//! Shared memory → `mma.sync` fragments, for one warp and one k-step of a stage.
//!
//! K-major tiles (and 16-bit MN-major tiles, with `.trans`) are read with `ldmatrix.x4`, whose
//! per-lane row addresses are `kernel_abi::gemm::tc::{a,b}_ldsm_*`. TF32 MN-major tiles are read
//! with one 32-bit load per fragment register at the positions of
//! `kernel_abi::fragment::m16n8k8_tf32_{a,b}`, since `ldmatrix` cannot transpose 32-bit
//! elements. Every register goes through [`TensorOp::prepare`] (TF32 rounding).

use super::tensor_op::TensorOp;
use crate::arch::{ldmatrix, smem};
use crate::unroll::unroll;
use kernel_abi::fragment::{Coord, m16n8k8_tf32_a, m16n8k8_tf32_b};
use kernel_abi::gemm::tc::{
    self, a_ldsm_k_major, a_ldsm_m_major, b_ldsm_k_major, b_ldsm_n_major, tile_offset,
};

/// m16 tiles per warp tile.
pub const MT: usize = (tc::WM / 16) as usize;
/// n8 tiles per warp tile.
pub const NT: usize = (tc::WN / 8) as usize;

/// A fragments of the warp's `MT` m16 tiles at k-step `kk`, from the A tile at `tile`; the
/// warp's rows start at `wm`.
///
/// # Safety
/// The whole warp calls it together; `tile` holds a complete A tile of this stage.
#[inline(always)]
pub unsafe fn load_a<T: TensorOp, const K_MAJOR: bool>(
    tile: u32,
    wm: u32,
    lane: u32,
    kk: u32,
) -> [[u32; 4]; MT] {
    let eb = size_of::<T::In>() as u32;
    let mut regs = [[0u32; 4]; MT];
    // SAFETY: every address is inside the tile (rows < 128, chunks < row_chunks) and 16-byte
    // (ldmatrix) or 4-byte aligned; the warp is converged.
    unsafe {
        unroll!(i in 0..4 => {
            let t = i as u32;
            regs[i] = if K_MAJOR {
                let (row, chunk) = a_ldsm_k_major(lane, t, kk);
                ldmatrix::ldmatrix_x4(tile + tile_offset(true, eb, wm + row, chunk))
            } else if eb == 2 {
                let (row, chunk) = a_ldsm_m_major(lane, t, kk);
                ldmatrix::ldmatrix_x4_trans(tile + tile_offset(false, 2, row, wm / 8 + chunk))
            } else {
                let mut r4 = [0u32; 4];
                unroll!(r in 0..4 => {
                    let Coord { row: m, col: k } = m16n8k8_tf32_a(lane, r as u32);
                    let (m, k) = (wm + 16 * t + m, 8 * kk + k);
                    r4[r] = smem::ld_shared_u32(tile + tile_offset(false, 4, k, m / 4) + (m % 4) * 4);
                });
                r4
            };
            unroll!(r in 0..4 => {
                regs[i][r] = T::prepare(regs[i][r]);
            });
        });
    }
    regs
}

/// B fragments of the warp's `NT` n8 tiles at k-step `kk`, from the B tile at `tile`; the
/// warp's columns start at `wn`.
///
/// # Safety
/// As [`load_a`].
#[inline(always)]
pub unsafe fn load_b<T: TensorOp, const K_MAJOR: bool>(
    tile: u32,
    wn: u32,
    lane: u32,
    kk: u32,
) -> [[u32; 2]; NT] {
    let eb = size_of::<T::In>() as u32;
    let mut regs = [[0u32; 2]; NT];
    // SAFETY: as in `load_a`; one x4 load covers the n8 tiles 2p and 2p + 1.
    unsafe {
        if K_MAJOR || eb == 2 {
            unroll!(p in 0..4 => {
                let q = if K_MAJOR {
                    let (row, chunk) = b_ldsm_k_major(lane, p as u32, kk);
                    ldmatrix::ldmatrix_x4(tile + tile_offset(true, eb, wn + row, chunk))
                } else {
                    let (row, chunk) = b_ldsm_n_major(lane, p as u32, kk);
                    ldmatrix::ldmatrix_x4_trans(tile + tile_offset(false, 2, row, wn / 8 + chunk))
                };
                regs[2 * p] = [q[0], q[1]];
                regs[2 * p + 1] = [q[2], q[3]];
            });
        } else {
            unroll!(j in 0..8 => {
                unroll!(r in 0..2 => {
                    let Coord { row: k, col: n } = m16n8k8_tf32_b(lane, r as u32);
                    let (k, n) = (8 * kk + k, wn + 8 * j as u32 + n);
                    regs[j][r] = smem::ld_shared_u32(tile + tile_offset(false, 4, k, n / 4) + (n % 4) * 4);
                });
            });
        }
        unroll!(j in 0..8 => {
            unroll!(r in 0..2 => {
                regs[j][r] = T::prepare(regs[j][r]);
            });
        });
    }
    regs
}
