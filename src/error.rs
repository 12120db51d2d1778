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

    /// A file of a format version this build does not read: an older one
    /// (until the first release a format change replaces the format, see
    /// `docs/format.md`) or a newer one.
    #[error(
        "{kind} {} has format version {found}; this build reads version {supported} only",
        .path.display()
    )]
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// What the file is: "table" or "write-ahead log".
        kind: &'static str,
        /// The version its header or footer carries.
        found: u64,
        /// The one version this build reads.
        supported: u64,
    },

    /// The caller passed an argument that cannot be honoured.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The directory is not a siftdb database and is left as it is: it
    /// has no siftdb `MANIFEST`, and none of its files opens as a siftdb
    /// table or log (another engine's directory, say, whose `NNNNNN.sst`
    /// names look like siftdb's).
    #[error("{} is not a siftdb database: {reason}", path.display())]
    NotADatabase {
        /// The directory.
        path: PathBuf,
        /// What was found instead.
        reason: String,
    },

    /// The directory already holds a database and the open was asked to
    /// refuse one ([`crate::Options::error_if_exists`]); it is left as it is.
    #[error("{} already holds a siftdb database (Options::error_if_exists)", .0.display())]
    AlreadyExists(PathBuf),

    /// The database directory is locked by another open handle.
    #[error("database is locked: {0}")]
    Locked(PathBuf),

    /// Writes are refused: the log or background work failed and the
    /// database cannot take more writes until that failure is fixed. Reads
    /// go on. `cause` is the failure: a retryable I/O error (no space, an
    /// I/O error on write, an interrupted call) is retried by itself, with
    /// backoff, and writes resume when it clears; any other I/O error or a
    /// caught panic waits for [`crate::Db::resume`]; corruption needs a
    /// reopen (or `siftdb repair`).
    #[error("database is read-only: {cause} ({})", recovery_hint(cause))]
    ReadOnly {
        /// What failed.
        cause: Box<Error>,
    },

    /// Background work (a flush or a compaction) that the call waited for
    /// failed; writes may go on (see `ReadOnly` for when they cannot).
    /// `cause` is the failure, retried as `ReadOnly` describes.
    #[error("background work failed: {cause} ({})", recovery_hint(cause))]
    Background {
        /// What failed.
        cause: Box<Error>,
    },

    /// A panic inside siftdb (in background work, or in a blocking task),
    /// caught and turned into an error; the message is the panic's.
    #[error("internal panic: {0}")]
    Panicked(String),

    /// The database is closing: its background work has stopped.
    #[error("the database is closing")]
    Closed,

    /// `Db::close` closed the database (background work stopped, the log
    /// synced and marked closed), but handles of it still live and keep
    /// its directory locked until they drop.
    #[error(
        "the database is closed, but {handles} of it still live: its directory stays locked \
         until they are dropped"
    )]
    HandlesLive {
        /// The live handles: "1 Keyspace, 2 Snapshots".
        handles: String,
    },

    /// A transaction's commit was refused: a key it wrote (or, when
    /// serializable, a key or range it read) was written by a commit after
    /// its snapshot. Nothing of it was written; run it again.
    #[error("transaction conflict: a key it touched was written after its snapshot; retry it")]
    Conflict,

    /// A locking transaction waited for the lock of `key` longer than its
    /// lock timeout ([`crate::TransactionOptions::lock_timeout`]): another
    /// transaction held it all that time. The transaction keeps the locks
    /// it had; roll it back (drop it) and run it again, or go on without
    /// that key.
    #[error(
        "lock timeout: key {} stayed locked by another transaction for {timeout:?}",
        String::from_utf8_lossy(.key)
    )]
    LockTimeout {
        /// The key whose lock was not taken.
        key: Vec<u8>,
        /// How long the transaction waited.
        timeout: std::time::Duration,
    },

    /// A locking transaction's wait for the lock of `key` would close a
    /// cycle of transactions each waiting for the next: it is the one
    /// refused (at once, without waiting) so that the others go on. It
    /// keeps the locks it had; roll it back (drop it) and run it again.
    #[error(
        "deadlock: waiting for key {} would close a cycle of waiting transactions; roll back and retry",
        String::from_utf8_lossy(.key)
    )]
    Deadlock {
        /// The key whose lock was refused.
        key: Vec<u8>,
    },

    /// A key's merge operands could not be merged: the merge operator
    /// refused them (returned `None`), or the keyspace holding them has no
    /// merge operator (`Options::merge_operator`). Reads of that key fail
    /// this way until a put, delete or range delete of it replaces the
    /// operands; flushes and compactions keep them unmerged
    /// (`Stats::merges_refused` counts them), and other keys are
    /// unaffected.
    #[error("merge of key {} failed: {reason}", String::from_utf8_lossy(.key))]
    MergeFailed {
        /// The key.
        key: Vec<u8>,
        /// Why.
        reason: String,
    },
}

