//! Database options for tests that want flushes and compactions early.
//!
//! Owns: [`busy_tree_options`].
//! Must never: be used for performance figures (its sizes are tiny).

use siftdb::Options;

/// Default options with a 16 KiB memtable, level-0 compaction at 2 tables,
/// a 64 KiB level 1 and 32 KiB tables: a few thousand small writes rotate
/// memtables, flush and compact several levels deep.
pub fn busy_tree_options() -> Options {
    Options::default()
        .memtable_bytes(16 << 10)
        .level0_compaction_trigger(2)
        .level1_bytes(64 << 10)
        .table_target_bytes(32 << 10)
}
