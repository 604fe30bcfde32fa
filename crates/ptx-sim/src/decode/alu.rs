//! Decoding of register-to-register instructions: moves, integer and float arithmetic,
//! comparisons, conversions.

use super::mods::{Mods, float_ty, int_ty};
use super::op::*;
use super::{FnDecoder, Want, arity, one_type};
use crate::exec::cvt as cvt_exec;
use crate::parse::Operand;

type R<T> = Result<T, String>;

pub(super) fn decode(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    match m.base {
        "mov" => mov(d, m, ops),
        "setp" => setp(d, m, ops),
        "selp" => {
            let t = one_type(m)?;
            arity(ops, 4, "selp")?;
            let (want, bits) = want_of(t)?;
            Ok(Op::Selp {
                bits,
                d: d.dst(&ops[0])?,
                a: d.src(&ops[1], want)?,
                b: d.src(&ops[2], want)?,
                p: d.pred_src(&ops[3]).and_then(|(p, neg)| match neg {
                    false => Ok(p),
                    true => Err("selp takes a plain predicate".to_string()),
                })?,
            })
        }
        "cvt" => cvt(d, m, ops),
        "testp" => {
            let op = match m.one_of(&[
                "finite",
                "infinite",
                "number",
                "notanumber",
                "normal",
                "subnormal",
            ]) {
                Some("finite") => TestpOp::Finite,
                Some("infinite") => TestpOp::Infinite,
                Some("number") => TestpOp::Number,
                Some("notanumber") => TestpOp::NotANumber,
                Some("normal") => TestpOp::Normal,
                Some(_) => TestpOp::Subnormal,
                None => return Err("testp needs a class".into()),
            };
            let ty = float(one_type(m)?, "testp")?;
            arity(ops, 2, "testp")?;
            Ok(Op::Testp { op, ty, d: d.dst(&ops[0])?, a: d.src(&ops[1], fwant(ty))? })
        }
        "copysign" => {
            let ty = float(one_type(m)?, "copysign")?;
            arity(ops, 3, "copysign")?;
            let (a, b) = (d.src(&ops[1], fwant(ty))?, d.src(&ops[2], fwant(ty))?);
            Ok(Op::FBinary {
                op: FBinOp::Copysign,
                ty,
                ftz: false,
                sat: false,
                d: d.dst(&ops[0])?,
                a,
                b,
            })
        }
        "sqrt" | "rsqrt" | "rcp" | "ex2" | "lg2" | "tanh" | "sin" | "cos" => float_unary(d, m, ops),
        "fma" => {
            let t = one_type(m)?;
            let ty = float(t, "fma")?;
            float_rounding(m, true)?;
            fma(d, m, ops, ty)
        }
        _ => {
            let t = one_type(m)?;
            if let Some(ty) = float_ty(t) {
                float_arith(d, m, ops, ty)
            } else if let Some(ty) = int_ty(t) {
                int_arith(d, m, ops, ty)
            } else {
                Err(format!("type .{t} of `{}` is not supported", m.base))
            }
        }
    }
}

/// How immediates of type `t` are encoded, and the width.
fn want_of(t: &str) -> R<(Want, u8)> {
    Ok(match t {
        "f32" => (Want::F32, 32),
        "f64" => (Want::F64, 64),
        "pred" => (Want::Pred, 1),
        _ => match int_ty(t) {
            Some(ty) => (Want::Int(ty.bits), ty.bits),
            None => match crate::parse::type_size(t) {
                Some(size) if size <= 8 => (Want::Int(size as u8 * 8), size as u8 * 8),
                _ => return Err(format!("unsupported type .{t}")),
            },
        },
    })
}

fn fwant(ty: FTy) -> Want {
    match ty {
        FTy::F32 => Want::F32,
        FTy::F64 => Want::F64,
    }
}

fn float(t: &str, what: &str) -> R<FTy> {
    float_ty(t).ok_or_else(|| format!("type .{t} of `{what}` is not supported (f32, f64 only)"))
}

