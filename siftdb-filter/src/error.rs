//! The filter library's one error type.
//!
//! Owns: `Error` and the `Result` alias every fallible filter API returns:
//! bytes that do not decode as the filter they claim to be, and arguments
//! no filter can be built from. siftdb converts it into its own error
//! (`From`), keeping the kind and the message.
//! Must never: carry a panic in disguise — every variant is something a
//! caller can match on and act upon.

use std::fmt;

/// The result type of every fallible filter operation.
pub type Result<T> = std::result::Result<T, Error>;

/// Everything that can go wrong building, encoding or decoding a filter.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Bytes handed to a decoder are not what an encoder wrote.
    #[error("corruption in {what}: {detail}")]
    Corruption {
        /// Which structure: "filter block", "fuse filter block", ...
        what: String,
        /// What exactly is wrong, with offsets where they help.
        detail: String,
    },

    /// The caller passed an argument that cannot be honoured.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
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

    /// What this error says without its kind's prefix: the text of an
    /// `InvalidArgument`, "WHAT: DETAIL" of a `Corruption`.
    pub(crate) fn detail(&self) -> String {
        match self {
            Error::InvalidArgument(detail) => detail.clone(),
            Error::Corruption { what, detail } => format!("{what}: {detail}"),
        }
    }

    /// True for `Error::Corruption`.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

/// The error of an input `short_by` bytes shorter than `what` needs.
pub(crate) fn truncated(what: &str, short_by: usize) -> Error {
    Error::corruption(what, format!("{short_by} bytes short"))
}
