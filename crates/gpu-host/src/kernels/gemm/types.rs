//! The element types the GEMM variants take and produce, their kernel entries, and the
//! epilogue.

use super::Precision;
use crate::element::DeviceElement;
use crate::view::{DeviceView, DeviceViewMut};
use half::{bf16, f16};
use kernel_abi::Kernel;
use kernel_abi::gemm::{
    BF16_BF16, BF16_F32, F16_F16, F16_F32, GemmKernels, GemmParams, SIMT_F32, SIMT_N64_F32,
    SPLIT_REDUCE_BF16, SPLIT_REDUCE_F16, SPLIT_REDUCE_F32, TF32_F32, simt,
};
use kernel_abi::gemm_wgmma::{
    WGMMA_BF16_BF16, WGMMA_BF16_F32, WGMMA_DE_BF16_BF16, WGMMA_DE_BF16_F32, WGMMA_DE_F16_F16,
    WGMMA_DE_F16_F32, WGMMA_F16_F16, WGMMA_F16_F32, WGMMA_N256_BF16_BF16, WGMMA_N256_BF16_F32,
    WGMMA_N256_F16_F16, WGMMA_N256_F16_F32, WGMMA_N256_TF32_F32, WGMMA_PP_BF16_BF16,
    WGMMA_PP_BF16_F32, WGMMA_PP_F16_F16, WGMMA_PP_F16_F32, WGMMA_PP_TF32_F32, WGMMA_SK_BF16_BF16,
    WGMMA_SK_BF16_F32, WGMMA_SK_F16_F16, WGMMA_SK_F16_F32, WGMMA_TF32_F32, WgmmaKernels, wg,
};

/// The activation of the epilogue, with its pre-activation matrix (same `ldc` and
/// `stride_c` as C, output element type).
#[derive(Debug)]
pub enum Activation<'a, O> {
    /// `C = v`.
    None,
    /// `C = gelu(v)` (tanh approximation), storing `v` to `pre_act` when given.
    Gelu {
        /// Receives the pre-activation, for the backward pass.
        pre_act: Option<DeviceViewMut<'a, O>>,
    },
    /// `C = v · gelu'(pre_act)`: the GELU backward fused into `dX = dY · W`.
    DGelu {
        /// The forward pre-activation.
        pre_act: DeviceView<'a, O>,
    },
}

/// Everything after the product: `v = alpha·A·B + beta·C + bias`, then the activation; and,
/// optionally, the column sums of what was stored.
#[derive(Debug)]
pub struct Epilogue<'a, O> {
    /// Added to every row (length ≥ N), or none.
    pub bias: Option<DeviceView<'a, O>>,
    /// Applied to `v`.
    pub activation: Activation<'a, O>,
    /// Where the f32 column sums of C as stored go, per group of 16 rows (at least
    /// [`super::col_sums_len`] values, laid out as `kernel_abi::gemm::GemmParams::col_sums`);
    /// [`super::bias_grad_from_col_sums`] adds them into a bias gradient. Tensor-core
    /// precisions and unsplit launches only.
    pub col_sums: Option<DeviceViewMut<'a, f32>>,
}

impl<O> Default for Epilogue<'_, O> {
    /// No bias, no activation, no column sums.
    fn default() -> Self {
        Self { bias: None, activation: Activation::None, col_sums: None }
    }
}

/// Output element types: f32, bf16, f16.
pub trait GemmOutput: DeviceElement {
    /// The split-K reduction into this type.
    const SPLIT_REDUCE: Kernel<GemmParams<f32, Self::Abi>>;
}

impl GemmOutput for f32 {
    const SPLIT_REDUCE: Kernel<GemmParams<f32, f32>> = SPLIT_REDUCE_F32;
}
impl GemmOutput for bf16 {
    const SPLIT_REDUCE: Kernel<GemmParams<f32, kernel_abi::Bf16>> = SPLIT_REDUCE_BF16;
}
impl GemmOutput for f16 {
    const SPLIT_REDUCE: Kernel<GemmParams<f32, kernel_abi::F16>> = SPLIT_REDUCE_F16;
}

/// Input element types and the output types their variants produce: `f32 → f32` (FP32 and
/// TF32), `bf16 → bf16 | f32`, `f16 → f16 | f32`.
pub trait GemmTypes<O: GemmOutput>: DeviceElement {
    /// The precision modes that take this input type.
    const PRECISIONS: &'static [Precision];
    /// The entry points of `precision`, if it takes these types; FP32's with the SIMT tile
    /// `simt` (the tensor-core variants have one tile).
    fn kernels(precision: Precision, simt: simt::Tile) -> Option<GemmKernels<Self::Abi, O::Abi>>;
    /// The Hopper (`wgmma`) entries of `precision` with block tiles `tile` (`wg::N128` or
    /// `wg::N256`), if it takes these types.
    fn wgmma_kernels(
        precision: Precision,
        tile: wg::Tile,
    ) -> Option<WgmmaKernels<Self::Abi, O::Abi>>;
}

