//! AdamW over every tensor of a parameter arena in one launch.

use super::check_len;
use crate::device::{Device, DeviceBuffer, LaunchConfig};
use crate::element::DeviceElement;
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::adamw::{
    AdamWKernel, AdamWParams, BLOCK_THREADS, CHUNK, MAX_BLOCKS_PER_TENSOR, MAX_TENSORS,
};
use kernel_abi::{DevicePtr, DevicePtrMut};

pub use kernel_abi::adamw::AdamWTensor;

// The device copy is 4 `u32` words per entry.
const _: () = assert!(size_of::<AdamWTensor>() == 16 && align_of::<AdamWTensor>() == 8);

const TABLE_OP: &str = "adamw_table";
const OP: &str = "adamw";

/// The tensors of a parameter arena, validated once, with their device copy (what the
/// kernel reads, one block row per tensor).
pub struct AdamWTable<D: Device> {
    entries: Vec<AdamWTensor>,
    arena_len: usize,
    /// The entries as 32-bit words (4 per entry), on the device.
    device: D::Buffer<u32>,
}

impl<D: Device> AdamWTable<D> {
    /// Checks that `entries` are sorted by offset, do not overlap and lie inside an arena of
    /// `arena_len` elements (gaps are allowed: those elements are never updated), that there
    /// are 1 to `MAX_TENSORS` of them and their weight decays are finite; then uploads them.
    pub fn new(dev: &D, entries: &[AdamWTensor], arena_len: usize) -> Result<Self> {
        let bad = |reason: String| Err(GpuError::invalid(TABLE_OP, "tensors", reason));
        if entries.is_empty() || entries.len() > MAX_TENSORS as usize {
            return bad(format!("has {} entries, expected 1..={MAX_TENSORS}", entries.len()));
        }
        let mut end = 0u64;
        for (i, e) in entries.iter().enumerate() {
            if e.offset < end {
                return bad(format!(
                    "entry {i} starts at {} before the end {end} of the previous one",
                    e.offset
                ));
            }
            end = match e.offset.checked_add(u64::from(e.len)) {
                Some(end) if end <= arena_len as u64 => end,
                _ => {
                    return bad(format!(
                        "entry {i} (offset {}, {} elements) ends past the arena of {arena_len}",
                        e.offset, e.len
                    ));
                }
            };
            if !e.weight_decay.is_finite() {
                return bad(format!("entry {i} has weight decay {}", e.weight_decay));
            }
        }
        let words: Vec<u32> = entries
            .iter()
            .flat_map(|e| {
                [e.offset as u32, (e.offset >> 32) as u32, e.len, e.weight_decay.to_bits()]
            })
            .collect();
        Ok(Self { entries: entries.to_vec(), arena_len, device: dev.upload(&words)? })
    }

    /// The validated entries.
    pub fn entries(&self) -> &[AdamWTensor] {
        &self.entries
    }

    /// Elements of the arena every buffer of the update must hold.
    pub fn arena_len(&self) -> usize {
        self.arena_len
    }
}

/// A working-copy type of the parameters: `bf16` (nearest-even or stochastic rounding) or
/// `f16` (nearest-even only).
pub trait WorkingElement: DeviceElement {
    /// Whether [`WorkingRounding::Stochastic`] is available.
    const STOCHASTIC_ROUNDING: bool;
}

impl WorkingElement for bf16 {
    const STOCHASTIC_ROUNDING: bool = true;
}

impl WorkingElement for f16 {
    const STOCHASTIC_ROUNDING: bool = false;
}

/// How the working copy is rounded from the new f32 master weights.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkingRounding {
    /// To nearest, ties to even.
    NearestEven,
    /// bf16 only: stochastically, with the counter-based random bits
    /// `kernel_abi::adamw::stochastic_bits(seed, arena index)`. Give every step its own seed.
    Stochastic {
        /// Seed of this step.
        seed: u32,
    },
}

/// The hyperparameters of one step.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AdamWHyper {
    /// Learning rate.
    pub lr: f32,
    /// First-moment decay.
    pub beta1: f32,
    /// Second-moment decay.
    pub beta2: f32,
    /// Added to the root of the corrected second moment.
    pub eps: f32,
    /// 1-based number of this update (for the bias corrections).
    pub t: u32,
    /// Factor applied to every gradient first: clipping × 1/loss scale (1 for neither).
    pub grad_scale: f32,
    /// Rounding of the working copy.
    pub rounding: WorkingRounding,
}

