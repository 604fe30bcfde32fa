//! Decoding of memory instructions: `ld`, `st`, atomics, `cp.async`, address conversions and
//! fences.

use super::mods::{Mods, int_ty};
use super::op::*;
use super::{FnDecoder, Want, arity, one_type};
use crate::parse::Operand;

type R<T> = Result<T, String>;

/// Memory-ordering and scope qualifiers: the simulator executes every access in program
/// order, sequentially consistent, so they need no modelling.
const ORDERING: &[&str] =
    &["weak", "volatile", "relaxed", "acquire", "release", "acq_rel", "sc", "cta", "gpu", "sys"];

/// Cache operators: no effect on results.
const CACHE_OPS: &[&str] = &["ca", "cg", "cs", "lu", "cv", "wb", "wt"];

pub(super) fn decode(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    match m.base {
        "ld" | "ldu" | "st" => ld_st(d, m, ops),
        "atom" | "red" => atom(d, m, ops),
        "cp" => cp_async(d, m, ops),
        "cvta" => {
            let to = m.has("to");
            let space = space(m)?;
            if space == Space::Generic {
                return Err("cvta needs a state space".into());
            }
            let bits = match one_type(m)? {
                "u32" => 32,
                "u64" => 64,
                t => return Err(format!("cvta.{t} is not supported")),
            };
            if bits != 64 {
                return Err("only 64-bit cvta is supported".into());
            }
            arity(ops, 2, "cvta")?;
            Ok(Op::Cvta { to, space, d: d.dst(&ops[0])?, a: d.src(&ops[1], Want::Int(64))? })
        }
        "isspacep" => {
            let space = space(m)?;
            arity(ops, 2, "isspacep")?;
            Ok(Op::Isspacep { space, d: d.dst(&ops[0])?, a: d.src(&ops[1], Want::Int(64))? })
        }
        "prefetch" | "prefetchu" => {
            if m.has("tensormap") {
                return Ok(Op::Nop);
            }
            space(m)?;
            m.ignore_prefixed("L1");
            m.ignore_prefixed("L2");
            Ok(Op::Nop)
        }
        "membar" | "fence" => {
            let proxy = m.has("proxy");
            if proxy && m.has("tensormap::generic") {
                return fence_proxy_tensormap(d, m, ops);
            }
            m.ignore(ORDERING);
            m.has("gl");
            m.has("cluster");
            m.has("mbarrier_init");
            if proxy {
                if m.has("async") {
                    m.ignore(&["shared::cta", "shared::cluster", "global"]);
                    return Ok(Op::FenceProxyAsync);
                }
                m.ignore(&["alias"]);
            }
            Ok(Op::Fence)
        }
        other => Err(format!("unknown instruction `{other}`")),
    }
}

/// `fence.proxy.tensormap::generic.acquire.{cta,cluster,gpu,sys} [map], 128`. The release
/// form, which only a kernel that writes tensor maps needs, is not supported.
fn fence_proxy_tensormap(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    if !m.has("acquire") {
        return Err("only the acquire form of fence.proxy.tensormap::generic is supported".into());
    }
    let scope = m
        .one_of(&["cta", "cluster", "gpu", "sys"])
        .ok_or("fence.proxy.tensormap::generic.acquire needs a scope")?;
    arity(ops, 2, "fence.proxy.tensormap")?;
    if d.src(&ops[1], Want::Int(32))? != Src::Imm(128) {
        return Err("fence.proxy.tensormap's size operand must be 128 (a tensor map's)".into());
    }
    Ok(Op::FenceProxyTensormap { map: d.addr(&ops[0])?, sys: scope == "sys" })
}

/// The state-space modifier (`Generic` when absent).
fn space(m: &mut Mods) -> R<Space> {
    Ok(
        match m.one_of(&[
            "global",
            "shared",
            "shared::cta",
            "local",
            "param",
            "param::entry",
            "const",
            "shared::cluster",
            "param::func",
        ]) {
            None => Space::Generic,
            Some("global") => Space::Global,
            Some("shared" | "shared::cta") => Space::Shared,
            Some("local") => Space::Local,
            Some("param" | "param::entry") => Space::Param,
            Some(other) => return Err(format!("state space .{other} is not supported")),
        },
    )
}

/// `.L2::cache_hint` adds a trailing cache-policy operand; other `L1::`/`L2::` hints have no
/// effect. Returns whether the operand is present.
fn cache_hints(m: &mut Mods) -> bool {
    m.ignore_prefixed("L1::");
    m.ignore_prefixed("L2::").contains(&"L2::cache_hint")
}

fn ld_st(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    let is_store = m.base == "st";
    let space = space(m)?;
    m.ignore(ORDERING);
    m.ignore(CACHE_OPS);
    let nc = m.has("nc");
    if nc && (is_store || space != Space::Global) {
        return Err(".nc applies to ld.global only".into());
    }
    let hint = cache_hints(m);
    let n: u8 = match m.one_of(&["v2", "v4"]) {
        Some("v2") => 2,
        Some(_) => 4,
        None => 1,
    };
    let t = one_type(m)?;
    let (bits, signed) = match (t, int_ty(t)) {
        ("f32", _) => (32, false),
        ("f64", _) => (64, false),
        ("f16" | "bf16", _) => (16, false),
        ("f16x2" | "bf16x2", _) => (32, false),
        (_, Some(i)) if i.bits >= 8 => (i.bits, i.signed),
        _ => return Err(format!("ld/st of .{t} is not supported")),
    };
    arity(ops, 2 + hint as usize, m.base)?;
    let (value, address) = if is_store { (&ops[1], &ops[0]) } else { (&ops[0], &ops[1]) };
    let addr = d.addr(address)?;
    let items: Vec<&Operand> = match value {
        Operand::Vec(items) if items.len() == n as usize && n > 1 => items.iter().collect(),
        v if n == 1 && !matches!(v, Operand::Vec(_)) => vec![v],
        other => return Err(format!("expected {n} value operand(s), found {other:?}")),
    };
    let want = match t {
        "f32" => Want::F32,
        "f64" => Want::F64,
        _ => Want::Int(bits),
    };
    if is_store {
        let mut v = [Src::Imm(0); 4];
        for (i, item) in items.iter().enumerate() {
            v[i] = d.src(item, want)?;
        }
        Ok(Op::St { space, bits, n, v, addr })
    } else {
        let mut dst = [None; 4];
        for (i, item) in items.iter().enumerate() {
            dst[i] = d.dst_or_sink(item)?;
        }
        Ok(Op::Ld { space, bits, signed, n, d: dst, addr })
    }
}

