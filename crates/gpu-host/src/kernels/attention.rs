//! Materialised causal attention (see `kernel_abi::attention` for the layouts and kernels):
//! the permute and softmax launchers, and [`attention_forward`] / [`attention_backward`], the
//! whole path of permutes, batched GEMMs and softmax kernels.
//!
//! The forward keeps the B·NH·T×T probabilities, so its memory grows as O(B·NH·T²); what the
//! backward needs from it is the input `qkv` and those probabilities `att`.

use super::check_len;
use super::elementwise::FloatElement;
use super::gemm::{Epilogue, GemmConfig, GemmOutput, GemmSpec, GemmTypes, Layout, Precision, gemm};
use crate::device::{Device, LaunchConfig};
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::attention::{
    AttentionKernels, CHUNK, HeadDims, PERMUTE_THREADS, PermuteBackwardParams, PermuteParams,
    SOFTMAX_THREADS, SoftmaxBackwardParams, SoftmaxForwardParams, UnpermuteBackwardParams,
    UnpermuteParams,
};
use kernel_abi::{DevicePtr, DevicePtrMut};

/// Largest grid in y and z: bounds B, NH and B·NH (also the GEMM's batch limit).
const MAX_GRID_YZ: usize = 65_535;

/// The sizes of one attention call: `b` sequences of `t` tokens, `c` channels in `nh` heads
/// of `c / nh` channels.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Batch size B.
    pub b: usize,
    /// Sequence length T.
    pub t: usize,
    /// Channels C (`nh · hd`).
    pub c: usize,
    /// Number of heads NH.
    pub nh: usize,
}

impl AttentionShape {
    /// Head size `hd = c / nh`.
    pub fn head_size(&self) -> usize {
        self.c.checked_div(self.nh).unwrap_or(0)
    }

    /// Elements of `qkv` and `dqkv`: B·T·3C.
    pub fn qkv_len(&self) -> usize {
        3 * self.b * self.t * self.c
    }

    /// Elements of `out`, `dout` and of each per-head buffer (q, k, v, y): B·T·C.
    pub fn out_len(&self) -> usize {
        self.b * self.t * self.c
    }

    /// Elements of `att`: B·NH·T·T.
    pub fn att_len(&self) -> usize {
        self.b * self.nh * self.t * self.t
    }

    /// The softmax of this attention: B·NH matrices of T×T, scaled by `1 / sqrt(hd)`, rows
    /// written in full.
    pub fn softmax(&self) -> SoftmaxShape {
        SoftmaxShape {
            matrices: self.b * self.nh,
            t: self.t,
            scale: 1.0 / (self.head_size() as f32).sqrt(),
            block_rows: 0,
        }
    }

    /// Checks the shape, naming the bad argument; returns the kernels' dimensions.
    fn validate(&self, op: &'static str) -> Result<HeadDims> {
        let bad = |arg, reason: String| Err(GpuError::invalid(op, arg, reason));
        if self.nh == 0 || self.nh > MAX_GRID_YZ {
            return bad("nh", format!("{} heads (need 1..=65535)", self.nh));
        }
        if self.c == 0 || !self.c.is_multiple_of(self.nh) {
            return bad(
                "c",
                format!("{} channels are not a positive multiple of nh = {}", self.c, self.nh),
            );
        }
        if self.b > MAX_GRID_YZ || self.b * self.nh > MAX_GRID_YZ {
            return bad("b", format!("b·nh = {}·{} exceeds 65535", self.b, self.nh));
        }
        let hd = self.head_size();
        let chunks = hd.div_ceil(CHUNK as usize);
        if self.t.saturating_mul(chunks) > i32::MAX as usize || hd > u32::MAX as usize {
            return bad("t", format!("t = {} with head size {hd} is too large", self.t));
        }
        if self.c > u32::MAX as usize {
            return bad("c", format!("{} channels exceed the kernels' 32-bit row index", self.c));
        }
        let product =
            |factors: [usize; 4]| factors.iter().try_fold(1usize, |a, &f| a.checked_mul(f));
        if product([3, self.b, self.t, self.c]).is_none()
            || product([self.b, self.nh, self.t, self.t]).is_none()
        {
            return bad("t", format!("the buffers of {self:?} overflow the address space"));
        }
        Ok(HeadDims::new(self.t as u32, self.nh as u32, hd as u32))
    }

