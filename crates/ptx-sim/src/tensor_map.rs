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
//! 60..128 zero
//! ```

use gpu_host::{TensorMap, TensorMapDesc, TensorMapElem, TensorMapSwizzle};

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
/// First byte of the zero tail.
const END: usize = 60;

/// A decoded tensor map, as the TMA instruction uses it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SimTensorMap {
    /// Device address of element (0, 0).
    pub global_address: u64,
    /// Extent in elements: `[inner, rows]`.
    pub dims: [u64; 2],
    /// Bytes between consecutive rows.
    pub row_stride_bytes: u64,
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
    let desc = TensorMapDesc {
        global_address: u64_at(bytes, ADDRESS),
        elem,
        dims: [u64_at(bytes, DIM0), u64_at(bytes, DIM1)],
        row_stride_bytes: u64_at(bytes, STRIDE),
        box_dims: [u32_at(bytes, BOX0), u32_at(bytes, BOX1)],
        swizzle,
    };
    desc.validate().map_err(|e| e.to_string())?;
    Ok(SimTensorMap {
        global_address: desc.global_address,
        dims: desc.dims,
        row_stride_bytes: desc.row_stride_bytes,
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
            dims: [768, 1000],
            row_stride_bytes: 1600,
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
    }

    #[test]
    fn layout_is_the_documented_one() {
        let bytes = encode(&desc()).bytes;
        assert_eq!(&bytes[..8], b"SIMTMAP1");
        assert_eq!(u64_at(&bytes, 8), 0x7f00_0000_1000);
        assert_eq!((u64_at(&bytes, 16), u64_at(&bytes, 24), u64_at(&bytes, 32)), (768, 1000, 1600));
        assert_eq!((u32_at(&bytes, 40), u32_at(&bytes, 44)), (64, 128));
        assert_eq!((u32_at(&bytes, 48), u32_at(&bytes, 52), u32_at(&bytes, 56)), (2, 3, 1));
        assert!(bytes[60..].iter().all(|&b| b == 0));
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
        let cases: [(usize, &[u8], &str); 11] = [
            (ELEM_TYPE, &3u32.to_le_bytes(), "element type 3"),
            (ELEM_BYTES, &4u32.to_le_bytes(), "element size 4"),
            (SWIZZLE, &4u32.to_le_bytes(), "swizzle 4"),
            (END + 5, &[1], "reserved byte 65"),
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
    }
}
