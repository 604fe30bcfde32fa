//! `wgmma.mma_async` and its `fence` / `commit_group` / `wait_group`.
//!
//! # Execution
//! A warpgroup's `wgmma.mma_async m64nNkK` is four warps each computing 16 rows of D: warp
//! `w % 4` of the group owns rows `16·(w % 4) ..` of A and D and reads all of B. The simulator
//! executes it per warp when all 32 lanes arrive (`.aligned`): A and B are read from shared
//! memory through their descriptors (or A from registers) at issue, products are exact in
//! f64 and summed with the accumulator in f64, rounded once to f32 (as `mma.sync`); tf32
//! operands use the upper 19 bits of each f32. The results are held aside and written to the
//! accumulator registers when a `wgmma.wait_group` retires the instruction's group.
//!
//! # Descriptors (PTX ISA "Matrix Descriptor Format")
//! Bits 0–13 start address / 16, 16–29 leading byte offset / 16, 32–45 stride byte offset
//! / 16, 49–51 base offset (must be 0 here), 62–63 swizzle (0 none, 1 = 128B, 2 = 64B,
//! 3 = 32B). The ISA's canonical layouts, in bytes, with the swizzle of S bytes applied to the
//! absolute shared address (the same function TMA writes with; it permutes 16-byte chunks):
//! - K-major (`imm-trans` 0): row r (of M or N) has its K bytes at
//!   `start + (r / 8)·SBO + (r % 8)·S + kbyte`; without a swizzle, 8×16-byte core matrices at
//!   `start + (r / 8)·SBO + (kbyte / 16)·LBO + (r % 8)·16`.
//! - MN-major (`imm-trans` 1, bf16/f16 only): element k of K has its M/N bytes at
//!   `start + (mnbyte / S)·LBO + mnbyte % S + (k % 8)·S + (k / 8)·SBO` (atoms of 8 K × S
//!   bytes, LBO between atoms along M/N, SBO along K); without a swizzle, core matrices of
//!   8 K × 16 bytes at `start + (mnbyte / 16)·SBO + (k / 8)·LBO + (k % 8)·16 + mnbyte % 16`.
//!
//! # Checks
//! - the descriptors are the same in every lane of the warp;
//! - a `wgmma.mma_async` whose registers (accumulators, A fragment) other instructions wrote
//!   since a wgmma last did needs a `wgmma.fence` after the last `commit_group`;
//! - no other instruction may read or write those registers until a `wait_group` retires the
//!   wgmma (later wgmmas may chain on the same accumulators);
//! - shared memory a wgmma reads must not be written (by any thread, or TMA) until a
//!   `wait_group` of the issuing warp retires it, and must have been fenced with
//!   `fence.proxy.async` when generic stores wrote it.

use super::hopper::swizzle;
use super::mma::{self, a_coord, acc_coord};
use super::{Block, Warp, float};
use crate::decode::op::{MmaKind, Op, Slot, Src, Wgmma, WgmmaA, WgmmaKind};
use crate::memory::SHARED_BASE;
use crate::racecheck::Access;
use gpu_host::{GpuError, SimErrorKind};
use half::{bf16, f16};
use std::collections::{HashMap, VecDeque};

/// One issued wgmma whose results are not yet in the registers.
struct Pending {
    /// Issue sequence number within the warp.
    seq: u32,
    /// Accumulator registers and their results, per lane.
    d: Vec<(Slot, [u32; 32])>,
    /// Registers of a register A operand.
    a_regs: Vec<Slot>,
}

/// A warp's wgmma state.
#[derive(Default)]
pub struct WgmmaState {
    uncommitted: Vec<Pending>,
    groups: VecDeque<Vec<Pending>>,
    /// A `wgmma.fence` since the last `commit_group`.
    fenced: bool,
    /// The values the last retired wgmma wrote to each accumulator register.
    last_written: HashMap<Slot, [u32; 32]>,
    /// Registers of in-flight wgmmas.
    busy: Vec<Slot>,
    seq: u32,
}

impl WgmmaState {
    /// Whether a wgmma is in flight (its registers are then off limits).
    pub fn in_flight(&self) -> bool {
        !self.busy.is_empty()
    }

    /// The first register of `op` that an in-flight wgmma owns.
    pub fn conflict(&self, op: &Op) -> Option<Slot> {
        let mut hit = None;
        op.for_each_reg(|r| {
            if hit.is_none() && self.busy.contains(&r) {
                hit = Some(r);
            }
        });
        hit
    }

    fn pending(&self) -> impl Iterator<Item = &Pending> {
        self.groups.iter().flatten().chain(&self.uncommitted)
    }

