//! A database as a member of a shared memtable budget
//! (`Options::write_buffer_manager`, `shared/write_buffer.rs`): what its
//! memtables hold, sealing its largest for the budget, and the three
//! hooks the write path and the flush lane call.
//!
//! Owns: the measure of a database's memtable memory the budget counts
//! (each memtable's `memory_bytes`: its arena's blocks, range tombstones
//! and key filter; active and waiting for a flush). Must never: be called with a lock of the database held (the
//! budget may wait, or take this database's writer lock to seal).

use std::sync::{Arc, Weak};

use crate::db::{write, DbInner};
use crate::shared::write_buffer::{BufferedMemory, MemtableMemory};

impl BufferedMemory for DbInner {
    fn memtable_memory(&self) -> MemtableMemory {
        let mut memory = MemtableMemory::default();
        for tree in self.trees.load().iter() {
            let sv = tree.current.load();
            let active = sv.mem.mem.memory_bytes();
            memory.active = memory.active.saturating_add(active);
            if !sv.mem.mem.is_empty() {
                memory.largest_active = memory.largest_active.max(active);
            }
            for waiting in &sv.imm {
                memory.waiting = memory.waiting.saturating_add(waiting.mem.memory_bytes());
            }
        }
        memory
    }

    fn seal_largest(&self) -> bool {
        write::seal_largest(self)
    }

    fn flushes_going(&self) -> bool {
        crate::db::background::rotation_refused(self).is_none()
    }
}

/// Makes the database a member of its budget, if it has one (after the
/// open, once it is shared).
pub(crate) fn attach(inner: &Arc<DbInner>) {
    if let Some(slot) = &inner.write_buffer {
        let weak: Weak<DbInner> = Arc::downgrade(inner);
        slot.attach(weak);
        report(inner);
    }
}

/// Before a write: see `WriteBufferSlot::admit`.
pub(crate) fn admit(inner: &DbInner) {
    if let Some(slot) = &inner.write_buffer {
        slot.admit();
    }
}

/// After a write group or a flush: what the memtables hold now.
pub(crate) fn report(inner: &DbInner) {
    if let Some(slot) = &inner.write_buffer {
        slot.report(inner.memtable_memory().total());
    }
}
