//! The 16 parameter tensors of GPT-2, in llm.c's order and layout.

use super::Gpt2Config;
use crate::backend::{Backend, Buf, View, ViewMut};
use crate::error::Result;
use std::ops::{Index, IndexMut, Range};

/// One parameter tensor. Per-layer tensors hold all L layers, layer-major (llm.c's layout):
/// layer l of `Qkvw` is rows `l*3C .. (l+1)*3C` of an (L·3C, C) matrix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// Token embedding (Vp, C), tied to the output classifier.
    Wte,
    /// Position embedding (maxT, C).
    Wpe,
    /// First layernorm weight (L, C).
    Ln1w,
    /// First layernorm bias (L, C).
    Ln1b,
    /// Fused q, k, v projection weight (L, 3C, C).
    Qkvw,
    /// Fused q, k, v projection bias (L, 3C).
    Qkvb,
    /// Attention output projection weight (L, C, C).
    Attprojw,
    /// Attention output projection bias (L, C).
    Attprojb,
    /// Second layernorm weight (L, C).
    Ln2w,
    /// Second layernorm bias (L, C).
    Ln2b,
    /// MLP up-projection weight (L, 4C, C).
    Fcw,
    /// MLP up-projection bias (L, 4C).
    Fcb,
    /// MLP down-projection weight (L, C, 4C).
    Fcprojw,
    /// MLP down-projection bias (L, C).
    Fcprojb,
    /// Final layernorm weight (C).
    Lnfw,
    /// Final layernorm bias (C).
    Lnfb,
}

/// Number of parameter tensors.
pub const NUM_PARAM_TENSORS: usize = 16;

impl ParamKind {
    /// Every tensor, in checkpoint order.
    pub const ALL: [ParamKind; NUM_PARAM_TENSORS] = [
        Self::Wte,
        Self::Wpe,
        Self::Ln1w,
        Self::Ln1b,
        Self::Qkvw,
        Self::Qkvb,
        Self::Attprojw,
        Self::Attprojb,
        Self::Ln2w,
        Self::Ln2b,
        Self::Fcw,
        Self::Fcb,
        Self::Fcprojw,
        Self::Fcprojb,
        Self::Lnfw,
        Self::Lnfb,
    ];

    /// Position in checkpoint order.
    pub fn index(self) -> usize {
        self as usize
    }

    /// llm.c's name of the tensor.
    pub fn name(self) -> &'static str {
        [
            "wte", "wpe", "ln1w", "ln1b", "qkvw", "qkvb", "attprojw", "attprojb", "ln2w", "ln2b",
            "fcw", "fcb", "fcprojw", "fcprojb", "lnfw", "lnfb",
        ][self.index()]
    }

    /// Elements of one layer's slice (the whole tensor for the non-layer tensors), saturating
    /// at `usize::MAX` for dimensions no model has ([`Gpt2Config::validate`] refuses those).
    pub fn layer_len(self, config: &Gpt2Config) -> usize {
        let c = config.channels;
        let times = |a: usize, b: usize| a.saturating_mul(b);
        match self {
            Self::Wte => times(config.padded_vocab_size, c),
            Self::Wpe => times(config.max_seq_len, c),
            Self::Ln1w | Self::Ln1b | Self::Attprojb | Self::Ln2w | Self::Ln2b => c,
            Self::Fcprojb | Self::Lnfw | Self::Lnfb => c,
            Self::Qkvw => times(3, times(c, c)),
            Self::Qkvb => times(3, c),
            Self::Attprojw => times(c, c),
            Self::Fcw | Self::Fcprojw => times(4, times(c, c)),
            Self::Fcb => times(4, c),
        }
    }

    /// Whether the tensor holds one slice per layer.
    pub fn per_layer(self) -> bool {
        !matches!(self, Self::Wte | Self::Wpe | Self::Lnfw | Self::Lnfb)
    }

    /// Number of elements.
    pub fn len(self, config: &Gpt2Config) -> usize {
        let layers = if self.per_layer() { config.num_layers } else { 1 };
        layers.saturating_mul(self.layer_len(config))
    }

    /// The elements of layer `l`.
    pub fn layer(self, config: &Gpt2Config, l: usize) -> Range<usize> {
        let n = self.layer_len(config);
        l * n..(l + 1) * n
    }

    /// Whether the tensor is a weight matrix (embeddings and linear weights): the tensors that
    /// get weight decay by default. Biases and layernorm parameters do not.
    pub fn is_matrix(self) -> bool {
        matches!(
            self,
            Self::Wte | Self::Wpe | Self::Qkvw | Self::Attprojw | Self::Fcw | Self::Fcprojw
        )
    }
}

