//! TMA tensor maps: the host-side description of a 2-D tensor (or a batch of them) in global
//! memory and of the box one `cp.async.bulk.tensor` copies, which a runtime encodes into a [`TensorMap`]
//! ([`crate::Device::tensor_map`]: `cuTensorMapEncodeTiled` on a GPU, the simulator's own
//! encoding on the simulator).

use crate::device::{Device, DeviceBuffer};
use crate::error::{GpuError, Result};
use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

pub use kernel_abi::gemm_wgmma::TensorMap;

/// Element type of a tensor map.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorMapElem {
    /// 32-bit float (also the storage of TF32 operands: the driver's `FLOAT32`).
    F32,
    /// bfloat16.
    Bf16,
    /// IEEE binary16.
    F16,
}

impl TensorMapElem {
    /// Size of one element in bytes.
    pub fn size_bytes(self) -> u32 {
        match self {
            TensorMapElem::F32 => 4,
            TensorMapElem::Bf16 | TensorMapElem::F16 => 2,
        }
    }
}

/// Shared-memory swizzle of the box a TMA load writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TensorMapSwizzle {
    /// Rows stored as they are.
    None,
    /// 32-byte swizzle (`CU_TENSOR_MAP_SWIZZLE_32B`).
    B32,
    /// 64-byte swizzle (`CU_TENSOR_MAP_SWIZZLE_64B`).
    B64,
    /// 128-byte swizzle (`CU_TENSOR_MAP_SWIZZLE_128B`): 16-byte chunk `c` of row `r` of a
    /// 1024-byte group stored at chunk `c ^ (r % 8)`.
    B128,
}

impl TensorMapSwizzle {
    /// The swizzle span in bytes (the largest inner box extent allowed), or `None` unswizzled.
    pub fn span_bytes(self) -> Option<u32> {
        match self {
            TensorMapSwizzle::None => None,
            TensorMapSwizzle::B32 => Some(32),
            TensorMapSwizzle::B64 => Some(64),
            TensorMapSwizzle::B128 => Some(128),
        }
    }

    /// The driver's `CUtensorMapSwizzle` value (0 none, 1 = 32B, 2 = 64B, 3 = 128B).
    pub fn code(self) -> u32 {
        match self {
            TensorMapSwizzle::None => 0,
            TensorMapSwizzle::B32 => 1,
            TensorMapSwizzle::B64 => 2,
            TensorMapSwizzle::B128 => 3,
        }
    }
}

/// The third (outermost) dimension of a rank-3 tensor map: `count` matrices `stride_bytes`
/// apart, of which a box takes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorMapLayers {
    /// Number of matrices (the extent of dimension 2).
    pub count: u64,
    /// Bytes between consecutive matrices.
    pub stride_bytes: u64,
}

/// A tiled tensor map: `dims[1]` rows of `dims[0]` elements, `row_stride_bytes` apart,
/// starting at `global_address`, read in boxes of `box_dims[1]` rows × `box_dims[0]` elements;
/// with `layers`, a rank-3 map of that many such matrices, one per box (a load names the
/// matrix as its third coordinate). Element strides are 1, there is no interleave, and
/// elements outside the tensor read as zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct TensorMapDesc {
    /// Device address of element (0, 0).
    pub global_address: u64,
    /// Element type.
    pub elem: TensorMapElem,
    /// Extent in elements: `[inner (contiguous), rows]`.
    pub dims: [u64; 2],
    /// Bytes between consecutive rows.
    pub row_stride_bytes: u64,
    /// Box copied by one TMA load, in elements: `[inner, rows]`.
    pub box_dims: [u32; 2],
    /// Shared-memory swizzle of the box.
    pub swizzle: TensorMapSwizzle,
    /// The matrices of a rank-3 map, or `None` for rank 2.
    pub layers: Option<TensorMapLayers>,
}

/// Largest extent of a dimension (`cuTensorMapEncodeTiled`: `globalDim[i] <= 2^32`).
pub const MAX_DIM: u64 = 1 << 32;
/// Row strides must be below this (`globalStrides[i] < 2^40`).
pub const STRIDE_LIMIT: u64 = 1 << 40;
/// Largest box extent (`boxDim[i] <= 256`).
pub const MAX_BOX_DIM: u32 = 256;

const OP: &str = "tensor_map";

impl TensorMapDesc {
    /// The tensor's rank: 2, or 3 with [`TensorMapDesc::layers`].
    pub fn rank(&self) -> u32 {
        if self.layers.is_some() { 3 } else { 2 }
    }

