//! [`WgmmaTile::Tuned`]: a GEMM's Hopper tile chosen by timing every tile that can run it.
//!
//! The tiles differ in how blocks share the work and when the epilogue runs, never in the
//! arithmetic of an element: each multiplies the same products in the same order (K-tile by
//! K-tile, the same `wgmma` k-steps) and finishes them with the same epilogue code, so the
//! choice changes the time of a GEMM, not its bits (the GEMM tests compare the tiles bit for
//! bit, on the simulator and on a GPU). That is what lets a trainer tune while it trains.

use super::{GemmEngine, GemmSpec, WgmmaTile, wgmma};
use crate::device::Device;
use crate::error::GpuError;
use crate::ptx::PtxArch;
use std::time::Instant;

/// The tiles worth timing for `spec` on a GPU with `sms` SMs running the `arch` module: every
/// one of 128 × 128, 128 × 256, ping-pong and deferred with an entry for the spec that the
/// launcher takes, the one `Auto` picks first (so that it wins ties). Empty where there is
/// nothing to choose: the spec does not run on `wgmma` there, is split over K or planned for
/// stream-K (their partial sums change the bits), or only one tile takes it.
pub fn tuned_candidates(spec: &GemmSpec, arch: PtxArch, sms: u32) -> Vec<WgmmaTile> {
    let on_wgmma = spec.likely_engine(arch) == GemmEngine::Wgmma;
    if !on_wgmma || spec.max_slices() > 1 || spec.workspace_len() > 0 {
        return Vec::new();
    }
    let with = |tile| GemmSpec { wgmma_tile: tile, ..*spec };
    let Ok(auto) = wgmma::tile_for(&with(WgmmaTile::Auto), sms) else {
        return Vec::new();
    };
    let mut tiles: Vec<WgmmaTile> =
        [WgmmaTile::N128, WgmmaTile::N256, WgmmaTile::PingPong, WgmmaTile::Deferred]
            .into_iter()
            .filter(|&tile| spec.has_wgmma_entry(tile) && wgmma::tile_for(&with(tile), sms).is_ok())
            .collect();
    tiles.sort_by_key(|tile| tile.geometry() != auto);
    if tiles.len() < 2 {
        tiles.clear();
    }
    tiles
}

/// The median time in milliseconds of `runs` calls of `launch` (at least one), after one
/// untimed call: by the device's clock where it has one (events around each call), else by
/// the host's around a call and a synchronisation (the simulator, whose times say nothing of
/// a GPU's). The first error, of `launch` or of the clock, stops it.
pub fn time_launches<D: Device, E: From<GpuError>>(
    dev: &D,
    runs: usize,
    mut launch: impl FnMut() -> Result<(), E>,
) -> Result<f64, E> {
    launch()?;
    let mut times = Vec::with_capacity(runs.max(1));
    for _ in 0..runs.max(1) {
        let host = Instant::now();
        let start = dev.record_event()?;
        launch()?;
        let end = dev.record_event()?;
        let ms = match (start, end) {
            (Some(start), Some(end)) => f64::from(start.elapsed_ms(&end)?),
            _ => {
                dev.synchronize()?;
                host.elapsed().as_secs_f64() * 1e3
            }
        };
        times.push(ms);
    }
    times.sort_by(f64::total_cmp);
    Ok(times[times.len() / 2])
}