/// The wgmma families of one input/output pair, by tile (`None` where there is none).
struct ByTile<K> {
    narrow: K,
    wide: K,
    pingpong: K,
    deferred: Option<K>,
    stream_k: Option<K>,
}

impl<K> ByTile<K> {
    /// The family of `tile`: `narrow` for `wg::N128`, `wide` for `wg::N256`, `pingpong` for
    /// `wg::PINGPONG`, `deferred` for `wg::DEFERRED`, `stream_k` for `wg::STREAM_K`.
    fn get(self, tile: wg::Tile) -> Option<K> {
        match tile {
            t if t == wg::N128 => Some(self.narrow),
            t if t == wg::N256 => Some(self.wide),
            t if t == wg::PINGPONG => Some(self.pingpong),
            t if t == wg::DEFERRED => self.deferred,
            t if t == wg::STREAM_K => self.stream_k,
            _ => None,
        }
    }
}

impl GemmTypes<f32> for f32 {
    const PRECISIONS: &'static [Precision] = &[Precision::Fp32, Precision::Tf32];
    fn kernels(precision: Precision, simt: simt::Tile) -> Option<GemmKernels<f32, f32>> {
        match precision {
            Precision::Fp32 if simt == simt::N64 => Some(SIMT_N64_F32),
            Precision::Fp32 => Some(SIMT_F32),
            Precision::Tf32 => Some(TF32_F32),
            _ => None,
        }
    }
    fn wgmma_kernels(precision: Precision, tile: wg::Tile) -> Option<WgmmaKernels<f32, f32>> {
        let families = ByTile {
            narrow: WGMMA_TF32_F32,
            wide: WGMMA_N256_TF32_F32,
            pingpong: WGMMA_PP_TF32_F32,
            deferred: None,
            stream_k: None,
        };
        families.get(tile).filter(|_| precision == Precision::Tf32)
    }
}

macro_rules! half_gemm_types {
    ($in:ty, $precision:ident, $same:ident, $wide:ident,
     [$wg_same:ident $wg_same_n256:ident $wg_same_pp:ident $wg_same_de:ident $wg_same_sk:ident],
     [$wg_wide:ident $wg_wide_n256:ident $wg_wide_pp:ident $wg_wide_de:ident $wg_wide_sk:ident]) => {
        impl GemmTypes<$in> for $in {
            const PRECISIONS: &'static [Precision] = &[Precision::$precision];
            fn kernels(
                precision: Precision,
                _: simt::Tile,
            ) -> Option<GemmKernels<<$in as DeviceElement>::Abi, <$in as DeviceElement>::Abi>> {
                (precision == Precision::$precision).then_some($same)
            }
            fn wgmma_kernels(
                precision: Precision,
                tile: wg::Tile,
            ) -> Option<WgmmaKernels<<$in as DeviceElement>::Abi, <$in as DeviceElement>::Abi>>
            {
                let families = ByTile {
                    narrow: $wg_same,
                    wide: $wg_same_n256,
                    pingpong: $wg_same_pp,
                    deferred: Some($wg_same_de),
                    stream_k: Some($wg_same_sk),
                };
                families.get(tile).filter(|_| precision == Precision::$precision)
            }
        }

        impl GemmTypes<f32> for $in {
            const PRECISIONS: &'static [Precision] = &[Precision::$precision];
            fn kernels(
                precision: Precision,
                _: simt::Tile,
            ) -> Option<GemmKernels<<$in as DeviceElement>::Abi, f32>> {
                (precision == Precision::$precision).then_some($wide)
            }
            fn wgmma_kernels(
                precision: Precision,
                tile: wg::Tile,
            ) -> Option<WgmmaKernels<<$in as DeviceElement>::Abi, f32>> {
                let families = ByTile {
                    narrow: $wg_wide,
                    wide: $wg_wide_n256,
                    pingpong: $wg_wide_pp,
                    deferred: Some($wg_wide_de),
                    stream_k: Some($wg_wide_sk),
                };
                families.get(tile).filter(|_| precision == Precision::$precision)
            }
        }
    };
}

half_gemm_types!(bf16, Bf16, BF16_BF16, BF16_F32,
    [WGMMA_BF16_BF16 WGMMA_N256_BF16_BF16 WGMMA_PP_BF16_BF16 WGMMA_DE_BF16_BF16 WGMMA_SK_BF16_BF16],
    [WGMMA_BF16_F32 WGMMA_N256_BF16_F32 WGMMA_PP_BF16_F32 WGMMA_DE_BF16_F32 WGMMA_SK_BF16_F32]);
half_gemm_types!(f16, Fp16, F16_F16, F16_F32,
    [WGMMA_F16_F16 WGMMA_N256_F16_F16 WGMMA_PP_F16_F16 WGMMA_DE_F16_F16 WGMMA_SK_F16_F16],
    [WGMMA_F16_F32 WGMMA_N256_F16_F32 WGMMA_PP_F16_F32 WGMMA_DE_F16_F32 WGMMA_SK_F16_F32]);