    /// Checks the rules `cuTensorMapEncodeTiled` documents for this (rank 2 or 3, no
    /// interleave) form, so that a GPU and the simulator reject the same descriptors:
    /// `global_address` 16-byte aligned; `dims` and the layer count in 1..=2^32;
    /// `row_stride_bytes` a multiple of 16, below 2^40 and at least one row (`dims[0]`
    /// elements); the layer stride likewise, and at least one matrix (`dims[1]` rows; the
    /// driver's documented form, where each stride includes the one before); `box_dims` in
    /// 1..=256, with `box_dims[0]` elements a multiple of 16 bytes and, when swizzled, at most
    /// the swizzle span. Errors are [`GpuError::InvalidArgument`] (op `tensor_map`) naming the
    /// field.
    pub fn validate(&self) -> Result<()> {
        let bad = |arg, reason: String| Err(GpuError::invalid(OP, arg, reason));
        if !self.global_address.is_multiple_of(16) {
            return bad(
                "global_address",
                format!("{:#x} is not 16-byte aligned", self.global_address),
            );
        }
        for dim in self.dims {
            if dim == 0 || dim > MAX_DIM {
                return bad("dims", format!("{:?}: each must be in 1..=2^32", self.dims));
            }
        }
        let esize = self.elem.size_bytes() as u64;
        let stride = self.row_stride_bytes;
        if !stride.is_multiple_of(16) || stride >= STRIDE_LIMIT {
            return bad(
                "row_stride_bytes",
                format!("{stride} must be a multiple of 16 and below 2^40"),
            );
        }
        if stride < self.dims[0] * esize {
            return bad(
                "row_stride_bytes",
                format!(
                    "{stride} is shorter than a row ({} elements of {esize} bytes)",
                    self.dims[0]
                ),
            );
        }
        if let Some(layers) = self.layers {
            let matrix = self.dims[1].saturating_mul(stride);
            let layer_stride = layers.stride_bytes;
            if layers.count == 0 || layers.count > MAX_DIM {
                return bad("layers", format!("count {} must be in 1..=2^32", layers.count));
            }
            if !layer_stride.is_multiple_of(16) || layer_stride >= STRIDE_LIMIT {
                return bad(
                    "layers",
                    format!("stride {layer_stride} must be a multiple of 16 and below 2^40"),
                );
            }
            if layer_stride < matrix {
                return bad(
                    "layers",
                    format!(
                        "stride {layer_stride} is shorter than a matrix ({} rows of {stride} \
                         bytes)",
                        self.dims[1]
                    ),
                );
            }
        }
        for dim in self.box_dims {
            if dim == 0 || dim > MAX_BOX_DIM {
                return bad("box_dims", format!("{:?}: each must be in 1..=256", self.box_dims));
            }
        }
        let inner_bytes = self.box_dims[0] * esize as u32;
        if !inner_bytes.is_multiple_of(16) {
            return bad(
                "box_dims",
                format!(
                    "the inner extent {} × {esize} bytes is not a multiple of 16 bytes",
                    self.box_dims[0]
                ),
            );
        }
        if let Some(span) = self.swizzle.span_bytes()
            && inner_bytes > span
        {
            return bad(
                "box_dims",
                format!(
                    "the inner extent ({inner_bytes} bytes) exceeds the {span}-byte swizzle span"
                ),
            );
        }
        Ok(())
    }
}

/// Encodes `descs` on `dev` ([`Device::tensor_map`]) and uploads them, 128 bytes each, one
/// after another: the buffer and its (64-byte aligned) address.
pub fn upload_tensor_maps<D: Device>(
    dev: &D,
    descs: &[TensorMapDesc],
) -> Result<(D::Buffer<u64>, u64)> {
    let mut words = Vec::with_capacity(16 * descs.len());
    for desc in descs {
        words.extend_from_slice(&bytemuck::cast::<[u8; 128], [u64; 16]>(
            dev.tensor_map(desc)?.bytes,
        ));
    }
    let buffer = dev.upload(&words)?;
    let addr = buffer.view().addr();
    if !addr.is_multiple_of(align_of::<TensorMap>() as u64) {
        return Err(GpuError::invalid(
            OP,
            "descs",
            format!("the runtime allocated the tensor maps at {addr:#x}, not 64-byte aligned"),
        ));
    }
    Ok((buffer, addr))
}

