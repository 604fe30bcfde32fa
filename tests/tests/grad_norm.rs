//! Global gradient norm (two deterministic passes) against cpu-ref's kernel-order reference,
//! bit for bit, and against f64; plus the non-finite flag and argument checks.

use cpu_ref::precision::Element;
use gpu_host::kernels::elementwise::FloatElement;
use gpu_host::kernels::grad_norm::{GRAD_NORM_WORKSPACE_LEN, grad_norm};
use gpu_host::{Device, DeviceBuffer, GpuError};
use half::{bf16, f16};
use integration_tests::{
    TestRng, assert_bits_eq, assert_close, assert_floats_eq, kernel_tests, poisoned, small_sizes,
    upload_at,
};

/// Every residue mod 8 at a small and a middling length, several full blocks with a partial
/// chunk, and (past 1024 blocks · 2048 elements) the capped grid with several chunks per
/// thread.
fn lengths(dev: &impl Device) -> Vec<usize> {
    let mut n: Vec<usize> = (1..=16).chain((0..8).map(|r| 1000 + r)).collect();
    n.extend([2048 * 5 + 3, 2_500_003]);
    if !small_sizes(dev) {
        n.push(124_475_904);
    }
    n
}

/// View offsets in elements: 0 keeps 16-byte alignment, 1 and 3 break it.
const OFFSETS: &[usize] = &[0, 1, 3];

/// Non-zero values over many binades (squares stay far from f32 overflow), both signs.
fn spread<T: Element>(rng: &mut TestRng, n: usize) -> Vec<T> {
    let exps = rng.uniform(n, -12.0, 8.0);
    let mants = rng.uniform(n, 1.0, 2.0);
    let signs = rng.uniform(n, -1.0, 1.0);
    (0..n).map(|i| T::from_f32(mants[i].copysign(signs[i]) * exps[i].exp2())).collect()
}

/// Runs both passes on `x` placed at element `offset` of a poisoned buffer; returns `out`.
fn run<D: Device, T: FloatElement>(dev: &D, x: &[T], offset: usize) -> [f32; 2] {
    let buf = upload_at(dev, x, offset).unwrap();
    let mut workspace = poisoned::<D, u64>(dev, GRAD_NORM_WORKSPACE_LEN).unwrap();
    let mut out = poisoned::<D, f32>(dev, 2).unwrap();
    let grads = buf.view().slice(offset..offset + x.len()).unwrap();
    grad_norm(dev, grads, workspace.view_mut(), out.view_mut()).unwrap();
    let out = dev.download(out.view()).unwrap();
    [out[0], out[1]]
}

fn reference<T: Element>(x: &[T]) -> [f32; 2] {
    let r = cpu_ref::grad_norm_kernel_order(x);
    [r.norm, if r.nonfinite { 1.0 } else { 0.0 }]
}

fn check_grad_norm<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for n in lengths(dev) {
        let x = spread::<T>(&mut rng, n);
        let want = reference(&x);
        let exact = x.iter().map(|v| f64::from(v.to_f32()).powi(2)).sum::<f64>().sqrt();
        let offsets = if n > 3_000_000 { &OFFSETS[..2] } else { OFFSETS };
        for &offset in offsets {
            let what = format!("grad_norm_{} n={n} offset={offset}", <T as Element>::NAME);
            let got = run(dev, &x, offset);
            assert_bits_eq(&what, rng.seed(), &got, &want);
            // f32 sums of 8 squares per thread at worst: within 4.5 ulp of the f64 norm.
            let tol = integration_tests::Tolerance { abs: 0.0, rel: 4e-7 };
            assert_close(&what, rng.seed(), &got[..1], &[exact as f32], tol);
        }
    }
}

/// ±inf and NaN anywhere (vector body, partial chunk, unaligned view) set the flag, and the
/// norm is what the reference gives (inf or NaN).
fn check_nonfinite<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for (n, at) in [(1000, 0), (1003, 1001), (20_000, 12_345)] {
        for bad in [f32::INFINITY, f32::NEG_INFINITY, f32::NAN] {
            let mut x = spread::<T>(&mut rng, n);
            x[at] = T::from_f32(bad);
            for offset in [0, 1] {
                let got = run(dev, &x, offset);
                let what = format!(
                    "grad_norm_{} n={n} {bad} at {at} offset={offset}",
                    <T as Element>::NAME
                );
                assert_eq!(got[1], 1.0, "{what}: flag not set (seed {})", rng.seed());
                let want = reference(&x);
                assert_eq!(want[1], 1.0);
                // The norm itself: inf for ±inf, NaN for NaN, written (not the poison).
                assert_floats_eq(&format!("{what} norm"), rng.seed(), &got[..1], &want[..1]);
            }
        }
    }
}

/// Two launches give the same bits; so do the aligned and the unaligned views of the same
/// data (the thread ↔ element order does not depend on the alignment).
fn check_deterministic(dev: &impl Device) {
    let mut rng = TestRng::new();
    let n = if small_sizes(dev) { 300_001 } else { 124_475_904 };
    let x = spread::<bf16>(&mut rng, n);
    let first = run(dev, &x, 0);
    assert_bits_eq("grad_norm twice", rng.seed(), &run(dev, &x, 0), &first);
    assert_bits_eq("grad_norm unaligned", rng.seed(), &run(dev, &x, 1), &first);
}

/// An empty buffer has norm 0 and no non-finite value (both outputs still written).
fn check_empty(dev: &impl Device) {
    assert_eq!(run::<_, f32>(dev, &[], 0), [0.0, 0.0]);
}

fn check_bad_arguments(dev: &impl Device) {
    let x = dev.upload(&[1.0f32; 10]).unwrap();
    let mut workspace = dev.alloc::<u64>(GRAD_NORM_WORKSPACE_LEN - 1).unwrap();
    let mut out = dev.alloc::<f32>(2).unwrap();
    let err = grad_norm(dev, x.view(), workspace.view_mut(), out.view_mut()).unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: "grad_norm", arg: "workspace", .. }),
        "unexpected error: {err}"
    );
    let mut workspace = dev.alloc::<u64>(GRAD_NORM_WORKSPACE_LEN).unwrap();
    let mut out = dev.alloc::<f32>(1).unwrap();
    let err = grad_norm(dev, x.view(), workspace.view_mut(), out.view_mut()).unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: "grad_norm", arg: "out", .. }),
        "unexpected error: {err}"
    );
}

kernel_tests! {
    grad_norm_f32 => check_grad_norm::<f32>;
    grad_norm_bf16 => check_grad_norm::<bf16>;
    grad_norm_f16 => check_grad_norm::<f16>;
    grad_norm_nonfinite_f32 => check_nonfinite::<f32>;
    grad_norm_nonfinite_bf16 => check_nonfinite::<bf16>;
    grad_norm_nonfinite_f16 => check_nonfinite::<f16>;
    grad_norm_deterministic => check_deterministic;
    grad_norm_empty => check_empty;
    grad_norm_bad_arguments => check_bad_arguments;
}
