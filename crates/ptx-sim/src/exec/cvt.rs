//! `cvt` semantics: integer ↔ integer, float ↔ integer, float ↔ float (f16, bf16, tf32, f32,
//! f64), and the packed `cvt.rn.{f16x2,bf16x2}.f32`.
//!
//! Rules (PTX ISA "cvt"): float → integer rounds as its `.rni/.rzi/.rmi/.rpi` modifier says,
//! saturates to the destination range and maps NaN to 0; `.sat` on an integer destination
//! clamps; narrowing float conversions round with `.rn` (to nearest even) or, for tf32,
//! `.rna` (to nearest, ties away from zero); `.relu` clamps negative results and -0 to +0
//! (an H100 does); `.satfinite` turns infinities into the largest finite value of the
//! destination; NaN results are canonical (`0x7fff` for f16/bf16, `0x7fffffff` for f32),
//! except tf32's, which keep the input's bits as [`tf32_rna`] says; an integer
//! result narrower than its destination register is sign-extended for signed types and
//! zero-extended otherwise.

use super::float::{NAN64, flush32};
use super::int::{mask, sext};
use crate::decode::op::{Cvt, IntTy, NumTy, PackTy, Rnd};
use half::{bf16, f16};

fn is_float(t: NumTy) -> bool {
    !matches!(t, NumTy::Int(_))
}

fn float_bits(t: NumTy) -> u32 {
    match t {
        NumTy::F16 | NumTy::Bf16 => 16,
        NumTy::Tf32 | NumTy::F32 => 32,
        NumTy::F64 => 64,
        NumTy::Int(i) => i.bits as u32,
    }
}

/// Rejects the `cvt` forms the simulator does not implement (called by the decoder).
pub fn check(c: &Cvt) -> Result<(), String> {
    use Rnd::*;
    let bad = |why: &str| Err(format!("cvt {c:?}: {why}"));
    let int_rnd = matches!(c.rnd, Some(Rni | Rzi | Rmi | Rpi));
    if (c.relu || c.satfinite) && !matches!(c.to, NumTy::F16 | NumTy::Bf16 | NumTy::Tf32) {
        return bad(".relu/.satfinite apply to f16/bf16/tf32 results");
    }
    match (is_float(c.from), is_float(c.to)) {
        (false, false) if c.rnd.is_some() || c.ftz => bad("integer conversions take no rounding"),
        (false, false) => Ok(()),
        (true, false) if !int_rnd => bad("float-to-integer needs .rni/.rzi/.rmi/.rpi"),
        (true, false) if c.from == NumTy::Tf32 => bad("tf32 source is not supported"),
        (true, false) => Ok(()),
        (false, true) if !matches!(c.rnd, None | Some(Rn | Rz | Rm | Rp)) => {
            bad("integer-to-float takes .rn/.rz/.rm/.rp")
        }
        (false, true) if !matches!(c.to, NumTy::F32 | NumTy::F64) => {
            bad("integer to f16/bf16/tf32 is not supported")
        }
        (false, true) => Ok(()),
        (true, true) => {
            let (fb, tb) = (float_bits(c.from), float_bits(c.to));
            if c.from == NumTy::Tf32 {
                return bad("tf32 source is not supported");
            }
            if c.to == NumTy::Tf32 {
                return if c.from == NumTy::F32 && c.rnd == Some(Rna) && !c.sat && !c.relu {
                    Ok(())
                } else {
                    bad("only cvt.rna[.satfinite].tf32.f32 is supported")
                };
            }
            if tb > fb || (tb == fb && c.from != c.to) {
                // Widening (or f16 <-> bf16, which is not a PTX form).
                return if c.rnd.is_none() && tb > fb {
                    Ok(())
                } else {
                    bad("unsupported widening form")
                };
            }
            if tb == fb {
                return match c.rnd {
                    None | Some(Rni | Rzi | Rmi | Rpi) => Ok(()),
                    _ => bad("same-type cvt takes .rni/.rzi/.rmi/.rpi"),
                };
            }
            match (c.from, c.to, c.rnd) {
                (_, NumTy::F32, Some(Rn | Rz | Rm | Rp)) => Ok(()),
                (NumTy::F32, NumTy::F16 | NumTy::Bf16, Some(Rn)) => Ok(()),
                _ => bad("only .rn from f32 to f16/bf16 (and .rn/.rz/.rm/.rp to f32) is supported"),
            }
        }
    }
}