/// The tensor maps a runtime keeps in device memory ([`Device::with_tensor_maps_in_memory`]),
/// keyed by their descriptors, so that kernels launched again on the same buffers and shapes
/// (every training step's GEMMs) reuse them instead of encoding and uploading them per
/// launch. A descriptor names the address and shape, so a hit is always the right map, even
/// for a buffer freed and reallocated at the same address. Bounded: at
/// [`TensorMapCache::CAPACITY`] entries it starts over. The address is used inside
/// [`TensorMapCache::with`], under the cache's lock: no other thread can start the cache over
/// between the lookup and the launch, and dropping a buffer is ordered after the launches
/// already issued (the [`DeviceBuffer`] contract).
pub struct TensorMapCache<B> {
    entries: Mutex<HashMap<Box<[TensorMapDesc]>, Uploaded<B>>>,
}

/// A buffer of encoded tensor maps and its device address.
type Uploaded<B> = (B, u64);

impl<B> Default for TensorMapCache<B> {
    fn default() -> Self {
        Self { entries: Mutex::new(HashMap::new()) }
    }
}

impl<B> TensorMapCache<B> {
    /// Entries kept (1 MiB of device memory for pairs of maps). GPT-2 training uses about 12
    /// per layer for its linear layers and, with the materialised attention, 16 more (the
    /// per-layer probabilities in the causal blocks of `P·V` and `dV = Pᵀ·dY`) plus 32 shared:
    /// about 1,400 for GPT-2 XL's 48 layers, which 1024 entries would have cleared every step.
    pub const CAPACITY: usize = 4096;

    /// Runs `use_maps` with the address of the maps of `descs` (the cached one, or that of
    /// `upload`'s buffer, which the cache then keeps), holding the cache's lock meanwhile.
    pub fn with<R>(
        &self,
        descs: &[TensorMapDesc],
        upload: impl FnOnce() -> Result<(B, u64)>,
        use_maps: impl FnOnce(u64) -> Result<R>,
    ) -> Result<R> {
        let mut entries = self.entries.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((_, addr)) = entries.get(descs) {
            return use_maps(*addr);
        }
        let (buffer, addr) = upload()?;
        if entries.len() >= Self::CAPACITY {
            entries.clear();
        }
        entries.insert(descs.into(), (buffer, addr));
        use_maps(addr)
    }

    /// Number of cached entries.
    pub fn len(&self) -> usize {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    /// Whether nothing is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> TensorMapDesc {
        TensorMapDesc {
            global_address: 0x7f00_0000_0100,
            elem: TensorMapElem::Bf16,
            dims: [768, 1000],
            row_stride_bytes: 768 * 2,
            box_dims: [64, 128],
            swizzle: TensorMapSwizzle::B128,
            layers: None,
        }
    }

