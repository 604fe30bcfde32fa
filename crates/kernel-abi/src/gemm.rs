//! GEMM: `C = act(alpha · op(A) · op(B) + beta · C + bias)`, batched, with the tile geometry
//! the device kernels and the host launchers share.
//!
//! # Semantics
//! For every batch `z < batch`, row `m < M` and column `n < N`:
//!
//! ```text
//! v = alpha · Σ_k A[z](m, k) · B[z](k, n)  +  beta · C[z](m, n)  +  bias[n]
//! ACT_NONE : C[z](m, n) = v
//! ACT_GELU : pre_act_store[z](m, n) = v (when not null);  C[z](m, n) = gelu(v)
//! ACT_DGELU: C[z](m, n) = v · gelu'(pre_act_load[z](m, n))
//! ```
//!
//! - `A` is M×K and `B` is K×N; each is row-major or column-major (fixed per entry point):
//!   row-major `A(m, k) = a[m·lda + k]`, column-major `A(m, k) = a[k·lda + m]`, likewise
//!   row-major `B(k, n) = b[k·ldb + n]`, column-major `B(k, n) = b[n·ldb + k]` (an `nn.Linear`
//!   weight `W (N, K)` is a column-major `B`). `C` is always row-major, `C(m, n) = c[m·ldc + n]`.
//! - Batch `z` uses `a + z·stride_a` (likewise `b`, `c`); a stride of 0 broadcasts an input.
//! - `beta == 0` means `C` is not read (it may hold NaN); otherwise `C` is read and updated
//!   in place (`dW += dYᵀ·X` is `beta = 1`).
//! - Null pointers (address 0) mean "absent": `bias` (no bias), `pre_act_store` (GELU without
//!   saving its input). `pre_act_load` must be valid under `ACT_DGELU`.
//! - `bias`, `pre_act_store` and `pre_act_load` have the output element type; the
//!   pre-activation matrices use `ldc` and `stride_c`, like `C`.
//! - gelu is the tanh approximation `0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))` and gelu' its
//!   exact derivative (llm.c's `gelu_forward` / `gelu_backward`), applied to the f32 value `v`
//!   (a stored pre-activation is `v` rounded to the output type).
//!
//! # Split-K
//! With `split_k > 1` the GEMM entry only computes partial products over K slices into an f32
//! workspace, and a second launch (`gemm_split_reduce_<out>`, same parameters) sums the slices
//! in slice order (deterministic) and applies the whole epilogue. It fills the GPU when the
//! output has few tiles and K is long (the weight gradients: M·N = 768·768, K = B·T).
//!
//! The Hopper kernel can also split only the *tail* ([`GemmParams::whole_tiles`]): its
//! persistent grid multiplies the first `whole_tiles` tiles (whole waves of them) over the
//! whole K, through the epilogue, and splits only the remaining tiles, the partial last wave,
//! over K. The fc weight gradient of GPT-2 124M (144 tiles on 132 SMs) then runs as one wave
//! of whole tiles plus twelve tiles in eleven slices each, instead of two waves (12 of 132 SMs
//! busy in the second) or every tile split with eight times the partial sums. The partial sums
//! of the tail go to a compact workspace, one [`TAIL_BM`] × [`TAIL_BN`] block per tail tile
//! and slice (see [`GemmParams::workspace`]), and the reduction covers only those tiles.
//!
//! # Entry points
//! Layouts and the input/output element types are compile-time (one entry per combination):
//! they decide how tiles move through shared memory and which `ldmatrix` form feeds the tensor
//! cores, so a runtime switch would sit in the hot loop. Epilogue options (bias, activation,
//! beta) are runtime fields: they are read once per block, branch uniformly, and cost nothing in
//! the main loop. Entries are named `gemm_<variant>_<a><b>_<out>`, with `<a>`/`<b>` = `r` (row-
//! major) or `c` (column-major): e.g. `gemm_bf16_rc_bf16` is the forward `X·Wᵀ` in bf16.

use crate::kernel::{Kernel, KernelParams, KernelSig, LaunchBounds};
use crate::ptr::{Bf16, DevicePtr, DevicePtrMut, F16};

/// Storage order of an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Consecutive elements of a row are adjacent (`ld` = distance between rows).
    RowMajor,
    /// Consecutive elements of a column are adjacent (`ld` = distance between columns).
    ColMajor,
}

/// `activation`: plain linear epilogue.
pub const ACT_NONE: u32 = 0;
/// `activation`: GELU (tanh approximation), optionally storing its input to `pre_act_store`.
pub const ACT_GELU: u32 = 1;
/// `activation`: multiply by gelu'(`pre_act_load`), the GELU backward.
pub const ACT_DGELU: u32 = 2;

/// Launch parameters of every GEMM entry point (`I`: element type of A and B, `O`: of C, the
/// bias and the pre-activation). See the module docs for the semantics.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct GemmParams<I: Copy, O: Copy> {
    /// A of batch 0.
    pub a: DevicePtr<I>,
    /// B of batch 0.
    pub b: DevicePtr<I>,
    /// C of batch 0 (output; also input when `beta != 0`).
    pub c: DevicePtrMut<O>,
    /// Bias of length N added to every row, or null.
    pub bias: DevicePtr<O>,
    /// Where `ACT_GELU` stores its input (the pre-activation), or null.
    pub pre_act_store: DevicePtrMut<O>,
    /// The pre-activation `ACT_DGELU` differentiates at (null otherwise).
    pub pre_act_load: DevicePtr<O>,
    /// Split-K partial sums (null when `split_k == 1`): the block of slice `s`, batch `z`
    /// writes the raw f32 products of its tile to `workspace[(z·split_k + s)·M·N + m·N + n]`;
    /// [`SPLIT_REDUCE_F32`] and friends then sum the slices and apply the epilogue. With
    /// `whole_tiles > 0`, slice `s` of tail tile `j` (tile `whole_tiles + j` in raster order,
    /// `j < tail = tiles_m·tiles_n − whole_tiles`) of batch `z` is the row-major [`TAIL_BM`] ×
    /// [`TAIL_BN`] block `workspace[((z·tail + j)·split_k + s)·TAIL_BM·TAIL_BN ..]`, element
    /// `(m − m0)·TAIL_BN + (n − n0)` for the tile's origin `(m0, n0)` (rows and columns past
    /// the matrix are neither written nor read).
    pub workspace: DevicePtrMut<f32>,
    /// Column sums of the stored output, or null (the bias gradient of the layer whose output
    /// gradient C is; unsplit launches of the tensor-core kernels only). For batch `z`, group
    /// `g` of [`COL_SUM_ROWS`] rows and column `n < N`: `col_sums[(z·col_sum_groups(M) + g)·N +
    /// n]` is the f32 sum of the group's outputs in column `n` as stored (rounded to `O`), added
    /// as `(s0 + s1) + (s2 + s3)` with `s_r` the sum, from 0.0 in row order, of rows `16g + r +
    /// 4i` (`i < 4`, rows past M skipped). [`BIAS_GRAD_REDUCE_F32`] and friends add the groups.
    pub col_sums: DevicePtrMut<f32>,
    /// Elements between consecutive batches of A.
    pub stride_a: u64,
    /// Elements between consecutive batches of B.
    pub stride_b: u64,
    /// Elements between consecutive batches of C (and of the pre-activation).
    pub stride_c: u64,
    /// Rows of A and C.
    pub m: u32,
    /// Columns of B and C.
    pub n: u32,
    /// Columns of A, rows of B.
    pub k: u32,
    /// Leading dimension of A.
    pub lda: u32,
    /// Leading dimension of B.
    pub ldb: u32,
    /// Leading dimension of C (and of the pre-activation).
    pub ldc: u32,
    /// Scale of the product.
    pub alpha: f32,
    /// Scale of the previous C; 0 means C is not read.
    pub beta: f32,
    /// `ACT_NONE`, `ACT_GELU` or `ACT_DGELU`.
    pub activation: u32,
    /// Tiles in M (`ceil(M / BM)`), for the block rasterization.
    pub tiles_m: u32,
    /// Tiles in N (`ceil(N / BN)`).
    pub tiles_n: u32,
    /// Number of K slices (`grid.y`); 1 = no split-K.
    pub split_k: u32,
    /// K tiles per slice: slice `s` multiplies K tiles `[s·k_tiles_per_split, …)`.
    pub k_tiles_per_split: u32,
    /// With `split_k > 1`, the tiles of each batch (the first in raster order) multiplied over
    /// the whole K and written through the epilogue, the others split (the Hopper kernel's
    /// tail split, see the module docs; with 128 × 128 tiles, [`TAIL_BM`] × [`TAIL_BN`]). 0
    /// splits every tile, the only value the other kernels take; ignored when `split_k == 1`.
    pub whole_tiles: u32,
}

