//! The encoder: token + position embedding ([`encoder_forward`]) and its deterministic
//! backward ([`encoder_backward`]), see `kernel_abi::encoder` for the exact semantics.
//!
//! Token ids are device data the launchers cannot read, so they reach the kernels only as
//! [`Tokens`]: uploaded from the host by [`Tokens::upload`] (or [`Tokens::replace`]), which
//! rejects every id outside the vocabulary; the backward groups the positions by token on its
//! first call for a batch. A launcher given `Tokens` checks that the embedding tables have a
//! row for every id of the vocabulary and a position for every step of the sequence.
//!
//! Typical use, once per training step: `tokens.replace(dev, &batch)?`, then
//! `encoder_forward(..)` and, after the rest of the backward pass, `encoder_backward(..)`.

use super::check_len;
use super::elementwise::FloatElement;
use crate::device::{Device, DeviceBuffer, LaunchConfig};
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::encoder::{
    BLOCK_THREADS, BackwardItems, EncoderBackwardParams, EncoderForwardParams, EncoderKernels,
    HOT_BUCKET_ROWS, MAX_BLOCKS, backward_items, vectorized,
};
use std::cmp::Reverse;

/// Shape of a token batch: `b` sequences of `t` ids, each below `vocab`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TokenShape {
    /// Sequences in the batch.
    pub b: usize,
    /// Tokens per sequence.
    pub t: usize,
    /// Vocabulary size `V`: every id is `< vocab` (the embedding tables may have more rows,
    /// e.g. the padded `Vp`).
    pub vocab: usize,
}

impl TokenShape {
    /// Number of ids, `b · t`.
    pub fn len(&self) -> usize {
        self.b * self.t
    }

    /// Whether the batch holds no id.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks that `ids` holds `b · t` ids, each below `vocab`, and that `b · t` fits in
    /// `u32`; errors name `op` and, for a bad id, its position and value. Returns `b · t`.
    pub fn check_ids(&self, op: &'static str, ids: &[u32]) -> Result<usize> {
        let n = self.b.checked_mul(self.t).filter(|&n| u32::try_from(n).is_ok());
        let n = n.ok_or_else(|| {
            GpuError::invalid(op, "b", format!("b = {} × t = {} exceeds u32", self.b, self.t))
        })?;
        check_len(op, "tokens", ids.len(), n, "b × t")?;
        if let Some(pos) = ids.iter().position(|&id| id as usize >= self.vocab) {
            let (bi, ti) = (pos / self.t, pos % self.t);
            return Err(GpuError::invalid(
                op,
                "tokens",
                format!(
                    "id {} at position {pos} (b {bi}, t {ti}) is not below the vocabulary size {}",
                    ids[pos], self.vocab
                ),
            ));
        }
        Ok(n)
    }
}

/// A batch of token ids on the device, each checked to be below the vocabulary size, and, once
/// [`encoder_backward`] has needed them, the positions grouped by token.
///
/// The device buffer holds, for `n = b · t`: the ids (`n`), the positions grouped by token
/// (`n`), the `buckets + 1` bucket starts and the `buckets` bucket tokens, each array padded
/// to `n + 1` / `n` entries with zeros, so every byte of it is always valid.
///
/// An upload copies the ids only. The grouping (a counting sort on the host, 0.13 ms for
/// 16,384 ids of GPT-2's vocabulary on this project's 2-core CI machine) waits for the
/// encoder's backward, the last op of a training step's backward: by then the host has long
/// queued the forward and most of the backward, so it runs while the GPU works, where at the
/// upload the GPU waited for it (0.66 ms a step for two batches on the H100, 2026-11-27).
/// Batches that never reach a backward (the targets, sampling, evaluation) are never grouped.
pub struct Tokens<D: Device> {
    data: D::Buffer<u32>,
    shape: TokenShape,
    distinct: usize,
    /// The grouping's buckets once it is on the device; `None` until then and after every
    /// new batch.
    grouped: Option<Buckets>,
    staging: Staging,
}

/// How many buckets a batch has, and how many of them (the first) are hot: at least
/// `HOT_BUCKET_ROWS` rows each (`kernel_abi::encoder::EncoderBackwardParams`).
#[derive(Clone, Copy, Debug)]
struct Buckets {
    all: usize,
    hot: usize,
}

