//! Where a training step's time goes: each backend op timed while a recording is on
//! ([`Backend::op_recorder`](super::Backend::op_recorder)), on the GPU's own clock (events in
//! its stream) or, where the ops finish before they return (the CPU backend, the simulator), on
//! the host's.

use super::op_work::Work;
use crate::error::Result;
use gpu_host::{DeviceEvent, Span, SpanRecorder};
use serde::Deserialize;
use std::time::Instant;

/// When an op started or ended.
pub enum Stamp {
    /// An event in the GPU's stream.
    Device(DeviceEvent),
    /// The host clock, read once the work issued so far had finished.
    Host(Instant),
}

/// The clock a recording was read from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpClock {
    /// The GPU's (CUDA events): device time, launch gaps excluded.
    Device,
    /// The host's, around ops that finish before they return.
    Host,
}

/// One op's total over a recording (or, deserialized, one kernel or operator of PyTorch's
/// profile in the ladder).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct OpTime {
    /// What ran, e.g. `matmul backward fc`.
    pub op: String,
    /// How many times.
    pub calls: usize,
    /// Their summed time, in milliseconds.
    pub ms: f64,
    /// Their summed work (none counted for PyTorch's kernels and operators).
    #[serde(default)]
    pub work: Work,
}

/// What a timed op is recorded as.
pub struct OpLabel {
    /// Its name ([`names`]).
    pub name: String,
    /// Its FLOPs and minimal bytes ([`super::op_work`]).
    pub work: Work,
}

impl OpLabel {
    /// `name` doing `work`.
    pub fn new(name: impl Into<String>, work: Work) -> Self {
        Self { name: name.into(), work }
    }
}

/// Every op's total over a recording, in the order of their first calls.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct OpTimes {
    /// The clock (none when nothing was recorded).
    pub clock: Option<OpClock>,
    /// One entry per distinct op.
    pub ops: Vec<OpTime>,
    /// Why there are no times, when the profiled step or its clock failed.
    pub error: Option<String>,
}

impl OpTimes {
    /// The sum over every op, in milliseconds.
    pub fn total_ms(&self) -> f64 {
        self.ops.iter().map(|o| o.ms).sum()
    }

    /// The ops, slowest first.
    pub fn slowest_first(&self) -> Vec<&OpTime> {
        let mut ops: Vec<&OpTime> = self.ops.iter().collect();
        ops.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        ops
    }
}

/// Records the ops of a backend while switched on; off, [`OpRecorder::time`] only runs the op.
#[derive(Default)]
pub struct OpRecorder(SpanRecorder<OpLabel, Stamp>);

impl OpRecorder {
    /// Starts a recording, discarding any unfinished one.
    pub fn start(&self) {
        self.0.start();
    }

    /// Ends the recording: every op's time summed by op (waits for the device when its clock
    /// is the GPU's). Empty when none was started.
    pub fn take(&self) -> Result<OpTimes> {
        let mut times = OpTimes::default();
        for Span { label: OpLabel { name, work }, start, end } in self.0.take().unwrap_or_default()
        {
            let (clock, ms) = match (&start, &end) {
                (Stamp::Device(a), Stamp::Device(b)) => {
                    (OpClock::Device, f64::from(a.elapsed_ms(b)?))
                }
                (Stamp::Host(a), Stamp::Host(b)) => (OpClock::Host, (*b - *a).as_secs_f64() * 1e3),
                _ => unreachable!("a backend stamps all its ops on one clock"),
            };
            times.clock = Some(clock);
            match times.ops.iter_mut().find(|t| t.op == name) {
                Some(total) => {
                    total.calls += 1;
                    total.ms += ms;
                    total.work += work;
                }
                None => times.ops.push(OpTime { op: name, calls: 1, ms, work }),
            }
        }
        Ok(times)
    }

    /// Runs `op`; while recording, between two stamps of `clock`, kept as `label()` (built
    /// only then, before the op runs).
    pub fn time<R>(
        &self,
        label: impl FnOnce() -> OpLabel,
        clock: impl Fn() -> Result<Stamp>,
        op: impl FnOnce() -> Result<R>,
    ) -> Result<R> {
        self.0.time(label, clock, op)
    }
}

/// The names ops are recorded under, the same on every backend.
pub mod names {
    use crate::backend::ops::Linear;