    fn refresh_busy(&mut self) {
        let mut busy: Vec<Slot> = self
            .pending()
            .flat_map(|p| p.d.iter().map(|(s, _)| *s).chain(p.a_regs.iter().copied()))
            .collect();
        busy.sort_unstable();
        busy.dedup();
        self.busy = busy;
    }

    /// The latest in-flight result for `slot`, if any.
    fn pending_value(&self, slot: Slot) -> Option<&[u32; 32]> {
        self.pending().filter_map(|p| p.d.iter().find(|(s, _)| *s == slot)).last().map(|(_, v)| v)
    }
}

/// A shared-memory range an in-flight wgmma reads.
pub struct InflightRead {
    warp: u32,
    seq: u32,
    start: usize,
    end: usize,
    pc: u32,
}

/// A decoded matrix descriptor.
#[derive(Clone, Copy, Debug)]
struct Desc {
    start: u64,
    lbo: u64,
    sbo: u64,
    span: u32,
}

fn decode_desc(d: u64) -> Result<Desc, String> {
    let field = |lo: u32| ((d >> lo) & 0x3fff) << 4;
    let base_offset = (d >> 49) & 7;
    if base_offset != 0 {
        return Err(format!(
            "matrix descriptor {d:#018x} has base offset {base_offset}; only 0 (pattern-aligned tiles) is modelled"
        ));
    }
    let span = match d >> 62 {
        0 => 0,
        1 => 128,
        2 => 64,
        _ => 32,
    };
    let start = field(0);
    // The swizzle pattern repeats every 8 rows of 128 bytes (every 8·span bytes): a start in
    // a later row of it is what the base-offset field is for, which the ISA leaves to the
    // hardware with base offset 0. Starts that only move along K inside the first row
    // (CUTLASS's and DeepGEMM's k-steps) are modelled.
    let period = 8 * span as u64;
    if span != 0 && start % period >= 128 {
        return Err(format!(
            "matrix descriptor {d:#018x} starts at {start:#x}, {} bytes into its {period}-byte swizzle pattern (past its first 128-byte row) with base offset 0: not modelled",
            start % period
        ));
    }
    Ok(Desc { start, lbo: field(16), sbo: field(32), span })
}

impl Desc {
    /// Shared address of the 16-byte chunk holding bytes `[kbyte, kbyte + 16)` of K of row
    /// `row` (M or N) of a K-major operand.
    fn k_major_chunk(&self, row: u64, kbyte: u64) -> u64 {
        if self.span == 0 {
            self.start + (row / 8) * self.sbo + (kbyte / 16) * self.lbo + (row % 8) * 16
        } else {
            let logical = self.start + (row / 8) * self.sbo + (row % 8) * self.span as u64 + kbyte;
            swizzle(logical, self.span)
        }
    }

    /// Shared address of the 16-byte chunk holding bytes `[mnbyte, mnbyte + 16)` of M (or N)
    /// of element `k` of K of an MN-major operand.
    fn mn_major_chunk(&self, mnbyte: u64, k: u64) -> u64 {
        if self.span == 0 {
            self.start + (mnbyte / 16) * self.sbo + (k / 8) * self.lbo + (k % 8) * 16
        } else {
            let span = self.span as u64;
            let logical = self.start
                + (mnbyte / span) * self.lbo
                + mnbyte % span
                + (k % 8) * span
                + (k / 8) * self.sbo;
            swizzle(logical, self.span)
        }
    }
}

/// The registers of a register A operand (none for a descriptor).
fn a_reg_slots(a: &WgmmaA) -> Vec<Slot> {
    match a {
        WgmmaA::Regs(r) => r
            .iter()
            .filter_map(|s| match s {
                Src::Reg(r) => Some(*r),
                _ => None,
            })
            .collect(),
        WgmmaA::Desc(_) => Vec::new(),
    }
}

/// Element `e` of a 16-byte chunk as f64 (tf32: the upper 19 bits).
fn element(kind: WgmmaKind, chunk: &[u8], e: usize) -> f64 {
    match kind {
        WgmmaKind::Bf16 => {
            bf16::from_bits(u16::from_le_bytes([chunk[2 * e], chunk[2 * e + 1]])).to_f64()
        }
        WgmmaKind::F16 => {
            f16::from_bits(u16::from_le_bytes([chunk[2 * e], chunk[2 * e + 1]])).to_f64()
        }
        WgmmaKind::Tf32 => {
            let bits = u32::from_le_bytes([
                chunk[4 * e],
                chunk[4 * e + 1],
                chunk[4 * e + 2],
                chunk[4 * e + 3],
            ]);
            f32::from_bits(bits & !0x1fff) as f64
        }
    }
}