    fn rejected(d: TensorMapDesc) -> &'static str {
        match d.validate() {
            Err(GpuError::InvalidArgument { op: "tensor_map", arg, .. }) => arg,
            other => panic!("{d:?} should be rejected, got {other:?}"),
        }
    }

    #[test]
    fn accepts_the_gemm_boxes() {
        assert!(desc().validate().is_ok());
        let tf32 = TensorMapDesc {
            elem: TensorMapElem::F32,
            row_stride_bytes: 768 * 4,
            box_dims: [32, 128],
            ..desc()
        };
        assert!(tf32.validate().is_ok());
        let edge = TensorMapDesc { dims: [1 << 32, 1], row_stride_bytes: (1 << 40) - 16, ..desc() };
        assert!(edge.validate().is_ok());
        let unswizzled =
            TensorMapDesc { box_dims: [256, 256], swizzle: TensorMapSwizzle::None, ..desc() };
        assert!(unswizzled.validate().is_ok());
    }

    #[test]
    fn each_rule_names_its_field() {
        let d = desc();
        assert_eq!(
            rejected(TensorMapDesc { global_address: 0x7f00_0000_0108, ..d }),
            "global_address"
        );
        assert_eq!(rejected(TensorMapDesc { dims: [0, 4], ..d }), "dims");
        assert_eq!(rejected(TensorMapDesc { dims: [8, (1 << 32) + 1], ..d }), "dims");
        assert_eq!(rejected(TensorMapDesc { row_stride_bytes: 1544, ..d }), "row_stride_bytes");
        assert_eq!(rejected(TensorMapDesc { row_stride_bytes: 1 << 40, ..d }), "row_stride_bytes");
        assert_eq!(rejected(TensorMapDesc { row_stride_bytes: 1520, ..d }), "row_stride_bytes");
        assert_eq!(rejected(TensorMapDesc { box_dims: [64, 0], ..d }), "box_dims");
        assert_eq!(rejected(TensorMapDesc { box_dims: [64, 257], ..d }), "box_dims");
        // 4 bf16 = 8 bytes: not a multiple of 16.
        assert_eq!(
            rejected(TensorMapDesc { box_dims: [4, 8], swizzle: TensorMapSwizzle::None, ..d }),
            "box_dims"
        );
        // 128 bytes exceed the 64-byte swizzle span; 32 bytes fit it.
        assert_eq!(rejected(TensorMapDesc { swizzle: TensorMapSwizzle::B64, ..d }), "box_dims");
        let fits = TensorMapDesc { box_dims: [16, 8], swizzle: TensorMapSwizzle::B32, ..d };
        assert!(fits.validate().is_ok());
        let err = TensorMapDesc { swizzle: TensorMapSwizzle::B32, ..d }.validate().unwrap_err();
        assert!(err.to_string().contains("32-byte swizzle span"), "{err}");
    }

    #[test]
    fn layers_make_a_rank_3_map_of_whole_matrices() {
        let matrix = 1000 * 768 * 2;
        let with = |count, stride_bytes| TensorMapDesc {
            layers: Some(TensorMapLayers { count, stride_bytes }),
            ..desc()
        };
        assert_eq!((desc().rank(), with(12, matrix).rank()), (2, 3));
        assert!(with(12, matrix).validate().is_ok());
        assert!(with(1, matrix + 4096).validate().is_ok());
        assert!(with(1 << 32, matrix).validate().is_ok());
        assert_eq!(rejected(with(0, matrix)), "layers");
        assert_eq!(rejected(with((1 << 32) + 1, matrix)), "layers");
        assert_eq!(rejected(with(2, matrix + 8)), "layers");
        assert_eq!(rejected(with(2, 1 << 40)), "layers");
        // Matrices may not overlap: a stride shorter than 1000 rows.
        let err = with(2, matrix - 16).validate().unwrap_err();
        assert!(err.to_string().contains("shorter than a matrix"), "{err}");
    }

    #[test]
    fn the_cache_uploads_each_set_of_maps_once_and_starts_over_when_full() {
        let cache = TensorMapCache::<u32>::default();
        let uploads = std::cell::Cell::new(0u64);
        let upload = || {
            uploads.set(uploads.get() + 1);
            Ok((0, 0x1000 * uploads.get()))
        };
        let address = |descs: &[TensorMapDesc], upload| cache.with(descs, upload, Ok);
        let (a, b) = (desc(), TensorMapDesc { global_address: 0x7f00_0000_0200, ..desc() });
        assert_eq!(address(&[a, b], &upload).unwrap(), 0x1000);
        assert_eq!(address(&[a, b], &upload).unwrap(), 0x1000);
        assert_eq!(address(&[b, a], &upload).unwrap(), 0x2000);
        assert_eq!(address(&[a], &upload).unwrap(), 0x3000);
        assert_eq!((uploads.get(), cache.len()), (3, 3));
        let failing = || Err(GpuError::invalid(OP, "descs", "no memory"));
        assert!(cache.with(&[b], failing, Ok).is_err());
        assert_eq!(cache.len(), 3);
        let launch_failed = cache.with(&[a], upload, |_| -> Result<()> {
            Err(GpuError::invalid(OP, "launch", "refused"))
        });
        assert!(launch_failed.is_err());
        assert_eq!((uploads.get(), cache.len()), (3, 3));
        for i in 0..TensorMapCache::<u32>::CAPACITY as u64 {
            let d = TensorMapDesc { global_address: 0x10_0000 + 16 * i, ..a };
            address(&[d], &upload).unwrap();
        }
        // Full after the first CAPACITY - 3 of them: cleared once, then refilled.
        assert_eq!(cache.len(), 3);
        let next = 0x1000 * (uploads.get() + 1);
        assert_eq!(address(&[a, b], &upload).unwrap(), next);
    }

    #[test]
    fn swizzle_codes_are_the_drivers() {
        let all = [
            TensorMapSwizzle::None,
            TensorMapSwizzle::B32,
            TensorMapSwizzle::B64,
            TensorMapSwizzle::B128,
        ];
        assert_eq!(all.map(TensorMapSwizzle::code), [0, 1, 2, 3]);
        assert_eq!(all.map(TensorMapSwizzle::span_bytes), [None, Some(32), Some(64), Some(128)]);
    }
}