// SAFETY: #[repr(C)] struct of 8 device pointers (8 bytes each), 3 u64s and 14 u32/f32
// fields: 144 bytes, no padding (the test `gemm_params_have_no_padding` checks it).
unsafe impl<I: Copy + 'static, O: Copy + 'static> KernelParams for GemmParams<I, O> {}

/// Bias gradient, first pass: the f32 column sums of each slice of [`bias_grad::SLICE_ROWS`]
/// rows, `partials[s·N + n] = Σ_{m in slice s} dy[m·ld + n]` (grid `(ceil(N /
/// bias_grad::BLOCK_COLS), slices)`, [`bias_grad::THREADS`] threads).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BiasGradParams<I: Copy> {
    /// M×N row-major gradient of the layer output.
    pub dy: DevicePtr<I>,
    /// `slices × N` f32 sums (output).
    pub partials: DevicePtrMut<f32>,
    /// Rows summed over.
    pub m: u32,
    /// Columns.
    pub n: u32,
    /// Leading dimension of `dy`.
    pub ld: u32,
    /// Zero (explicit padding to the pointers' alignment).
    pub _pad: u32,
}

// SAFETY: #[repr(C)] struct of two device pointers and four u32s; no padding.
unsafe impl<I: Copy + 'static> KernelParams for BiasGradParams<I> {}

/// Bias gradient, second pass: `db[n] = beta · db[n] + Σ_s partials[s·N + n]`, the slices
/// added in order (grid `ceil(N / bias_grad::REDUCE_COLS)`, [`bias_grad::REDUCE_THREADS`]
/// threads). `beta == 0` means `db` is not read.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct BiasGradReduceParams<O: Copy> {
    /// `slices × N` f32 sums of the first pass.
    pub partials: DevicePtr<f32>,
    /// N sums (output; also input when `beta != 0`).
    pub db: DevicePtrMut<O>,
    /// Columns.
    pub n: u32,
    /// Row slices of the first pass.
    pub slices: u32,
    /// Scale of the previous `db`.
    pub beta: f32,
    /// Zero (explicit padding to the pointers' alignment).
    pub _pad: u32,
}

// SAFETY: #[repr(C)] struct of two device pointers, two u32s, an f32 and a u32; no padding.
unsafe impl<O: Copy + 'static> KernelParams for BiasGradReduceParams<O> {}

/// Geometry of the two bias-gradient passes.
///
/// The first pass reads `dy` in full rows: a warp's 32 lanes take 8 adjacent columns each, so
/// one load instruction covers 256 columns of one row (512 contiguous bytes for 16-bit
/// types); a block's 8 warps take the rows `w, w + 8, …` of its slice, then add their sums in
/// warp order. The second pass adds the slices in order. The result depends only on the inputs
/// and `(M, N)`: the same bits on every run and every GPU. (The first version, one block per
/// 8 columns walking all M rows, read 16 bytes per row and lane, 32 rows apart, on 96 blocks
/// for N = 768: 42 µs per call for 25 MB on an H100, 600 GB/s.)
pub mod bias_grad {
    /// Threads per block of the first pass (8 warps).
    pub const THREADS: u32 = 256;
    /// Columns per lane of the first pass (one 16-byte vector of 16-bit elements).
    pub const LANE_COLS: u32 = 8;
    /// Columns per block of the first pass (a warp's 32 lanes × 8).
    pub const BLOCK_COLS: u32 = 32 * LANE_COLS;
    /// Rows per slice: per block of the first pass (16 per warp).
    pub const SLICE_ROWS: u32 = 128;
    /// Threads per block of the second pass: 16 groups of 8 columns.
    pub const REDUCE_THREADS: u32 = 128;
    /// Columns per block of the second pass: 8, so that N = 768 makes 96 blocks, 3072 makes
    /// 384 (a group's 8 threads read one 32-byte sector of a slice). With 32 until 2026-11-27,
    /// the attention and fc projections' reductions ran on 24 blocks, fc's and qkv's on 96
    /// and 72, 8–12 µs a call on an H100 for 0.4–12.6 MB. The same additions in the same order.
    pub const REDUCE_COLS: u32 = 8;
    /// Most rows a launch takes: the slices are the first pass's `grid.y` (at most 65535).
    pub const MAX_ROWS: u32 = 65535 * SLICE_ROWS;
    /// Dynamic shared memory of the first pass: each warp's sums of the block's columns.
    pub const PARTIALS_SHARED_BYTES: u32 = THREADS / 32 * BLOCK_COLS * 4;
    /// Dynamic shared memory of the second pass: each thread group's sums of its columns.
    pub const REDUCE_SHARED_BYTES: u32 = REDUCE_THREADS / REDUCE_COLS * REDUCE_COLS * 4;

