//! `mma.sync` and `ldmatrix`, with the fragment layouts of the PTX ISA ("Matrix Fragments for
//! mma.m16n8k16 / mma.m16n8k8", "ldmatrix") written out here independently of
//! `kernel_abi::fragment` (the tests check the two statements agree).
//!
//! Numerics of `mma`: every product of two inputs is exact in f64 (bf16, f16 and tf32 have at
//! most 11 significant bits), the k products and the accumulator are summed in f64 and the
//! sum is rounded once to f32 (nearest even). The hardware's internal accumulation order and
//! precision are not specified by the ISA and differ from this by a few f32 ulps at most;
//! tf32 operands use only the upper 19 bits of their registers (the low 13 bits are ignored).

use super::{Block, Warp, float};
use crate::decode::op::{Addr, MmaKind, Slot, Space, Src};
use crate::memory::{Generic, resolve_generic};
use gpu_host::{GpuError, SimErrorKind};
use half::{bf16, f16};

/// `lane >> 2` and `lane % 4` (the ISA's groupID and threadID_in_group).
fn group_tig(lane: usize) -> (usize, usize) {
    (lane >> 2, lane & 3)
}

/// (row, col) in the 16×K tile of A of element `i` of `lane`'s A fragment.
pub fn a_coord(kind: MmaKind, lane: usize, i: usize) -> (usize, usize) {
    let (g, t) = group_tig(lane);
    match kind {
        MmaKind::Bf16M16N8K16 | MmaKind::F16M16N8K16 => {
            (g + 8 * ((i / 2) % 2), t * 2 + (i % 2) + 8 * (i / 4))
        }
        MmaKind::Tf32M16N8K8 => (g + 8 * (i % 2), t + 4 * (i / 2)),
    }
}

/// (k, n) in the K×8 tile of B of element `i` of `lane`'s B fragment.
pub fn b_coord(kind: MmaKind, lane: usize, i: usize) -> (usize, usize) {
    let (g, t) = group_tig(lane);
    match kind {
        MmaKind::Bf16M16N8K16 | MmaKind::F16M16N8K16 => (t * 2 + (i % 2) + 8 * (i / 2), g),
        MmaKind::Tf32M16N8K8 => (t + 4 * i, g),
    }
}

/// (row, col) in the 16×8 accumulator tile of element `i` of `lane`'s C/D fragment.
pub fn acc_coord(lane: usize, i: usize) -> (usize, usize) {
    let (g, t) = group_tig(lane);
    (g + 8 * (i / 2), t * 2 + (i % 2))
}

/// Elements per lane of the A and B fragments, and K.
fn shape(kind: MmaKind) -> (usize, usize, usize) {
    match kind {
        MmaKind::Bf16M16N8K16 | MmaKind::F16M16N8K16 => (8, 4, 16),
        MmaKind::Tf32M16N8K8 => (4, 2, 8),
    }
}

/// Element `i` of a fragment held in 32-bit registers, as f64.
pub(super) fn element(kind: MmaKind, regs: &[u32], i: usize) -> f64 {
    match kind {
        MmaKind::Bf16M16N8K16 => bf16::from_bits((regs[i / 2] >> (16 * (i % 2))) as u16).to_f64(),
        MmaKind::F16M16N8K16 => f16::from_bits((regs[i / 2] >> (16 * (i % 2))) as u16).to_f64(),
        MmaKind::Tf32M16N8K8 => f32::from_bits(regs[i] & !0x1fff) as f64,
    }
}

/// `ldmatrix` non-transposed: (row, col) of the 8×8 matrix that half `h` of `lane`'s register
/// holds; `.trans` swaps them.
pub fn ldmatrix_coord(lane: usize, h: usize, trans: bool) -> (usize, usize) {
    let (r, c) = (lane / 4, (lane % 4) * 2 + h);
    if trans { (c, r) } else { (r, c) }
}