/// What happens to a failure of background work or of the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureClass {
    /// May clear by itself (no space, EIO on write, EINTR...): retried with backoff.
    Retryable,
    /// Retried only when asked (`Db::resume`).
    Hard,
    /// Not retried: the database's own bytes are damaged.
    Fatal,
}

fn recovery_hint(cause: &Error) -> &'static str {
    if let Error::InvalidArgument(_) = cause.root() {
        // Not a failure: the database was opened read-only.
        return "reopen it without read_only to write";
    }
    match cause.class() {
        FailureClass::Retryable => "retried automatically; Db::resume retries now",
        FailureClass::Hard => "Db::resume retries it once its cause is fixed",
        FailureClass::Fatal => "reopen the database; `siftdb repair` salvages a damaged one",
    }
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

    /// What this error says without its kind's prefix: the text of an
    /// `InvalidArgument`, "WHAT: DETAIL" of a `Corruption`, the whole
    /// message of any other. For an error that wraps another of the same
    /// kind, so that none reads "invalid argument: invalid argument: …".
    pub(crate) fn detail(&self) -> String {
        match self {
            Error::InvalidArgument(detail) => detail.clone(),
            Error::Corruption { what, detail } => format!("{what}: {detail}"),
            other => other.to_string(),
        }
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
            Error::UnsupportedVersion {
                path,
                kind,
                found,
                supported,
            } => Error::UnsupportedVersion {
                path: path.clone(),
                kind,
                found: *found,
                supported: *supported,
            },
            Error::InvalidArgument(d) => Error::InvalidArgument(d.clone()),
            Error::Locked(p) => Error::Locked(p.clone()),
            Error::AlreadyExists(p) => Error::AlreadyExists(p.clone()),
            Error::NotADatabase { path, reason } => Error::NotADatabase {
                path: path.clone(),
                reason: reason.clone(),
            },
            Error::ReadOnly { cause } => Error::ReadOnly {
                cause: Box::new(cause.duplicate()),
            },
            Error::Background { cause } => Error::Background {
                cause: Box::new(cause.duplicate()),
            },
            Error::Panicked(m) => Error::Panicked(m.clone()),
            Error::Closed => Error::Closed,
            Error::HandlesLive { handles } => Error::HandlesLive {
                handles: handles.clone(),
            },
            Error::Conflict => Error::Conflict,
            Error::LockTimeout { key, timeout } => Error::LockTimeout {
                key: key.clone(),
                timeout: *timeout,
            },
            Error::Deadlock { key } => Error::Deadlock { key: key.clone() },
            Error::MergeFailed { key, reason } => Error::MergeFailed {
                key: key.clone(),
                reason: reason.clone(),
            },
        }
    }

    /// The failure itself under `ReadOnly`/`Background`.
    fn root(&self) -> &Error {
        match self {
            Error::ReadOnly { cause } | Error::Background { cause } => cause.root(),
            other => other,
        }
    }

    /// `ReadOnly` with a copy of `cause` (never nested).
    pub(crate) fn read_only(cause: &Error) -> Error {
        Error::ReadOnly {
            cause: Box::new(cause.root().duplicate()),
        }
    }

    /// `Background` with a copy of `cause` (never nested).
    pub(crate) fn background(cause: &Error) -> Error {
        Error::Background {
            cause: Box::new(cause.root().duplicate()),
        }
    }

    /// True for an I/O error that may clear by itself: no space (or quota),
    /// an I/O error (EIO), an interrupted or timed-out call. Background work
    /// that fails this way is retried with backoff; for `ReadOnly`, whether
    /// its cause is.
    pub fn is_retryable(&self) -> bool {
        use std::io::ErrorKind;
        match self {
            Error::Io { source, .. } => {
                matches!(
                    source.kind(),
                    ErrorKind::StorageFull
                        | ErrorKind::QuotaExceeded
                        | ErrorKind::Interrupted
                        | ErrorKind::TimedOut
                        | ErrorKind::WouldBlock
                ) || is_eio(source)
            }
            Error::ReadOnly { cause } | Error::Background { cause } => cause.is_retryable(),
            _ => false,
        }
    }

    /// How background work treats this failure.
    pub(crate) fn class(&self) -> FailureClass {
        match self {
            Error::Corruption { .. } | Error::UnsupportedVersion { .. } => FailureClass::Fatal,
            Error::ReadOnly { cause } | Error::Background { cause } => cause.class(),
            e if e.is_retryable() => FailureClass::Retryable,
            _ => FailureClass::Hard,
        }
    }

    /// This error with `path` as the file of an `UnsupportedVersion` (a
    /// decoder that knew only the file's name gets the whole path from the
    /// caller that opened the file); any other error unchanged.
    pub(crate) fn at_path(self, path: &std::path::Path) -> Error {
        match self {
            Error::UnsupportedVersion {
                kind,
                found,
                supported,
                ..
            } => Error::UnsupportedVersion {
                path: path.to_path_buf(),
                kind,
                found,
                supported,
            },
            other => other,
        }
    }

    /// True for `Error::Corruption`.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }
}

