//! Warp collectives: arrival and firing, and the semantics of `shfl.sync`, `vote.sync`,
//! `redux.sync` and `bar.warp.sync` (`mma.sync` and `ldmatrix` are in `mma`).

use super::{Block, Lane, Warp, bits, lane_list};
use crate::decode::op::{Op, ReduxOp, ShflMode, Src, VoteMode};
use gpu_host::{GpuError, SimErrorKind};

impl Block<'_> {
    /// Lanes `active` arrive at the collective at `pc`; it runs once every lane it needs waits.
    pub(super) fn arrive(&mut self, w: &mut Warp, pc: u32, active: u32) -> Result<(), GpuError> {
        for lane in bits(active) {
            w.state[lane] = Lane::Collective;
        }
        let op = &self.kernel.instrs[pc as usize].op;
        let waiting = bits(w.mask_of(Lane::Collective))
            .filter(|&l| w.pc[l] == pc)
            .fold(0u32, |m, l| m | 1 << l);
        let required = if op.is_aligned() {
            u32::MAX
        } else {
            let mask_src = match op {
                Op::Shfl { mask, .. }
                | Op::Vote { mask, .. }
                | Op::Redux { mask, .. }
                | Op::BarWarp { mask }
                | Op::Elect { mask, .. } => *mask,
                other => unreachable!("{other:?} has no member mask"),
            };
            self.member_mask(w, pc, waiting, mask_src)?
        };
        let gone = required & w.mask_of(Lane::Exited);
        if gone != 0 {
            let lane = bits(waiting).next().unwrap_or(0);
            let what = if op.is_aligned() {
                format!(
                    ".aligned warp instruction, but lanes {} of the warp have exited: all 32 lanes must execute it together",
                    lane_list(gone)
                )
            } else if gone & !w.exists != 0 {
                format!(
                    "member mask {required:#010x} names lanes {} that have exited or do not exist (the block ends inside this warp)",
                    lane_list(gone)
                )
            } else {
                format!(
                    "member mask {required:#010x} names lanes {} that have exited",
                    lane_list(gone)
                )
            };
            return Err(self.fault(SimErrorKind::IllegalCollective, w, lane, pc, what));
        }
        if required & !waiting != 0 {
            return Ok(());
        }
        let warpgroup_scope = matches!(
            op,
            Op::Setmaxnreg { .. }
                | Op::WgmmaFence
                | Op::WgmmaCommit
                | Op::WgmmaWait { .. }
                | Op::Wgmma(_)
        );
        if warpgroup_scope {
            self.warpgroup_step(w, pc)?;
        }
        match *op {
            Op::Shfl { mode, d, p, a, b, c, .. } => {
                self.shfl(w, pc, waiting, mode, d, p, [a, b, c])?
            }
            Op::Vote { mode, d, a, negate, .. } => {
                let preds: Vec<(usize, bool)> =
                    bits(waiting).map(|l| (l, (self.read(w, a, l) & 1 != 0) != negate)).collect();
                let ballot = preds.iter().filter(|(_, p)| *p).fold(0u64, |m, (l, _)| m | 1 << l);
                let value = match mode {
                    VoteMode::All => preds.iter().all(|(_, p)| *p) as u64,
                    VoteMode::Any => preds.iter().any(|(_, p)| *p) as u64,
                    VoteMode::Uni => (ballot == 0 || ballot == waiting as u64) as u64,
                    VoteMode::Ballot => ballot,
                };
                for (l, _) in preds {
                    w.set(d, l, value);
                }
            }
            Op::Redux { op, signed, d, a, .. } => {
                let values: Vec<u32> = bits(waiting).map(|l| self.read(w, a, l) as u32).collect();
                let value = match op {
                    ReduxOp::Add => values.iter().fold(0u32, |s, v| s.wrapping_add(*v)),
                    ReduxOp::Min if signed => {
                        values.iter().map(|v| *v as i32).min().unwrap_or(0) as u32
                    }
                    ReduxOp::Max if signed => {
                        values.iter().map(|v| *v as i32).max().unwrap_or(0) as u32
                    }
                    ReduxOp::Min => values.iter().copied().min().unwrap_or(0),
                    ReduxOp::Max => values.iter().copied().max().unwrap_or(0),
                    ReduxOp::And => values.iter().fold(u32::MAX, |s, v| s & v),
                    ReduxOp::Or => values.iter().fold(0, |s, v| s | v),
                    ReduxOp::Xor => values.iter().fold(0, |s, v| s ^ v),
                };
                for l in bits(waiting) {
                    w.set(d, l, value as u64);
                }
            }
            Op::BarWarp { .. } => w.warp_sync += 1,
            Op::Mma { kind, d, a, b, c } => self.mma(w, kind, d, a, b, c),
            Op::Ldmatrix { n, trans, d, addr, space } => {
                if self.profile.is_some() {
                    self.profile_ldmatrix(w, pc, n, addr);
                }
                self.ldmatrix(w, pc, n, trans, d, addr, space)?
            }
            Op::Elect { d, p, .. } => self.elect(w, waiting, d, p),
            Op::Setmaxnreg { .. } => {}
            Op::WgmmaFence => self.wgmma_fence(w),
            Op::WgmmaCommit => self.wgmma_commit(w),
            Op::WgmmaWait { n } => self.wgmma_wait(w, n),
            Op::Wgmma(ref op) => self.wgmma(w, pc, op)?,
            ref other => unreachable!("{other:?} is not a collective"),
        }
        for lane in bits(waiting) {
            w.state[lane] = Lane::Ready;
            w.pc[lane] = pc + 1;
        }
        Ok(())
    }

    /// The member mask the waiting lanes agree on (an error if they do not, or if a lane is
    /// not in it).
    fn member_mask(&self, w: &Warp, pc: u32, waiting: u32, src: Src) -> Result<u32, GpuError> {
        let lead = bits(waiting).next().unwrap_or(0);
        let mask = self.read(w, src, lead) as u32;
        for lane in bits(waiting) {
            let m = self.read(w, src, lane) as u32;
            if m != mask {
                let what = format!(
                    "lanes of the warp execute this instruction with different member masks ({m:#010x} here, {mask:#010x} in lane {lead})"
                );
                return Err(self.fault(SimErrorKind::IllegalCollective, w, lane, pc, what));
            }
            if m & (1 << lane) == 0 {
                let what = format!(
                    "the executing lane is not in the member mask {m:#010x} (undefined in PTX)"
                );
                return Err(self.fault(SimErrorKind::IllegalCollective, w, lane, pc, what));
            }
        }
        Ok(mask)
    }

    /// `shfl.sync` per the PTX ISA pseudo-code: the source lane `j` is computed from `b` and
    /// the clamp/segment fields of `c`; an out-of-range source reads the lane's own value and
    /// clears the predicate. A source lane outside the member mask is an error (its value is
    /// undefined in PTX).
    #[allow(
        clippy::too_many_arguments,
        reason = "the interpreter's per-instruction state, passed without an intermediate struct in the hot loop"
    )]
    fn shfl(
        &self,
        w: &mut Warp,
        pc: u32,
        members: u32,
        mode: ShflMode,
        d: u32,
        p: Option<u32>,
        [a, b, c]: [Src; 3],
    ) -> Result<(), GpuError> {
        let mut results = Vec::with_capacity(32);
        for lane in bits(members) {
            let (bval, cval) = (self.read(w, b, lane) as u32, self.read(w, c, lane) as u32);
            let lane_i = lane as i32;
            let (b5, clamp, seg) =
                ((bval & 31) as i32, (cval & 31) as i32, ((cval >> 8) & 31) as i32);
            let max_lane = (lane_i & seg) | (clamp & !seg);
            let min_lane = lane_i & seg;
            let (j, valid) = match mode {
                ShflMode::Up => (lane_i - b5, lane_i - b5 >= max_lane),
                ShflMode::Down => (lane_i + b5, lane_i + b5 <= max_lane),
                ShflMode::Bfly => (lane_i ^ b5, (lane_i ^ b5) <= max_lane),
                ShflMode::Idx => (min_lane | (b5 & !seg), (min_lane | (b5 & !seg)) <= max_lane),
            };
            let j = if valid { j as usize } else { lane };
            if members & (1 << j) == 0 {
                let what = format!(
                    "shfl.sync reads lane {j}, which is not in the member mask {members:#010x} (the value is undefined in PTX)"
                );
                return Err(self.fault(SimErrorKind::IllegalCollective, w, lane, pc, what));
            }
            results.push((lane, self.read(w, a, j) & 0xffff_ffff, valid));
        }
        for (lane, value, valid) in results {
            w.set(d, lane, value);
            if let Some(p) = p {
                w.set(p, lane, valid as u64);
            }
        }
        Ok(())
    }
}

