//! Memory-access profile: how well each load and store instruction uses the memory system,
//! counted per warp-level request the way Nsight Compute counts it, so that an uncoalesced
//! global access or a shared-memory bank conflict shows up without a GPU.
//!
//! - Global memory (`ld`/`st`/`atom` and `cp.async` sources, each lane counted at its
//!   cp-size, zero-filling ones included): the 32-byte sectors the active lanes of one request
//!   touch, against the bytes they ask for. Contiguous 4-byte accesses of
//!   a full warp take 4 sectors (100%); a stride of 128 bytes takes 32 (12.5%).
//! - Shared memory (`ld`/`st`/`atom`, `cp.async` destinations, `ldmatrix`): the wavefronts
//!   (passes over the 32 four-byte banks) a request needs, against the fewest its width allows.
//!   A request is split into phases of 128 bytes: all 32 lanes for accesses of up to 4 bytes,
//!   half-warps for 8 bytes, quarter-warps for 16, one phase per 8×16-byte matrix for
//!   `ldmatrix`. A phase takes as many wavefronts as the most distinct 4-byte words any bank
//!   holds among its addresses (lanes reading the same word share it).
//!
//! Switched on by [`crate::Simulator::start_memory_profile`]; read with
//! [`crate::Simulator::take_memory_profile`]. TMA and `wgmma` (the asynchronous proxy) are not
//! counted: their shared-memory layout is the swizzle's, fixed by the hardware.

use std::collections::{BTreeMap, HashMap};

/// Bytes per global-memory sector.
pub const SECTOR_BYTES: u64 = 32;
/// Bytes a shared-memory phase (one wavefront without conflicts) serves: 32 banks × 4 bytes.
const PHASE_BYTES: u64 = 128;

/// What an instruction accesses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum AccessKind {
    /// `ld.global` (or a generic load of global memory).
    GlobalLoad,
    /// `st.global`.
    GlobalStore,
    /// `atom`/`red` on global memory.
    GlobalAtomic,
    /// `ld.shared`.
    SharedLoad,
    /// `st.shared`.
    SharedStore,
    /// `atom`/`red` on shared memory.
    SharedAtomic,
    /// `cp.async`: a global read (sectors) and a shared write (wavefronts).
    CpAsync,
    /// `ldmatrix`.
    Ldmatrix,
}

impl AccessKind {
    /// A short name for tables (`ld.global`, …).
    pub fn name(self) -> &'static str {
        match self {
            AccessKind::GlobalLoad => "ld.global",
            AccessKind::GlobalStore => "st.global",
            AccessKind::GlobalAtomic => "atom.global",
            AccessKind::SharedLoad => "ld.shared",
            AccessKind::SharedStore => "st.shared",
            AccessKind::SharedAtomic => "atom.shared",
            AccessKind::CpAsync => "cp.async",
            AccessKind::Ldmatrix => "ldmatrix",
        }
    }
}

/// Counts of one instruction (or summed over several).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AccessStats {
    /// Warp-level requests (executions with at least one active lane).
    pub requests: u64,
    /// Global memory: bytes the active lanes asked for.
    pub global_bytes: u64,
    /// Global memory: 32-byte sectors touched.
    pub sectors: u64,
    /// Shared memory: wavefronts needed.
    pub wavefronts: u64,
    /// Shared memory: the fewest wavefronts the requests' widths allow.
    pub ideal_wavefronts: u64,
}

impl AccessStats {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &AccessStats) {
        self.requests += other.requests;
        self.global_bytes += other.global_bytes;
        self.sectors += other.sectors;
        self.wavefronts += other.wavefronts;
        self.ideal_wavefronts += other.ideal_wavefronts;
    }

    /// Global bytes asked for per byte of the sectors fetched, at most 1 (lanes sharing an
    /// address count once per lane, as Nsight Compute counts requested bytes); `None` without
    /// global accesses.
    pub fn global_efficiency(&self) -> Option<f64> {
        (self.sectors > 0)
            .then(|| (self.global_bytes as f64 / (self.sectors * SECTOR_BYTES) as f64).min(1.0))
    }

    /// Wavefronts per ideal wavefront (1 = no bank conflicts); `None` without shared accesses.
    pub fn bank_conflict_factor(&self) -> Option<f64> {
        (self.ideal_wavefronts > 0).then(|| self.wavefronts as f64 / self.ideal_wavefronts as f64)
    }
}

