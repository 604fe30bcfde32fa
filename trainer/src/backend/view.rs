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

/// The order in which to cut the windows `ranges` (those present, by start) out of one
/// buffer, after checking that they are disjoint.
///
/// # Panics
/// If two windows overlap.
pub fn cut_order<const N: usize>(ranges: &[Option<Range<usize>>; N]) -> Vec<usize> {
    let mut order: Vec<usize> = (0..N).filter(|&i| ranges[i].is_some()).collect();
    order.sort_by_key(|&i| ranges[i].as_ref().map(|r| r.start));
    for pair in order.windows(2) {
        let (a, b) = (ranges[pair[0]].as_ref(), ranges[pair[1]].as_ref());
        let (a, b) = (a.expect("present"), b.expect("present"));
        assert!(a.end <= b.start, "windows {a:?} and {b:?} overlap");
    }
    order
}

/// The disjoint windows `ranges` of one slice, mutably (`None` where a range is `None`).
///
/// # Panics
/// If the windows overlap or lie outside the slice.
pub fn disjoint_windows<'a, T, const N: usize>(
    slice: &'a mut [T],
    ranges: [Option<Range<usize>>; N],
) -> [Option<&'a mut [T]>; N] {
    let mut out: [Option<&'a mut [T]>; N] = std::array::from_fn(|_| None);
    let (mut rest, mut offset) = (slice, 0);
    for i in cut_order(&ranges) {
        let range = ranges[i].clone().expect("present");
        let (window, tail) =
            std::mem::take(&mut rest)[range.start - offset..].split_at_mut(range.len());
        out[i] = Some(window);
        (rest, offset) = (tail, range.end);
    }
    out
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
