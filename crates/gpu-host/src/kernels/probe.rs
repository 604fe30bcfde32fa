//! Launchers of the instruction probes (see `kernel_abi::probe`), used by the tests that pin
//! fragment layouts and instruction semantics on a GPU and in the simulator.

use super::{check_aligned, check_len};
use crate::device::{Device, LaunchConfig};
use crate::error::{GpuError, Result};
use crate::view::{DeviceView, DeviceViewMut};
use kernel_abi::probe::{
    CpAsyncProbeParams, LdmatrixProbeParams, MmaProbeParams, PROBE_CP_ASYNC, PROBE_LDMATRIX,
    PROBE_MMA_BF16, PROBE_MMA_F16, PROBE_MMA_TF32, PROBE_WARP, WarpProbeParams,
};

/// Which tensor-core instruction [`mma`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaKind {
    /// m16n8k16, bf16 inputs.
    Bf16,
    /// m16n8k16, f16 inputs.
    F16,
    /// m16n8k8, tf32 inputs (f32 values, rounded by the kernel).
    Tf32,
}

impl MmaKind {
    /// (rows of A = 16, K) of the instruction.
    pub fn k(self) -> usize {
        match self {
            MmaKind::Bf16 | MmaKind::F16 => 16,
            MmaKind::Tf32 => 8,
        }
    }
}

const WARP: LaunchConfig = LaunchConfig { grid: (1, 1, 1), block: (32, 1, 1), shared_mem_bytes: 0 };

/// One `mma.sync` on a single tile: `d = a · b + c`.
///
/// `a` is 16×K row-major and `b` is 8×K (B column-major), both as 32-bit words: for the
/// 16-bit kinds two elements per word (K = 16, so 16·16/2 and 8·16/2 words), for tf32 one f32
/// per word (K = 8). `c` and `d` are 16×8 f32, row-major.
pub fn mma<D: Device>(
    dev: &D,
    kind: MmaKind,
    a: DeviceView<'_, u32>,
    b: DeviceView<'_, u32>,
    c: DeviceView<'_, f32>,
    mut d: DeviceViewMut<'_, f32>,
) -> Result<()> {
    let per_word = if kind == MmaKind::Tf32 { 1 } else { 2 };
    check_len("probe_mma", "a", a.len(), 16 * kind.k() / per_word, "16×K tile")?;
    check_len("probe_mma", "b", b.len(), 8 * kind.k() / per_word, "8×K tile")?;
    check_len("probe_mma", "c", c.len(), 128, "16×8 tile")?;
    check_len("probe_mma", "d", d.len(), 128, "16×8 tile")?;
    let kernel = match kind {
        MmaKind::Bf16 => PROBE_MMA_BF16,
        MmaKind::F16 => PROBE_MMA_F16,
        MmaKind::Tf32 => PROBE_MMA_TF32,
    };
    let params = MmaProbeParams { a: a.ptr(), b: b.ptr(), c: c.ptr(), d: d.ptr() };
    // SAFETY: all four tiles have the sizes the probe reads and writes.
    unsafe { dev.launch(kernel, WARP, params) }
}

/// `ldmatrix` with `matrices` (1, 2 or 4) 8×8 matrices, optionally `.trans`: `src` is 256
/// 16-bit words (32 rows of 8), `out` receives 4 words per lane (unused ones `u32::MAX`).
pub fn ldmatrix<D: Device>(
    dev: &D,
    matrices: u32,
    trans: bool,
    src: DeviceView<'_, u16>,
    mut out: DeviceViewMut<'_, u32>,
) -> Result<()> {
    if ![1, 2, 4].contains(&matrices) {
        return Err(GpuError::invalid(
            "probe_ldmatrix",
            "matrices",
            format!("{matrices} is not 1, 2 or 4"),
        ));
    }
    check_len("probe_ldmatrix", "src", src.len(), 256, "32 rows of 8")?;
    check_len("probe_ldmatrix", "out", out.len(), 128, "4 words per lane")?;
    check_aligned("probe_ldmatrix", "src", src.addr(), 16)?;
    let params =
        LdmatrixProbeParams { src: src.ptr(), out: out.ptr(), matrices, trans: trans as u32 };
    let config = LaunchConfig { shared_mem_bytes: 512, ..WARP };
    // SAFETY: sizes and alignment checked above; 512 bytes of shared memory requested.
    unsafe { dev.launch(PROBE_LDMATRIX, config, params) }
}

/// `cp.async` of the first `src_bytes` of `src` (zero-filled to 512 bytes) through shared
/// memory into `out` (512 bytes). `src` holds at least `src_bytes` rounded up to a multiple of 16: the
/// bytes past `src_bytes` in a partial copy's window are readable but must not be copied.
pub fn cp_async<D: Device>(
    dev: &D,
    src: DeviceView<'_, u8>,
    src_bytes: usize,
    mut out: DeviceViewMut<'_, u8>,
) -> Result<()> {
    if src_bytes > 512 {
        return Err(GpuError::invalid("probe_cp_async", "src_bytes", format!("{src_bytes} > 512")));
    }
    if src.len() < src_bytes.next_multiple_of(16) {
        return Err(GpuError::invalid(
            "probe_cp_async",
            "src",
            format!("{} bytes < {src_bytes} rounded up to a multiple of 16", src.len()),
        ));
    }
    check_len("probe_cp_async", "out", out.len(), 512, "bytes")?;
    check_aligned("probe_cp_async", "src", src.addr(), 16)?;
    check_aligned("probe_cp_async", "out", out.addr(), 16)?;
    let params = CpAsyncProbeParams { src: src.ptr(), out: out.ptr(), src_bytes: src_bytes as u32 };
    let config = LaunchConfig { shared_mem_bytes: 512, ..WARP };
    // SAFETY: the kernel reads the 16-byte windows of the first `src_bytes` bytes of `src`,
    // which holds them whole (checked), and writes 512 bytes of `out`.
    unsafe { dev.launch(PROBE_CP_ASYNC, config, params) }
}

/// Warp sum, max, shuffle-index and shuffle-down of 32 values (4 outputs per lane).
pub fn warp<D: Device>(
    dev: &D,
    x: DeviceView<'_, f32>,
    mut out: DeviceViewMut<'_, f32>,
) -> Result<()> {
    check_len("probe_warp", "x", x.len(), 32, "one per lane")?;
    check_len("probe_warp", "out", out.len(), 128, "4 per lane")?;
    let params = WarpProbeParams { x: x.ptr(), out: out.ptr() };
    // SAFETY: sizes checked above.
    unsafe { dev.launch(PROBE_WARP, WARP, params) }
}
