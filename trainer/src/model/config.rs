//! GPT-2 model dimensions and the named sizes.

use crate::error::{Error, Result};
use crate::report::thousands;

/// GPT-2's BPE vocabulary size (50,000 merges + 256 bytes + `<|endoftext|>`).
pub const GPT2_VOCAB_SIZE: usize = 50_257;
/// GPT-2's context length.
pub const GPT2_MAX_SEQ_LEN: usize = 1024;
/// The padded vocabulary is a multiple of this by default (50,257 -> 50,304).
pub const VOCAB_PAD_MULTIPLE: usize = 128;
/// The most elements one parameter tensor may hold: the kernels' per-tensor tables count in
/// 32 bits (GPT-2 XL's largest, `wte`, holds 80.5M).
pub const MAX_TENSOR_ELEMENTS: usize = u32::MAX as usize;

/// The dimensions of a GPT-2 model (the fields of llm.c's checkpoint header).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Gpt2Config {
    /// Longest sequence the position embedding covers (maxT).
    pub max_seq_len: usize,
    /// Real vocabulary size (V): token ids and softmax columns.
    pub vocab_size: usize,
    /// Rows of the token embedding and columns of the logits (Vp >= V).
    pub padded_vocab_size: usize,
    /// Transformer blocks (L).
    pub num_layers: usize,
    /// Attention heads (NH).
    pub num_heads: usize,
    /// Embedding width (C), a multiple of NH.
    pub channels: usize,
}

/// The named model sizes of `--model`: depth L, heads of 64 channels, GPT-2's vocabulary
/// (V = 50,257, Vp = 50,304) and context (maxT = 1,024). Up to d12 (GPT-2 small, 124M) there
/// are L heads (C = 64 L); d24, d36 and d48 are GPT-2 medium, large and XL, with llm.c's
/// shapes of those names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelSize {
    /// L = 2, NH = 2, C = 128: 6.97M parameters (6.57M of them in the embeddings).
    D2,
    /// L = 4, NH = 4, C = 256: 16.3M parameters.
    D4,
    /// L = 6, NH = 6, C = 384: 30.4M parameters.
    D6,
    /// L = 12, NH = 12, C = 768: 124.5M parameters (GPT-2 small).
    D12,
    /// L = 24, NH = 16, C = 1024: 354.9M parameters (GPT-2 medium).
    D24,
    /// L = 36, NH = 20, C = 1280: 774.1M parameters (GPT-2 large).
    D36,
    /// L = 48, NH = 25, C = 1600: 1,557.7M parameters (GPT-2 XL).
    D48,
}

impl ModelSize {
    /// Number of transformer blocks (L), attention heads (NH) and channels (C = 64 NH).
    pub fn shape(self) -> (usize, usize, usize) {
        let (layers, heads) = match self {
            Self::D2 => (2, 2),
            Self::D4 => (4, 4),
            Self::D6 => (6, 6),
            Self::D12 => (12, 12),
            Self::D24 => (24, 16),
            Self::D36 => (36, 20),
            Self::D48 => (48, 25),
        };
        (layers, heads, 64 * heads)
    }
}

/// `v` rounded up to a multiple of [`VOCAB_PAD_MULTIPLE`].
pub fn padded_vocab(v: usize) -> usize {
    v.div_ceil(VOCAB_PAD_MULTIPLE) * VOCAB_PAD_MULTIPLE
}

impl Gpt2Config {
    /// A model with GPT-2's vocabulary (padded to a multiple of 128) and context length.
    pub fn gpt2_shape(num_layers: usize, num_heads: usize, channels: usize) -> Self {
        Self {
            max_seq_len: GPT2_MAX_SEQ_LEN,
            vocab_size: GPT2_VOCAB_SIZE,
            padded_vocab_size: padded_vocab(GPT2_VOCAB_SIZE),
            num_layers,
            num_heads,
            channels,
        }
    }

    /// The dimensions of a named size.
    pub fn from_size(size: ModelSize) -> Self {
        let (layers, heads, channels) = size.shape();
        Self::gpt2_shape(layers, heads, channels)
    }

