//! Loads, stores, atomics and `cp.async`, with bounds, alignment and shared-memory checks.
//!
//! `cp.async` is modelled as a deferred copy: the source is read when the instruction is
//! issued, the destination is written when a `cp.async.wait_group`/`wait_all` of the issuing
//! thread completes its group (or when the thread exits). Until then the shared bytes keep
//! their old contents, so a read before the wait sees stale data — and, with the
//! `async_copy_hazards` check on, is reported as a hazard.

use super::{Block, Warp};
use crate::decode::op::{Addr, AtomOp, AtomTy, Op, Space};
use crate::exec::float;
use crate::exec::int::sext;
use crate::memory::{Generic, SHARED_BASE, resolve_generic};
use crate::profile::{self, AccessKind, AccessStats, LaneAccess};
use crate::racecheck::{Access, Conflict, Hazard};
use gpu_host::{GpuError, SimErrorKind};
use std::collections::VecDeque;

/// A `cp.async` in flight.
struct PendingCopy {
    /// Offset of the destination in the block's shared memory.
    start: usize,
    len: usize,
    data: [u8; 16],
    /// The issuing instruction.
    pc: u32,
}

/// One lane's `cp.async` state: copies not yet committed, and committed groups, oldest first.
#[derive(Default)]
pub struct AsyncCopies {
    uncommitted: Vec<PendingCopy>,
    groups: VecDeque<Vec<PendingCopy>>,
}

/// A resolved address.
#[derive(Clone, Copy)]
enum Target {
    Global(u64),
    Shared(u64),
    Local(u64),
    Param(u64),
}

fn target(space: Space, v: u64) -> Target {
    match space {
        Space::Global => Target::Global(v),
        Space::Shared => Target::Shared(v),
        Space::Local => Target::Local(v),
        Space::Param => Target::Param(v),
        Space::Generic => match resolve_generic(v) {
            Generic::Global(a) => Target::Global(a),
            Generic::Shared(a) => Target::Shared(a),
            Generic::Local(a) => Target::Local(a),
            Generic::Param(a) => Target::Param(a),
        },
    }
}

fn le_value(bytes: &[u8]) -> u64 {
    bytes.iter().rev().fold(0, |v, b| v << 8 | *b as u64)
}

