//! Backend buffers for the activations of a forward pass and the scratch gradients of a
//! backward pass, sized for a batch of up to `b × t` tokens.

use super::Gpt2Config;
use crate::backend::ops::{AttentionKind, AttentionSaved, AttentionSavedView};
use crate::backend::{ActBuf, Backend, Buf, Element, Storage, View, ViewMut};
use crate::error::Result;

/// A buffer holding one slice per layer (or a single slice), `stride` elements apart.
pub struct Slab<S> {
    buf: S,
    stride: usize,
}

impl<S: Storage> Slab<S> {
    fn new<B: Backend<Buf<T> = S>, T: Element>(
        backend: &B,
        layers: usize,
        stride: usize,
        what: &str,
    ) -> Result<Self> {
        let len = layers.checked_mul(stride).ok_or_else(|| {
            crate::error::Error::invalid(format!("{what} would hold more than 2^64 elements"))
        })?;
        Ok(Self { buf: backend.alloc::<T>(len, what)?, stride })
    }

    /// The first `len` elements of layer `l`'s slice.
    pub fn at(&self, l: usize, len: usize) -> View<'_, S> {
        View::of(&self.buf, l * self.stride..l * self.stride + len)
    }

    /// Elements `offset .. offset + len` of layer `l`'s slice.
    pub fn window(&self, l: usize, offset: usize, len: usize) -> View<'_, S> {
        let start = l * self.stride + offset;
        View::of(&self.buf, start..start + len)
    }

    /// The first `len` elements of layer `l`'s slice, writable.
    pub fn at_mut(&mut self, l: usize, len: usize) -> ViewMut<'_, S> {
        ViewMut::of(&mut self.buf, l * self.stride..l * self.stride + len)
    }
}

/// What each layer's attention saves for the backward pass.
pub enum AttentionStore<B: Backend> {
    /// Probabilities `(b, nh, t, t)` per layer (naive attention).
    Probs(Slab<ActBuf<B>>),
    /// Log-sum-exp `(b, nh, t)` per layer (flash attention).
    Lse(Slab<Buf<B, f32>>),
}

impl<B: Backend> AttentionStore<B> {
    fn new(
        backend: &B,
        kind: AttentionKind,
        layers: usize,
        b: usize,
        nh: usize,
        t: usize,
    ) -> Result<Self> {
        Ok(match kind {
            AttentionKind::Naive => Self::Probs(Slab::new::<B, B::Act>(
                backend,
                layers,
                b * nh * t * t,
                "attention probabilities",
            )?),
            AttentionKind::Flash => Self::Lse(Slab::new::<B, f32>(
                backend,
                layers,
                b * nh * t,
                "attention log-sum-exp",
            )?),
        })
    }

    /// Layer `l`'s saved state for a batch of `b × t`, writable.
    pub fn saved_mut(&mut self, l: usize, b: usize, nh: usize, t: usize) -> AttentionSaved<'_, B> {
        match self {
            Self::Probs(slab) => AttentionSaved::Probs(slab.at_mut(l, b * nh * t * t)),
            Self::Lse(slab) => AttentionSaved::Lse(slab.at_mut(l, b * nh * t)),
        }
    }

    /// Layer `l`'s saved state for a batch of `b × t`.
    pub fn saved(&self, l: usize, b: usize, nh: usize, t: usize) -> AttentionSavedView<'_, B> {
        match self {
            Self::Probs(slab) => AttentionSavedView::Probs(slab.at(l, b * nh * t * t)),
            Self::Lse(slab) => AttentionSavedView::Lse(slab.at(l, b * nh * t)),
        }
    }
}

/// Everything the forward pass writes and the backward pass reads, in llm.c's naming.
pub struct Activations<B: Backend> {
    /// Capacity: batch size.
    pub max_b: usize,
    /// Capacity: sequence length.
    pub max_t: usize,
    /// wte + wpe (b, t, c).
    pub encoded: Slab<ActBuf<B>>,
    /// Per layer: first layernorm output (b, t, c).
    pub ln1: Slab<ActBuf<B>>,
    /// Per layer: mean of the first layernorm (b, t).
    pub ln1_mean: Slab<Buf<B, f32>>,
    /// Per layer: 1/std of the first layernorm (b, t).
    pub ln1_rstd: Slab<Buf<B, f32>>,
    /// Per layer: fused q, k, v (b, t, 3c).
    pub qkv: Slab<ActBuf<B>>,
    /// Per layer: attention output before its projection (b, t, c).
    pub atty: Slab<ActBuf<B>>,
    /// Per layer: what the attention backward needs.
    pub att: AttentionStore<B>,
    /// Per layer: attention projection output (b, t, c).
    pub attproj: Slab<ActBuf<B>>,
    /// Per layer: residual after attention (b, t, c).
    pub residual2: Slab<ActBuf<B>>,
    /// Per layer: second layernorm output (b, t, c).
    pub ln2: Slab<ActBuf<B>>,
    /// Per layer: mean of the second layernorm.
    pub ln2_mean: Slab<Buf<B, f32>>,
    /// Per layer: 1/std of the second layernorm.
    pub ln2_rstd: Slab<Buf<B, f32>>,
    /// Per layer: MLP up-projection before the GELU (b, t, 4c).
    pub fch: Slab<ActBuf<B>>,
    /// Per layer: GELU of it (b, t, 4c).
    pub fch_gelu: Slab<ActBuf<B>>,
    /// Per layer: MLP down-projection (b, t, c).
    pub fcproj: Slab<ActBuf<B>>,
    /// Per layer: residual after the MLP (b, t, c): the next layer's input.
    pub residual3: Slab<ActBuf<B>>,
    /// Final layernorm output (b, t, c).
    pub lnf: Slab<ActBuf<B>>,
    /// Final layernorm mean.
    pub lnf_mean: Slab<Buf<B, f32>>,
    /// Final layernorm 1/std.
    pub lnf_rstd: Slab<Buf<B, f32>>,
    /// Logits (b, t, vp), rows `logits_ld` apart; the fused classifier turns them into their
    /// gradient in place.
    pub logits: Slab<ActBuf<B>>,
    /// Elements between the starts of consecutive rows of `logits` (the backend's
    /// [`Backend::logits_stride`] of vp).
    pub logits_ld: usize,
}