fn mov(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    let t = one_type(m)?;
    arity(ops, 2, "mov")?;
    let (want, bits) = want_of(t)?;
    match (&ops[0], &ops[1]) {
        (Operand::Vec(parts), a) => {
            let n = parts.len();
            if !matches!(n, 2 | 4) || !(bits as usize).is_multiple_of(n) {
                return Err(format!("cannot unpack .{t} into {n} parts"));
            }
            let mut dst = [None; 4];
            for (i, p) in parts.iter().enumerate() {
                dst[i] = d.dst_or_sink(p)?;
            }
            let part_bits = bits / n as u8;
            Ok(Op::Unpack { d: dst, n: n as u8, part_bits, a: d.src(a, Want::Int(bits))? })
        }
        (dst, Operand::Vec(parts)) => {
            let n = parts.len();
            if !matches!(n, 2 | 4) || !(bits as usize).is_multiple_of(n) {
                return Err(format!("cannot pack {n} parts into .{t}"));
            }
            let part_bits = bits / n as u8;
            let mut srcs = [Src::Imm(0); 4];
            for (i, p) in parts.iter().enumerate() {
                srcs[i] = d.src(p, Want::Int(part_bits))?;
            }
            Ok(Op::Pack { d: d.dst(dst)?, parts: srcs, n: n as u8, part_bits })
        }
        (dst, a) => Ok(Op::Mov { d: d.dst(dst)?, a: d.src(a, want)?, bits }),
    }
}

fn cmp_of(name: &str) -> Option<Cmp> {
    Some(match name {
        "eq" => Cmp::Eq,
        "ne" => Cmp::Ne,
        "lt" | "lo" => Cmp::Lt,
        "le" | "ls" => Cmp::Le,
        "gt" | "hi" => Cmp::Gt,
        "ge" | "hs" => Cmp::Ge,
        "equ" => Cmp::Equ,
        "neu" => Cmp::Neu,
        "ltu" => Cmp::Ltu,
        "leu" => Cmp::Leu,
        "gtu" => Cmp::Gtu,
        "geu" => Cmp::Geu,
        "num" => Cmp::Num,
        "nan" => Cmp::Nan,
        _ => return None,
    })
}

fn setp(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    let cmp_names = [
        "eq", "ne", "lt", "lo", "le", "ls", "gt", "hi", "ge", "hs", "equ", "neu", "ltu", "leu",
        "gtu", "geu", "num", "nan",
    ];
    let cmp = m.one_of(&cmp_names).and_then(cmp_of).ok_or("setp needs a comparison")?;
    let bool_op = match m.one_of(&["and", "or", "xor"]) {
        Some("and") => Some(BoolOp::And),
        Some("or") => Some(BoolOp::Or),
        Some(_) => Some(BoolOp::Xor),
        None => None,
    };
    let ftz = m.has("ftz");
    let t = one_type(m)?;
    let ty = if let Some(f) = float_ty(t) {
        CmpTy::Float(f, ftz)
    } else if let Some(i) = int_ty(t).filter(|i| i.bits >= 16) {
        if ftz || !matches!(cmp, Cmp::Eq | Cmp::Ne | Cmp::Lt | Cmp::Le | Cmp::Gt | Cmp::Ge) {
            return Err(format!("setp on .{t} takes eq/ne/lt/le/gt/ge/lo/ls/hi/hs"));
        }
        CmpTy::Int(i)
    } else {
        return Err(format!("setp on .{t} is not supported"));
    };
    let want = match ty {
        CmpTy::Float(f, _) => fwant(f),
        CmpTy::Int(i) => Want::Int(i.bits),
    };
    let (p, q) = match &ops.first() {
        Some(Operand::Pair(p, q)) => (d.pred_reg(p)?, Some(d.pred_reg(q)?)),
        Some(Operand::Name(p)) => (d.pred_reg(p)?, None),
        other => return Err(format!("setp writes a predicate, found {other:?}")),
    };
    let combine = match (bool_op, ops.len()) {
        (None, 3) => None,
        (Some(op), 4) => {
            let (c, neg) = d.pred_src(&ops[3])?;
            Some((op, c, neg))
        }
        _ => {
            return Err("setp takes `p[|q], a, b` or `p[|q], a, b, {!}c` with .and/.or/.xor".into());
        }
    };
    Ok(Op::Setp { cmp, ty, p, q, a: d.src(&ops[1], want)?, b: d.src(&ops[2], want)?, combine })
}

/// Consumes a float rounding modifier; only round-to-nearest-even is implemented.
fn float_rounding(m: &mut Mods, required: bool) -> R<()> {
    match m.one_of(&["rn", "rz", "rm", "rp"]) {
        Some("rn") => Ok(()),
        Some(r) => Err(format!(
            "rounding modifier .{r} of `{}` is not supported (only .rn is implemented)",
            m.base
        )),
        None if required => Err(format!("`{}` needs a rounding modifier (.rn)", m.base)),
        None => Ok(()),
    }
}