impl Block<'_> {
    /// Counts one warp-level request of the memory instruction `op` by the lanes `active`
    /// (before it executes: a load may overwrite its address register).
    pub(super) fn profile_access(&mut self, w: &Warp, pc: u32, active: u32, op: &Op) {
        let (space, addr, bytes, kinds) = match *op {
            Op::Ld { space, bits, n, addr, .. } => (
                space,
                addr,
                u32::from(bits) / 8 * u32::from(n),
                (AccessKind::GlobalLoad, AccessKind::SharedLoad),
            ),
            Op::St { space, bits, n, addr, .. } => (
                space,
                addr,
                u32::from(bits) / 8 * u32::from(n),
                (AccessKind::GlobalStore, AccessKind::SharedStore),
            ),
            Op::Atom { space, ty, addr, .. } => {
                let bytes = match ty {
                    AtomTy::Int(i) => u32::from(i.bits) / 8,
                    AtomTy::F32 => 4,
                    AtomTy::F64 => 8,
                };
                (space, addr, bytes, (AccessKind::GlobalAtomic, AccessKind::SharedAtomic))
            }
            Op::CpAsync { cp_size, dst, src, .. } => {
                let lanes = |a: Addr| -> Vec<LaneAccess> {
                    super::bits(active)
                        .map(|lane| LaneAccess {
                            lane: lane as u8,
                            addr: self.address(w, a, lane),
                            bytes: u32::from(cp_size),
                        })
                        .collect()
                };
                let (reads, writes) = (lanes(src), lanes(dst));
                let (wavefronts, ideal_wavefronts) = profile::shared_wavefronts(&writes);
                let stats = AccessStats {
                    requests: 1,
                    global_bytes: u64::from(cp_size) * reads.len() as u64,
                    sectors: profile::sectors(&reads),
                    wavefronts,
                    ideal_wavefronts,
                };
                self.count(pc, AccessKind::CpAsync, stats);
                return;
            }
            _ => return,
        };
        let (mut global, mut shared) = (Vec::new(), Vec::new());
        for lane in super::bits(active) {
            let at = |addr| LaneAccess { lane: lane as u8, addr, bytes };
            match target(space, self.address(w, addr, lane)) {
                Target::Global(a) => global.push(at(a)),
                Target::Shared(a) => shared.push(at(a)),
                Target::Local(_) | Target::Param(_) => {}
            }
        }
        if !global.is_empty() {
            let stats = AccessStats {
                requests: 1,
                global_bytes: u64::from(bytes) * global.len() as u64,
                sectors: profile::sectors(&global),
                ..AccessStats::default()
            };
            self.count(pc, kinds.0, stats);
        }
        if !shared.is_empty() {
            let (wavefronts, ideal_wavefronts) = profile::shared_wavefronts(&shared);
            let stats =
                AccessStats { requests: 1, wavefronts, ideal_wavefronts, ..AccessStats::default() };
            self.count(pc, kinds.1, stats);
        }
    }

    /// Counts one `ldmatrix` of `n` matrices (its row addresses are the first `8n` lanes').
    pub(super) fn profile_ldmatrix(&mut self, w: &Warp, pc: u32, n: u8, addr: Addr) {
        let rows: Vec<LaneAccess> = (0..8 * n as usize)
            .map(|lane| LaneAccess {
                lane: lane as u8,
                addr: self.address(w, addr, lane),
                bytes: 16,
            })
            .collect();
        let (wavefronts, ideal_wavefronts) = profile::ldmatrix_wavefronts(&rows, n);
        let stats =
            AccessStats { requests: 1, wavefronts, ideal_wavefronts, ..AccessStats::default() };
        self.count(pc, AccessKind::Ldmatrix, stats);
    }

    fn count(&mut self, pc: u32, kind: AccessKind, stats: AccessStats) {
        if let Some(counts) = self.profile.as_mut() {
            profile::record(counts, pc, kind, stats);
        }
    }

    pub(super) fn address(&self, w: &Warp, a: Addr, lane: usize) -> u64 {
        a.base.map_or(0, |s| w.regs[s as usize * 32 + lane]).wrapping_add(a.offset)
    }

    fn access(&self, w: &Warp, lane: usize, pc: u32, atomic: bool) -> Access {
        let tid = w.index * 32 + lane as u32;
        Access {
            epoch: self.shadow.epoch(),
            pc,
            warp_sync: w.warp_sync,
            tid: tid as u16,
            atomic,
            clock: self.shadow.clock(tid as usize),
        }
    }

    /// Executes a memory instruction for one lane.
    pub(super) fn memory_op(
        &mut self,
        w: &mut Warp,
        pc: u32,
        lane: usize,
        op: &Op,
    ) -> Result<(), GpuError> {
        match *op {
            Op::Ld { space, bits, signed, n, d, addr } => {
                let v = self.address(w, addr, lane);
                let (size, n) = (bits as usize / 8, n as usize);
                let mut buf = [0u8; 32];
                self.load(w, lane, pc, space, v, &mut buf[..size * n])?;
                for (i, dst) in d.iter().take(n).enumerate() {
                    if let Some(dst) = dst {
                        let raw = le_value(&buf[i * size..(i + 1) * size]);
                        w.set(*dst, lane, if signed { sext(raw, bits) as u64 } else { raw });
                    }
                }
            }
            Op::St { space, bits, n, v: values, addr } => {
                let v = self.address(w, addr, lane);
                let (size, n) = (bits as usize / 8, n as usize);
                let mut buf = [0u8; 32];
                for (i, src) in values.iter().take(n).enumerate() {
                    let value = self.read(w, *src, lane);
                    buf[i * size..(i + 1) * size].copy_from_slice(&value.to_le_bytes()[..size]);
                }
                self.store(w, lane, pc, space, v, &buf[..size * n])?;
            }
            Op::Atom { space, op, ty, d, addr, b, c } => {
                let v = self.address(w, addr, lane);
                let (b, c) = (self.read(w, b, lane), self.read(w, c, lane));
                let size = match ty {
                    AtomTy::Int(i) => i.bits as usize / 8,
                    AtomTy::F32 => 4,
                    AtomTy::F64 => 8,
                };
                let apply = |old| atom_apply(op, ty, old, b, c);
                let old = self.atomic(w, lane, pc, (space, v, size), apply)?;
                if let Some(d) = d {
                    w.set(d, lane, old);
                }
            }
            Op::CpAsync { cp_size, dst, src, src_size, ignore_src } => {
                let cp_size = cp_size as usize;
                let n = match (src_size, ignore_src) {
                    (Some(s), _) => (self.read(w, s, lane) & 0xffff_ffff) as usize,
                    (None, Some((p, negate))) if (self.read(w, p, lane) & 1 != 0) != negate => 0,
                    _ => cp_size,
                };
                if n > cp_size {
                    let what = format!("cp.async src-size {n} exceeds cp-size {cp_size}");
                    return Err(self.fault(SimErrorKind::OutOfBounds, w, lane, pc, what));
                }
                let (d, s) = (self.address(w, dst, lane), self.address(w, src, lane));
                self.check_aligned(w, lane, pc, d, cp_size, || "cp.async destination".into())?;
                self.check_aligned(w, lane, pc, s, cp_size, || "cp.async source".into())?;
                // The hardware reads `n` bytes, but compute-sanitizer's memcheck counts the
                // whole cp-size window of a copy that reads anything (H200, 2026-11-26): the
                // window must lie inside the allocation, and the bytes past `n` are zeros.
                let mut data = [0u8; 16];
                if n > 0 {
                    self.launch.global.load(s, &mut data[..cp_size]).map_err(|m| {
                        self.fault(
                            SimErrorKind::OutOfBounds,
                            w,
                            lane,
                            pc,
                            format!(
                                "cp.async source window (cp-size {cp_size}, src-size {n}; \
                                 memcheck counts the whole window) read of {m}"
                            ),
                        )
                    })?;
                    data[n..].fill(0);
                }
                let start = self.shared_range(w, lane, pc, d, cp_size, "cp.async destination")?;
                let access = self.access(w, lane, pc, false);
                self.shadow
                    .begin_async(start, cp_size, access)
                    .map_err(|c| self.hazard(w, lane, pc, c))?;
                w.copies[lane].uncommitted.push(PendingCopy { start, len: cp_size, data, pc });
            }
            Op::CpAsyncCommit => commit(&mut w.copies[lane]),
            Op::CpAsyncWait { n, all } => {
                if all {
                    commit(&mut w.copies[lane]);
                }
                while w.copies[lane].groups.len() > n as usize {
                    let group = w.copies[lane].groups.pop_front().unwrap_or_default();
                    for copy in group {
                        self.complete_copy(w, lane, copy)?;
                    }
                }
            }
            ref other => unreachable!("{other:?} is not a memory instruction"),
        }
        Ok(())
    }

    /// Completes every copy of `lane` (committed or not): the thread exits.
    pub(super) fn finish_copies(&mut self, w: &mut Warp, lane: usize) -> Result<(), GpuError> {
        let copies = std::mem::take(&mut w.copies[lane]);
        for copy in copies.groups.into_iter().flatten().chain(copies.uncommitted) {
            self.complete_copy(w, lane, copy)?;
        }
        Ok(())
    }

    fn complete_copy(&mut self, w: &Warp, lane: usize, copy: PendingCopy) -> Result<(), GpuError> {
        let access = self.access(w, lane, copy.pc, false);
        self.check_wgmma_reads(w, lane, copy.pc, copy.start, copy.len)?;
        self.shadow
            .complete_async(copy.start, copy.len, access)
            .map_err(|c| self.hazard(w, lane, copy.pc, c))?;
        self.shared[copy.start..copy.start + copy.len].copy_from_slice(&copy.data[..copy.len]);
        Ok(())
    }

    /// Fails unless `addr` is a multiple of `size`; `what` names the access (built only on
    /// failure: this runs for every access).
    fn check_aligned(
        &self,
        w: &Warp,
        lane: usize,
        pc: u32,
        addr: u64,
        size: usize,
        what: impl Fn() -> String,
    ) -> Result<(), GpuError> {
        if !addr.is_multiple_of(size as u64) {
            let what = format!(
                "{} of {size} bytes at {addr:#x}, which is not {size}-byte aligned",
                what()
            );
            return Err(self.fault(SimErrorKind::Misaligned, w, lane, pc, what));
        }
        Ok(())
    }

    /// Offset into the block's shared memory of `[addr, addr + len)`, or an out-of-bounds error.
    pub(super) fn shared_range(
        &self,
        w: &Warp,
        lane: usize,
        pc: u32,
        addr: u64,
        len: usize,
        what: &str,
    ) -> Result<usize, GpuError> {
        let end = SHARED_BASE as u64 + self.shared.len() as u64;
        if addr < SHARED_BASE as u64 || addr + len as u64 > end {
            let static_bytes = self.kernel.static_shared_end - SHARED_BASE;
            let what = format!(
                "shared {what} of {len} bytes at shared address {addr:#x}, outside the block's shared memory [{:#x}, {end:#x}) ({static_bytes} bytes static, {} dynamic)",
                SHARED_BASE, self.launch.dynamic_shared
            );
            return Err(self.fault(SimErrorKind::OutOfBounds, w, lane, pc, what));
        }
        Ok((addr - SHARED_BASE as u64) as usize)
    }

    fn local_range(
        &self,
        w: &Warp,
        lane: usize,
        pc: u32,
        addr: u64,
        len: usize,
    ) -> Result<usize, GpuError> {
        let size = self.kernel.local_size;
        if addr + len as u64 > size {
            let what = format!(
                "local access of {len} bytes at local address {addr:#x}, outside the thread's {size} bytes of local memory"
            );
            return Err(self.fault(SimErrorKind::OutOfBounds, w, lane, pc, what));
        }
        Ok(lane * size as usize + addr as usize)
    }

    /// Reads `out.len()` bytes at `v` in `space`.
    pub(super) fn load(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        space: Space,
        v: u64,
        out: &mut [u8],
    ) -> Result<(), GpuError> {
        let len = out.len();
        self.check_aligned(w, lane, pc, v, len, || format!("{} load", space.name()))?;
        match target(space, v) {
            Target::Global(a) => self.launch.global.load(a, out).map_err(|m| {
                self.fault(SimErrorKind::OutOfBounds, w, lane, pc, format!("global load of {m}"))
            }),
            Target::Shared(a) => {
                let start = self.shared_range(w, lane, pc, a, len, "load")?;
                let access = self.access(w, lane, pc, false);
                self.shadow.read(start, len, access).map_err(|c| self.hazard(w, lane, pc, c))?;
                out.copy_from_slice(&self.shared[start..start + len]);
                Ok(())
            }
            Target::Local(a) => {
                let start = self.local_range(w, lane, pc, a, len)?;
                out.copy_from_slice(&w.local[start..start + len]);
                Ok(())
            }
            Target::Param(a) => {
                let params = self.launch.params;
                if a + len as u64 > params.len() as u64 {
                    let what = format!(
                        "parameter load of {len} bytes at offset {a}, past the {} parameter bytes",
                        params.len()
                    );
                    return Err(self.fault(SimErrorKind::OutOfBounds, w, lane, pc, what));
                }
                for (o, b) in out.iter_mut().zip(&params[a as usize..]) {
                    // SAFETY: parameter bytes are initialized except the padding of a
                    // `KernelParams` struct, which that trait's contract (upheld by the caller
                    // of the unsafe `Device::launch`) guarantees the kernel never reads.
                    *o = unsafe { b.assume_init() };
                }
                Ok(())
            }
        }
    }

    /// Writes `data` at `v` in `space`.
    fn store(
        &mut self,
        w: &mut Warp,
        lane: usize,
        pc: u32,
        space: Space,
        v: u64,
        data: &[u8],
    ) -> Result<(), GpuError> {
        let len = data.len();
        self.check_aligned(w, lane, pc, v, len, || format!("{} store", space.name()))?;
        match target(space, v) {
            Target::Global(a) => self.launch.global.store(a, data).map_err(|m| {
                self.fault(SimErrorKind::OutOfBounds, w, lane, pc, format!("global store of {m}"))
            }),
            Target::Shared(a) => {
                let start = self.shared_range(w, lane, pc, a, len, "store")?;
                self.check_wgmma_reads(w, lane, pc, start, len)?;
                let access = self.access(w, lane, pc, false);
                self.shadow.write(start, len, access).map_err(|c| self.hazard(w, lane, pc, c))?;
                self.shared[start..start + len].copy_from_slice(data);
                Ok(())
            }
            Target::Local(a) => {
                let start = self.local_range(w, lane, pc, a, len)?;
                w.local[start..start + len].copy_from_slice(data);
                Ok(())
            }
            Target::Param(_) => Err(self.fault(
                SimErrorKind::Unsupported,
                w,
                lane,
                pc,
                "store to the kernel parameter space (read-only)",
            )),
        }
    }

    /// An atomic read-modify-write of `size` bytes at `v` in `space`; returns the old value.
    fn atomic(
        &mut self,
        w: &Warp,
        lane: usize,
        pc: u32,
        (space, v, size): (Space, u64, usize),
        apply: impl Fn(u64) -> u64,
    ) -> Result<u64, GpuError> {
        self.check_aligned(w, lane, pc, v, size, || "atomic".into())?;
        let mut buf = [0u8; 8];
        match target(space, v) {
            Target::Global(a) => {
                let global = self.launch.global;
                let _lock = global.atomic_lock(a);
                global.load(a, &mut buf[..size]).map_err(|m| {
                    self.fault(
                        SimErrorKind::OutOfBounds,
                        w,
                        lane,
                        pc,
                        format!("global atomic on {m}"),
                    )
                })?;
                let old = le_value(&buf[..size]);
                global
                    .store(a, &apply(old).to_le_bytes()[..size])
                    .map_err(|m| self.fault(SimErrorKind::OutOfBounds, w, lane, pc, m))?;
                Ok(old)
            }
            Target::Shared(a) => {
                let start = self.shared_range(w, lane, pc, a, size, "atomic")?;
                self.check_wgmma_reads(w, lane, pc, start, size)?;
                let access = self.access(w, lane, pc, true);
                self.shadow.write(start, size, access).map_err(|c| self.hazard(w, lane, pc, c))?;
                let old = le_value(&self.shared[start..start + size]);
                self.shared[start..start + size].copy_from_slice(&apply(old).to_le_bytes()[..size]);
                Ok(old)
            }
            Target::Local(_) | Target::Param(_) => Err(self.fault(
                SimErrorKind::Unsupported,
                w,
                lane,
                pc,
                "atomic on a local or parameter address",
            )),
        }
    }

    /// The error for a shared-memory hazard found by the shadow.
    pub(super) fn hazard(&self, w: &Warp, lane: usize, pc: u32, c: Conflict) -> GpuError {
        let other = self.coords_name(c.prior.tid as u32);
        let info = &self.kernel.info[c.prior.pc as usize];
        let at = format!("at PTX line {} `{}`", info.line, info.text);
        let byte = c.addr;
        let (kind, what) = match c.hazard {
            Hazard::ReadAfterWrite => (
                SimErrorKind::SharedRace,
                format!(
                    "read-after-write race on shared byte {byte:#x}: this thread reads it, thread {other} wrote it {at}, and no barrier orders the two"
                ),
            ),
            Hazard::WriteAfterRead => (
                SimErrorKind::SharedRace,
                format!(
                    "write-after-read race on shared byte {byte:#x}: this thread writes it, thread {other} read it {at}, and no barrier orders the two"
                ),
            ),
            Hazard::WriteAfterWrite => (
                SimErrorKind::SharedRace,
                format!(
                    "write-after-write race on shared byte {byte:#x}: this thread writes it, thread {other} wrote it {at}, and no barrier orders the two"
                ),
            ),
            Hazard::AsyncCopyInFlight => (
                SimErrorKind::AsyncCopyHazard,
                format!(
                    "shared byte {byte:#x} is accessed while a cp.async into it, issued by thread {other} {at}, is still in flight (the access would see stale data): a cp.async.wait_group covering that copy is missing or comes too late{}",
                    if c.prior.tid as u32 == w.index * 32 + lane as u32 {
                        ""
                    } else {
                        ", or a barrier after it"
                    }
                ),
            ),
            Hazard::UnfencedGenericWrite => (
                SimErrorKind::AsyncProxyHazard,
                format!(
                    "shared byte {byte:#x} is accessed through the async proxy (TMA or wgmma), but thread {other} wrote it through the generic proxy {at} and has executed no fence.proxy.async since"
                ),
            ),
            Hazard::Uninitialized => (
                SimErrorKind::UninitializedShared,
                format!("read of shared byte {byte:#x}, which no thread of this block has written"),
            ),
        };
        self.fault(kind, w, lane, pc, what)
    }
}

