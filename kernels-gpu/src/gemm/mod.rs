//! GEMM kernels (see `kernel_abi::gemm` for the contract and the tile geometry).
//!
//! - [`simt`]: FP32 SIMT, the fp32 rung, in 128 × 128 and (N ≤ 64) 128 × 64 tiles;
//! - [`mma`]: tensor cores through `mma.sync`, instantiated for TF32 ([`tensor_op::Tf32Op`]),
//!   BF16 and FP16, with [`tile_copy`] (global → shared, `cp.async`), [`fragments`] (shared →
//!   registers, `ldmatrix`) and the shared [`epilogue`];
//! - [`split_reduce`]: the second pass of split-K (sums the K slices, applies the epilogue);
//! - [`bias_grad`]: the column sums of bias gradients, in two passes (row slices, then the
//!   slices added up);
//! - `wgmma` (sm_90a module only): the Hopper kernel, TMA + `wgmma.mma_async`, warp-specialised
//!   and persistent (`kernel_abi::gemm_wgmma`), sharing the epilogue; `wgmma_pingpong` its
//!   ping-pong schedule (each consumer warpgroup multiplies whole tiles, in turns),
//!   `wgmma_deferred` its deferred epilogue (a tile written out during the next one's
//!   mainloop).
//!
//! Every entry point below is one instantiation: variant × A layout × B layout × output type.

pub mod bias_grad;
pub mod epilogue;
pub mod fragments;
pub mod mma;
pub mod simt;
pub mod split_reduce;
pub mod tensor_op;
pub mod tile_copy;
#[cfg(target_feature = "sm_90a")]
pub mod wgmma;
#[cfg(target_feature = "sm_90a")]
pub mod wgmma_deferred;
#[cfg(target_feature = "sm_90a")]
pub mod wgmma_pingpong;
#[cfg(target_feature = "sm_90a")]
pub mod wgmma_stream_k;

use crate::entry::entries;
use kernel_abi::gemm::{BiasGradParams, BiasGradReduceParams, GemmParams};
use kernel_abi::{Bf16, F16};
use tensor_op::{Bf16Op, F16Op, Tf32Op};

entries! { "gemm";
    gemm_simt_rr_f32(GemmParams<f32, f32>) => simt::gemm::<true, false, 128>;
    gemm_simt_rc_f32(GemmParams<f32, f32>) => simt::gemm::<true, true, 128>;
    gemm_simt_cr_f32(GemmParams<f32, f32>) => simt::gemm::<false, false, 128>;
    gemm_simt_cc_f32(GemmParams<f32, f32>) => simt::gemm::<false, true, 128>;
    gemm_simt_n64_rr_f32(GemmParams<f32, f32>) => simt::gemm::<true, false, 64>;
    gemm_simt_n64_rc_f32(GemmParams<f32, f32>) => simt::gemm::<true, true, 64>;
    gemm_simt_n64_cr_f32(GemmParams<f32, f32>) => simt::gemm::<false, false, 64>;
    gemm_simt_n64_cc_f32(GemmParams<f32, f32>) => simt::gemm::<false, true, 64>;
    gemm_tf32_rr_f32(GemmParams<f32, f32>) => mma::gemm::<Tf32Op, f32, true, false>;
    gemm_tf32_rc_f32(GemmParams<f32, f32>) => mma::gemm::<Tf32Op, f32, true, true>;
    gemm_tf32_cr_f32(GemmParams<f32, f32>) => mma::gemm::<Tf32Op, f32, false, false>;
    gemm_tf32_cc_f32(GemmParams<f32, f32>) => mma::gemm::<Tf32Op, f32, false, true>;
    gemm_bf16_rr_bf16(GemmParams<Bf16, Bf16>) => mma::gemm::<Bf16Op, Bf16, true, false>;
    gemm_bf16_rc_bf16(GemmParams<Bf16, Bf16>) => mma::gemm::<Bf16Op, Bf16, true, true>;
    gemm_bf16_cr_bf16(GemmParams<Bf16, Bf16>) => mma::gemm::<Bf16Op, Bf16, false, false>;
    gemm_bf16_cc_bf16(GemmParams<Bf16, Bf16>) => mma::gemm::<Bf16Op, Bf16, false, true>;
    gemm_bf16_rr_f32(GemmParams<Bf16, f32>) => mma::gemm::<Bf16Op, f32, true, false>;
    gemm_bf16_rc_f32(GemmParams<Bf16, f32>) => mma::gemm::<Bf16Op, f32, true, true>;
    gemm_bf16_cr_f32(GemmParams<Bf16, f32>) => mma::gemm::<Bf16Op, f32, false, false>;
    gemm_bf16_cc_f32(GemmParams<Bf16, f32>) => mma::gemm::<Bf16Op, f32, false, true>;
    gemm_f16_rr_f16(GemmParams<F16, F16>) => mma::gemm::<F16Op, F16, true, false>;
    gemm_f16_rc_f16(GemmParams<F16, F16>) => mma::gemm::<F16Op, F16, true, true>;
    gemm_f16_cr_f16(GemmParams<F16, F16>) => mma::gemm::<F16Op, F16, false, false>;
    gemm_f16_cc_f16(GemmParams<F16, F16>) => mma::gemm::<F16Op, F16, false, true>;
    gemm_f16_rr_f32(GemmParams<F16, f32>) => mma::gemm::<F16Op, f32, true, false>;
    gemm_f16_rc_f32(GemmParams<F16, f32>) => mma::gemm::<F16Op, f32, true, true>;
    gemm_f16_cr_f32(GemmParams<F16, f32>) => mma::gemm::<F16Op, f32, false, false>;
    gemm_f16_cc_f32(GemmParams<F16, f32>) => mma::gemm::<F16Op, f32, false, true>;
    gemm_split_reduce_f32(GemmParams<f32, f32>) => split_reduce::split_reduce::<f32>;
    gemm_split_reduce_bf16(GemmParams<f32, Bf16>) => split_reduce::split_reduce::<Bf16>;
    gemm_split_reduce_f16(GemmParams<f32, F16>) => split_reduce::split_reduce::<F16>;
    bias_grad_partials_f32(BiasGradParams<f32>) => bias_grad::bias_grad_partials::<f32>;
    bias_grad_partials_bf16(BiasGradParams<Bf16>) => bias_grad::bias_grad_partials::<Bf16>;
    bias_grad_partials_f16(BiasGradParams<F16>) => bias_grad::bias_grad_partials::<F16>;
    bias_grad_reduce_f32(BiasGradReduceParams<f32>) => bias_grad::bias_grad_reduce::<f32>;
    bias_grad_reduce_bf16(BiasGradReduceParams<Bf16>) => bias_grad::bias_grad_reduce::<Bf16>;
    bias_grad_reduce_f16(BiasGradReduceParams<F16>) => bias_grad::bias_grad_reduce::<F16>;
}

