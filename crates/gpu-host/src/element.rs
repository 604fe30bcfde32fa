//! Element types that device buffers hold.

use cudarc::driver::DeviceRepr;
use half::{bf16, f16};
use kernel_abi::{Bf16, F16};

/// A plain-data element type of device buffers, with the representation device code sees.
///
/// # Safety
/// `Self` and `Self::Abi` must have the same size and alignment, and every bit pattern must
/// be a valid `Self` (device memory is reinterpreted freely).
pub unsafe trait DeviceElement:
    bytemuck::Pod + DeviceRepr + Send + Sync + std::fmt::Debug + 'static
{
    /// The type kernel-abi parameter structs and device code use for it.
    type Abi: Copy + 'static;
    /// Name used in messages.
    const NAME: &'static str;
    /// The same bits as the device type.
    fn to_abi(self) -> Self::Abi;
}

macro_rules! same_repr {
    ($($ty:ty => $name:literal),*) => {$(
        // SAFETY: identical type on both sides; plain data.
        unsafe impl DeviceElement for $ty {
            type Abi = $ty;
            const NAME: &'static str = $name;
            fn to_abi(self) -> Self {
                self
            }
        }
    )*};
}

same_repr!(f32 => "f32", u8 => "u8", u16 => "u16", u32 => "u32", i32 => "i32", u64 => "u64");

// SAFETY: bf16 and kernel_abi::Bf16 are both 2-byte, 2-aligned wrappers of the bits.
unsafe impl DeviceElement for bf16 {
    type Abi = Bf16;
    const NAME: &'static str = "bf16";
    fn to_abi(self) -> Bf16 {
        Bf16(self.to_bits())
    }
}

// SAFETY: f16 and kernel_abi::F16 are both 2-byte, 2-aligned wrappers of the bits.
unsafe impl DeviceElement for f16 {
    type Abi = F16;
    const NAME: &'static str = "f16";
    fn to_abi(self) -> F16 {
        F16(self.to_bits())
    }
}
