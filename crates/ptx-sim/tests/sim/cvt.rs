//! `cvt` on hand-computed values: every rounding mode and saturation the kernels use,
//! f32 ↔ bf16/f16/tf32, float ↔ integer.

use crate::common::*;

/// Runs `cvt_op` with `%f2` (or `%r2` for integer sources) = `input`; returns `%r1`.
fn each(cases: &[(&str, u32)]) -> Vec<u32> {
    let body: String = cases
        .iter()
        .enumerate()
        .map(|(i, (op, input))| {
            format!(
                "\tmov.b32 %f2, {input:#x};\n\tmov.b32 %r2, {input:#x};\n\tmov.b32 %r1, 0;\n\t{op}\n\
                 \tst.global.u32 [%rd0+{}], %r1;\n",
                4 * i
            )
        })
        .collect();
    run1(&body, cases.len())
}

#[test]
fn packs_f32_pairs_to_bf16_and_f16_nearest_even() {
    let body = "\
\tmov.b32 %f2, 0f3F808000;\n\tmov.b32 %f3, 0f3F818000;\n\
\tcvt.rn.bf16x2.f32 %r1, %f2, %f3;\n\tst.global.u32 [%rd0], %r1;\n\
\tmov.b32 %f2, 0f477FF000;\n\tmov.b32 %f3, 0f477FEFFF;\n\
\tcvt.rn.f16x2.f32 %r1, %f2, %f3;\n\tst.global.u32 [%rd0+4], %r1;\n\
\tmov.b32 %f2, 0f33000000;\n\tmov.b32 %f3, 0f33C00000;\n\
\tcvt.rn.f16x2.f32 %r1, %f2, %f3;\n\tst.global.u32 [%rd0+8], %r1;\n\
\tmov.b32 %f2, 0fC0000000;\n\tmov.b32 %f3, 0f7FFFFFFF;\n\
\tcvt.rn.relu.f16x2.f32 %r1, %f2, %f3;\n\tst.global.u32 [%rd0+12], %r1;\n\
\tmov.b32 %f2, 0f7F800000;\n\tmov.b32 %f3, 0f3F800000;\n\
\tcvt.rn.satfinite.bf16x2.f32 %r1, %f2, %f3;\n\tst.global.u32 [%rd0+16], %r1;\n\
\tmov.b32 %f2, 0f80000000;\n\tmov.b32 %f3, 0f80000001;\n\
\tcvt.rn.relu.bf16x2.f32 %r1, %f2, %f3;\n\tst.global.u32 [%rd0+20], %r1;\n";
    let got = run1(body, 6);
    let pair = |hi: u32, lo: u32| hi << 16 | lo;
    // bf16: 1 + 2^-8 is a tie -> 1.0 (even); 1 + 3 * 2^-8 is a tie -> 1 + 2^-6 (even).
    // The first source goes to the upper half.
    assert_eq!(got[0], pair(0x3f80, 0x3f82));
    // f16: 65520 rounds to infinity, 65519.996 to 65504.
    assert_eq!(got[1], pair(0x7c00, 0x7bff));
    // f16 subnormals: 2^-25 is a tie between 0 and 2^-24 -> 0; 1.5 * 2^-24 is a tie -> 2^-23.
    assert_eq!(got[2], pair(0x0000, 0x0002));
    // relu: -2 -> +0; NaN -> canonical NaN.
    assert_eq!(got[3], pair(0x0000, 0x7fff));
    // satfinite: inf -> largest finite bf16.
    assert_eq!(got[4], pair(0x7f7f, 0x3f80));
    // relu: -0 and a negative that rounds to -0 -> +0 (an H100's F2FP.RELU does this).
    assert_eq!(got[5], pair(0x0000, 0x0000));
}

#[test]
fn rounds_to_tf32_to_nearest_ties_away() {
    let got = each(&[
        ("cvt.rna.tf32.f32 %r1, %f2;", 0x3f80_1000),
        ("cvt.rna.tf32.f32 %r1, %f2;", 0x3f80_0fff),
        ("cvt.rna.tf32.f32 %r1, %f2;", 0xbf80_1000),
        ("cvt.rna.tf32.f32 %r1, %f2;", 0x3f80_3000),
        ("cvt.rna.tf32.f32 %r1, %f2;", f(f32::MAX)),
        ("cvt.rna.satfinite.tf32.f32 %r1, %f2;", f(f32::MAX)),
        ("cvt.rna.tf32.f32 %r1, %f2;", 0xffc0_0001),
        ("cvt.rna.tf32.f32 %r1, %f2;", 0x7fff_ffff),
        ("cvt.rna.tf32.f32 %r1, %f2;", 0x7f80_0001),
        ("cvt.rna.satfinite.tf32.f32 %r1, %f2;", 0xff80_0000),
        ("cvt.rna.satfinite.tf32.f32 %r1, %f2;", 0x7fc0_0000),
    ]);
    // NaNs and infinities keep their bits above the low 13 (as ptxas's code for sm_90a does,
    // and an H100 agrees), so 0x7f800001 becomes infinity; satfinite steps an all-ones
    // exponent down by one tf32 ulp.
    assert_eq!(
        got,
        [
            0x3f80_2000,
            0x3f80_0000,
            0xbf80_2000,
            0x3f80_4000,
            0x7f80_0000,
            0x7f7f_e000,
            0xffc0_0000,
            0x7fff_e000,
            0x7f80_0000,
            0xff7f_e000,
            0x7fbf_e000,
        ]
    );
}

