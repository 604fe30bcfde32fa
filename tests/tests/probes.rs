//! Instruction probes: mma.sync, ldmatrix, cp.async and warp shuffles against the PTX ISA's
//! definitions (the fragment layouts of `kernel_abi::fragment`).

use cpu_ref::precision::round_tf32;
use gpu_host::kernels::probe::{self, MmaKind};
use gpu_host::{Device, DeviceBuffer, GpuError};
use half::{bf16, f16};
use integration_tests::{TestRng, Tolerance, assert_bits_eq, assert_close, kernel_tests, poisoned};
use kernel_abi::fragment;

/// Values of A/B (16-bit kinds: rounded to the storage type) and the packed 32-bit words.
fn operand(rng: &mut TestRng, kind: MmaKind, n: usize) -> (Vec<f64>, Vec<u32>) {
    let raw = rng.uniform(n, -2.0, 2.0);
    match kind {
        MmaKind::Tf32 => (
            raw.iter().map(|&x| round_tf32(x) as f64).collect(),
            raw.iter().map(|x| x.to_bits()).collect(),
        ),
        MmaKind::Bf16 | MmaKind::F16 => {
            let bits: Vec<u16> = raw
                .iter()
                .map(|&x| {
                    if kind == MmaKind::Bf16 {
                        bf16::from_f32(x).to_bits()
                    } else {
                        f16::from_f32(x).to_bits()
                    }
                })
                .collect();
            let values = bits
                .iter()
                .map(|&b| if kind == MmaKind::Bf16 { bf16::from_bits(b).to_f32() } else { f16::from_bits(b).to_f32() } as f64)
                .collect();
            let words = bits.chunks(2).map(|p| p[0] as u32 | (p[1] as u32) << 16).collect();
            (values, words)
        }
    }
}

fn check_mma(dev: &impl Device, kind: MmaKind) {
    let mut rng = TestRng::new();
    let k = kind.k();
    let (a, a_words) = operand(&mut rng, kind, 16 * k);
    let (b, b_words) = operand(&mut rng, kind, 8 * k);
    let c = rng.uniform(128, -1.0, 1.0);
    let want: Vec<f32> = (0..128)
        .map(|i| {
            let (m, n) = (i / 8, i % 8);
            let dot: f64 = (0..k).map(|kk| a[m * k + kk] * b[n * k + kk]).sum();
            (dot + c[i] as f64) as f32
        })
        .collect();
    // Exact products summed in f32 (in whatever order and alignment the tensor core uses):
    // within (k + 2)·2^-23 of the magnitude S = Σ|a·b| + |c| of what is summed.
    let allowed: Vec<f64> = (0..128)
        .map(|i| {
            let (m, n) = (i / 8, i % 8);
            let mag: f64 = (0..k).map(|kk| (a[m * k + kk] * b[n * k + kk]).abs()).sum();
            (k as f64 + 2.0) * 2f64.powi(-23) * (mag + c[i].abs() as f64)
        })
        .collect();
    let (da, db, dc) =
        (dev.upload(&a_words).unwrap(), dev.upload(&b_words).unwrap(), dev.upload(&c).unwrap());
    let mut d = poisoned::<_, f32>(dev, 128).unwrap();
    probe::mma(dev, kind, da.view(), db.view(), dc.view(), d.view_mut()).unwrap();
    let got = dev.download(d.view()).unwrap();
    let bad: Vec<usize> = (0..128)
        .filter(|&i| {
            let err = (got[i] as f64 - want[i] as f64).abs();
            !got[i].is_finite() || err > allowed[i]
        })
        .collect();
    assert!(
        bad.is_empty(),
        "mma {kind:?}: {} of 128 elements off, first [{}] got {} want {} (seed {})",
        bad.len(),
        bad[0],
        got[bad[0]],
        want[bad[0]],
        rng.seed()
    );
}

fn check_mma_bf16(dev: &impl Device) {
    check_mma(dev, MmaKind::Bf16);
}

fn check_mma_f16(dev: &impl Device) {
    check_mma(dev, MmaKind::F16);
}

fn check_mma_tf32(dev: &impl Device) {
    check_mma(dev, MmaKind::Tf32);
}

