//! What a run shows while it trains: a progress bar with the loss and throughput on a
//! terminal, or periodic plain lines otherwise (logs, CI).

use super::StepRecord;
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;

/// Prints lines to stdout and keeps a progress bar (on stderr, terminals only) below them.
pub struct Progress {
    bar: Option<ProgressBar>,
    line_every: u64,
}

impl Progress {
    /// Progress of a run over steps `first .. total`.
    pub fn new(first: u64, total: u64) -> Self {
        let bar = std::io::stderr().is_terminal().then(|| {
            let bar = ProgressBar::new(total);
            let style =
                ProgressStyle::with_template("[{bar:20.cyan/blue}] {pos}/{len} {msg} eta {eta}")
                    .unwrap_or_else(|_| ProgressStyle::default_bar())
                    .progress_chars("=> ");
            bar.set_style(style);
            bar.set_position(first);
            bar
        });
        Self { bar, line_every: (total / 20).max(1) }
    }

    /// Prints `line` (above the bar, if any).
    pub fn println(&self, line: &str) {
        match &self.bar {
            Some(bar) => bar.suspend(|| println!("{line}")),
            None => println!("{line}"),
        }
    }

    /// Reports a finished step of a run of `total` steps.
    pub fn step(&self, record: &StepRecord, total: u64) {
        let val = record.val_loss.map(|v| format!(" | val {v:.4}")).unwrap_or_default();
        let mfu = record.mfu.map(|m| format!(" | MFU {:.1}%", m * 100.0)).unwrap_or_default();
        let skipped = if record.skipped { " | overflow: update skipped" } else { "" };
        let norm = record.grad_norm.map_or("-".to_string(), |n| format!("{n:.3}"));
        let summary = format!(
            "loss {:.4}{val} | {:.0} tok/s{mfu} | {:.1} ms | lr {:.2e} | norm {norm}{skipped}",
            record.train_loss, record.tokens_per_sec, record.step_ms, record.lr
        );
        let last = record.step + 1 == total;
        match &self.bar {
            Some(bar) => {
                if record.val_loss.is_some() || last {
                    bar.suspend(|| println!("step {:>6}/{total} | {summary}", record.step));
                }
                bar.set_message(format!(
                    "loss {:.4} | {:.0} tok/s",
                    record.train_loss, record.tokens_per_sec
                ));
                bar.set_position(record.step + 1);
            }
            None => {
                if record.step.is_multiple_of(self.line_every) || record.val_loss.is_some() || last
                {
                    println!("step {:>6}/{total} | {summary}", record.step);
                }
            }
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