impl Block<'_> {
    /// `w` executes the warpgroup-scope instruction at `pc` (`wgmma.*`, `setmaxnreg`): the
    /// four warps of a warpgroup must issue the same such instructions in the same order, so
    /// this warp's k-th one must be the instruction its group's k-th one was.
    pub(super) fn warpgroup_step(&mut self, w: &mut Warp, pc: u32) -> Result<(), GpuError> {
        let group = w.index / 4;
        let issued = self.warpgroups.entry(group).or_default();
        let k = w.warpgroup_ops;
        w.warpgroup_ops += 1;
        match issued.get(k) {
            None => issued.push(pc),
            Some(&first) if first != pc => {
                let what = format!(
                    "warpgroup-scope instruction {} of warp {} (in warpgroup {group}, warps {}..={}) is at PTX line {}, where another warp of the warpgroup executed PTX line {}: wgmma and setmaxnreg are issued by the four warps of a warpgroup together",
                    k + 1,
                    w.index,
                    4 * group,
                    4 * group + 3,
                    self.kernel.info[pc as usize].line,
                    self.kernel.info[first as usize].line,
                );
                let lane = bits(w.exists).next().unwrap_or(0);
                return Err(self.fault(SimErrorKind::IllegalCollective, w, lane, pc, what));
            }
            Some(_) => {}
        }
        Ok(())
    }

    /// At the end of the block: every warp of a warpgroup that issued warpgroup-scope
    /// instructions issued all of them (a warp that skipped some, or a warpgroup the block
    /// has fewer than four warps of, is an error).
    pub(super) fn check_warpgroups_complete(&self, warps: &[Warp]) -> Result<(), GpuError> {
        for (&group, issued) in &self.warpgroups {
            let members = (4 * group..4 * group + 4).map(|i| warps.get(i as usize));
            for (i, member) in (4 * group..).zip(members) {
                let done = member.map_or(0, |m| m.warpgroup_ops);
                if done == issued.len() {
                    continue;
                }
                let reporter =
                    member.or_else(|| warps.get(4 * group as usize)).unwrap_or(&warps[0]);
                let pc = issued[done];
                let what = match member {
                    Some(_) => format!(
                        "warp {i} executed {done} of the {} warpgroup-scope instructions (wgmma, setmaxnreg) that warpgroup {group} issued; the first it skipped is at PTX line {}: the four warps of a warpgroup issue them together",
                        issued.len(),
                        self.kernel.info[pc as usize].line,
                    ),
                    None => format!(
                        "warpgroup {group} issued warpgroup-scope instructions (wgmma, setmaxnreg; the first at PTX line {}) but the block has no warp {i}: a warpgroup is four whole warps",
                        self.kernel.info[issued[0] as usize].line,
                    ),
                };
                let lane = bits(reporter.exists).next().unwrap_or(0);
                return Err(self.fault(SimErrorKind::IllegalCollective, reporter, lane, pc, what));
            }
        }
        Ok(())
    }
}
