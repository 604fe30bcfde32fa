//! GELU (tanh approximation) as stand-alone kernels, and the device-side [`gelu`] /
//! [`gelu_grad`] the GEMM epilogue fuses (see `kernel_abi::gelu` for the contract).
//!
//! `0.5·(1 + tanh(u)) = 1 / (1 + e^(−2u))`, so `gelu(x) = x / (1 + 2^(−2u·log2 e))` with
//! `u = √(2/π)·(x + 0.044715·x³)`: one `ex2.approx` (≈2⁻²² relative error) instead of
//! `tanh.approx` (2⁻¹¹), which would be coarser than f32 storage. For large `|u|` the
//! exponential saturates to 0 or +inf and the quotient to `x` or `−0`, as tanh does.
//!
//! The quotient is `rcp.approx` (1 ulp), not IEEE division: `div.rn` compiles to a range
//! check and a branch to a slow path around every division, and in the GEMM epilogue those
//! branches serialised the 8 elements of a run, each waiting out its two MUFU latencies
//! (128 such branches per thread in the 128 × 256 wgmma kernels' SASS).

use crate::arch::math::{ex2_approx_f32, rcp_approx_f32};
use crate::elem::Elem;
use crate::elementwise::for_each_chunk;
use crate::entry::entries;
use core::f32::math::mul_add;
use kernel_abi::gelu::{CUBIC, GeluBackwardParams, GeluForwardParams, SQRT_2_OVER_PI};
use kernel_abi::{Bf16, F16};

/// −2·log2(e): turns `e^(−2u)` into `2^(u·NEG_2_LOG2E)`.
const NEG_2_LOG2E: f64 = -2.0 * core::f64::consts::LOG2_E;
/// `u·NEG_2_LOG2E = x·(EXP_1 + EXP_3·x²)`, the constants folded in f64.
const EXP_1: f32 = (NEG_2_LOG2E * SQRT_2_OVER_PI) as f32;
const EXP_3: f32 = (NEG_2_LOG2E * SQRT_2_OVER_PI * CUBIC) as f32;
/// `2·u'(x) = DU_0 + DU_2·x²`.
const DU_0: f32 = (2.0 * SQRT_2_OVER_PI) as f32;
const DU_2: f32 = (6.0 * SQRT_2_OVER_PI * CUBIC) as f32;

/// `sigmoid(2u) = 0.5·(1 + tanh(u))` of the tanh approximation's `u(x)`, given `x2 = x²`:
/// `2^(x·(EXP_1 + EXP_3·x²))` is one `fma` and two multiplications from `x` (written as
/// `K·(x + C·x³)·(−2·log2 e)`, without contraction, it was six dependent instructions).
#[inline(always)]
fn half_one_plus_tanh(x: f32, x2: f32) -> f32 {
    rcp_approx_f32(1.0 + ex2_approx_f32(x * mul_add(EXP_3, x2, EXP_1)))
}

/// `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
#[inline(always)]
pub fn gelu(x: f32) -> f32 {
    x * half_one_plus_tanh(x, x * x)
}

/// d gelu(x) / dx: with `s = 0.5·(1 + tanh u)`, `s + x·s·(1 − s)·2u'(x)`, which equals
/// llm.c's `0.5·(1 + tanh u) + 0.5·x·sech²(u)·u'(x)` (sech² u = 4·s·(1 − s)); `s·(1 − s)`
/// is `fma(−s, s, s)`, and it multiplies `x` before `2u'(x)` so that the product stays finite
/// (0 where `s` saturates) while `x²` does.
#[inline(always)]
pub fn gelu_grad(x: f32) -> f32 {
    let x2 = x * x;
    let s = half_one_plus_tanh(x, x2);
    let du2 = mul_add(DU_2, x2, DU_0);
    mul_add(mul_add(-s, s, s) * x, du2, s)
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `gelu_forward` on a one-dimensional grid, after checking that
/// `inp` and `out` hold `n` elements each; `out` (a mutable borrow) does not overlap `inp`.
#[inline(always)]
unsafe fn forward<T: Elem>(p: GeluForwardParams<T>) {
    let (inp, out) = (p.inp.as_ptr(), p.out.as_mut_ptr());
    for_each_chunk(
        p.n,
        p.inp.is_aligned_to(16) && p.out.is_aligned_to(16),
        // SAFETY: whole chunk in bounds of both buffers, both 16-byte aligned.
        |i| unsafe { T::store8(out.add(i as usize), T::load8(inp.add(i as usize)).map(gelu)) },
        // SAFETY: i < n.
        |i| unsafe { *out.add(i as usize) = T::from_f32(gelu((*inp.add(i as usize)).to_f32())) },
    );
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `gelu_backward` / `gelu_backward_in_place` on a one-dimensional
/// grid, after checking that `inp`, `dout` and `dinp` hold `n` elements each; `dinp` (a mutable
/// borrow) overlaps no input except, in place, exactly `dout`.
#[inline(always)]
unsafe fn backward<T: Elem>(p: GeluBackwardParams<T>) {
    let (inp, dout, dinp) = (p.inp.as_ptr(), p.dout.as_ptr(), p.dinp.as_mut_ptr());
    let aligned = p.inp.is_aligned_to(16) && p.dout.is_aligned_to(16) && p.dinp.is_aligned_to(16);
    for_each_chunk(
        p.n,
        aligned,
        // SAFETY: whole chunk in bounds of all three buffers, all 16-byte aligned; an in-place
        // `dinp == dout` element is read before it is written, by the same thread.
        |i| unsafe {
            let i = i as usize;
            let (x, g) = (T::load8(inp.add(i)), T::load8(dout.add(i)));
            T::store8(dinp.add(i), core::array::from_fn(|k| gelu_grad(x[k]) * g[k]));
        },
        // SAFETY: i < n.
        |i| unsafe {
            let i = i as usize;
            let grad = gelu_grad((*inp.add(i)).to_f32()) * (*dout.add(i)).to_f32();
            *dinp.add(i) = T::from_f32(grad);
        },
    );
}

entries! { "gelu";
    gelu_forward_f32(GeluForwardParams<f32>) => forward::<f32>;
    gelu_forward_bf16(GeluForwardParams<Bf16>) => forward::<Bf16>;
    gelu_forward_f16(GeluForwardParams<F16>) => forward::<F16>;
    gelu_backward_f32(GeluBackwardParams<f32>) => backward::<f32>;
    gelu_backward_bf16(GeluBackwardParams<Bf16>) => backward::<Bf16>;
    gelu_backward_f16(GeluBackwardParams<F16>) => backward::<F16>;
}