/// The value of a float source as f64 (exact for every source type).
fn float_value(t: NumTy, v: u64, ftz: bool) -> f64 {
    match t {
        NumTy::F16 => f16::from_bits(v as u16).to_f64(),
        NumTy::Bf16 => bf16::from_bits(v as u16).to_f64(),
        NumTy::F32 | NumTy::Tf32 => {
            let x = f32::from_bits(v as u32);
            (if ftz { flush32(x) } else { x }) as f64
        }
        NumTy::F64 => f64::from_bits(v),
        NumTy::Int(_) => unreachable!("not a float type"),
    }
}

fn round_integral(x: f64, rnd: Option<Rnd>) -> f64 {
    match rnd {
        Some(Rnd::Rni) => x.round_ties_even(),
        Some(Rnd::Rzi) => x.trunc(),
        Some(Rnd::Rmi) => x.floor(),
        Some(Rnd::Rpi) => x.ceil(),
        _ => x,
    }
}

fn int_range(t: IntTy) -> (i128, i128) {
    if t.signed {
        (-(1i128 << (t.bits - 1)), (1i128 << (t.bits - 1)) - 1)
    } else {
        (0, (1i128 << t.bits) - 1)
    }
}

/// An integer result in a register: sign-extended for signed types, zero-extended otherwise
/// (the PTX rule for destination registers wider than the instruction type).
fn extend(v: u64, to: IntTy) -> u64 {
    if to.signed { sext(v, to.bits) as u64 } else { v & mask(to.bits) }
}

/// `x` rounded to f32 with a directed mode, given the nearest-even result `rn`.
fn directed_f32(exact_cmp: std::cmp::Ordering, rn: f32, rnd: Rnd) -> f32 {
    use std::cmp::Ordering::*;
    // exact_cmp: how the exact value compares with rn.
    let down = match rnd {
        Rnd::Rm => true,
        Rnd::Rp => false,
        _ => rn > 0.0,
    };
    match (exact_cmp, down) {
        (Less, true) => rn.next_down(),
        (Greater, false) => rn.next_up(),
        _ => rn,
    }
}

/// Converts a register value as `c` says.
pub fn convert(c: &Cvt, v: u64) -> u64 {
    match (c.from, c.to) {
        (NumTy::Int(from), NumTy::Int(to)) => {
            let x = if from.signed {
                sext(v, from.bits) as i128
            } else {
                (v & mask(from.bits)) as i128
            };
            let x = if c.sat {
                let (lo, hi) = int_range(to);
                x.clamp(lo, hi)
            } else {
                x
            };
            extend(x as u64, to)
        }
        (from, NumTy::Int(to)) => {
            let x = round_integral(float_value(from, v, c.ftz), c.rnd);
            let (lo, hi) = int_range(to);
            let r = if x.is_nan() { 0 } else { (x.max(lo as f64).min(hi as f64)) as i128 };
            extend(r as u64, to)
        }
        (NumTy::Int(from), to) => {
            let x = if from.signed {
                sext(v, from.bits) as i128
            } else {
                (v & mask(from.bits)) as i128
            };
            match to {
                NumTy::F64 => (x as f64).to_bits(),
                NumTy::F32 => {
                    let rn = x as f32;
                    let r = match c.rnd {
                        Some(r @ (Rnd::Rz | Rnd::Rm | Rnd::Rp)) if rn.is_finite() => {
                            directed_f32(x.cmp(&(rn as i128)), rn, r)
                        }
                        _ => rn,
                    };
                    let r = if c.sat { r.clamp(0.0, 1.0) } else { r };
                    r.to_bits() as u64
                }
                _ => unreachable!("check() admits integer sources for f32/f64 results only"),
            }
        }
        (from, to) => {
            let x = float_value(from, v, c.ftz);
            match to {
                NumTy::F64 => {
                    let r = round_integral(x, c.rnd);
                    let r =
                        if c.sat { if r.is_nan() { 0.0 } else { r.clamp(0.0, 1.0) } } else { r };
                    if r.is_nan() { NAN64 } else { r.to_bits() }
                }
                NumTy::F32 => {
                    let rn = round_integral(x, c.rnd) as f32;
                    let r = match c.rnd {
                        Some(r @ (Rnd::Rz | Rnd::Rm | Rnd::Rp)) if rn.is_finite() => {
                            let exact =
                                x.partial_cmp(&(rn as f64)).unwrap_or(std::cmp::Ordering::Equal);
                            directed_f32(exact, rn, r)
                        }
                        _ => rn,
                    };
                    super::float::out32(r, c.ftz, c.sat)
                }
                NumTy::Tf32 => {
                    // From the bits, not `x`: an f64 round trip would quieten a NaN.
                    let x = f32::from_bits(v as u32);
                    tf32_rna(if c.ftz { flush32(x) } else { x }, c.satfinite)
                }
                _ => narrow_half(c, x as f32),
            }
        }
    }
}

