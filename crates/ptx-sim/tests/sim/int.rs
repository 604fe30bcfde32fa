//! Integer and bitwise instructions on hand-computed values.

use crate::common::*;
use gpu_host::SimErrorKind;

/// Runs `ops` (each computing `%r1`) and returns `%r1` after each.
fn each32(ops: &[&str]) -> Vec<u32> {
    let body: String = ops
        .iter()
        .enumerate()
        .map(|(i, op)| format!("\t{op}\n\tst.global.u32 [%rd0+{}], %r1;\n", 4 * i))
        .collect();
    run1(&body, ops.len())
}

/// Runs `ops` (each computing `%rd2`) and returns `%rd2` after each.
fn each64(ops: &[&str]) -> Vec<u64> {
    let body: String = ops
        .iter()
        .enumerate()
        .map(|(i, op)| format!("\t{op}\n\tst.global.u64 [%rd0+{}], %rd2;\n", 8 * i))
        .collect();
    let w = run1(&body, 2 * ops.len());
    w.chunks(2).map(|p| p[0] as u64 | (p[1] as u64) << 32).collect()
}

#[test]
fn add_sub_wrap_and_saturate() {
    assert_eq!(
        each32(&[
            "add.s32 %r1, 5, -7;",
            "add.u32 %r1, 0xffffffff, 2;",
            "sub.s32 %r1, -2147483648, 1;",
            "add.sat.s32 %r1, 2147483647, 1;",
            "sub.sat.s32 %r1, -2147483648, 1;",
        ]),
        [-2i32 as u32, 1, 0x7fff_ffff, 0x7fff_ffff, 0x8000_0000]
    );
    assert_eq!(each64(&["add.s64 %rd2, -1, 3;", "sub.u64 %rd2, 0, 1;"]), [2, u64::MAX]);
}

#[test]
fn multiplies_keep_the_right_half() {
    assert_eq!(
        each32(&[
            "mul.lo.u32 %r1, 0x10001, 0x10001;",
            "mul.hi.u32 %r1, 0x80000000, 6;",
            "mul.hi.s32 %r1, -2, 0x40000000;",
            "mad.lo.s32 %r1, -3, 7, 100;",
            "mad.hi.u32 %r1, 0xffffffff, 0xffffffff, 1;",
        ]),
        [0x0002_0001, 3, 0xffff_ffff, 79, 0xffff_ffff]
    );
    assert_eq!(
        each64(&[
            "mul.wide.u32 %rd2, 0xffffffff, 0xffffffff;",
            "mul.wide.s32 %rd2, -2, 3;",
            "mad.wide.u32 %rd2, 0x10000, 0x10000, 5;",
            "mul.hi.u64 %rd2, 0xffffffffffffffff, 0xffffffffffffffff;",
            "mul.hi.s64 %rd2, -1, 5;",
            "mad.lo.s64 %rd2, 3, 4, -20;",
        ]),
        [
            0xffff_fffe_0000_0001,
            (-6i64) as u64,
            0x1_0000_0005,
            0xffff_ffff_ffff_fffe,
            u64::MAX,
            (-8i64) as u64
        ]
    );
}

#[test]
fn division_truncates_toward_zero() {
    assert_eq!(
        each32(&[
            "div.s32 %r1, -7, 2;",
            "rem.s32 %r1, -7, 2;",
            "div.u32 %r1, 0xfffffff9, 2;",
            "rem.u32 %r1, 7, 4;",
            "div.s32 %r1, -2147483648, -1;",
        ]),
        [-3i32 as u32, -1i32 as u32, 0x7fff_fffc, 3, 0x8000_0000]
    );
}

#[test]
fn division_by_zero_is_reported() {
    let body = "\tmov.u32 %r2, 0;\n\tdiv.u32 %r1, 7, %r2;\n";
    expect_err(
        run(body, block(1), &[], 1),
        SimErrorKind::DivisionByZero,
        &["div.u32 %r1, 7, %r2;", "thread (0,0,0)"],
    );
}

#[test]
fn min_max_respect_signedness() {
    assert_eq!(
        each32(&[
            "min.s32 %r1, -1, 1;",
            "min.u32 %r1, -1, 1;",
            "max.s32 %r1, -5, -9;",
            "max.u32 %r1, 3, 0x80000000;"
        ]),
        [-1i32 as u32, 1, -5i32 as u32, 0x8000_0000]
    );
}

#[test]
fn shifts_clamp_their_amount() {
    assert_eq!(
        each32(&[
            "shl.b32 %r1, 1, 31;",
            "shl.b32 %r1, 1, 32;",
            "shr.u32 %r1, 0x80000000, 40;",
            "shr.s32 %r1, -256, 4;",
            "shr.s32 %r1, -256, 100;",
            "shr.b32 %r1, 0x80000000, 31;",
        ]),
        [0x8000_0000, 0, 0, -16i32 as u32, u32::MAX, 1]
    );
    assert_eq!(
        each64(&["shl.b64 %rd2, 1, 63;", "shr.s64 %rd2, -8, 1;"]),
        [1 << 63, (-4i64) as u64]
    );
}

