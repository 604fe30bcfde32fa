//! Floating-point instructions on hand-computed values: exact IEEE rounding, .ftz, .sat,
//! NaN rules, the .approx functions, comparisons.

use crate::common::*;

/// Runs `ops` (each computing `%f1`, with `%f2 = a`, `%f3 = b`, `%f4 = c` preset per op) and
/// returns the bits of `%f1` after each.
fn each(cases: &[(&str, [u32; 3])]) -> Vec<u32> {
    let body: String = cases
        .iter()
        .enumerate()
        .map(|(i, (op, [a, b, c]))| {
            format!(
                "\tmov.b32 %f2, {a:#x};\n\tmov.b32 %f3, {b:#x};\n\tmov.b32 %f4, {c:#x};\n\t{op}\n\
                 \tst.global.f32 [%rd0+{}], %f1;\n",
                4 * i
            )
        })
        .collect();
    run1(&body, cases.len())
}

const ONE_PLUS: u32 = 0x3f80_0001; // 1 + 2^-23
const NAN: u32 = 0x7fff_ffff;
const MIN_SUB: u32 = 0x0000_0001; // smallest subnormal
const NEG_ZERO: u32 = 0x8000_0000;

#[test]
fn arithmetic_rounds_once_to_nearest_even() {
    let sq_rounded = f(1.0 + 2f32.powi(-22)); // (1+2^-23)^2 rounds to 1 + 2^-22
    let got = each(&[
        ("mul.rn.f32 %f1, %f2, %f3;", [ONE_PLUS, ONE_PLUS, 0]),
        // fma keeps the 2^-46 that mul then sub loses.
        ("fma.rn.f32 %f1, %f2, %f3, %f4;", [ONE_PLUS, ONE_PLUS, sq_rounded ^ 0x8000_0000]),
        (
            "mul.rn.f32 %f5, %f2, %f3;\n\tsub.rn.f32 %f1, %f5, %f4;",
            [ONE_PLUS, ONE_PLUS, sq_rounded],
        ),
        ("add.rn.f32 %f1, %f2, %f3;", [f(1.0), f(2f32.powi(-24)), 0]),
        ("add.rn.f32 %f1, %f2, %f3;", [ONE_PLUS, f(2f32.powi(-24)), 0]),
        ("div.rn.f32 %f1, %f2, %f3;", [f(1.0), f(3.0), 0]),
        ("sqrt.rn.f32 %f1, %f2;", [f(2.0), 0, 0]),
        ("rcp.rn.f32 %f1, %f2;", [f(3.0), 0, 0]),
        ("mad.rn.f32 %f1, %f2, %f3, %f4;", [f(2.0), f(3.0), f(1.0)]),
        ("add.f32 %f1, %f2, %f3;", [f(0.5), f(0.25), 0]),
    ]);
    assert_eq!(
        got,
        [
            sq_rounded,
            0x2880_0000,
            0,
            f(1.0),
            0x3f80_0002,
            0x3eaa_aaab,
            0x3fb5_04f3,
            0x3eaa_aaab,
            f(7.0),
            f(0.75)
        ]
    );
}

#[test]
fn ftz_and_sat_modifiers() {
    let got = each(&[
        ("add.f32 %f1, %f2, %f3;", [MIN_SUB, 0, 0]),
        ("add.ftz.f32 %f1, %f2, %f3;", [MIN_SUB, 0, 0]),
        ("mul.ftz.f32 %f1, %f2, %f3;", [f(2f32.powi(-100)), f(2f32.powi(-30)), 0]),
        ("mul.f32 %f1, %f2, %f3;", [f(2f32.powi(-100)), f(2f32.powi(-30)), 0]),
        ("add.ftz.f32 %f1, %f2, %f3;", [MIN_SUB | 0x8000_0000, 0x8000_0000, 0]),
        ("add.sat.f32 %f1, %f2, %f3;", [f(0.75), f(0.5), 0]),
        ("add.sat.f32 %f1, %f2, %f3;", [f(-0.75), f(0.5), 0]),
        ("mul.sat.f32 %f1, %f2, %f3;", [f(f32::INFINITY), f(0.0), 0]),
    ]);
    assert_eq!(got, [MIN_SUB, 0, 0, f(2f32.powi(-130)), NEG_ZERO, f(1.0), 0, 0]);
}

