//! What a full compaction is asked to cover: every keyspace, one, or a key
//! range of one.
//!
//! Owns: [`CompactionScope`] and the owned key range it carries, shared by
//! the callers that ask for a full compaction (`Db::compact`,
//! `Keyspace::compact_range`), the background state that queues the
//! requests, and the compaction that runs them.
//! Must never: name the database's state (it sits below `DbInner`, which
//! holds queued scopes).

use std::ops::Bound;

/// A key range with owned bounds (what `iter::owned_range` makes).
pub(crate) type OwnedRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// What a full compaction is asked to cover.
#[derive(Clone, Debug)]
pub(crate) enum CompactionScope {
    /// Every table of every keyspace.
    All,
    /// Every table of one keyspace (by id).
    Keyspace(u32),
    /// The tables of one keyspace (by id) holding keys in a range.
    Range(u32, OwnedRange),
}

impl CompactionScope {
    /// Whether the scope takes tables of keyspace `tree`.
    pub(crate) fn takes_from(&self, tree: u32) -> bool {
        match self {
            CompactionScope::All => true,
            CompactionScope::Keyspace(id) | CompactionScope::Range(id, _) => *id == tree,
        }
    }
}
