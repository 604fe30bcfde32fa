//! The GEMM epilogue: alpha/beta scaling, bias, GELU / GELU backward, and the store of the
//! output element type, on runs of `V` adjacent columns of one row.
//!
//! A run goes through 16-byte loads and stores when every epilogue pointer, `ldc` and the batch
//! stride are 16-byte aligned and the whole run is inside the matrix; otherwise element by
//! element with bounds checks.
//!
//! [`write_rows16`] is the tensor-core kernels' path from accumulator fragments to runs: a
//! warp's 16 rows × 64 columns go through its shared staging buffer and come back as runs of 8
//! columns per lane; with `col_sums` it also adds up the 16 rows' stored values per column
//! (`kernel_abi::gemm::GemmParams::col_sums`). A 16-bit output whose epilogue is alpha and at
//! most a bias is finished before the staging instead, and staged packed
//! ([`write_rows16_packed`]).

use crate::arch::{global, shfl, smem, sync};
use crate::elem::{Elem, round_trip};
use crate::gelu::{gelu, gelu_grad};
use crate::unroll::unroll;
use core::f32::math::mul_add;
use kernel_abi::gemm::{
    ACT_DGELU, ACT_GELU, ACT_NONE, COL_SUM_ROWS, GemmParams, TAIL_BM, TAIL_BN, col_sum_groups, tc,
};
use kernel_abi::gemm_wgmma::wg;

/// The bias of an epilogue without one: `x + (−0) = x` for every `x` (−0 and NaN included),
/// so a bias-free epilogue runs the same `fma` as one with a bias and keeps the bits of
/// `alpha · acc`.
const NO_BIAS: f32 = -0.0;

/// Loads and stores of `V` adjacent elements, widened to / rounded from f32, as whole 16-byte
/// accesses.
pub trait VecIo<const V: usize>: Elem {
    /// Loads `V` elements.
    ///
    /// # Safety
    /// `p` must be a 16-byte aligned global address of `V` readable elements.
    unsafe fn load_vec(p: *const Self) -> [f32; V];
    /// Rounds and stores `V` elements.
    ///
    /// # Safety
    /// `p` must be a 16-byte aligned global address of `V` writable elements.
    unsafe fn store_vec(p: *mut Self, v: [f32; V]);
}

impl<T: Elem> VecIo<8> for T {
    #[inline(always)]
    unsafe fn load_vec(p: *const Self) -> [f32; 8] {
        // SAFETY: forwarded contract.
        unsafe { T::load8(p) }
    }
    #[inline(always)]
    unsafe fn store_vec(p: *mut Self, v: [f32; 8]) {
        // SAFETY: forwarded contract.
        unsafe { T::store8(p, v) }
    }
}

impl VecIo<4> for f32 {
    #[inline(always)]
    unsafe fn load_vec(p: *const Self) -> [f32; 4] {
        // SAFETY: forwarded contract (4 f32 = 16 bytes).
        unsafe { global::ld_global_v4_u32(p.cast()) }.map(f32::from_bits)
    }
    #[inline(always)]
    unsafe fn store_vec(p: *mut Self, v: [f32; 4]) {
        // SAFETY: forwarded contract (4 f32 = 16 bytes).
        unsafe { global::st_global_v4_u32(p.cast(), v.map(f32::to_bits)) }
    }
}

/// Whether `addr` (a byte address or byte count) is a multiple of 16.
#[inline(always)]
pub fn aligned16(addr: u64) -> bool {
    addr & 15 == 0
}