/// One value per parameter tensor, indexed by [`ParamKind`].
#[derive(Clone, Debug, PartialEq)]
pub struct Params<T>(pub [T; NUM_PARAM_TENSORS]);

impl<T> Params<T> {
    /// Builds each entry from its kind.
    pub fn from_fn(mut f: impl FnMut(ParamKind) -> T) -> Self {
        Self(std::array::from_fn(|i| f(ParamKind::ALL[i])))
    }

    /// Builds each entry from its kind, stopping at the first error.
    pub fn try_from_fn<E>(mut f: impl FnMut(ParamKind) -> Result<T, E>) -> Result<Self, E> {
        let mut items = Vec::with_capacity(NUM_PARAM_TENSORS);
        for kind in ParamKind::ALL {
            items.push(f(kind)?);
        }
        match items.try_into() {
            Ok(array) => Ok(Self(array)),
            Err(_) => unreachable!("exactly NUM_PARAM_TENSORS items were pushed"),
        }
    }

    /// Pairs each entry with its kind, in checkpoint order.
    pub fn iter(&self) -> impl Iterator<Item = (ParamKind, &T)> {
        ParamKind::ALL.into_iter().zip(&self.0)
    }

    /// Pairs each entry mutably with its kind, in checkpoint order.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (ParamKind, &mut T)> {
        ParamKind::ALL.into_iter().zip(&mut self.0)
    }
}

impl<T> Index<ParamKind> for Params<T> {
    type Output = T;
    fn index(&self, kind: ParamKind) -> &T {
        &self.0[kind.index()]
    }
}

impl<T> IndexMut<ParamKind> for Params<T> {
    fn index_mut(&mut self, kind: ParamKind) -> &mut T {
        &mut self.0[kind.index()]
    }
}

/// Where each tensor lives in a parameter arena: the tensors back to back in checkpoint order
/// (the layout of llm.c's checkpoint), so parameters, gradients and AdamW moments are one
/// buffer each.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParamLayout {
    starts: [usize; NUM_PARAM_TENSORS + 1],
    layer_lens: [usize; NUM_PARAM_TENSORS],
}

impl ParamLayout {
    /// The layout of a model of `config`.
    pub fn new(config: &Gpt2Config) -> Self {
        let mut starts = [0; NUM_PARAM_TENSORS + 1];
        for kind in ParamKind::ALL {
            starts[kind.index() + 1] = starts[kind.index()] + kind.len(config);
        }
        Self { starts, layer_lens: ParamKind::ALL.map(|kind| kind.layer_len(config)) }
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.starts[NUM_PARAM_TENSORS]
    }

    /// Whether the model has no parameters.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements of tensor `kind`.
    pub fn range(&self, kind: ParamKind) -> Range<usize> {
        self.starts[kind.index()]..self.starts[kind.index() + 1]
    }

    /// The elements of layer `l` of tensor `kind` (the whole tensor for `l = 0` of the
    /// tensors that are not per layer).
    pub fn layer(&self, kind: ParamKind, l: usize) -> Range<usize> {
        let n = self.layer_lens[kind.index()];
        let start = self.starts[kind.index()] + l * n;
        start..start + n
    }

    /// Copies host tensors into a backend arena laid out as `self`.
    pub fn upload<B: Backend>(
        &self,
        backend: &B,
        tensors: &Params<Vec<f32>>,
        arena: &mut Buf<B, f32>,
    ) -> Result<()> {
        let mut host = Vec::with_capacity(self.len());
        for (_, tensor) in tensors.iter() {
            host.extend_from_slice(tensor);
        }
        backend.upload(&host, ViewMut::all(arena))
    }

    /// The tensors of a backend arena laid out as `self`, copied to the host.
    pub fn download<B: Backend>(
        &self,
        backend: &B,
        arena: &Buf<B, f32>,
    ) -> Result<Params<Vec<f32>>> {
        let mut host = vec![0.0; self.len()];
        backend.download(View::all(arena), &mut host)?;
        Ok(Params::from_fn(|kind| host[self.range(kind)].to_vec()))
    }
}