#[test]
fn bit_manipulation() {
    assert_eq!(
        each32(&[
            "and.b32 %r1, 0xf0f0, 0xff00;",
            "or.b32 %r1, 0xf0f0, 0x0f0f;",
            "xor.b32 %r1, 0xffff, 0x0ff0;",
            "not.b32 %r1, 0;",
            "cnot.b32 %r1, 0;",
            "cnot.b32 %r1, 7;",
            "popc.b32 %r1, 0xf00f;",
            "clz.b32 %r1, 0x00010000;",
            "brev.b32 %r1, 1;",
            "bfind.u32 %r1, 0x00010000;",
            "bfind.s32 %r1, -1;",
            "bfind.shiftamt.u32 %r1, 0x00010000;",
            "bfind.u32 %r1, 0;",
            "abs.s32 %r1, -5;",
            "neg.s32 %r1, 5;",
        ]),
        [
            0xf000,
            0xffff,
            0xf00f,
            u32::MAX,
            1,
            0,
            8,
            15,
            0x8000_0000,
            16,
            u32::MAX,
            15,
            u32::MAX,
            5,
            -5i32 as u32
        ]
    );
}

#[test]
fn bit_fields_permutes_and_funnel_shifts() {
    assert_eq!(
        each32(&[
            "bfe.u32 %r1, 0x12345678, 8, 8;",
            "bfe.s32 %r1, 0x0000f000, 12, 4;",
            "bfe.u32 %r1, 0x12345678, 28, 8;",
            "bfi.b32 %r1, 0xab, 0x12345678, 8, 8;",
            "prmt.b32 %r1, 0x33221100, 0x77665544, 0x3210;",
            "prmt.b32 %r1, 0x33221100, 0x77665544, 0x4567;",
            "prmt.b32 %r1, 0x000080ff, 0, 0x8899;",
            "shf.l.wrap.b32 %r1, 0x80000000, 0x1, 1;",
            "shf.r.wrap.b32 %r1, 0x1, 0x3, 33;",
            "shf.l.clamp.b32 %r1, 0xaaaa, 0xbbbb, 40;",
            "lop3.b32 %r1, 0xf0f0, 0xcccc, 0xaaaa, 0x96;",
        ]),
        [
            0x56,
            u32::MAX,
            0x1,
            0x1234_ab78,
            0x3322_1100,
            0x4455_6677,
            0xffff_ffff,
            0x3,
            0x8000_0000,
            0xaaaa,
            0x9696
        ]
    );
}

#[test]
fn comparisons_and_selects() {
    let body = "\
\tsetp.lt.s32 %p1, -1, 0;\n\tselp.u32 %r1, 1, 0, %p1;\n\tst.global.u32 [%rd0], %r1;\n\
\tsetp.lo.u32 %p1, -1, 0;\n\tselp.u32 %r1, 1, 0, %p1;\n\tst.global.u32 [%rd0+4], %r1;\n\
\tsetp.ge.u64 %p1|%p2, 5, 7;\n\tselp.u32 %r1, 1, 0, %p2;\n\tst.global.u32 [%rd0+8], %r1;\n\
\tsetp.eq.and.b32 %p3, 1, 1, !%p1;\n\tselp.u32 %r1, 1, 0, %p3;\n\tst.global.u32 [%rd0+12], %r1;\n\
\tsetp.ne.xor.b32 %p3|%p4, 1, 1, %p2;\n\tselp.u32 %r1, 1, 0, %p4;\n\tst.global.u32 [%rd0+16], %r1;\n\
\tand.pred %p5, %p1, %p2;\n\tor.pred %p6, %p1, %p2;\n\tnot.pred %p7, %p6;\n\
\tselp.u32 %r1, 1, 0, %p5;\n\tselp.u32 %r2, 2, 0, %p6;\n\tselp.u32 %r3, 4, 0, %p7;\n\
\tor.b32 %r1, %r1, %r2;\n\tor.b32 %r1, %r1, %r3;\n\tst.global.u32 [%rd0+20], %r1;\n";
    // p1 = 5 >= 7 = false, p2 = true; eq.and(true, !false) = true; ne.xor: q = !(1 != 1) ^ p2 = false
    assert_eq!(run1(body, 6), [1, 0, 1, 1, 0, 2]);
}

#[test]
fn conversions_between_integer_widths() {
    assert_eq!(
        each32(&[
            "cvt.u16.u32 %rs1, 0x12345;\n\tcvt.u32.u16 %r1, %rs1;",
            "cvt.s16.s32 %rs1, -1;\n\tcvt.s32.s16 %r1, %rs1;",
            "cvt.sat.s8.s32 %r1, 300;",
            "cvt.sat.u8.s32 %r1, -5;",
            "cvt.sat.s8.s32 %r1, -300;",
            "cvt.s32.s8 %r1, 0x80;",
            "mov.b32 %r1, {%rs2, %rs3};\n\tmov.u16 %rs2, 0x1111;\n\tmov.u16 %rs3, 0x2222;\n\tmov.b32 %r1, {%rs2, %rs3};",
            "mov.b32 {%rs4, %rs5}, 0xaaaabbbb;\n\tcvt.u32.u16 %r1, %rs5;",
        ]),
        [0x2345, u32::MAX, 127, 0, 0xffff_ff80, 0xffff_ff80, 0x2222_1111, 0xaaaa]
    );
    assert_eq!(
        each64(&[
            "cvt.s64.s32 %rd2, -2;",
            "cvt.u64.u32 %rd2, -2;",
            "mov.u32 %r2, 7;\n\tmov.u32 %r3, 9;\n\tmov.b64 %rd2, {%r2, %r3};",
            "mov.b64 {%r4, _}, 0x1111111122222222;\n\tcvt.u64.u32 %rd2, %r4;",
        ]),
        [(-2i64) as u64, 0xffff_fffe, 0x9_0000_0007, 0x2222_2222]
    );
}
