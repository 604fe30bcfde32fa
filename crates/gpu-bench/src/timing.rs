//! Timing with CUDA events (warm-up launches, then the median of the timed launches) and the
//! options every benchmark shares.

use crate::report;
use anyhow::{Context, Result};
use cudarc::driver::sys::{CUdevice_attribute, CUevent_flags};
use gpu_host::{Device, Gpu, provenance};
use std::path::PathBuf;

/// How every benchmark times a launch.
pub struct Timer<'a> {
    /// The GPU (its one stream carries the launches and the events).
    pub gpu: &'a Gpu,
    /// Untimed launches first.
    pub warmup: usize,
    /// Timed launches; the median is reported.
    pub reps: usize,
}

impl Timer<'_> {
    /// Median milliseconds of `launch(set)`, cycling `set` over `0..sets` (operand copies that
    /// together exceed the L2 cache), each launch between its own pair of events. The warm-up
    /// launches every set at least once, so that what a first launch on a set does on the
    /// host (a GEMM's tensor-map upload) stays out of the timed launches.
    pub fn median_ms(
        &self,
        sets: usize,
        mut launch: impl FnMut(usize) -> Result<()>,
    ) -> Result<f64> {
        for i in 0..self.warmup.max(sets) {
            launch(i % sets)?;
        }
        let ctx = self.gpu.context();
        let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
        let mut pairs = Vec::with_capacity(self.reps);
        for _ in 0..self.reps {
            pairs.push((event()?, event()?));
        }
        for (i, (start, end)) in pairs.iter().enumerate() {
            start.record(self.gpu.stream())?;
            launch(i % sets)?;
            end.record(self.gpu.stream())?;
        }
        self.gpu.synchronize()?;
        let mut ms = Vec::with_capacity(self.reps);
        for (start, end) in &pairs {
            ms.push(start.elapsed_ms(end)? as f64);
        }
        Ok(report::median(&mut ms))
    }

    /// Median milliseconds of each of `candidates` launches (`launch(candidate, set)`), timed
    /// in rounds that launch candidate 0, 1, … once each, each launch between its own pair of
    /// events: every candidate meets the GPU's clocks and temperature as the others do (timed
    /// one after another, a candidate timed right after an idle gap runs at higher clocks than
    /// one timed after seconds of load: the same kernel measured 71% and 76% of cuBLAS in one
    /// run on the H100, 2026-11-26). The sets rotate over the launches in order, so that no
    /// launch finds the operands of the one before it in L2; the warm-up rounds launch every
    /// (candidate, set) pair the timed rounds will, as [`Timer::median_ms`] does.
    pub fn interleaved_medians_ms(
        &self,
        sets: usize,
        candidates: usize,
        mut launch: impl FnMut(usize, usize) -> Result<()>,
    ) -> Result<Vec<f64>> {
        let mut launch_round =
            |round: usize, k: usize| launch(k, rotated_set(round, k, candidates, sets));
        for round in 0..self.warmup.max(sets) {
            for k in 0..candidates {
                launch_round(round, k)?;
            }
        }
        let ctx = self.gpu.context();
        let event = || ctx.new_event(Some(CUevent_flags::CU_EVENT_DEFAULT));
        let mut pairs = Vec::with_capacity(self.reps * candidates);
        for _ in 0..self.reps * candidates {
            pairs.push((event()?, event()?));
        }
        for (i, (start, end)) in pairs.iter().enumerate() {
            start.record(self.gpu.stream())?;
            launch_round(i / candidates, i % candidates)?;
            end.record(self.gpu.stream())?;
        }
        self.gpu.synchronize()?;
        let mut ms = vec![Vec::with_capacity(self.reps); candidates];
        for (i, (start, end)) in pairs.iter().enumerate() {
            ms[i % candidates].push(start.elapsed_ms(end)? as f64);
        }
        Ok(ms.iter_mut().map(|times| report::median(times)).collect())
    }
}

