//! AdamW over the tensors of one arena (see `kernel_abi::adamw` for the contract).
//!
//! Block row `blockIdx.y` updates tensor `blockIdx.y`: whole 8-element chunks with 16-byte
//! accesses when every buffer is 16-byte aligned at the tensor's offset, the rest (or all of
//! it, for unaligned tensors) element by element, grid-stride over `blockIdx.x`.

use crate::arch::{block_idx_y, global, grid_stride_1d};
use crate::elem::Elem;
use crate::entry::entries;
use crate::unroll::unroll;
use kernel_abi::adamw::{AdamWParams, CHUNK, stochastic_bits};
use kernel_abi::{Bf16, F16};

/// A working-copy type: how a new master weight is rounded into it.
trait Working: Elem {
    /// Whether the type has stochastic rounding (otherwise it always rounds to nearest-even).
    const STOCHASTIC: bool;

    /// `x` rounded stochastically with the 32 random bits `random`.
    fn from_f32_stochastic(x: f32, random: u32) -> Self;

    /// The 16 storage bits.
    fn to_bits(self) -> u16;
}

impl Working for Bf16 {
    const STOCHASTIC: bool = true;

    #[inline(always)]
    fn from_f32_stochastic(x: f32, random: u32) -> Self {
        if x.is_nan() {
            return Bf16::from_f32(x);
        }
        Bf16((x.to_bits().wrapping_add(random & 0xffff) >> 16) as u16)
    }

    #[inline(always)]
    fn to_bits(self) -> u16 {
        self.0
    }
}

impl Working for F16 {
    const STOCHASTIC: bool = false;

    #[inline(always)]
    fn from_f32_stochastic(x: f32, _random: u32) -> Self {
        F16::from_f32(x)
    }

    #[inline(always)]
    fn to_bits(self) -> u16 {
        self.0
    }
}

/// The per-launch constants of the update of one tensor.
#[derive(Clone, Copy)]
struct Hyper {
    lr: f32,
    beta1: f32,
    beta2: f32,
    eps: f32,
    bias_correction1: f32,
    bias_correction2: f32,
    grad_scale: f32,
    weight_decay: f32,
}

impl Hyper {
    /// One element's update, in `cpu_ref::adamw_update`'s order; returns the new parameter.
    #[inline(always)]
    fn update(&self, p: f32, grad: f32, m: &mut f32, v: &mut f32) -> f32 {
        let g = self.grad_scale * grad;
        *m = self.beta1 * *m + (1.0 - self.beta1) * g;
        *v = self.beta2 * *v + (1.0 - self.beta2) * g * g;
        let m_hat = *m / self.bias_correction1;
        let v_hat = *v / self.bias_correction2;
        p - self.lr * (m_hat / (core::f32::math::sqrt(v_hat) + self.eps) + self.weight_decay * p)
    }
}

/// The buffers of one tensor, starting at its offset.
#[derive(Clone, Copy)]
struct Tensor<G, W> {
    params: *mut f32,
    grads: *const G,
    m: *mut f32,
    v: *mut f32,
    working: *mut W,
    /// Arena index of element 0 (the stochastic-rounding counter).
    offset: u64,
}

