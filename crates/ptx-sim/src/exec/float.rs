//! Floating-point semantics.
//!
//! - `add`/`sub`/`mul`/`fma`/`div.rn`/`sqrt.rn`/`rcp.rn` are IEEE 754 binary32/binary64 with
//!   round-to-nearest-even (Rust's operators and `mul_add` are exactly that).
//! - `.ftz` flushes subnormal inputs and results to zero of the same sign; `.sat` clamps to
//!   [0, 1] with NaN becoming +0.
//! - `.approx` functions (`rcp`, `sqrt`, `rsqrt`, `ex2`, `lg2`, `tanh`, `sin`, `cos`,
//!   `div.approx`/`div.full`) are computed in f64 and rounded once to f32: within 1 ulp of
//!   the exact value, tighter than the hardware's documented bounds, so a kernel's results
//!   may differ from a GPU's by up to those bounds (tests of such kernels need a tolerance).
//! - Every NaN an arithmetic instruction produces is the canonical NaN (`0x7fffffff`, or
//!   `0x7fffffffffffffff` for f64). f32 `abs`/`neg` flip or clear the sign bit of a number
//!   and turn a NaN into the canonical NaN (ptxas compiles them to `FADD |x|, -RZ` and
//!   `FADD -x, -RZ`, and an H100 agrees); f64 `abs`/`neg` and `copysign` only touch the sign
//!   bit.
//! - `min`/`max` return the non-NaN operand when one is NaN (canonical NaN when both are,
//!   or when either is with `.NaN`), and order -0 below +0.

use crate::decode::op::{Cmp, DivKind, FBinOp, FTy, FUnOp, TestpOp};

/// The canonical f32 NaN.
pub const NAN32: u32 = 0x7fff_ffff;
/// The canonical f64 NaN.
pub const NAN64: u64 = 0x7fff_ffff_ffff_ffff;

/// Flushes a subnormal to zero of the same sign.
#[inline]
pub fn flush32(x: f32) -> f32 {
    if x.is_subnormal() { 0.0f32.copysign(x) } else { x }
}

#[inline]
fn f32_of(v: u64, ftz: bool) -> f32 {
    let x = f32::from_bits(v as u32);
    if ftz { flush32(x) } else { x }
}

/// Encodes an f32 result: `.ftz`, `.sat`, canonical NaN.
#[inline]
pub fn out32(x: f32, ftz: bool, sat: bool) -> u64 {
    let x = if ftz { flush32(x) } else { x };
    let x = if sat { if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) } } else { x };
    if x.is_nan() { NAN32 as u64 } else { x.to_bits() as u64 }
}

#[inline]
fn out64(x: f64, sat: bool) -> u64 {
    let x = if sat { if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) } } else { x };
    if x.is_nan() { NAN64 } else { x.to_bits() }
}

/// IEEE 754-2019 minimumNumber / maximumNumber, with -0 < +0.
fn min_max<T: Copy + PartialOrd + Into<f64>>(a: T, b: T, max: bool, nan: bool) -> Option<T> {
    let (fa, fb): (f64, f64) = (a.into(), b.into());
    match (fa.is_nan(), fb.is_nan()) {
        (true, true) => return None,
        (true, false) => return if nan { None } else { Some(b) },
        (false, true) => return if nan { None } else { Some(a) },
        _ => {}
    }
    if fa == fb && fa == 0.0 {
        let a_neg = fa.is_sign_negative();
        return Some(if a_neg != max { a } else { b });
    }
    Some(if (fa < fb) != max { a } else { b })
}

/// Two-operand float ops on register bits.
pub fn binary(op: FBinOp, ty: FTy, ftz: bool, sat: bool, a: u64, b: u64) -> u64 {
    match ty {
        FTy::F32 => {
            let (x, y) = (f32_of(a, ftz), f32_of(b, ftz));
            let r = match op {
                FBinOp::Add => x + y,
                FBinOp::Sub => x - y,
                FBinOp::Mul => x * y,
                FBinOp::Div(DivKind::Approx) if (2f32.powi(126)..=f32::MAX).contains(&y.abs()) => {
                    // The documented range quirk of div.approx: a * (1/b) with 1/b flushed,
                    // so an infinite or NaN dividend gives NaN.
                    if !x.is_finite() { f32::NAN } else { 0.0f32.copysign(x) * y.signum() }
                }
                FBinOp::Div(_) => x / y,
                FBinOp::Min(nan) => {
                    return min_max(x, y, false, nan)
                        .map_or(NAN32 as u64, |r| out32(r, ftz, false));
                }
                FBinOp::Max(nan) => {
                    return min_max(x, y, true, nan).map_or(NAN32 as u64, |r| out32(r, ftz, false));
                }
                FBinOp::Copysign => {
                    return ((b as u32 & 0x7fff_ffff) | (a as u32 & 0x8000_0000)) as u64;
                }
            };
            out32(r, ftz, sat)
        }
        FTy::F64 => {
            let (x, y) = (f64::from_bits(a), f64::from_bits(b));
            let r = match op {
                FBinOp::Add => x + y,
                FBinOp::Sub => x - y,
                FBinOp::Mul => x * y,
                FBinOp::Div(_) => x / y,
                FBinOp::Min(nan) => {
                    return min_max(x, y, false, nan).map_or(NAN64, |r| out64(r, false));
                }
                FBinOp::Max(nan) => {
                    return min_max(x, y, true, nan).map_or(NAN64, |r| out64(r, false));
                }
                FBinOp::Copysign => return (b & !(1 << 63)) | (a & (1 << 63)),
            };
            out64(r, sat)
        }
    }
}