    /// First-pass blocks that must share an SM: three (85 registers a thread). At ptxas's
    /// own choice, 88, two fitted, and GPT-2's N = 768 (3 × 128 blocks) would have run as
    /// 1.45 waves on 132 SMs.
    pub const BLOCKS_PER_SM: u32 = 3;

    /// Row slices of `m` rows: the first pass's `grid.y`, the workspace's rows.
    pub const fn slices(m: u32) -> u32 {
        m.div_ceil(SLICE_ROWS)
    }
}

/// Block rasterization: tile index `tile` (0..tiles_m·tiles_n) → `(tile_m, tile_n)`.
///
/// Consecutive blocks walk down a band of `group` tile rows, column by column, so the blocks
/// resident at one time share a few tile rows of A and tile columns of B in L2 instead of
/// streaming all of B for every row of tiles. Bijective for any `group >= 1`.
/// Panic-free on the device: a zero divisor (which no valid launch has) yields (0, 0).
#[inline]
pub const fn raster(tile: u32, tiles_m: u32, tiles_n: u32, group: u32) -> (u32, u32) {
    let band = group * tiles_n;
    let first_m = div(tile, band) * group;
    let rows = if tiles_m - first_m < group { tiles_m - first_m } else { group };
    let in_band = rem(tile, band);
    (first_m + rem(in_band, rows), div(in_band, rows))
}

/// `a / b`, or 0 when `b == 0` (no panic path in device code).
#[inline]
pub const fn div(a: u32, b: u32) -> u32 {
    match a.checked_div(b) {
        Some(q) => q,
        None => 0,
    }
}

/// `a % b`, or 0 when `b == 0` (no panic path in device code).
#[inline]
pub const fn rem(a: u32, b: u32) -> u32 {
    match a.checked_rem(b) {
        Some(r) => r,
        None => 0,
    }
}

/// Tile rows per rasterization band.
pub const RASTER_GROUP: u32 = 8;

/// FP32 SIMT kernel geometry: 128-row block tiles 128 or 64 columns wide ([`simt::Tile`]), BK =
/// 8, 8×8 outputs per thread (two 4×4 quadrants half a tile apart in each dimension),
/// double-buffered shared memory, an epilogue staged through shared memory in 4 phases of 32
/// rows.
pub mod simt {
    /// Block tile rows.
    pub const BM: u32 = 128;
    /// K per shared-memory tile.
    pub const BK: u32 = 8;
    /// Floats per shared-memory row: 128 + 4 padding, so the transposing stores of the
    /// K-contiguous operands hit 32 distinct banks. B's rows of the narrow tile use 64 of them.
    pub const ROW_FLOATS: u32 = BM + 4;
    /// Bytes of one operand tile (BK rows).
    pub const TILE_BYTES: u32 = BK * ROW_FLOATS * 4;
    /// Dynamic shared memory: two buffers of the A and B tiles.
    pub const SMEM_BYTES: u32 = 2 * 2 * TILE_BYTES;
    /// The epilogue stages 32 rows of the block tile at a time through the same memory.
    const _: () = assert!(32 * ROW_FLOATS * 4 <= SMEM_BYTES);

    /// A block tile: 128 rows × `bn` columns, one thread per 8×8 outputs.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Tile {
        /// Block tile columns.
        pub bn: u32,
        /// Blocks per SM the launch bounds ask for, which caps the registers per thread.
        pub blocks_per_sm: u32,
    }

    impl Tile {
        /// The tile `bn` columns wide (64 or 128; anything else fails to compile in a const).
        pub const fn of_width(bn: u32) -> Tile {
            match bn {
                64 => N64,
                128 => N128,
                _ => panic!("SIMT tiles are 64 or 128 columns wide"),
            }
        }

        /// Threads per block.
        pub const fn threads(self) -> u32 {
            BM * self.bn / 64
        }

        /// This thread's (row group `ty`, column group `tx`): it owns rows `4ty .. 4ty+4` and
        /// `64+4ty ..`, columns `4tx .. 4tx+4` and `bn/2+4tx ..` of the block tile.
        pub const fn thread_grid(self, tid: u32) -> (u32, u32) {
            (tid / (self.bn / 8), tid % (self.bn / 8))
        }

        /// 4-float copies per thread and k-tile of an operand tile `outer` (M or N) wide.
        pub const fn copies(self, outer: u32) -> u32 {
            outer * BK / 4 / self.threads()
        }

        /// The (outer, k) cell of copy `i` of thread `tid` in an operand tile `outer` wide: 4
        /// consecutive k of one row along K (`along_k`: A row-major, B column-major; 2 threads
        /// per row), else 4 consecutive m or n of one k (`outer / 4` threads per k).
        pub const fn copy_cell(self, along_k: bool, outer: u32, tid: u32, i: u32) -> (u32, u32) {
            let c = tid + i * self.threads();
            if along_k { (c / 2, (c % 2) * 4) } else { (c % (outer / 4) * 4, c / (outer / 4)) }
        }
    }

    /// 128 × 128, 256 threads, two blocks per SM (at most 128 registers): every GEMM with
    /// N > 64.
    pub const N128: Tile = Tile { bn: 128, blocks_per_sm: 2 };
    /// 128 × 64, 128 threads: N ≤ 64 (the attention's products with the head dimension), where
    /// the wide tile would multiply as many zero columns as real ones. Three blocks per SM (at
    /// most 168 registers): its threads copy twice as much of A as the wide tile's, and ptxas
    /// needs about 150 registers for them without spilling.
    pub const N64: Tile = Tile { bn: 64, blocks_per_sm: 3 };

    /// The tile the launcher picks for N columns.
    pub const fn tile_for(n: u32) -> Tile {
        if n <= N64.bn { N64 } else { N128 }
    }
}