impl From<siftdb_filter::Error> for Error {
    /// The filter library's error, its kind and message kept.
    fn from(e: siftdb_filter::Error) -> Error {
        match e {
            siftdb_filter::Error::Corruption { what, detail } => Error::Corruption { what, detail },
            siftdb_filter::Error::InvalidArgument(detail) => Error::InvalidArgument(detail),
            other => Error::InvalidArgument(other.to_string()),
        }
    }
}

impl From<siftdb_filter::FilterParseError> for Error {
    /// A point-filter block that does not parse: corruption.
    fn from(e: siftdb_filter::FilterParseError) -> Error {
        Error::from(siftdb_filter::Error::from(e))
    }
}

impl From<std::io::Error> for Error {
    fn from(source: std::io::Error) -> Error {
        Error::Io { path: None, source }
    }
}

#[cfg(unix)]
fn is_eio(e: &std::io::Error) -> bool {
    rustix::io::Errno::from_io_error(e) == Some(rustix::io::Errno::IO)
}

#[cfg(not(unix))]
fn is_eio(_: &std::io::Error) -> bool {
    false
}

/// A named truncation error: `"table footer: 12 bytes short"`.
pub(crate) fn truncated(what: &str, short_by: usize) -> Error {
    Error::corruption(what, format!("{short_by} bytes short"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::ErrorKind;

    fn io(kind: ErrorKind) -> Error {
        Error::io("x", std::io::Error::new(kind, "test"))
    }

    #[test]
    fn failures_are_classed_by_kind() {
        for kind in [
            ErrorKind::StorageFull,
            ErrorKind::QuotaExceeded,
            ErrorKind::Interrupted,
        ] {
            assert_eq!(io(kind).class(), FailureClass::Retryable, "{kind:?}");
        }
        #[cfg(unix)]
        assert!(Error::from(std::io::Error::from(rustix::io::Errno::IO)).is_retryable());
        assert_eq!(io(ErrorKind::PermissionDenied).class(), FailureClass::Hard);
        assert_eq!(io(ErrorKind::Other).class(), FailureClass::Hard);
        assert_eq!(Error::Panicked("x".into()).class(), FailureClass::Hard);
        assert_eq!(Error::corruption("a", "b").class(), FailureClass::Fatal);
        let read_only = Error::read_only(&io(ErrorKind::StorageFull));
        assert!(read_only.is_retryable());
        // Never nested.
        let again = Error::read_only(&read_only);
        assert!(matches!(&again, Error::ReadOnly { cause } if matches!(**cause, Error::Io { .. })));
        let text = Error::read_only(&Error::corruption("log 000003.wal", "bad")).to_string();
        assert!(text.contains("siftdb repair"), "{text}");
    }

    #[test]
    fn an_unsupported_version_names_the_file_and_both_versions() {
        let err = Error::UnsupportedVersion {
            path: PathBuf::from("/x/000004.log"),
            kind: "write-ahead log",
            found: 3,
            supported: 4,
        };
        assert_eq!(
            err.to_string(),
            "write-ahead log /x/000004.log has format version 3; this build reads version 4 only"
        );
        assert_eq!(err.class(), FailureClass::Fatal);
        assert!(matches!(
            err.duplicate(),
            Error::UnsupportedVersion { found: 3, .. }
        ));
    }
}
