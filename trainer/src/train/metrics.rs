//! The metrics file (one JSON object per step) and the loss plot.

use crate::error::{Error, Result};
use crate::io::write_atomic;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

/// One line of the metrics file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// Step number, from 0.
    pub step: u64,
    /// Mean training loss of the step.
    pub train_loss: f32,
    /// Learning rate used by the step's update.
    pub lr: f32,
    /// Global gradient norm before clipping; `null` for a step the fp16 loss scaler skipped
    /// (its gradients overflowed, so they have no finite norm).
    pub grad_norm: Option<f32>,
    /// Wall time of the step (forward, backward, update), without evaluation or checkpoints.
    pub step_ms: f64,
    /// Training tokens processed per second during the step.
    pub tokens_per_sec: f64,
    /// Model FLOPs utilisation of the step (on a GPU of known peak).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub mfu: Option<f64>,
    /// The fp16 loss scale the step used.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub loss_scale: Option<f32>,
    /// Whether the fp16 loss scaler skipped the step's update (a gradient overflowed).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub skipped: bool,
    /// Validation loss of the parameters the step started from, on evaluation steps.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub val_loss: Option<f32>,
}

/// An open metrics file and the records it holds.
pub struct MetricsLog {
    path: PathBuf,
    file: File,
    records: Vec<StepRecord>,
}

impl MetricsLog {
    /// Opens `path` for a run starting at step `first_step`: records of earlier steps already
    /// in the file (from the run being resumed) are kept, later ones dropped, and so is an
    /// unterminated last line that does not parse (a record cut short when that run was
    /// killed).
    pub fn open(path: &Path, first_step: u64) -> Result<Self> {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("png")) {
            return Err(Error::invalid(format!(
                "--metrics-jsonl {}: the loss plot is written beside the metrics with the \
                 extension .png, so the metrics path needs another one (e.g. .jsonl)",
                path.display()
            )));
        }
        let mut records = Vec::new();
        if first_step > 0 && path.is_file() {
            let text = std::fs::read_to_string(path).map_err(|e| Error::io(path, e))?;
            let lines: Vec<&str> = text.lines().collect();
            for (i, line) in lines.iter().enumerate() {
                let record: StepRecord = match serde_json::from_str(line) {
                    Ok(record) => record,
                    Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => break,
                    Err(e) => {
                        return Err(Error::bad_file(path, format!("not a metrics line: {e}")));
                    }
                };
                if record.step < first_step {
                    records.push(record);
                }
            }
        }
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        }
        write_atomic(path, |w| {
            for record in &records {
                writeln!(w, "{}", serde_json::to_string(record).map_err(std::io::Error::other)?)?;
            }
            Ok(())
        })?;
        let file = OpenOptions::new().append(true).open(path).map_err(|e| Error::io(path, e))?;
        Ok(Self { path: path.to_path_buf(), file, records })
    }

    /// Appends one record (written and flushed at once).
    pub fn append(&mut self, record: StepRecord) -> Result<()> {
        let line = serde_json::to_string(&record).map_err(|e| Error::invalid(e.to_string()))?;
        writeln!(self.file, "{line}")
            .and_then(|()| self.file.flush())
            .map_err(|e| Error::io(&self.path, e))?;
        self.records.push(record);
        Ok(())
    }

    /// The records so far.
    pub fn records(&self) -> &[StepRecord] {
        &self.records
    }

    /// The plot's path: the metrics path with extension `png`.
    pub fn plot_path(&self) -> PathBuf {
        self.path.with_extension("png")
    }
}

/// Draws train and val loss against the step into a PNG at `path`.
pub fn plot_losses(records: &[StepRecord], path: &Path) -> Result<()> {
    render_png(path, |tmp| draw(records, tmp))
}

/// Writes the PNG that `draw` renders to the path it is given (a temporary file beside `path`,
/// renamed over `path` once complete), with the embedded "sans-serif" font registered.
pub(crate) fn render_png(
    path: &Path,
    draw: impl FnOnce(&Path) -> std::result::Result<(), Box<dyn std::error::Error>>,
) -> Result<()> {
    // Fonts are embedded (no system font lookup); registering twice is harmless.
    let _ =
        plotters::style::register_font("sans-serif", FontStyle::Normal, dejavu::sans::regular());
    let tmp = path.with_extension("tmp.png");
    let drawn = draw(&tmp)
        .map_err(|e| Error::io(path, std::io::Error::other(format!("plotting failed: {e}"))))
        .and_then(|()| std::fs::rename(&tmp, path).map_err(|e| Error::io(path, e)));
    if drawn.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    drawn
}

