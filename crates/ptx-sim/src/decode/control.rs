//! Decoding of control flow, barriers and warp-collective instructions (including `mma.sync`
//! and `ldmatrix`).

use super::mods::Mods;
use super::op::*;
use super::{FnDecoder, Want, arity, one_type};
use crate::parse::Operand;

type R<T> = Result<T, String>;

pub(super) fn decode(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    match m.base {
        "bra" => {
            m.has("uni");
            arity(ops, 1, "bra")?;
            Ok(Op::Bra { target: d.label(&ops[0])? })
        }
        "ret" | "exit" => {
            m.has("uni");
            arity(ops, 0, m.base)?;
            Ok(Op::Exit)
        }
        "trap" => {
            arity(ops, 0, "trap")?;
            Ok(Op::Trap)
        }
        "nanosleep" => {
            m.has("u32");
            arity(ops, 1, "nanosleep")?;
            Ok(Op::Nop)
        }
        "bar" | "barrier" => barrier(d, m, ops),
        "shfl" => shfl(d, m, ops),
        "vote" => vote(d, m, ops),
        "redux" => redux(d, m, ops),
        "activemask" => {
            if one_type(m)? != "b32" {
                return Err("activemask writes .b32".into());
            }
            arity(ops, 1, "activemask")?;
            Ok(Op::Activemask { d: d.dst(&ops[0])? })
        }
        "mma" => mma(d, m, ops),
        "ldmatrix" => ldmatrix(d, m, ops),
        other => Err(format!("unknown instruction `{other}`")),
    }
}

fn barrier(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    m.has("cta");
    if m.has("warp") {
        if !m.has("sync") {
            return Err("only bar.warp.sync is supported".into());
        }
        arity(ops, 1, "bar.warp.sync")?;
        return Ok(Op::BarWarp { mask: d.src(&ops[0], Want::Int(32))? });
    }
    if !m.has("sync") {
        return Err(format!(
            "`{}` without .sync (arrive/red) is not supported; use bar.sync",
            m.base
        ));
    }
    let aligned = m.has("aligned") || m.base == "bar";
    match ops.len() {
        1 => Ok(Op::Bar { id: d.src(&ops[0], Want::Int(32))?, count: None, aligned }),
        2 => Ok(Op::Bar {
            id: d.src(&ops[0], Want::Int(32))?,
            count: Some(d.src(&ops[1], Want::Int(32))?),
            aligned,
        }),
        n => Err(format!("bar.sync takes 1 or 2 operands, found {n}")),
    }
}

fn need_sync(m: &mut Mods) -> R<()> {
    if m.has("sync") {
        Ok(())
    } else {
        Err(format!("`{}` without .sync (pre-Volta form) is not supported", m.base))
    }
}

fn shfl(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    need_sync(m)?;
    let mode = match m.one_of(&["up", "down", "bfly", "idx"]) {
        Some("up") => ShflMode::Up,
        Some("down") => ShflMode::Down,
        Some("bfly") => ShflMode::Bfly,
        Some(_) => ShflMode::Idx,
        None => return Err("shfl.sync needs .up/.down/.bfly/.idx".into()),
    };
    if one_type(m)? != "b32" {
        return Err("shfl.sync moves .b32".into());
    }
    arity(ops, 5, "shfl.sync")?;
    let (dst, p) = match &ops[0] {
        Operand::Pair(v, p) => (d.dst(&Operand::Name(v.clone()))?, Some(d.pred_reg(p)?)),
        o => (d.dst(o)?, None),
    };
    let w = Want::Int(32);
    Ok(Op::Shfl {
        mode,
        d: dst,
        p,
        a: d.src(&ops[1], w)?,
        b: d.src(&ops[2], w)?,
        c: d.src(&ops[3], w)?,
        mask: d.src(&ops[4], w)?,
    })
}

fn vote(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    need_sync(m)?;
    let mode = match m.one_of(&["all", "any", "uni", "ballot"]) {
        Some("all") => VoteMode::All,
        Some("any") => VoteMode::Any,
        Some("uni") => VoteMode::Uni,
        Some(_) => VoteMode::Ballot,
        None => return Err("vote.sync needs .all/.any/.uni/.ballot".into()),
    };
    let t = one_type(m)?;
    if (mode == VoteMode::Ballot) != (t == "b32") || (mode != VoteMode::Ballot && t != "pred") {
        return Err("vote.sync.ballot writes .b32, the other modes .pred".into());
    }
    arity(ops, 3, "vote.sync")?;
    let (a, negate) = d.pred_src(&ops[1])?;
    Ok(Op::Vote { mode, d: d.dst(&ops[0])?, a, negate, mask: d.src(&ops[2], Want::Int(32))? })
}

fn redux(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    need_sync(m)?;
    let op = match m.one_of(&["add", "min", "max", "and", "or", "xor"]) {
        Some("add") => ReduxOp::Add,
        Some("min") => ReduxOp::Min,
        Some("max") => ReduxOp::Max,
        Some("and") => ReduxOp::And,
        Some("or") => ReduxOp::Or,
        Some(_) => ReduxOp::Xor,
        None => return Err("redux.sync needs an operation".into()),
    };
    let t = one_type(m)?;
    let bitwise = matches!(op, ReduxOp::And | ReduxOp::Or | ReduxOp::Xor);
    let signed = match (t, bitwise) {
        ("b32", true) => false,
        ("u32", false) => false,
        ("s32", false) => true,
        _ => return Err(format!("redux.sync {op:?} on .{t} is not supported")),
    };
    arity(ops, 3, "redux.sync")?;
    let w = Want::Int(32);
    Ok(Op::Redux {
        op,
        signed,
        d: d.dst(&ops[0])?,
        a: d.src(&ops[1], w)?,
        mask: d.src(&ops[2], w)?,
    })
}

