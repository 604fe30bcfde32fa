//! Model FLOPs utilisation: the model's FLOPs per token over the GPU's peak for the
//! precision in use, from a table of known GPUs (dense tensor-core peaks, no sparsity, and
//! the memory bandwidth that bounds the ops that are not matrix products).

use crate::backend::Precision;
use crate::model::Gpt2Config;

/// Training FLOPs per token of a model at sequence length `t`: 6 per parameter (forward 2,
/// backward 4; the parameters counted with the unpadded vocabulary, since padding is not
/// useful work) plus the attention's `6·L·C·T` (score and value matmuls, forward and
/// backward, causal half counted as in llm.c and nanoGPT: `12·L·C·T / 2`).
pub fn flops_per_token(config: &Gpt2Config, t: usize) -> f64 {
    let params = config.unpadded().num_params();
    let (l, c) = (config.num_layers as f64, config.channels as f64);
    6.0 * params as f64 + 6.0 * l * c * t as f64
}

/// A GPU's peak throughput for one precision.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Peak {
    /// FLOP/s.
    pub flops: f64,
    /// Memory bandwidth, bytes/s (read and written together).
    pub bytes_per_s: f64,
    /// The table row it came from (named in the output).
    pub gpu: &'static str,
}

/// The data sheets' peaks: (name fragment, row name, dense TFLOP/s in fp32 SIMT, tf32, bf16
/// and fp16 with f32 accumulation, memory bandwidth in GB/s). The first row whose fragment
/// the driver's name contains is taken.
const PEAKS: &[(&str, &str, [f64; 4], f64)] = &[
    ("H200", "H200 SXM", [67.0, 494.7, 989.4, 989.4], 4800.0),
    ("H100 PCIe", "H100 PCIe", [51.2, 378.0, 756.0, 756.0], 2000.0),
    ("H100", "H100 SXM", [67.0, 494.7, 989.4, 989.4], 3350.0),
    ("A100-SXM4-80GB", "A100 SXM 80GB", [19.5, 156.0, 312.0, 312.0], 2039.0),
    ("A100 80GB PCIe", "A100 PCIe 80GB", [19.5, 156.0, 312.0, 312.0], 1935.0),
    ("A100", "A100 40GB", [19.5, 156.0, 312.0, 312.0], 1555.0),
    ("L40S", "L40S", [91.6, 183.0, 362.1, 362.1], 864.0),
    ("RTX 4090", "RTX 4090", [82.6, 82.6, 165.2, 165.2], 1008.0),
    ("RTX 3090", "RTX 3090", [35.6, 35.6, 71.0, 71.0], 936.0),
];

/// The peak of the GPU named `name` (as the driver reports it) in `precision`, if known.
pub fn peak(name: &str, precision: Precision) -> Option<Peak> {
    let column = match precision {
        Precision::Fp32 => 0,
        Precision::Tf32 => 1,
        Precision::Bf16 => 2,
        Precision::Fp16 => 3,
    };
    PEAKS.iter().find(|(fragment, ..)| name.contains(fragment)).map(
        |&(_, gpu, tflops, gb_per_s)| Peak {
            flops: tflops[column] * 1e12,
            bytes_per_s: gb_per_s * 1e9,
            gpu,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::ModelSize;

    #[test]
    fn gpt2_small_flops_and_peaks() {
        let config = Gpt2Config::from_size(ModelSize::D12);
        let f = flops_per_token(&config, 1024);
        // 6 × 124,439,808 + 6 × 12 × 768 × 1024 = 803,261,952 FLOPs per token, padded or not.
        assert_eq!(f, 803_261_952.0);
        assert_eq!(flops_per_token(&config.unpadded(), 1024), f);
        let h100 = peak("NVIDIA H100 80GB HBM3", Precision::Bf16).unwrap();
        assert_eq!((h100.gpu, h100.flops, h100.bytes_per_s), ("H100 SXM", 989.4e12, 3.35e12));
        let a100 = |name| peak(name, Precision::Tf32).unwrap().bytes_per_s;
        assert_eq!(a100("NVIDIA A100-SXM4-80GB"), 2.039e12);
        assert_eq!(a100("NVIDIA A100-SXM4-40GB"), 1.555e12);
        assert_eq!(peak("NVIDIA H100 PCIe", Precision::Tf32).unwrap().gpu, "H100 PCIe");
        assert!(peak("some GPU", Precision::Fp32).is_none());
    }
}