fn check_ldmatrix(dev: &impl Device) {
    let mut rng = TestRng::new();
    let src = rng.u16s(256);
    let dsrc = dev.upload(&src).unwrap();
    for matrices in [1u32, 2, 4] {
        for trans in [false, true] {
            let mut out = poisoned::<_, u32>(dev, 128).unwrap();
            probe::ldmatrix(dev, matrices, trans, dsrc.view(), out.view_mut()).unwrap();
            let got = dev.download(out.view()).unwrap();
            let layout = if trans { fragment::ldmatrix_trans } else { fragment::ldmatrix };
            let want: Vec<u32> = (0..128u32)
                .map(|i| {
                    let (lane, j) = (i / 4, i % 4);
                    if j >= matrices {
                        return u32::MAX;
                    }
                    let half = |h| {
                        let p = layout(lane, h);
                        src[(j * 64 + p.row * 8 + p.col) as usize] as u32
                    };
                    half(0) | half(1) << 16
                })
                .collect();
            assert_bits_eq(&format!("ldmatrix x{matrices} trans={trans}"), rng.seed(), &got, &want);
        }
    }
}

fn check_cp_async(dev: &impl Device) {
    let mut rng = TestRng::new();
    for len in [0usize, 1, 5, 16, 17, 100, 511, 512] {
        // Random bytes past `len` up to the next 16: readable, but not to be copied.
        let bytes = rng.bytes(len.next_multiple_of(16).max(16));
        let src = dev.upload(&bytes).unwrap();
        let mut out = poisoned::<_, u8>(dev, 512).unwrap();
        probe::cp_async(dev, src.view(), len, out.view_mut()).unwrap();
        let got = dev.download(out.view()).unwrap();
        let mut want = vec![0u8; 512];
        want[..len].copy_from_slice(&bytes[..len]);
        assert_bits_eq(&format!("cp.async of {len} bytes"), rng.seed(), &got, &want);
    }
}

fn check_warp(dev: &impl Device) {
    let mut rng = TestRng::new();
    let x = rng.uniform(32, -10.0, 10.0);
    let dx = dev.upload(&x).unwrap();
    let mut out = poisoned::<_, f32>(dev, 128).unwrap();
    probe::warp(dev, dx.view(), out.view_mut()).unwrap();
    let got = dev.download(out.view()).unwrap();
    let sum: f64 = x.iter().map(|&v| v as f64).sum();
    let max = x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mut sums = Vec::new();
    for lane in 0..32 {
        sums.push((got[lane * 4], sum as f32));
        let exact = [max, x[(lane + 1) % 32], x[if lane < 31 { lane + 1 } else { lane }]];
        assert_bits_eq(
            &format!("warp lane {lane}"),
            rng.seed(),
            &got[lane * 4 + 1..lane * 4 + 4],
            &exact,
        );
    }
    let (got_sums, want_sums): (Vec<f32>, Vec<f32>) = sums.into_iter().unzip();
    assert_close("warp sum", rng.seed(), &got_sums, &want_sums, Tolerance { abs: 1e-5, rel: 1e-5 });
    assert!(got_sums.iter().all(|&s| s == got_sums[0]), "butterfly sum differs across lanes");
}

/// Misaligned and wrongly sized probe arguments are rejected before launch.
fn check_probe_argument_errors(dev: &impl Device) {
    let src = dev.upload(&[0u16; 264]).unwrap();
    let mut out = dev.alloc::<u32>(128).unwrap();
    let err = probe::ldmatrix(dev, 4, false, src.view().slice(1..257).unwrap(), out.view_mut())
        .unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { arg: "src", .. })
            && err.to_string().contains("aligned"),
        "unexpected error: {err}"
    );
    let err = probe::ldmatrix(dev, 3, false, src.view().slice(0..256).unwrap(), out.view_mut())
        .unwrap_err();
    assert!(err.to_string().contains("matrices"), "unexpected error: {err}");
}

kernel_tests! {
    mma_bf16 => check_mma_bf16;
    mma_f16 => check_mma_f16;
    mma_tf32 => check_mma_tf32;
    ldmatrix => check_ldmatrix;
    cp_async => check_cp_async;
    warp => check_warp;
    probe_argument_errors => check_probe_argument_errors;
}
