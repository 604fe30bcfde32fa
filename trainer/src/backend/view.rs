//! Windows into backend buffers.

use std::ops::Range;

/// A backend allocation: something with a length in elements.
pub trait Storage: Send + Sync {
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T: Send + Sync> Storage for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// A read-only window `range` of a backend buffer.
pub struct View<'a, S> {
    buf: &'a S,
    range: Range<usize>,
}

/// A writable window `range` of a backend buffer.
pub struct ViewMut<'a, S> {
    buf: &'a mut S,
    range: Range<usize>,
}

impl<S> Clone for View<'_, S> {
    fn clone(&self) -> Self {
        Self { buf: self.buf, range: self.range.clone() }
    }
}

fn check(range: &Range<usize>, len: usize) {
    assert!(
        range.start <= range.end && range.end <= len,
        "view {}..{} is outside a buffer of {len} elements",
        range.start,
        range.end
    );
}

impl<'a, S: Storage> View<'a, S> {
    /// The whole buffer.
    pub fn all(buf: &'a S) -> Self {
        Self { range: 0..buf.len(), buf }
    }

    /// Elements `range` of the buffer.
    ///
    /// # Panics
    /// If `range` is not inside the buffer.
    pub fn of(buf: &'a S, range: Range<usize>) -> Self {
        check(&range, buf.len());
        Self { buf, range }
    }

    /// The first `len` elements of the buffer.
    pub fn prefix(buf: &'a S, len: usize) -> Self {
        Self::of(buf, 0..len)
    }

    /// The buffer and the window's element range in it (what a backend launches ops on).
    pub fn parts(&self) -> (&'a S, Range<usize>) {
        (self.buf, self.range.clone())
    }

    /// Number of elements in the window.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

impl<'a, S: Storage> ViewMut<'a, S> {
    /// The whole buffer.
    pub fn all(buf: &'a mut S) -> Self {
        Self { range: 0..buf.len(), buf }
    }

    /// Elements `range` of the buffer.
    ///
    /// # Panics
    /// If `range` is not inside the buffer.
    pub fn of(buf: &'a mut S, range: Range<usize>) -> Self {
        check(&range, buf.len());
        Self { buf, range }
    }

    /// The first `len` elements of the buffer.
    pub fn prefix(buf: &'a mut S, len: usize) -> Self {
        Self::of(buf, 0..len)
    }

    /// The buffer and the window's element range in it (what a backend launches ops on).
    pub fn into_parts(self) -> (&'a mut S, Range<usize>) {
        (self.buf, self.range)
    }

    /// Number of elements in the window.
    pub fn len(&self) -> usize {
        self.range.len()
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.range.is_empty()
    }
}

impl<'a, T: Send + Sync> View<'a, Vec<T>> {
    /// The window as a host slice (host-memory backends only).
    pub fn as_slice(&self) -> &'a [T] {
        let (buf, range) = self.parts();
        &buf[range]
    }
}

impl<'a, T: Send + Sync> ViewMut<'a, Vec<T>> {
    /// The window as a host slice (host-memory backends only).
    pub fn into_slice(self) -> &'a mut [T] {
        let (buf, range) = self.into_parts();
        &mut buf[range]
    }
}
