//! Execution of a decoded kernel: blocks in parallel, warps of 32 lanes, an independent
//! program counter per lane.
//!
//! # Scheduling
//! A block runs one warp at a time until it waits at a barrier or exits. Within a warp, the
//! ready lanes with the lowest program counter run the next instruction together; the others
//! wait. Lanes that branch apart therefore reconverge where their paths meet again (the join
//! block of structured code), and a loop's early leavers wait past the loop for the others. A barrier completes when every live thread of the block waits at one.
//!
//! Warp collectives (`shfl.sync`, `vote.sync`, `redux.sync`, `bar.warp.sync`, `mma.sync`,
//! `ldmatrix`) execute once every lane their member mask names (all 32 for `.aligned` ones)
//! waits at the same instruction; a mask naming an exited lane, lanes that disagree on the
//! mask, or lanes that can no longer arrive are errors.

pub mod cvt;
pub mod float;
mod hopper;
pub mod int;
mod mem;
mod mma;
mod warp;
mod wgmma;

use crate::decode::Kernel;
use crate::decode::op::{BoolOp, CmpTy, LaneMask, Op, Slot, Special, Src};
use crate::memory::{FRESH_BYTE, GENERIC_WINDOWS, GlobalMemory, SHARED_BASE, resolve_generic};
use crate::profile::InstrCounts;
use crate::racecheck::{Checks, Shadow};
use gpu_host::{GpuError, SimErrorKind};
use mem::AsyncCopies;
use rayon::prelude::*;
use std::collections::HashMap;
use std::fmt::Display;
use std::mem::MaybeUninit;
use std::sync::{Mutex, PoisonError};

/// Everything fixed for one launch.
pub struct Launch<'a> {
    /// The kernel.
    pub kernel: &'a Kernel,
    /// Blocks per grid (x, y, z).
    pub grid: [u32; 3],
    /// Threads per block (x, y, z).
    pub block: [u32; 3],
    /// Dynamic shared memory bytes.
    pub dynamic_shared: u32,
    /// The parameter space. Bytes are initialized except the padding of a `KernelParams`
    /// struct, which by that trait's contract the kernel never reads.
    pub params: &'a [MaybeUninit<u8>],
    /// Global memory.
    pub global: &'a GlobalMemory,
    /// Shared-memory checks.
    pub checks: Checks,
    /// Run blocks on the rayon pool.
    pub parallel: bool,
    /// Where blocks add their memory-access counts, when profiling (`crate::profile`).
    pub profile: Option<&'a Mutex<InstrCounts>>,
}

/// Runs every block; the error of the lowest-numbered failing block is returned.
pub fn run(launch: &Launch) -> Result<(), GpuError> {
    let [gx, gy, gz] = launch.grid;
    let blocks = gx as u64 * gy as u64 * gz as u64;
    let run_block = |b: u64| {
        let idx = [
            (b % gx as u64) as u32,
            ((b / gx as u64) % gy as u64) as u32,
            (b / (gx as u64 * gy as u64)) as u32,
        ];
        Block::new(launch, idx).run()
    };
    if launch.parallel {
        (0..blocks).into_par_iter().map(run_block).find_first(Result::is_err).unwrap_or(Ok(()))
    } else {
        (0..blocks).try_for_each(run_block)
    }
}

/// State of one lane.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    /// Can run.
    Ready,
    /// Waits at `bar.sync` (its pc points at it).
    Barrier,
    /// Waits at a warp collective (its pc points at it).
    Collective,
    /// Has exited (or never existed, in a partial last warp).
    Exited,
    /// Its `mbarrier.try_wait` failed (its pc points at it): retried after the other warps
    /// ran.
    Spin,
}

