//! mbarriers, TMA tile loads (`cp.async.bulk.tensor`), `fence.proxy.async`, `elect.sync` and
//! `setmaxnreg`.
//!
//! # mbarriers
//! A barrier is created by `mbarrier.init` at an 8-byte aligned shared address and lives in a
//! side table (its bytes are not modelled as data). A phase completes when its pending
//! arrivals reach 0 and its transaction count is 0; the pending count then resets to the
//! initial count. `try_wait.parity q` succeeds once the phase of parity `q` has completed,
//! i.e. when the number of completed phases has the other parity (a fresh barrier: parity 1
//! succeeds at once). A lane whose wait fails is descheduled and retried after the other
//! warps ran (the hardware's `try_wait` likewise returns false after a time limit); a block
//! whose only unfinished lanes wait on phases that nothing can complete is a deadlock,
//! reported with the barriers' state. `test_wait.parity` answers at once (false while the
//! phase is open) and never deschedules.
//!
//! Each phase collects the vector clocks released by its arrivals and by the TMA copies
//! completing on it; a successful wait acquires them (see `racecheck`).
//!
//! # TMA
//! A tile load reads the tensor map from global memory (the simulator's encoding, written by
//! `Device::tensor_map`) — which the issuing thread must have acquired with
//! `fence.proxy.tensormap::generic.acquire.sys` since the launch began (the CUDA Programming
//! Guide's rule for a map the host copied to global memory: the tensormap proxy may hold a
//! stale copy) — copies the box at once — elements outside the tensor read as zero —
//! into shared memory in the map's swizzle, and completes `box bytes` of transactions on the
//! mbarrier. The shared bytes are written by the issuing thread's TMA agent: nothing orders
//! them for another thread but the mbarrier phase.

use super::{Block, Lane, Warp, bits};
use crate::decode::op::{Addr, Slot, Src};
use crate::memory::SHARED_BASE;
use crate::racecheck::{Access, Clocks};
use crate::tensor_map;
use gpu_host::{GpuError, SimErrorKind};

/// Largest magnitude of an mbarrier's transaction count (PTX ISA: 2^20 - 1).
const TX_LIMIT: i64 = (1 << 20) - 1;

/// One mbarrier object.
pub struct Mbarrier {
    /// Arrivals per phase (the init count).
    expected: u32,
    /// Arrivals still missing in the current phase.
    pending: u32,
    /// Transaction bytes expected and not yet completed in the current phase.
    tx: i64,
    /// Phases completed since init.
    phases: u32,
    /// Clocks released into the current phase.
    collecting: Vec<u32>,
    /// Clocks the last completed phase released.
    released: Vec<u32>,
}

/// The swizzled shared address of `addr` for a 16-byte-chunk swizzle spanning `span` bytes
/// (0: none): the chunk index within a `span`-byte row is XORed with the row index mod
/// `span / 16`, rows being 128 bytes apart in the pattern (CUTLASS `Swizzle<b, 4, 3>`).
pub fn swizzle(addr: u64, span: u32) -> u64 {
    if span == 0 {
        return addr;
    }
    let mask = (span as u64 / 16) - 1;
    addr ^ (((addr >> 7) & mask) << 4)
}

