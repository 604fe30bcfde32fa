//! Training: the step (forward, backward, clip, AdamW), evaluation, and the whole run with
//! its metrics, plot, progress display and checkpoints.

mod metrics;
mod progress;
mod run;
mod session;

pub(crate) use metrics::render_png;
pub use metrics::{MetricsLog, StepRecord, plot_losses};
pub use progress::Progress;
pub use run::{ModelSource, TrainOptions, TrainReport, run};
pub use session::{BatchShape, BatchSource, Session, StepOutput};