/// One warp: per-lane program counters and registers.
struct Warp {
    /// Index of the warp in its block.
    index: u32,
    /// Lanes that exist (all but the tail of a partial last warp).
    exists: u32,
    pc: [u32; 32],
    state: [Lane; 32],
    /// Register `slot` of lane `l` is `regs[slot * 32 + l]`.
    regs: Vec<u64>,
    /// Local memory, `local_size` bytes per lane.
    local: Vec<u8>,
    /// In-flight `cp.async` copies of each lane.
    copies: Vec<AsyncCopies>,
    /// Completed `bar.warp.sync`s (orders this warp's lanes for the race check).
    warp_sync: u32,
    /// Instructions issued (`%clock`).
    clock: u64,
    /// `wgmma` in flight.
    wgmma: wgmma::WgmmaState,
    /// Warpgroup-scope instructions (`wgmma.*`, `setmaxnreg`) this warp has executed.
    warpgroup_ops: usize,
}

impl Warp {
    fn mask_of(&self, state: Lane) -> u32 {
        (0..32).filter(|&l| self.state[l] == state).fold(0, |m, l| m | 1 << l)
    }

    #[inline(always)]
    fn set(&mut self, slot: Slot, lane: usize, value: u64) {
        self.regs[slot as usize * 32 + lane] = value;
    }

    fn advance(&mut self, lanes: u32, pc: u32) {
        for lane in bits(lanes) {
            self.pc[lane] = pc;
        }
    }
}

/// The set bits of a lane mask, lowest first.
#[inline(always)]
fn bits(mut mask: u32) -> impl Iterator<Item = usize> {
    std::iter::from_fn(move || {
        (mask != 0).then(|| {
            let lane = mask.trailing_zeros() as usize;
            mask &= mask - 1;
            lane
        })
    })
}

/// `0-3, 7, 9-31` for messages.
fn lane_list(mask: u32) -> String {
    let mut parts = Vec::new();
    let mut lanes = bits(mask).peekable();
    while let Some(start) = lanes.next() {
        let mut end = start;
        while lanes.peek() == Some(&(end + 1)) {
            end = lanes.next().unwrap_or(end);
        }
        parts.push(if start == end { format!("{start}") } else { format!("{start}-{end}") });
    }
    parts.join(", ")
}

/// One block in execution.
struct Block<'a> {
    launch: &'a Launch<'a>,
    kernel: &'a Kernel,
    idx: [u32; 3],
    threads: u32,
    shared: Vec<u8>,
    shadow: Shadow,
    /// mbarriers by shared address.
    mbarriers: HashMap<u32, hopper::Mbarrier>,
    /// Tensor maps each thread acquired (`fence.proxy.tensormap`): (thread, global address)
    /// → at system scope.
    tensormaps: HashMap<(usize, u64), bool>,
    /// Shared ranges that in-flight wgmmas read.
    inflight: Vec<wgmma::InflightRead>,
    /// Per warpgroup (warps 4g .. 4g + 3), the PTX instruction of each warpgroup-scope
    /// instruction it issued, in order, as the first of its warps to get there executed it.
    warpgroups: HashMap<u32, Vec<u32>>,
    /// Whether the current scheduling round executed anything but failed mbarrier waits.
    progress: bool,
    /// This block's memory-access counts, when profiling.
    profile: Option<InstrCounts>,
}

impl<'a> Block<'a> {
    fn new(launch: &'a Launch<'a>, idx: [u32; 3]) -> Self {
        let kernel = launch.kernel;
        let shared_len =
            (kernel.dynamic_shared_base + launch.dynamic_shared - SHARED_BASE) as usize;
        let [bx, by, bz] = launch.block;
        let threads = bx * by * bz;
        let mut shadow = Shadow::new(SHARED_BASE, shared_len, launch.checks);
        if kernel.hopper_async {
            shadow.enable_async(threads as usize);
        }
        Block {
            launch,
            kernel,
            idx,
            threads,
            shared: vec![FRESH_BYTE; shared_len],
            shadow,
            mbarriers: HashMap::new(),
            tensormaps: HashMap::new(),
            inflight: Vec::new(),
            warpgroups: HashMap::new(),
            progress: false,
            profile: launch.profile.map(|_| InstrCounts::new()),
        }
    }

