//! CPU reference implementations.
//!
//! Each function here states, in the plainest code that is still reasonably fast, what the GPU
//! kernel of the same name must compute. GPU and simulator tests compare against these.

pub mod elementwise;
pub mod gemm;
pub mod precision;