    /// The permute kernels' grid: `(⌈T·chunks / threads⌉, NH, B)`.
    fn permute_config(&self, dims: HeadDims) -> LaunchConfig {
        let items = self.t * dims.chunks as usize;
        LaunchConfig {
            grid: (items.div_ceil(PERMUTE_THREADS as usize) as u32, self.nh as u32, self.b as u32),
            block: (PERMUTE_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }

    /// Whether there is nothing to compute.
    fn is_empty(&self) -> bool {
        self.b == 0 || self.t == 0
    }
}

/// The sizes of a causal softmax: `matrices` T×T matrices, scores scaled by `scale`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SoftmaxShape {
    /// Number of T×T matrices (B·NH).
    pub matrices: usize,
    /// Sequence length T.
    pub t: usize,
    /// Factor of the scores (`1 / sqrt(hd)`).
    pub scale: f32,
    /// 0: every row is written in full, zeros above the diagonal. `b > 0`: row `r` is written
    /// up to the end of its block of `b` rows (columns `..min(T, (r / b + 1)·b)`, zeros above
    /// the diagonal among them) and its later columns are left as they were: all that the
    /// materialised attention's head GEMMs, which run in blocks of `b` rows, read.
    pub block_rows: usize,
}

impl SoftmaxShape {
    /// Elements of every buffer: `matrices · T · T`.
    pub fn len(&self) -> usize {
        self.matrices * self.t * self.t
    }

    /// Whether there is nothing to compute.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Checks the shape, naming the bad argument.
    fn validate(&self, op: &'static str) -> Result<()> {
        if self.matrices > MAX_GRID_YZ {
            return Err(GpuError::invalid(
                op,
                "matrices",
                format!("{} exceeds 65535", self.matrices),
            ));
        }
        let len = self.t.checked_mul(self.t).and_then(|square| square.checked_mul(self.matrices));
        if self.t > u32::MAX as usize || len.is_none() {
            return Err(GpuError::invalid(op, "t", format!("{} is too large", self.t)));
        }
        if !self.scale.is_finite() {
            return Err(GpuError::invalid(op, "scale", format!("{} is not finite", self.scale)));
        }
        if self.block_rows > u32::MAX as usize {
            let reason = format!("{} does not fit in 32 bits", self.block_rows);
            return Err(GpuError::invalid(op, "block_rows", reason));
        }
        Ok(())
    }

    /// The forward kernel's parameters on these buffers (`out` may be `inp` itself).
    fn forward_params<A: Copy>(
        &self,
        inp: DevicePtr<A>,
        out: DevicePtrMut<A>,
    ) -> SoftmaxForwardParams<A> {
        let (t, scale, block_rows) = (self.t as u32, self.scale, self.block_rows as u32);
        SoftmaxForwardParams { inp, out, t, scale, block_rows, _pad: 0 }
    }

    /// The backward kernel's parameters on these buffers (`dpreatt` may be `datt` itself).
    fn backward_params<A: Copy>(
        &self,
        att: DevicePtr<A>,
        datt: DevicePtr<A>,
        dpreatt: DevicePtrMut<A>,
    ) -> SoftmaxBackwardParams<A> {
        let (t, scale, block_rows) = (self.t as u32, self.scale, self.block_rows as u32);
        SoftmaxBackwardParams { att, datt, dpreatt, t, scale, block_rows, _pad: 0 }
    }

    /// One warp per row: `(⌈T / warps⌉, matrices)`.
    fn config(&self) -> LaunchConfig {
        let warps = (SOFTMAX_THREADS / 32) as usize;
        LaunchConfig {
            grid: (self.t.div_ceil(warps) as u32, self.matrices as u32, 1),
            block: (SOFTMAX_THREADS, 1, 1),
            shared_mem_bytes: 0,
        }
    }
}

/// Buffers of [`attention_permute`].
pub struct Permute<'a, T> {
    /// (B, T, 3, NH, hd): the qkv projection's output.
    pub qkv: DeviceView<'a, T>,
    /// (B, NH, T, hd), written.
    pub q: DeviceViewMut<'a, T>,
    /// (B, NH, T, hd), written.
    pub k: DeviceViewMut<'a, T>,
    /// (B, NH, T, hd), written.
    pub v: DeviceViewMut<'a, T>,
}

