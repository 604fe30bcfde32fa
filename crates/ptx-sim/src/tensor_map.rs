//! The simulator's TMA tensor maps: [`encode`] (what [`gpu_host::Device::tensor_map`] returns
//! on the simulator) and `decode` (what `cp.async.bulk.tensor` reads back from global memory).
//!
//! The 128 bytes, little-endian:
//!
//! ```text
//! 0..8    magic b"SIMTMAP1"
//! 8..16   global address             u64
//! 16..24  dim0 (inner, elements)     u64
//! 24..32  dim1 (rows)                u64
//! 32..40  row stride in bytes        u64
//! 40..44  box0 (elements)            u32
//! 44..48  box1 (rows)                u32
//! 48..52  element size in bytes      u32
//! 52..56  swizzle                    u32  0 none, 1 = 32B, 2 = 64B, 3 = 128B (CU_TENSOR_MAP_SWIZZLE_*)
//! 56..60  element type               u32  0 f32, 1 bf16, 2 f16
//! 60..64  rank                       u32  2 or 3
//! 64..72  layers (rank 3; else 0)    u64
//! 72..80  layer stride in bytes      u64
//! 80..128 zero
//! ```

use gpu_host::{TensorMap, TensorMapDesc, TensorMapElem, TensorMapLayers, TensorMapSwizzle};

/// The first 8 bytes of every tensor map the simulator encodes.
const MAGIC: &[u8; 8] = b"SIMTMAP1";

/// Where the fields are (byte offsets).
const ADDRESS: usize = 8;
const DIM0: usize = 16;
const DIM1: usize = 24;
const STRIDE: usize = 32;
const BOX0: usize = 40;
const BOX1: usize = 44;
const ELEM_BYTES: usize = 48;
const SWIZZLE: usize = 52;
const ELEM_TYPE: usize = 56;
const RANK: usize = 60;
const LAYERS: usize = 64;
const LAYER_STRIDE: usize = 72;
/// First byte of the zero tail.
const END: usize = 80;

/// A decoded tensor map, as the TMA instruction uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SimTensorMap {
    /// Device address of element (0, 0).
    pub global_address: u64,
    /// 2, or 3 for a batch of matrices (a box takes one).
    pub rank: u32,
    /// Extent in elements: `[inner, rows, matrices]` (1 matrix at rank 2).
    pub dims: [u64; 3],
    /// Bytes between consecutive rows and matrices (0 at rank 2).
    pub strides_bytes: [u64; 2],
    /// Box of one load in elements: `[inner, rows]`.
    pub box_dims: [u32; 2],
    /// Bytes per element (4 or 2).
    pub elem_bytes: u32,
    /// Swizzle span in bytes: 0 (none), 32, 64 or 128.
    pub swizzle_bytes: u32,
}

fn elem_code(elem: TensorMapElem) -> u32 {
    match elem {
        TensorMapElem::F32 => 0,
        TensorMapElem::Bf16 => 1,
        TensorMapElem::F16 => 2,
    }
}

/// The simulator's encoding of `desc` (not validated: [`gpu_host::Device::tensor_map`]
/// validates first, and `decode` checks again).
pub fn encode(desc: &TensorMapDesc) -> TensorMap {
    let mut bytes = [0u8; 128];
    bytes[..8].copy_from_slice(MAGIC);
    let mut put = |at: usize, field: &[u8]| bytes[at..at + field.len()].copy_from_slice(field);
    put(ADDRESS, &desc.global_address.to_le_bytes());
    put(DIM0, &desc.dims[0].to_le_bytes());
    put(DIM1, &desc.dims[1].to_le_bytes());
    put(STRIDE, &desc.row_stride_bytes.to_le_bytes());
    put(BOX0, &desc.box_dims[0].to_le_bytes());
    put(BOX1, &desc.box_dims[1].to_le_bytes());
    put(ELEM_BYTES, &desc.elem.size_bytes().to_le_bytes());
    put(SWIZZLE, &desc.swizzle.code().to_le_bytes());
    put(ELEM_TYPE, &elem_code(desc.elem).to_le_bytes());
    put(RANK, &desc.rank().to_le_bytes());
    if let Some(layers) = desc.layers {
        put(LAYERS, &layers.count.to_le_bytes());
        put(LAYER_STRIDE, &layers.stride_bytes.to_le_bytes());
    }
    TensorMap { bytes }
}

fn u64_at(bytes: &[u8; 128], at: usize) -> u64 {
    let mut field = [0u8; 8];
    field.copy_from_slice(&bytes[at..at + 8]);
    u64::from_le_bytes(field)
}

fn u32_at(bytes: &[u8; 128], at: usize) -> u32 {
    let mut field = [0u8; 4];
    field.copy_from_slice(&bytes[at..at + 4]);
    u32::from_le_bytes(field)
}