impl Block<'_> {
    fn async_fault(&self, w: &Warp, pc: u32, what: impl std::fmt::Display) -> GpuError {
        self.fault(SimErrorKind::AsyncProxyHazard, w, 0, pc, what)
    }

    /// A warp-uniform 64-bit operand (a descriptor).
    fn uniform(&self, w: &Warp, pc: u32, src: Src, what: &str) -> Result<u64, GpuError> {
        let v = self.read(w, src, 0);
        if let Some(lane) = (1..32).find(|&l| self.read(w, src, l) != v) {
            let msg = format!(
                "the {what} differs between lanes 0 and {lane} of the warp ({v:#x} vs {:#x}); it must be the same in every thread of the warpgroup",
                self.read(w, src, lane)
            );
            return Err(self.fault(SimErrorKind::IllegalCollective, w, lane, pc, msg));
        }
        Ok(v)
    }

    /// Reads `rows` rows (of M or N) × K of an operand, K-major or (`mn_major`) MN-major, as
    /// f64 indexed `[row][k]`, recording the shared reads for the race and in-flight checks.
    fn read_operand(
        &mut self,
        w: &Warp,
        pc: u32,
        (desc, kind, seq): (u64, WgmmaKind, u32),
        (rows, mn_major): (std::ops::Range<u64>, bool),
    ) -> Result<Vec<Vec<f64>>, GpuError> {
        let d =
            decode_desc(desc).map_err(|m| self.fault(SimErrorKind::Unsupported, w, 0, pc, m))?;
        let esize = kind.elem_bytes() as u64;
        let per_chunk = 16 / kind.elem_bytes();
        let tid = (w.index * 32) as usize;
        let access = Access {
            epoch: self.shadow.epoch(),
            pc,
            warp_sync: w.warp_sync,
            tid: tid as u16,
            atomic: false,
            clock: self.shadow.clock(tid),
        };
        // Every 16-byte chunk: its address and the (row, k) of its first element; the others
        // follow along K (K-major) or along the rows (MN-major).
        let chunks: Vec<(u64, u64, u64)> = if mn_major {
            let mn_bytes = (rows.start * esize..rows.end * esize).step_by(16);
            (0..kind.k() as u64)
                .flat_map(|k| mn_bytes.clone().map(move |b| (b, k)))
                .map(|(b, k)| (d.mn_major_chunk(b, k), b / esize, k))
                .collect()
        } else {
            let kbytes = (0..kind.k() as u64 * esize).step_by(16);
            rows.clone()
                .flat_map(|r| kbytes.clone().map(move |kb| (r, kb)))
                .map(|(r, kb)| (d.k_major_chunk(r, kb), r, kb / esize))
                .collect()
        };
        let (mut lo, mut hi) = (usize::MAX, 0);
        let mut out = vec![vec![0f64; kind.k()]; (rows.end - rows.start) as usize];
        for (addr, row, k) in chunks {
            let start = self.shared_range(w, 0, pc, addr, 16, "wgmma operand read")?;
            self.shadow.async_read(start, 16, access).map_err(|c| self.hazard(w, 0, pc, c))?;
            let chunk = &self.shared[start..start + 16];
            for e in 0..per_chunk {
                let (r, k) = if mn_major { (row + e as u64, k) } else { (row, k + e as u64) };
                out[(r - rows.start) as usize][k as usize] = element(kind, chunk, e);
            }
            lo = lo.min(start);
            hi = hi.max(start + 16);
        }
        self.inflight.push(InflightRead { warp: w.index, seq, start: lo, end: hi, pc });
        Ok(out)
    }

    /// Fails if `[start, start + len)` is read by a wgmma still in flight.
    pub(super) fn check_wgmma_reads(
        &self,
        w: &Warp,
        lane: usize,
        pc: u32,
        start: usize,
        len: usize,
    ) -> Result<(), GpuError> {
        let Some(r) = self.inflight.iter().find(|r| start < r.end && r.start < start + len) else {
            return Ok(());
        };
        let info = &self.kernel.info[r.pc as usize];
        let what = format!(
            "shared bytes {:#x}..{:#x} are written while a wgmma.mma_async of warp {} (PTX line {} `{}`) may still be reading them: no wgmma.wait_group of that warp has retired it",
            start + SHARED_BASE as usize,
            start + len + SHARED_BASE as usize,
            r.warp,
            info.line,
            info.text
        );
        Err(self.fault(SimErrorKind::AsyncProxyHazard, w, lane, pc, what))
    }

    /// `wgmma.mma_async` for one warp (its 16 rows of the warpgroup's 64).
    pub(super) fn wgmma(&mut self, w: &mut Warp, pc: u32, op: &Wgmma) -> Result<(), GpuError> {
        let (k, n) = (op.kind.k(), op.n as usize);
        // Registers other instructions wrote since the last wgmma need a wgmma.fence.
        if !w.wgmma.fenced {
            for slot in op.d.iter().copied().chain(a_reg_slots(&op.a)) {
                if w.wgmma.busy.contains(&slot) {
                    continue;
                }
                let now: [u32; 32] = std::array::from_fn(|l| w.regs[slot as usize * 32 + l] as u32);
                if w.wgmma.last_written.get(&slot) != Some(&now) {
                    return Err(self.async_fault(
                        w,
                        pc,
                        "wgmma.mma_async uses registers that other instructions wrote after the last wgmma did (e.g. accumulators initialised or an A fragment loaded) with no wgmma.fence since the last commit_group: the PTX ISA requires wgmma.fence to order those writes before the wgmma",
                    ));
                }
            }
        }
        let seq = w.wgmma.seq;
        w.wgmma.seq += 1;
        let quarter = (w.index % 4) as u64;
        let a: Vec<Vec<f64>> = match &op.a {
            WgmmaA::Desc(s) => {
                let desc = self.uniform(w, pc, *s, "A descriptor")?;
                let rows = 16 * quarter..16 * quarter + 16;
                self.read_operand(w, pc, (desc, op.kind, seq), (rows, op.trans_a))?
            }
            WgmmaA::Regs(regs) => {
                let kind = match op.kind {
                    WgmmaKind::Bf16 => MmaKind::Bf16M16N8K16,
                    _ => MmaKind::F16M16N8K16,
                };
                let mut a = vec![vec![0f64; k]; 16];
                for lane in 0..32 {
                    let words: Vec<u32> =
                        regs.iter().map(|s| self.read(w, *s, lane) as u32).collect();
                    for i in 0..8 {
                        let (r, c) = a_coord(kind, lane, i);
                        a[r][c] = mma::element(kind, &words, i);
                    }
                }
                a
            }
        };
        let b_desc = self.uniform(w, pc, op.b, "B descriptor")?;
        let b = self.read_operand(w, pc, (b_desc, op.kind, seq), (0..n as u64, op.trans_b))?;
        let sign = if op.neg_a != op.neg_b { -1.0 } else { 1.0 };
        let scale_d: [bool; 32] =
            std::array::from_fn(|l| (self.read(w, op.scale_d.0, l) & 1 != 0) != op.scale_d.1);
        let mut d = Vec::with_capacity(op.d.len());
        for (i, &slot) in op.d.iter().enumerate() {
            let old =
                w.wgmma.pending_value(slot).copied().unwrap_or_else(|| {
                    std::array::from_fn(|l| w.regs[slot as usize * 32 + l] as u32)
                });
            let values = std::array::from_fn(|lane| {
                // n8 tile i / 4 holds the mma.sync m16n8 C fragment of the warp's 16 rows.
                let (row, c) = acc_coord(lane, i % 4);
                let col = 8 * (i / 4) + c;
                let c = if scale_d[lane] { f32::from_bits(old[lane]) as f64 } else { 0.0 };
                let sum = (0..k).fold(c, |s, kk| s + sign * a[row][kk] * b[col][kk]);
                float::out32(sum as f32, false, false) as u32
            });
            d.push((slot, values));
        }
        let a_regs = a_reg_slots(&op.a);
        w.wgmma.uncommitted.push(Pending { seq, d, a_regs });
        w.wgmma.refresh_busy();
        Ok(())
    }

    /// `wgmma.fence`.
    pub(super) fn wgmma_fence(&self, w: &mut Warp) {
        w.wgmma.fenced = true;
    }

    /// `wgmma.commit_group`: the uncommitted wgmmas become a group.
    pub(super) fn wgmma_commit(&self, w: &mut Warp) {
        let group = std::mem::take(&mut w.wgmma.uncommitted);
        w.wgmma.groups.push_back(group);
        w.wgmma.fenced = false;
    }

    /// `wgmma.wait_group n`: retires the oldest groups until at most `n` are pending.
    pub(super) fn wgmma_wait(&mut self, w: &mut Warp, n: u32) {
        while w.wgmma.groups.len() > n as usize {
            let group = w.wgmma.groups.pop_front().expect("non-empty");
            for p in group {
                for (slot, values) in p.d {
                    for (lane, v) in values.iter().enumerate() {
                        w.set(slot, lane, *v as u64);
                    }
                    w.wgmma.last_written.insert(slot, values);
                }
                self.inflight.retain(|r| !(r.warp == w.index && r.seq == p.seq));
            }
        }
        w.wgmma.refresh_busy();
    }

    /// The error for an instruction touching register `slot` of an in-flight wgmma.
    pub(super) fn wgmma_register_hazard(&self, w: &Warp, pc: u32, slot: Slot) -> GpuError {
        self.async_fault(
            w,
            pc,
            format!(
                "this instruction accesses register slot {slot}, an accumulator or A operand of a wgmma.mma_async still in flight: a wgmma.wait_group retiring it must come first"
            ),
        )
    }
}