/// Buffers of [`attention_permute_backward`].
pub struct PermuteBackward<'a, T> {
    /// (B, NH, T, hd).
    pub dq: DeviceView<'a, T>,
    /// (B, NH, T, hd).
    pub dk: DeviceView<'a, T>,
    /// (B, NH, T, hd).
    pub dv: DeviceView<'a, T>,
    /// (B, T, 3, NH, hd), written.
    pub dqkv: DeviceViewMut<'a, T>,
}

/// Splits `qkv` (B, T, 3, NH, hd) into per-head `q`, `k`, `v` (B, NH, T, hd) (exact copies).
pub fn attention_permute<D: Device, T: FloatElement>(
    dev: &D,
    shape: AttentionShape,
    mut args: Permute<'_, T>,
) -> Result<()> {
    const OP: &str = "attention_permute";
    let dims = shape.validate(OP)?;
    check_len(OP, "qkv", args.qkv.len(), shape.qkv_len(), "b·t·3c")?;
    for (arg, len) in [("q", args.q.len()), ("k", args.k.len()), ("v", args.v.len())] {
        check_len(OP, arg, len, shape.out_len(), "b·nh·t·hd")?;
    }
    if shape.is_empty() {
        return Ok(());
    }
    let params = PermuteParams {
        qkv: args.qkv.ptr(),
        q: args.q.ptr(),
        k: args.k.ptr(),
        v: args.v.ptr(),
        dims,
    };
    // SAFETY: every view has the length of its layout for this shape; the outputs are mutable
    // borrows, so they overlap neither each other nor the input; the grid is the kernel's.
    unsafe { dev.launch(T::Abi::PERMUTE, shape.permute_config(dims), params) }
}

/// Gathers per-head `dq`, `dk`, `dv` (B, NH, T, hd) into `dqkv` (B, T, 3, NH, hd) (exact
/// copies).
pub fn attention_permute_backward<D: Device, T: FloatElement>(
    dev: &D,
    shape: AttentionShape,
    mut args: PermuteBackward<'_, T>,
) -> Result<()> {
    const OP: &str = "attention_permute_backward";
    let dims = shape.validate(OP)?;
    for (arg, len) in [("dq", args.dq.len()), ("dk", args.dk.len()), ("dv", args.dv.len())] {
        check_len(OP, arg, len, shape.out_len(), "b·nh·t·hd")?;
    }
    check_len(OP, "dqkv", args.dqkv.len(), shape.qkv_len(), "b·t·3c")?;
    if shape.is_empty() {
        return Ok(());
    }
    let params = PermuteBackwardParams {
        dq: args.dq.ptr(),
        dk: args.dk.ptr(),
        dv: args.dv.ptr(),
        dqkv: args.dqkv.ptr(),
        dims,
    };
    // SAFETY: as in `attention_permute`, with the roles swapped.
    unsafe { dev.launch(T::Abi::PERMUTE_BACKWARD, shape.permute_config(dims), params) }
}

/// Puts the heads `y` (B, NH, T, hd) side by side: `out` (B, T, NH·hd) (exact copies).
pub fn attention_unpermute<D: Device, T: FloatElement>(
    dev: &D,
    shape: AttentionShape,
    y: DeviceView<'_, T>,
    mut out: DeviceViewMut<'_, T>,
) -> Result<()> {
    const OP: &str = "attention_unpermute";
    let dims = shape.validate(OP)?;
    check_len(OP, "y", y.len(), shape.out_len(), "b·nh·t·hd")?;
    check_len(OP, "out", out.len(), shape.out_len(), "b·t·c")?;
    if shape.is_empty() {
        return Ok(());
    }
    let params = UnpermuteParams { y: y.ptr(), out: out.ptr(), dims };
    // SAFETY: both views have B·T·C elements and do not overlap (`out` is a mutable borrow);
    // the grid is the kernel's.
    unsafe { dev.launch(T::Abi::UNPERMUTE, shape.permute_config(dims), params) }
}