/// Defines a method finishing and storing a run of `$len` (4 or 8) columns of one row: the
/// vector path when allowed, else each in-bounds column through `store_one` (unrolled, so the
/// run stays in registers). It returns the values it stored before their rounding to `O` (0
/// for columns past N).
macro_rules! store_run {
    ($(#[$doc:meta])* $name:ident, $len:tt) => {
        $(#[$doc])*
        #[inline(always)]
        pub unsafe fn $name(&self, m: u32, n: u32, acc: [f32; $len]) -> [f32; $len]
        where
            O: VecIo<$len>,
        {
            let at = (m as u64 * self.ldc as u64 + n as u64) as usize;
            if self.vector && n + $len <= self.n {
                // SAFETY: the run is inside row m of every epilogue matrix and 16-byte aligned
                // (`vector`: aligned bases, ld and stride; runs start at multiples of the run
                // length, whose byte size is a multiple of 16); each input is loaded only when
                // the epilogue reads that matrix.
                unsafe {
                    let inputs = VecInputs {
                        c: || O::load_vec(self.c.add(at)),
                        bias: || O::load_vec(self.bias.add(n as usize)),
                        pre_act: || O::load_vec(self.pre_act.add(at)),
                        bias_always: false,
                    };
                    return self.finish_vec(at, acc, inputs);
                }
            }
            let mut stored = [0.0; $len];
            unroll!(e in 0..$len => {
                if n + (e as u32) < self.n {
                    // SAFETY: (m, n + e) is inside the matrices.
                    stored[e] = unsafe { self.store_one(at + e, n as usize + e, acc[e]) };
                }
            });
            stored
        }
    };
}

/// The epilogue of one batch of one launch.
pub struct Epilogue<O> {
    c: *mut O,
    bias: *const O,
    /// The pre-activation: written under `ACT_GELU` (when not null), read under `ACT_DGELU`.
    pre_act: *mut O,
    ldc: u32,
    n: u32,
    alpha: f32,
    beta: f32,
    activation: u32,
    vector: bool,
    /// The batch's column sums (`GemmParams::col_sums`, `N` per row group), or null.
    col_sums: *mut f32,
}

impl<O: Elem> Epilogue<O> {
    /// The epilogue of batch `batch` of the launch `p`.
    ///
    /// # Safety
    /// `p` must describe valid buffers as `kernel_abi::gemm` specifies and `batch < batch
    /// count`.
    #[inline(always)]
    pub unsafe fn new<I: Copy>(p: &GemmParams<I, O>, batch: u32) -> Self {
        let offset = batch as u64 * p.stride_c;
        let size = size_of::<O>() as u64;
        let nullable_aligned = |addr: u64| addr == 0 || aligned16(addr);
        let vector = aligned16(p.c.addr() | (p.ldc as u64 * size) | (p.stride_c * size))
            && nullable_aligned(p.bias.addr())
            && nullable_aligned(p.pre_act_store.addr())
            && nullable_aligned(p.pre_act_load.addr());
        // SAFETY: batch offsets stay inside the allocations the launcher checked (null
        // pointers are never offset).
        unsafe {
            Self {
                c: p.c.as_mut_ptr().add(offset as usize),
                bias: p.bias.as_ptr(),
                pre_act: if p.activation == ACT_DGELU {
                    p.pre_act_load.as_ptr().cast_mut().add(offset as usize)
                } else if p.pre_act_store.is_null() {
                    core::ptr::null_mut()
                } else {
                    p.pre_act_store.as_mut_ptr().add(offset as usize)
                },
                ldc: p.ldc,
                n: p.n,
                alpha: p.alpha,
                beta: p.beta,
                activation: p.activation,
                vector,
                col_sums: if p.col_sums.is_null() {
                    core::ptr::null_mut()
                } else {
                    let groups = batch as u64 * col_sum_groups(p.m) as u64;
                    p.col_sums.as_mut_ptr().add((groups * p.n as u64) as usize)
                },
            }
        }
    }

    store_run!(
        /// Finishes and stores `acc`, the products of row `m` (< M) and columns `n .. n + 4`
        /// (columns at or past N are dropped).
        ///
        /// # Safety
        /// `m < M`; the launch's buffers as [`Epilogue::new`] requires.
        store4,
        4
    );

    store_run!(
        /// As [`Epilogue::store4`] for a run of 8 columns.
        ///
        /// # Safety
        /// `m < M`; the launch's buffers as [`Epilogue::new`] requires.
        store8,
        8
    );

    /// `alpha · acc + beta · old + bias` (`old` read only under `beta != 0`; `bias` is −0
    /// without a bias, [`NO_BIAS`], which leaves every value as it is, −0 and NaN included), the
    /// arithmetic of every path: `beta · old` and, without it, the bias join `alpha · acc` in one
    /// `fma` each. Uncontracted (a multiplication, then an addition under a branch on the
    /// bias), the bias epilogue of every forward GEMM took two instructions an element instead
    /// of one. With `alpha` and `beta` 1 or 0, as the trainer has them, the bits of the
    /// separate operations.
    #[inline(always)]
    fn affine(&self, acc: f32, old: impl FnOnce() -> f32, bias: f32) -> f32 {
        if self.beta != 0.0 {
            mul_add(self.beta, old(), acc * self.alpha) + bias
        } else {
            mul_add(acc, self.alpha, bias)
        }
    }

    /// The bias words of a run or pair without a bias: [`NO_BIAS`] in every element (−0 is
    /// its sign bit alone in every storage type).
    #[inline(always)]
    fn no_bias_word() -> u32 {
        if O::HALF { 0x8000_8000 } else { 0x8000_0000 }
    }

    /// The scalar epilogue of the product `acc` of one element at offset `at` of the batch's
    /// C, column `col`; returns the value it stored, before its rounding to `O`.
    ///
    /// # Safety
    /// `at` is the offset in the batch's C (and pre-activation) of an element of a row `< M` and
    /// of column `col < N`; the buffers as [`Epilogue::new`] or [`Epilogue::partials`] requires.
    #[inline(always)]
    unsafe fn store_one(&self, at: usize, col: usize, acc: f32) -> f32 {
        // SAFETY: the caller guarantees (row, col) is inside the matrices.
        unsafe {
            let old = || (*self.c.add(at)).to_f32();
            let bias = if self.bias.is_null() { NO_BIAS } else { (*self.bias.add(col)).to_f32() };
            let mut v = self.affine(acc, old, bias);
            if self.activation == ACT_GELU {
                if !self.pre_act.is_null() {
                    *self.pre_act.add(at) = O::from_f32(v);
                }
                v = gelu(v);
            } else if self.activation == ACT_DGELU {
                v *= gelu_grad((*self.pre_act.add(at)).to_f32());
            }
            *self.c.add(at) = O::from_f32(v);
            v
        }
    }
}

/// The global inputs of a run of 8 columns, as raw words ([`Elem::load8_words`]): the old C
/// (under `beta != 0`) and the pre-activation (under GELU backward), each loaded only when the
/// run takes the 16-byte path and the epilogue reads it (zeros otherwise).
#[derive(Clone, Copy, Default)]
pub struct RunInputs {
    c: [u32; 8],
    pre_act: [u32; 8],
}

/// The bias of a run of 8 columns, as raw words, shared by the runs of every row
/// ([`Epilogue::load_bias8`]; [`NO_BIAS`] without a bias or off the 16-byte path).
#[derive(Clone, Copy)]
pub struct RunBias([u32; 8]);

impl<O: Elem> Epilogue<O> {
    /// Runs whose inputs [`write_rows16`] keeps in flight at once: all four of a lane for
    /// 16-bit outputs, one for f32, whose inputs take twice the registers (with four, ptxas
    /// spilled in the Hopper kernels with 128 × 256 tiles; with two carried through the runs'
    /// loop, in the ping-pong ones).
    const INPUTS_AHEAD: usize = if size_of::<O>() == 4 { 1 } else { 4 };

    /// Whether the run of 8 columns from `n` takes the 16-byte path.
    #[inline(always)]
    fn vector8(&self, n: u32) -> bool {
        self.vector && n + 8 <= self.n
    }

    /// Loads the inputs of the run of row `m` (< M), columns `n .. n + 8`, for
    /// [`Epilogue::store8_with`]: issued early, their latency overlaps whatever comes between.
    ///
    /// # Safety
    /// `m < M`; the launch's buffers as [`Epilogue::new`] requires.
    #[inline(always)]
    pub unsafe fn load_inputs8(&self, m: u32, n: u32) -> RunInputs {
        let mut inputs = RunInputs::default();
        if self.vector8(n) {
            let at = (m as u64 * self.ldc as u64 + n as u64) as usize;
            // SAFETY: as in `store8`'s vector path: the run is inside row m of every epilogue
            // matrix and 16-byte aligned.
            unsafe {
                if self.beta != 0.0 {
                    inputs.c = O::load8_words(self.c.add(at));
                }
                if self.activation == ACT_DGELU {
                    inputs.pre_act = O::load8_words(self.pre_act.add(at));
                }
            }
        }
        inputs
    }

    /// Loads the bias of columns `n .. n + 8` for [`Epilogue::store8_with`].
    #[inline(always)]
    pub fn load_bias8(&self, n: u32) -> RunBias {
        if self.vector8(n) && !self.bias.is_null() {
            // SAFETY: the bias holds N elements (the launcher checked), the run is inside them
            // and 16-byte aligned (`vector`).
            RunBias(unsafe { O::load8_words(self.bias.add(n as usize)) })
        } else {
            RunBias([Self::no_bias_word(); 8])
        }
    }

    /// As [`Epilogue::store8`], with the run's inputs loaded by [`Epilogue::load_inputs8`] and
    /// [`Epilogue::load_bias8`].
    ///
    /// # Safety
    /// As [`Epilogue::store8`]; `inputs` are `load_inputs8(m, n)`'s, `bias` `load_bias8(n)`'s.
    #[inline(always)]
    pub unsafe fn store8_with(
        &self,
        m: u32,
        n: u32,
        acc: [f32; 8],
        inputs: RunInputs,
        bias: RunBias,
    ) -> [f32; 8]
    where
        O: VecIo<8>,
    {
        if !self.vector8(n) {
            // SAFETY: forwarded contract (the element path loads its own inputs).
            return unsafe { self.store8(m, n, acc) };
        }
        let at = (m as u64 * self.ldc as u64 + n as u64) as usize;
        let loaded = VecInputs {
            c: || O::widen8(inputs.c),
            bias: || O::widen8(bias.0),
            pre_act: || O::widen8(inputs.pre_act),
            bias_always: true,
        };
        // SAFETY: the run is inside row m of every epilogue matrix and 16-byte aligned.
        unsafe { self.finish_vec(at, acc, loaded) }
    }

    /// Finishes a run of `V` columns at offset `at` on the 16-byte path and stores it: alpha,
    /// `beta ·` the old C, the bias, then GELU (storing the pre-activation first) or the GELU
    /// backward. Each of `inputs` is called only when the epilogue reads that matrix. Returns
    /// the values it stored, before their rounding to `O`: only the column sums need them
    /// rounded, and rounded here (unconditionally, as LLVM kept it), every run of a 16-bit
    /// output paid two instructions an element for nothing.
    ///
    /// # Safety
    /// The run is inside its row of every epilogue matrix and 16-byte aligned.
    #[inline(always)]
    unsafe fn finish_vec<const V: usize>(
        &self,
        at: usize,
        acc: [f32; V],
        inputs: VecInputs<
            impl FnOnce() -> [f32; V],
            impl FnOnce() -> [f32; V],
            impl FnOnce() -> [f32; V],
        >,
    ) -> [f32; V]
    where
        O: VecIo<V>,
    {
        // Element loops rather than `array::from_fn` / `map`: LLVM outlined those closures
        // (a `call` with local-memory arrays) once the split-K reduction grew its tail path.
        // `affine`'s arithmetic, its branches taken once for the run (none on the bias when
        // `bias_always`: the words loaded ahead are `NO_BIAS` without one).
        let mut v = acc;
        if self.beta != 0.0 {
            let old = (inputs.c)();
            for (x, old) in v.iter_mut().zip(&old) {
                *x = mul_add(self.beta, *old, *x * self.alpha);
            }
            if !self.bias.is_null() {
                let bias = (inputs.bias)();
                for (x, bias) in v.iter_mut().zip(&bias) {
                    *x += bias;
                }
            }
        } else if inputs.bias_always || !self.bias.is_null() {
            let bias = (inputs.bias)();
            for (x, bias) in v.iter_mut().zip(&bias) {
                *x = mul_add(*x, self.alpha, *bias);
            }
        } else {
            for x in &mut v {
                *x *= self.alpha;
            }
        }
        // SAFETY: the caller's contract.
        unsafe {
            if self.activation == ACT_GELU {
                if !self.pre_act.is_null() {
                    O::store_vec(self.pre_act.add(at), v);
                }
                for x in &mut v {
                    *x = gelu(*x);
                }
            } else if self.activation == ACT_DGELU {
                let pre = (inputs.pre_act)();
                for (x, pre) in v.iter_mut().zip(&pre) {
                    *x *= gelu_grad(*pre);
                }
            }
            O::store_vec(self.c.add(at), v);
        }
        v
    }

    /// The rows of columns `n0 .. n0 + cols` (those < N, rounded down to whole 16 bytes) of
    /// the global input the epilogue reads, for [`L2Rows::prefetch`]: the pre-activation under
    /// GELU backward, else the old C under `beta != 0` (the trainer never has both); `None`
    /// without either, off the 16-byte path, or past N.
    ///
    /// # Safety
    /// `n0` a multiple of 64; the launch's buffers as [`Epilogue::new`] requires.
    #[cfg(target_feature = "sm_90a")]
    #[inline(always)]
    pub unsafe fn l2_rows(&self, n0: u32, cols: u32) -> Option<L2Rows> {
        let input = if self.activation == ACT_DGELU {
            self.pre_act.cast_const()
        } else if self.beta != 0.0 {
            self.c.cast_const()
        } else {
            return None;
        };
        let bytes = (self.n.saturating_sub(n0).min(cols) * size_of::<O>() as u32) & !15;
        if !self.vector || bytes == 0 {
            return None;
        }
        // SAFETY: column n0 < N of row 0 lies inside the matrix.
        let base = unsafe { input.add(n0 as usize) }.cast::<u8>();
        Some(L2Rows { base, pitch: self.ldc * size_of::<O>() as u32, bytes })
    }

    /// Whether [`write_rows16`] finishes this launch's values in the fragments' own layout and
    /// stages them packed ([`write_rows16_packed`]): a 16-bit output on the 16-byte path whose
    /// epilogue is alpha and at most a bias (no old C, activation or column sums).
    #[inline(always)]
    pub fn packs(&self) -> bool {
        O::HALF
            && self.vector
            && self.beta == 0.0
            && self.activation == ACT_NONE
            && !self.col_sums_on()
    }

    /// The bias of columns `n` and `n + 1` (`n` even) as one raw word of two 16-bit elements,
    /// for [`Epilogue::finish_pair`]: two [`NO_BIAS`] without a bias, 0 past N, `n`'s alone at
    /// N − 1.
    ///
    /// # Safety
    /// [`Epilogue::packs`] holds (a 16-bit type, a 16-byte aligned bias).
    #[inline(always)]
    unsafe fn bias_pair_word(&self, n: u32) -> u32 {
        if self.bias.is_null() {
            return Self::no_bias_word();
        }
        if n >= self.n {
            return 0;
        }
        // SAFETY: the bias holds N elements (the launcher checked); n < N, and n + 1 < N for
        // the word load, which is 4-byte aligned (an aligned bias, an even n).
        unsafe {
            if n + 1 < self.n {
                *self.bias.add(n as usize).cast::<u32>()
            } else {
                *self.bias.add(n as usize).cast::<u16>() as u32
            }
        }
    }

    /// The bias words [`write_rows16_packed`] adds to a lane's columns `n_base + 8j + 2·tig`
    /// (j < 8, `tig = lane % 4`) of the 16 × 64 pieces at column `n_base`, loaded together
    /// (the same for every piece of those columns, so that a caller writing several loads
    /// them once); without the bounds checks (and their branches) when the piece is inside N.
    ///
    /// # Safety
    /// [`Epilogue::packs`] holds; `n_base` is even.
    #[inline(always)]
    pub unsafe fn piece_bias(&self, n_base: u32, lane: u32) -> PieceBias {
        let tig = lane % 4;
        let mut words = [Self::no_bias_word(); 8];
        if self.bias.is_null() {
            return PieceBias(words);
        }
        let n = |j: usize| n_base + 8 * j as u32 + 2 * tig;
        if n_base + 64 <= self.n {
            unroll!(j in 0..8 => {
                // SAFETY: n(j) + 1 < n_base + 64 <= N: both columns inside the bias, 4-byte
                // aligned (an aligned bias, an even column).
                words[j] = unsafe { *self.bias.add(n(j) as usize).cast::<u32>() };
            });
        } else {
            unroll!(j in 0..8 => {
                // SAFETY: forwarded contract.
                words[j] = unsafe { self.bias_pair_word(n(j)) };
            });
        }
        PieceBias(words)
    }

    /// `alpha · acc` plus the bias of [`Epilogue::bias_pair_word`]'s `bias`, rounded to the
    /// 16-bit output and packed, `acc[0]` low: the arithmetic of [`Epilogue::affine`] under
    /// [`Epilogue::packs`] (no old C), so the bits of the other paths.
    #[inline(always)]
    fn finish_pair(&self, acc: [f32; 2], bias: u32) -> u32 {
        let b = O::widen8([bias, 0, 0, 0, 0, 0, 0, 0]);
        O::pack2(mul_add(acc[0], self.alpha, b[0]), mul_add(acc[1], self.alpha, b[1]))
    }

    /// Stores `words`, the 8 packed values of [`Epilogue::finish_pair`] of row `m` (< M) and
    /// columns `n .. n + 8` (those past N dropped): one 16-byte store when the run is whole.
    ///
    /// # Safety
    /// [`Epilogue::packs`] holds; `m < M`, `n` a multiple of 8; the launch's buffers as
    /// [`Epilogue::new`] requires.
    #[inline(always)]
    unsafe fn store_packed8(&self, m: u32, n: u32, words: [u32; 4]) {
        let at = (m as u64 * self.ldc as u64 + n as u64) as usize;
        // SAFETY: row m's columns < N are inside C; a whole run is 16-byte aligned (`vector`:
        // aligned base, ld and stride, n a multiple of 8 16-bit elements); the output type is
        // 16 bits wide (`packs`), so each element is stored as its u16 bits.
        unsafe {
            if self.vector8(n) {
                global::st_global_v4_u32(self.c.add(at).cast(), words);
            } else {
                unroll!(e in 0..8 => {
                    if n + (e as u32) < self.n {
                        let bits = (words[e / 2] >> (16 * (e % 2))) as u16;
                        *self.c.add(at + e).cast::<u16>() = bits;
                    }
                });
            }
        }
    }

    /// Whether the launch writes column sums ([`Epilogue::store_col_sums8`]).
    #[inline(always)]
    fn col_sums_on(&self) -> bool {
        !self.col_sums.is_null()
    }

    /// Stores `sums`, the column sums of row group `m_base / COL_SUM_ROWS` for columns `n ..
    /// n + 8` (those past N dropped), to the batch's `col_sums`.
    ///
    /// # Safety
    /// `col_sums` is on, `m_base < M` a multiple of `COL_SUM_ROWS`; the buffer as
    /// [`Epilogue::new`] requires.
    #[inline(always)]
    unsafe fn store_col_sums8(&self, m_base: u32, n: u32, sums: [f32; 8]) {
        let at = ((m_base / COL_SUM_ROWS) as u64 * self.n as u64 + n as u64) as usize;
        // SAFETY: group m_base / 16 of the batch holds N sums (the launcher checked the
        // length); only columns < N are written; the vector path has the run inside the row
        // and a 16-byte aligned address.
        unsafe {
            let p = self.col_sums.add(at);
            if aligned16(p.addr() as u64) && n + 8 <= self.n {
                <f32 as VecIo<8>>::store_vec(p, sums);
            } else {
                unroll!(e in 0..8 => {
                    if n + (e as u32) < self.n {
                        *p.add(e) = sums[e];
                    }
                });
            }
        }
    }
}

impl<O: Elem> Epilogue<O> {
    /// Adds `stored`, the values a run stored ([`Epilogue::store8_with`]), rounded to `O` as the
    /// output holds them, to a lane's column sums, when the launch writes them.
    #[inline(always)]
    pub fn add_to_col_sums(&self, sums: &mut [f32; 8], stored: [f32; 8]) {
        if self.col_sums_on() {
            for (sum, x) in sums.iter_mut().zip(&stored) {
                *sum += round_trip::<O>(*x);
            }
        }
    }

    /// Completes the column sums of a 16-row piece at `(m_base, n_base)` (`m_base` a multiple
    /// of 16) from the lanes' sums of their four rows ([`Epilogue::add_to_col_sums`], rows
    /// `r, r + 4, r + 8, r + 12` for lanes `8r ..`), when the launch writes them: two
    /// butterflies add the four row classes, `(s0 + s1) + (s2 + s3)`, and lanes 0–7 store the
    /// sums of columns `n_base + 8·lane ..`. `write_rows16` runs the same steps written out:
    /// through these two methods there, ptxas spilled in the ping-pong kernels (2026-11-27).
    ///
    /// # Safety
    /// The whole warp calls it together; the launch's buffers as [`Epilogue::new`] requires.
    #[inline(always)]
    pub unsafe fn store_piece_col_sums(
        &self,
        mut sums: [f32; 8],
        lane: u32,
        (m_base, n_base, m_len): (u32, u32, u32),
    ) {
        if !self.col_sums_on() {
            return;
        }
        // Lanes l and l ^ 8 hold row classes r and r ^ 1, then l ^ 16 the other pair: f32
        // addition commutes, so every lane ends with the same bits.
        for sum in &mut sums {
            // SAFETY: the whole warp is here (the caller's contract).
            unsafe {
                *sum += shfl::shfl_bfly_f32(shfl::FULL_MASK, *sum, 8);
                *sum += shfl::shfl_bfly_f32(shfl::FULL_MASK, *sum, 16);
            }
        }
        if lane < 8 && m_base < m_len {
            // SAFETY: group m_base / 16 of the batch exists (m_base < M); the caller's contract.
            // (`lane % 8`, which is `lane` here: the column expression of the lane's runs.)
            unsafe { self.store_col_sums8(m_base, n_base + 8 * (lane % 8), sums) };
        }
    }
}

/// The part of each row of one epilogue input that [`Epilogue::l2_rows`] found to prefetch.
#[cfg(target_feature = "sm_90a")]
#[derive(Clone, Copy)]
pub struct L2Rows {
    /// Row 0's first byte to prefetch (16-byte aligned).
    base: *const u8,
    /// Bytes from a row to the next (a multiple of 16).
    pitch: u32,
    /// Bytes to prefetch of each row (a multiple of 16, inside the row's N columns).
    bytes: u32,
}

#[cfg(target_feature = "sm_90a")]
impl L2Rows {
    /// Asks L2 for row `m` (`cp.async.bulk.prefetch.L2`): a hint, which changes no value any
    /// load returns.
    ///
    /// # Safety
    /// `m < M`. Minimum sm_90.
    #[inline(always)]
    pub unsafe fn prefetch(&self, m: u32) {
        // SAFETY: row m < M of the matrix holds `bytes` from `base + m · pitch` (`l2_rows`),
        // 16-byte aligned (aligned base, pitch, column offset).
        unsafe {
            let row = self.base.add(m as usize * self.pitch as usize);
            crate::arch::tma::prefetch_l2_bulk(row, self.bytes);
        }
    }
}

/// [`Epilogue::piece_bias`]: one raw word of two 16-bit bias values per n8 tile of a lane's
/// columns of a 16 × 64 piece.
#[derive(Clone, Copy)]
pub struct PieceBias([u32; 8]);

/// Where [`Epilogue::finish_vec`] gets a run's inputs: loading them, or widening words loaded
/// ahead ([`Epilogue::load_inputs8`]).
struct VecInputs<C, B, P> {
    c: C,
    bias: B,
    pre_act: P,
    /// Whether `bias` may be called without a bias, giving [`NO_BIAS`] (words loaded ahead,
    /// [`Epilogue::load_bias8`]), so that the bias-free run takes the same `fma`.
    bias_always: bool,
}

impl Epilogue<f32> {
    /// Stores split-K partial sums as they are (alpha 1, no C, bias or activation): slice
    /// `slice` of batch `batch` of the launch `p` goes to its dense M×N block of
    /// `p.workspace` (see `kernel_abi::gemm::GemmParams::workspace`).
    ///
    /// # Safety
    /// `p.workspace` must hold `batch count · split_k · M · N` f32, `batch < batch count`,
    /// `slice < split_k`.
    #[inline(always)]
    pub unsafe fn partials<I: Copy, T: Copy>(p: &GemmParams<I, T>, batch: u32, slice: u32) -> Self {
        let block = (batch as u64 * p.split_k as u64 + slice as u64) * p.m as u64 * p.n as u64;
        // SAFETY: the block lies inside the workspace (the caller's contract).
        let c = unsafe { p.workspace.as_mut_ptr().add(block as usize) };
        Self {
            c,
            bias: core::ptr::null(),
            pre_act: core::ptr::null_mut(),
            ldc: p.n,
            n: p.n,
            alpha: 1.0,
            beta: 0.0,
            activation: ACT_NONE,
            vector: aligned16(p.workspace.addr() | (p.n as u64 * 4)),
            col_sums: core::ptr::null_mut(),
        }
    }

    /// Stores the partial sums of slice `slice` of tail tile `tail_tile` of batch `batch` of a
    /// tail split (`p.whole_tiles > 0`) to its `TAIL_BM × TAIL_BN` block of `p.workspace`, in
    /// the tile's coordinates (row 0, column 0 = the tile's origin, whose column is `n0`):
    /// columns past N are dropped, rows past M are the caller's to skip.
    ///
    /// # Safety
    /// `p.workspace` must hold `batch count · tail · split_k · TAIL_BM · TAIL_BN` f32 (`tail`
    /// = `tiles_m · tiles_n − whole_tiles`), `batch < batch count`, `tail_tile < tail`,
    /// `slice < split_k`.
    #[inline(always)]
    pub unsafe fn tail_partials<I: Copy, T: Copy>(
        p: &GemmParams<I, T>,
        batch: u32,
        (tail_tile, slice): (u32, u32),
        n0: u32,
    ) -> Self {
        let tail = (p.tiles_m * p.tiles_n - p.whole_tiles) as u64;
        let index = (batch as u64 * tail + tail_tile as u64) * p.split_k as u64 + slice as u64;
        let block = index * (TAIL_BM * TAIL_BN) as u64;
        // SAFETY: the block lies inside the workspace (the caller's contract).
        let c = unsafe { p.workspace.as_mut_ptr().add(block as usize) };
        Self {
            c,
            bias: core::ptr::null(),
            pre_act: core::ptr::null_mut(),
            ldc: TAIL_BN,
            n: TAIL_BN.min(p.n - n0),
            alpha: 1.0,
            beta: 0.0,
            activation: ACT_NONE,
            vector: aligned16(p.workspace.addr()),
            col_sums: core::ptr::null_mut(),
        }
    }
}

/// Writes one 16 × 64 piece: through [`write_rows16_packed`] with `bias` (the caller's
/// [`Epilogue::piece_bias`] of the piece's columns, loaded once for every piece of those
/// columns) when there is one, which the caller passes exactly when [`Epilogue::packs`] holds
/// (tested once per tile), else through [`write_rows16`].
///
/// # Safety
/// As [`write_rows16`]; `bias` is some only if `sink.packs()`.
#[inline(always)]
pub unsafe fn write_piece<O: Elem>(
    sink: &Epilogue<O>,
    frag: &[[f32; 4]; 8],
    stage: u32,
    lane: u32,
    rows: (u32, u32, u32),
    bias: Option<PieceBias>,
) {
    // SAFETY: forwarded contract.
    unsafe {
        match bias {
            Some(bias) => write_rows16_packed(sink, frag, stage, lane, rows, &bias),
            None => write_rows16(sink, frag, stage, lane, rows),
        }
    }
}

/// Row stride (f32 words) of a warp's staging buffer in [`write_rows16`]: 64 columns, unpadded
/// (the layout is [`staged_word`]'s swizzle).
pub const STAGE_ROW_WORDS: u32 = 64;
const _: () = assert!(STAGE_ROW_WORDS == tc::EPI_ROW_WORDS && STAGE_ROW_WORDS == wg::EPI_ROW_WORDS);

/// Word offset of row `row`, column `col` in a warp's staging buffer ([`stage_piece`],
/// [`read_run`]): rows of 64 words, each row's 8-word groups XOR-permuted by `row % 4` (group
/// `col / 8` is stored at `col / 8 ^ row % 4`).
///
/// Padding the rows to 72 words did the same for the banks, but 16 rows × 8 words for each of
/// 8 consumer warps were 4 KiB of a Hopper block's shared memory, and the rings are as deep as
/// fits (`kernel_abi::gemm_wgmma::wg::N128`). The swizzle keeps both accesses conflict-free:
/// - a half-warp's fragment stores (8 bytes, lanes `4g + t` for `g` in 0..4, rows `g` or
///   `g + 8`, words `8j + 2t`) put the 4 rows' group `j` at groups `j ^ g`: 4 distinct octets
///   of banks;
/// - a quarter-warp's run loads (16 bytes, the 8 lanes `c` of one row `r`, half `c ≥ 4` of
///   their 8 words first, as [`read_run`] takes them) land on group `c ^ r % 4`, a
///   permutation of the 8 groups that keeps `c ≥ 4`, so on 8 distinct 4-bank quads.
#[inline(always)]
const fn staged_word(row: u32, col: u32) -> u32 {
    row * STAGE_ROW_WORDS + (col ^ (8 * (row % 4)))
}

/// Row stride (words) of the packed staging of [`write_rows16_packed`], in the same buffer: 64
/// 16-bit columns (32 words) padded by 4, so that a fragment store (word `4j + t` of row `g`
/// for lane `4g + t`) and a quarter-warp's run loads (words `4c .. 4c + 4` of one row for
/// lanes `c` = 0..8) each hit 32 distinct banks. 16 such rows take 2,304 of the buffer's 4,096
/// bytes.
const PACKED_ROW_WORDS: u32 = 32 + 4;
const _: () = assert!(PACKED_ROW_WORDS <= STAGE_ROW_WORDS && PACKED_ROW_WORDS % 32 == 4);

/// Writes 16 rows × 64 columns of accumulators through `sink`: `frag[j]` is the `mma.sync`
/// m16n8 C fragment (`kernel_abi::fragment`) of columns `8j .. 8j + 8` of rows `m_base ..
/// m_base + 16`, columns from `n_base`. The fragments go to the warp's padded staging buffer
/// at `stage` and are read back as runs of 8 adjacent columns per lane; rows at or past
/// `m_len` are dropped (columns past N by `sink`). The runs' global inputs (old C,
/// pre-activation; the bias, the same for the four) are loaded before the staging,
/// `Epilogue::INPUTS_AHEAD` runs ahead of their use. With column sums on, the lanes add up
/// their four rows' stored values (rows `r, r + 4, r + 8, r + 12` for lanes `8r ..`), then
/// two butterflies add the four row classes, `(s0 + s1) + (s2 + s3)`, and lanes 0–7 store the
/// sums (`m_base` must then be a multiple of 16). Under [`Epilogue::packs`] [`write_piece`]
/// takes [`write_rows16_packed`] instead: the callers test it once per tile and write all its
/// pieces one way (a test per piece let LLVM share code between the two paths, and the ping-pong
/// consumers spilled).
///
/// # Safety
/// The whole warp calls it together; `stage` is this warp's own `16 · STAGE_ROW_WORDS · 4`
/// bytes of shared memory (16-byte aligned), which nothing else accesses meanwhile; `sink` as
/// [`Epilogue::store8_with`] requires, for rows `< m_len`.
#[inline(always)]
unsafe fn write_rows16<O: Elem>(
    sink: &Epilogue<O>,
    frag: &[[f32; 4]; 8],
    stage: u32,
    lane: u32,
    (m_base, n_base, m_len): (u32, u32, u32),
) {
    // Lane finishes row lane/8 + 4q, columns 8c .. 8c+8 (c = lane % 8): `read_run`.
    let c = lane % 8;
    let row = |q: u32| lane / 8 + 4 * q;
    // The runs' global inputs first, `INPUTS_AHEAD` runs ahead of their use: their latency
    // overlaps the staging round trip and the runs before (loaded where they are used, the
    // four runs' loads were waited for one after another). `ahead[0]` is run q's, the rest
    // shift down a slot per run.
    let bias = sink.load_bias8(n_base + 8 * c);
    let load = |q: u32| {
        let m = m_base + row(q);
        if m < m_len {
            // SAFETY: row m < m_len, as `sink` requires.
            unsafe { sink.load_inputs8(m, n_base + 8 * c) }
        } else {
            RunInputs::default()
        }
    };
    let mut ahead = [RunInputs::default(); 4];
    unroll!(q in 0..4 => {
        if q < Epilogue::<O>::INPUTS_AHEAD {
            ahead[q] = load(q as u32);
        }
    });
    let sums_on = sink.col_sums_on();
    let mut sums = [0.0f32; 8];
    // SAFETY: the staging buffer is the warp's own (the caller's contract); the warp is
    // converged at every warp barrier and shuffle (`sums_on` is the launch's); column sums go
    // to group m_base / 16 < groups.
    unsafe {
        stage_piece(frag, stage, lane);
        sync::bar_warp_sync();
        // A loop, not unrolled: the finish (GELU and its backward, the element path) is inlined
        // once. Unrolled four times, it made the 16-bit 128 × 256 and ping-pong kernels' SASS
        // 2.3× longer (512 `ex2` instead of 128), and their GELU epilogues ran 1.6× slower on
        // an H100 (fc forward 198 → 320 µs, fc projection dX 277 → 503 µs a layer, 2026-11-27:
        // SM and memory throughput both under 20%, the instruction cache the suspect).
        for q in 0..4u32 {
            let inputs = ahead[0];
            ahead = [ahead[1], ahead[2], ahead[3], RunInputs::default()];
            let next = q + Epilogue::<O>::INPUTS_AHEAD as u32;
            if Epilogue::<O>::INPUTS_AHEAD < 4 && next < 4 {
                ahead[Epilogue::<O>::INPUTS_AHEAD - 1] = load(next);
            }
            let run = read_run(stage, lane, q);
            let m = m_base + row(q);
            // Only the store depends on the lane: branching on `sums_on` (the launch's) inside
            // it made LLVM duplicate the warp barrier below into the lane-divergent branches.
            let stored = if m < m_len {
                sink.store8_with(m, n_base + 8 * c, run, inputs, bias)
            } else {
                [0.0; 8]
            };
            if sums_on {
                for (sum, x) in sums.iter_mut().zip(&stored) {
                    *sum += round_trip::<O>(*x);
                }
            }
        }
        sync::bar_warp_sync();
        if sums_on {
            // Lanes l and l ^ 8 hold row classes r and r ^ 1, then l ^ 16 the other pair: f32
            // addition commutes, so every lane ends with the same bits.
            for sum in &mut sums {
                *sum += shfl::shfl_bfly_f32(shfl::FULL_MASK, *sum, 8);
                *sum += shfl::shfl_bfly_f32(shfl::FULL_MASK, *sum, 16);
            }
            if lane < 8 && m_base < m_len {
                sink.store_col_sums8(m_base, n_base + 8 * c, sums);
            }
        }
    }
}

/// Stages a warp's 16 × 64 piece of accumulators (`frag[j]`: the m16n8 C fragment of columns
/// `8j ..`) in its staging buffer at `stage`, laid out by [`staged_word`], for [`read_run`]
/// (after a warp barrier).
///
/// # Safety
/// The whole warp calls it together; `stage` is 16-byte aligned shared memory of `16 ·
/// STAGE_ROW_WORDS · 4` bytes that only this warp accesses.
#[inline(always)]
pub unsafe fn stage_piece(frag: &[[f32; 4]; 8], stage: u32, lane: u32) {
    let (group, tig) = (lane / 4, lane % 4);
    // `staged_word(row, 8j + 2·tig)` for the lane's rows `group` and `group + 8` (the same
    // swizzle), from four addresses: groups j and j + 4 are 32 words apart in both rows, and
    // row `group + 8` is 512 words on. Eight addresses, one per group, kept live across the
    // ping-pong kernel's loop, made it spill.
    let row_start = staged_word(group, 2 * tig) * 4;
    // SAFETY: addresses stay in the buffer (rows < 16, swizzled columns < STAGE_ROW_WORDS,
    // 8-byte aligned: `staged_word` moves whole 8-word groups).
    unsafe {
        unroll!(l in 0..4 => {
            let base = stage + (row_start ^ (32 * l as u32));
            unroll!(h in 0..2 => {
                let [d0, d1, d2, d3] = frag[l + 4 * h];
                let at = base + 128 * h as u32;
                smem::st_shared_v2_u32(at, [d0.to_bits(), d1.to_bits()]);
                smem::st_shared_v2_u32(at + 2048, [d2.to_bits(), d3.to_bits()]);
            });
        });
    }
}

/// Lane `lane`'s run `q` (0..4) of a piece [`stage_piece`] staged at `stage`: row `lane / 8 +
/// 4q`, columns `8c .. 8c + 8` (`c = lane % 8`), as two 16-byte loads; lanes with `c >= 4`
/// take the halves in the other order so that each quarter-warp's loads cover 32 distinct
/// banks.
///
/// # Safety
/// As [`stage_piece`], after it and a warp barrier.
#[inline(always)]
pub unsafe fn read_run(stage: u32, lane: u32, q: u32) -> [f32; 8] {
    let c = lane % 8;
    let swap = c >= 4;
    let base = stage + staged_word(lane / 8 + 4 * q, 8 * c) * 4;
    // SAFETY: 16-byte aligned addresses inside the buffer (row < 16, swizzled columns < 64).
    let (first, second) = unsafe {
        (
            smem::ld_shared_v4_u32(base + if swap { 16 } else { 0 }),
            smem::ld_shared_v4_u32(base + if swap { 0 } else { 16 }),
        )
    };
    let (lo, hi) = if swap { (second, first) } else { (first, second) };
    core::array::from_fn(|e| f32::from_bits(if e < 4 { lo[e] } else { hi[e - 4] }))
}

/// [`write_rows16`] under [`Epilogue::packs`] (a 16-bit output, alpha and at most a bias): each
/// lane finishes its fragments' pairs of adjacent columns where they are
/// ([`Epilogue::finish_pair`], with one word of bias per n8 tile) and stages them
/// rounded and packed, half the shared-memory traffic of the f32 staging and no conversions
/// after it; lane `l` then reads row `l / 8 + 4q` (q = 0..4), columns `8c .. 8c + 8` (c = l %
/// 8) back as one 16-byte word and stores it. The same bits as the general path. `bias` is
/// [`Epilogue::piece_bias`] of `n_base`, loaded by the caller before the shared stores of its
/// pieces: those are `asm!`, which LLVM moves no load across, so until 2026-11-27 each word
/// was loaded beside its store and held up every store after it (8 load latencies in a row
/// per piece).
///
/// # Safety
/// As [`write_rows16`], with [`Epilogue::packs`] true.
#[inline(always)]
unsafe fn write_rows16_packed<O: Elem>(
    sink: &Epilogue<O>,
    frag: &[[f32; 4]; 8],
    stage: u32,
    lane: u32,
    (m_base, n_base, m_len): (u32, u32, u32),
    PieceBias(bias): &PieceBias,
) {
    let (group, tig) = (lane / 4, lane % 4);
    let c = lane % 8;
    // SAFETY: staging addresses stay in the warp's buffer (rows < 16, words < PACKED_ROW_WORDS
    // <= STAGE_ROW_WORDS, 4- and 16-byte aligned); the warp is converged at both barriers;
    // rows < m_len only are stored; `packs` holds for the bias words.
    unsafe {
        unroll!(j in 0..8 => {
            let [d0, d1, d2, d3] = frag[j];
            let bias = bias[j];
            let word = 4 * j as u32 + tig;
            let at = |row: u32| stage + (row * PACKED_ROW_WORDS + word) * 4;
            smem::st_shared_u32(at(group), sink.finish_pair([d0, d1], bias));
            smem::st_shared_u32(at(group + 8), sink.finish_pair([d2, d3], bias));
        });
        sync::bar_warp_sync();
        unroll!(q in 0..4 => {
            let row = lane / 8 + 4 * q as u32;
            let words = smem::ld_shared_v4_u32(stage + (row * PACKED_ROW_WORDS + 4 * c) * 4);
            let m = m_base + row;
            if m < m_len {
                sink.store_packed8(m, n_base + 8 * c, words);
            }
        });
        sync::bar_warp_sync();
    }
}