/// One lane's access: address (global, or shared from the shared window's base) and bytes.
#[derive(Clone, Copy, Debug)]
pub struct LaneAccess {
    /// Lane index (0..32).
    pub lane: u8,
    /// Address.
    pub addr: u64,
    /// Bytes.
    pub bytes: u32,
}

/// Distinct 32-byte sectors the accesses touch.
pub fn sectors(accesses: &[LaneAccess]) -> u64 {
    let mut touched: Vec<u64> = accesses
        .iter()
        .flat_map(|a| {
            let first = a.addr / SECTOR_BYTES;
            let last = (a.addr + a.bytes.max(1) as u64 - 1) / SECTOR_BYTES;
            first..=last
        })
        .collect();
    touched.sort_unstable();
    touched.dedup();
    touched.len() as u64
}

/// Wavefronts and ideal wavefronts of a shared-memory request whose lanes access `bytes`
/// each, in phases of `PHASE_BYTES / bytes` consecutive lanes (all 32 for up to 4 bytes).
pub fn shared_wavefronts(accesses: &[LaneAccess]) -> (u64, u64) {
    let width = accesses.iter().map(|a| a.bytes).max().unwrap_or(4).max(4) as u64;
    let lanes_per_phase = (PHASE_BYTES / width).clamp(1, 32) as u8;
    let mut phases: BTreeMap<u8, Vec<LaneAccess>> = BTreeMap::new();
    for a in accesses {
        phases.entry(a.lane / lanes_per_phase).or_default().push(*a);
    }
    phases.values().fold((0, 0), |(w, ideal), phase| (w + phase_wavefronts(phase), ideal + 1))
}

/// Wavefronts and ideal wavefronts of an `ldmatrix` with `matrices` 8×16-byte matrices: lanes
/// `8j..8j+8` address the rows of matrix `j`, each matrix one phase.
pub fn ldmatrix_wavefronts(accesses: &[LaneAccess], matrices: u8) -> (u64, u64) {
    (0..matrices).fold((0, 0), |(w, ideal), j| {
        let rows: Vec<LaneAccess> = accesses.iter().filter(|a| a.lane / 8 == j).copied().collect();
        (w + phase_wavefronts(&rows), ideal + 1)
    })
}

/// The most distinct 4-byte words any bank holds among `phase`'s bytes (at least 1).
fn phase_wavefronts(phase: &[LaneAccess]) -> u64 {
    let mut words: Vec<u64> = phase
        .iter()
        .flat_map(|a| (a.addr / 4)..=((a.addr + a.bytes.max(1) as u64 - 1) / 4))
        .collect();
    words.sort_unstable();
    words.dedup();
    let mut per_bank = [0u64; 32];
    for word in words {
        per_bank[(word % 32) as usize] += 1;
    }
    per_bank.into_iter().max().unwrap_or(0).max(1)
}

/// The counts of one launch or kernel, by instruction (program counter).
pub type InstrCounts = HashMap<u32, (AccessKind, AccessStats)>;

/// Adds one request's counts to `counts`.
pub fn record(counts: &mut InstrCounts, pc: u32, kind: AccessKind, stats: AccessStats) {
    counts.entry(pc).or_insert((kind, AccessStats::default())).1.add(&stats);
}

/// Adds every instruction's counts of `from` (a block's, a launch's) to `into`.
pub fn merge(into: &mut InstrCounts, from: InstrCounts) {
    for (pc, (kind, stats)) in from {
        record(into, pc, kind, stats);
    }
}

/// One instruction of a kernel's profile.
#[derive(Clone, Debug, PartialEq)]
pub struct InstrProfile {
    /// PTX line.
    pub line: u32,
    /// The instruction as written.
    pub text: String,
    /// What it accesses.
    pub kind: AccessKind,
    /// Its counts over every profiled launch.
    pub stats: AccessStats,
}