fn fma(d: &FnDecoder, m: &mut Mods, ops: &[Operand], ty: FTy) -> R<Op> {
    let ftz = m.has("ftz");
    let sat = m.has("sat");
    arity(ops, 4, m.base)?;
    let w = fwant(ty);
    Ok(Op::Fma {
        ty,
        ftz,
        sat,
        d: d.dst(&ops[0])?,
        a: d.src(&ops[1], w)?,
        b: d.src(&ops[2], w)?,
        c: d.src(&ops[3], w)?,
    })
}

fn float_arith(d: &FnDecoder, m: &mut Mods, ops: &[Operand], ty: FTy) -> R<Op> {
    let base = m.base;
    if base == "mad" {
        float_rounding(m, true)?;
        return fma(d, m, ops, ty);
    }
    let op = match base {
        "add" => FBinOp::Add,
        "sub" => FBinOp::Sub,
        "mul" => FBinOp::Mul,
        "div" => FBinOp::Div(match m.one_of(&["rn", "approx", "full"]) {
            Some("rn") => DivKind::Rn,
            Some("approx") if ty == FTy::F32 => DivKind::Approx,
            Some("full") if ty == FTy::F32 => DivKind::Full,
            _ => return Err("div on floats needs .rn (or .approx/.full for f32)".into()),
        }),
        "min" => FBinOp::Min(m.has("NaN")),
        "max" => FBinOp::Max(m.has("NaN")),
        "abs" | "neg" => {
            let ftz = m.has("ftz");
            arity(ops, 2, base)?;
            let op = if base == "abs" { FUnOp::Abs } else { FUnOp::Neg };
            let a = d.src(&ops[1], fwant(ty))?;
            return Ok(Op::FUnary { op, ty, ftz, d: d.dst(&ops[0])?, a });
        }
        other => return Err(format!("`{other}` on floating-point types is not supported")),
    };
    if matches!(op, FBinOp::Add | FBinOp::Sub | FBinOp::Mul) {
        // Without a rounding modifier ptxas may contract add/mul into fma; the simulator
        // rounds each operation (as .rn), see the crate docs.
        float_rounding(m, false)?;
    } else if matches!(op, FBinOp::Div(DivKind::Rn)) {
        float_rounding(m, false)?;
    }
    let ftz = m.has("ftz");
    let sat = matches!(op, FBinOp::Add | FBinOp::Sub | FBinOp::Mul) && m.has("sat");
    arity(ops, 3, base)?;
    let w = fwant(ty);
    Ok(Op::FBinary {
        op,
        ty,
        ftz,
        sat,
        d: d.dst(&ops[0])?,
        a: d.src(&ops[1], w)?,
        b: d.src(&ops[2], w)?,
    })
}

fn float_unary(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    let base = m.base;
    let approx = m.has("approx");
    let rn = m.has("rn");
    let ftz = m.has("ftz");
    let ty = float(one_type(m)?, base)?;
    let op = match (base, approx, rn) {
        ("sqrt", true, false) => FUnOp::Sqrt(true),
        ("sqrt", false, true) => FUnOp::Sqrt(false),
        ("rcp", true, false) => FUnOp::Rcp(true),
        ("rcp", false, true) => FUnOp::Rcp(false),
        ("rsqrt", true, false) => FUnOp::Rsqrt,
        ("ex2", true, false) if ty == FTy::F32 => FUnOp::Ex2,
        ("lg2", true, false) if ty == FTy::F32 => FUnOp::Lg2,
        ("tanh", true, false) if ty == FTy::F32 => FUnOp::Tanh,
        ("sin", true, false) if ty == FTy::F32 => FUnOp::Sin,
        ("cos", true, false) if ty == FTy::F32 => FUnOp::Cos,
        _ => return Err(format!("this form of `{base}` is not supported")),
    };
    arity(ops, 2, base)?;
    Ok(Op::FUnary { op, ty, ftz, d: d.dst(&ops[0])?, a: d.src(&ops[1], fwant(ty))? })
}

