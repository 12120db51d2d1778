//! The crate's one error type.
//!
//! Owns: `Error` and the `Result` alias every fallible API returns.
//! Must never: carry a panic in disguise — every variant is something a
//! caller can match on and act upon.

use std::fmt;
use std::path::PathBuf;

/// The result type of every fallible siftdb operation.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong in siftdb.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The operating system refused an I/O operation.
    #[error("i/o error{}: {source}", fmt_path(.path))]
    Io {
        /// The file or directory involved, when known.
        path: Option<PathBuf>,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Bytes read from disk (or handed to a decoder) are not what was written.
    #[error("corruption in {what}: {detail}")]
    Corruption {
        /// Which structure: "filter block", "table footer in 000012.sst", ...
        what: String,
        /// What exactly is wrong, with offsets where they help.
        detail: String,
    },

    /// The caller passed an argument that cannot be honoured.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The database directory is locked by another open handle.
    #[error("database is locked: {0}")]
    Locked(PathBuf),

    /// The database refuses writes after an earlier I/O failure made its
    /// state uncertain; reopen it to recover.
    #[error("database is read-only after an earlier failure: {0}")]
    Poisoned(String),
}

fn fmt_path(path: &Option<PathBuf>) -> String {
    match path {
        Some(p) => format!(" on {}", p.display()),
        None => String::new(),
    }
}

impl Error {
    /// Builds a `Corruption` error.
    pub fn corruption(what: impl fmt::Display, detail: impl fmt::Display) -> Error {
        Error::Corruption {
            what: what.to_string(),
            detail: detail.to_string(),
        }
    }

    /// Builds an `InvalidArgument` error.
    pub fn invalid(detail: impl fmt::Display) -> Error {
        Error::InvalidArgument(detail.to_string())
    }

    /// Wraps an I/O error with the path it happened on.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Error {
        Error::Io {
            path: Some(path.into()),
            source,
        }
    }

    /// A copy of this error (an I/O error keeps its kind and message), for
    /// reporting one failure to several callers.
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Io { path, source } => Error::Io {
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corruption { what, detail } => Error::corruption(what, detail),
            Error::InvalidArgument(d) => Error::InvalidArgument(d.clone()),
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::Poisoned(r) => Error::Poisoned(r.clone()),
        }
    }

    /// True for `Error::Corruption`.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Error {
        Error::Io { path: None, source }
    }
}

/// A named truncation error: `"table footer: 12 bytes short"`.
pub(crate) fn truncated(what: &str, short_by: usize) -> Error {
    Error::corruption(what, format!("{short_by} bytes short"))
}