/// The registers of a `{...}` operand, as sources.
fn vec_srcs<const N: usize>(d: &FnDecoder, o: &Operand, what: &str) -> R<[Src; N]> {
    match o {
        Operand::Vec(items) if items.len() == N => {
            let mut out = [Src::Imm(0); N];
            for (i, item) in items.iter().enumerate() {
                out[i] = d.src(item, Want::Int(32))?;
            }
            Ok(out)
        }
        other => Err(format!("{what} takes {N} registers, found {other:?}")),
    }
}

fn mma(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    need_sync(m)?;
    if !m.has("aligned") {
        return Err("mma.sync needs .aligned".into());
    }
    let shape = m.one_of(&["m16n8k16", "m16n8k8"]).ok_or("unsupported mma shape")?;
    if !(m.has("row") && m.has("col")) {
        return Err("only mma.sync .row.col layouts are supported".into());
    }
    let types = m.types();
    let kind = match (shape, types.as_slice()) {
        ("m16n8k16", ["f32", "bf16", "bf16", "f32"]) => MmaKind::Bf16M16N8K16,
        ("m16n8k16", ["f32", "f16", "f16", "f32"]) => MmaKind::F16M16N8K16,
        ("m16n8k8", ["f32", "tf32", "tf32", "f32"]) => MmaKind::Tf32M16N8K8,
        (shape, t) => return Err(format!("mma.sync.{shape} with types {t:?} is not supported")),
    };
    arity(ops, 4, "mma.sync")?;
    let dst: [Src; 4] = vec_srcs(d, &ops[0], "mma d")?;
    let mut dslots = [0; 4];
    for (i, s) in dst.iter().enumerate() {
        match s {
            Src::Reg(slot) => dslots[i] = *slot,
            _ => return Err("mma d must be registers".into()),
        }
    }
    Ok(Op::Mma {
        kind,
        d: dslots,
        a: vec_srcs(d, &ops[1], "mma a")?,
        b: vec_srcs(d, &ops[2], "mma b")?,
        c: vec_srcs(d, &ops[3], "mma c")?,
    })
}

fn ldmatrix(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    need_sync(m)?;
    if !m.has("aligned") || !m.has("m8n8") {
        return Err("only ldmatrix.sync.aligned.m8n8 is supported".into());
    }
    let n: u8 = match m.one_of(&["x1", "x2", "x4"]) {
        Some("x1") => 1,
        Some("x2") => 2,
        Some(_) => 4,
        None => return Err("ldmatrix needs .x1/.x2/.x4".into()),
    };
    let trans = m.has("trans");
    let space =
        if m.has("shared") || m.has("shared::cta") { Space::Shared } else { Space::Generic };
    if one_type(m)? != "b16" {
        return Err("only ldmatrix .b16 is supported".into());
    }
    arity(ops, 2, "ldmatrix")?;
    let regs = match &ops[0] {
        Operand::Vec(items) if items.len() == n as usize => items.clone(),
        other => return Err(format!("ldmatrix .x{n} writes {n} registers, found {other:?}")),
    };
    let mut dst = [0; 4];
    for (i, r) in regs.iter().enumerate() {
        dst[i] = d.dst(r)?;
    }
    Ok(Op::Ldmatrix { n, trans, d: dst, addr: d.addr(&ops[1])?, space })
}

#[cfg(test)]
mod tests {
    use crate::decode::decode_module;
    use crate::parse::parse_module;

    fn decode_one(body: &str) -> Result<(), String> {
        let src = format!(
            ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{{\n\
             .reg .pred %p<4>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<8>;\n{body}\n}}\n"
        );
        let module = parse_module(&src).map_err(|e| e.to_string())?;
        let kernels = decode_module(&module);
        kernels["k"].as_ref().map(|_| ()).map_err(|e| e.to_string())
    }

    #[test]
    fn decodes_collectives_and_tensor_core_ops() {
        decode_one("shfl.sync.bfly.b32 %r1|%p1, %r2, 16, 0x1f, -1;").unwrap();
        decode_one("vote.sync.ballot.b32 %r1, !%p1, -1;").unwrap();
        decode_one("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r0,%r1,%r2,%r3};").unwrap();
        decode_one("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%r0, %r1}, [%r2];").unwrap();
        decode_one("bar.sync 0;").unwrap();
    }

    #[test]
    fn names_what_it_does_not_implement() {
        let e = decode_one("frobnicate.b32 %r1, %r2;").unwrap_err();
        assert!(
            e.contains("unknown instruction `frobnicate.b32`") && e.contains("kernel `k`"),
            "{e}"
        );
        let e = decode_one("add.rz.f32 %r1, %r2, %r3;").unwrap_err();
        assert!(e.contains(".rz"), "{e}");
        let e = decode_one("add.cc.u32 %r1, %r2, %r3;").unwrap_err();
        assert!(e.contains("unsupported modifier(s) .cc"), "{e}");
        let e = decode_one("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%r0,%r1,%r2,%r3}, {%r4,%r5,%r6,%r7}, {%r8,%r9}, {%r0,%r1,%r2,%r3};").unwrap_err();
        assert!(e.contains("mma shape"), "{e}");
        let e = decode_one("add.u32 %r1, %r99, 1;").unwrap_err();
        assert!(e.contains("undeclared name `%r99`") && e.contains("line 9"), "{e}");
    }
}
