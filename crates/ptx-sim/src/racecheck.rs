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

/// One access, as remembered in the shadow.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Access {
    /// Block-barrier interval (0 = no access recorded).
    pub epoch: u32,
    /// Instruction index.
    pub pc: u32,
    /// The accessing warp's `bar.warp.sync` count at the time.
    pub warp_sync: u32,
    /// Linear thread index in the block.
    pub tid: u16,
    /// An atomic read-modify-write.
    pub atomic: bool,
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
        }
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
                let prior =
                    Access { epoch: self.epoch, pc, warp_sync: 0, tid: tid1 - 1, atomic: false };
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

    /// Records a write (or, with `cur.atomic`, an atomic read-modify-write).
    pub fn write(&mut self, start: usize, len: usize, cur: Access) -> Result<(), Conflict> {
        let range = start..start + len;
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
        Access { epoch: 1, pc, warp_sync: 0, tid, atomic: false }
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
        let atomic = |tid| Access { epoch: 2, pc: 1, warp_sync: 0, tid, atomic: true };
        s.write(0, 4, atomic(1)).unwrap();
        s.write(0, 4, atomic(2)).unwrap();
        assert!(
            s.read(0, 4, Access { epoch: 2, pc: 2, warp_sync: 0, tid: 3, atomic: false }).is_err()
        );
        // lanes 1 and 3 of warp 0 after a bar.warp.sync: ordered
        s.barrier();
        s.write(0, 4, Access { epoch: 3, pc: 3, warp_sync: 0, tid: 1, atomic: false }).unwrap();
        s.read(0, 4, Access { epoch: 3, pc: 4, warp_sync: 1, tid: 3, atomic: false }).unwrap();
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
