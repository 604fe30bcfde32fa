//! Decoding of the sm_90 asynchronous instructions: `mbarrier`, `cp.async.bulk.tensor` (TMA),
//! `fence.proxy.async`, `elect.sync`, `setmaxnreg`, `griddepcontrol` and the `wgmma` family.

use super::mods::Mods;
use super::op::*;
use super::{FnDecoder, Want, arity};
use crate::parse::Operand;

type R<T> = Result<T, String>;

pub(super) fn decode(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    match m.base {
        "mbarrier" => mbarrier(d, m, ops),
        "elect" => {
            if !m.has("sync") {
                return Err("elect needs .sync".into());
            }
            arity(ops, 2, "elect.sync")?;
            let (dst, p) = match &ops[0] {
                Operand::Pair(v, p) if v == "_" => (None, d.pred_reg(p)?),
                Operand::Pair(v, p) => (Some(d.dst(&Operand::Name(v.clone()))?), d.pred_reg(p)?),
                other => return Err(format!("elect.sync writes `d|p`, found {other:?}")),
            };
            Ok(Op::Elect { d: dst, p, mask: d.src(&ops[1], Want::Int(32))? })
        }
        "setmaxnreg" => {
            let inc = match m.one_of(&["inc", "dec"]) {
                Some(x) => x == "inc",
                None => return Err("setmaxnreg needs .inc or .dec".into()),
            };
            if !(m.has("sync") && m.has("aligned") && m.has("u32")) {
                return Err("setmaxnreg must be .sync.aligned.u32".into());
            }
            arity(ops, 1, "setmaxnreg")?;
            match ops[0] {
                Operand::Int(n) if (24..=256).contains(&n) && n % 8 == 0 => {
                    Ok(Op::Setmaxnreg { inc, regs: n as u32 })
                }
                ref other => Err(format!(
                    "setmaxnreg takes an immediate multiple of 8 in 24..=256, found {other:?}"
                )),
            }
        }
        "wgmma" => wgmma(d, m, ops),
        // Programmatic dependent launch: the simulator runs a stream's launches one after
        // another, so every prerequisite grid has completed when a kernel starts (`wait` has
        // nothing to wait for) and no kernel starts early (`launch_dependents` changes nothing).
        "griddepcontrol" => {
            if m.one_of(&["wait", "launch_dependents"]).is_none() {
                return Err("griddepcontrol needs .wait or .launch_dependents".into());
            }
            arity(ops, 0, "griddepcontrol")?;
            Ok(Op::Nop)
        }
        other => Err(format!("unknown instruction `{other}`")),
    }
}

/// `.shared::cta` / `.shared` (the only space the simulator's mbarriers live in).
fn shared_space(m: &mut Mods, what: &str) -> R<()> {
    if m.has("shared::cta") || m.has("shared") {
        Ok(())
    } else {
        Err(format!("{what}: only the .shared::cta form is supported"))
    }
}

fn mbarrier(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    m.ignore(&["release", "acquire", "relaxed", "cta"]);
    if m.has("init") {
        shared_space(m, "mbarrier.init")?;
        m.has("b64");
        arity(ops, 2, "mbarrier.init")?;
        return Ok(Op::MbarInit { addr: d.addr(&ops[0])?, count: d.src(&ops[1], Want::Int(32))? });
    }
    let blocking = m.has("try_wait");
    if blocking || m.has("test_wait") {
        if !m.has("parity") {
            return Err("only the .parity forms of mbarrier waits are supported".into());
        }
        shared_space(m, "mbarrier wait")?;
        m.has("b64");
        arity(ops, 3, "mbarrier.try_wait.parity")?;
        return Ok(Op::MbarWait {
            p: d.pred_reg(match &ops[0] {
                Operand::Name(n) => n,
                other => return Err(format!("expected a predicate, found {other:?}")),
            })?,
            addr: d.addr(&ops[1])?,
            parity: d.src(&ops[2], Want::Int(32))?,
            blocking,
        });
    }
    let arrive = m.has("arrive");
    let expect_tx = m.has("expect_tx");
    if !arrive && !expect_tx {
        return Err("supported mbarrier forms: init, arrive[.expect_tx], expect_tx, \
                    try_wait.parity, test_wait.parity"
            .into());
    }
    shared_space(m, "mbarrier.arrive")?;
    m.has("b64");
    let (state, rest) = if arrive {
        match ops.split_first() {
            Some((s, rest)) => (d.dst_or_sink(s)?, rest),
            None => return Err("mbarrier.arrive writes a state operand (or `_`)".into()),
        }
    } else {
        (None, ops)
    };
    arity(rest, if expect_tx { 2 } else { 1 }, "mbarrier.arrive")?;
    let tx = if expect_tx { Some(d.src(&rest[1], Want::Int(32))?) } else { None };
    Ok(Op::MbarArrive { addr: d.addr(&rest[0])?, tx, arrive, state })
}