/// The backward of [`attention_unpermute`]: `dout` (B, T, NH·hd) → `dy` (B, NH, T, hd).
pub fn attention_unpermute_backward<D: Device, T: FloatElement>(
    dev: &D,
    shape: AttentionShape,
    dout: DeviceView<'_, T>,
    mut dy: DeviceViewMut<'_, T>,
) -> Result<()> {
    const OP: &str = "attention_unpermute_backward";
    let dims = shape.validate(OP)?;
    check_len(OP, "dout", dout.len(), shape.out_len(), "b·t·c")?;
    check_len(OP, "dy", dy.len(), shape.out_len(), "b·nh·t·hd")?;
    if shape.is_empty() {
        return Ok(());
    }
    let params = UnpermuteBackwardParams { dout: dout.ptr(), dy: dy.ptr(), dims };
    // SAFETY: as in `attention_unpermute`, with the roles swapped.
    unsafe { dev.launch(T::Abi::UNPERMUTE_BACKWARD, shape.permute_config(dims), params) }
}

/// Causal scaled softmax of every row: row `t` of each T×T matrix of `inp` becomes
/// `softmax(scale · inp[t, 0..=t])` in `out`, followed by exact zeros (up to the end of its
/// block of rows when `shape.block_rows` is not 0: [`SoftmaxShape::block_rows`]). The entries
/// above the diagonal of `inp` are not read.
pub fn causal_softmax_forward<D: Device, T: FloatElement>(
    dev: &D,
    shape: SoftmaxShape,
    inp: DeviceView<'_, T>,
    mut out: DeviceViewMut<'_, T>,
) -> Result<()> {
    const OP: &str = "causal_softmax_forward";
    shape.validate(OP)?;
    check_len(OP, "inp", inp.len(), shape.len(), "matrices·t·t")?;
    check_len(OP, "out", out.len(), shape.len(), "matrices·t·t")?;
    if shape.is_empty() {
        return Ok(());
    }
    let params = shape.forward_params(inp.ptr(), out.ptr());
    // SAFETY: both views cover the matrices and do not overlap; the grid is the kernel's.
    unsafe { dev.launch(T::Abi::SOFTMAX_FORWARD, shape.config(), params) }
}

/// [`causal_softmax_forward`] in place: the scores in `att` become probabilities.
pub fn causal_softmax_forward_in_place<D: Device, T: FloatElement>(
    dev: &D,
    shape: SoftmaxShape,
    mut att: DeviceViewMut<'_, T>,
) -> Result<()> {
    const OP: &str = "causal_softmax_forward_in_place";
    shape.validate(OP)?;
    check_len(OP, "att", att.len(), shape.len(), "matrices·t·t")?;
    if shape.is_empty() {
        return Ok(());
    }
    let out = att.ptr();
    let params = shape.forward_params(out.as_const(), out);
    // SAFETY: the view covers the matrices; each element is read before it is written, by the
    // thread that writes it.
    unsafe { dev.launch(T::Abi::SOFTMAX_FORWARD, shape.config(), params) }
}

/// Buffers of [`causal_softmax_backward`].
pub struct SoftmaxBackward<'a, T> {
    /// The forward's probabilities (entries above the diagonal are not read).
    pub att: DeviceView<'a, T>,
    /// Gradient of the probabilities (entries above the diagonal are not read).
    pub datt: DeviceView<'a, T>,
    /// Gradient of the unscaled scores, written (0 above the diagonal; as far as
    /// [`SoftmaxShape::block_rows`] says).
    pub dpreatt: DeviceViewMut<'a, T>,
}

/// Causal softmax backward: `dpreatt[t, j] = att[t, j]·(datt[t, j] − Σ_{k≤t} att[t, k]·datt[t, k])
/// ·scale` for `j ≤ t`, 0 above the diagonal (up to the end of the row's block of rows when
/// `shape.block_rows` is not 0): the gradient of the scores before scaling.
pub fn causal_softmax_backward<D: Device, T: FloatElement>(
    dev: &D,
    shape: SoftmaxShape,
    mut args: SoftmaxBackward<'_, T>,
) -> Result<()> {
    const OP: &str = "causal_softmax_backward";
    shape.validate(OP)?;
    check_len(OP, "att", args.att.len(), shape.len(), "matrices·t·t")?;
    check_len(OP, "datt", args.datt.len(), shape.len(), "matrices·t·t")?;
    check_len(OP, "dpreatt", args.dpreatt.len(), shape.len(), "matrices·t·t")?;
    if shape.is_empty() {
        return Ok(());
    }
    let params = shape.backward_params(args.att.ptr(), args.datt.ptr(), args.dpreatt.ptr());
    // SAFETY: the views cover the matrices; `dpreatt` overlaps neither input; the grid is the
    // kernel's.
    unsafe { dev.launch(T::Abi::SOFTMAX_BACKWARD, shape.config(), params) }
}

