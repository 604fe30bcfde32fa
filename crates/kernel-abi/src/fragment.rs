//! Which lane and register of a warp holds which element of a tensor-core tile.
//!
//! These are the fragment layouts of the PTX ISA ("Matrix Fragments for mma.m16n8k16 /
//! mma.m16n8k8", "Warp-level matrix load instruction: ldmatrix"), written as `const fn`s so
//! that device code, the host-side tests and the simulator's tests share one statement of
//! them. Notation of the ISA: `group = lane >> 2`, `tig = lane % 4` (thread in group).
//!
//! Register packing: a 32-bit register holding two 16-bit elements keeps the element with the
//! lower index in its low half, so fragment element `i` of a 16-bit operand lives in register
//! `i / 2`, half `i % 2`.

/// A (row, column) position inside a tile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Coord {
    /// Row index.
    pub row: u32,
    /// Column index.
    pub col: u32,
}

impl Coord {
    /// `Coord { row, col }`.
    #[inline]
    pub const fn new(row: u32, col: u32) -> Self {
        Self { row, col }
    }
}

#[inline]
const fn group(lane: u32) -> u32 {
    lane >> 2
}

#[inline]
const fn tig(lane: u32) -> u32 {
    lane % 4
}

/// `mma.m16n8k16` with `.f16`/`.bf16` inputs: element `i` (0..8) of `lane`'s A fragment, as a
/// position in the 16×16 (M×K) tile of A.
#[inline]
pub const fn m16n8k16_a(lane: u32, i: u32) -> Coord {
    let row = if i < 2 || (4 <= i && i < 6) { group(lane) } else { group(lane) + 8 };
    let col = tig(lane) * 2 + (i & 1) + if i >= 4 { 8 } else { 0 };
    Coord::new(row, col)
}

/// `mma.m16n8k16` with `.f16`/`.bf16` inputs: element `i` (0..4) of `lane`'s B fragment, as a
/// position (k, n) in the 16×8 (K×N) tile of B.
#[inline]
pub const fn m16n8k16_b(lane: u32, i: u32) -> Coord {
    let row = tig(lane) * 2 + (i & 1) + if i >= 2 { 8 } else { 0 };
    Coord::new(row, group(lane))
}

/// `mma.m16n8k8` with `.tf32` inputs: element `i` (0..4) of `lane`'s A fragment, as a position
/// in the 16×8 (M×K) tile of A. Each element fills one 32-bit register.
#[inline]
pub const fn m16n8k8_tf32_a(lane: u32, i: u32) -> Coord {
    let row = group(lane) + if i % 2 == 1 { 8 } else { 0 };
    let col = tig(lane) + if i >= 2 { 4 } else { 0 };
    Coord::new(row, col)
}

/// `mma.m16n8k8` with `.tf32` inputs: element `i` (0..2) of `lane`'s B fragment, as a position
/// (k, n) in the 8×8 (K×N) tile of B.
#[inline]
pub const fn m16n8k8_tf32_b(lane: u32, i: u32) -> Coord {
    Coord::new(tig(lane) + 4 * i, group(lane))
}

/// `mma.m16n8kK` with `.f32` accumulators (all the shapes above): element `i` (0..4) of `lane`'s
/// C/D fragment, as a position in the 16×8 (M×N) tile.
#[inline]
pub const fn m16n8_acc(lane: u32, i: u32) -> Coord {
    let row = group(lane) + if i >= 2 { 8 } else { 0 };
    Coord::new(row, tig(lane) * 2 + (i & 1))
}

/// `ldmatrix` (no `.trans`): element `half` (0 = low, 1 = high) of the register that `lane`
/// receives for one 8×8 matrix of 16-bit elements, as a position in that matrix (rows as
/// addressed by the row pointers).
#[inline]
pub const fn ldmatrix(lane: u32, half: u32) -> Coord {
    Coord::new(lane / 4, (lane % 4) * 2 + half)
}

/// `ldmatrix.trans`: like [`ldmatrix`], but the lane receives the transposed matrix, so
/// element `half` of its register is this position of the matrix as stored.
#[inline]
pub const fn ldmatrix_trans(lane: u32, half: u32) -> Coord {
    Coord::new((lane % 4) * 2 + half, lane / 4)
}