#[test]
fn nan_results_are_canonical_and_min_max_prefer_numbers() {
    let inf = f(f32::INFINITY);
    let neg_nan = 0xffc0_0000;
    let got = each(&[
        ("sub.f32 %f1, %f2, %f3;", [inf, inf, 0]),
        ("add.f32 %f1, %f2, %f3;", [neg_nan, f(1.0), 0]),
        ("min.f32 %f1, %f2, %f3;", [neg_nan, f(1.0), 0]),
        ("max.f32 %f1, %f2, %f3;", [f(1.0), neg_nan, 0]),
        ("min.NaN.f32 %f1, %f2, %f3;", [neg_nan, f(1.0), 0]),
        ("min.f32 %f1, %f2, %f3;", [neg_nan, neg_nan, 0]),
        ("min.f32 %f1, %f2, %f3;", [0, NEG_ZERO, 0]),
        ("max.f32 %f1, %f2, %f3;", [NEG_ZERO, 0, 0]),
        ("neg.f32 %f1, %f2;", [neg_nan, 0, 0]),
        ("abs.f32 %f1, %f2;", [f(-2.5), 0, 0]),
        ("abs.f32 %f1, %f2;", [neg_nan, 0, 0]),
        ("neg.f32 %f1, %f2;", [0, 0, 0]),
        ("copysign.f32 %f1, %f2, %f3;", [f(-1.0), f(3.0), 0]),
        ("div.approx.f32 %f1, %f2, %f3;", [0x7f80_0001, f(f32::MAX), 0]),
    ]);
    // f32 neg/abs of a NaN give the canonical NaN, as on an H100 (FADD -x, -RZ).
    assert_eq!(
        got,
        [NAN, NAN, f(1.0), f(1.0), NAN, NAN, NEG_ZERO, 0, NAN, f(2.5), NAN, NEG_ZERO, f(-3.0), NAN]
    );
}

#[test]
fn approximate_functions_are_exact_on_exact_cases() {
    let got = each(&[
        ("ex2.approx.ftz.f32 %f1, %f2;", [f(3.0), 0, 0]),
        ("ex2.approx.f32 %f1, %f2;", [f(f32::NEG_INFINITY), 0, 0]),
        ("lg2.approx.f32 %f1, %f2;", [f(8.0), 0, 0]),
        ("lg2.approx.f32 %f1, %f2;", [0, 0, 0]),
        ("lg2.approx.f32 %f1, %f2;", [f(-1.0), 0, 0]),
        ("rcp.approx.f32 %f1, %f2;", [f(4.0), 0, 0]),
        ("rsqrt.approx.f32 %f1, %f2;", [f(4.0), 0, 0]),
        ("rsqrt.approx.f32 %f1, %f2;", [NEG_ZERO, 0, 0]),
        ("sqrt.approx.f32 %f1, %f2;", [f(9.0), 0, 0]),
        ("tanh.approx.f32 %f1, %f2;", [f(20.0), 0, 0]),
        ("tanh.approx.f32 %f1, %f2;", [NEG_ZERO, 0, 0]),
        ("div.approx.f32 %f1, %f2, %f3;", [f(1.0), f(2f32.powi(127)), 0]),
        ("div.full.f32 %f1, %f2, %f3;", [f(1.0), f(4.0), 0]),
        ("sin.approx.f32 %f1, %f2;", [0, 0, 0]),
        ("cos.approx.f32 %f1, %f2;", [0, 0, 0]),
    ]);
    assert_eq!(
        got,
        [
            f(8.0),
            0,
            f(3.0),
            f(f32::NEG_INFINITY),
            NAN,
            f(0.25),
            f(0.5),
            f(f32::NEG_INFINITY),
            f(3.0),
            f(1.0),
            NEG_ZERO,
            0,
            f(0.25),
            0,
            f(1.0)
        ]
    );
}

#[test]
fn approximate_functions_are_within_one_ulp() {
    let xs = [0.1f32, -0.7, 1.3, 5.5, -3.25];
    let ops =
        ["ex2.approx.f32", "tanh.approx.f32", "sin.approx.f32", "cos.approx.f32", "lg2.approx.f32"];
    for op in ops {
        let cases: Vec<(String, [u32; 3])> = xs
            .iter()
            .map(|x| (format!("{op} %f1, %f2;"), [f(x.abs().max(0.01) * x.signum()), 0, 0]))
            .collect();
        let refs: Vec<(&str, [u32; 3])> = cases.iter().map(|(s, v)| (s.as_str(), *v)).collect();
        let got = each(&refs);
        for (x, g) in xs.iter().zip(got) {
            let x = *x as f64;
            let want = match op {
                "ex2.approx.f32" => x.exp2(),
                "tanh.approx.f32" => x.tanh(),
                "sin.approx.f32" => x.sin(),
                "cos.approx.f32" => x.cos(),
                _ => x.log2(),
            };
            let g = f32::from_bits(g);
            if want.is_nan() {
                assert!(g.is_nan(), "{op}({x}) = {g}");
                continue;
            }
            let ulp = (want as f32).abs().next_up() - (want as f32).abs();
            assert!((g as f64 - want).abs() <= ulp as f64, "{op}({x}) = {g}, want {want}");
        }
    }
}