fn atom(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    let is_red = m.base == "red";
    let space = space(m)?;
    if matches!(space, Space::Local | Space::Param) {
        return Err("atomics on .local/.param are not supported".into());
    }
    m.ignore(ORDERING);
    let hint = cache_hints(m);
    let names = ["add", "min", "max", "inc", "dec", "and", "or", "xor", "exch", "cas"];
    let op = match m.one_of(&names).ok_or("atomic needs an operation")? {
        "add" => AtomOp::Add,
        "min" => AtomOp::Min,
        "max" => AtomOp::Max,
        "inc" => AtomOp::Inc,
        "dec" => AtomOp::Dec,
        "and" => AtomOp::And,
        "or" => AtomOp::Or,
        "xor" => AtomOp::Xor,
        "exch" => AtomOp::Exch,
        _ => AtomOp::Cas,
    };
    let t = one_type(m)?;
    let ty = match (t, int_ty(t)) {
        ("f32", _) => AtomTy::F32,
        ("f64", _) => AtomTy::F64,
        (_, Some(i)) if i.bits >= 32 => AtomTy::Int(i),
        _ => return Err(format!("atomics on .{t} are not supported")),
    };
    let float_ok = matches!(op, AtomOp::Add | AtomOp::Exch);
    if matches!(ty, AtomTy::F32 | AtomTy::F64) && !float_ok {
        return Err(format!("atomic {op:?} on .{t} is not supported"));
    }
    let want = match ty {
        AtomTy::Int(i) => Want::Int(i.bits),
        AtomTy::F32 => Want::F32,
        AtomTy::F64 => Want::F64,
    };
    let operands = if op == AtomOp::Cas { 3 } else { 2 } + !is_red as usize + hint as usize;
    arity(ops, operands, m.base)?;
    let (dst, rest) = if is_red { (None, ops) } else { (Some(d.dst(&ops[0])?), &ops[1..]) };
    let addr = d.addr(&rest[0])?;
    let b = d.src(&rest[1], want)?;
    let c = if op == AtomOp::Cas { d.src(&rest[2], want)? } else { Src::Imm(0) };
    if is_red && op == AtomOp::Cas {
        return Err("red.cas does not exist".into());
    }
    Ok(Op::Atom { space, op, ty, d: dst, addr, b, c })
}

fn cp_async(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    if !m.has("async") {
        return Err("only cp.async is supported among cp.* instructions".into());
    }
    if m.has("bulk") {
        return super::hopper::tma(d, m, ops);
    }
    if m.has("commit_group") {
        arity(ops, 0, "cp.async.commit_group")?;
        return Ok(Op::CpAsyncCommit);
    }
    if m.has("wait_all") {
        arity(ops, 0, "cp.async.wait_all")?;
        return Ok(Op::CpAsyncWait { n: 0, all: true });
    }
    if m.has("wait_group") {
        arity(ops, 1, "cp.async.wait_group")?;
        return match ops[0] {
            Operand::Int(n) if (0..=u32::MAX as i128).contains(&n) => {
                Ok(Op::CpAsyncWait { n: n as u32, all: false })
            }
            ref other => Err(format!("wait_group needs an immediate, found {other:?}")),
        };
    }
    let cg = match m.one_of(&["ca", "cg"]) {
        Some(c) => c == "cg",
        None => return Err("cp.async needs .ca or .cg (bulk copies are not supported)".into()),
    };
    if !m.has("shared") && !m.has("shared::cta") {
        return Err("cp.async copies into .shared".into());
    }
    if !m.has("global") {
        return Err("cp.async copies from .global".into());
    }
    let hint = cache_hints(m);
    let ops = &ops[..ops.len().saturating_sub(hint as usize)];
    if !(3..=4).contains(&ops.len()) {
        return Err(format!("cp.async takes 3 or 4 operands, found {}", ops.len()));
    }
    let cp_size = match ops[2] {
        Operand::Int(s @ (4 | 8 | 16)) => s as u8,
        ref other => return Err(format!("cp-size must be 4, 8 or 16, found {other:?}")),
    };
    if cg && cp_size != 16 {
        return Err("cp.async.cg copies 16 bytes".into());
    }
    let (src_size, ignore_src) = match ops.get(3) {
        None => (None, None),
        Some(o) if d.is_pred(o) => (None, Some(d.pred_src(o)?)),
        Some(o) => (Some(d.src(o, Want::Int(32))?), None),
    };
    Ok(Op::CpAsync { cp_size, dst: d.addr(&ops[0])?, src: d.addr(&ops[1])?, src_size, ignore_src })
}
