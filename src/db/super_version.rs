//! The super-version: everything a read of one keyspace needs (its active
//! memtable, the immutable memtables waiting for a flush, and its table
//! version), swapped as one.
//!
//! Owns: `SuperVersion` and `LoggedMemtable`, and what can be read off them
//! without a lock. Must never: change once published (a new one replaces
//! it whole), or hold a lock a reader would wait on.

use std::sync::Arc;

use super::version::Version;
use super::version::LEVELS;
use crate::memtable::Memtable;

/// Immutable memtables allowed to wait for flushing before writers stall.
pub(crate) const MAX_IMMUTABLE: usize = 2;

/// A memtable and the log that holds its records.
#[derive(Clone)]
pub(crate) struct LoggedMemtable {
    pub mem: Arc<Memtable>,
    pub log_number: u64,
}

/// Everything a read of one keyspace needs, swapped as one.
pub(crate) struct SuperVersion {
    /// The active memtable; its log number is the first log that may hold
    /// its records (a memtable may span logs: another keyspace's rotation
    /// starts a new log without sealing it).
    pub mem: LoggedMemtable,
    /// Immutable memtables waiting for a flush, newest first.
    pub imm: Vec<LoggedMemtable>,
    pub version: Arc<Version>,
}

impl SuperVersion {
    /// A keyspace with nothing in it.
    pub fn empty() -> SuperVersion {
        SuperVersion {
            mem: LoggedMemtable {
                mem: Arc::new(Memtable::new()),
                log_number: 0,
            },
            imm: Vec::new(),
            version: Arc::new(Version::with_levels(LEVELS)),
        }
    }

    /// Nothing in the memtables: every write of the keyspace is in its
    /// tables (the trigger of [`crate::Options::level0_quiet_trigger`]).
    pub fn is_quiet(&self) -> bool {
        self.mem.mem.is_empty() && self.imm.is_empty()
    }

    /// Approximate bytes of the immutable memtables.
    pub fn immutable_bytes(&self) -> usize {
        self.imm.iter().map(|m| m.mem.approximate_bytes()).sum()
    }

    /// The oldest log that may hold records of this keyspace not yet in
    /// its tables.
    pub fn oldest_log(&self) -> u64 {
        self.imm
            .last()
            .map_or(self.mem.log_number, |m| m.log_number)
    }
}