fn int_arith(d: &FnDecoder, m: &mut Mods, ops: &[Operand], ty: IntTy) -> R<Op> {
    let base = m.base;
    let w = Want::Int(ty.bits);
    let u32w = Want::Int(32);
    let need_width = |ok: &[u8]| -> R<()> {
        if ok.contains(&ty.bits) {
            Ok(())
        } else {
            Err(format!("`{base}` on {}-bit operands is not supported", ty.bits))
        }
    };
    let unary = |op: UnOp| -> R<Op> {
        arity(ops, 2, base)?;
        Ok(Op::Unary { op, ty, d: d.dst(&ops[0])?, a: d.src(&ops[1], w)? })
    };
    let binary = |op: BinOp, bw: Want| -> R<Op> {
        arity(ops, 3, base)?;
        Ok(Op::Binary { op, ty, d: d.dst(&ops[0])?, a: d.src(&ops[1], w)?, b: d.src(&ops[2], bw)? })
    };
    let ternary = |op: TerOp, bw: Want, cw: Want| -> R<Op> {
        arity(ops, 4, base)?;
        Ok(Op::Ternary {
            op,
            ty,
            d: d.dst(&ops[0])?,
            a: d.src(&ops[1], w)?,
            b: d.src(&ops[2], bw)?,
            c: d.src(&ops[3], cw)?,
        })
    };
    match base {
        "add" | "sub" => {
            need_width(&[16, 32, 64])?;
            let sat = m.has("sat");
            if sat && !(ty.signed && ty.bits == 32) {
                return Err(".sat is only defined for .s32".into());
            }
            let op = match (base, sat) {
                ("add", false) => BinOp::Add,
                ("add", true) => BinOp::AddSat,
                ("sub", false) => BinOp::Sub,
                _ => BinOp::SubSat,
            };
            binary(op, w)
        }
        "mul" | "mad" => {
            need_width(&[16, 32, 64])?;
            let mode =
                m.one_of(&["lo", "hi", "wide"]).ok_or("integer mul/mad needs .lo/.hi/.wide")?;
            if mode == "wide" && ty.bits == 64 {
                return Err("mul.wide/mad.wide take 16- or 32-bit operands".into());
            }
            if base == "mul" {
                binary(
                    match mode {
                        "lo" => BinOp::MulLo,
                        "hi" => BinOp::MulHi,
                        _ => BinOp::MulWide,
                    },
                    w,
                )
            } else {
                let (op, cw) = match mode {
                    "lo" => (TerOp::MadLo, w),
                    "hi" => (TerOp::MadHi, w),
                    _ => (TerOp::MadWide, Want::Int(ty.bits * 2)),
                };
                ternary(op, w, cw)
            }
        }
        "div" | "rem" => {
            need_width(&[16, 32, 64])?;
            binary(if base == "div" { BinOp::Div } else { BinOp::Rem }, w)
        }
        "min" | "max" => {
            need_width(&[16, 32, 64])?;
            binary(if base == "min" { BinOp::Min } else { BinOp::Max }, w)
        }
        "abs" | "neg" => {
            need_width(&[16, 32, 64])?;
            unary(if base == "abs" { UnOp::Abs } else { UnOp::Neg })
        }
        "and" | "or" | "xor" => {
            need_width(&[1, 16, 32, 64])?;
            binary(
                match base {
                    "and" => BinOp::And,
                    "or" => BinOp::Or,
                    _ => BinOp::Xor,
                },
                w,
            )
        }
        "not" => {
            need_width(&[1, 16, 32, 64])?;
            unary(UnOp::Not)
        }
        "cnot" => {
            need_width(&[16, 32, 64])?;
            unary(UnOp::Cnot)
        }
        "shl" | "shr" => {
            need_width(&[16, 32, 64])?;
            binary(if base == "shl" { BinOp::Shl } else { BinOp::Shr }, u32w)
        }
        "popc" | "clz" | "brev" => {
            need_width(&[32, 64])?;
            unary(match base {
                "popc" => UnOp::Popc,
                "clz" => UnOp::Clz,
                _ => UnOp::Brev,
            })
        }
        "bfind" => {
            need_width(&[32, 64])?;
            unary(if m.has("shiftamt") { UnOp::BfindShiftAmt } else { UnOp::Bfind })
        }
        "bfe" => {
            need_width(&[32, 64])?;
            ternary(TerOp::Bfe, u32w, u32w)
        }
        "bfi" => {
            need_width(&[32, 64])?;
            arity(ops, 5, "bfi")?;
            Ok(Op::Bfi {
                bits: ty.bits,
                d: d.dst(&ops[0])?,
                f: d.src(&ops[1], w)?,
                b: d.src(&ops[2], w)?,
                pos: d.src(&ops[3], u32w)?,
                len: d.src(&ops[4], u32w)?,
            })
        }
        "prmt" => {
            need_width(&[32])?;
            ternary(TerOp::Prmt, w, w)
        }
        "shf" => {
            need_width(&[32])?;
            let left = match m.one_of(&["l", "r"]) {
                Some(dir) => dir == "l",
                None => return Err("shf needs .l or .r".into()),
            };
            let clamp = match m.one_of(&["wrap", "clamp"]) {
                Some(mode) => mode == "clamp",
                None => return Err("shf needs .wrap or .clamp".into()),
            };
            ternary(if left { TerOp::ShfL(clamp) } else { TerOp::ShfR(clamp) }, w, u32w)
        }
        "lop3" => {
            need_width(&[32])?;
            arity(ops, 5, "lop3")?;
            let lut = match &ops[4] {
                Operand::Int(v) if (0..=255).contains(v) => *v as u8,
                other => {
                    return Err(format!("lop3 needs an immediate truth table, found {other:?}"));
                }
            };
            Ok(Op::Lop3 {
                d: d.dst(&ops[0])?,
                abc: [d.src(&ops[1], w)?, d.src(&ops[2], w)?, d.src(&ops[3], w)?],
                lut,
            })
        }
        other => Err(format!("`{other}` on integer types is not supported")),
    }
}