    fn new_warp(&self, index: u32) -> Warp {
        let live = (self.threads - index * 32).min(32);
        let slots = self.kernel.slots as usize;
        let mut state = [Lane::Exited; 32];
        state[..live as usize].fill(Lane::Ready);
        Warp {
            index,
            exists: if live == 32 { u32::MAX } else { (1 << live) - 1 },
            pc: [0; 32],
            state,
            regs: vec![0; slots * 32],
            local: vec![FRESH_BYTE; self.kernel.local_size as usize * 32],
            copies: (0..32).map(|_| AsyncCopies::default()).collect(),
            warp_sync: 0,
            clock: 0,
            wgmma: wgmma::WgmmaState::default(),
            warpgroup_ops: 0,
        }
    }

    fn run(mut self) -> Result<(), GpuError> {
        let result = self.run_warps();
        if let (Some(counts), Some(total)) = (self.profile.take(), self.launch.profile) {
            crate::profile::merge(
                &mut total.lock().unwrap_or_else(PoisonError::into_inner),
                counts,
            );
        }
        result
    }

    fn run_warps(&mut self) -> Result<(), GpuError> {
        let mut warps: Vec<Warp> =
            (0..self.threads.div_ceil(32)).map(|i| self.new_warp(i)).collect();
        loop {
            self.progress = false;
            for w in warps.iter_mut() {
                for lane in bits(w.mask_of(Lane::Spin)) {
                    w.state[lane] = Lane::Ready;
                }
                self.run_warp(w)?;
            }
            if warps.iter().any(|w| w.mask_of(Lane::Spin) != 0) {
                if !self.progress {
                    return Err(self.mbarrier_deadlock(&warps));
                }
                continue;
            }
            if warps.iter().all(|w| w.mask_of(Lane::Barrier) == 0) {
                return self.check_warpgroups_complete(&warps);
            }
            self.complete_barrier(&mut warps)?;
        }
    }

    /// Runs `w` until no lane can proceed.
    fn run_warp(&mut self, w: &mut Warp) -> Result<(), GpuError> {
        loop {
            let ready = w.mask_of(Lane::Ready);
            if ready == 0 {
                if w.mask_of(Lane::Collective) != 0 && w.mask_of(Lane::Spin) == 0 {
                    return Err(self.stuck_warp(w));
                }
                return Ok(());
            }
            let pc = bits(ready).map(|l| w.pc[l]).min().unwrap_or(0);
            let group = bits(ready).filter(|&l| w.pc[l] == pc).fold(0, |m, l| m | 1 << l);
            self.step(w, pc, group)?;
        }
    }