    /// Checks the dimensions describe a model this trainer can build (every tensor at most
    /// [`MAX_TENSOR_ELEMENTS`]).
    pub fn validate(&self) -> Result<()> {
        let Self { max_seq_len, vocab_size, padded_vocab_size, num_layers, num_heads, channels } =
            *self;
        let positive = [
            ("max_seq_len (--max-seq-len)", max_seq_len),
            ("vocab_size", vocab_size),
            ("num_layers (--n-layer)", num_layers),
            ("num_heads (--n-head)", num_heads),
            ("channels (--n-embd)", channels),
        ];
        if let Some((name, _)) = positive.iter().find(|(_, v)| *v == 0) {
            return Err(Error::invalid(format!("model {name} must be positive")));
        }
        if channels % num_heads != 0 {
            return Err(Error::invalid(format!(
                "model channels ({channels}) must be a multiple of the number of heads ({num_heads})"
            )));
        }
        if padded_vocab_size < vocab_size {
            return Err(Error::invalid(format!(
                "padded vocabulary ({padded_vocab_size}) is smaller than the vocabulary ({vocab_size})"
            )));
        }
        if vocab_size > 1 << 16 {
            return Err(Error::invalid(format!(
                "vocabulary size {vocab_size} does not fit the u16 tokens of the data shards"
            )));
        }
        let too_large = super::ParamKind::ALL.iter().find(|k| k.len(self) > MAX_TENSOR_ELEMENTS);
        if let Some(kind) = too_large {
            let held = match kind.len(self) {
                usize::MAX => "more than 2^64".to_string(),
                n => thousands(n as f64),
            };
            return Err(Error::invalid(format!(
                "model too large: its {} tensor would hold {held} elements, more than the {} one \
                 tensor may hold",
                kind.name(),
                thousands(MAX_TENSOR_ELEMENTS as f64)
            )));
        }
        Ok(())
    }

    /// Channels per head.
    pub fn head_size(&self) -> usize {
        self.channels / self.num_heads
    }

    /// Number of parameters (the padded rows of `wte` included), saturating at `usize::MAX`
    /// for dimensions that [`Gpt2Config::validate`] refuses.
    pub fn num_params(&self) -> usize {
        super::ParamKind::ALL.iter().map(|k| k.len(self)).fold(0, usize::saturating_add)
    }

    /// The same model with its vocabulary unpadded (`Vp = V`).
    pub fn unpadded(&self) -> Self {
        Self { padded_vocab_size: self.vocab_size, ..*self }
    }

    /// A one-line description: `L12 NH12 C768 maxT1024 V50257 (Vp 50304)`.
    pub fn describe(&self) -> String {
        format!(
            "L{} NH{} C{} maxT{} V{} (Vp {})",
            self.num_layers,
            self.num_heads,
            self.channels,
            self.max_seq_len,
            self.vocab_size,
            self.padded_vocab_size
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(size: ModelSize) -> usize {
        Gpt2Config::from_size(size).num_params()
    }

    #[test]
    fn named_sizes_have_the_documented_parameter_counts() {
        assert_eq!(padded_vocab(50_257), 50_304);
        assert_eq!(params(ModelSize::D12), 124_475_904); // llm.c's count for GPT-2 small
        assert_eq!(params(ModelSize::D2), 6_966_784);
        assert_eq!(params(ModelSize::D4), 16_299_520);
        assert_eq!(params(ModelSize::D6), 30_357_504);
        // llm.c's counts for GPT-2 medium, large and XL (Vp 50,304).
        assert_eq!(params(ModelSize::D24), 354_871_296);
        assert_eq!(params(ModelSize::D36), 774_090_240);
        assert_eq!(params(ModelSize::D48), 1_557_686_400);
    }

    #[test]
    fn validate_rejects_inconsistent_dimensions() {
        let mut config = Gpt2Config::from_size(ModelSize::D2);
        config.num_heads = 3;
        assert!(
            config.validate().unwrap_err().to_string().contains("multiple of the number of heads")
        );
        let mut config = Gpt2Config::from_size(ModelSize::D2);
        config.padded_vocab_size = 100;
        assert!(config.validate().unwrap_err().to_string().contains("padded vocabulary"));
    }

    /// Dimensions whose tensors exceed 2^32 - 1 elements, or whose sizes overflow, are refused
    /// by name before anything is allocated (a crafted checkpoint header cannot wrap the size
    /// check).
    #[test]
    fn validate_refuses_tensors_too_large_and_sizes_that_overflow() {
        let mut config = Gpt2Config::from_size(ModelSize::D2);
        config.channels = 100_000;
        config.num_heads = 1;
        let message = config.validate().unwrap_err().to_string();
        assert!(message.contains("model too large: its wte tensor would hold 5,030,400,000"));
        assert!(message.contains("more than the 4,294,967,295 one tensor may hold"), "{message}");
        let crafted = Gpt2Config {
            max_seq_len: (1 << 31) - 14,
            vocab_size: 50_257,
            padded_vocab_size: (1 << 31) - 1,
            num_layers: 1,
            num_heads: 1,
            channels: 1 << 30,
        };
        assert!(crafted.validate().unwrap_err().to_string().contains("model too large"));
        let huge = Gpt2Config { channels: 1 << 40, num_heads: 1, ..crafted };
        assert_eq!(huge.num_params(), usize::MAX, "saturates instead of wrapping");
        assert!(huge.validate().unwrap_err().to_string().contains("more than 2^64 elements"));
        assert!(Gpt2Config::from_size(ModelSize::D48).validate().is_ok());
    }
}
