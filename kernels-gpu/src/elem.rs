//! Storage element types on the device: f32, bf16 and f16, with f32 arithmetic.

use crate::arch::{cvt, global};
use crate::unroll::unroll;
use kernel_abi::{Bf16, F16};

/// A storage type whose elements are computed on in f32.
pub trait Elem: Copy {
    /// Exact widening to f32.
    fn to_f32(self) -> f32;
    /// Narrowing from f32, rounding to nearest-even.
    fn from_f32(x: f32) -> Self;
    /// This element's bits repeated to fill a 32-bit word.
    fn splat_word(self) -> u32;
    /// Loads the 8 elements at `p` as f32, with 16-byte accesses.
    ///
    /// # Safety
    /// `p` must be a 16-byte aligned global address of 8 readable elements.
    unsafe fn load8(p: *const Self) -> [f32; 8] {
        // SAFETY: forwarded contract.
        Self::widen8(unsafe { Self::load8_words(p) })
    }
    /// Loads the 8 elements at `p` as raw 32-bit words, with 16-byte accesses: all 8 words for
    /// f32, the first 4 for the 16-bit types (the rest zero). Widening them later
    /// ([`Elem::widen8`]) keeps loads in flight in half the registers for 16-bit types.
    ///
    /// # Safety
    /// `p` must be a 16-byte aligned global address of 8 readable elements.
    unsafe fn load8_words(p: *const Self) -> [u32; 8];
    /// The 8 elements of [`Elem::load8_words`]'s words, as f32.
    fn widen8(words: [u32; 8]) -> [f32; 8];
    /// Rounds 8 values and stores them at `p`, with 16-byte accesses.
    ///
    /// # Safety
    /// `p` must be a 16-byte aligned global address of 8 writable elements.
    unsafe fn store8(p: *mut Self, v: [f32; 8]) {
        // SAFETY: forwarded contract.
        unsafe { Self::store8_words(p, Self::narrow8(v)) }
    }
    /// 8 values rounded to this type, as the words [`Elem::store8`] writes (laid out as
    /// [`Elem::load8_words`]'s, so that [`Elem::widen8`] gives back the stored values).
    fn narrow8(v: [f32; 8]) -> [u32; 8];
    /// Stores [`Elem::narrow8`]'s words at `p`, with 16-byte accesses.
    ///
    /// # Safety
    /// `p` must be a 16-byte aligned global address of 8 writable elements.
    unsafe fn store8_words(p: *mut Self, words: [u32; 8]);
    /// Whether the type is 16 bits wide: two elements to a 32-bit word ([`Elem::pack2`]).
    const HALF: bool;
    /// `lo` and `hi` rounded to this type and packed into one word, `lo` in the low half: the
    /// 16-bit types only (f32, which is not [`Elem::HALF`], returns `lo`'s bits).
    fn pack2(lo: f32, hi: f32) -> u32;
}

/// bf16 bits → f32 (exact: bf16 is the top half of an f32).
#[inline(always)]
pub fn bf16_bits_to_f32(bits: u16) -> f32 {
    f32::from_bits((bits as u32) << 16)
}

impl Elem for f32 {
    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }
    #[inline(always)]
    fn from_f32(x: f32) -> Self {
        x
    }
    #[inline(always)]
    fn splat_word(self) -> u32 {
        self.to_bits()
    }
    #[inline(always)]
    unsafe fn load8_words(p: *const Self) -> [u32; 8] {
        // SAFETY: the caller guarantees 8 aligned readable f32 = two 16-byte vectors.
        let (lo, hi) = unsafe {
            let w = p.cast::<u32>();
            (global::ld_global_v4_u32(w), global::ld_global_v4_u32(w.add(4)))
        };
        core::array::from_fn(|i| if i < 4 { lo[i] } else { hi[i - 4] })
    }
    #[inline(always)]
    fn widen8(words: [u32; 8]) -> [f32; 8] {
        words.map(f32::from_bits)
    }
    #[inline(always)]
    fn narrow8(v: [f32; 8]) -> [u32; 8] {
        v.map(f32::to_bits)
    }
    #[inline(always)]
    unsafe fn store8_words(p: *mut Self, bits: [u32; 8]) {
        let w = p.cast::<u32>();
        // SAFETY: the caller guarantees 8 aligned writable f32 = two 16-byte vectors.
        unsafe {
            global::st_global_v4_u32(w, [bits[0], bits[1], bits[2], bits[3]]);
            global::st_global_v4_u32(w.add(4), [bits[4], bits[5], bits[6], bits[7]]);
        }
    }
    const HALF: bool = false;
    #[inline(always)]
    fn pack2(lo: f32, _hi: f32) -> u32 {
        lo.to_bits()
    }
}