/// `cp.async.bulk.tensor.{2d,3d}.shared::cluster.global.tile.mbarrier::complete_tx::bytes`, or
/// `cp.async.bulk.prefetch.L2.global`.
pub(super) fn tma(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    if m.has("prefetch") {
        if !m.has("L2") || !m.has("global") || m.has("tensor") {
            return Err(
                "only cp.async.bulk.prefetch.L2.global (no tensor prefetch) is supported".into()
            );
        }
        arity(ops, 2, "cp.async.bulk.prefetch")?;
        return Ok(Op::BulkPrefetch {
            addr: d.addr(&ops[0])?,
            size: d.src(&ops[1], Want::Int(32))?,
        });
    }
    if !m.has("tensor") {
        return Err("only cp.async.bulk.tensor (TMA tile loads) is supported".into());
    }
    let rank: u8 = if m.has("2d") {
        2
    } else if m.has("3d") {
        3
    } else {
        return Err("only 2-D and 3-D tensor copies are supported".into());
    };
    if !(m.has("shared::cluster") || m.has("shared::cta")) || !m.has("global") {
        return Err("only global → shared tensor copies are supported".into());
    }
    m.has("tile");
    if !(m.has("mbarrier::complete_tx::bytes")) {
        return Err("the tensor copy must complete on an mbarrier (complete_tx::bytes)".into());
    }
    arity(ops, 3, "cp.async.bulk.tensor")?;
    let (map, coords) = match &ops[1] {
        Operand::Tensor { map, coords } => match coords.as_ref() {
            Operand::Vec(c) if c.len() == rank as usize => {
                let mut coords = [Src::Imm(0); 3];
                for (to, from) in coords.iter_mut().zip(c) {
                    *to = d.src(from, Want::Int(32))?;
                }
                (d.src(&Operand::Name(map.clone()), Want::Int(64))?, coords)
            }
            other => {
                return Err(format!("a {rank}-D copy takes {rank} coordinates, found {other:?}"));
            }
        },
        other => return Err(format!("expected `[tensorMap, {{x, y, ...}}]`, found {other:?}")),
    };
    Ok(Op::TmaLoad { dst: d.addr(&ops[0])?, map, rank, coords, bar: d.addr(&ops[2])? })
}

