//! Shadow state of one block's shared memory: who last wrote and read each byte in the
//! current barrier interval, which bytes a `cp.async` is still copying into, and which
//! bytes were ever written.
//!
//! Two accesses to the same byte conflict when they come from different threads, at least
//! one writes, not both are atomics, and no barrier orders them: they happened in the same
//! block-barrier interval (`bar.sync` starts a new one) and, for two lanes of one warp, in the
//! same `bar.warp.sync` interval of that warp. The check is by interval, not by the order in
//! which the simulator happened to run the threads, so it finds races that the simulator's
//! own schedule would hide.
//!
//! Kernels that synchronise through mbarriers (producer/consumer pipelines) also keep
//! [`Clocks`]: a vector clock per thread, joined by the mbarrier phases a thread waits for, so
//! that an access is ordered after another when the accessing thread has acquired (through a
//! completed phase) a release that followed it. Copies by the tensor memory accelerator
//! are accesses of an *agent* of the issuing thread, ordered only through the mbarrier
//! they complete; wgmma's shared-memory reads are attributed to lane 0 of each warp
//! executing it. Such kernels also track which shared bytes were written through the
//! generic proxy (`st.shared`, `cp.async`, atomics) and not yet fenced with
//! `fence.proxy.async` by their writer: async-proxy accesses (TMA, wgmma) to them are
//! reported.

/// One access, as remembered in the shadow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Block-barrier interval (0 = no access recorded).
    pub epoch: u32,
    /// Instruction index.
    pub pc: u32,
    /// The accessing warp's `bar.warp.sync` count at the time.
    pub warp_sync: u32,
    /// Linear thread index in the block; `threads + t` for the TMA agent of thread `t`.
    pub tid: u16,
    /// An atomic read-modify-write.
    pub atomic: bool,
    /// The accessor's own vector-clock entry at the time (0 without [`Clocks`]).
    pub clock: u32,
}

/// Vector clocks of a block's threads and of their TMA agents (entries `threads + t`).
pub struct Clocks {
    threads: usize,
    /// Row `t` (of `2 · threads` entries) is thread `t`'s clock.
    vcs: Vec<u32>,
    /// TMA copies each thread issued (its agent's own clock).
    copies: Vec<u32>,
}

impl Clocks {
    /// Every thread at its own clock 1, knowing nothing of the others.
    pub fn new(threads: usize) -> Self {
        let mut vcs = vec![0; threads * 2 * threads];
        for t in 0..threads {
            vcs[t * 2 * threads + t] = 1;
        }
        Self { threads, vcs, copies: vec![0; threads] }
    }

    fn row(&self, tid: usize) -> &[u32] {
        let t = tid % self.threads;
        &self.vcs[t * 2 * self.threads..(t + 1) * 2 * self.threads]
    }

    fn row_mut(&mut self, tid: usize) -> &mut [u32] {
        let t = tid % self.threads;
        &mut self.vcs[t * 2 * self.threads..(t + 1) * 2 * self.threads]
    }

    /// The current own entry of `tid` (a thread, or an agent: its latest copy).
    pub fn clock(&self, tid: usize) -> u32 {
        self.row(tid)[tid]
    }

    /// A release by thread `t` (an mbarrier arrival, or a TMA copy completing on one):
    /// returns what the release carries and starts the thread's next interval.
    pub fn release(&mut self, t: usize) -> Vec<u32> {
        let snapshot = self.row(t).to_vec();
        self.row_mut(t)[t] += 1;
        snapshot
    }

    /// Thread `t` acquires `vc` (it saw an mbarrier phase complete).
    pub fn acquire(&mut self, t: usize, vc: &[u32]) {
        for (mine, theirs) in self.row_mut(t).iter_mut().zip(vc) {
            *mine = (*mine).max(*theirs);
        }
    }

    /// Thread `t` issues a TMA copy: the clock of the copy (its agent's entry). The thread
    /// itself is not ordered after the copy: only the mbarrier the copy completes on is.
    pub fn next_agent_copy(&mut self, t: usize) -> u32 {
        self.copies[t] += 1;
        self.copies[t]
    }

