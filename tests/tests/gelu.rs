//! GELU forward and backward kernels against the exact (f64) tanh-approximation GELU of
//! `cpu_ref::gemm`, the function the CPU reference computes in f32: f32 storage within a few
//! f32 ulps (a wrong constant moves results by 1e-4 or more), 16-bit storage within one ulp.

use cpu_ref::gemm::{gelu, gelu_grad};
use cpu_ref::precision::Element;
use gpu_host::kernels::elementwise::FloatElement;
use gpu_host::kernels::gelu::{gelu_backward, gelu_backward_in_place, gelu_forward};
use gpu_host::{Device, DeviceBuffer, GpuError};
use half::{bf16, f16};
use integration_tests::{
    TestRng, Tolerance, alignment_cases, assert_bits_eq, assert_close_in, kernel_tests, poisoned,
    small_sizes, upload_at,
};

/// f32 storage: the kernels round `u` in f32 and use `ex2.approx` (2 ulp) and `rcp.approx`
/// (1 ulp); the relative error of `x·sigmoid(2u)` grows with `|u|` (seen up to 9e-7 on
/// [-6, 6)).
const FORWARD: Tolerance = Tolerance { abs: 1e-9, rel: 2e-6 };
/// The derivative cancels near its zero (x ≈ −0.75), hence an absolute part.
const BACKWARD: Tolerance = Tolerance { abs: 1e-7, rel: 2e-6 };

/// Lengths around the 8-element vector chunk, several blocks, and (on a GPU) GPT-2 124M's
/// fc activation at B = 16, T = 1024.
fn lengths(dev: &impl Device) -> Vec<usize> {
    let mut n = vec![1, 7, 8, 9, 10, 11, 12, 13, 14, 15, 1000, 4099];
    if !small_sizes(dev) {
        n.push(16 * 1024 * 3072);
    }
    n
}

/// Inputs in [-6, 6) rounded to `T`, and their widened values.
fn inputs<T: Element>(rng: &mut TestRng, n: usize) -> (Vec<T>, Vec<f32>) {
    let x: Vec<T> = rng.uniform(n, -6.0, 6.0).into_iter().map(T::from_f32).collect();
    let wide = x.iter().map(|v| v.to_f32()).collect();
    (x, wide)
}

/// Buffer offsets for length `n`: every [`alignment_cases`] on the small lengths, aligned
/// only on GPT-2's.
fn offsets<const N: usize>(n: usize) -> Vec<[usize; N]> {
    if n > 100_000 { vec![[0; N]] } else { alignment_cases() }
}

fn check_forward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for n in lengths(dev) {
        for [o_x, offset] in offsets(n) {
            let (x, wide) = inputs::<T>(&mut rng, n);
            let dx = upload_at(dev, &x, o_x).unwrap();
            let mut out = poisoned::<_, T>(dev, offset + n).unwrap();
            let window = out.view_mut().slice_mut(offset..offset + n).unwrap();
            gelu_forward(dev, dx.view().slice(o_x..o_x + n).unwrap(), window).unwrap();
            let got = dev.download(out.view().slice(offset..offset + n).unwrap()).unwrap();
            let want: Vec<f32> = wide.iter().map(|&v| gelu(v as f64) as f32).collect();
            assert_close_in(
                &format!(
                    "gelu_forward_{} n={n} offsets inp={o_x} out={offset}",
                    <T as Element>::NAME
                ),
                rng.seed(),
                &got,
                &want,
                FORWARD,
            );
        }
    }
}

fn check_backward<T: FloatElement + Element>(dev: &impl Device) {
    let mut rng = TestRng::new();
    for n in lengths(dev) {
        for [o_x, o_g, offset] in offsets(n) {
            let (x, wide) = inputs::<T>(&mut rng, n);
            let g: Vec<T> = rng.uniform(n, -2.0, 2.0).into_iter().map(T::from_f32).collect();
            let want: Vec<f32> = wide
                .iter()
                .zip(&g)
                .map(|(&x, g)| (gelu_grad(x as f64) * g.to_f32() as f64) as f32)
                .collect();
            let (dx, dg) = (upload_at(dev, &x, o_x).unwrap(), upload_at(dev, &g, o_g).unwrap());
            let (vx, vg) =
                (dx.view().slice(o_x..o_x + n).unwrap(), dg.view().slice(o_g..o_g + n).unwrap());
            let mut dinp = poisoned::<_, T>(dev, offset + n).unwrap();
            let window = dinp.view_mut().slice_mut(offset..offset + n).unwrap();
            gelu_backward(dev, vx, vg, window).unwrap();
            let got = dev.download(dinp.view().slice(offset..offset + n).unwrap()).unwrap();
            let what = format!(
                "gelu_backward_{} n={n} offsets inp={o_x} dout={o_g} dinp={offset}",
                <T as Element>::NAME
            );
            assert_close_in(&what, rng.seed(), &got, &want, BACKWARD);

            // In place: the gradient buffer becomes dinp, bit for bit the same.
            let mut grad = upload_at(dev, &g, o_g).unwrap();
            gelu_backward_in_place(dev, vx, grad.view_mut().slice_mut(o_g..o_g + n).unwrap())
                .unwrap();
            let in_place = dev.download(grad.view().slice(o_g..o_g + n).unwrap()).unwrap();
            assert_bits_eq(&format!("{what} in place"), rng.seed(), &in_place, &got);
        }
    }
}

/// Mismatched lengths are rejected before launch, naming the argument.
fn check_argument_errors(dev: &impl Device) {
    let a = dev.upload(&[1.0f32; 10]).unwrap();
    let mut out = dev.alloc::<f32>(11).unwrap();
    let err = gelu_forward(dev, a.view(), out.view_mut()).unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: "gelu_forward", arg: "inp", .. }),
        "{err}"
    );
    let short = dev.upload(&[1.0f32; 9]).unwrap();
    let mut dinp = dev.alloc::<f32>(10).unwrap();
    let err = gelu_backward(dev, a.view(), short.view(), dinp.view_mut()).unwrap_err();
    assert!(
        matches!(&err, GpuError::InvalidArgument { op: "gelu_backward", arg: "dout", .. }),
        "{err}"
    );
}

kernel_tests! {
    gelu_forward_f32 => check_forward::<f32>;
    gelu_forward_bf16 => check_forward::<bf16>;
    gelu_forward_f16 => check_forward::<f16>;
    gelu_backward_f32 => check_backward::<f32>;
    gelu_backward_bf16 => check_backward::<bf16>;
    gelu_backward_f16 => check_backward::<f16>;
    gelu_argument_errors => check_argument_errors;
}