/// Reads a tensor map [`encode`] wrote, checking it as the driver would have
/// ([`TensorMapDesc::validate`]) and that every field is consistent; the error says what is
/// wrong (a map the driver encoded, or any other bytes, fails with "not a tensor map the
/// simulator encoded").
pub(crate) fn decode(bytes: &[u8; 128]) -> Result<SimTensorMap, String> {
    if &bytes[..8] != MAGIC {
        return Err(format!(
            "not a tensor map the simulator encoded (it starts {:02x?}, not {MAGIC:02x?} \
             \"SIMTMAP1\"): encode it with the simulator's Device::tensor_map",
            &bytes[..8]
        ));
    }
    let elem = match u32_at(bytes, ELEM_TYPE) {
        0 => TensorMapElem::F32,
        1 => TensorMapElem::Bf16,
        2 => TensorMapElem::F16,
        code => {
            return Err(format!(
                "tensor map: element type {code} is not 0 (f32), 1 (bf16) or 2 (f16)"
            ));
        }
    };
    let elem_bytes = u32_at(bytes, ELEM_BYTES);
    if elem_bytes != elem.size_bytes() {
        return Err(format!(
            "tensor map: element size {elem_bytes} does not match the element type {elem:?} \
             ({} bytes)",
            elem.size_bytes()
        ));
    }
    let swizzle = match u32_at(bytes, SWIZZLE) {
        0 => TensorMapSwizzle::None,
        1 => TensorMapSwizzle::B32,
        2 => TensorMapSwizzle::B64,
        3 => TensorMapSwizzle::B128,
        code => {
            return Err(format!(
                "tensor map: swizzle {code} is not 0 (none), 1 (32B), 2 (64B) or 3 (128B)"
            ));
        }
    };
    if let Some(at) = bytes[END..].iter().position(|&b| b != 0) {
        return Err(format!("tensor map: reserved byte {} is not zero", END + at));
    }
    let (count, stride) = (u64_at(bytes, LAYERS), u64_at(bytes, LAYER_STRIDE));
    let layers = match u32_at(bytes, RANK) {
        2 if count == 0 && stride == 0 => None,
        2 => return Err(format!("tensor map: rank 2 with layers ({count}, stride {stride})")),
        3 => Some(TensorMapLayers { count, stride_bytes: stride }),
        rank => return Err(format!("tensor map: rank {rank} is not 2 or 3")),
    };
    let desc = TensorMapDesc {
        global_address: u64_at(bytes, ADDRESS),
        elem,
        dims: [u64_at(bytes, DIM0), u64_at(bytes, DIM1)],
        row_stride_bytes: u64_at(bytes, STRIDE),
        box_dims: [u32_at(bytes, BOX0), u32_at(bytes, BOX1)],
        swizzle,
        layers,
    };
    desc.validate().map_err(|e| e.to_string())?;
    let (count, stride) = layers.map_or((1, 0), |l| (l.count, l.stride_bytes));
    Ok(SimTensorMap {
        global_address: desc.global_address,
        rank: desc.rank(),
        dims: [desc.dims[0], desc.dims[1], count],
        strides_bytes: [desc.row_stride_bytes, stride],
        box_dims: desc.box_dims,
        elem_bytes,
        swizzle_bytes: swizzle.span_bytes().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> TensorMapDesc {
        TensorMapDesc {
            global_address: 0x7f00_0000_1000,
            elem: TensorMapElem::Bf16,
            dims: [768, 1000],
            row_stride_bytes: 1600,
            box_dims: [64, 128],
            swizzle: TensorMapSwizzle::B128,
            layers: None,
        }
    }

    /// The bytes of `desc()` with `field` (at `at`) replaced.
    fn with(at: usize, field: &[u8]) -> [u8; 128] {
        let mut bytes = encode(&desc()).bytes;
        bytes[at..at + field.len()].copy_from_slice(field);
        bytes
    }

    fn error(bytes: [u8; 128]) -> String {
        decode(&bytes).expect_err("must be rejected")
    }

    #[test]
    fn roundtrip() {
        let got = decode(&encode(&desc()).bytes).unwrap();
        let want = SimTensorMap {
            global_address: 0x7f00_0000_1000,
            rank: 2,
            dims: [768, 1000, 1],
            strides_bytes: [1600, 0],
            box_dims: [64, 128],
            elem_bytes: 2,
            swizzle_bytes: 128,
        };
        assert_eq!(got, want);
        let f32_plain = TensorMapDesc {
            elem: TensorMapElem::F32,
            swizzle: TensorMapSwizzle::None,
            box_dims: [4, 1],
            row_stride_bytes: 768 * 4,
            ..desc()
        };
        let got = decode(&encode(&f32_plain).bytes).unwrap();
        assert_eq!((got.elem_bytes, got.swizzle_bytes, got.box_dims), (4, 0, [4, 1]));
        for (swizzle, span) in [
            (TensorMapSwizzle::B32, 32),
            (TensorMapSwizzle::B64, 64),
            (TensorMapSwizzle::B128, 128),
        ] {
            let d = TensorMapDesc { swizzle, box_dims: [8, 8], ..desc() };
            assert_eq!(decode(&encode(&d).bytes).unwrap().swizzle_bytes, span);
        }
        let layers = Some(TensorMapLayers { count: 12, stride_bytes: 1_600_000 });
        let got = decode(&encode(&TensorMapDesc { layers, ..desc() }).bytes).unwrap();
        assert_eq!(
            (got.rank, got.dims, got.strides_bytes),
            (3, [768, 1000, 12], [1600, 1_600_000])
        );
    }

    #[test]
    fn layout_is_the_documented_one() {
        let bytes = encode(&desc()).bytes;
        assert_eq!(&bytes[..8], b"SIMTMAP1");
        assert_eq!(u64_at(&bytes, 8), 0x7f00_0000_1000);
        assert_eq!((u64_at(&bytes, 16), u64_at(&bytes, 24), u64_at(&bytes, 32)), (768, 1000, 1600));
        assert_eq!((u32_at(&bytes, 40), u32_at(&bytes, 44)), (64, 128));
        assert_eq!((u32_at(&bytes, 48), u32_at(&bytes, 52), u32_at(&bytes, 56)), (2, 3, 1));
        assert_eq!((u32_at(&bytes, 60), u64_at(&bytes, 64), u64_at(&bytes, 72)), (2, 0, 0));
        assert!(bytes[80..].iter().all(|&b| b == 0));
        let layers = Some(TensorMapLayers { count: 5, stride_bytes: 1 << 21 });
        let bytes = encode(&TensorMapDesc { layers, ..desc() }).bytes;
        assert_eq!((u32_at(&bytes, 60), u64_at(&bytes, 64), u64_at(&bytes, 72)), (3, 5, 1 << 21));
    }

    #[test]
    fn rejects_bytes_it_did_not_encode() {
        let e = error([0; 128]);
        assert!(e.contains("not a tensor map the simulator encoded"), "{e}");
        let e = error(with(0, b"SIMTMAP2"));
        assert!(e.contains("not a tensor map the simulator encoded"), "{e}");
    }

    #[test]
    fn rejects_each_inconsistent_field() {
        let cases: [(usize, &[u8], &str); 14] = [
            (RANK, &4u32.to_le_bytes(), "rank 4"),
            (LAYERS, &1u64.to_le_bytes(), "rank 2 with layers"),
            (LAYER_STRIDE, &16u64.to_le_bytes(), "rank 2 with layers"),
            (ELEM_TYPE, &3u32.to_le_bytes(), "element type 3"),
            (ELEM_BYTES, &4u32.to_le_bytes(), "element size 4"),
            (SWIZZLE, &4u32.to_le_bytes(), "swizzle 4"),
            (END + 5, &[1], "reserved byte 85"),
            (ADDRESS, &0x7f00_0000_1004u64.to_le_bytes(), "`global_address`"),
            (DIM0, &0u64.to_le_bytes(), "`dims`"),
            (DIM1, &((1u64 << 32) + 1).to_le_bytes(), "`dims`"),
            (STRIDE, &1608u64.to_le_bytes(), "`row_stride_bytes`"),
            (BOX1, &0u32.to_le_bytes(), "`box_dims`"),
            (BOX0, &300u32.to_le_bytes(), "`box_dims`"),
            (BOX0, &128u32.to_le_bytes(), "`box_dims`"),
        ];
        for (at, field, want) in cases {
            let e = error(with(at, field));
            assert!(e.contains(want), "patching byte {at}: expected {want:?} in: {e}");
        }
        // A row shorter than dim0 elements.
        let e = error(with(STRIDE, &1520u64.to_le_bytes()));
        assert!(e.contains("`row_stride_bytes`") && e.contains("shorter"), "{e}");
        // Rank 3 with overlapping matrices, or none.
        let mut bytes = with(RANK, &3u32.to_le_bytes());
        bytes[LAYERS..LAYERS + 8].copy_from_slice(&2u64.to_le_bytes());
        bytes[LAYER_STRIDE..LAYER_STRIDE + 8].copy_from_slice(&1600u64.to_le_bytes());
        assert!(error(bytes).contains("shorter than a matrix"));
        bytes[LAYERS..LAYERS + 8].copy_from_slice(&0u64.to_le_bytes());
        assert!(error(bytes).contains("`layers`"));
    }
}