/// [`causal_softmax_backward`] in place: `grad` holds the gradient of the probabilities and
/// becomes the gradient of the unscaled scores.
pub fn causal_softmax_backward_in_place<D: Device, T: FloatElement>(
    dev: &D,
    shape: SoftmaxShape,
    att: DeviceView<'_, T>,
    mut grad: DeviceViewMut<'_, T>,
) -> Result<()> {
    const OP: &str = "causal_softmax_backward_in_place";
    shape.validate(OP)?;
    check_len(OP, "att", att.len(), shape.len(), "matrices·t·t")?;
    check_len(OP, "grad", grad.len(), shape.len(), "matrices·t·t")?;
    if shape.is_empty() {
        return Ok(());
    }
    let dpreatt = grad.ptr();
    let params = shape.backward_params(att.ptr(), dpreatt.as_const(), dpreatt);
    // SAFETY: the views cover the matrices; `grad` does not overlap `att` (a mutable borrow);
    // each element of `grad` is read before it is written, by the thread that writes it.
    unsafe { dev.launch(T::Abi::SOFTMAX_BACKWARD, shape.config(), params) }
}

/// A storage type of the whole attention path: it has the attention kernels and a GEMM that
/// multiplies it into itself (f32 with `Fp32` or `Tf32`, bf16 with `Bf16`, f16 with `Fp16`).
pub trait AttentionElement: FloatElement + GemmTypes<Self> + GemmOutput {}

impl<T: FloatElement + GemmTypes<T> + GemmOutput> AttentionElement for T {}

/// Buffers of [`attention_forward`].
pub struct AttentionForward<'a, T> {
    /// (B, T, 3, NH, hd): the qkv projection's output. Keep it for the backward.
    pub qkv: DeviceView<'a, T>,
    /// (B, T, C), written: the heads' outputs side by side.
    pub out: DeviceViewMut<'a, T>,
    /// (B, NH, T, T), written: the causal softmax probabilities, 0 above the diagonal up to
    /// the end of each row's block of `causal_block_rows(T)` rows (T/8 rounded up to a
    /// multiple of 16), the columns after it not written (nothing reads them). Keep it for
    /// the backward.
    pub att: DeviceViewMut<'a, T>,
    /// At least [`attention_forward_scratch_len`] elements (contents ignored, overwritten).
    pub scratch: DeviceViewMut<'a, T>,
}

/// Buffers of [`attention_backward`].
pub struct AttentionBackward<'a, T> {
    /// (B, T, C): gradient of the forward's `out`.
    pub dout: DeviceView<'a, T>,
    /// (B, T, 3, NH, hd): the forward's input.
    pub qkv: DeviceView<'a, T>,
    /// (B, NH, T, T): the forward's probabilities, as [`attention_forward`] wrote them (only
    /// the columns it wrote are read).
    pub att: DeviceView<'a, T>,
    /// (B, T, 3, NH, hd), written (not accumulated): the gradient of `qkv`.
    pub dqkv: DeviceViewMut<'a, T>,
    /// At least [`attention_backward_scratch_len`] elements (contents ignored, overwritten).
    pub scratch: DeviceViewMut<'a, T>,
}

/// Elements of scratch [`attention_forward`] needs: per-head q, k, v and y, 4·B·T·C.
pub fn attention_forward_scratch_len(shape: AttentionShape) -> usize {
    4 * shape.out_len()
}

/// Elements of scratch [`attention_backward`] needs: per-head q, k, v, dy, dq, dk, dv
/// (7·B·T·C) and the gradient of the probabilities (B·NH·T·T).
pub fn attention_backward_scratch_len(shape: AttentionShape) -> usize {
    7 * shape.out_len() + shape.att_len()
}