/// A kernel's memory profile over every launch since profiling began.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelProfile {
    /// Entry name.
    pub kernel: String,
    /// Launches counted.
    pub launches: u64,
    /// Its memory instructions, in program order.
    pub instrs: Vec<InstrProfile>,
}

impl KernelProfile {
    /// The counts of all its instructions, summed: global accesses count only in the sector
    /// fields and shared ones only in the wavefront fields, so the sum's efficiency and
    /// conflict factor are the kernel's (its `requests` count both kinds).
    pub fn total(&self) -> AccessStats {
        let mut total = AccessStats::default();
        for i in &self.instrs {
            total.add(&i.stats);
        }
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn warp(addr: impl Fn(u64) -> u64, bytes: u32) -> Vec<LaneAccess> {
        (0..32).map(|l| LaneAccess { lane: l as u8, addr: addr(l), bytes }).collect()
    }

    #[test]
    fn sectors_follow_the_access_pattern() {
        assert_eq!(sectors(&warp(|l| 4096 + 4 * l, 4)), 4);
        assert_eq!(sectors(&warp(|l| 4096 + 16 * l, 16)), 16);
        assert_eq!(sectors(&warp(|l| 4096 + 128 * l, 4)), 32);
        assert_eq!(sectors(&warp(|_| 4096, 4)), 1);
        // Misaligned by 4 bytes: one more sector.
        assert_eq!(sectors(&warp(|l| 4100 + 4 * l, 4)), 5);
    }

    #[test]
    fn bank_conflicts_follow_the_banks_and_the_phases() {
        // 4-byte accesses: consecutive words, a broadcast, a 2-way and a 32-way conflict.
        assert_eq!(shared_wavefronts(&warp(|l| 4 * l, 4)), (1, 1));
        assert_eq!(shared_wavefronts(&warp(|_| 64, 4)), (1, 1));
        assert_eq!(shared_wavefronts(&warp(|l| 8 * l, 4)), (2, 1));
        assert_eq!(shared_wavefronts(&warp(|l| 128 * l, 4)), (32, 1));
        // 16-byte accesses: four quarter-warp phases; a row stride of 128 bytes puts the 8
        // lanes of a phase on the same 4 banks.
        assert_eq!(shared_wavefronts(&warp(|l| 16 * l, 16)), (4, 4));
        assert_eq!(shared_wavefronts(&warp(|l| 128 * l, 16)), (32, 4));
        // 8-byte accesses: half-warps.
        assert_eq!(shared_wavefronts(&warp(|l| 8 * l, 8)), (2, 2));
        // Only lanes 0..8 active: one phase.
        let few: Vec<LaneAccess> = warp(|l| 16 * l, 16).into_iter().take(8).collect();
        assert_eq!(shared_wavefronts(&few), (1, 1));
    }

    #[test]
    fn ldmatrix_phases_are_its_matrices() {
        // x4 with 16-byte rows 16 bytes apart: conflict-free; 128 bytes apart (an unswizzled
        // tile of 64 bf16 columns): every row of a matrix on the same four banks.
        assert_eq!(ldmatrix_wavefronts(&warp(|l| 16 * l, 16), 4), (4, 4));
        assert_eq!(ldmatrix_wavefronts(&warp(|l| 128 * l, 16), 4), (32, 4));
        // The 128-byte swizzle: row r's chunk moves to chunk c ^ (r % 8).
        let swizzled = warp(|l| 128 * l + 16 * (l % 8), 16);
        assert_eq!(ldmatrix_wavefronts(&swizzled, 4), (4, 4));
    }

    #[test]
    fn efficiency_and_conflict_factor() {
        let s = AccessStats {
            requests: 2,
            global_bytes: 256,
            sectors: 16,
            wavefronts: 6,
            ideal_wavefronts: 2,
        };
        assert_eq!(s.global_efficiency(), Some(0.5));
        assert_eq!(s.bank_conflict_factor(), Some(3.0));
        assert_eq!(AccessStats::default().global_efficiency(), None);
    }
}