impl<D: Device> Tokens<D> {
    /// Validates `ids` (`b · t` of them, row-major `(b, t)`, each `< vocab`) and uploads them.
    ///
    /// Fails, naming `tokens`, when the length is not `b · t` or an id is `>= vocab` (the
    /// message gives its position and value), and naming `b` when `b · t` exceeds `u32`.
    pub fn upload(dev: &D, ids: &[u32], shape: TokenShape) -> Result<Self> {
        let mut staging = Staging::default();
        let distinct = staging.take_ids("Tokens::upload", ids, shape)?;
        let data = dev.upload(&staging.image)?;
        Ok(Self { data, shape, distinct, grouped: None, staging })
    }

    /// Validates and uploads a new batch of the same shape into this one's memory (no
    /// allocation, on the device or the host: the host image is built in the buffers of the
    /// previous batch). Fails like [`Tokens::upload`]; a rejected batch writes nothing and the
    /// previous one stays.
    pub fn replace(&mut self, dev: &D, ids: &[u32]) -> Result<()> {
        let distinct = self.staging.take_ids("Tokens::replace", ids, self.shape)?;
        self.grouped = None;
        self.distinct = distinct;
        let n = self.shape.len();
        dev.copy_to_device(&self.staging.image[..n], part_mut::<D>(&mut self.data, 0, n))
    }

    /// The shape the ids were validated against.
    pub fn shape(&self) -> TokenShape {
        self.shape
    }

    /// The `b · t` ids, row-major `(b, t)`.
    pub fn ids(&self) -> DeviceView<'_, u32> {
        self.part(0, self.shape.len())
    }

    /// Number of distinct ids in the batch.
    pub fn distinct(&self) -> usize {
        self.distinct
    }

    /// Number of ids that occur at least `kernel_abi::encoder::HOT_BUCKET_ROWS` times in the
    /// batch (the buckets whose backward work items are split by single channels), once
    /// [`encoder_backward`] has grouped this batch; `None` before.
    pub fn frequent(&self) -> Option<usize> {
        self.grouped.map(|buckets| buckets.hot)
    }

    /// The batch's grouping by token, built and copied to the device on first use.
    fn group(&mut self, dev: &D) -> Result<Buckets> {
        if let Some(buckets) = self.grouped {
            return Ok(buckets);
        }
        let n = self.shape.len();
        let buckets = self.staging.group(n);
        let grouping = part_mut::<D>(&mut self.data, n, 3 * n + 1);
        dev.copy_to_device(&self.staging.image[n..], grouping)?;
        self.grouped = Some(buckets);
        Ok(buckets)
    }

    /// `len` elements of the buffer from `start` (always inside it by construction).
    fn part(&self, start: usize, len: usize) -> DeviceView<'_, u32> {
        self.data.view().slice(start..start + len).expect("Tokens layout is inside its buffer")
    }
}

/// [`Tokens::part`] of its buffer `data`, writable.
fn part_mut<D: Device>(
    data: &mut D::Buffer<u32>,
    start: usize,
    len: usize,
) -> DeviceViewMut<'_, u32> {
    let view = data.view_mut().slice_mut(start..start + len);
    view.expect("Tokens layout is inside its buffer")
}

/// The host image of a [`Tokens`] buffer and the counting sort's arrays, kept from one batch
/// to the next: allocated afresh, the arrays (about 1 MiB at 16384 ids of GPT-2's vocabulary)
/// cost page faults every step. The work is proportional to the batch, not the vocabulary:
/// the per-token counts are zero between batches (reset where a batch set them), and the
/// distinct ids are collected as they first appear.
#[derive(Default)]
struct Staging {
    /// The buffer's image: ids, positions, bucket starts, bucket tokens.
    image: Vec<u32>,
    /// One bit per token id, for counting the distinct ids of a batch.
    seen: Vec<u64>,
    /// Per token id: its count in the batch being grouped; all zero between batches.
    count: Vec<u32>,
    /// Per token id: its next free position (written for the batch's ids before any read).
    next: Vec<u32>,
    /// The distinct ids in bucket order.
    tokens: Vec<u32>,
    /// The frequent ones, while they are sorted.
    hot: Vec<u32>,
}

