//! Per-kernel timing ([`Device::start_kernel_times`](crate::Device::start_kernel_times)): every
//! launch between a start and a take, stamped before and after, summed by kernel: the kernel
//! summary a profiler gives, without one (the GPU machines have Nsight Compute but no Nsight
//! Systems), to set beside PyTorch's profile of the same step.

use crate::error::Result;
use std::sync::{Mutex, MutexGuard};

/// One kernel's launches over a recording.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTime {
    /// The entry point's name, e.g. `gemm_wgmma_n256_bf16_rc_bf16`.
    pub name: &'static str,
    /// How many times it was launched.
    pub launches: usize,
    /// Their summed time between the stamps around each launch, in milliseconds.
    pub ms: f64,
}

/// The launches of a recording, each between two stamps of type `S` (a CUDA event, or the
/// host clock where launches finish before they return): for [`crate::Device`]
/// implementations.
pub struct KernelRecorder<S> {
    spans: Mutex<Option<Vec<Span<S>>>>,
}

/// One launch: its kernel, and the stamps before and after it.
type Span<S> = (&'static str, S, S);

impl<S> Default for KernelRecorder<S> {
    fn default() -> Self {
        Self { spans: Mutex::new(None) }
    }
}

impl<S> KernelRecorder<S> {
    /// Starts a recording, discarding any unfinished one.
    pub fn start(&self) {
        *self.lock() = Some(Vec::new());
    }

    /// Runs `launch`; while recording, between two stamps taken by `stamp`, kept under `name`.
    pub fn time(
        &self,
        name: &'static str,
        stamp: impl Fn() -> Result<S>,
        launch: impl FnOnce() -> Result<()>,
    ) -> Result<()> {
        if self.lock().is_none() {
            return launch();
        }
        let start = stamp()?;
        launch()?;
        let end = stamp()?;
        if let Some(spans) = self.lock().as_mut() {
            spans.push((name, start, end));
        }
        Ok(())
    }

    /// Ends the recording: each kernel's launches and summed milliseconds (`elapsed` between
    /// a launch's two stamps), in the order of their first launch; empty when none was
    /// started.
    pub fn take(&self, elapsed: impl Fn(&S, &S) -> Result<f64>) -> Result<Vec<KernelTime>> {
        let Some(spans) = self.lock().take() else { return Ok(Vec::new()) };
        let mut kernels: Vec<KernelTime> = Vec::new();
        for (name, start, end) in &spans {
            let ms = elapsed(start, end)?;
            match kernels.iter_mut().find(|k| k.name == *name) {
                Some(total) => {
                    total.launches += 1;
                    total.ms += ms;
                }
                None => kernels.push(KernelTime { name, launches: 1, ms }),
            }
        }
        Ok(kernels)
    }

    fn lock(&self) -> MutexGuard<'_, Option<Vec<Span<S>>>> {
        self.spans.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn launches_are_summed_by_kernel_in_order_of_first_launch_and_only_while_recording() {
        let recorder = KernelRecorder::<f64>::default();
        let clock = std::cell::Cell::new(0.0);
        let stamp = || {
            clock.set(clock.get() + 1.0);
            Ok(clock.get())
        };
        let ran = std::cell::Cell::new(0);
        let launch = || {
            ran.set(ran.get() + 1);
            Ok(())
        };
        recorder.time("a", stamp, launch).unwrap();
        assert_eq!(clock.get(), 0.0, "no stamps while off");
        assert!(recorder.take(|a, b| Ok(b - a)).unwrap().is_empty());
        recorder.start();
        for name in ["b", "a", "b"] {
            recorder.time(name, stamp, launch).unwrap();
        }
        let times = recorder.take(|a, b| Ok(10.0 * (b - a))).unwrap();
        assert_eq!(ran.get(), 4);
        assert_eq!(
            times,
            [
                KernelTime { name: "b", launches: 2, ms: 20.0 },
                KernelTime { name: "a", launches: 1, ms: 10.0 }
            ]
        );
        assert!(recorder.take(|a, b| Ok(b - a)).unwrap().is_empty(), "take ends the recording");
    }
}