/// Tensor-core (`mma.sync`) kernel geometry, shared by the TF32, BF16 and FP16 variants.
///
/// A block computes a 128×128 tile of C with 4 warps (2×2), each a 64×64 warp tile of
/// 4×8 `m16n8` accumulators. K advances 64 bytes per stage (32 16-bit or 16 f32 elements)
/// through a `STAGES`-deep `cp.async` ring.
///
/// # Shared memory
/// Every operand tile is 8 KiB of 16-byte chunks, stored in one of two ways:
///
/// ```text
/// K-major (A row-major, B column-major): 128 rows (m or n) × 4 chunks (64 B of k)
///   physical chunk = chunk ^ ((row >> 1) & 3)
///   row 0: |c0|c1|c2|c3|   row 2: |c1|c0|c3|c2|   row 4: |c2|c3|c0|c1|   row 6: |c3|c2|c1|c0|
///   row 1: |c0|c1|c2|c3|   row 3: |c1|c0|c3|c2|   ...  (two rows fill one 128-byte bank line)
///
/// MN-major, 16-bit (A column-major, B row-major): 32 rows (k) × 16 chunks (128 m or n)
///   physical chunk = chunk ^ (row & 7)
///
/// MN-major, f32 (same, TF32): 16 rows (k) × 32 chunks
///   physical chunk = chunk ^ ((row & 3) << 1)
/// ```
///
/// The XOR permutes chunks inside aligned groups of 8 (one 128-byte line of the 32 banks), so a
/// `cp.async` phase (8 threads writing 8 consecutive chunks of a row) stays conflict-free,
/// while the 8 rows one `ldmatrix` matrix reads (same logical chunk, consecutive rows) land in
/// 8 different bank groups. The f32 MN-major form is read with 32-bit loads (no `ldmatrix`
/// transposes 32-bit elements); its XOR spreads the 4 k-rows a fragment load touches over
/// distinct banks. The unit tests below check all of this.
pub mod tc {
    /// Block tile rows.
    pub const BM: u32 = 128;
    /// Block tile columns.
    pub const BN: u32 = 128;
    /// Bytes of K per stage (BK = 32 for 16-bit inputs, 16 for f32).
    pub const BK_BYTES: u32 = 64;
    /// Warps along M.
    pub const WARPS_M: u32 = 2;
    /// Warps along N.
    pub const WARPS_N: u32 = 2;
    /// Threads per block.
    pub const THREADS: u32 = 32 * WARPS_M * WARPS_N;
    /// Warp tile rows.
    pub const WM: u32 = BM / WARPS_M;
    /// Warp tile columns.
    pub const WN: u32 = BN / WARPS_N;
    /// `cp.async` pipeline depth.
    pub const STAGES: u32 = 4;
    /// Bytes of one operand tile of one stage.
    pub const TILE_BYTES: u32 = BM * BK_BYTES;
    /// Bytes of one stage (A and B tiles).
    pub const STAGE_BYTES: u32 = 2 * TILE_BYTES;
    /// Row stride (in f32 words) of a warp's epilogue staging buffer of 16 rows × 64 columns:
    /// unpadded; the 8-word groups of a row are XOR-swizzled by the row instead, which makes
    /// the fragment stores and the row reads conflict-free (`kernels-gpu`'s
    /// `epilogue::stage_piece`).
    pub const EPI_ROW_WORDS: u32 = WN;
    /// Bytes of one warp's epilogue staging buffer.
    pub const EPI_WARP_BYTES: u32 = 16 * EPI_ROW_WORDS * 4;
    /// Dynamic shared memory per block: the pipeline ring (the epilogue reuses it).
    pub const SMEM_BYTES: u32 = STAGES * STAGE_BYTES;
    const _: () = assert!(SMEM_BYTES >= THREADS / 32 * EPI_WARP_BYTES);

    /// Chunks (16 bytes) per shared-memory row of an operand tile.
    #[inline]
    pub const fn row_chunks(k_major: bool, elem_bytes: u32) -> u32 {
        if k_major { BK_BYTES / 16 } else { BM * elem_bytes / 16 }
    }

    /// Byte offset, inside an operand tile, of logical chunk `chunk` of row `row`.
    ///
    /// `k_major`: rows are m (or n) and chunks cover k; otherwise rows are k and chunks cover
    /// m (or n). `elem_bytes` is 2 or 4.
    #[inline]
    pub const fn tile_offset(k_major: bool, elem_bytes: u32, row: u32, chunk: u32) -> u32 {
        let phys = if k_major {
            chunk ^ ((row >> 1) & 3)
        } else if elem_bytes == 2 {
            chunk ^ (row & 7)
        } else {
            chunk ^ ((row & 3) << 1)
        };
        (row * row_chunks(k_major, elem_bytes) + phys) * 16
    }

    /// Chunks each thread copies per operand tile and stage.
    pub const COPIES_PER_THREAD: u32 = TILE_BYTES / 16 / THREADS;

    /// (row, logical chunk) of the `i`-th chunk (0..COPIES_PER_THREAD) thread `tid` copies
    /// into an operand tile: consecutive threads take consecutive chunks of a row.
    #[inline]
    pub const fn copy_chunk(tid: u32, i: u32, k_major: bool, elem_bytes: u32) -> (u32, u32) {
        let q = tid + THREADS * i;
        let chunks = row_chunks(k_major, elem_bytes);
        (q / chunks, q % chunks)
    }

    /// (row, logical chunk) whose address `lane` supplies to the `ldmatrix.x4` that loads
    /// the A fragment of m16 tile `i` at k-step `kk` from a K-major tile (rows relative to the
    /// warp's first row). 16-bit inputs: one m16n8k16 fragment; f32 inputs: one m16n8k8 TF32
    /// fragment (each 32-bit element is a pair of b16 columns).
    #[inline]
    pub const fn a_ldsm_k_major(lane: u32, i: u32, kk: u32) -> (u32, u32) {
        (16 * i + lane % 8 + 8 * ((lane / 8) % 2), 2 * kk + lane / 16)
    }

    /// As [`a_ldsm_k_major`] for an M-major tile of 16-bit elements, read with `.trans`
    /// (chunks relative to the warp's first column).
    #[inline]
    pub const fn a_ldsm_m_major(lane: u32, i: u32, kk: u32) -> (u32, u32) {
        (16 * kk + lane % 8 + 8 * (lane / 16), 2 * i + (lane / 8) % 2)
    }

    /// (row, logical chunk) whose address `lane` supplies to the `ldmatrix.x4` that loads the
    /// B fragments of n8 tiles `2p` and `2p + 1` at k-step `kk` from a K-major (N×K) tile:
    /// registers 0–1 feed tile `2p`, 2–3 tile `2p + 1`.
    #[inline]
    pub const fn b_ldsm_k_major(lane: u32, p: u32, kk: u32) -> (u32, u32) {
        (16 * p + lane % 8 + 8 * (lane / 16), 2 * kk + (lane / 8) % 2)
    }

    /// As [`b_ldsm_k_major`] for an N-major (K×N) tile of 16-bit elements, read with `.trans`.
    #[inline]
    pub const fn b_ldsm_n_major(lane: u32, p: u32, kk: u32) -> (u32, u32) {
        (16 * kk + lane % 8 + 8 * ((lane / 8) % 2), 2 * p + lane / 16)
    }
}

/// The four layout combinations of one (variant, input, output) family.
#[derive(Clone, Copy, Debug)]
pub struct GemmKernels<I: Copy + 'static, O: Copy + 'static> {
    /// A row-major, B row-major.
    pub rr: Kernel<GemmParams<I, O>>,
    /// A row-major, B column-major.
    pub rc: Kernel<GemmParams<I, O>>,
    /// A column-major, B row-major.
    pub cr: Kernel<GemmParams<I, O>>,
    /// A column-major, B column-major.
    pub cc: Kernel<GemmParams<I, O>>,
}