impl Staging {
    /// Validates `ids` against `shape` (errors name `op`; nothing is changed then), copies
    /// them to the image's start and returns how many distinct ids they hold. The rest of the
    /// image is zero after the first batch, and a later batch's grouping after [`Self::group`].
    fn take_ids(&mut self, op: &'static str, ids: &[u32], shape: TokenShape) -> Result<usize> {
        let n = shape.check_ids(op, ids)?;
        // Room for any batch of this shape (ids below `vocab`), made by the first: later
        // batches never allocate.
        if self.count.len() < shape.vocab {
            self.seen.resize(shape.vocab.div_ceil(64), 0);
            self.count.resize(shape.vocab, 0);
            self.next.resize(shape.vocab, 0);
        }
        self.image.resize(4 * n + 1, 0);
        self.image[..n].copy_from_slice(ids);
        self.seen.fill(0);
        let mut distinct = 0;
        for &id in ids {
            let (word, bit) = (&mut self.seen[id as usize / 64], 1u64 << (id % 64));
            distinct += usize::from(*word & bit == 0);
            *word |= bit;
        }
        Ok(distinct)
    }

    /// Groups the positions of the image's `n` ids by token in the rest of the image and
    /// returns its buckets: the frequent ids' (at least `HOT_BUCKET_ROWS` rows) first, largest
    /// first (ties by id), so that the longest sums start first on the GPU, then the others in
    /// the order of their first position. (The order of the buckets changes no bit of the
    /// result: each bucket writes its own row.)
    fn group(&mut self, n: usize) -> Buckets {
        self.tokens.reserve(n.saturating_sub(self.tokens.len()));
        self.hot.reserve((n / HOT_BUCKET_ROWS as usize).saturating_sub(self.hot.len()));
        let Self { image, count, next, tokens, hot, .. } = self;
        // Ids, positions grouped by bucket, bucket starts (`n + 1` entries) and tokens (`n`),
        // each array's entries past the buckets zero.
        let (ids, rest) = image.split_at_mut(n);
        let (positions, rest) = rest.split_at_mut(n);
        let (starts, bucket_tokens) = rest.split_at_mut(n + 1);
        tokens.clear();
        for &id in ids.iter() {
            let seen = &mut count[id as usize];
            if *seen == 0 {
                tokens.push(id);
            }
            *seen += 1;
        }
        hot.clear();
        hot.extend(tokens.iter().copied().filter(|&v| count[v as usize] >= HOT_BUCKET_ROWS));
        hot.sort_unstable_by_key(|&v| (Reverse(count[v as usize]), v));
        tokens.retain(|&v| count[v as usize] < HOT_BUCKET_ROWS);
        tokens.splice(0..0, hot.iter().copied());

        let buckets = tokens.len();
        let mut end = 0;
        starts[0] = 0;
        for (k, &v) in tokens.iter().enumerate() {
            next[v as usize] = end;
            end += count[v as usize];
            starts[k + 1] = end;
            bucket_tokens[k] = v;
        }
        starts[buckets + 1..].fill(0);
        bucket_tokens[buckets..].fill(0);
        for (row, &id) in ids.iter().enumerate() {
            positions[next[id as usize] as usize] = row as u32;
            next[id as usize] += 1;
        }
        for &v in tokens.iter() {
            count[v as usize] = 0;
        }
        Buckets { all: buckets, hot: hot.len() }
    }
}

/// Fails unless `len` is a whole number of rows of `c` and at least `min_rows` of them.
fn check_rows(
    op: &'static str,
    arg: &'static str,
    len: usize,
    c: usize,
    (min_rows, what): (usize, &str),
) -> Result<()> {
    if !len.is_multiple_of(c) {
        let reason = format!("has {len} elements, not a whole number of rows of c = {c}");
        return Err(GpuError::invalid(op, arg, reason));
    }
    if len / c < min_rows {
        let reason = format!("has {} rows of c = {c}, fewer than {what} = {min_rows}", len / c);
        return Err(GpuError::invalid(op, arg, reason));
    }
    Ok(())
}

/// Fails unless `c` is a channel count the kernels index with `u32` lanes.
fn check_channels(op: &'static str, c: usize) -> Result<u32> {
    u32::try_from(c)
        .ok()
        .filter(|&c| c > 0 && c <= u32::MAX - 32)
        .ok_or_else(|| GpuError::invalid(op, "c", format!("{c} is not in 1..=2^32 - 33")))
}

/// One warp per work item, 8 warps per block, warp-stride beyond [`MAX_BLOCKS`].
fn config(work_items: u64) -> LaunchConfig {
    let warps_per_block = (BLOCK_THREADS / 32) as u64;
    let blocks = work_items.div_ceil(warps_per_block).clamp(1, MAX_BLOCKS as u64) as u32;
    LaunchConfig::linear(blocks, BLOCK_THREADS)
}

