//! The rungs of the speed ladder: each adds one change to the one before it.

use crate::backend::Precision;
use crate::backend::ops::AttentionKind;

/// One configuration of the ladder, on our side and on PyTorch's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rung {
    /// Short name (`--rungs`, the report, the PyTorch script's `--rungs`).
    pub id: &'static str,
    /// The change this rung makes, in words.
    pub change: &'static str,
    /// The rung it is measured against (the speed-up column); `None` for the first.
    pub base: Option<&'static str>,
    /// Our arithmetic.
    pub precision: Precision,
    /// Our attention kernel.
    pub attention: AttentionKind,
    /// Whether GELU and the residual adds are fused into the matmuls and layernorms.
    pub fuse: bool,
    /// Whether the vocabulary is padded (50,304 for GPT-2) or left at its size (50,257).
    pub padded_vocab: bool,
    /// What the same rung is in PyTorch (`bench/ladder_torch.py`).
    pub torch: &'static str,
}

/// The ladder, in order: fp32 → tf32 → bf16 → fused → flash → vocab, then fp16 beside the top
/// bf16 rung.
pub const RUNGS: [Rung; 7] = [
    Rung {
        id: "fp32",
        change: "fp32 SIMT matmuls, materialised attention, unfused, vocab V",
        base: None,
        precision: Precision::Fp32,
        attention: AttentionKind::Naive,
        fuse: false,
        padded_vocab: false,
        torch: "fp32 matmuls (TF32 off), eager",
    },
    Rung {
        id: "tf32",
        change: "TF32 tensor-core matmuls",
        base: Some("fp32"),
        precision: Precision::Tf32,
        attention: AttentionKind::Naive,
        fuse: false,
        padded_vocab: false,
        torch: "set_float32_matmul_precision('high')",
    },
    Rung {
        id: "bf16",
        change: "bf16 activations and working weights (f32 master weights)",
        base: Some("tf32"),
        precision: Precision::Bf16,
        attention: AttentionKind::Naive,
        fuse: false,
        padded_vocab: false,
        torch: "autocast bf16",
    },
    Rung {
        id: "fused",
        change: "GELU fused into the matmuls, residual adds into the layernorms",
        base: Some("bf16"),
        precision: Precision::Bf16,
        attention: AttentionKind::Naive,
        fuse: true,
        padded_vocab: false,
        torch: "torch.compile",
    },
    Rung {
        id: "flash",
        change: "flash attention",
        base: Some("fused"),
        precision: Precision::Bf16,
        attention: AttentionKind::Flash,
        fuse: true,
        padded_vocab: false,
        torch: "scaled_dot_product_attention",
    },
    Rung {
        id: "vocab",
        change: "vocabulary padded to a multiple of 128 (GPT-2: 50,257 → 50,304)",
        base: Some("flash"),
        precision: Precision::Bf16,
        attention: AttentionKind::Flash,
        fuse: true,
        padded_vocab: true,
        torch: "vocab_size 50304",
    },
    Rung {
        id: "fp16",
        change: "fp16 with dynamic loss scaling instead of bf16",
        base: Some("vocab"),
        precision: Precision::Fp16,
        attention: AttentionKind::Flash,
        fuse: true,
        padded_vocab: true,
        torch: "autocast fp16 + GradScaler",
    },
];

/// The rung named `id`.
pub fn rung(id: &str) -> Option<&'static Rung> {
    RUNGS.iter().find(|r| r.id == id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_rung_changes_one_thing_from_its_base() {
        for r in &RUNGS[1..] {
            let base = rung(r.base.unwrap()).unwrap();
            let changes = [
                r.precision != base.precision,
                r.attention != base.attention,
                r.fuse != base.fuse,
                r.padded_vocab != base.padded_vocab,
            ];
            assert_eq!(changes.iter().filter(|&&c| c).count(), 1, "{} vs {}", r.id, base.id);
        }
        assert!(RUNGS[0].base.is_none());
    }
}