fn wgmma(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    if !(m.has("sync") && m.has("aligned")) {
        return Err("wgmma instructions are .sync.aligned".into());
    }
    if m.has("fence") {
        arity(ops, 0, "wgmma.fence")?;
        return Ok(Op::WgmmaFence);
    }
    if m.has("commit_group") {
        arity(ops, 0, "wgmma.commit_group")?;
        return Ok(Op::WgmmaCommit);
    }
    if m.has("wait_group") {
        arity(ops, 1, "wgmma.wait_group")?;
        return match ops[0] {
            Operand::Int(n) if (0..=7).contains(&n) => Ok(Op::WgmmaWait { n: n as u32 }),
            ref other => Err(format!("wait_group takes an immediate 0..=7, found {other:?}")),
        };
    }
    if !m.has("mma_async") {
        return Err("supported wgmma forms: fence, commit_group, wait_group, mma_async".into());
    }
    let shape = m.ignore_prefixed("m64n").pop().ok_or("wgmma.mma_async needs a .m64nNkK shape")?;
    let (n, k) = shape
        .strip_prefix("m64n")
        .and_then(|s| s.split_once('k'))
        .and_then(|(n, k)| Some((n.parse::<u32>().ok()?, k.parse::<u32>().ok()?)))
        .ok_or_else(|| format!("bad wgmma shape .{shape}"))?;
    if !(8..=256).contains(&n) || n % 8 != 0 {
        return Err(format!("wgmma N must be a multiple of 8 in 8..=256, found {n}"));
    }
    let types = m.types();
    let kind = match (k, types.as_slice()) {
        (16, ["f32", "bf16", "bf16"]) => WgmmaKind::Bf16,
        (16, ["f32", "f16", "f16"]) => WgmmaKind::F16,
        (8, ["f32", "tf32", "tf32"]) => WgmmaKind::Tf32,
        (k, t) => {
            return Err(format!(
                "wgmma k{k} with types {t:?} is not supported (f32 accumulators with bf16/f16 k16 or tf32 k8 only)"
            ));
        }
    };
    // d, a-desc, b-desc, scale-d, imm-scale-a, imm-scale-b[, imm-trans-a, imm-trans-b]; with A
    // in registers (a `{..}` vector) there is no imm-trans-a. tf32 takes no imm-trans at all.
    let reg_a = matches!(ops.get(1), Some(Operand::Vec(_)));
    let trans_ops = match (kind, reg_a) {
        (WgmmaKind::Tf32, _) => 0,
        (_, true) => 1,
        (_, false) => 2,
    };
    arity(ops, 6 + trans_ops, "wgmma.mma_async")?;
    let dst = match &ops[0] {
        Operand::Vec(items) if items.len() == n as usize / 2 => {
            items.iter().map(|r| d.dst(r)).collect::<R<Vec<Slot>>>()?
        }
        other => {
            return Err(format!(
                "wgmma m64n{n} takes {} accumulator registers, found {other:?}",
                n / 2
            ));
        }
    };
    let a = match &ops[1] {
        Operand::Vec(items) if items.len() == 4 => {
            let mut regs = [Src::Imm(0); 4];
            for (r, item) in regs.iter_mut().zip(items) {
                *r = d.src(item, Want::Int(32))?;
            }
            if kind == WgmmaKind::Tf32 {
                return Err("register A operands are modelled for bf16/f16 only".into());
            }
            WgmmaA::Regs(regs)
        }
        o => WgmmaA::Desc(d.src(o, Want::Int(64))?),
    };
    let imm = |o: &Operand, allowed: &[i128], what: &str| match o {
        Operand::Int(v) if allowed.contains(v) => Ok(*v),
        other => Err(format!("wgmma {what} must be an immediate in {allowed:?}, found {other:?}")),
    };
    let neg_a = imm(&ops[4], &[1, -1], "imm-scale-a")? == -1;
    let neg_b = imm(&ops[5], &[1, -1], "imm-scale-b")? == -1;
    let trans = |i: usize, what: &str| imm(&ops[i], &[0, 1], what).map(|v| v == 1);
    let (trans_a, trans_b) = match trans_ops {
        0 => (false, false),
        1 => (false, trans(6, "imm-trans-b")?),
        _ => (trans(6, "imm-trans-a")?, trans(7, "imm-trans-b")?),
    };
    Ok(Op::Wgmma(Box::new(Wgmma {
        kind,
        n,
        d: dst,
        a,
        b: d.src(&ops[2], Want::Int(64))?,
        scale_d: d.pred_src(&ops[3])?,
        neg_a,
        neg_b,
        trans_a,
        trans_b,
    })))
}