/// `out[bi, ti, :] = round(wte[tokens[bi, ti], :] + wpe[ti, :])`, the sum in f32.
///
/// `out` is `(b, t, c)`, `wte` has at least `vocab` rows of `c` (e.g. the padded `Vp`), `wpe`
/// at least `t` rows. Any alignment is accepted; 16-byte accesses need `c % 8 == 0` and
/// 16-byte aligned `out`, `wte` and `wpe`.
pub fn encoder_forward<D: Device, T: FloatElement>(
    dev: &D,
    tokens: &Tokens<D>,
    wte: DeviceView<'_, T>,
    wpe: DeviceView<'_, T>,
    mut out: DeviceViewMut<'_, T>,
    c: usize,
) -> Result<()> {
    const OP: &str = "encoder_forward";
    let shape = tokens.shape();
    let c32 = check_channels(OP, c)?;
    check_rows(OP, "wte", wte.len(), c, (shape.vocab, "the vocabulary size"))?;
    check_rows(OP, "wpe", wpe.len(), c, (shape.t, "the sequence length t (sequence too long)"))?;
    check_len(OP, "out", out.len(), shape.len() * c, "b × t × c")?;
    if shape.is_empty() {
        return Ok(());
    }
    let params = EncoderForwardParams {
        out: out.ptr(),
        tokens: tokens.ids().ptr(),
        wte: wte.ptr(),
        wpe: wpe.ptr(),
        rows: shape.len() as u32,
        t: shape.t as u32,
        c: c32,
    };
    // SAFETY: `out` holds b·t rows of c; every id is below vocab (Tokens) and wte has vocab
    // rows of c; wpe has t rows of c; b·t and c fit u32 (Tokens, check_channels).
    unsafe { dev.launch(T::Abi::FORWARD, config(shape.len() as u64), params) }
}

/// `dwte[tokens[bi, ti], :] += dout[bi, ti, :]` and `dwpe[ti, :] += Σ_bi dout[bi, ti, :]`, in
/// f32, deterministically: every element receives its rows one at a time in increasing
/// `(bi, ti)` order, starting from its current value (`cpu_ref::encoder_backward`'s order, so
/// the result is bit-identical to it).
///
/// `dout` is `(b, t, c)`; `dwte` has at least `vocab` rows of `c`, `dwpe` at least `t` (rows
/// from `t` on are untouched). 16-byte accesses need `c % 8 == 0` and 16-byte aligned `dout`,
/// `dwte` and `dwpe`. The first call for a batch groups its positions by token on the host and
/// copies the grouping to the device (queued before the kernel); later calls reuse it.
pub fn encoder_backward<D: Device, T: FloatElement>(
    dev: &D,
    tokens: &mut Tokens<D>,
    dout: DeviceView<'_, T>,
    mut dwte: DeviceViewMut<'_, f32>,
    mut dwpe: DeviceViewMut<'_, f32>,
    c: usize,
) -> Result<()> {
    const OP: &str = "encoder_backward";
    let shape = tokens.shape();
    let c32 = check_channels(OP, c)?;
    check_rows(OP, "dwte", dwte.len(), c, (shape.vocab, "the vocabulary size"))?;
    check_rows(OP, "dwpe", dwpe.len(), c, (shape.t, "the sequence length t (sequence too long)"))?;
    check_len(OP, "dout", dout.len(), shape.len() * c, "b × t × c")?;
    if shape.is_empty() {
        return Ok(());
    }
    let n = shape.len();
    let Buckets { all: buckets, hot } = tokens.group(dev)?;
    let params = EncoderBackwardParams {
        dwte: dwte.ptr(),
        dwpe: dwpe.ptr(),
        dout: dout.ptr(),
        positions: tokens.part(n, n).ptr(),
        bucket_starts: tokens.part(2 * n, buckets + 1).ptr(),
        bucket_tokens: tokens.part(3 * n + 1, buckets).ptr(),
        buckets: buckets as u32,
        hot_buckets: hot as u32,
        b: shape.b as u32,
        t: shape.t as u32,
        c: c32,
    };
    let vector = vectorized(c32, dwte.addr() | dwpe.addr() | dout.addr());
    let items = backward_items(BackwardItems {
        buckets: buckets as u32,
        hot_buckets: hot as u32,
        t: shape.t as u32,
        c: c32,
        vector,
    });
    // SAFETY: dout holds b·t rows of c; the Tokens buckets hold distinct ids below vocab
    // (rows of dwte) and partition the rows 0..b·t, each in increasing order; dwpe has t rows
    // of c; dwte and dwpe do not overlap (both borrowed mutably), so no two work items write
    // the same element.
    unsafe { dev.launch(T::Abi::BACKWARD, config(items), params) }
}