impl Block<'_> {
    /// `mma.sync` over the whole warp.
    pub(super) fn mma(
        &self,
        w: &mut Warp,
        kind: MmaKind,
        d: [Slot; 4],
        a: [Src; 4],
        b: [Src; 2],
        c: [Src; 4],
    ) {
        let (na, nb, k) = shape(kind);
        let mut am = [[0f64; 16]; 16];
        let mut bm = [[0f64; 8]; 16];
        let mut cm = [[0f64; 8]; 16];
        for lane in 0..32 {
            let regs_a: Vec<u32> = a.iter().map(|s| self.read(w, *s, lane) as u32).collect();
            let regs_b: Vec<u32> = b.iter().map(|s| self.read(w, *s, lane) as u32).collect();
            for i in 0..na {
                let (r, col) = a_coord(kind, lane, i);
                am[r][col] = element(kind, &regs_a, i);
            }
            for i in 0..nb {
                let (kk, n) = b_coord(kind, lane, i);
                bm[kk][n] = element(kind, &regs_b, i);
            }
            for (i, src) in c.iter().enumerate() {
                let (r, col) = acc_coord(lane, i);
                cm[r][col] = f32::from_bits(self.read(w, *src, lane) as u32) as f64;
            }
        }
        for lane in 0..32 {
            for (i, dst) in d.iter().enumerate() {
                let (r, col) = acc_coord(lane, i);
                let sum = (0..k).fold(cm[r][col], |s, kk| s + am[r][kk] * bm[kk][col]);
                w.set(*dst, lane, float::out32(sum as f32, false, false));
            }
        }
    }

    /// `ldmatrix.m8n8.xN[.trans].b16`: lane `8j + r` supplies the address of row `r` of
    /// matrix `j` (16 bytes, 16-byte aligned); register `j` of every lane receives two
    /// elements of matrix `j`.
    #[allow(
        clippy::too_many_arguments,
        reason = "the interpreter's per-instruction state, passed without an intermediate struct in the hot loop"
    )]
    pub(super) fn ldmatrix(
        &mut self,
        w: &mut Warp,
        pc: u32,
        n: u8,
        trans: bool,
        d: [Slot; 4],
        addr: Addr,
        space: Space,
    ) -> Result<(), GpuError> {
        let n = n as usize;
        let mut rows = [[0u16; 8]; 32];
        for (provider, row) in rows.iter_mut().enumerate().take(8 * n) {
            let v = addr
                .base
                .map_or(0, |s| w.regs[s as usize * 32 + provider])
                .wrapping_add(addr.offset);
            let shared = match space {
                Space::Generic => match resolve_generic(v) {
                    Generic::Shared(a) => a,
                    _ => {
                        let what =
                            format!("ldmatrix row address {v:#x} is not a shared-memory address");
                        return Err(self.fault(SimErrorKind::OutOfBounds, w, provider, pc, what));
                    }
                },
                _ => v,
            };
            let mut bytes = [0u8; 16];
            self.load(w, provider, pc, Space::Shared, shared, &mut bytes)?;
            for (e, pair) in row.iter_mut().zip(bytes.chunks_exact(2)) {
                *e = u16::from_le_bytes([pair[0], pair[1]]);
            }
        }
        for lane in 0..32 {
            for (j, dst) in d.iter().enumerate().take(n) {
                let half = |h| {
                    let (r, c) = ldmatrix_coord(lane, h, trans);
                    rows[j * 8 + r][c] as u64
                };
                w.set(*dst, lane, half(0) | half(1) << 16);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kernel_abi::fragment::{self, Coord};

    fn c((row, col): (usize, usize)) -> Coord {
        Coord::new(row as u32, col as u32)
    }

    /// The layouts written here agree with kernel-abi's (checked there against the ISA's
    /// figures), element by element.
    #[test]
    fn layouts_agree_with_kernel_abi() {
        for lane in 0..32u32 {
            let l = lane as usize;
            for i in 0..8 {
                assert_eq!(
                    c(a_coord(MmaKind::Bf16M16N8K16, l, i)),
                    fragment::m16n8k16_a(lane, i as u32)
                );
            }
            for i in 0..4 {
                assert_eq!(
                    c(b_coord(MmaKind::F16M16N8K16, l, i)),
                    fragment::m16n8k16_b(lane, i as u32)
                );
                assert_eq!(
                    c(a_coord(MmaKind::Tf32M16N8K8, l, i)),
                    fragment::m16n8k8_tf32_a(lane, i as u32)
                );
                assert_eq!(c(acc_coord(l, i)), fragment::m16n8_acc(lane, i as u32));
            }
            for i in 0..2 {
                assert_eq!(
                    c(b_coord(MmaKind::Tf32M16N8K8, l, i)),
                    fragment::m16n8k8_tf32_b(lane, i as u32)
                );
                assert_eq!(c(ldmatrix_coord(l, i, false)), fragment::ldmatrix(lane, i as u32));
                assert_eq!(c(ldmatrix_coord(l, i, true)), fragment::ldmatrix_trans(lane, i as u32));
            }
        }
    }
}