/// One-operand float ops on register bits.
pub fn unary(op: FUnOp, ty: FTy, ftz: bool, a: u64) -> u64 {
    match ty {
        FTy::F32 => {
            let x = f32_of(a, ftz);
            let wide = x as f64;
            let r = match op {
                FUnOp::Neg if !x.is_nan() => return (x.to_bits() ^ 0x8000_0000) as u64,
                FUnOp::Abs if !x.is_nan() => return (x.to_bits() & 0x7fff_ffff) as u64,
                FUnOp::Neg | FUnOp::Abs => return NAN32 as u64,
                FUnOp::Sqrt(_) => x.sqrt(),
                FUnOp::Rcp(_) => 1.0 / x,
                FUnOp::Rsqrt => (1.0 / wide.sqrt()) as f32,
                FUnOp::Ex2 => wide.exp2() as f32,
                FUnOp::Lg2 => wide.log2() as f32,
                FUnOp::Tanh => wide.tanh() as f32,
                FUnOp::Sin => wide.sin() as f32,
                FUnOp::Cos => wide.cos() as f32,
            };
            out32(r, ftz, false)
        }
        FTy::F64 => {
            let x = f64::from_bits(a);
            let r = match op {
                FUnOp::Neg => return a ^ (1 << 63),
                FUnOp::Abs => return a & !(1 << 63),
                FUnOp::Sqrt(_) => x.sqrt(),
                FUnOp::Rcp(_) => 1.0 / x,
                FUnOp::Rsqrt => 1.0 / x.sqrt(),
                FUnOp::Ex2 | FUnOp::Lg2 | FUnOp::Tanh | FUnOp::Sin | FUnOp::Cos => {
                    unreachable!("the decoder admits these for f32 only")
                }
            };
            out64(r, false)
        }
    }
}

/// `fma.rn`: one rounding.
pub fn fma(ty: FTy, ftz: bool, sat: bool, a: u64, b: u64, c: u64) -> u64 {
    match ty {
        FTy::F32 => {
            let r = f32_of(a, ftz).mul_add(f32_of(b, ftz), f32_of(c, ftz));
            out32(r, ftz, sat)
        }
        FTy::F64 => {
            let r = f64::from_bits(a).mul_add(f64::from_bits(b), f64::from_bits(c));
            out64(r, sat)
        }
    }
}

/// `testp`.
pub fn testp(op: TestpOp, ty: FTy, a: u64) -> bool {
    let x = match ty {
        FTy::F32 => f32::from_bits(a as u32) as f64,
        FTy::F64 => f64::from_bits(a),
    };
    let subnormal = match ty {
        FTy::F32 => f32::from_bits(a as u32).is_subnormal(),
        FTy::F64 => x.is_subnormal(),
    };
    match op {
        TestpOp::Finite => x.is_finite(),
        TestpOp::Infinite => x.is_infinite(),
        TestpOp::Number => !x.is_nan(),
        TestpOp::NotANumber => x.is_nan(),
        TestpOp::Normal => x.is_finite() && x != 0.0 && !subnormal,
        TestpOp::Subnormal => subnormal,
    }
}

/// Float comparison; ordered comparisons are false and unordered ones true when either
/// operand is NaN.
pub fn compare(cmp: Cmp, ty: FTy, ftz: bool, a: u64, b: u64) -> bool {
    let (x, y) = match ty {
        FTy::F32 => (f32_of(a, ftz) as f64, f32_of(b, ftz) as f64),
        FTy::F64 => (f64::from_bits(a), f64::from_bits(b)),
    };
    let unordered = x.is_nan() || y.is_nan();
    match cmp {
        Cmp::Eq => x == y,
        Cmp::Ne => !unordered && x != y,
        Cmp::Lt => x < y,
        Cmp::Le => x <= y,
        Cmp::Gt => x > y,
        Cmp::Ge => x >= y,
        Cmp::Equ => unordered || x == y,
        Cmp::Neu => x != y,
        Cmp::Ltu => unordered || x < y,
        Cmp::Leu => unordered || x <= y,
        Cmp::Gtu => unordered || x > y,
        Cmp::Geu => unordered || x >= y,
        Cmp::Num => !unordered,
        Cmp::Nan => unordered,
    }
}