    /// The release of a TMA copy of thread `t` completing on an mbarrier: what the thread
    /// knew at the issue, plus the copy.
    pub fn release_copy(&mut self, t: usize, copy: u32) -> Vec<u32> {
        let mut snapshot = self.release(t);
        snapshot[self.threads + t] = copy;
        snapshot
    }

    /// Joins a released clock into `into` (an mbarrier phase collecting its arrivals).
    pub fn join(into: &mut Vec<u32>, vc: &[u32]) {
        if into.len() < vc.len() {
            into.resize(vc.len(), 0);
        }
        for (a, b) in into.iter_mut().zip(vc) {
            *a = (*a).max(*b);
        }
    }

    fn ordered(&self, prior: &Access, cur: &Access) -> bool {
        prior.clock != 0 && self.row(cur.tid as usize)[prior.tid as usize] >= prior.clock
    }
}

/// What kind of hazard was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hazard {
    /// A read of bytes another thread wrote in the same interval.
    ReadAfterWrite,
    /// A write of bytes another thread read in the same interval.
    WriteAfterRead,
    /// A write of bytes another thread wrote in the same interval.
    WriteAfterWrite,
    /// An access to bytes a `cp.async` (the prior access) has not finished writing.
    AsyncCopyInFlight,
    /// An async-proxy access (TMA, wgmma) to bytes the prior access wrote through the generic
    /// proxy without a `fence.proxy.async` since.
    UnfencedGenericWrite,
    /// A read of bytes nothing has written.
    Uninitialized,
}

/// A conflict at one byte, with the earlier access involved (if any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conflict {
    /// The hazard.
    pub hazard: Hazard,
    /// Shared address of the first conflicting byte.
    pub addr: u32,
    /// The earlier access (for `Uninitialized`, the current one).
    pub prior: Access,
}

#[derive(Clone, Copy, Default)]
struct Cell {
    write: Access,
    read1: Access,
    read2: Access,
}

/// Which checks are on.
#[derive(Clone, Copy, Debug)]
pub struct Checks {
    /// Data races between barriers.
    pub races: bool,
    /// Accesses to bytes with a `cp.async` in flight.
    pub async_copies: bool,
    /// Reads of never-written bytes.
    pub uninitialized: bool,
}

/// Shadow state of `len` bytes of shared memory starting at address `base`.
pub struct Shadow {
    base: u32,
    checks: Checks,
    epoch: u32,
    cells: Vec<Cell>,
    /// Per byte: `cp.async` in flight into it, as (issuing thread + 1, pc); 0 = none.
    pending: Vec<(u16, u32)>,
    written: Vec<bool>,
    /// Vector clocks, for kernels that synchronise through mbarriers.
    clocks: Option<Clocks>,
    /// Per byte (with `clocks`): the generic-proxy write not yet fenced towards the async
    /// proxy, as (writing thread + 1, pc); 0 = none.
    unfenced: Vec<(u16, u32)>,
    len: usize,
}

impl Shadow {
    /// Fresh shadow: nothing written, first interval.
    pub fn new(base: u32, len: usize, checks: Checks) -> Self {
        let sized = |on: bool| if on { len } else { 0 };
        Self {
            base,
            checks,
            epoch: 1,
            cells: vec![Cell::default(); sized(checks.races)],
            pending: vec![(0, 0); sized(checks.async_copies)],
            written: vec![false; sized(checks.uninitialized)],
            clocks: None,
            unfenced: Vec::new(),
            len,
        }
    }

    /// Keeps vector clocks for `threads` threads and the generic-proxy write state (kernels
    /// with mbarriers, TMA or wgmma).
    pub fn enable_async(&mut self, threads: usize) {
        self.clocks = Some(Clocks::new(threads));
        self.unfenced = vec![(0, 0); self.len];
    }

    /// The vector clocks, when kept.
    pub fn clocks(&mut self) -> Option<&mut Clocks> {
        self.clocks.as_mut()
    }

    /// The own clock entry of `tid` for stamping an access (0 without clocks).
    pub fn clock(&self, tid: usize) -> u32 {
        self.clocks.as_ref().map_or(0, |c| c.clock(tid))
    }