#[inline(always)]
fn aligned16<T>(p: *const T) -> bool {
    (p as usize).is_multiple_of(16)
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `adamw` with one block row (`blockIdx.y`) per entry of the device
/// table, whose entries it checked lie inside an arena of `arena_len` elements, after checking
/// that `params`, `grads`, `m`, `v` and `working` (unless null) hold `arena_len` elements each;
/// the written buffers are distinct mutable borrows, overlapping no other buffer.
#[inline(always)]
unsafe fn adamw<G: Elem, W: Working>(p: AdamWParams<G, W>) {
    // SAFETY: the launcher launches one block row per table entry.
    let entry = unsafe { *p.tensors.as_ptr().add(block_idx_y() as usize) };
    let offset = entry.offset as usize;
    // SAFETY: the launcher checked every tensor lies inside every buffer.
    let t = unsafe {
        Tensor {
            params: p.params.as_mut_ptr().add(offset),
            grads: p.grads.as_ptr().add(offset),
            m: p.m.as_mut_ptr().add(offset),
            v: p.v.as_mut_ptr().add(offset),
            working: if p.working.is_null() {
                core::ptr::null_mut()
            } else {
                p.working.as_mut_ptr().add(offset)
            },
            offset: entry.offset,
        }
    };
    let hyper = Hyper {
        lr: p.lr,
        beta1: p.beta1,
        beta2: p.beta2,
        eps: p.eps,
        bias_correction1: p.bias_correction1,
        bias_correction2: p.bias_correction2,
        grad_scale: p.grad_scale,
        weight_decay: entry.weight_decay,
    };
    let stochastic = W::STOCHASTIC && p.stochastic != 0;
    let write_working = !t.working.is_null();
    let aligned = aligned16(t.params)
        && aligned16(t.grads)
        && aligned16(t.m)
        && aligned16(t.v)
        && aligned16(t.working);
    let n = entry.len as u64;
    let vectorized = if aligned { n / CHUNK * CHUNK } else { 0 };
    let (start, stride) = grid_stride_1d();

    let mut chunk = start;
    while chunk * CHUNK < vectorized {
        let i = (chunk * CHUNK) as usize;
        // SAFETY: a whole chunk inside the tensor, every buffer 16-byte aligned there.
        unsafe {
            let mut params = f32::load8(t.params.add(i));
            let grads = G::load8(t.grads.add(i));
            let mut m = f32::load8(t.m.add(i));
            let mut v = f32::load8(t.v.add(i));
            unroll!(k in 0..8 => {
                params[k] = hyper.update(params[k], grads[k], &mut m[k], &mut v[k]);
            });
            f32::store8(t.params.add(i), params);
            f32::store8(t.m.add(i), m);
            f32::store8(t.v.add(i), v);
            if write_working {
                if stochastic {
                    let index = t.offset + i as u64;
                    let mut halves = [0u32; 8];
                    unroll!(k in 0..8 => {
                        let random = stochastic_bits(p.seed, index + k as u64);
                        halves[k] = W::from_f32_stochastic(params[k], random).to_bits() as u32;
                    });
                    let words = [
                        halves[0] | halves[1] << 16,
                        halves[2] | halves[3] << 16,
                        halves[4] | halves[5] << 16,
                        halves[6] | halves[7] << 16,
                    ];
                    global::st_global_v4_u32(t.working.add(i).cast::<u32>(), words);
                } else {
                    W::store8(t.working.add(i), params);
                }
            }
        }
        chunk += stride;
    }
    let mut i = vectorized + start;
    while i < n {
        let k = i as usize;
        // SAFETY: k < len, inside every buffer.
        unsafe {
            let new = hyper.update(
                *t.params.add(k),
                (*t.grads.add(k)).to_f32(),
                &mut *t.m.add(k),
                &mut *t.v.add(k),
            );
            *t.params.add(k) = new;
            if write_working {
                *t.working.add(k) = if stochastic {
                    W::from_f32_stochastic(new, stochastic_bits(p.seed, t.offset + i))
                } else {
                    W::from_f32(new)
                };
            }
        }
        i += stride;
    }
}

entries! { "adamw";
    adamw_f32_bf16(AdamWParams<f32, Bf16>) => adamw::<f32, Bf16>;
    adamw_f32_f16(AdamWParams<f32, F16>) => adamw::<f32, F16>;
    adamw_bf16_bf16(AdamWParams<Bf16, Bf16>) => adamw::<Bf16, Bf16>;
    adamw_bf16_f16(AdamWParams<Bf16, F16>) => adamw::<Bf16, F16>;
    adamw_f16_bf16(AdamWParams<F16, Bf16>) => adamw::<F16, Bf16>;
    adamw_f16_f16(AdamWParams<F16, F16>) => adamw::<F16, F16>;
}