#[cfg(target_feature = "sm_90a")]
mod hopper {
    use super::wgmma::{self, Bf16Wg, F16Wg, K_MAJOR as K, MN_MAJOR as MN, N128, N256, Tf32Wg};
    use super::wgmma_deferred as de;
    use super::wgmma_pingpong as pp;
    use crate::entry::entries;
    use kernel_abi::gemm_wgmma::WgmmaGemmParams;
    use kernel_abi::{Bf16, F16};

    // After the wgmma flavour: the tile width (cooperative kernels), then the majorness of A
    // and of B (`rr`: A K-major, B N-major; `cr`: both M/N-major; ...).
    entries! { "gemm_wgmma";
        gemm_wgmma_bf16_rr_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N128, K, MN, Bf16>;
        gemm_wgmma_bf16_rc_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N128, K, K, Bf16>;
        gemm_wgmma_bf16_cr_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N128, MN, MN, Bf16>;
        gemm_wgmma_bf16_cc_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N128, MN, K, Bf16>;
        gemm_wgmma_bf16_rr_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N128, K, MN, f32>;
        gemm_wgmma_bf16_rc_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N128, K, K, f32>;
        gemm_wgmma_bf16_cr_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N128, MN, MN, f32>;
        gemm_wgmma_bf16_cc_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N128, MN, K, f32>;
        gemm_wgmma_f16_rr_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N128, K, MN, F16>;
        gemm_wgmma_f16_rc_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N128, K, K, F16>;
        gemm_wgmma_f16_cr_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N128, MN, MN, F16>;
        gemm_wgmma_f16_cc_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N128, MN, K, F16>;
        gemm_wgmma_f16_rr_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N128, K, MN, f32>;
        gemm_wgmma_f16_rc_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N128, K, K, f32>;
        gemm_wgmma_f16_cr_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N128, MN, MN, f32>;
        gemm_wgmma_f16_cc_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N128, MN, K, f32>;
        gemm_wgmma_tf32_rc_f32(WgmmaGemmParams<f32, f32>) => wgmma::gemm::<Tf32Wg, N128, K, K, f32>;
        gemm_wgmma_n256_bf16_rr_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N256, K, MN, Bf16>;
        gemm_wgmma_n256_bf16_rc_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N256, K, K, Bf16>;
        gemm_wgmma_n256_bf16_cr_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N256, MN, MN, Bf16>;
        gemm_wgmma_n256_bf16_cc_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm::<Bf16Wg, N256, MN, K, Bf16>;
        gemm_wgmma_n256_bf16_rr_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N256, K, MN, f32>;
        gemm_wgmma_n256_bf16_rc_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N256, K, K, f32>;
        gemm_wgmma_n256_bf16_cr_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N256, MN, MN, f32>;
        gemm_wgmma_n256_bf16_cc_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm::<Bf16Wg, N256, MN, K, f32>;
        gemm_wgmma_n256_f16_rr_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N256, K, MN, F16>;
        gemm_wgmma_n256_f16_rc_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N256, K, K, F16>;
        gemm_wgmma_n256_f16_cr_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N256, MN, MN, F16>;
        gemm_wgmma_n256_f16_cc_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm::<F16Wg, N256, MN, K, F16>;
        gemm_wgmma_n256_f16_rr_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N256, K, MN, f32>;
        gemm_wgmma_n256_f16_rc_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N256, K, K, f32>;
        gemm_wgmma_n256_f16_cr_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N256, MN, MN, f32>;
        gemm_wgmma_n256_f16_cc_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm::<F16Wg, N256, MN, K, f32>;
        gemm_wgmma_n256_tf32_rc_f32(WgmmaGemmParams<f32, f32>) => wgmma::gemm::<Tf32Wg, N256, K, K, f32>;
        gemm_wgmma_pp_bf16_rr_bf16(WgmmaGemmParams<Bf16, Bf16>) => pp::gemm::<Bf16Wg, K, MN, Bf16>;
        gemm_wgmma_pp_bf16_rc_bf16(WgmmaGemmParams<Bf16, Bf16>) => pp::gemm::<Bf16Wg, K, K, Bf16>;
        gemm_wgmma_pp_bf16_rr_f32(WgmmaGemmParams<Bf16, f32>) => pp::gemm::<Bf16Wg, K, MN, f32>;
        gemm_wgmma_pp_bf16_rc_f32(WgmmaGemmParams<Bf16, f32>) => pp::gemm::<Bf16Wg, K, K, f32>;
        gemm_wgmma_pp_f16_rr_f16(WgmmaGemmParams<F16, F16>) => pp::gemm::<F16Wg, K, MN, F16>;
        gemm_wgmma_pp_f16_rc_f16(WgmmaGemmParams<F16, F16>) => pp::gemm::<F16Wg, K, K, F16>;
        gemm_wgmma_pp_f16_rr_f32(WgmmaGemmParams<F16, f32>) => pp::gemm::<F16Wg, K, MN, f32>;
        gemm_wgmma_pp_f16_rc_f32(WgmmaGemmParams<F16, f32>) => pp::gemm::<F16Wg, K, K, f32>;
        gemm_wgmma_pp_tf32_rc_f32(WgmmaGemmParams<f32, f32>) => pp::gemm::<Tf32Wg, K, K, f32>;
        gemm_wgmma_de_bf16_rr_bf16(WgmmaGemmParams<Bf16, Bf16>) => de::gemm::<Bf16Wg, K, MN, Bf16>;
        gemm_wgmma_de_bf16_rc_bf16(WgmmaGemmParams<Bf16, Bf16>) => de::gemm::<Bf16Wg, K, K, Bf16>;
        gemm_wgmma_de_bf16_rr_f32(WgmmaGemmParams<Bf16, f32>) => de::gemm::<Bf16Wg, K, MN, f32>;
        gemm_wgmma_de_bf16_rc_f32(WgmmaGemmParams<Bf16, f32>) => de::gemm::<Bf16Wg, K, K, f32>;
        gemm_wgmma_de_f16_rr_f16(WgmmaGemmParams<F16, F16>) => de::gemm::<F16Wg, K, MN, F16>;
        gemm_wgmma_de_f16_rc_f16(WgmmaGemmParams<F16, F16>) => de::gemm::<F16Wg, K, K, F16>;
        gemm_wgmma_de_f16_rr_f32(WgmmaGemmParams<F16, f32>) => de::gemm::<F16Wg, K, MN, f32>;
        gemm_wgmma_de_f16_rc_f32(WgmmaGemmParams<F16, f32>) => de::gemm::<F16Wg, K, K, f32>;
        gemm_wgmma_sk_bf16_rc_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm_stream_k::<Bf16Wg, K, K, Bf16>;
        gemm_wgmma_sk_bf16_cr_bf16(WgmmaGemmParams<Bf16, Bf16>) => wgmma::gemm_stream_k::<Bf16Wg, MN, MN, Bf16>;
        gemm_wgmma_sk_f16_rc_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm_stream_k::<F16Wg, K, K, F16>;
        gemm_wgmma_sk_f16_cr_f16(WgmmaGemmParams<F16, F16>) => wgmma::gemm_stream_k::<F16Wg, MN, MN, F16>;
        gemm_wgmma_sk_bf16_rc_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm_stream_k::<Bf16Wg, K, K, f32>;
        gemm_wgmma_sk_bf16_cr_f32(WgmmaGemmParams<Bf16, f32>) => wgmma::gemm_stream_k::<Bf16Wg, MN, MN, f32>;
        gemm_wgmma_sk_f16_rc_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm_stream_k::<F16Wg, K, K, f32>;
        gemm_wgmma_sk_f16_cr_f32(WgmmaGemmParams<F16, f32>) => wgmma::gemm_stream_k::<F16Wg, MN, MN, f32>;
    }
}