impl<B: Backend> Activations<B> {
    /// Allocates activations for batches of up to `max_b × max_t` tokens, with the saved
    /// state of `attention`.
    pub fn new(
        backend: &B,
        config: &Gpt2Config,
        attention: AttentionKind,
        max_b: usize,
        max_t: usize,
    ) -> Result<Self> {
        let (l, c, bt) = (config.num_layers, config.channels, max_b * max_t);
        let logits_ld = backend.logits_stride(config.padded_vocab_size);
        let act = |layers, stride, what| Slab::new::<B, B::Act>(backend, layers, stride, what);
        let f32s = |layers, stride, what| Slab::new::<B, f32>(backend, layers, stride, what);
        Ok(Self {
            max_b,
            max_t,
            encoded: act(1, bt * c, "activations (encoded)")?,
            ln1: act(l, bt * c, "activations (ln1)")?,
            ln1_mean: f32s(l, bt, "layernorm statistics")?,
            ln1_rstd: f32s(l, bt, "layernorm statistics")?,
            qkv: act(l, bt * 3 * c, "activations (qkv)")?,
            atty: act(l, bt * c, "activations (attention output)")?,
            att: AttentionStore::new(backend, attention, l, max_b, config.num_heads, max_t)?,
            attproj: act(l, bt * c, "activations (attproj)")?,
            residual2: act(l, bt * c, "activations (residual2)")?,
            ln2: act(l, bt * c, "activations (ln2)")?,
            ln2_mean: f32s(l, bt, "layernorm statistics")?,
            ln2_rstd: f32s(l, bt, "layernorm statistics")?,
            fch: act(l, bt * 4 * c, "activations (fch)")?,
            fch_gelu: act(l, bt * 4 * c, "activations (fch_gelu)")?,
            fcproj: act(l, bt * c, "activations (fcproj)")?,
            residual3: act(l, bt * c, "activations (residual3)")?,
            lnf: act(1, bt * c, "activations (lnf)")?,
            lnf_mean: f32s(1, bt, "layernorm statistics")?,
            lnf_rstd: f32s(1, bt, "layernorm statistics")?,
            logits: act(1, bt * logits_ld, "logits")?,
            logits_ld,
        })
    }
}

/// Gradients of activations, reused by every layer of the backward pass.
pub struct GradScratch<B: Backend> {
    /// Gradient of the residual stream (b, t, c): the layernorm backwards accumulate into it.
    pub dres: Slab<ActBuf<B>>,
    /// Gradient of a layernorm output (b, t, c).
    pub dln: Slab<ActBuf<B>>,
    /// Gradient of the attention output (b, t, c).
    pub datty: Slab<ActBuf<B>>,
    /// Gradient of the fused q, k, v (b, t, 3c).
    pub dqkv: Slab<ActBuf<B>>,
    /// Gradient of the MLP up-projection before the GELU (b, t, 4c).
    pub dfch: Slab<ActBuf<B>>,
    /// Gradient of the GELU output (b, t, 4c): only the unfused path has it.
    pub dfch_gelu: Option<Slab<ActBuf<B>>>,
}

impl<B: Backend> GradScratch<B> {
    /// Allocates scratch gradients for batches of up to `max_b × max_t` tokens (`fuse`: the
    /// GELU backward runs inside the matmul, so no buffer for the GELU output's gradient).
    pub fn new(
        backend: &B,
        config: &Gpt2Config,
        fuse: bool,
        max_b: usize,
        max_t: usize,
    ) -> Result<Self> {
        let (c, bt) = (config.channels, max_b * max_t);
        let act = |stride| Slab::new::<B, B::Act>(backend, 1, stride, "activation gradients");
        Ok(Self {
            dres: act(bt * c)?,
            dln: act(bt * c)?,
            datty: act(bt * c)?,
            dqkv: act(bt * 3 * c)?,
            dfch: act(bt * 4 * c)?,
            dfch_gelu: if fuse { None } else { Some(act(bt * 4 * c)?) },
        })
    }
}
