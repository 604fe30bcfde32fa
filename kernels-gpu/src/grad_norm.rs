//! Global gradient norm in two deterministic passes (see `kernel_abi::grad_norm` for the order).

use crate::arch::{grid_stride_1d, thread_idx_x};
use crate::elem::Elem;
use crate::entry::entries;
use crate::reduce::block_sum_f64;
use crate::unroll::unroll;
use kernel_abi::grad_norm::{BLOCK_THREADS, CHUNK, GradNormFinishParams, GradNormPartialsParams};
use kernel_abi::{Bf16, F16};

const WARPS: u32 = BLOCK_THREADS / 32;

/// Whether an f32 is ±inf or NaN (all exponent bits set).
#[inline(always)]
fn nonfinite(x: f32) -> u32 {
    (x.to_bits() & 0x7f80_0000 == 0x7f80_0000) as u32
}

/// One thread's f32 sum of squares and non-finite flag.
#[derive(Clone, Copy)]
struct Partial {
    sum: f32,
    nonfinite: u32,
}

impl Partial {
    #[inline(always)]
    fn add(&mut self, x: f32) {
        self.sum += x * x;
        self.nonfinite |= nonfinite(x);
    }
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `grad_norm` with `partial_blocks(n)` blocks of `BLOCK_THREADS` and
/// 16 bytes of dynamic shared memory per warp, `x` holding `n` elements and `partials` at least
/// `2 · MAX_PARTIAL_BLOCKS` words; every thread reaches `block_sum_f64`.
#[inline(always)]
unsafe fn partials<T: Elem>(p: GradNormPartialsParams<T>) {
    let x = p.x.as_ptr();
    let aligned = p.x.is_aligned_to(16);
    let whole_chunks = p.n / CHUNK;
    let (start, stride) = grid_stride_1d();
    let mut acc = Partial { sum: 0.0, nonfinite: 0 };
    let mut chunk = start;
    while chunk < whole_chunks {
        let first = (chunk * CHUNK) as usize;
        let mut values = [0.0f32; 8];
        if aligned {
            // SAFETY: a whole chunk of the `n` elements, 16-byte aligned.
            values = unsafe { T::load8(x.add(first)) };
        } else {
            unroll!(k in 0..8 => {
                // SAFETY: the 8 elements of a whole chunk are in bounds.
                values[k] = unsafe { (*x.add(first + k)).to_f32() };
            });
        }
        unroll!(k in 0..8 => { acc.add(values[k]); });
        chunk += stride;
    }
    if chunk == whole_chunks {
        // This thread owns the last, partial chunk (empty when 8 divides n).
        let mut i = whole_chunks * CHUNK;
        while i < p.n {
            // SAFETY: i < n.
            acc.add(unsafe { (*x.add(i as usize)).to_f32() });
            i += 1;
        }
    }
    // SAFETY: every thread of the block calls it; the launcher gives the shared memory.
    if let Some((sum, flag)) = unsafe { block_sum_f64(acc.sum as f64, acc.nonfinite, WARPS) } {
        let out = p.partials.as_mut_ptr();
        let block = crate::arch::block_idx_x() as usize;
        // SAFETY: the launcher sized `partials` for two words per block.
        unsafe {
            *out.add(2 * block) = sum.to_bits();
            *out.add(2 * block + 1) = flag as u64;
        }
    }
}

/// The kernel body.
///
/// # Safety
/// Launched by `gpu-host`'s `grad_norm` right after [`partials`], with one block of
/// `BLOCK_THREADS` and the same shared memory; `partials` holds the `num_partials` pairs it
/// wrote and `out` two f32; every thread reaches `block_sum_f64`.
#[inline(always)]
unsafe fn finish(p: GradNormFinishParams) {
    let partials = p.partials.as_ptr();
    let (mut sum, mut flag) = (0.0f64, 0u32);
    let mut i = thread_idx_x();
    while i < p.num_partials {
        // SAFETY: i < num_partials, two words each.
        unsafe {
            sum += f64::from_bits(*partials.add(2 * i as usize));
            flag |= (*partials.add(2 * i as usize + 1) != 0) as u32;
        }
        i += BLOCK_THREADS;
    }
    // SAFETY: every thread of the single block calls it; the launcher gives the shared memory.
    if let Some((total, any)) = unsafe { block_sum_f64(sum, flag, WARPS) } {
        let out = p.out.as_mut_ptr();
        // SAFETY: `out` holds two f32.
        unsafe {
            *out = core::f64::math::sqrt(total) as f32;
            *out.add(1) = if any != 0 { 1.0 } else { 0.0 };
        }
    }
}

entries! { "grad_norm";
    grad_norm_partials_f32(GradNormPartialsParams<f32>) => partials::<f32>;
    grad_norm_partials_bf16(GradNormPartialsParams<Bf16>) => partials::<Bf16>;
    grad_norm_partials_f16(GradNormPartialsParams<F16>) => partials::<F16>;
    grad_norm_finish(GradNormFinishParams) => finish;
}
