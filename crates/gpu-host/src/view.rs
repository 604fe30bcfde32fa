//! Typed windows into device memory.

use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use kernel_abi::{DevicePtr, DevicePtrMut};
use std::marker::PhantomData;
use std::ops::Range;

/// A read-only window of `len` elements of device memory, borrowed from a buffer.
///
/// Like `&[T]` for device memory: it cannot outlive its buffer, and while it exists nobody
/// can write the buffer through a [`DeviceViewMut`]. Only meaningful on the device that owns
/// the buffer.
pub struct DeviceView<'a, T> {
    addr: u64,
    len: usize,
    _borrow: PhantomData<&'a [T]>,
}

/// A writable window of `len` elements of device memory, mutably borrowed from a buffer.
pub struct DeviceViewMut<'a, T> {
    addr: u64,
    len: usize,
    _borrow: PhantomData<&'a mut [T]>,
}

impl<T> Clone for DeviceView<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for DeviceView<'_, T> {}

impl<T> std::fmt::Debug for DeviceView<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceView({:#x}, len {})", self.addr, self.len)
    }
}

impl<T> std::fmt::Debug for DeviceViewMut<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceViewMut({:#x}, len {})", self.addr, self.len)
    }
}

fn check_range(op: &'static str, range: &Range<usize>, len: usize) -> Result<()> {
    if range.start > range.end || range.end > len {
        return Err(GpuError::invalid(
            op,
            "range",
            format!("{}..{} is outside a view of {len} elements", range.start, range.end),
        ));
    }
    Ok(())
}

impl<'a, T: DeviceElement> DeviceView<'a, T> {
    /// A view of `len` elements at device address `addr`.
    ///
    /// # Safety
    /// `addr` must point to `len` initialised elements of an allocation of the runtime that
    /// will use the view, valid and not written through any other path for `'a`.
    pub unsafe fn from_raw_parts(addr: u64, len: usize) -> Self {
        Self { addr, len, _borrow: PhantomData }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of the first element.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The pointer to pass in a kernel parameter struct.
    pub fn ptr(&self) -> DevicePtr<T::Abi> {
        DevicePtr::from_addr(self.addr)
    }

    /// The elements `range` of this view.
    pub fn slice(self, range: Range<usize>) -> Result<DeviceView<'a, T>> {
        check_range("DeviceView::slice", &range, self.len)?;
        Ok(DeviceView {
            addr: self.addr + (range.start * size_of::<T>()) as u64,
            len: range.len(),
            _borrow: PhantomData,
        })
    }
}

impl<'a, T: DeviceElement> DeviceViewMut<'a, T> {
    /// A writable view of `len` elements at device address `addr`.
    ///
    /// # Safety
    /// `addr` must point to `len` elements of an allocation of the runtime that will use the
    /// view, valid and not accessed through any other path for `'a`.
    pub unsafe fn from_raw_parts(addr: u64, len: usize) -> Self {
        Self { addr, len, _borrow: PhantomData }
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the view has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of the first element.
    pub fn addr(&self) -> u64 {
        self.addr
    }

    /// Size in bytes.
    pub fn num_bytes(&self) -> usize {
        self.len * size_of::<T>()
    }

    /// The pointer to pass in a kernel parameter struct.
    pub fn ptr(&mut self) -> DevicePtrMut<T::Abi> {
        DevicePtrMut::from_addr(self.addr)
    }

    /// A shorter-lived writable view of the same memory (like `&mut *v`).
    pub fn reborrow(&mut self) -> DeviceViewMut<'_, T> {
        DeviceViewMut { addr: self.addr, len: self.len, _borrow: PhantomData }
    }

    /// A read-only view of the same memory, borrowing this one.
    pub fn as_view(&self) -> DeviceView<'_, T> {
        DeviceView { addr: self.addr, len: self.len, _borrow: PhantomData }
    }

    /// The elements `range` of this view.
    pub fn slice_mut(self, range: Range<usize>) -> Result<DeviceViewMut<'a, T>> {
        check_range("DeviceViewMut::slice_mut", &range, self.len)?;
        Ok(DeviceViewMut {
            addr: self.addr + (range.start * size_of::<T>()) as u64,
            len: range.len(),
            _borrow: PhantomData,
        })
    }

    /// Splits into the elements before `mid` and from `mid` on.
    pub fn split_at_mut(self, mid: usize) -> Result<(DeviceViewMut<'a, T>, DeviceViewMut<'a, T>)> {
        check_range("DeviceViewMut::split_at_mut", &(0..mid), self.len)?;
        let tail = DeviceViewMut {
            addr: self.addr + (mid * size_of::<T>()) as u64,
            len: self.len - mid,
            _borrow: PhantomData,
        };
        Ok((DeviceViewMut { addr: self.addr, len: mid, _borrow: PhantomData }, tail))
    }
}
