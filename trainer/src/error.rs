//! The trainer library's error type.

use std::path::{Path, PathBuf};

/// Everything that can go wrong in the trainer library. Messages are one line and name the
/// file, flag or value at fault.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An operating-system error on a file or directory (the message includes the OS error,
    /// so it is not repeated as a `source`).
    #[error("{}: {error}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// A file exists but its content is not what it must be (wrong magic, version or size).
    #[error("{}: {reason}", path.display())]
    BadFile {
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// Options or files that do not fit together (for example T larger than the model's maxT).
    #[error("{0}")]
    Invalid(String),
    /// The backend failed (allocation, launch, transfer).
    #[error("backend: {0}")]
    Backend(String),
    /// Training produced a non-finite loss or gradient norm.
    #[error("{0}")]
    Diverged(String),
}

impl Error {
    /// An I/O error on `path`.
    pub fn io(path: &Path, error: std::io::Error) -> Self {
        Self::Io { path: path.to_path_buf(), error }
    }

    /// A malformed file.
    pub fn bad_file(path: &Path, reason: impl Into<String>) -> Self {
        Self::BadFile { path: path.to_path_buf(), reason: reason.into() }
    }

    /// An invalid combination of options or inputs.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::Invalid(message.into())
    }
}

/// The trainer library's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;
