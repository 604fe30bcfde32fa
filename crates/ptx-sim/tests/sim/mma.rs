//! mma.sync and ldmatrix on hand-written PTX, with fragments built on the host from the PTX
//! ISA layouts (`kernel_abi::fragment`).

use crate::common::*;
use gpu_host::{LaunchConfig, SimErrorKind};
use half::bf16;
use kernel_abi::fragment;

/// Lane `l` loads A regs from `in[4l..]`, B regs from `in[128 + 2l..]`, C from `in[192 + 4l..]`,
/// runs `mma` and stores D at `out[4l..]`.
fn mma_body(instr: &str) -> String {
    format!(
        "\tmul.wide.u32 %rd2, %r60, 16;\n\tadd.s64 %rd3, %rd1, %rd2;\n\
         \tld.global.v4.u32 {{%r1, %r2, %r3, %r4}}, [%rd3];\n\
         \tmul.wide.u32 %rd4, %r60, 8;\n\tadd.s64 %rd5, %rd1, %rd4;\n\
         \tld.global.v2.u32 {{%r5, %r6}}, [%rd5+512];\n\
         \tld.global.v4.f32 {{%f1, %f2, %f3, %f4}}, [%rd3+768];\n\
         \t{instr} {{%f5, %f6, %f7, %f8}}, {{%r1, %r2, %r3, %r4}}, {{%r5, %r6}}, {{%f1, %f2, %f3, %f4}};\n\
         \tadd.s64 %rd6, %rd0, %rd2;\n\tst.global.v4.f32 [%rd6], {{%f5, %f6, %f7, %f8}};\n"
    )
}

/// Input words for [`mma_body`]: A is 16×K, B is K×8, C is 16×8 (row-major), as f32 values;
/// `bits` turns a value into its operand bits.
fn fragments(k: usize, a: &[f32], b: &[f32], c: &[f32], bits: impl Fn(f32) -> u32) -> Vec<u32> {
    let mut input = vec![0u32; 320];
    for lane in 0..32u32 {
        let l = lane as usize;
        if k == 16 {
            for r in 0..4u32 {
                let e = |i| {
                    let p = fragment::m16n8k16_a(lane, i);
                    bits(a[(p.row * 16 + p.col) as usize])
                };
                input[4 * l + r as usize] = e(2 * r) | e(2 * r + 1) << 16;
            }
            for r in 0..2u32 {
                let e = |i| {
                    let p = fragment::m16n8k16_b(lane, i);
                    bits(b[(p.row * 8 + p.col) as usize])
                };
                input[128 + 2 * l + r as usize] = e(2 * r) | e(2 * r + 1) << 16;
            }
        } else {
            for i in 0..4u32 {
                let p = fragment::m16n8k8_tf32_a(lane, i);
                input[4 * l + i as usize] = bits(a[(p.row * 8 + p.col) as usize]);
            }
            for i in 0..2u32 {
                let p = fragment::m16n8k8_tf32_b(lane, i);
                input[128 + 2 * l + i as usize] = bits(b[(p.row * 8 + p.col) as usize]);
            }
        }
        for i in 0..4u32 {
            let p = fragment::m16n8_acc(lane, i);
            input[192 + 4 * l + i as usize] = c[(p.row * 8 + p.col) as usize].to_bits();
        }
    }
    input
}

/// D from the output words, as a 16×8 row-major matrix.
fn unscatter(out: &[u32]) -> Vec<f32> {
    let mut d = vec![f32::NAN; 128];
    for lane in 0..32u32 {
        for i in 0..4u32 {
            let p = fragment::m16n8_acc(lane, i);
            d[(p.row * 8 + p.col) as usize] = f32::from_bits(out[(4 * lane + i) as usize]);
        }
    }
    d
}

fn reference(k: usize, a: &[f32], b: &[f32], c: &[f32]) -> Vec<f32> {
    (0..128)
        .map(|i| {
            let (m, n) = (i / 8, i % 8);
            ((0..k).map(|kk| a[m * k + kk] as f64 * b[kk * 8 + n] as f64).sum::<f64>()
                + c[i] as f64) as f32
        })
        .collect()
}

/// Small integers: every sum is exact, so D must match bit for bit.
#[test]
fn bf16_mma_places_every_fragment_element() {
    let a: Vec<f32> = (0..256).map(|i| ((i * 7) % 13) as f32 - 6.0).collect();
    let b: Vec<f32> = (0..128).map(|i| ((i * 5) % 11) as f32 - 5.0).collect();
    let c: Vec<f32> = (0..128).map(|i| (i % 9) as f32).collect();
    let input = fragments(16, &a, &b, &c, |x| bf16::from_f32(x).to_bits() as u32);
    let body = mma_body("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32");
    let out = run(&body, block(32), &input, 128).unwrap();
    assert_eq!(unscatter(&out), reference(16, &a, &b, &c));
}