/// The operand set of candidate `k`'s launch in round `round` of
/// [`Timer::interleaved_medians_ms`]: the sets in turn over the launches in order. A
/// candidate's sets repeat every `sets` rounds, which the warm-up rounds cover.
fn rotated_set(round: usize, k: usize, candidates: usize, sets: usize) -> usize {
    (round * candidates + k) % sets
}

/// The options every benchmark takes.
#[derive(clap::Args, Clone, Debug)]
pub struct RunArgs {
    /// Timed launches per measurement (the median is reported; at least 20).
    #[arg(long, default_value_t = 25)]
    pub reps: usize,
    /// Untimed launches before timing.
    #[arg(long, default_value_t = 5)]
    pub warmup: usize,
    /// Where to write the report (default: bench/<benchmark>-<device>.md under the current
    /// folder, which `cargo xtask bench` sets to the workspace).
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Commit recorded in the report (default: `$GPU_BUNDLE_COMMIT`, else
    /// `git rev-parse --short HEAD`).
    #[arg(long)]
    pub commit: Option<String>,
}

impl RunArgs {
    /// The GPU, its L2 size, and the timer, after checking the options; fails with a one-line
    /// message naming the benchmark when there is no GPU.
    pub fn start(&self, benchmark: &str) -> Result<(Gpu, usize)> {
        if self.reps < 20 {
            anyhow::bail!("--reps must be at least 20 (the report states a median of ≥ 20)");
        }
        let gpu =
            Gpu::new().map_err(|e| anyhow::anyhow!("bench {benchmark} needs a CUDA GPU: {e}"))?;
        let l2 = gpu
            .context()
            .attribute(CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
            .context("reading the L2 size")? as usize;
        Ok((gpu, l2))
    }

    /// The timer these options describe.
    pub fn timer<'a>(&self, gpu: &'a Gpu) -> Timer<'a> {
        Timer { gpu, warmup: self.warmup, reps: self.reps }
    }

    /// The report's facts about this run.
    pub fn meta(&self, gpu: &Gpu, l2_bytes: usize) -> report::Meta {
        report::Meta {
            device: gpu.describe(),
            device_name: gpu.info().name.clone(),
            date: provenance::utc_date(std::time::SystemTime::now()),
            commit: self.commit.clone().unwrap_or_else(|| {
                provenance::source_commit().unwrap_or_else(|| "unknown (pass --commit)".into())
            }),
            warmup: self.warmup,
            reps: self.reps,
            l2_bytes,
        }
    }

    /// `--out`, else `bench/<benchmark>-<device slug>.md`.
    pub fn report_path(&self, benchmark: &str, device_name: &str) -> PathBuf {
        self.out.clone().unwrap_or_else(|| {
            PathBuf::from("bench")
                .join(format!("{benchmark}-{}.md", provenance::device_slug(device_name)))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::rotated_set;
    use std::collections::BTreeSet;

    /// Consecutive launches never share a set (where there are two or more), and the first
    /// `sets` rounds launch every (candidate, set) pair that any later round does.
    #[test]
    fn the_interleaved_rounds_rotate_the_sets_and_the_warm_up_covers_them() {
        for (candidates, sets) in [(1, 1), (1, 3), (2, 2), (3, 2), (4, 6), (5, 16), (12, 3)] {
            let launches: Vec<(usize, usize)> = (0..40)
                .flat_map(|round| (0..candidates).map(move |k| (round, k)))
                .map(|(round, k)| (k, rotated_set(round, k, candidates, sets)))
                .collect();
            if sets > 1 {
                assert!(launches.windows(2).all(|w| w[0].1 != w[1].1), "{candidates} {sets}");
            }
            let warm: BTreeSet<_> = launches[..sets * candidates].iter().collect();
            assert!(launches.iter().all(|l| warm.contains(l)), "{candidates} {sets}");
        }
    }
}