    /// `fence.proxy.async` by thread `tid`: its generic writes so far are visible to the
    /// async proxy.
    pub fn fence_proxy(&mut self, tid: u16) {
        for cell in self.unfenced.iter_mut().filter(|c| c.0 == tid + 1) {
            *cell = (0, 0);
        }
    }

    fn check_fenced(&self, range: std::ops::Range<usize>) -> Result<(), Conflict> {
        for i in range.filter(|&i| i < self.unfenced.len()) {
            let (tid1, pc) = self.unfenced[i];
            if tid1 != 0 {
                let prior = Access { epoch: self.epoch, pc, tid: tid1 - 1, ..Access::default() };
                return Err(self.conflict(Hazard::UnfencedGenericWrite, i, prior));
            }
        }
        Ok(())
    }

    /// An async-proxy read (wgmma) of `[start, start + len)`.
    pub fn async_read(&mut self, start: usize, len: usize, cur: Access) -> Result<(), Conflict> {
        self.check_fenced(start..start + len)?;
        self.read(start, len, cur)
    }

    /// An async-proxy write (a TMA copy landing) of `[start, start + len)`.
    pub fn async_write(&mut self, start: usize, len: usize, cur: Access) -> Result<(), Conflict> {
        self.check_fenced(start..start + len)?;
        self.write_as(start, len, cur, false)
    }

    /// The current interval, for stamping accesses.
    pub fn epoch(&self) -> u32 {
        self.epoch
    }

    /// A block barrier completed.
    pub fn barrier(&mut self) {
        self.epoch += 1;
    }

    fn conflicts(&self, prior: &Access, cur: &Access) -> bool {
        prior.epoch == self.epoch
            && prior.tid != cur.tid
            && !(prior.atomic && cur.atomic)
            && !(prior.tid / 32 == cur.tid / 32 && prior.warp_sync != cur.warp_sync)
            && !self.clocks.as_ref().is_some_and(|c| c.ordered(prior, cur))
    }

    fn conflict(&self, hazard: Hazard, i: usize, prior: Access) -> Conflict {
        Conflict { hazard, addr: self.base + i as u32, prior }
    }

    fn check_pending(&self, range: std::ops::Range<usize>) -> Result<(), Conflict> {
        if !self.checks.async_copies {
            return Ok(());
        }
        for i in range {
            let (tid1, pc) = self.pending[i];
            if tid1 != 0 {
                let prior = Access { epoch: self.epoch, pc, tid: tid1 - 1, ..Access::default() };
                return Err(self.conflict(Hazard::AsyncCopyInFlight, i, prior));
            }
        }
        Ok(())
    }

    /// Records a read of bytes `[start, start + len)` (offsets from the base).
    pub fn read(&mut self, start: usize, len: usize, cur: Access) -> Result<(), Conflict> {
        let range = start..start + len;
        self.check_pending(range.clone())?;
        if let Some(i) = self.first_unwritten(range.clone()) {
            return Err(self.conflict(Hazard::Uninitialized, i, cur));
        }
        if !self.checks.races {
            return Ok(());
        }
        for i in range {
            let cell = self.cells[i];
            if self.conflicts(&cell.write, &cur) {
                return Err(self.conflict(Hazard::ReadAfterWrite, i, cell.write));
            }
            if self.clocks.is_some() {
                // Replace a remembered read the current one is ordered after (or the
                // reader's own), so reads still unordered with later writes stay remembered.
                let stale = |r: &Access| r.tid == cur.tid || !self.conflicts(r, &cur);
                let (stale1, stale2) = (stale(&cell.read1), stale(&cell.read2));
                let cell = &mut self.cells[i];
                if stale1 {
                    cell.read1 = cur;
                } else if stale2 {
                    cell.read2 = cur;
                }
                continue;
            }
            let cell = &mut self.cells[i];
            if cell.read1.epoch != self.epoch || cell.read1.tid == cur.tid {
                if cell.read1.epoch != self.epoch {
                    cell.read2 = Access::default();
                }
                cell.read1 = cur;
            } else if cell.read2.epoch != self.epoch || cell.read2.tid == cur.tid {
                cell.read2 = cur;
            }
        }
        Ok(())
    }

