//! A log the manifest records as closed cleanly, held against what the
//! file holds now: [`cut_short`] (the log lacks bytes or its close record)
//! and [`closed_log_missing`] (the log is gone).
//!
//! Owns: the wording of that finding, shared by `open` (which refuses or
//! reports it), `verify` and `repair`, so all three say the same. Must
//! never: read or change a file (callers hand it the bytes and their
//! replay), or call a log that is exactly as its close left it damaged.

use super::replay::WalReplay;
use crate::filename::wal_file_name;
use crate::manifest::ClosedLog;

/// What a log the manifest records as closed cleanly (`closed`) lacks
/// now that it holds `bytes` and replayed as `log`: `None` when it is
/// exactly as the close left it, else (where its intact records end, what
/// is wrong).
pub(crate) fn cut_short(
    closed: ClosedLog,
    bytes: &[u8],
    log: &WalReplay<'_>,
) -> Option<(u64, String)> {
    let len = bytes.len() as u64;
    if log.closed_cleanly && len == closed.len {
        return None;
    }
    let offset = log.valid_len(bytes.len());
    Some((
        offset,
        format!(
            "the manifest records a clean close of this log at {} bytes, but it holds {len}{}: \
             acknowledged writes after offset {offset} may be lost",
            closed.len,
            if log.closed_cleanly {
                ""
            } else {
                " and no close record"
            }
        ),
    ))
}

/// What the open reports for a log the manifest records as closed cleanly
/// that is missing.
pub(crate) fn closed_log_missing(closed: ClosedLog) -> (String, u64, String) {
    (
        wal_file_name(closed.number),
        0,
        format!(
            "the manifest records a clean close of this log at {} bytes, but it is missing: \
             every acknowledged write in it may be lost",
            closed.len
        ),
    )
}