#[test]
fn comparisons_follow_the_ordered_unordered_rules() {
    let body = "\
\tmov.b32 %f2, 0x7fffffff;\n\tmov.b32 %f3, 0f3F800000;\n\
\tsetp.lt.f32 %p1, %f2, %f3;\n\tsetp.ltu.f32 %p2, %f2, %f3;\n\
\tsetp.ne.f32 %p3, %f2, %f3;\n\tsetp.neu.f32 %p4, %f2, %f3;\n\
\tsetp.nan.f32 %p5, %f2, %f3;\n\tsetp.num.f32 %p6, %f3, %f3;\n\
\tmov.b32 %f4, 0x00000001;\n\tsetp.eq.ftz.f32 %p7, %f4, 0f00000000;\n\
\tsetp.eq.f32 %p8, %f4, 0f00000000;\n\
\tselp.u32 %r1, 1, 0, %p1;\n\tselp.u32 %r2, 2, 0, %p2;\n\tselp.u32 %r3, 4, 0, %p3;\n\tselp.u32 %r4, 8, 0, %p4;\n\
\tselp.u32 %r5, 16, 0, %p5;\n\tselp.u32 %r6, 32, 0, %p6;\n\tselp.u32 %r7, 64, 0, %p7;\n\tselp.u32 %r8, 128, 0, %p8;\n\
\tor.b32 %r1, %r1, %r2;\n\tor.b32 %r1, %r1, %r3;\n\tor.b32 %r1, %r1, %r4;\n\tor.b32 %r1, %r1, %r5;\n\
\tor.b32 %r1, %r1, %r6;\n\tor.b32 %r1, %r1, %r7;\n\tor.b32 %r1, %r1, %r8;\n\
\tst.global.u32 [%rd0], %r1;\n\
\ttestp.subnormal.f32 %p1, %f4;\n\ttestp.normal.f32 %p2, %f4;\n\ttestp.notanumber.f32 %p3, %f2;\n\
\tselp.u32 %r1, 1, 0, %p1;\n\tselp.u32 %r2, 2, 0, %p2;\n\tselp.u32 %r3, 4, 0, %p3;\n\
\tor.b32 %r1, %r1, %r2;\n\tor.b32 %r1, %r1, %r3;\n\tst.global.u32 [%rd0+4], %r1;\n";
    // lt false, ltu true, ne false, neu true, nan true, num true, eq.ftz true, eq false
    assert_eq!(run1(body, 2), [2 | 8 | 16 | 32 | 64, 1 | 4]);
}

#[test]
fn double_precision() {
    let body = "\
\tmov.b64 %fd1, 0d3FF0000000000001;\n\tmul.rn.f64 %fd2, %fd1, %fd1;\n\
\tneg.f64 %fd3, %fd2;\n\tfma.rn.f64 %fd4, %fd1, %fd1, %fd3;\n\
\tst.global.f64 [%rd0], %fd2;\n\tst.global.f64 [%rd0+8], %fd4;\n\
\tdiv.rn.f64 %fd5, 0d3FF0000000000000, 0d4008000000000000;\n\tst.global.f64 [%rd0+16], %fd5;\n\
\tsqrt.rn.f64 %fd6, 0d4000000000000000;\n\tst.global.f64 [%rd0+24], %fd6;\n";
    let w = run1(body, 8);
    let words: Vec<u64> = w.chunks(2).map(|p| p[0] as u64 | (p[1] as u64) << 32).collect();
    let x = f64::from_bits(0x3ff0_0000_0000_0001);
    assert_eq!(
        words,
        [
            (x * x).to_bits(),
            2f64.powi(-104).to_bits(),
            (1.0f64 / 3.0).to_bits(),
            2f64.sqrt().to_bits()
        ]
    );
}
