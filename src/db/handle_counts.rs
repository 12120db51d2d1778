//! The counts of the handles that keep a database open after its `Db` is
//! gone.
//!
//! Owns: [`HandleCounts`] — how many `Keyspace`, `Snapshot`, `Transaction`
//! and `KeyspaceExport` handles of one database live — and how `close`
//! names them.
//! Must never: count on a read or write path (handles are made and dropped
//! by the application, not per operation).

use std::sync::atomic::{AtomicUsize, Ordering};

/// A kind of handle that holds a database (its `DbInner`, and so its
/// directory lock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandleKind {
    Keyspace,
    Snapshot,
    Transaction,
    KeyspaceExport,
}

/// Live handles of one database, by kind.
#[derive(Debug, Default)]
pub(crate) struct HandleCounts {
    keyspaces: AtomicUsize,
    snapshots: AtomicUsize,
    transactions: AtomicUsize,
    exports: AtomicUsize,
}

impl HandleCounts {
    fn count(&self, kind: HandleKind) -> &AtomicUsize {
        match kind {
            HandleKind::Keyspace => &self.keyspaces,
            HandleKind::Snapshot => &self.snapshots,
            HandleKind::Transaction => &self.transactions,
            HandleKind::KeyspaceExport => &self.exports,
        }
    }

    /// A handle of `kind` was made.
    pub(crate) fn made(&self, kind: HandleKind) {
        self.count(kind).fetch_add(1, Ordering::Relaxed);
    }

    /// A handle of `kind` was dropped.
    pub(crate) fn dropped(&self, kind: HandleKind) {
        self.count(kind).fetch_sub(1, Ordering::Relaxed);
    }

    /// The live handles, as the application sees them ("1 Keyspace, 2
    /// Snapshots"): a transaction's own keyspace and snapshot are part of
    /// the transaction. `None` when there are none.
    pub(crate) fn describe(&self) -> Option<String> {
        let load = |kind| self.count(kind).load(Ordering::Relaxed);
        let transactions = load(HandleKind::Transaction);
        let live = [
            (
                load(HandleKind::Keyspace).saturating_sub(transactions),
                "Keyspace",
                "Keyspaces",
            ),
            (
                load(HandleKind::Snapshot).saturating_sub(transactions),
                "Snapshot",
                "Snapshots",
            ),
            (transactions, "Transaction", "Transactions"),
            (
                load(HandleKind::KeyspaceExport),
                "KeyspaceExport",
                "KeyspaceExports",
            ),
        ];
        let parts: Vec<String> = live
            .iter()
            .filter(|(n, _, _)| *n > 0)
            .map(|&(n, one, many)| format!("{n} {}", if n == 1 { one } else { many }))
            .collect();
        (!parts.is_empty()).then(|| parts.join(", "))
    }
}