fn draw(
    records: &[StepRecord],
    path: &Path,
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let train: Vec<(f64, f64)> =
        records.iter().map(|r| (r.step as f64, f64::from(r.train_loss))).collect();
    let val: Vec<(f64, f64)> =
        records.iter().filter_map(|r| r.val_loss.map(|v| (r.step as f64, f64::from(v)))).collect();
    let losses = train.iter().chain(&val).map(|p| p.1).filter(|v| v.is_finite());
    let (lo, hi) = losses.fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if lo <= hi { (lo, hi) } else { (0.0, 1.0) };
    let pad = ((hi - lo) * 0.05).max(1e-3);
    let last = records.last().map_or(1.0, |r| r.step as f64).max(1.0);

    let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption("GPT-2 training loss", ("sans-serif", 24))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0.0..last, (lo - pad)..(hi + pad))?;
    chart
        .configure_mesh()
        .x_desc("step")
        .y_desc("loss")
        .x_label_formatter(&|x| format!("{x:.0}"))
        .draw()?;
    chart
        .draw_series(LineSeries::new(train, &BLUE))?
        .label("train")
        .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], BLUE));
    if !val.is_empty() {
        chart
            .draw_series(LineSeries::new(val.clone(), RED.stroke_width(2)))?
            .label("val")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], RED));
        chart.draw_series(val.into_iter().map(|p| Circle::new(p, 3, RED.filled())))?;
    }
    chart.configure_series_labels().border_style(BLACK).background_style(WHITE).draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(step: u64, val_loss: Option<f32>) -> StepRecord {
        StepRecord {
            step,
            train_loss: 10.0 - step as f32 * 0.1,
            lr: 1e-3,
            grad_norm: Some(1.5),
            step_ms: 12.5,
            tokens_per_sec: 20480.0,
            mfu: None,
            loss_scale: None,
            skipped: false,
            val_loss,
        }
    }

    #[test]
    fn records_are_json_lines_and_resume_keeps_earlier_steps() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run/metrics.jsonl");
        let mut log = MetricsLog::open(&path, 0).unwrap();
        for step in 0..4 {
            log.append(record(step, (step == 0).then_some(9.5))).unwrap();
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        for key in
            ["step", "train_loss", "lr", "grad_norm", "step_ms", "tokens_per_sec", "val_loss"]
        {
            assert!(first.get(key).is_some(), "missing {key}");
        }
        assert!(!text.lines().nth(1).unwrap().contains("val_loss"));
        let log = MetricsLog::open(&path, 2).unwrap();
        assert_eq!(log.records(), [record(0, Some(9.5)), record(1, None)]);
        assert_eq!(std::fs::read_to_string(&path).unwrap().lines().count(), 2);
    }

    /// An fp16 step the scaler skipped: `"skipped": true`, a `null` gradient norm, its loss
    /// scale; the plot takes it too.
    #[test]
    fn a_skipped_step_is_written_as_such() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let mut log = MetricsLog::open(&path, 0).unwrap();
        let skipped = StepRecord {
            grad_norm: None,
            loss_scale: Some(65536.0),
            skipped: true,
            ..record(0, None)
        };
        log.append(skipped.clone()).unwrap();
        log.append(StepRecord { loss_scale: Some(32768.0), ..record(1, None) }).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
        assert_eq!(first["skipped"], serde_json::Value::Bool(true));
        assert!(first["grad_norm"].is_null(), "{first}");
        assert_eq!(first["loss_scale"].as_f64(), Some(65536.0));
        assert!(!text.lines().nth(1).unwrap().contains("skipped"), "only skipped steps say so");
        let reopened = MetricsLog::open(&path, 2).unwrap();
        assert_eq!(reopened.records()[0], skipped);
        plot_losses(reopened.records(), &dir.path().join("loss.png")).unwrap();
    }

    #[test]
    fn plot_is_a_png() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loss.png");
        let records: Vec<_> = (0..50).map(|s| record(s, (s % 10 == 0).then_some(9.0))).collect();
        plot_losses(&records, &path).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[1..4], b"PNG");
    }

    /// A record cut short by a killed run is dropped on resume; a bad line elsewhere is an error.
    #[test]
    fn resume_drops_a_torn_last_line_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("metrics.jsonl");
        let mut log = MetricsLog::open(&path, 0).unwrap();
        for step in 0..3 {
            log.append(record(step, None)).unwrap();
        }
        drop(log);
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"step\":3,\"train_lo");
        std::fs::write(&path, &text).unwrap();
        let log = MetricsLog::open(&path, 3).unwrap();
        assert_eq!(log.records().len(), 3);
        drop(log);
        std::fs::write(&path, "{\"step\":0,\"train_lo\n").unwrap();
        let message = MetricsLog::open(&path, 3).err().unwrap().to_string();
        assert!(message.contains("not a metrics line"), "{message}");
    }

    /// A metrics path the plot would overwrite is refused before anything is written.
    #[test]
    fn a_png_metrics_path_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.PNG");
        let message = MetricsLog::open(&path, 0).err().unwrap().to_string();
        assert!(message.contains("needs another one"), "{message}");
        assert!(!path.exists());
    }
}