    /// Records a generic-proxy write (or, with `cur.atomic`, an atomic read-modify-write).
    pub fn write(&mut self, start: usize, len: usize, cur: Access) -> Result<(), Conflict> {
        self.write_as(start, len, cur, true)
    }

    fn write_as(
        &mut self,
        start: usize,
        len: usize,
        cur: Access,
        generic: bool,
    ) -> Result<(), Conflict> {
        let range = start..start + len;
        if generic && !self.unfenced.is_empty() {
            self.unfenced[range.clone()].fill((cur.tid + 1, cur.pc));
        }
        self.check_pending(range.clone())?;
        if let Some(i) = self.first_unwritten(range.clone()).filter(|_| cur.atomic) {
            return Err(self.conflict(Hazard::Uninitialized, i, cur));
        }
        self.mark_written(range.clone());
        if !self.checks.races {
            return Ok(());
        }
        for i in range {
            let cell = self.cells[i];
            if self.conflicts(&cell.write, &cur) {
                return Err(self.conflict(Hazard::WriteAfterWrite, i, cell.write));
            }
            for read in [cell.read1, cell.read2] {
                if self.conflicts(&read, &cur) {
                    return Err(self.conflict(Hazard::WriteAfterRead, i, read));
                }
            }
            self.cells[i].write = cur;
        }
        Ok(())
    }

    fn first_unwritten(&self, mut range: std::ops::Range<usize>) -> Option<usize> {
        if !self.checks.uninitialized {
            return None;
        }
        range.find(|&i| !self.written[i])
    }

    fn mark_written(&mut self, range: std::ops::Range<usize>) {
        if self.checks.uninitialized {
            self.written[range].fill(true);
        }
    }

    /// A `cp.async` into `[start, start + len)` was issued by `cur`.
    pub fn begin_async(&mut self, start: usize, len: usize, cur: Access) -> Result<(), Conflict> {
        let range = start..start + len;
        self.check_pending(range.clone())?;
        if self.checks.async_copies {
            self.pending[range].fill((cur.tid + 1, cur.pc));
        }
        Ok(())
    }