fn num_ty(t: &str) -> R<NumTy> {
    Ok(match t {
        "f16" => NumTy::F16,
        "bf16" => NumTy::Bf16,
        "tf32" => NumTy::Tf32,
        "f32" => NumTy::F32,
        "f64" => NumTy::F64,
        _ => NumTy::Int(
            int_ty(t).filter(|i| i.bits >= 8).ok_or(format!("cvt type .{t} is not supported"))?,
        ),
    })
}

fn want_num(t: NumTy) -> Want {
    match t {
        NumTy::Int(i) => Want::Int(i.bits),
        NumTy::F16 | NumTy::Bf16 => Want::Int(16),
        NumTy::Tf32 | NumTy::F32 => Want::F32,
        NumTy::F64 => Want::F64,
    }
}

fn cvt(d: &FnDecoder, m: &mut Mods, ops: &[Operand]) -> R<Op> {
    let rnd =
        m.one_of(&["rn", "rna", "rz", "rm", "rp", "rni", "rzi", "rmi", "rpi"]).map(|r| match r {
            "rn" => Rnd::Rn,
            "rna" => Rnd::Rna,
            "rz" => Rnd::Rz,
            "rm" => Rnd::Rm,
            "rp" => Rnd::Rp,
            "rni" => Rnd::Rni,
            "rzi" => Rnd::Rzi,
            "rmi" => Rnd::Rmi,
            _ => Rnd::Rpi,
        });
    let ftz = m.has("ftz");
    let sat = m.has("sat");
    let relu = m.has("relu");
    let satfinite = m.has("satfinite");
    let types = m.types();
    let [to, from] = types.as_slice() else {
        return Err(format!("cvt needs a destination and a source type, found {types:?}"));
    };
    if matches!(*to, "f16x2" | "bf16x2") {
        if *from != "f32" || rnd != Some(Rnd::Rn) || ftz || sat {
            return Err(format!("only cvt.rn[.relu][.satfinite].{to}.f32 is supported"));
        }
        arity(ops, 3, "cvt")?;
        let ty = if *to == "f16x2" { PackTy::F16x2 } else { PackTy::Bf16x2 };
        return Ok(Op::CvtPack {
            ty,
            relu,
            satfinite,
            d: d.dst(&ops[0])?,
            hi: d.src(&ops[1], Want::F32)?,
            lo: d.src(&ops[2], Want::F32)?,
        });
    }
    let cvt = Cvt { to: num_ty(to)?, from: num_ty(from)?, rnd, ftz, sat, relu, satfinite };
    cvt_exec::check(&cvt)?;
    arity(ops, 2, "cvt")?;
    Ok(Op::Cvt { cvt, d: d.dst(&ops[0])?, a: d.src(&ops[1], want_num(cvt.from))? })
}