/// `ldmatrix .x1/.x2/.x4`: the lane whose address operand names row `row` (0..8) of matrix
/// `matrix` (0..4). Matrix `j` is returned in the `j`-th destination register.
#[inline]
pub const fn ldmatrix_row_provider(matrix: u32, row: u32) -> u32 {
    matrix * 8 + row
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::collections::BTreeSet;

    /// Checks that `f` maps (lane, i) for i < per_lane bijectively onto a rows × cols tile.
    fn assert_bijection(f: fn(u32, u32) -> Coord, per_lane: u32, rows: u32, cols: u32) {
        let mut seen = BTreeSet::new();
        for lane in 0..32 {
            for i in 0..per_lane {
                let c = f(lane, i);
                assert!(c.row < rows && c.col < cols, "lane {lane} elem {i} -> {c:?} outside tile");
                assert!(seen.insert(c), "lane {lane} elem {i} -> {c:?} held twice");
            }
        }
        assert_eq!(seen.len() as u32, rows * cols);
    }

    #[test]
    fn layouts_are_bijections_onto_their_tiles() {
        assert_bijection(m16n8k16_a, 8, 16, 16);
        assert_bijection(m16n8k16_b, 4, 16, 8);
        assert_bijection(m16n8k8_tf32_a, 4, 16, 8);
        assert_bijection(m16n8k8_tf32_b, 2, 8, 8);
        assert_bijection(m16n8_acc, 4, 16, 8);
        assert_bijection(ldmatrix, 2, 8, 8);
        assert_bijection(ldmatrix_trans, 2, 8, 8);
    }

    /// Positions read off the ISA's figures for lanes 0, 5 and 31.
    #[test]
    fn layouts_match_the_isa_figures() {
        let a: [Coord; 8] = core::array::from_fn(|i| m16n8k16_a(0, i as u32));
        let expect = [(0, 0), (0, 1), (8, 0), (8, 1), (0, 8), (0, 9), (8, 8), (8, 9)];
        assert_eq!(a, expect.map(|(r, c)| Coord::new(r, c)));
        // lane 5: group 1, thread-in-group 1
        assert_eq!(m16n8k16_a(5, 0), Coord::new(1, 2));
        assert_eq!(m16n8k16_a(5, 7), Coord::new(9, 11));
        assert_eq!(m16n8k16_a(31, 7), Coord::new(15, 15));
        assert_eq!(m16n8k16_b(5, 0), Coord::new(2, 1));
        assert_eq!(m16n8k16_b(5, 3), Coord::new(11, 1));
        assert_eq!(m16n8k16_b(31, 3), Coord::new(15, 7));
        assert_eq!(m16n8k8_tf32_a(5, 0), Coord::new(1, 1));
        assert_eq!(m16n8k8_tf32_a(5, 1), Coord::new(9, 1));
        assert_eq!(m16n8k8_tf32_a(5, 2), Coord::new(1, 5));
        assert_eq!(m16n8k8_tf32_a(5, 3), Coord::new(9, 5));
        assert_eq!(m16n8k8_tf32_b(5, 0), Coord::new(1, 1));
        assert_eq!(m16n8k8_tf32_b(5, 1), Coord::new(5, 1));
        assert_eq!(m16n8_acc(5, 0), Coord::new(1, 2));
        assert_eq!(m16n8_acc(5, 3), Coord::new(9, 3));
        assert_eq!(m16n8_acc(31, 3), Coord::new(15, 7));
        assert_eq!(ldmatrix(5, 1), Coord::new(1, 3));
        assert_eq!(ldmatrix_trans(5, 1), Coord::new(3, 1));
        assert_eq!(ldmatrix_row_provider(3, 7), 31);
    }

    /// The B fragment of m16n8k16 is the A-fragment pattern of an 8-row tile seen transposed,
    /// which is why `ldmatrix.trans` of a row-major K×N tile (or plain `ldmatrix` of an N×K
    /// one) produces it: register `j` holds the 8×8 block `j` of the 16×8 tile.
    #[test]
    fn ldmatrix_feeds_mma_operands() {
        for lane in 0..32 {
            for i in 0..4 {
                // B stored as N×K (column-major K×N): plain ldmatrix of block j = i / 2 (k rows
                // 8j..8j+8) gives the element at (n = row, k = 8j + col).
                let b = m16n8k16_b(lane, i);
                let l = ldmatrix(lane, i % 2);
                assert_eq!((b.col, b.row), (l.row, 8 * (i / 2) + l.col));
                // B stored as K×N row-major: ldmatrix.trans of block j gives (k = 8j + row, n = col).
                let t = ldmatrix_trans(lane, i % 2);
                assert_eq!((b.row, b.col), (8 * (i / 2) + t.row, t.col));
            }
            for i in 0..8 {
                // A row-major M×K: x4 matrices j = 0..4 are (rows 0-7, k 0-7), (rows 8-15, k 0-7),
                // (rows 0-7, k 8-15), (rows 8-15, k 8-15), in the register order of the fragment.
                let a = m16n8k16_a(lane, i);
                let j = i / 2;
                let l = ldmatrix(lane, i % 2);
                assert_eq!((a.row, a.col), (l.row + 8 * (j % 2), l.col + 8 * (j / 2)));
            }
        }
    }
}
