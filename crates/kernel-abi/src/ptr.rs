//! Typed device pointers for parameter structs.
//!
//! A device address is 64 bits on both sides of the launch. On the host these are plain
//! numbers produced by the runtime from a live allocation; on the device they become raw
//! pointers. The element type is carried in the type so that a `DevicePtr<f32>` cannot be
//! handed to a kernel that reads `bf16`.

use core::fmt;
use core::marker::PhantomData;

/// Storage of one bfloat16 value (the raw bits), as seen by device code and parameter structs.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct Bf16(pub u16);

/// Storage of one IEEE binary16 value (the raw bits), as seen by device code and parameter
/// structs.
#[repr(transparent)]
#[derive(Clone, Copy, PartialEq, Eq, Default, Debug)]
pub struct F16(pub u16);

/// Address of read-only device memory holding elements of type `T`.
#[repr(transparent)]
pub struct DevicePtr<T> {
    addr: u64,
    _elem: PhantomData<fn() -> T>,
}

/// Address of writable device memory holding elements of type `T`.
#[repr(transparent)]
pub struct DevicePtrMut<T> {
    addr: u64,
    _elem: PhantomData<fn() -> T>,
}

macro_rules! impl_device_ptr {
    ($name:ident) => {
        impl<T> $name<T> {
            /// Wraps a device address. A runtime produces these from live allocations; the
            /// address is not dereferenced on the host.
            #[inline]
            pub const fn from_addr(addr: u64) -> Self {
                Self { addr, _elem: PhantomData }
            }

            /// The device address.
            #[inline]
            pub const fn addr(self) -> u64 {
                self.addr
            }

            /// The null pointer (address 0): "absent" for optional kernel arguments.
            #[inline]
            pub const fn null() -> Self {
                Self::from_addr(0)
            }

            /// Whether this is the null pointer.
            #[inline]
            pub const fn is_null(self) -> bool {
                self.addr == 0
            }

            /// Whether the address is a multiple of `bytes` (a power of two).
            #[inline]
            pub const fn is_aligned_to(self, bytes: u64) -> bool {
                self.addr & (bytes - 1) == 0
            }
        }

        impl<T> Clone for $name<T> {
            #[inline]
            fn clone(&self) -> Self {
                *self
            }
        }

        impl<T> Copy for $name<T> {}

        impl<T> fmt::Debug for $name<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{}({:#x})", stringify!($name), self.addr)
            }
        }
    };
}

impl_device_ptr!(DevicePtr);
impl_device_ptr!(DevicePtrMut);

impl<T> DevicePtr<T> {
    /// The address as a raw pointer (meaningful in device code only).
    #[inline]
    pub const fn as_ptr(self) -> *const T {
        self.addr as *const T
    }
}

impl<T> DevicePtrMut<T> {
    /// The address as a raw pointer (meaningful in device code only).
    #[inline]
    pub const fn as_mut_ptr(self) -> *mut T {
        self.addr as *mut T
    }

    /// The same address, read-only.
    #[inline]
    pub const fn as_const(self) -> DevicePtr<T> {
        DevicePtr::from_addr(self.addr)
    }
}
