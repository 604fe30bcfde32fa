//! Backend buffers for the activations of a forward pass and the scratch gradients of a
//! backward pass, sized for a batch of up to `b × t` tokens.

use super::Gpt2Config;
use crate::backend::{Backend, View, ViewMut};
use crate::error::Result;

/// A buffer holding one slice per layer (or a single slice), `stride` elements apart.
pub struct Slab<B: Backend> {
    buf: B::Buffer,
    stride: usize,
}

impl<B: Backend> Slab<B> {
    fn new(backend: &B, layers: usize, stride: usize) -> Result<Self> {
        Ok(Self { buf: backend.alloc(layers * stride)?, stride })
    }

    /// The first `len` elements of layer `l`'s slice.
    pub fn at(&self, l: usize, len: usize) -> View<'_, B::Buffer> {
        View::of(&self.buf, l * self.stride..l * self.stride + len)
    }

    /// Elements `offset .. offset + len` of layer `l`'s slice.
    pub fn window(&self, l: usize, offset: usize, len: usize) -> View<'_, B::Buffer> {
        let start = l * self.stride + offset;
        View::of(&self.buf, start..start + len)
    }

    /// The first `len` elements of layer `l`'s slice, writable.
    pub fn at_mut(&mut self, l: usize, len: usize) -> ViewMut<'_, B::Buffer> {
        ViewMut::of(&mut self.buf, l * self.stride..l * self.stride + len)
    }
}

/// Everything the forward pass writes and the backward pass reads, in llm.c's naming.
pub struct Activations<B: Backend> {
    /// Capacity: batch size.
    pub max_b: usize,
    /// Capacity: sequence length.
    pub max_t: usize,
    /// Input token ids (b, t).
    pub inputs: B::Tokens,
    /// Target token ids (b, t).
    pub targets: B::Tokens,
    /// wte + wpe (b, t, c).
    pub encoded: Slab<B>,
    /// Per layer: first layernorm output (b, t, c) and its statistics (b, t).
    pub ln1: Slab<B>,
    /// Per layer: mean of the first layernorm.
    pub ln1_mean: Slab<B>,
    /// Per layer: 1/std of the first layernorm.
    pub ln1_rstd: Slab<B>,
    /// Per layer: fused q, k, v (b, t, 3c).
    pub qkv: Slab<B>,
    /// Per layer: attention output before its projection (b, t, c).
    pub atty: Slab<B>,
    /// Per layer: attention probabilities (b, nh, t, t).
    pub att: Slab<B>,
    /// Per layer: attention projection output (b, t, c).
    pub attproj: Slab<B>,
    /// Per layer: residual after attention (b, t, c).
    pub residual2: Slab<B>,
    /// Per layer: second layernorm output (b, t, c).
    pub ln2: Slab<B>,
    /// Per layer: mean of the second layernorm.
    pub ln2_mean: Slab<B>,
    /// Per layer: 1/std of the second layernorm.
    pub ln2_rstd: Slab<B>,
    /// Per layer: MLP up-projection (b, t, 4c).
    pub fch: Slab<B>,
    /// Per layer: GELU of it (b, t, 4c).
    pub fch_gelu: Slab<B>,
    /// Per layer: MLP down-projection (b, t, c).
    pub fcproj: Slab<B>,
    /// Per layer: residual after the MLP (b, t, c): the next layer's input.
    pub residual3: Slab<B>,
    /// Final layernorm output (b, t, c).
    pub lnf: Slab<B>,
    /// Final layernorm mean.
    pub lnf_mean: Slab<B>,
    /// Final layernorm 1/std.
    pub lnf_rstd: Slab<B>,
    /// Logits (b, t, vp); the fused classifier turns them into their gradient in place.
    pub logits: Slab<B>,
    /// Per-position losses (b, t).
    pub losses: Slab<B>,
}

impl<B: Backend> Activations<B> {
    /// Allocates activations for batches of up to `max_b × max_t` tokens.
    pub fn new(backend: &B, config: &Gpt2Config, max_b: usize, max_t: usize) -> Result<Self> {
        let (l, c, bt) = (config.num_layers, config.channels, max_b * max_t);
        let slab = |layers, stride| Slab::new(backend, layers, stride);
        Ok(Self {
            max_b,
            max_t,
            inputs: backend.alloc_tokens(bt)?,
            targets: backend.alloc_tokens(bt)?,
            encoded: slab(1, bt * c)?,
            ln1: slab(l, bt * c)?,
            ln1_mean: slab(l, bt)?,
            ln1_rstd: slab(l, bt)?,
            qkv: slab(l, bt * 3 * c)?,
            atty: slab(l, bt * c)?,
            att: slab(l, max_b * config.num_heads * max_t * max_t)?,
            attproj: slab(l, bt * c)?,
            residual2: slab(l, bt * c)?,
            ln2: slab(l, bt * c)?,
            ln2_mean: slab(l, bt)?,
            ln2_rstd: slab(l, bt)?,
            fch: slab(l, bt * 4 * c)?,
            fch_gelu: slab(l, bt * 4 * c)?,
            fcproj: slab(l, bt * c)?,
            residual3: slab(l, bt * c)?,
            lnf: slab(1, bt * c)?,
            lnf_mean: slab(1, bt)?,
            lnf_rstd: slab(1, bt)?,
            logits: slab(1, bt * config.padded_vocab_size)?,
            losses: slab(1, bt)?,
        })
    }
}

/// Gradients of activations, reused by every layer of the backward pass.
pub struct GradScratch<B: Backend> {
    /// Gradient of the residual stream (b, t, c): the layernorm backwards accumulate into it.
    pub dres: Slab<B>,
    /// Gradient of a layernorm output (b, t, c).
    pub dln: Slab<B>,
    /// Gradient of the attention output (b, t, c).
    pub datty: Slab<B>,
    /// Gradient of the fused q, k, v (b, t, 3c).
    pub dqkv: Slab<B>,
    /// Gradient of the MLP up-projection (b, t, 4c).
    pub dfch: Slab<B>,
    /// Gradient of the GELU output (b, t, 4c).
    pub dfch_gelu: Slab<B>,
}

impl<B: Backend> GradScratch<B> {
    /// Allocates scratch gradients for batches of up to `max_b × max_t` tokens.
    pub fn new(backend: &B, config: &Gpt2Config, max_b: usize, max_t: usize) -> Result<Self> {
        let (c, bt) = (config.channels, max_b * max_t);
        Ok(Self {
            dres: Slab::new(backend, 1, bt * c)?,
            dln: Slab::new(backend, 1, bt * c)?,
            datty: Slab::new(backend, 1, bt * c)?,
            dqkv: Slab::new(backend, 1, bt * 3 * c)?,
            dfch: Slab::new(backend, 1, bt * 4 * c)?,
            dfch_gelu: Slab::new(backend, 1, bt * 4 * c)?,
        })
    }
}