/// f32 value → f16/bf16 bits, rounding to nearest even (`half`'s f32 conversions are
/// correctly rounded; its f64 ones are not, which is why only f32 sources are admitted), with
/// `.relu`/`.satfinite`/`.sat`.
fn narrow_half(c: &Cvt, x: f32) -> u64 {
    let x = if c.sat { if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) } } else { x };
    let x = if c.relu && !x.is_nan() && x.is_sign_negative() { 0.0 } else { x };
    if x.is_nan() {
        return 0x7fff;
    }
    let bits = match c.to {
        NumTy::F16 => {
            let h = f16::from_f32(x);
            if c.satfinite && h.is_infinite() { f16::MAX.copysign(h) } else { h }.to_bits()
        }
        _ => {
            let h = bf16::from_f32(x);
            if c.satfinite && h.is_infinite() { bf16::MAX.copysign(h) } else { h }.to_bits()
        }
    };
    bits as u64
}

/// `cvt.rna[.satfinite].tf32.f32`, as ptxas compiles it for sm_90a (integer operations, so
/// exact; an H100 agrees on the plain form): a finite input gets `0x1000` added to its bits
/// (nearest, ties away from zero; a carry into the exponent rounds up to the next binade or
/// to infinity), infinities and NaNs are kept, and the low 13 bits are cleared (a NaN keeps
/// its sign and high payload: `0x7fffffff` becomes `0x7fffe000`, `0x7f800001` becomes
/// infinity). `.satfinite` then steps any result with an all-ones exponent down by one tf32
/// ulp: infinity becomes the largest finite tf32 of its sign, a NaN another NaN or that.
pub fn tf32_rna(x: f32, satfinite: bool) -> u64 {
    let bits = x.to_bits();
    let rounded = if x.is_finite() { bits.wrapping_add(1 << 12) } else { bits } & !0x1fff;
    let saturate = satfinite && rounded & 0x7f80_0000 == 0x7f80_0000;
    (if saturate { rounded - 0x2000 } else { rounded }) as u64
}

/// `cvt.rn[.relu][.satfinite].{f16x2,bf16x2}.f32 d, hi, lo`.
pub fn pack(ty: PackTy, relu: bool, satfinite: bool, hi: u64, lo: u64) -> u64 {
    let to = match ty {
        PackTy::F16x2 => NumTy::F16,
        PackTy::Bf16x2 => NumTy::Bf16,
    };
    let c =
        Cvt { to, from: NumTy::F32, rnd: Some(Rnd::Rn), ftz: false, sat: false, relu, satfinite };
    let half = |v: u64| narrow_half(&c, f32::from_bits(v as u32));
    (half(hi) << 16) | half(lo)
}
