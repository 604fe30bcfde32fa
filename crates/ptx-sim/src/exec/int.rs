//! Integer and bitwise semantics. Registers hold up to 64 bits; every function masks its
//! inputs to the instruction's width, so a register written by a wider or sign-extending
//! instruction is read correctly.

use crate::decode::op::{BinOp, Cmp, IntTy, TerOp, UnOp};

/// All-ones in the low `bits` bits.
#[inline]
pub fn mask(bits: u8) -> u64 {
    if bits >= 64 { u64::MAX } else { (1u64 << bits) - 1 }
}

/// The low `bits` bits of `v`, sign-extended.
#[inline]
pub fn sext(v: u64, bits: u8) -> i64 {
    let shift = 64 - bits as u32;
    ((v << shift) as i64) >> shift
}

/// `v` read as a value of type `ty`.
#[inline]
fn value(v: u64, ty: IntTy) -> i128 {
    if ty.signed { sext(v, ty.bits) as i128 } else { (v & mask(ty.bits)) as i128 }
}

/// The full product of `a` and `b` (as type `ty`), two's complement in 128 bits.
#[inline]
fn full_product(a: u64, b: u64, ty: IntTy) -> u128 {
    if ty.signed {
        (sext(a, ty.bits) as i128 * sext(b, ty.bits) as i128) as u128
    } else {
        (a & mask(ty.bits)) as u128 * (b & mask(ty.bits)) as u128
    }
}

/// One-operand ops.
pub fn unary(op: UnOp, ty: IntTy, a: u64) -> u64 {
    let m = mask(ty.bits);
    let a = a & m;
    let bits = ty.bits as u32;
    match op {
        UnOp::Not => !a & m,
        UnOp::Neg => a.wrapping_neg() & m,
        UnOp::Abs => {
            if sext(a, ty.bits) < 0 {
                a.wrapping_neg() & m
            } else {
                a
            }
        }
        UnOp::Popc => a.count_ones() as u64,
        UnOp::Clz => (a.leading_zeros() - (64 - bits)) as u64,
        UnOp::Brev => a.reverse_bits() >> (64 - bits),
        UnOp::Cnot => (a == 0) as u64,
        UnOp::Bfind | UnOp::BfindShiftAmt => {
            // For a negative signed input, the most significant 0 bit.
            let x = if ty.signed && sext(a, ty.bits) < 0 { !a & m } else { a };
            if x == 0 {
                0xffff_ffff
            } else {
                let pos = 63 - x.leading_zeros() as u64;
                if op == UnOp::Bfind { pos } else { bits as u64 - 1 - pos }
            }
        }
    }
}

/// Two-operand ops; `Err` for a division by zero.
pub fn binary(op: BinOp, ty: IntTy, a: u64, b: u64) -> Result<u64, &'static str> {
    let m = mask(ty.bits);
    let (va, vb) = (|| value(a, ty), || value(b, ty));
    let bits = ty.bits as u32;
    Ok(match op {
        BinOp::Add => a.wrapping_add(b) & m,
        BinOp::Sub => a.wrapping_sub(b) & m,
        BinOp::AddSat => (va() + vb()).clamp(i32::MIN as i128, i32::MAX as i128) as u64 & m,
        BinOp::SubSat => (va() - vb()).clamp(i32::MIN as i128, i32::MAX as i128) as u64 & m,
        BinOp::MulLo => a.wrapping_mul(b) & m,
        BinOp::MulHi => (full_product(a, b, ty) >> bits) as u64 & m,
        BinOp::MulWide => full_product(a, b, ty) as u64 & mask(ty.bits * 2),
        BinOp::Div | BinOp::Rem => {
            let (va, vb) = (va(), vb());
            if vb == 0 {
                return Err("integer division by zero");
            }
            // i128 arithmetic: MIN / -1 wraps to MIN like the hardware's two's complement.
            let q = if op == BinOp::Div { va / vb } else { va % vb };
            q as u64 & m
        }
        BinOp::Min => va().min(vb()) as u64 & m,
        BinOp::Max => va().max(vb()) as u64 & m,
        BinOp::And => a & b & m,
        BinOp::Or => (a | b) & m,
        BinOp::Xor => (a ^ b) & m,
        BinOp::Shl => {
            let n = b & 0xffff_ffff;
            if n >= bits as u64 { 0 } else { (a << n) & m }
        }
        BinOp::Shr => {
            let n = (b & 0xffff_ffff).min(bits as u64);
            if ty.signed {
                (sext(a, ty.bits) >> n.min(63)) as u64 & m
            } else if n >= bits as u64 {
                0
            } else {
                (a & m) >> n
            }
        }
    })
}

