//! Windows into backend buffers.

use std::ops::Range;

/// A backend allocation: something with a length in elements.
pub trait Storage {
    /// Number of elements.
    fn len(&self) -> usize;
    /// Whether there are no elements.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

impl<T> Storage for Vec<T> {
    fn len(&self) -> usize {
        Vec::len(self)
    }
}

/// Two disjoint windows `a` and `b` of one slice, mutably.
///
/// # Panics
/// If the windows overlap or lie outside the slice.
pub fn disjoint_pair<T>(slice: &mut [T], a: Range<usize>, b: Range<usize>) -> (&mut [T], &mut [T]) {
    assert!(a.end <= b.start || b.end <= a.start, "windows {a:?} and {b:?} overlap");
    if a.start < b.start {
        let (lo, hi) = slice.split_at_mut(b.start);
        (&mut lo[a], &mut hi[..b.len()])
    } else {
        let (lo, hi) = slice.split_at_mut(a.start);
        (&mut hi[..a.len()], &mut lo[b])
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

    /// The same window, borrowed for a shorter time.
    pub fn reborrow(&mut self) -> ViewMut<'_, S> {
        ViewMut { buf: &mut *self.buf, range: self.range.clone() }
    }

    /// The same window, read-only.
    pub fn as_view(&self) -> View<'_, S> {
        View { buf: &*self.buf, range: self.range.clone() }
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

impl<'a, T> View<'a, Vec<T>> {
    /// The window as a host slice (host-memory backends only).
    pub fn as_slice(&self) -> &'a [T] {
        let (buf, range) = self.parts();
        &buf[range]
    }
}

impl<'a, T> ViewMut<'a, Vec<T>> {
    /// The window as a host slice (host-memory backends only).
    pub fn into_slice(self) -> &'a mut [T] {
        let (buf, range) = self.into_parts();
        &mut buf[range]
    }
}
