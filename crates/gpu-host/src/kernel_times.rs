//! Timed spans ([`SpanRecorder`]) and per-kernel timing on them
//! ([`Device::start_kernel_times`](crate::Device::start_kernel_times)): every launch between a
//! start and a take, stamped before and after, summed by kernel: the kernel summary a profiler
//! gives, without one (the GPU machines have Nsight Compute but no Nsight Systems), to set
//! beside PyTorch's profile of the same step.

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

/// One timed piece of work: its label, and the stamps before and after it.
pub struct Span<L, S> {
    /// What ran.
    pub label: L,
    /// Before it.
    pub start: S,
    /// After it.
    pub end: S,
}

/// The spans of a recording, each labelled `L` between two stamps of type `S` (a CUDA event,
/// or the host clock where the work has finished when it returns); off, it only runs the
/// work. The kernel launches of a [`crate::Device`] (`&'static str` labels) and the trainer's
/// ops are recorded on it.
pub struct SpanRecorder<L, S> {
    spans: Mutex<Option<Vec<Span<L, S>>>>,
}

/// A device's record of its kernel launches, labelled by kernel name.
pub type KernelRecorder<S> = SpanRecorder<&'static str, S>;

impl<L, S> Default for SpanRecorder<L, S> {
    fn default() -> Self {
        Self { spans: Mutex::new(None) }
    }
}

impl<L, S> SpanRecorder<L, S> {
    /// Starts a recording, discarding any unfinished one.
    pub fn start(&self) {
        *self.lock() = Some(Vec::new());
    }

    /// Runs `work`; while recording, between two stamps taken by `stamp`, kept as `label()`
    /// (built only then, before the work runs).
    pub fn time<R, E>(
        &self,
        label: impl FnOnce() -> L,
        stamp: impl Fn() -> std::result::Result<S, E>,
        work: impl FnOnce() -> std::result::Result<R, E>,
    ) -> std::result::Result<R, E> {
        if self.lock().is_none() {
            return work();
        }
        let label = label();
        let start = stamp()?;
        let result = work()?;
        let end = stamp()?;
        if let Some(spans) = self.lock().as_mut() {
            spans.push(Span { label, start, end });
        }
        Ok(result)
    }

    /// Ends the recording: its spans in order, or `None` when none was started.
    pub fn take(&self) -> Option<Vec<Span<L, S>>> {
        self.lock().take()
    }

    fn lock(&self) -> MutexGuard<'_, Option<Vec<Span<L, S>>>> {
        self.spans.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl<S> KernelRecorder<S> {
    /// Ends the recording: each kernel's launches and summed milliseconds (`elapsed` between
    /// a launch's two stamps), in the order of their first launch; empty when none was
    /// started.
    pub fn take_kernel_times(
        &self,
        elapsed: impl Fn(&S, &S) -> Result<f64>,
    ) -> Result<Vec<KernelTime>> {
        let mut kernels: Vec<KernelTime> = Vec::new();
        for Span { label: name, start, end } in self.take().unwrap_or_default() {
            let ms = elapsed(&start, &end)?;
            match kernels.iter_mut().find(|k| k.name == name) {
                Some(total) => {
                    total.launches += 1;
                    total.ms += ms;
                }
                None => kernels.push(KernelTime { name, launches: 1, ms }),
            }
        }
        Ok(kernels)
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
            Ok::<_, crate::GpuError>(clock.get())
        };
        let ran = std::cell::Cell::new(0);
        let launch = || {
            ran.set(ran.get() + 1);
            Ok(())
        };
        recorder.time(|| unreachable!("not recording"), stamp, launch).unwrap();
        assert_eq!(clock.get(), 0.0, "no stamps while off");
        assert!(recorder.take_kernel_times(|a, b| Ok(b - a)).unwrap().is_empty());
        recorder.start();
        for name in ["b", "a", "b"] {
            recorder.time(|| name, stamp, launch).unwrap();
        }
        let times = recorder.take_kernel_times(|a, b| Ok(10.0 * (b - a))).unwrap();
        assert_eq!(ran.get(), 4);
        assert_eq!(
            times,
            [
                KernelTime { name: "b", launches: 2, ms: 20.0 },
                KernelTime { name: "a", launches: 1, ms: 10.0 }
            ]
        );
        let again = recorder.take_kernel_times(|a, b| Ok(b - a)).unwrap();
        assert!(again.is_empty(), "take ends the recording");
    }
}
