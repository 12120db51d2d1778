//! Manual flushes and compactions: the work an application asks for and
//! waits on (`Db::flush`, `Db::compact`, `Keyspace::compact`, the
//! `compact_range` calls), done by the background threads.
//!
//! Owns: what such a call does before it waits — a read-only database
//! refused, the memtables sealed, a compaction refused while a table it
//! would read could not be opened. Must never: compact without flushing
//! first (a compaction reads only tables), or return before the work is
//! durable.

use crate::db::background;
use crate::db::checks::check_writable;
use crate::db::compaction_scope::CompactionScope;
use crate::db::inner::DbInner;
use crate::db::write;
use crate::error::Result;

/// What [`Db::flush`](crate::Db::flush) does, for `Db` and its keyspaces:
/// the memtables sealed, then their flushes waited for.
pub(crate) fn flush(inner: &DbInner) -> Result<()> {
    check_writable(inner)?;
    write::rotate_if_nonempty(inner)?;
    background::wait_for_flushes(inner)
}

/// What the compact calls do: flush, refuse while a table `scope` takes
/// from could not be opened, then the full compaction of `scope`,
/// waited for.
pub(crate) fn compact(inner: &DbInner, scope: CompactionScope) -> Result<()> {
    flush(inner)?;
    for tree in inner.trees.load().iter() {
        if scope.takes_from(tree.id) {
            tree.check_undamaged()?;
        }
    }
    background::request_full_compaction(inner, scope)
}