/// Which part of a head GEMM causality leaves, per block of [`causal_block_rows`] output rows
/// `m0..m1` (queries for `S`, `dP`, `Y`, `dQ`; keys for `dV`, `dK`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Causal {
    /// Columns `..m1` of the T×T output: the scores and their gradient, whose later columns
    /// lie above the diagonal, where the causal softmax neither reads nor keeps them.
    Columns,
    /// The terms `k < m1`: the products with P or dS, which are 0 above the diagonal.
    Prefix,
    /// The terms `k ≥ m0`: the products with Pᵀ or dSᵀ, 0 below it.
    Suffix,
}

/// A batched GEMM over the B·NH heads: dense leading dimensions, `z`-th operand `stride`
/// elements after the first, `alpha = 1`, `beta = 0`, run in blocks of output rows over the
/// part that causality leaves ([`Causal`]).
struct HeadGemm {
    /// (M, N, K) of one head.
    mnk: (usize, usize, usize),
    /// Storage of A and B.
    layouts: (Layout, Layout),
    /// Batch strides of A, B and C.
    strides: (usize, usize, usize),
    /// What each block of output rows computes.
    causal: Causal,
}

/// Output rows per block of the materialised attention's causal head GEMMs: about an eighth
/// of T, a multiple of 16 (so every block's operands stay 16-byte aligned, for the wgmma
/// kernel's tensor maps). At T = 1024, 8 blocks of 128 rows do (1 + 8) / (2 · 8) = 56% of the
/// full products' work; the softmax kernels write the same 56% of the T×T matrices (`att` of
/// [`AttentionForward`] holds each row up to the end of its block of rows).
pub fn causal_block_rows(t: usize) -> usize {
    (t / 8).next_multiple_of(16).max(16)
}

/// The softmax between the causal head GEMMs, which writes each row only as far as they read
/// it: to the end of its block of [`causal_block_rows`] rows.
fn causal_softmax_shape(shape: AttentionShape) -> SoftmaxShape {
    SoftmaxShape { block_rows: causal_block_rows(shape.t), ..shape.softmax() }
}

impl HeadGemm {
    fn spec(&self, shape: AttentionShape, config: GemmConfig) -> GemmSpec {
        let (m, n, k) = self.mnk;
        let mut spec = GemmSpec::new(m, n, k, self.layouts.0, self.layouts.1, config.precision);
        spec.batch = shape.b * shape.nh;
        (spec.stride_a, spec.stride_b, spec.stride_c) = self.strides;
        config.apply(spec)
    }

    /// `c = a·b` for every head, block of [`causal_block_rows`] output rows by block, each over
    /// the columns or terms causality leaves (the rest of `c` is not written).
    fn run<D: Device, T: AttentionElement>(
        &self,
        dev: &D,
        shape: AttentionShape,
        config: GemmConfig,
        (a, b): (DeviceView<'_, T>, DeviceView<'_, T>),
        mut c: DeviceViewMut<'_, T>,
    ) -> Result<()> {
        let full = self.spec(shape, config);
        let (rows, step) = (self.mnk.0, causal_block_rows(shape.t));
        for m0 in (0..rows).step_by(step) {
            let m1 = (m0 + step).min(rows);
            // (n, k) of the block, and its offsets into A, B and C.
            let ((n, k), (a_off, b_off, c_off)) = match self.causal {
                Causal::Columns => ((m1, full.k), (m0 * full.lda, 0, m0 * full.ldc)),
                Causal::Prefix => ((full.n, m1), (m0 * full.lda, 0, m0 * full.ldc)),
                Causal::Suffix => {
                    ((full.n, full.k - m0), (m0 * full.lda + m0, m0 * full.ldb, m0 * full.ldc))
                }
            };
            let spec = GemmSpec { m: m1 - m0, n, k, ..full };
            let a = a.slice(a_off..a.len())?;
            let b = b.slice(b_off..b.len())?;
            let c_len = c.len();
            let c = c.reborrow().slice_mut(c_off..c_len)?;
            gemm(dev, &spec, a, b, c, Epilogue::default())?;
        }
        Ok(())
    }
}

