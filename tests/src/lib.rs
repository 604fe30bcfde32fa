//! Shared harness of the kernel tests.
//!
//! A kernel test is a function generic over [`gpu_host::Device`]; [`kernel_tests!`] turns a
//! list of them into one `#[test]` per runtime: the PTX simulator (always, on every machine)
//! and the CUDA GPU (when present). Inputs are fresh random values each run (the seed is
//! printed on failure and can be pinned with `TEST_SEED`), outputs are poisoned with NaN
//! before every launch, and comparisons fail on any NaN.

pub mod check;
pub mod runtime;

pub use check::{Tolerance, assert_bits_eq, assert_close, assert_close_in, assert_floats_eq};
pub use runtime::{
    TestRng, alignment_cases, gpu, hopper_sim, poisoned, sim, small_sizes, upload_at,
};

/// Declares kernel tests: each `name => function` (a path resolved in the calling module)
/// becomes two `#[test]`s:
/// - `sim::name` runs `function(sim())` on the PTX simulator ([`ptx_sim::Simulator`]), on
///   every machine; missing PTX fails it;
/// - `gpu::name` runs `function(gpu)` on the CUDA GPU, or prints `skipped: no GPU (reason)`
///   and passes when there is none (a GPU that is present but unusable, e.g. PTX not built,
///   fails).
#[macro_export]
macro_rules! kernel_tests {
    ($($name:ident => $body:path;)*) => {
        mod sim {
            use super::*;
            $(
                #[test]
                fn $name() {
                    $body($crate::sim());
                }
            )*
        }
        mod gpu {
            use super::*;
            $(
                #[test]
                fn $name() {
                    if let Some(gpu) = $crate::gpu() {
                        $body(gpu);
                    }
                }
            )*
        }
    };
}