    /// `matmul forward qkv`, `matmul forward lm head`, ...
    pub fn matmul(pass: &str, shape: Linear) -> String {
        format!("matmul {pass} {}", shape.layer)
    }

    /// A part of a linear layer's backward, timed apart: `matmul backward fc dX` (the input
    /// gradient, with the fused GELU backward), `… dW` (the weight gradient), `… dbias`.
    pub fn matmul_backward(shape: Linear, part: &str) -> String {
        format!("matmul backward {} {part}", shape.layer)
    }

    /// `attention forward (flash)`, `attention backward (materialised)`.
    pub fn attention(pass: &str, flash: bool) -> String {
        format!("attention {pass} ({})", if flash { "flash" } else { "materialised" })
    }

    /// A copy from host memory.
    pub const UPLOAD: &str = "copy to the device";
    /// A copy to host memory (the losses).
    pub const DOWNLOAD: &str = "copy to the host";
    /// A batch of token ids checked and uploaded.
    pub const TOKENS: &str = "token upload";
    /// Zeroing a buffer (the gradients before a step, the residual gradient).
    pub const ZERO: &str = "zero";
    /// The master weights rounded to the working copy.
    pub const ROUND_TO_ACT: &str = "round to the working copy";
    /// A Hopper TF32 GEMM's operands rounded to nearest ahead of it (wgmma truncates them).
    pub const ROUND_TF32: &str = "TF32 operand rounding";
    /// Token and position embeddings.
    pub const ENCODER_FORWARD: &str = "encoder forward";
    /// Their gradients.
    pub const ENCODER_BACKWARD: &str = "encoder backward";
    /// A layernorm.
    pub const LAYERNORM_FORWARD: &str = "layernorm forward";
    /// A residual add and the layernorm of its sum, fused.
    pub const RESIDUAL_LAYERNORM_FORWARD: &str = "residual + layernorm forward";
    /// A layernorm's gradients.
    pub const LAYERNORM_BACKWARD: &str = "layernorm backward";
    /// GELU on its own (unfused).
    pub const GELU_FORWARD: &str = "GELU forward";
    /// Its gradient on its own (unfused).
    pub const GELU_BACKWARD: &str = "GELU backward";
    /// A residual add on its own (unfused).
    pub const RESIDUAL_FORWARD: &str = "residual add";
    /// Softmax, cross-entropy and the logits' gradient, fused.
    pub const CLASSIFIER: &str = "classifier (softmax + cross-entropy)";
    /// The gradients' norm, read back to the host.
    pub const GRAD_NORM: &str = "gradient norm";
    /// The optimizer step over every parameter.
    pub const ADAMW: &str = "AdamW";
}

/// The host clock, for backends whose ops have finished when they return.
pub fn host_stamp() -> Result<Stamp> {
    Ok(Stamp::Host(Instant::now()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_are_summed_by_name_in_order_of_first_call_and_only_while_recording() {
        let recorder = OpRecorder::default();
        let sleep = |ms| {
            std::thread::sleep(std::time::Duration::from_millis(ms));
            Ok(())
        };
        recorder.time(|| unreachable!("not recording"), host_stamp, || sleep(1)).unwrap();
        assert_eq!(recorder.take().unwrap(), OpTimes::default());
        recorder.start();
        for (name, ms) in [("b", 3), ("a", 1), ("b", 2)] {
            let work = Work { flops: ms as f64, bytes: 10.0 };
            recorder.time(|| OpLabel::new(name, work), host_stamp, || sleep(ms)).unwrap();
        }
        let times = recorder.take().unwrap();
        assert_eq!(times.clock, Some(OpClock::Host));
        let summary: Vec<(&str, usize)> =
            times.ops.iter().map(|t| (t.op.as_str(), t.calls)).collect();
        assert_eq!(summary, [("b", 2), ("a", 1)]);
        assert_eq!(times.ops[0].work, Work { flops: 5.0, bytes: 20.0 }, "work is summed too");
        assert!(times.ops[0].ms >= 5.0 && times.ops[1].ms >= 1.0, "{times:?}");
        assert!((times.total_ms() - times.ops[0].ms - times.ops[1].ms).abs() < 1e-12);
        assert_eq!(recorder.take().unwrap(), OpTimes::default(), "take ends the recording");
    }
}