#[test]
fn tf32_mma_ignores_the_low_13_bits() {
    let a: Vec<f32> = (0..128).map(|i| 1.0 + (i % 5) as f32 / 4.0).collect();
    let b: Vec<f32> = (0..64).map(|i| 0.5 * ((i % 3) as f32 - 1.0)).collect();
    let c = vec![0.25f32; 128];
    let body = mma_body("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
    let clean = run(&body, block(32), &fragments(8, &a, &b, &c, f32::to_bits), 128).unwrap();
    let noisy =
        run(&body, block(32), &fragments(8, &a, &b, &c, |x| x.to_bits() | 0x1fff), 128).unwrap();
    assert_eq!(clean, noisy);
    assert_eq!(unscatter(&clean), reference(8, &a, &b, &c));
}

/// The model rounds once: 1 + 2^-24 + 2^-24 gives 1 + 2^-23, where f32 steps would give 1.
#[test]
fn mma_accumulates_exactly_and_rounds_once() {
    let mut a = vec![0f32; 128];
    let mut b = vec![0f32; 64];
    a[0] = 1.0;
    a[1] = 2f32.powi(-12);
    a[2] = 2f32.powi(-12);
    b[0] = 1.0;
    b[8] = 2f32.powi(-12);
    b[16] = 2f32.powi(-12);
    let c = vec![0f32; 128];
    let body = mma_body("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32");
    let out = run(&body, block(32), &fragments(8, &a, &b, &c, f32::to_bits), 128).unwrap();
    assert_eq!(unscatter(&out)[0], 1.0 + 2f32.powi(-23));
}

#[test]
fn mma_nan_results_are_canonical() {
    let mut a = vec![0f32; 256];
    let mut b = vec![0f32; 128];
    a[0] = f32::INFINITY;
    b[0] = 0.0;
    b[1] = 1.0;
    let c = vec![0f32; 128];
    let body = mma_body("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32");
    let out = run(
        &body,
        block(32),
        &fragments(16, &a, &b, &c, |x| half::f16::from_f32(x).to_bits() as u32),
        128,
    );
    let d = unscatter(&out.unwrap());
    assert_eq!(d[0].to_bits(), 0x7fff_ffff, "inf * 0");
    assert_eq!(d[1], f32::INFINITY);
}

/// ldmatrix through a generic address (no `.shared`): the tile is 32 rows of 8 halves, lane
/// l points at row l; register j of lane l holds elements (l / 4, 2 (l % 4) + h) of matrix j.
#[test]
fn ldmatrix_x4_through_a_generic_address() {
    let body = "\
\tmov.u32 %r1, smem;\n\tshl.b32 %r2, %r60, 4;\n\tadd.s32 %r3, %r1, %r2;\n\
\tmul.wide.u32 %rd2, %r60, 16;\n\tadd.s64 %rd3, %rd1, %rd2;\n\
\tld.global.v4.u32 {%r4, %r5, %r6, %r7}, [%rd3];\n\tst.shared.v4.u32 [%r3], {%r4, %r5, %r6, %r7};\n\
\tbar.sync 0;\n\tcvt.u64.u32 %rd4, %r3;\n\tcvta.shared.u64 %rd5, %rd4;\n\
\tldmatrix.sync.aligned.m8n8.x4.b16 {%r8, %r9, %r10, %r11}, [%rd5];\n\
\tadd.s64 %rd6, %rd0, %rd2;\n\tst.global.v4.u32 [%rd6], {%r8, %r9, %r10, %r11};\n";
    let halves: Vec<u16> = (0..256).map(|i| i as u16 * 3 + 1).collect();
    let input: Vec<u32> = halves.chunks(2).map(|p| p[0] as u32 | (p[1] as u32) << 16).collect();
    let config = LaunchConfig { shared_mem_bytes: 512, ..block(32) };
    let out = run(body, config, &input, 128).unwrap();
    for lane in 0..32u32 {
        for j in 0..4u32 {
            let e = |h| {
                let p = fragment::ldmatrix(lane, h);
                halves[(j * 64 + p.row * 8 + p.col) as usize] as u32
            };
            assert_eq!(out[(lane * 4 + j) as usize], e(0) | e(1) << 16, "lane {lane} reg {j}");
        }
    }
}

#[test]
fn ldmatrix_rows_must_be_16_byte_aligned() {
    let body = "\tmov.u32 %r1, smem;\n\tsetp.eq.u32 %p1, %r60, 0;\n\
                \t@%p1 st.shared.v4.u32 [%r1], {0, 0, 0, 0};\n\t@%p1 st.shared.v4.u32 [%r1+16], {0, 0, 0, 0};\n\
                \tbar.sync 0;\n\tshl.b32 %r2, %r60, 3;\n\tadd.s32 %r3, %r1, %r2;\n\
                \tldmatrix.sync.aligned.m8n8.x1.shared.b16 {%r4}, [%r3];\n";
    let config = LaunchConfig { shared_mem_bytes: 512, ..block(32) };
    expect_err(
        run(body, config, &[], 1),
        SimErrorKind::Misaligned,
        &["thread (1,0,0)", "not 16-byte aligned"],
    );
}