fn commit(c: &mut AsyncCopies) {
    let group = std::mem::take(&mut c.uncommitted);
    c.groups.push_back(group);
}

/// The new value of an atomic.
fn atom_apply(op: AtomOp, ty: AtomTy, old: u64, b: u64, c: u64) -> u64 {
    match ty {
        AtomTy::F32 => match op {
            AtomOp::Add => {
                // atom.add.f32 flushes subnormal inputs and results (PTX ISA "atom").
                let sum = float::flush32(f32::from_bits(old as u32))
                    + float::flush32(f32::from_bits(b as u32));
                float::out32(sum, true, false)
            }
            _ => b & 0xffff_ffff,
        },
        AtomTy::F64 => match op {
            AtomOp::Add => {
                let sum = f64::from_bits(old) + f64::from_bits(b);
                if sum.is_nan() { float::NAN64 } else { sum.to_bits() }
            }
            _ => b,
        },
        AtomTy::Int(t) => {
            let m = super::int::mask(t.bits);
            let (o, b, c) = (old & m, b & m, c & m);
            let (so, sb) = (sext(o, t.bits), sext(b, t.bits));
            (match op {
                AtomOp::Add => o.wrapping_add(b),
                AtomOp::Min => {
                    if t.signed {
                        so.min(sb) as u64
                    } else {
                        o.min(b)
                    }
                }
                AtomOp::Max => {
                    if t.signed {
                        so.max(sb) as u64
                    } else {
                        o.max(b)
                    }
                }
                AtomOp::Inc => {
                    if o >= b {
                        0
                    } else {
                        o + 1
                    }
                }
                AtomOp::Dec => {
                    if o == 0 || o > b {
                        b
                    } else {
                        o - 1
                    }
                }
                AtomOp::And => o & b,
                AtomOp::Or => o | b,
                AtomOp::Xor => o ^ b,
                AtomOp::Exch => b,
                AtomOp::Cas => {
                    if o == b {
                        c
                    } else {
                        o
                    }
                }
            }) & m
        }
    }
}