#[test]
fn float_to_integer_rounds_saturates_and_maps_nan_to_zero() {
    let got = each(&[
        ("cvt.rzi.s32.f32 %r1, %f2;", f(-2.7)),
        ("cvt.rni.s32.f32 %r1, %f2;", f(2.5)),
        ("cvt.rni.s32.f32 %r1, %f2;", f(3.5)),
        ("cvt.rmi.s32.f32 %r1, %f2;", f(-2.5)),
        ("cvt.rpi.s32.f32 %r1, %f2;", f(-2.5)),
        ("cvt.rzi.s32.f32 %r1, %f2;", f(1e10)),
        ("cvt.rzi.s32.f32 %r1, %f2;", f(-1e10)),
        ("cvt.rzi.s32.f32 %r1, %f2;", 0x7fc0_0000),
        ("cvt.rzi.u32.f32 %r1, %f2;", f(-1.0)),
        ("cvt.rni.u16.f32 %rs1, %f2;\n\tcvt.u32.u16 %r1, %rs1;", f(70000.0)),
    ]);
    assert_eq!(
        got,
        [
            -2i32 as u32,
            2,
            4,
            -3i32 as u32,
            -2i32 as u32,
            i32::MAX as u32,
            i32::MIN as u32,
            0,
            0,
            65535
        ]
    );
}

#[test]
fn integer_to_float_rounds_as_asked() {
    let got = each(&[
        ("cvt.rn.f32.s32 %f1, %r2;\n\tmov.b32 %r1, %f1;", 16_777_217),
        ("cvt.rn.f32.s32 %f1, %r2;\n\tmov.b32 %r1, %f1;", 16_777_219),
        ("cvt.rz.f32.u32 %f1, %r2;\n\tmov.b32 %r1, %f1;", 16_777_219),
        ("cvt.rp.f32.u32 %f1, %r2;\n\tmov.b32 %r1, %f1;", 16_777_217),
        ("cvt.rm.f32.s32 %f1, %r2;\n\tmov.b32 %r1, %f1;", (-16_777_217i32) as u32),
        ("cvt.rn.f32.u32 %f1, %r2;\n\tmov.b32 %r1, %f1;", u32::MAX),
    ]);
    assert_eq!(
        got,
        [
            f(16_777_216.0),
            f(16_777_220.0),
            f(16_777_218.0),
            f(16_777_218.0),
            f(-16_777_218.0),
            f(4_294_967_296.0)
        ]
    );
}

#[test]
fn float_widening_narrowing_and_integral_rounding() {
    let got = each(&[
        ("mov.b16 %rs1, 0x3c00;\n\tcvt.f32.f16 %f1, %rs1;\n\tmov.b32 %r1, %f1;", 0),
        ("mov.b16 %rs1, 0x0001;\n\tcvt.f32.f16 %f1, %rs1;\n\tmov.b32 %r1, %f1;", 0),
        ("mov.b16 %rs1, 0x4049;\n\tcvt.f32.bf16 %f1, %rs1;\n\tmov.b32 %r1, %f1;", 0),
        ("cvt.rn.bf16.f32 %rs1, %f2;\n\tcvt.u32.u16 %r1, %rs1;", f(1.0 + 3.0 * 2f32.powi(-8))),
        ("cvt.rn.f16.f32 %rs1, %f2;\n\tcvt.u32.u16 %r1, %rs1;", f(0.1)),
        ("cvt.rni.f32.f32 %f1, %f2;\n\tmov.b32 %r1, %f1;", f(2.5)),
        ("cvt.rmi.f32.f32 %f1, %f2;\n\tmov.b32 %r1, %f1;", f(-0.5)),
        ("cvt.rzi.f32.f32 %f1, %f2;\n\tmov.b32 %r1, %f1;", f(-0.5)),
        ("cvt.ftz.f32.f32 %f1, %f2;\n\tmov.b32 %r1, %f1;", 0x0000_0010),
        ("cvt.sat.f32.f32 %f1, %f2;\n\tmov.b32 %r1, %f1;", f(1.5)),
    ]);
    assert_eq!(
        got,
        [
            f(1.0),
            f(2f32.powi(-24)),
            f(3.140625),
            0x3f82,
            0x2e66,
            f(2.0),
            f(-1.0),
            0x8000_0000,
            0,
            f(1.0)
        ]
    );
}

#[test]
fn f64_to_f32_in_every_rounding_mode() {
    let body = "\
\tmov.b64 %fd1, 0d3FD5555555555555;\n\
\tcvt.rn.f32.f64 %f1, %fd1;\n\tst.global.f32 [%rd0], %f1;\n\
\tcvt.rz.f32.f64 %f1, %fd1;\n\tst.global.f32 [%rd0+4], %f1;\n\
\tcvt.rp.f32.f64 %f1, %fd1;\n\tst.global.f32 [%rd0+8], %f1;\n\
\tneg.f64 %fd2, %fd1;\n\tcvt.rm.f32.f64 %f1, %fd2;\n\tst.global.f32 [%rd0+12], %f1;\n\
\tcvt.f64.f32 %fd3, %f1;\n\tcvt.rn.f32.f64 %f2, %fd3;\n\tst.global.f32 [%rd0+16], %f2;\n";
    let third = 1.0f64 / 3.0;
    let rn = third as f32; // 0x3eaaaaab, above 1/3
    let got = run1(body, 5);
    assert_eq!(got, [f(rn), f(rn.next_down()), f(rn), f(-rn), f(-rn)]);
}
