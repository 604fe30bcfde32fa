//! Safe launchers, one per kernel, generic over the runtime.
//!
//! Each launcher validates its arguments (lengths, shapes, alignment) and returns
//! [`crate::GpuError::InvalidArgument`] naming the offending argument before the single
//! `unsafe` launch. Launches are asynchronous: errors raised while the kernel runs surface at
//! the next synchronising call.

pub mod adamw;
pub mod attention;
pub mod classifier;
pub mod elementwise;
pub mod encoder;
pub mod flash;
pub mod gelu;
pub mod gemm;
pub mod grad_norm;
pub mod layernorm;
pub mod probe;
pub mod transpose;

use crate::error::{GpuError, Result};

/// Fails unless `len == expected`.
pub(crate) fn check_len(
    op: &'static str,
    arg: &'static str,
    len: usize,
    expected: usize,
    what: &str,
) -> Result<()> {
    if len != expected {
        return Err(GpuError::invalid(
            op,
            arg,
            format!("has {len} elements, expected {expected} ({what})"),
        ));
    }
    Ok(())
}

/// Fails unless the device address is a multiple of `bytes`.
pub(crate) fn check_aligned(
    op: &'static str,
    arg: &'static str,
    addr: u64,
    bytes: u64,
) -> Result<()> {
    if !addr.is_multiple_of(bytes) {
        return Err(GpuError::invalid(
            op,
            arg,
            format!("address {addr:#x} is not {bytes}-byte aligned"),
        ));
    }
    Ok(())
}
