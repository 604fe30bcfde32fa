//! GELU forward and backward as stand-alone kernels (the unfused rung; see
//! `kernel_abi::gelu`).

use super::check_len;
use super::elementwise::{FloatElement, config};
use crate::device::Device;
use crate::error::Result;
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::gelu::{GeluBackwardParams, GeluForwardParams, GeluKernels};

/// `out[i] = gelu(inp[i])`.
pub fn gelu_forward<D: Device, T: FloatElement>(
    dev: &D,
    inp: DeviceView<'_, T>,
    mut out: DeviceViewMut<'_, T>,
) -> Result<()> {
    check_len("gelu_forward", "inp", inp.len(), out.len(), "length of out")?;
    if out.is_empty() {
        return Ok(());
    }
    let params = GeluForwardParams { inp: inp.ptr(), out: out.ptr(), n: out.len() as u64 };
    // SAFETY: both views cover `n` elements and cannot overlap (one is borrowed mutably).
    unsafe { dev.launch(T::Abi::FORWARD, config(out.len()), params) }
}

/// `dinp[i] = gelu'(inp[i]) · dout[i]` (written).
pub fn gelu_backward<D: Device, T: FloatElement>(
    dev: &D,
    inp: DeviceView<'_, T>,
    dout: DeviceView<'_, T>,
    mut dinp: DeviceViewMut<'_, T>,
) -> Result<()> {
    check_len("gelu_backward", "inp", inp.len(), dinp.len(), "length of dinp")?;
    check_len("gelu_backward", "dout", dout.len(), dinp.len(), "length of dinp")?;
    if dinp.is_empty() {
        return Ok(());
    }
    let n = dinp.len() as u64;
    let params = GeluBackwardParams { inp: inp.ptr(), dout: dout.ptr(), dinp: dinp.ptr(), n };
    // SAFETY: all three views cover `n` elements; `dinp` overlaps neither input.
    unsafe { dev.launch(T::Abi::BACKWARD, config(dinp.len()), params) }
}

/// `grad[i] = gelu'(inp[i]) · grad[i]` in place: the output gradient becomes the input
/// gradient (llm.c's layout, which saves a buffer).
pub fn gelu_backward_in_place<D: Device, T: FloatElement>(
    dev: &D,
    inp: DeviceView<'_, T>,
    mut grad: DeviceViewMut<'_, T>,
) -> Result<()> {
    check_len("gelu_backward_in_place", "inp", inp.len(), grad.len(), "length of grad")?;
    if grad.is_empty() {
        return Ok(());
    }
    let dinp = grad.ptr();
    let n = grad.len() as u64;
    let params = GeluBackwardParams { inp: inp.ptr(), dout: dinp.as_const(), dinp, n };
    // SAFETY: both views cover `n` elements; each element of `grad` is read before it is
    // written, by the same thread.
    unsafe { dev.launch(T::Abi::BACKWARD, config(grad.len()), params) }
}