    /// All live threads wait at a barrier: check it is one barrier, then release them.
    fn complete_barrier(&mut self, warps: &mut [Warp]) -> Result<(), GpuError> {
        let mut first: Option<(u64, &Warp, usize)> = None;
        for w in warps.iter() {
            let waiting = w.mask_of(Lane::Barrier);
            let Some(lead) = bits(waiting).next() else { continue };
            let aligned = bits(waiting).any(|l| {
                matches!(self.kernel.instrs[w.pc[l] as usize].op, Op::Bar { aligned: true, .. })
            });
            if let Some(other) = bits(waiting).find(|&l| aligned && w.pc[l] != w.pc[lead]) {
                let what = format!(
                    "bar.sync is .aligned: lanes {} of warp {} wait at PTX line {}, lane {other} at line {} (the lanes of a warp must execute the same barrier instruction)",
                    lane_list(
                        bits(waiting).filter(|&l| w.pc[l] == w.pc[lead]).fold(0, |m, l| m | 1 << l)
                    ),
                    w.index,
                    self.kernel.info[w.pc[lead] as usize].line,
                    self.kernel.info[w.pc[other] as usize].line,
                );
                return Err(self.fault(
                    SimErrorKind::IllegalCollective,
                    w,
                    other,
                    w.pc[other],
                    what,
                ));
            }
            for lane in bits(waiting) {
                let Op::Bar { id, count, .. } = &self.kernel.instrs[w.pc[lane] as usize].op else {
                    unreachable!("lanes wait only at bar.sync");
                };
                let id = self.read(w, *id, lane) & 0xffff_ffff;
                if let Some(count) = count {
                    let count = self.read(w, *count, lane) & 0xffff_ffff;
                    if count != self.threads as u64 {
                        let what = format!(
                            "bar.sync with a thread count ({count}) other than the block size ({}) is not supported",
                            self.threads
                        );
                        return Err(self.fault(
                            SimErrorKind::Unsupported,
                            w,
                            lane,
                            w.pc[lane],
                            what,
                        ));
                    }
                }
                match first {
                    None => first = Some((id, w, lane)),
                    Some((id0, w0, lane0)) if id0 != id => {
                        let what = format!(
                            "threads wait at different barriers: barrier {id} here, barrier {id0} for thread {} at PTX line {}; neither can complete",
                            self.thread_name(w0, lane0),
                            self.kernel.info[w0.pc[lane0] as usize].line
                        );
                        return Err(self.fault(SimErrorKind::Deadlock, w, lane, w.pc[lane], what));
                    }
                    Some(_) => {}
                }
            }
        }
        self.shadow.barrier();
        for w in warps.iter_mut() {
            for lane in bits(w.mask_of(Lane::Barrier)) {
                w.state[lane] = Lane::Ready;
                w.pc[lane] += 1;
            }
        }
        Ok(())
    }

    /// Executes the instruction at `pc` for the lanes in `group`.
    fn step(&mut self, w: &mut Warp, pc: u32, group: u32) -> Result<(), GpuError> {
        let kernel = self.kernel;
        let instr = &kernel.instrs[pc as usize];
        w.clock += 1;
        let wgmma_op = matches!(
            instr.op,
            Op::Wgmma(_) | Op::WgmmaWait { .. } | Op::WgmmaCommit | Op::WgmmaFence
        );
        if w.wgmma.in_flight()
            && !wgmma_op
            && let Some(slot) = w.wgmma.conflict(&instr.op)
        {
            return Err(self.wgmma_register_hazard(w, pc, slot));
        }
        let active = match instr.guard {
            None => group,
            Some(g) => bits(group)
                .filter(|&l| (w.regs[g.slot as usize * 32 + l] & 1 != 0) != g.negate)
                .fold(0, |m, l| m | 1 << l),
        };
        w.advance(group & !active, pc + 1);
        if active == 0 {
            self.progress = true;
            return Ok(());
        }
        if let Op::MbarWait { p, addr, parity, blocking } = instr.op {
            for lane in bits(active) {
                let complete = self.mbar_try_wait(w, lane, pc, (addr, parity))?;
                if complete || !blocking {
                    w.set(p, lane, complete as u64);
                    w.pc[lane] = pc + 1;
                    self.progress = true;
                } else {
                    w.state[lane] = Lane::Spin;
                }
            }
            return Ok(());
        }
        self.progress = true;
        match &instr.op {
            Op::Bra { target } => w.advance(active, *target),
            Op::Exit => {
                for lane in bits(active) {
                    self.finish_copies(w, lane)?;
                    w.state[lane] = Lane::Exited;
                }
            }
            Op::Trap => {
                let lane = bits(active).next().unwrap_or(0);
                return Err(self.fault(
                    SimErrorKind::Trap,
                    w,
                    lane,
                    pc,
                    "the kernel executed `trap`",
                ));
            }
            Op::Bar { .. } => {
                for lane in bits(active) {
                    w.state[lane] = Lane::Barrier;
                }
            }
            op if op.is_collective() => self.arrive(w, pc, active)?,
            Op::Activemask { d } => {
                for lane in bits(active) {
                    w.set(*d, lane, active as u64);
                }
                w.advance(active, pc + 1);
            }
            Op::Ld { .. }
            | Op::St { .. }
            | Op::Atom { .. }
            | Op::CpAsync { .. }
            | Op::CpAsyncCommit
            | Op::CpAsyncWait { .. } => {
                if self.profile.is_some() {
                    self.profile_access(w, pc, active, &instr.op);
                }
                for lane in bits(active) {
                    self.memory_op(w, pc, lane, &instr.op)?;
                }
                w.advance(active, pc + 1);
            }
            Op::MbarInit { addr, count } => {
                for lane in bits(active) {
                    self.mbar_init(w, lane, pc, (*addr, *count))?;
                }
                w.advance(active, pc + 1);
            }
            Op::MbarArrive { addr, tx, arrive, state } => {
                for lane in bits(active) {
                    self.mbar_arrive(w, lane, pc, (*addr, *tx, *arrive, *state))?;
                }
                w.advance(active, pc + 1);
            }
            Op::BulkPrefetch { addr, size } => {
                for lane in bits(active) {
                    self.bulk_prefetch(w, lane, pc, (*addr, *size))?;
                }
                w.advance(active, pc + 1);
            }
            Op::TmaLoad { dst, map, rank, coords, bar } => {
                for lane in bits(active) {
                    self.tma_load(w, lane, pc, (*dst, *map, *rank, *coords, *bar))?;
                }
                w.advance(active, pc + 1);
            }
            Op::FenceProxyAsync => {
                for lane in bits(active) {
                    self.fence_proxy_async(w, lane);
                }
                w.advance(active, pc + 1);
            }
            Op::FenceProxyTensormap { map, sys } => {
                for lane in bits(active) {
                    self.fence_proxy_tensormap(w, lane, pc, (*map, *sys))?;
                }
                w.advance(active, pc + 1);
            }
            op => {
                self.alu(w, pc, active, op)?;
                w.advance(active, pc + 1);
            }
        }
        Ok(())
    }