/// `(1 - beta1^t, 1 - beta2^t)`, computed on the host in f32 exactly as
/// `cpu_ref::adamw_update` does (`1.0 - beta.powf(t as f32)`).
pub fn bias_corrections(beta1: f32, beta2: f32, t: u32) -> (f32, f32) {
    (1.0 - beta1.powf(t as f32), 1.0 - beta2.powf(t as f32))
}

/// The buffers of one update: every one holds the table's `arena_len` elements.
pub struct AdamWBuffers<'a, G, W> {
    /// f32 master weights, updated in place.
    pub params: DeviceViewMut<'a, f32>,
    /// Gradients (f32, bf16 or f16).
    pub grads: DeviceView<'a, G>,
    /// First moments, updated in place.
    pub m: DeviceViewMut<'a, f32>,
    /// Second moments, updated in place.
    pub v: DeviceViewMut<'a, f32>,
    /// Working copy of the parameters, overwritten with the rounded new weights; `None`
    /// for none (give the type anyway, e.g. `None::<DeviceViewMut<'_, bf16>>`).
    pub working: Option<DeviceViewMut<'a, W>>,
}

/// One AdamW step over every tensor of `table` (the formula and rounding of
/// `kernel_abi::adamw`, bit for bit `cpu_ref::adamw::adamw_update_arena`). Views may have any
/// alignment; a tensor uses 16-byte accesses where every buffer is 16-byte aligned at its
/// offset.
pub fn adamw<D: Device, G, W: WorkingElement>(
    dev: &D,
    table: &AdamWTable<D>,
    bufs: AdamWBuffers<'_, G, W>,
    hyper: &AdamWHyper,
) -> Result<()>
where
    G: DeviceElement<Abi: AdamWKernel<W::Abi>>,
{
    let AdamWBuffers { mut params, grads, mut m, mut v, working } = bufs;
    let len = table.arena_len;
    check_len(OP, "params", params.len(), len, "arena length of the table")?;
    check_len(OP, "grads", grads.len(), len, "arena length of the table")?;
    check_len(OP, "m", m.len(), len, "arena length of the table")?;
    check_len(OP, "v", v.len(), len, "arena length of the table")?;
    let working = match working {
        Some(mut w) => {
            check_len(OP, "working", w.len(), len, "arena length of the table")?;
            w.ptr()
        }
        None => DevicePtrMut::null(),
    };
    if hyper.t == 0 {
        return Err(GpuError::invalid(OP, "t", "is 1-based, got 0"));
    }
    let (stochastic, seed) = match hyper.rounding {
        WorkingRounding::NearestEven => (0, 0),
        WorkingRounding::Stochastic { seed } if W::STOCHASTIC_ROUNDING => (1, seed),
        WorkingRounding::Stochastic { .. } => {
            return Err(GpuError::invalid(
                OP,
                "rounding",
                format!("stochastic rounding is bf16 only, the working copy is {}", W::NAME),
            ));
        }
    };
    let (bias_correction1, bias_correction2) = bias_corrections(hyper.beta1, hyper.beta2, hyper.t);
    let params = AdamWParams {
        params: params.ptr(),
        grads: grads.ptr(),
        m: m.ptr(),
        v: v.ptr(),
        working,
        tensors: DevicePtr::from_addr(table.device.view().addr()),
        lr: hyper.lr,
        beta1: hyper.beta1,
        beta2: hyper.beta2,
        eps: hyper.eps,
        bias_correction1,
        bias_correction2,
        grad_scale: hyper.grad_scale,
        seed,
        stochastic,
    };
    let longest = table.entries.iter().map(|e| u64::from(e.len)).max().unwrap_or(0);
    let blocks_x = longest.div_ceil(CHUNK).div_ceil(u64::from(BLOCK_THREADS));
    let blocks_x = blocks_x.clamp(1, u64::from(MAX_BLOCKS_PER_TENSOR)) as u32;
    let mut config = LaunchConfig::linear(blocks_x, BLOCK_THREADS);
    config.grid.1 = table.entries.len() as u32;
    // SAFETY: every buffer holds `arena_len` elements and the table (validated at
    // construction, uploaded as 16-byte entries that match `AdamWTensor`'s layout) keeps
    // every tensor inside the arena; one block row per entry. The mutable views are distinct
    // borrows, so the buffers the kernel writes do not overlap each other or the inputs.
    unsafe { dev.launch(<G as DeviceElement>::Abi::ADAMW, config, params) }
}
