//! Timing with CUDA events: warm-up launches, then the median of the timed launches.

use crate::report;
use anyhow::Result;
use cudarc::driver::sys::CUevent_flags;
use gpu_host::{Device, Gpu};

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
    /// together exceed the L2 cache), each launch between its own pair of events.
    pub fn median_ms(
        &self,
        sets: usize,
        mut launch: impl FnMut(usize) -> Result<()>,
    ) -> Result<f64> {
        for i in 0..self.warmup {
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