    /// The `cp.async` into `[start, start + len)` completed: its bytes are written now.
    pub fn complete_async(
        &mut self,
        start: usize,
        len: usize,
        cur: Access,
    ) -> Result<(), Conflict> {
        if self.checks.async_copies {
            self.pending[start..start + len].fill((0, 0));
        }
        self.write(start, len, cur)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: Checks = Checks { races: true, async_copies: true, uninitialized: true };

    fn at(tid: u16, pc: u32) -> Access {
        Access { epoch: 1, pc, warp_sync: 0, tid, atomic: false, clock: 0 }
    }

    #[test]
    fn finds_each_hazard_between_barriers() {
        let mut s = Shadow::new(0x400, 16, ALL);
        s.write(0, 4, at(0, 1)).unwrap();
        s.write(0, 4, at(0, 2)).unwrap(); // same thread: program order
        let c = s.read(2, 1, at(1, 3)).unwrap_err();
        assert_eq!(
            (c.hazard, c.addr, c.prior.tid, c.prior.pc),
            (Hazard::ReadAfterWrite, 0x402, 0, 2)
        );
        s.barrier();
        let mut cur = at(1, 3);
        cur.epoch = s.epoch();
        s.read(0, 4, cur).unwrap();
        let mut w = at(2, 4);
        w.epoch = s.epoch();
        let c = s.write(3, 1, w).unwrap_err();
        assert_eq!((c.hazard, c.prior.tid), (Hazard::WriteAfterRead, 1));
        let c = s.read(8, 4, cur).unwrap_err();
        assert_eq!((c.hazard, c.addr), (Hazard::Uninitialized, 0x408));
    }

    #[test]
    fn two_remembered_readers_always_expose_a_conflicting_one() {
        let mut s = Shadow::new(0, 4, ALL);
        s.write(0, 4, at(0, 0)).unwrap();
        s.barrier();
        let e = |mut a: Access| {
            a.epoch = 2;
            a
        };
        s.read(0, 4, e(at(5, 1))).unwrap();
        s.read(0, 4, e(at(6, 1))).unwrap();
        let c = s.write(0, 4, e(at(5, 2))).unwrap_err();
        assert_eq!(c.prior.tid, 6);
    }

    #[test]
    fn atomics_do_not_race_with_atomics_and_warp_sync_orders_lanes() {
        let mut s = Shadow::new(0, 4, ALL);
        s.write(0, 4, at(0, 0)).unwrap();
        s.barrier();
        let atomic = |tid| Access { epoch: 2, pc: 1, warp_sync: 0, tid, atomic: true, clock: 0 };
        s.write(0, 4, atomic(1)).unwrap();
        s.write(0, 4, atomic(2)).unwrap();
        assert!(
            s.read(0, 4, Access { epoch: 2, pc: 2, warp_sync: 0, tid: 3, atomic: false, clock: 0 })
                .is_err()
        );
        // lanes 1 and 3 of warp 0 after a bar.warp.sync: ordered
        s.barrier();
        s.write(0, 4, Access { epoch: 3, pc: 3, warp_sync: 0, tid: 1, atomic: false, clock: 0 })
            .unwrap();
        s.read(0, 4, Access { epoch: 3, pc: 4, warp_sync: 1, tid: 3, atomic: false, clock: 0 })
            .unwrap();
    }

    #[test]
    fn mbarrier_clocks_order_a_release_before_an_acquire_only() {
        // Threads 0 (producer) and 1 (consumer) of 2; thread 0's TMA agent is tid 2.
        let mut s = Shadow::new(0, 16, ALL);
        s.enable_async(2);
        let stamp =
            |s: &Shadow, tid: u16| Access { clock: s.clock(tid as usize % 2), ..at(tid, 1) };
        let copy = s.clocks().unwrap().next_agent_copy(0);
        s.async_write(0, 16, Access { clock: copy, ..at(2, 1) }).unwrap();
        // Before acquiring the phase the copy completes, the consumer's read races.
        let c = s.read(0, 4, stamp(&s, 1)).unwrap_err();
        assert_eq!((c.hazard, c.prior.tid), (Hazard::ReadAfterWrite, 2));
        // The issuing thread itself is not ordered after its copy either.
        assert!(s.read(0, 4, stamp(&s, 0)).is_err());
        let phase = s.clocks().unwrap().release_copy(0, copy);
        s.clocks().unwrap().acquire(1, &phase);
        s.read(0, 16, stamp(&s, 1)).unwrap();
        // The producer overwrites only after acquiring the consumer's release.
        let reuse = s.clocks().unwrap().next_agent_copy(0);
        let c = s.async_write(0, 4, Access { clock: reuse, ..at(2, 2) }).unwrap_err();
        assert_eq!((c.hazard, c.prior.tid), (Hazard::WriteAfterRead, 1));
        let released = s.clocks().unwrap().release(1);
        s.clocks().unwrap().acquire(0, &released);
        s.async_write(0, 16, Access { clock: reuse, ..at(2, 2) }).unwrap();
    }

    #[test]
    fn generic_writes_need_a_proxy_fence_before_async_accesses() {
        let mut s = Shadow::new(0, 16, ALL);
        s.enable_async(2);
        s.write(0, 4, at(1, 3)).unwrap();
        let c = s.async_read(0, 16, at(1, 4)).unwrap_err();
        assert_eq!((c.hazard, c.prior.tid, c.prior.pc), (Hazard::UnfencedGenericWrite, 1, 3));
        s.fence_proxy(0);
        assert!(s.async_read(0, 16, at(1, 4)).is_err());
        s.fence_proxy(1);
        s.async_read(0, 4, at(1, 4)).unwrap();
    }

    #[test]
    fn in_flight_copies_are_hazards_until_completed() {
        let mut s = Shadow::new(0, 16, ALL);
        s.begin_async(0, 16, at(7, 9)).unwrap();
        let c = s.read(4, 4, at(7, 10)).unwrap_err();
        assert_eq!((c.hazard, c.prior.tid, c.prior.pc), (Hazard::AsyncCopyInFlight, 7, 9));
        s.complete_async(0, 16, at(7, 11)).unwrap();
        s.read(4, 4, at(7, 12)).unwrap();
    }
}