/// Three-operand ops.
pub fn ternary(op: TerOp, ty: IntTy, a: u64, b: u64, c: u64) -> u64 {
    let m = mask(ty.bits);
    let bits = ty.bits as u32;
    match op {
        TerOp::MadLo => a.wrapping_mul(b).wrapping_add(c) & m,
        TerOp::MadHi => ((full_product(a, b, ty) >> bits) as u64).wrapping_add(c) & m,
        TerOp::MadWide => (full_product(a, b, ty) as u64).wrapping_add(c) & mask(ty.bits * 2),
        TerOp::Bfe => {
            let (pos, len) = ((b & 0xff) as u32, (c & 0xff) as u32);
            let msb = bits - 1;
            let sbit = if ty.signed && len > 0 { (a >> (pos + len - 1).min(msb)) & 1 } else { 0 };
            let mut d = 0u64;
            for i in 0..bits {
                let bit = if i < len && pos + i <= msb { (a >> (pos + i)) & 1 } else { sbit };
                d |= bit << i;
            }
            d
        }
        TerOp::Prmt => {
            let bytes = ((b & 0xffff_ffff) << 32) | (a & 0xffff_ffff);
            let mut d = 0u64;
            for i in 0..4 {
                let sel = (c >> (4 * i)) & 0xf;
                let byte = (bytes >> (8 * (sel & 7))) & 0xff;
                let byte =
                    if sel & 8 != 0 { if byte & 0x80 != 0 { 0xff } else { 0 } } else { byte };
                d |= byte << (8 * i);
            }
            d
        }
        TerOp::ShfL(clamp) | TerOp::ShfR(clamp) => {
            let n = if clamp { (c & 0xffff_ffff).min(32) } else { c & 31 };
            let wide = ((b & 0xffff_ffff) << 32) | (a & 0xffff_ffff);
            if matches!(op, TerOp::ShfL(_)) {
                ((wide << n) >> 32) & 0xffff_ffff
            } else {
                (wide >> n) & 0xffff_ffff
            }
        }
    }
}

/// `bfi`: inserts the low `len` bits of `f` into `b` at `pos`.
pub fn bfi(bits: u8, f: u64, b: u64, pos: u64, len: u64) -> u64 {
    let (pos, len) = ((pos & 0xff) as u32, (len & 0xff) as u32);
    let mut d = b & mask(bits);
    for i in 0..len {
        if pos + i >= bits as u32 {
            break;
        }
        d = (d & !(1 << (pos + i))) | (((f >> i) & 1) << (pos + i));
    }
    d
}

/// `lop3.b32`: bit i of the result is `lut[(a_i << 2) | (b_i << 1) | c_i]`.
pub fn lop3(a: u64, b: u64, c: u64, lut: u8) -> u64 {
    let mut d = 0u64;
    for i in 0..32 {
        let idx = ((a >> i) & 1) << 2 | ((b >> i) & 1) << 1 | ((c >> i) & 1);
        d |= (((lut >> idx) & 1) as u64) << i;
    }
    d
}

/// Integer comparison (`.b` types compare unsigned).
pub fn compare(cmp: Cmp, ty: IntTy, a: u64, b: u64) -> bool {
    let (a, b) = (value(a, ty), value(b, ty));
    match cmp {
        Cmp::Eq => a == b,
        Cmp::Ne => a != b,
        Cmp::Lt => a < b,
        Cmp::Le => a <= b,
        Cmp::Gt => a > b,
        Cmp::Ge => a >= b,
        _ => unreachable!("the decoder admits only eq/ne/lt/le/gt/ge for integers"),
    }
}
