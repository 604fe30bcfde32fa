//! [`unroll!`]: textual loop unrolling for register-resident arrays.
//!
//! Arrays in registers (accumulators, fragments) must only be indexed with compile-time
//! constants: a loop LLVM decides not to unroll indexes them dynamically and moves them to
//! local memory (a stack frame, which `cargo xtask check-ptx` rejects). `unroll!` pastes the
//! body once per index, so the indices are constants by construction.

/// `unroll!(i in 0..N => { body })` for N = 2, 3, 4, 8 or 16: repeats `body` with `i` bound to each
/// index (a `usize`), in order. `unroll!(const I in 0..N => { body })` (N = 4 or 8) binds `I` as a
/// `const` item instead, for const generic arguments (`f::<{ I as u32 * 2048 }>()`).
macro_rules! unroll {
    (const $i:ident in 0..4 => $body:block) => {
        $crate::unroll::unroll!(@const $i [0 1 2 3] $body)
    };
    (const $i:ident in 0..8 => $body:block) => {
        $crate::unroll::unroll!(@const $i [0 1 2 3 4 5 6 7] $body)
    };
    (@const $i:ident [$($n:literal)*] $body:block) => {
        $( { const $i: usize = $n; $body } )*
    };
    ($i:ident in 0..2 => $body:block) => { $crate::unroll::unroll!(@ $i [0 1] $body) };
    ($i:ident in 0..3 => $body:block) => { $crate::unroll::unroll!(@ $i [0 1 2] $body) };
    ($i:ident in 0..4 => $body:block) => { $crate::unroll::unroll!(@ $i [0 1 2 3] $body) };
    ($i:ident in 0..8 => $body:block) => {
        $crate::unroll::unroll!(@ $i [0 1 2 3 4 5 6 7] $body)
    };
    ($i:ident in 0..16 => $body:block) => {
        $crate::unroll::unroll!(@ $i [0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15] $body)
    };
    (@ $i:ident [$($n:literal)*] $body:block) => {
        $( { let $i: usize = $n; $body } )*
    };
}

pub(crate) use unroll;