    /// The value of a source operand for one lane.
    #[inline(always)]
    fn read(&self, w: &Warp, src: Src, lane: usize) -> u64 {
        match src {
            Src::Reg(slot) => w.regs[slot as usize * 32 + lane],
            Src::Imm(v) => v,
            Src::Special(s) => self.special(w, s, lane),
        }
    }

    /// (x, y, z) of the thread with linear index `t`.
    fn coords(&self, t: u32) -> [u32; 3] {
        let [bx, by, _] = self.launch.block;
        [t % bx, (t / bx) % by, t / (bx * by)]
    }

    fn thread_coords(&self, w: &Warp, lane: usize) -> [u32; 3] {
        self.coords(w.index * 32 + lane as u32)
    }

    /// `(x,y,z)` of the thread with linear index `t`, for messages.
    fn coords_name(&self, t: u32) -> String {
        let [x, y, z] = self.coords(t);
        format!("({x},{y},{z})")
    }

    fn special(&self, w: &Warp, s: Special, lane: usize) -> u64 {
        let lane_bit = 1u64 << lane;
        (match s {
            Special::Tid(d) => self.thread_coords(w, lane)[d as usize] as u64,
            Special::Ntid(d) => self.launch.block[d as usize] as u64,
            Special::Ctaid(d) => self.idx[d as usize] as u64,
            Special::Nctaid(d) => self.launch.grid[d as usize] as u64,
            Special::LaneId => lane as u64,
            Special::WarpId => w.index as u64,
            Special::NWarpId => self.threads.div_ceil(32) as u64,
            Special::LaneMask(LaneMask::Eq) => lane_bit,
            Special::LaneMask(LaneMask::Lt) => lane_bit - 1,
            Special::LaneMask(LaneMask::Le) => (lane_bit << 1) - 1,
            Special::LaneMask(LaneMask::Gt) => !((lane_bit << 1) - 1) & 0xffff_ffff,
            Special::LaneMask(LaneMask::Ge) => !(lane_bit - 1) & 0xffff_ffff,
            Special::Clock => return w.clock,
            Special::SmId => 0,
            Special::NSmId => 1,
            Special::DynamicSmemSize => self.launch.dynamic_shared as u64,
            Special::TotalSmemSize => {
                (self.kernel.dynamic_shared_base - SHARED_BASE + self.launch.dynamic_shared) as u64
            }
        }) & 0xffff_ffff
    }