/// Shared implementation of the two 16-bit types: 8 elements are one 16-byte vector.
macro_rules! half_elem {
    ($ty:ident, $widen:expr, $pack:path) => {
        impl Elem for $ty {
            #[inline(always)]
            fn to_f32(self) -> f32 {
                $widen(self.0)
            }
            #[inline(always)]
            fn from_f32(x: f32) -> Self {
                $ty($pack(x, 0.0) as u16)
            }
            #[inline(always)]
            fn splat_word(self) -> u32 {
                (self.0 as u32) * 0x0001_0001
            }
            #[inline(always)]
            unsafe fn load8_words(p: *const Self) -> [u32; 8] {
                // SAFETY: the caller guarantees 8 aligned readable 16-bit elements.
                let w = unsafe { global::ld_global_v4_u32(p.cast::<u32>()) };
                core::array::from_fn(|i| if i < 4 { w[i] } else { 0 })
            }
            #[inline(always)]
            fn widen8(words: [u32; 8]) -> [f32; 8] {
                core::array::from_fn(|i| $widen((words[i / 2] >> (16 * (i % 2))) as u16))
            }
            #[inline(always)]
            fn narrow8(v: [f32; 8]) -> [u32; 8] {
                core::array::from_fn(|i| if i < 4 { $pack(v[2 * i], v[2 * i + 1]) } else { 0 })
            }
            #[inline(always)]
            unsafe fn store8_words(p: *mut Self, w: [u32; 8]) {
                // SAFETY: the caller guarantees 8 aligned writable 16-bit elements.
                unsafe { global::st_global_v4_u32(p.cast::<u32>(), [w[0], w[1], w[2], w[3]]) }
            }
            const HALF: bool = true;
            #[inline(always)]
            fn pack2(lo: f32, hi: f32) -> u32 {
                $pack(lo, hi)
            }
        }
    };
}

half_elem!(Bf16, bf16_bits_to_f32, cvt::pack_bf16x2);
half_elem!(F16, cvt::f16_to_f32, cvt::pack_f16x2);

/// Loads the `count` (1..=8) elements at `p` as f32 into the first `count` slots (the rest
/// are 0): 16-byte accesses when `vector && count == 8`, element loads otherwise.
///
/// # Safety
/// `p` must be a global address of `count` readable elements, 16-byte aligned when `vector`.
#[inline(always)]
pub unsafe fn load_chunk<T: Elem>(p: *const T, count: usize, vector: bool) -> [f32; 8] {
    if vector && count == 8 {
        // SAFETY: 8 aligned readable elements (the caller's contract).
        return unsafe { T::load8(p) };
    }
    let mut v = [0.0; 8];
    unroll!(k in 0..8 => {
        if k < count {
            // SAFETY: k < count elements are readable.
            v[k] = unsafe { (*p.add(k)).to_f32() };
        }
    });
    v
}

/// Rounds the first `count` (1..=8) values of `v` and stores them at `p`: 16-byte accesses when
/// `vector && count == 8`, element stores otherwise. Returns the stored values, widened back
/// (the rest 0).
///
/// # Safety
/// `p` must be a global address of `count` writable elements, 16-byte aligned when `vector`.
#[inline(always)]
pub unsafe fn store_chunk<T: Elem>(p: *mut T, v: [f32; 8], count: usize, vector: bool) -> [f32; 8] {
    if vector && count == 8 {
        let words = T::narrow8(v);
        // SAFETY: 8 aligned writable elements (the caller's contract).
        unsafe { T::store8_words(p, words) };
        return T::widen8(words);
    }
    let mut stored = [0.0; 8];
    unroll!(k in 0..8 => {
        if k < count {
            let x = T::from_f32(v[k]);
            // SAFETY: k < count elements are writable.
            unsafe { *p.add(k) = x };
            stored[k] = x.to_f32();
        }
    });
    stored
}

/// `x` rounded to `T` and widened back: the value a `T` buffer holds after storing `x`.
#[inline(always)]
pub fn round_trip<T: Elem>(x: f32) -> f32 {
    T::from_f32(x).to_f32()
}