/// The six per-head matmuls, with `square = T·T` and `head = T·hd` elements per head.
struct HeadGemms {
    /// `S = Q·Kᵀ` (T×T×hd): K read as a column-major hd×T matrix.
    scores: HeadGemm,
    /// `Y = P·V` (T×hd×T).
    values: HeadGemm,
    /// `dP = dY·Vᵀ` (T×T×hd).
    dprobs: HeadGemm,
    /// `dV = Pᵀ·dY` (T×hd×T): P read column-major.
    dvalues: HeadGemm,
    /// `dQ = dS·K` (T×hd×T).
    dqueries: HeadGemm,
    /// `dK = dSᵀ·Q` (T×hd×T): dS read column-major.
    dkeys: HeadGemm,
}

impl HeadGemms {
    fn new(shape: AttentionShape) -> Self {
        use Causal::{Columns, Prefix, Suffix};
        use Layout::{ColMajor as Col, RowMajor as Row};
        let (t, hd) = (shape.t, shape.head_size());
        let (square, head) = (t * t, t * hd);
        let gemm = |mnk, layouts, strides, causal| HeadGemm { mnk, layouts, strides, causal };
        Self {
            scores: gemm((t, t, hd), (Row, Col), (head, head, square), Columns),
            values: gemm((t, hd, t), (Row, Row), (square, head, head), Prefix),
            dprobs: gemm((t, t, hd), (Row, Col), (head, head, square), Columns),
            dvalues: gemm((t, hd, t), (Col, Row), (square, head, head), Suffix),
            dqueries: gemm((t, hd, t), (Row, Row), (square, head, head), Prefix),
            dkeys: gemm((t, hd, t), (Col, Row), (square, head, head), Suffix),
        }
    }
}

/// Fails unless `precision` multiplies `T` into `T`.
fn check_precision<T: AttentionElement>(op: &'static str, precision: Precision) -> Result<()> {
    let takes = <T as GemmTypes<T>>::PRECISIONS;
    if !takes.contains(&precision) {
        return Err(GpuError::invalid(
            op,
            "precision",
            format!("{precision:?} does not multiply {} (it takes {takes:?})", T::NAME),
        ));
    }
    Ok(())
}

/// Fails unless `scratch` holds at least `needed` elements.
fn check_scratch(op: &'static str, len: usize, needed: usize, what: &str) -> Result<()> {
    if len < needed {
        return Err(GpuError::invalid(
            op,
            "scratch",
            format!("has {len} elements, needs {needed} ({what})"),
        ));
    }
    Ok(())
}

/// Causal multi-head attention forward, materialised: permute `qkv` into per-head q, k, v;
/// `S = Q·Kᵀ` into `att` (batched GEMM over B·NH heads); causal softmax of `S·(1/sqrt(hd))` in
/// place; `Y = P·V`; unpermute `Y` into `out`. The GEMMs run as `gemms` says (a
/// [`Precision`] alone: the default engine and tile). In TF32 every GEMM rounds its operands to
/// nearest: where `S = Q·Kᵀ` runs on `wgmma`, which truncates them, Q and K are rounded in
/// place first ([`GemmSpec::truncates_tf32_operands`]). For the backward, keep `qkv` and `att`.
pub fn attention_forward<D: Device, T: AttentionElement>(
    dev: &D,
    shape: AttentionShape,
    gemms: impl Into<GemmConfig>,
    mut args: AttentionForward<'_, T>,
) -> Result<()> {
    const OP: &str = "attention_forward";
    let config = gemms.into();
    shape.validate(OP)?;
    check_precision::<T>(OP, config.precision)?;
    check_len(OP, "qkv", args.qkv.len(), shape.qkv_len(), "b·t·3c")?;
    check_len(OP, "out", args.out.len(), shape.out_len(), "b·t·c")?;
    check_len(OP, "att", args.att.len(), shape.att_len(), "b·nh·t·t")?;
    let needed = attention_forward_scratch_len(shape);
    check_scratch(OP, args.scratch.len(), needed, "attention_forward_scratch_len")?;
    if shape.is_empty() {
        return Ok(());
    }
    let n = shape.out_len();
    let (mut q, rest) = args.scratch.split_at_mut(n)?;
    let (mut k, rest) = rest.split_at_mut(n)?;
    let (mut v, rest) = rest.split_at_mut(n)?;
    let (mut y, _) = rest.split_at_mut(n)?;
    let gemms = HeadGemms::new(shape);
    let permute = Permute { qkv: args.qkv, q: q.reborrow(), k: k.reborrow(), v: v.reborrow() };
    attention_permute(dev, shape, permute)?;
    if gemms.scores.spec(shape, config).truncates_tf32_operands(dev.ptx_arch()) {
        T::round_tf32_in_place(dev, q.reborrow())?;
        T::round_tf32_in_place(dev, k.reborrow())?;
    }
    gemms.scores.run(dev, shape, config, (q.as_view(), k.as_view()), args.att.reborrow())?;
    causal_softmax_forward_in_place(dev, causal_softmax_shape(shape), args.att.reborrow())?;
    gemms.values.run(dev, shape, config, (args.att.as_view(), v.as_view()), y.reborrow())?;
    attention_unpermute(dev, shape, y.as_view(), args.out)
}