impl<I: Copy + 'static, O: Copy + 'static> GemmKernels<I, O> {
    /// The entry point for these layouts of A and B.
    #[inline]
    pub const fn get(&self, a: Layout, b: Layout) -> Kernel<GemmParams<I, O>> {
        match (a, b) {
            (Layout::RowMajor, Layout::RowMajor) => self.rr,
            (Layout::RowMajor, Layout::ColMajor) => self.rc,
            (Layout::ColMajor, Layout::RowMajor) => self.cr,
            (Layout::ColMajor, Layout::ColMajor) => self.cc,
        }
    }

    /// Signatures of the four entries.
    #[inline]
    pub const fn sigs(&self) -> [KernelSig; 4] {
        [self.rr.sig(), self.rc.sig(), self.cr.sig(), self.cc.sig()]
    }
}

macro_rules! gemm_family {
    ($(#[$doc:meta])* $name:ident: $in:ty => $out:ty, $prefix:literal, $suffix:literal) => {
        $(#[$doc])*
        pub const $name: GemmKernels<$in, $out> = GemmKernels {
            rr: Kernel::new(concat!($prefix, "_rr_", $suffix)),
            rc: Kernel::new(concat!($prefix, "_rc_", $suffix)),
            cr: Kernel::new(concat!($prefix, "_cr_", $suffix)),
            cc: Kernel::new(concat!($prefix, "_cc_", $suffix)),
        };
    };
}

gemm_family!(/// `gemm_simt_*_f32`: FP32 SIMT (the fp32 rung), 128 × 128 tiles.
    SIMT_F32: f32 => f32, "gemm_simt", "f32");
gemm_family!(/// `gemm_simt_n64_*_f32`: FP32 SIMT, 128 × 64 tiles (N ≤ 64).
    SIMT_N64_F32: f32 => f32, "gemm_simt_n64", "f32");
gemm_family!(/// `gemm_tf32_*_f32`: `mma.sync` m16n8k8 TF32, f32 storage.
    TF32_F32: f32 => f32, "gemm_tf32", "f32");
gemm_family!(/// `gemm_bf16_*_bf16`: `mma.sync` m16n8k16 BF16, bf16 output.
    BF16_BF16: Bf16 => Bf16, "gemm_bf16", "bf16");
gemm_family!(/// `gemm_bf16_*_f32`: `mma.sync` m16n8k16 BF16, f32 output.
    BF16_F32: Bf16 => f32, "gemm_bf16", "f32");
gemm_family!(/// `gemm_f16_*_f16`: `mma.sync` m16n8k16 FP16, f16 output.
    F16_F16: F16 => F16, "gemm_f16", "f16");
gemm_family!(/// `gemm_f16_*_f32`: `mma.sync` m16n8k16 FP16, f32 output.
    F16_F32: F16 => f32, "gemm_f16", "f32");

/// `gemm_split_reduce_f32`: sums split-K partials, applies the epilogue, f32 output.
pub const SPLIT_REDUCE_F32: Kernel<GemmParams<f32, f32>> = Kernel::new("gemm_split_reduce_f32");
/// `gemm_split_reduce_bf16`: as [`SPLIT_REDUCE_F32`], bf16 output.
pub const SPLIT_REDUCE_BF16: Kernel<GemmParams<f32, Bf16>> = Kernel::new("gemm_split_reduce_bf16");
/// `gemm_split_reduce_f16`: as [`SPLIT_REDUCE_F32`], f16 output.
pub const SPLIT_REDUCE_F16: Kernel<GemmParams<f32, F16>> = Kernel::new("gemm_split_reduce_f16");

/// Threads per block of the split-K reduction (each sums one run of 8 columns of one row).
pub const SPLIT_REDUCE_THREADS: u32 = 256;
/// Rows per group of [`GemmParams::col_sums`]: the 16 rows a warp's epilogue writes at once.
pub const COL_SUM_ROWS: u32 = 16;

/// Groups of [`COL_SUM_ROWS`] rows of `m` rows: the rows of [`GemmParams::col_sums`] per batch.
#[inline]
pub const fn col_sum_groups(m: u32) -> u32 {
    m.div_ceil(COL_SUM_ROWS)
}

/// Rows of a tile whose partial sums a tail split keeps ([`GemmParams::whole_tiles`]).
pub const TAIL_BM: u32 = 128;
/// Columns of a tile whose partial sums a tail split keeps.
pub const TAIL_BN: u32 = 128;

/// What one work unit of a split launch with `whole_tiles` computes ([`work_unit`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkUnit {
    /// The batch.
    pub batch: u32,
    /// The tile, in raster order ([`raster`]).
    pub tile: u32,
    /// `None`: the whole K, through the epilogue; `Some(s)`: K slice `s`, as partial sums.
    pub slice: Option<u32>,
}

/// Work unit `u` of a launch over `tiles` tiles per batch, `split_k` slices and `whole_tiles`
/// whole tiles: each batch has [`units_per_batch`] units, the whole tiles first (unit `r` is
/// tile `r`), then the slices of the tail, slice-major (slice `s` of tail tile `j` is unit
/// `whole_tiles + s·tail + j`), so that consecutive units, which run at the same time, are
/// different tiles of the same K range. With `whole_tiles = 0` this is the plain split-K
/// order; with `split_k = 1` every tile is whole.
#[inline]
pub const fn work_unit(u: u32, tiles: u32, split_k: u32, whole_tiles: u32) -> WorkUnit {
    let per_batch = units_per_batch(tiles, split_k, whole_tiles);
    let (batch, r) = (div(u, per_batch), rem(u, per_batch));
    if split_k <= 1 {
        return WorkUnit { batch, tile: r, slice: None };
    }
    if r < whole_tiles {
        return WorkUnit { batch, tile: r, slice: None };
    }
    let tail = tiles.saturating_sub(whole_tiles);
    let r = r - whole_tiles;
    WorkUnit { batch, tile: whole_tiles + rem(r, tail), slice: Some(div(r, tail)) }
}

/// Units per batch of a launch ([`work_unit`]): `whole_tiles + (tiles − whole_tiles)·split_k`
/// (`tiles` when `split_k ≤ 1`); `whole_tiles ≤ tiles`.
#[inline]
pub const fn units_per_batch(tiles: u32, split_k: u32, whole_tiles: u32) -> u32 {
    if split_k <= 1 { tiles } else { whole_tiles + tiles.saturating_sub(whole_tiles) * split_k }
}

/// `bias_grad_partials_f32`.
pub const BIAS_GRAD_PARTIALS_F32: Kernel<BiasGradParams<f32>> =
    Kernel::new("bias_grad_partials_f32");
/// `bias_grad_partials_bf16`.
pub const BIAS_GRAD_PARTIALS_BF16: Kernel<BiasGradParams<Bf16>> =
    Kernel::new("bias_grad_partials_bf16");
/// `bias_grad_partials_f16`.
pub const BIAS_GRAD_PARTIALS_F16: Kernel<BiasGradParams<F16>> =
    Kernel::new("bias_grad_partials_f16");
/// `bias_grad_reduce_f32`: f32 sums out.
pub const BIAS_GRAD_REDUCE_F32: Kernel<BiasGradReduceParams<f32>> =
    Kernel::new("bias_grad_reduce_f32");
/// `bias_grad_reduce_bf16`: bf16 sums out.
pub const BIAS_GRAD_REDUCE_BF16: Kernel<BiasGradReduceParams<Bf16>> =
    Kernel::new("bias_grad_reduce_bf16");
/// `bias_grad_reduce_f16`: f16 sums out.
pub const BIAS_GRAD_REDUCE_F16: Kernel<BiasGradReduceParams<F16>> =
    Kernel::new("bias_grad_reduce_f16");

/// GEMM entries: 2 SIMT and 5 `mma.sync` families of 4 layouts.
const GEMM_ENTRIES: usize = 28;

/// The GEMM entries, the 3 split-K reductions, the 6 bias-gradient entries.
const SIGS: [KernelSig; GEMM_ENTRIES + 9] = {
    let families = [
        SIMT_F32.sigs(),
        SIMT_N64_F32.sigs(),
        TF32_F32.sigs(),
        BF16_BF16.sigs(),
        BF16_F32.sigs(),
        F16_F16.sigs(),
        F16_F32.sigs(),
    ];
    let mut out = [SPLIT_REDUCE_F32.sig(); GEMM_ENTRIES + 9];
    let mut i = 0;
    while i < GEMM_ENTRIES {
        out[i] = families[i / 4][i % 4];
        i += 1;
    }
    let rest = [
        SPLIT_REDUCE_F32.sig(),
        SPLIT_REDUCE_BF16.sig(),
        SPLIT_REDUCE_F16.sig(),
        BIAS_GRAD_PARTIALS_F32.sig(),
        BIAS_GRAD_PARTIALS_BF16.sig(),
        BIAS_GRAD_PARTIALS_F16.sig(),
        BIAS_GRAD_REDUCE_F32.sig(),
        BIAS_GRAD_REDUCE_BF16.sig(),
        BIAS_GRAD_REDUCE_F16.sig(),
    ];
    let mut j = 0;
    while j < rest.len() {
        out[GEMM_ENTRIES + j] = rest[j];
        j += 1;
    }
    out
};

/// Every GEMM entry point.
pub const KERNELS: &[KernelSig] = &SIGS;

/// Launch bounds of the bias gradient's first pass ([`bias_grad::BLOCKS_PER_SM`]).
pub const BIAS_GRAD_LAUNCH_BOUNDS: &[LaunchBounds] = &{
    let (threads, blocks) = (bias_grad::THREADS, bias_grad::BLOCKS_PER_SM);
    [
        LaunchBounds::new(BIAS_GRAD_PARTIALS_F32.sig(), threads, blocks),
        LaunchBounds::new(BIAS_GRAD_PARTIALS_BF16.sig(), threads, blocks),
        LaunchBounds::new(BIAS_GRAD_PARTIALS_F16.sig(), threads, blocks),
    ]
};

/// The SIMT kernels ask for their tile's blocks per SM (two of 256 threads, within 128
/// registers, or three of 128, within 168); the tensor-core kernels for two blocks (128
/// threads, within 255 registers; their 64 KiB of shared memory also fits twice).
pub const LAUNCH_BOUNDS: &[LaunchBounds] = &{
    let mut out = [LaunchBounds { name: "", max_threads: 0, min_blocks_per_sm: 2 }; GEMM_ENTRIES];
    let mut i = 0;
    while i < GEMM_ENTRIES {
        let (threads, blocks) = match i / 4 {
            0 => (simt::N128.threads(), simt::N128.blocks_per_sm),
            1 => (simt::N64.threads(), simt::N64.blocks_per_sm),
            _ => (tc::THREADS, 2),
        };
        out[i] =
            LaunchBounds { name: SIGS[i].name, max_threads: threads, min_blocks_per_sm: blocks };
        i += 1;
    }
    out
};

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::fragment::{self, ldmatrix_row_provider};
    use std::collections::BTreeSet;
    use std::vec::Vec;

    /// The GEMM parameters are 144 bytes of fields without padding, and the Hopper kernels'
    /// add their tensor maps right after them: no padding inside either struct.
    #[test]
    fn gemm_params_have_no_padding() {
        use crate::gemm_wgmma::WgmmaGemmParams;
        use core::mem::{offset_of, size_of};
        type P = GemmParams<f32, f32>;
        let fields = 8 * 8 + 3 * 8 + 14 * 4;
        assert_eq!(size_of::<P>(), fields);
        assert_eq!(offset_of!(P, whole_tiles) + 4, fields);
        type W = WgmmaGemmParams<f32, f32>;
        assert_eq!(offset_of!(W, tmap_a), size_of::<P>());
        assert_eq!(offset_of!(W, units), size_of::<P>() + 16);
    }

    /// Every tile of every batch is one whole unit or `split_k` slices, each exactly once.
    #[test]
    fn work_units_cover_every_tile_once() {
        for tiles in 1..12u32 {
            for split_k in 1..5u32 {
                for whole_tiles in 0..tiles {
                    let per_batch = units_per_batch(tiles, split_k, whole_tiles);
                    let mut seen = BTreeSet::new();
                    for u in 0..2 * per_batch {
                        let w = work_unit(u, tiles, split_k, whole_tiles);
                        assert!(w.batch < 2 && w.tile < tiles);
                        let split = split_k > 1 && w.tile >= whole_tiles;
                        assert_eq!(w.slice.is_some(), split, "{tiles} {split_k} {whole_tiles} {u}");
                        assert!(w.slice.is_none_or(|s| s < split_k));
                        assert!(seen.insert((w.batch, w.tile, w.slice)), "unit {u} repeats");
                    }
                    let slices = if split_k > 1 { split_k } else { 1 };
                    let want = 2 * (whole_tiles.min(per_batch) + (tiles - whole_tiles) * slices);
                    assert_eq!(seen.len() as u32, if split_k > 1 { want } else { 2 * tiles });
                }
            }
        }
        // The tail's slices are slice-major: consecutive units are different tiles.
        let tail: Vec<_> = (5..9).map(|u| work_unit(u, 7, 2, 5)).collect();
        assert_eq!(
            tail.iter().map(|w| (w.tile, w.slice)).collect::<Vec<_>>(),
            [(5, Some(0)), (6, Some(0)), (5, Some(1)), (6, Some(1))]
        );
    }

    /// Shared memory serves 32 banks of 4 bytes; a request is conflict-free when no two
    /// distinct 4-byte words it touches share a bank.
    fn conflict_free(byte_addrs: impl IntoIterator<Item = (u32, u32)>) -> bool {
        let words: BTreeSet<u32> =
            byte_addrs.into_iter().flat_map(|(addr, len)| (addr / 4)..(addr + len) / 4).collect();
        let banks: BTreeSet<u32> = words.iter().map(|w| w % 32).collect();
        banks.len() == words.len()
    }

    const KINDS: [(bool, u32); 4] = [(true, 2), (true, 4), (false, 2), (false, 4)];

    /// An `ldmatrix` row-address formula: (lane, tile, k-step) → (row, chunk).
    type Provider = fn(u32, u32, u32) -> (u32, u32);

    fn rows(k_major: bool, elem_bytes: u32) -> u32 {
        tc::TILE_BYTES / 16 / tc::row_chunks(k_major, elem_bytes)
    }

    #[test]
    fn tile_offsets_are_a_permutation_of_the_tile() {
        for (k_major, eb) in KINDS {
            let chunks = tc::row_chunks(k_major, eb);
            let mut seen = BTreeSet::new();
            for row in 0..rows(k_major, eb) {
                for chunk in 0..chunks {
                    let off = tc::tile_offset(k_major, eb, row, chunk);
                    assert!(off < tc::TILE_BYTES && off.is_multiple_of(16));
                    assert!(seen.insert(off), "k_major={k_major} eb={eb} row={row} chunk={chunk}");
                }
            }
        }
    }

    /// The `cp.async` copy of a stage ([`tc::copy_chunk`]): each group of 8 threads (one
    /// 128-byte phase of a 16-byte-per-thread warp request) must hit 8 distinct bank groups,
    /// and together the threads cover the tile.
    #[test]
    fn cp_async_writes_are_conflict_free() {
        for (k_major, eb) in KINDS {
            let mut covered = BTreeSet::new();
            for i in 0..tc::COPIES_PER_THREAD {
                for phase in 0..tc::THREADS / 8 {
                    let addrs: Vec<(u32, u32)> = (0..8)
                        .map(|j| {
                            let (row, chunk) = tc::copy_chunk(phase * 8 + j, i, k_major, eb);
                            (tc::tile_offset(k_major, eb, row, chunk), 16)
                        })
                        .collect();
                    covered.extend(addrs.iter().map(|a| a.0));
                    assert!(conflict_free(addrs), "k_major={k_major} eb={eb} i={i} phase={phase}");
                }
            }
            assert_eq!(covered.len() as u32, tc::TILE_BYTES / 16);
        }
    }

    /// The device computes chunk `i`'s offset as chunk 0's plus `i` row steps (the swizzle
    /// repeats with the row step): check that this equals [`tc::tile_offset`] of the chunk.
    #[test]
    fn copy_offsets_advance_by_whole_row_steps() {
        for (k_major, eb) in KINDS {
            let chunks = tc::row_chunks(k_major, eb);
            let row_step_bytes = tc::THREADS / chunks * chunks * 16;
            for tid in 0..tc::THREADS {
                let (r0, c0) = tc::copy_chunk(tid, 0, k_major, eb);
                let first = tc::tile_offset(k_major, eb, r0, c0);
                for i in 0..tc::COPIES_PER_THREAD {
                    let (r, c) = tc::copy_chunk(tid, i, k_major, eb);
                    assert_eq!(tc::tile_offset(k_major, eb, r, c), first + i * row_step_bytes);
                }
            }
        }
    }

    /// Every `ldmatrix` the kernels issue reads 8 rows of 16 bytes per matrix; each matrix is
    /// one phase and must be conflict-free.
    #[test]
    fn ldmatrix_reads_are_conflict_free() {
        for kk in 0..2u32 {
            for t in 0..4u32 {
                let cases: [(bool, u32, Provider); 6] = [
                    (true, 2, tc::a_ldsm_k_major),
                    (true, 4, tc::a_ldsm_k_major),
                    (false, 2, tc::a_ldsm_m_major),
                    (true, 2, tc::b_ldsm_k_major),
                    (true, 4, tc::b_ldsm_k_major),
                    (false, 2, tc::b_ldsm_n_major),
                ];
                for (case, (k_major, eb, provider)) in cases.into_iter().enumerate() {
                    for matrix in 0..4 {
                        let addrs = (0..8).map(|r| {
                            let (row, chunk) = provider(ldmatrix_row_provider(matrix, r), t, kk);
                            (tc::tile_offset(k_major, eb, row, chunk), 16)
                        });
                        assert!(conflict_free(addrs), "case {case} kk={kk} t={t} m={matrix}");
                    }
                }
            }
        }
    }

    /// What `ldmatrix.x4` delivers: for `lane`, register `j`, 16-bit half `h`, the (row,
    /// logical chunk, element-in-chunk) of the tile it reads, with rows supplied by `provider`.
    fn ldsm_source(
        provider: impl Fn(u32) -> (u32, u32),
        trans: bool,
        lane: u32,
        j: u32,
        h: u32,
    ) -> (u32, u32, u32) {
        let at =
            if trans { fragment::ldmatrix_trans(lane, h) } else { fragment::ldmatrix(lane, h) };
        let (row, chunk) = provider(ldmatrix_row_provider(j, at.row));
        (row, chunk, at.col)
    }

    /// The address formulas load exactly the mma fragments, for every layout and element size:
    /// (m or n, k) of each fragment element, relative to the tile and k-step origin.
    #[test]
    fn ldmatrix_formulas_produce_the_mma_fragments() {
        for kk in 0..2u32 {
            for t in 0..4u32 {
                for lane in 0..32 {
                    for j in 0..4 {
                        for h in 0..2 {
                            // 16-bit A: register j, half h is fragment element 2j + h.
                            let want = fragment::m16n8k16_a(lane, 2 * j + h);
                            let want = (16 * t + want.row, 16 * kk + want.col);
                            let (r, c, e) =
                                ldsm_source(|l| tc::a_ldsm_k_major(l, t, kk), false, lane, j, h);
                            assert_eq!((r, 8 * c + e), want, "A k-major 16-bit");
                            let (r, c, e) =
                                ldsm_source(|l| tc::a_ldsm_m_major(l, t, kk), true, lane, j, h);
                            assert_eq!((8 * c + e, r), want, "A m-major 16-bit");
                            // 16-bit B: registers 2q, 2q+1 are tile 2t + q's b0, b1.
                            let (q, reg) = (j / 2, j % 2);
                            let b = fragment::m16n8k16_b(lane, 2 * reg + h);
                            let want = (16 * t + 8 * q + b.col, 16 * kk + b.row);
                            let (r, c, e) =
                                ldsm_source(|l| tc::b_ldsm_k_major(l, t, kk), false, lane, j, h);
                            assert_eq!((r, 8 * c + e), want, "B k-major 16-bit");
                            let (r, c, e) =
                                ldsm_source(|l| tc::b_ldsm_n_major(l, t, kk), true, lane, j, h);
                            assert_eq!((8 * c + e, r), want, "B n-major 16-bit");
                        }
                        // f32 (TF32), K-major: the 32-bit word holding b16 columns 2w, 2w + 1.
                        let a = fragment::m16n8k8_tf32_a(lane, j);
                        let (r, c, e) =
                            ldsm_source(|l| tc::a_ldsm_k_major(l, t, kk), false, lane, j, 0);
                        assert_eq!((r, 4 * c + e / 2), (16 * t + a.row, 8 * kk + a.col), "A tf32");
                        let (q, reg) = (j / 2, j % 2);
                        let b = fragment::m16n8k8_tf32_b(lane, reg);
                        let (r, c, e) =
                            ldsm_source(|l| tc::b_ldsm_k_major(l, t, kk), false, lane, j, 0);
                        let want = (16 * t + 8 * q + b.col, 8 * kk + b.row);
                        assert_eq!((r, 4 * c + e / 2), want, "B tf32");
                    }
                }
            }
        }
    }

    /// The TF32 MN-major fragments are read with one 32-bit load per register: lane
    /// (group g, thread-in-group t) reads k-row `8 kk + t (+4)`, column `base + g (+8)`.
    #[test]
    fn tf32_mn_major_fragment_loads_are_conflict_free() {
        for kk in 0..2 {
            for base in (0..128).step_by(8) {
                for k_half in 0..2 {
                    let addrs: Vec<(u32, u32)> = (0..32u32)
                        .map(|lane| {
                            let (g, t) = (lane / 4, lane % 4);
                            let (row, col) = (8 * kk + t + 4 * k_half, base + g);
                            (tc::tile_offset(false, 4, row, col / 4) + (col % 4) * 4, 4)
                        })
                        .collect();
                    assert!(conflict_free(addrs), "kk={kk} base={base} k_half={k_half}");
                }
            }
        }
    }

    #[test]
    fn raster_is_a_bijection() {
        for (tm, tn) in [(1, 1), (1, 7), (7, 1), (8, 3), (9, 5), (17, 13), (128, 6)] {
            for group in [1, 3, 8] {
                let mut seen = BTreeSet::new();
                for tile in 0..tm * tn {
                    let (m, n) = raster(tile, tm, tn, group);
                    assert!(m < tm && n < tn, "{tm}x{tn} g{group}: tile {tile} -> ({m}, {n})");
                    assert!(seen.insert((m, n)));
                }
            }
        }
        // Within a band, consecutive tiles walk down the band's rows first.
        assert_eq!(raster(0, 16, 4, 8), (0, 0));
        assert_eq!(raster(1, 16, 4, 8), (1, 0));
        assert_eq!(raster(8, 16, 4, 8), (0, 1));
        assert_eq!(raster(32, 16, 4, 8), (8, 0));
    }

    /// The SIMT kernels' shared-memory traffic, for both tiles and both operand widths: each
    /// operand's copies cover its tile exactly once; the transposing scalar stores (along K)
    /// are conflict-free per warp, the 16-byte stores and loads per phase of 8 threads (the
    /// fragment loads of A are broadcasts); the epilogue's staging stores likewise.
    #[test]
    fn simt_shared_memory_traffic_is_conflict_free() {
        use simt::{BK, BM, ROW_FLOATS, Tile};
        let at = |k: u32, col: u32| (k * ROW_FLOATS + col) * 4;
        for tile in [simt::N128, simt::N64] {
            for (outer, along_k) in [(BM, true), (BM, false), (tile.bn, true), (tile.bn, false)] {
                let cell = |tid, i| tile.copy_cell(along_k, outer, tid, i);
                let mut covered = BTreeSet::new();
                for i in 0..tile.copies(outer) {
                    for tid in 0..tile.threads() {
                        let (o, k) = cell(tid, i);
                        for e in 0..4 {
                            let (o, k) = if along_k { (o, k + e) } else { (o + e, k) };
                            assert!(o < outer && k < BK, "{tile:?} {outer} {along_k}");
                            assert!(covered.insert((o, k)), "{tile:?} {outer} {along_k}");
                        }
                    }
                    if along_k {
                        for warp in 0..tile.threads() / 32 {
                            for e in 0..4 {
                                let stores = (0..32).map(|l| {
                                    let (o, k) = cell(32 * warp + l, i);
                                    (at(k + e, o), 4)
                                });
                                assert!(conflict_free(stores), "{tile:?} {outer} warp {warp}");
                            }
                        }
                    } else {
                        for phase in 0..tile.threads() / 8 {
                            let stores = (0..8).map(|j| {
                                let (o, k) = cell(8 * phase + j, i);
                                (at(k, o), 16)
                            });
                            assert!(conflict_free(stores), "{tile:?} {outer} phase {phase}");
                        }
                    }
                }
                assert_eq!(covered.len() as u32, outer * BK, "{tile:?} {outer} {along_k}");
            }
            let grid = |tid| Tile::thread_grid(tile, tid);
            for phase in 0..tile.threads() / 8 {
                let threads = || (0..8).map(|j| grid(8 * phase + j));
                for half in [0, tile.bn / 2] {
                    let b = threads().map(|(_, tx)| (at(3, half + 4 * tx), 16));
                    assert!(conflict_free(b), "{tile:?} B fragments, phase {phase}");
                    let staged = threads().map(|(ty, tx)| (at(ty, half + 4 * tx), 16));
                    assert!(conflict_free(staged), "{tile:?} staging, phase {phase}");
                }
                let a: BTreeSet<u32> = threads().map(|(ty, _)| ty).collect();
                assert_eq!(a.len(), 1, "{tile:?}: A fragments broadcast in a phase");
            }
        }
        assert_eq!((simt::tile_for(64), simt::tile_for(65)), (simt::N64, simt::N128));
    }

    #[test]
    fn entry_names_follow_the_scheme() {
        assert_eq!(BF16_BF16.get(Layout::RowMajor, Layout::ColMajor).name(), "gemm_bf16_rc_bf16");
        assert_eq!(SIMT_F32.get(Layout::ColMajor, Layout::RowMajor).name(), "gemm_simt_cr_f32");
        let names: BTreeSet<&str> = KERNELS.iter().map(|s| s.name).collect();
        assert_eq!(names.len(), KERNELS.len());
    }
}
