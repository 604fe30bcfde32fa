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