/// Causal multi-head attention backward, materialised, from the forward's `qkv` and `att`:
/// permute `qkv` again and unpermute `dout` into per-head dY; `dP = dY·Vᵀ` and `dV = Pᵀ·dY`;
/// the causal softmax backward turns dP into dS, the gradient of the unscaled scores, in
/// place; `dQ = dS·K`, `dK = dSᵀ·Q`; permute dQ, dK, dV into `dqkv`. The GEMMs run as
/// `gemms` says (a [`Precision`] alone: the default engine and tile); in TF32, where `dP = dY·Vᵀ`
/// runs on `wgmma`, dY and V are rounded in place first, as in [`attention_forward`].
pub fn attention_backward<D: Device, T: AttentionElement>(
    dev: &D,
    shape: AttentionShape,
    gemms: impl Into<GemmConfig>,
    mut args: AttentionBackward<'_, T>,
) -> Result<()> {
    const OP: &str = "attention_backward";
    let config = gemms.into();
    shape.validate(OP)?;
    check_precision::<T>(OP, config.precision)?;
    check_len(OP, "dout", args.dout.len(), shape.out_len(), "b·t·c")?;
    check_len(OP, "qkv", args.qkv.len(), shape.qkv_len(), "b·t·3c")?;
    check_len(OP, "att", args.att.len(), shape.att_len(), "b·nh·t·t")?;
    check_len(OP, "dqkv", args.dqkv.len(), shape.qkv_len(), "b·t·3c")?;
    let needed = attention_backward_scratch_len(shape);
    check_scratch(OP, args.scratch.len(), needed, "attention_backward_scratch_len")?;
    if shape.is_empty() {
        return Ok(());
    }
    let n = shape.out_len();
    let (mut q, rest) = args.scratch.split_at_mut(n)?;
    let (mut k, rest) = rest.split_at_mut(n)?;
    let (mut v, rest) = rest.split_at_mut(n)?;
    let (mut dy, rest) = rest.split_at_mut(n)?;
    let (mut dq, rest) = rest.split_at_mut(n)?;
    let (mut dk, rest) = rest.split_at_mut(n)?;
    let (mut dv, rest) = rest.split_at_mut(n)?;
    let (mut datt, _) = rest.split_at_mut(shape.att_len())?;
    let gemms = HeadGemms::new(shape);
    let permute = Permute { qkv: args.qkv, q: q.reborrow(), k: k.reborrow(), v: v.reborrow() };
    attention_permute(dev, shape, permute)?;
    attention_unpermute_backward(dev, shape, args.dout, dy.reborrow())?;
    if gemms.dprobs.spec(shape, config).truncates_tf32_operands(dev.ptx_arch()) {
        T::round_tf32_in_place(dev, dy.reborrow())?;
        T::round_tf32_in_place(dev, v.reborrow())?;
    }
    gemms.dprobs.run(dev, shape, config, (dy.as_view(), v.as_view()), datt.reborrow())?;
    gemms.dvalues.run(dev, shape, config, (args.att, dy.as_view()), dv.reborrow())?;
    causal_softmax_backward_in_place(dev, causal_softmax_shape(shape), args.att, datt.reborrow())?;
    gemms.dqueries.run(dev, shape, config, (datt.as_view(), k.as_view()), dq.reborrow())?;
    gemms.dkeys.run(dev, shape, config, (datt.as_view(), q.as_view()), dk.reborrow())?;
    let grads = PermuteBackward {
        dq: dq.as_view(),
        dk: dk.as_view(),
        dv: dv.as_view(),
        dqkv: args.dqkv.reborrow(),
    };
    attention_permute_backward(dev, shape, grads)
}