    /// Register-only instructions, for every lane in `active`.
    fn alu(&mut self, w: &mut Warp, pc: u32, active: u32, op: &Op) -> Result<(), GpuError> {
        macro_rules! each {
            (|$lane:ident| $value:expr => $d:expr) => {
                for $lane in bits(active) {
                    let v = $value;
                    w.set($d, $lane, v);
                }
            };
        }
        match *op {
            Op::Mov { d, a, bits: b } => each!(|l| self.read(w, a, l) & int::mask(b) => d),
            Op::Pack { d, parts, n, part_bits } => each!(|l| {
                (0..n as usize).fold(0u64, |acc, i| {
                    acc | (self.read(w, parts[i], l) & int::mask(part_bits)) << (part_bits as usize * i)
                })
            } => d),
            Op::Unpack { d, n, part_bits, a } => {
                for l in bits(active) {
                    let v = self.read(w, a, l);
                    for (i, dst) in d.iter().take(n as usize).enumerate() {
                        if let Some(dst) = dst {
                            w.set(*dst, l, (v >> (part_bits as usize * i)) & int::mask(part_bits));
                        }
                    }
                }
            }
            Op::Unary { op, ty, d, a } => each!(|l| int::unary(op, ty, self.read(w, a, l)) => d),
            Op::Binary { op, ty, d, a, b } => {
                for l in bits(active) {
                    match int::binary(op, ty, self.read(w, a, l), self.read(w, b, l)) {
                        Ok(v) => w.set(d, l, v),
                        Err(what) => {
                            return Err(self.fault(SimErrorKind::DivisionByZero, w, l, pc, what));
                        }
                    }
                }
            }
            Op::Ternary { op, ty, d, a, b, c } => {
                each!(|l| int::ternary(op, ty, self.read(w, a, l), self.read(w, b, l), self.read(w, c, l)) => d)
            }
            Op::Bfi { bits: b, d, f, b: base, pos, len } => each!(|l| int::bfi(
                b,
                self.read(w, f, l),
                self.read(w, base, l),
                self.read(w, pos, l),
                self.read(w, len, l)
            ) => d),
            Op::Lop3 { d, abc: [a, b, c], lut } => {
                each!(|l| int::lop3(self.read(w, a, l), self.read(w, b, l), self.read(w, c, l), lut) => d)
            }
            Op::Setp { cmp, ty, p, q, a, b, combine } => {
                for l in bits(active) {
                    let (x, y) = (self.read(w, a, l), self.read(w, b, l));
                    let r = match ty {
                        CmpTy::Int(t) => int::compare(cmp, t, x, y),
                        CmpTy::Float(t, ftz) => float::compare(cmp, t, ftz, x, y),
                    };
                    let (pv, qv) = match combine {
                        None => (r, !r),
                        Some((op, c, negate)) => {
                            let c = (self.read(w, c, l) & 1 != 0) != negate;
                            let f = |v: bool| match op {
                                BoolOp::And => v && c,
                                BoolOp::Or => v || c,
                                BoolOp::Xor => v != c,
                            };
                            (f(r), f(!r))
                        }
                    };
                    w.set(p, l, pv as u64);
                    if let Some(q) = q {
                        w.set(q, l, qv as u64);
                    }
                }
            }
            Op::Selp { bits: b, d, a, b: bv, p } => each!(|l| {
                let v = if self.read(w, p, l) & 1 != 0 { self.read(w, a, l) } else { self.read(w, bv, l) };
                v & int::mask(b)
            } => d),
            Op::FBinary { op, ty, ftz, sat, d, a, b } => {
                each!(|l| float::binary(op, ty, ftz, sat, self.read(w, a, l), self.read(w, b, l)) => d)
            }
            Op::FUnary { op, ty, ftz, d, a } => {
                each!(|l| float::unary(op, ty, ftz, self.read(w, a, l)) => d)
            }
            Op::Fma { ty, ftz, sat, d, a, b, c } => each!(|l| float::fma(
                ty,
                ftz,
                sat,
                self.read(w, a, l),
                self.read(w, b, l),
                self.read(w, c, l)
            ) => d),
            Op::Testp { op, ty, d, a } => {
                each!(|l| float::testp(op, ty, self.read(w, a, l)) as u64 => d)
            }
            Op::Cvt { ref cvt, d, a } => each!(|l| cvt::convert(cvt, self.read(w, a, l)) => d),
            Op::CvtPack { ty, relu, satfinite, d, hi, lo } => {
                each!(|l| cvt::pack(ty, relu, satfinite, self.read(w, hi, l), self.read(w, lo, l)) => d)
            }
            Op::Cvta { to, space, d, a } => {
                let window =
                    GENERIC_WINDOWS.iter().find(|(s, _)| *s == space).map_or(0, |(_, base)| *base);
                each!(|l| {
                    let v = self.read(w, a, l);
                    if to { v.wrapping_sub(window) } else { v.wrapping_add(window) }
                } => d)
            }
            Op::Isspacep { space, d, a } => {
                each!(|l| (resolve_generic(self.read(w, a, l)).space() == space) as u64 => d)
            }
            Op::Fence => std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst),
            Op::Nop => {}
            ref other => unreachable!("{other:?} is dispatched before the ALU"),
        }
        Ok(())
    }

    /// Human-readable thread coordinates.
    fn thread_name(&self, w: &Warp, lane: usize) -> String {
        self.coords_name(w.index * 32 + lane as u32)
    }

    /// A [`GpuError::Sim`] naming the kernel, block, thread and instruction.
    fn fault(
        &self,
        kind: SimErrorKind,
        w: &Warp,
        lane: usize,
        pc: u32,
        what: impl Display,
    ) -> GpuError {
        let info = &self.kernel.info[pc as usize];
        let [bx, by, bz] = self.idx;
        GpuError::Sim {
            kind,
            detail: format!(
                "{what} — in kernel `{}`, block ({bx},{by},{bz}), thread {} (warp {}, lane {lane}), at PTX line {}: `{}`",
                self.kernel.name,
                self.thread_name(w, lane),
                w.index,
                info.line,
                info.text
            ),
        }
    }

    /// The error for a warp whose lanes wait at collectives that can never execute.
    fn stuck_warp(&self, w: &Warp) -> GpuError {
        let mut pcs: Vec<u32> = bits(w.mask_of(Lane::Collective)).map(|l| w.pc[l]).collect();
        pcs.sort_unstable();
        pcs.dedup();
        let mut parts = Vec::new();
        for &pc in &pcs {
            let lanes = bits(w.mask_of(Lane::Collective))
                .filter(|&l| w.pc[l] == pc)
                .fold(0, |m, l| m | 1 << l);
            let info = &self.kernel.info[pc as usize];
            parts.push(format!(
                "lanes {} wait at PTX line {} `{}`",
                lane_list(lanes),
                info.line,
                info.text
            ));
        }
        let barrier = w.mask_of(Lane::Barrier);
        if barrier != 0 {
            parts.push(format!("lanes {} wait at a bar.sync", lane_list(barrier)));
        }
        let exited = w.mask_of(Lane::Exited);
        if exited != 0 {
            parts.push(format!("lanes {} have exited", lane_list(exited)));
        }
        let lane = bits(w.mask_of(Lane::Collective)).next().unwrap_or(0);
        let what = format!(
            "warp {} cannot proceed: {}; a warp collective runs only when every lane its mask names (all 32 for .aligned instructions such as mma.sync and ldmatrix) executes that same instruction",
            w.index,
            parts.join("; ")
        );
        self.fault(SimErrorKind::IllegalCollective, w, lane, w.pc[lane], what)
    }
}
