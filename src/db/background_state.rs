//! The state the background threads share with the callers that wait on
//! them: shutdown, which lane is busy, the two failure slots and the full
//! compactions asked for.
//!
//! Owns: [`BgState`] and a recorded [`Failure`], as `DbInner` holds them
//! under its background lock. Must never: reach the database's state (the
//! background threads, in `background.rs`, work on it).

use std::time::Instant;

use crate::db::compaction_scope::CompactionScope;
use crate::error::{Error, FailureClass};

/// A failure of background work (or of the log) and its retry schedule.
pub(crate) struct Failure {
    pub error: Error,
    pub class: FailureClass,
    /// Consecutive failed attempts.
    pub attempts: u32,
    /// When the next automatic attempt is due; `None` for failures only
    /// `Db::resume` retries.
    pub retry_at: Option<Instant>,
    /// The log failed: recovery must seal it and start a new one.
    pub log: bool,
}

/// What the background threads and the callers waiting on them share,
/// under `DbInner::bg`.
#[derive(Default)]
pub(crate) struct BgState {
    pub shutdown: bool,
    /// Per lane (`Lane as usize`): a unit of work is running.
    pub busy: [bool; 2],
    pub flush_failure: Option<Failure>,
    pub compaction_failure: Option<Failure>,
    /// Failed compactions so far (a full compaction's caller waits for
    /// success or for a failure newer than its request).
    pub compaction_failures: u64,
    pub resume_requested: u64,
    /// Per lane: the newest resume request it has answered (retried its
    /// slot's failure, or found none to retry).
    pub resume_done: [u64; 2],
    pub full_requested: u64,
    pub full_done: u64,
    /// What full compactions were asked for and not yet done (every
    /// keyspace, one, or a range of one). Cleared when a full compaction
    /// finishes with no newer request; a request made while one runs keeps
    /// its scope for the next (which may redo what the running one did:
    /// more work, never a request lost).
    pub full_scopes: Vec<CompactionScope>,
}