impl Block<'_> {
    fn thread_id(w: &Warp, lane: usize) -> usize {
        (w.index * 32 + lane as u32) as usize
    }

    /// The shared address of an mbarrier operand, checked: in bounds and 8-byte aligned.
    fn mbarrier_addr(&self, w: &Warp, lane: usize, pc: u32, a: Addr) -> Result<u32, GpuError> {
        let v = self.address(w, a, lane);
        if !v.is_multiple_of(8) {
            let what = format!("mbarrier at shared address {v:#x}, which is not 8-byte aligned");
            return Err(self.fault(SimErrorKind::Misaligned, w, lane, pc, what));
        }
        self.shared_range(w, lane, pc, v, 8, "mbarrier")?;
        Ok(v as u32)
    }

    fn barrier_mut(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        at: u32,
    ) -> Result<&mut Mbarrier, GpuError> {
        if !self.mbarriers.contains_key(&at) {
            let what = format!(
                "no mbarrier.init initialised an mbarrier at shared address {at:#x} in this block"
            );
            return Err(self.fault(SimErrorKind::AsyncProxyHazard, w, lane, pc, what));
        }
        Ok(self.mbarriers.get_mut(&at).expect("checked above"))
    }

    /// `mbarrier.init`.
    pub(super) fn mbar_init(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        (addr, count): (Addr, Src),
    ) -> Result<(), GpuError> {
        let at = self.mbarrier_addr(w, lane, pc, addr)?;
        let count = self.read(w, count, lane) as u32;
        if !(1..=TX_LIMIT as u32).contains(&count) {
            let what = format!("mbarrier.init with count {count}, outside 1..=2^20-1");
            return Err(self.fault(SimErrorKind::AsyncProxyHazard, w, lane, pc, what));
        }
        let barrier = Mbarrier {
            expected: count,
            pending: count,
            tx: 0,
            phases: 0,
            collecting: Vec::new(),
            released: Vec::new(),
        };
        self.mbarriers.insert(at, barrier);
        Ok(())
    }

    /// Adds `tx` to the transaction count and, with `arrive`, one arrival (with the releasing
    /// thread's clock); completes the phase when nothing is left.
    fn mbar_update(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        at: u32,
        (tx, arrive, released): (i64, bool, Option<Vec<u32>>),
    ) -> Result<u32, GpuError> {
        let barrier = self.barrier_mut(w, lane, pc, at)?;
        let phase = barrier.phases;
        barrier.tx += tx;
        if barrier.tx.abs() > TX_LIMIT {
            let tx = barrier.tx;
            let what = format!(
                "the transaction count of the mbarrier at shared address {at:#x} reaches {tx}, outside ±(2^20-1)"
            );
            return Err(self.fault(SimErrorKind::AsyncProxyHazard, w, lane, pc, what));
        }
        if let Some(vc) = &released {
            Clocks::join(&mut barrier.collecting, vc);
        }
        if arrive {
            // `pending` is 0 here only while the phase waits for its transactions (after the
            // last expected arrival, before the TMA bytes land): one arrival too many.
            if barrier.pending == 0 {
                let (expected, left) = (barrier.expected, barrier.tx);
                let what = format!(
                    "an arrival on the mbarrier at shared address {at:#x} beyond its {expected} expected arrivals (the phase still waits for {left} transaction bytes): the arrive count is wrong, or an arrival belongs to the next phase before this one completed"
                );
                return Err(self.fault(SimErrorKind::AsyncProxyHazard, w, lane, pc, what));
            }
            barrier.pending -= 1;
        }
        if barrier.pending == 0 && barrier.tx == 0 {
            barrier.phases += 1;
            barrier.pending = barrier.expected;
            barrier.released = std::mem::take(&mut barrier.collecting);
        }
        Ok(phase)
    }

    /// `mbarrier.arrive[.expect_tx]` / `mbarrier.expect_tx`.
    pub(super) fn mbar_arrive(
        &mut self,
        w: &mut Warp,
        lane: usize,
        pc: u32,
        (addr, tx, arrive, state): (Addr, Option<Src>, bool, Option<Slot>),
    ) -> Result<(), GpuError> {
        let at = self.mbarrier_addr(w, lane, pc, addr)?;
        let tx = tx.map_or(0, |t| self.read(w, t, lane) as u32 as i64);
        let tid = Self::thread_id(w, lane);
        let released = self.shadow.clocks().filter(|_| arrive).map(|c| c.release(tid));
        let phase = self.mbar_update(w, lane, pc, at, (tx, arrive, released))?;
        if let Some(state) = state {
            w.set(state, lane, phase as u64);
        }
        Ok(())
    }

    /// `mbarrier.try_wait.parity`: whether the phase of that parity has completed; on success
    /// the lane acquires what the phase released.
    pub(super) fn mbar_try_wait(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        (addr, parity): (Addr, Src),
    ) -> Result<bool, GpuError> {
        let at = self.mbarrier_addr(w, lane, pc, addr)?;
        let parity = self.read(w, parity, lane) as u32 & 1;
        let barrier = self.barrier_mut(w, lane, pc, at)?;
        if barrier.phases & 1 == parity {
            return Ok(false);
        }
        let released = std::mem::take(&mut barrier.released);
        if let Some(clocks) = self.shadow.clocks() {
            clocks.acquire(Self::thread_id(w, lane), &released);
        }
        self.mbarriers.get_mut(&at).expect("exists").released = released;
        Ok(true)
    }

    /// The error for a block whose unfinished lanes all wait on mbarrier phases (or block
    /// barriers) that can no longer complete.
    pub(super) fn mbarrier_deadlock(&self, warps: &[Warp]) -> GpuError {
        let (w, lane) = warps
            .iter()
            .find_map(|w| bits(w.mask_of(Lane::Spin)).next().map(|l| (w, l)))
            .expect("called with a spinning lane");
        let pc = w.pc[lane];
        let spinning: usize =
            warps.iter().map(|w| w.mask_of(Lane::Spin).count_ones() as usize).sum();
        let mut states: Vec<String> = self
            .mbarriers
            .iter()
            .map(|(at, b)| {
                format!(
                    "{at:#x}: {} phases completed, {} of {} arrivals pending, tx-count {}",
                    b.phases, b.pending, b.expected, b.tx
                )
            })
            .collect();
        states.sort();
        let what = format!(
            "{spinning} threads wait on mbarrier phases that nothing left running can complete (every other thread has exited or waits too); mbarriers: {}",
            states.join("; ")
        );
        self.fault(SimErrorKind::Deadlock, w, lane, pc, what)
    }

    /// `cp.async.bulk.prefetch.L2.global`: no effect, but the address and size must be
    /// multiples of 16 and the bytes inside one global allocation.
    pub(super) fn bulk_prefetch(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        (addr, size): (Addr, Src),
    ) -> Result<(), GpuError> {
        let at = self.address(w, addr, lane);
        let size = self.read(w, size, lane) as u32 as u64;
        if !at.is_multiple_of(16) || !size.is_multiple_of(16) {
            let what = format!(
                "bulk L2 prefetch of {size} bytes at {at:#x}: the address and the size must be \
                 multiples of 16"
            );
            return Err(self.fault(SimErrorKind::Misaligned, w, lane, pc, what));
        }
        self.launch.global.locate(at, size).map(|_| ()).map_err(|m| {
            self.fault(SimErrorKind::OutOfBounds, w, lane, pc, format!("bulk L2 prefetch of {m}"))
        })
    }

    /// `cp.async.bulk.tensor.{2d,3d}` global → shared with `complete_tx` on an mbarrier: the
    /// box of one matrix (`z`, rank 3) zero-filled outside the tensor.
    pub(super) fn tma_load(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        (dst, map, rank, coords, bar): (Addr, Src, u8, [Src; 3], Addr),
    ) -> Result<(), GpuError> {
        let map_addr = self.read(w, map, lane);
        let mut raw = [0u8; 128];
        let generic = crate::memory::resolve_generic(map_addr);
        let global = match generic {
            crate::memory::Generic::Global(a) => a,
            _ => {
                let what = format!(
                    "the tensor map address {map_addr:#x} is not in global memory (the simulator's tensor maps live there)"
                );
                return Err(self.fault(SimErrorKind::Unsupported, w, lane, pc, what));
            }
        };
        if !global.is_multiple_of(64) {
            let what = format!("tensor map at {global:#x}, which is not 64-byte aligned");
            return Err(self.fault(SimErrorKind::Misaligned, w, lane, pc, what));
        }
        let tid = Self::thread_id(w, lane);
        match self.tensormaps.get(&(tid, global)) {
            Some(true) => {}
            acquired => {
                let what = format!(
                    "TMA through the tensor map at {global:#x}, which this thread has not \
                     acquired{}: a map the host copied to global memory needs \
                     `fence.proxy.tensormap::generic.acquire.sys [map], 128` before its first \
                     use (the tensormap proxy may hold a stale copy)",
                    if acquired.is_some() { " at system scope" } else { "" }
                );
                return Err(self.fault(SimErrorKind::AsyncProxyHazard, w, lane, pc, what));
            }
        }
        self.launch.global.load(global, &mut raw).map_err(|m| {
            self.fault(SimErrorKind::OutOfBounds, w, lane, pc, format!("tensor map read of {m}"))
        })?;
        let tm = tensor_map::decode(&raw).map_err(|m| {
            self.fault(SimErrorKind::Unsupported, w, lane, pc, format!("tensor map: {m}"))
        })?;
        if u32::from(rank) != tm.rank {
            let what = format!(
                "a {rank}-D tensor copy through a rank-{} tensor map (the instruction's \
                 dimensionality must be the map's rank)",
                tm.rank
            );
            return Err(self.fault(SimErrorKind::Unsupported, w, lane, pc, what));
        }
        let [x0, y0, z] = coords.map(|c| self.read(w, c, lane) as u32 as i32 as i64);
        // The box's first element, along the contiguous dimension, must be 16-byte aligned in
        // the tensor's coordinates (negative ones included): an H200 raised
        // CUDA_ERROR_ILLEGAL_INSTRUCTION for a bf16 box at x = 60 (2026-11-26).
        if (x0 * tm.elem_bytes as i64) % 16 != 0 {
            let what = format!(
                "TMA box at inner coordinate {x0}: {x0} × {} bytes is not a multiple of 16 \
                 (the hardware raises an illegal instruction)",
                tm.elem_bytes
            );
            return Err(self.fault(SimErrorKind::Misaligned, w, lane, pc, what));
        }
        let at = self.address(w, dst, lane);
        // The swizzle pattern repeats every 8 rows of 16-byte chunks × the span's chunks: a
        // swizzled box starts on that boundary (CUTLASS asserts 1024 bytes for 128-byte
        // swizzle), else 128 bytes.
        let align = if tm.swizzle_bytes == 0 { 128 } else { 8 * tm.swizzle_bytes as u64 };
        if !at.is_multiple_of(align) {
            let what = format!(
                "TMA destination {at:#x} is not {align}-byte aligned (the map's {}-byte swizzle \
                 needs {align})",
                tm.swizzle_bytes
            );
            return Err(self.fault(SimErrorKind::Misaligned, w, lane, pc, what));
        }
        let esize = tm.elem_bytes as u64;
        let row_bytes = tm.box_dims[0] as u64 * esize;
        if tm.swizzle_bytes != 0 && row_bytes != tm.swizzle_bytes as u64 {
            // The ISA allows an inner box narrower than the swizzle span; where the hardware
            // puts its rows then is not written down, so the simulator does not guess.
            let what = format!(
                "a swizzled box whose rows ({row_bytes} bytes) are not exactly the map's {}-byte \
                 swizzle span: the simulator models only rows as wide as the span",
                tm.swizzle_bytes
            );
            return Err(self.fault(SimErrorKind::Unsupported, w, lane, pc, what));
        }
        let bytes = row_bytes * tm.box_dims[1] as u64;
        self.shared_range(w, lane, pc, at, bytes as usize, "TMA destination")?;
        let bar_at = self.mbarrier_addr(w, lane, pc, bar)?;
        self.barrier_mut(w, lane, pc, bar_at)?;

        let agent = self.shadow.clocks().map_or(0, |c| c.next_agent_copy(tid));
        let access = Access {
            epoch: self.shadow.epoch(),
            pc,
            warp_sync: 0,
            tid: (self.threads as usize + tid) as u16,
            atomic: false,
            clock: agent,
        };
        let mut row = vec![0u8; row_bytes as usize];
        for r in 0..tm.box_dims[1] as i64 {
            row.fill(0);
            let y = y0 + r;
            if (0..tm.dims[1] as i64).contains(&y) && (0..tm.dims[2] as i64).contains(&z) {
                let first = x0.max(0);
                let last = (x0 + tm.box_dims[0] as i64).min(tm.dims[0] as i64);
                if first < last {
                    let src = tm.global_address
                        + z as u64 * tm.strides_bytes[1]
                        + y as u64 * tm.strides_bytes[0]
                        + first as u64 * esize;
                    let off = ((first - x0) as u64 * esize) as usize;
                    let len = ((last - first) as u64 * esize) as usize;
                    self.launch.global.load(src, &mut row[off..off + len]).map_err(|m| {
                        self.fault(
                            SimErrorKind::OutOfBounds,
                            w,
                            lane,
                            pc,
                            format!("TMA read of {m} (the tensor map describes memory outside any allocation)"),
                        )
                    })?;
                }
            }
            for (c, chunk) in row.chunks(16).enumerate() {
                let logical = at + r as u64 * row_bytes + 16 * c as u64;
                let phys = swizzle(logical, tm.swizzle_bytes);
                let start = (phys - SHARED_BASE as u64) as usize;
                self.check_wgmma_reads(w, lane, pc, start, chunk.len())?;
                self.shadow
                    .async_write(start, chunk.len(), access)
                    .map_err(|c| self.hazard(w, lane, pc, c))?;
                self.shared[start..start + chunk.len()].copy_from_slice(chunk);
            }
        }
        let released = self.shadow.clocks().map(|c| c.release_copy(tid, agent));
        self.mbar_update(w, lane, pc, bar_at, (-(bytes as i64), false, released))?;
        Ok(())
    }

    /// `fence.proxy.tensormap::generic.acquire` by one thread: the map at that global address
    /// is acquired for this thread's TMA operations.
    pub(super) fn fence_proxy_tensormap(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        (map, sys): (Addr, bool),
    ) -> Result<(), GpuError> {
        let at = self.address(w, map, lane);
        let crate::memory::Generic::Global(global) = crate::memory::resolve_generic(at) else {
            let what = format!(
                "fence.proxy.tensormap on {at:#x}, which is not in global memory (the simulator's tensor maps live there)"
            );
            return Err(self.fault(SimErrorKind::Unsupported, w, lane, pc, what));
        };
        let acquired = self.tensormaps.entry((Self::thread_id(w, lane), global)).or_default();
        *acquired |= sys;
        Ok(())
    }

    /// `fence.proxy.async` by one thread.
    pub(super) fn fence_proxy_async(&mut self, w: &Warp, lane: usize) {
        self.shadow.fence_proxy(Self::thread_id(w, lane) as u16);
    }

    /// `elect.sync d|p, mask` over the member lanes `members`.
    pub(super) fn elect(&self, w: &mut Warp, members: u32, d: Option<Slot>, p: Slot) {
        let leader = members.trailing_zeros() as u64;
        for lane in bits(members) {
            if let Some(d) = d {
                w.set(d, lane, leader);
            }
            w.set(p, lane, (lane as u64 == leader) as u64);
        }
    }
}
