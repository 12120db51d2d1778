//! What a repair reads from logs: the readable records of each log
//! (`wal::salvage`) into per-keyspace memtables, skipping the operations
//! the tables already hold.
//!
//! Owns: `Repair::salvage_log`, [`Recovered`].
//! Must never: keep a record whose checksum failed, or write a file.

use std::collections::BTreeMap;

use crate::batch::DecodedBatch;
use crate::filename::wal_file_name;
use crate::key::SeqNo;
use crate::memtable::Memtable;
use crate::wal::salvage;

use super::report::{LogAction, LogReport};
use super::Repair;

/// What logs hold that tables do not, per keyspace id.
#[derive(Default)]
pub(super) struct Recovered {
    pub(super) mems: BTreeMap<u32, Memtable>,
    /// Which operations to keep, by (keyspace id, log number, sequence
    /// number); `None`: all. With a manifest: not those of a dropped
    /// keyspace or of a log whose records of their keyspace its tables
    /// hold; without: not those at or below the newest sequence number in
    /// their keyspace's tables (each keyspace flushes its memtables oldest
    /// first, so those are in its tables, or were compacted away).
    pub(super) keep: Option<KeepOp>,
}

/// Whether to keep an operation of (keyspace id, log number, sequence number).
pub(super) type KeepOp = Box<dyn Fn(u32, u64, SeqNo) -> bool>;

impl Recovered {
    /// Inserts every operation of `batch` from log `log` (of the keyspaces
    /// kept); returns its last sequence number.
    pub(super) fn apply(&mut self, batch: &DecodedBatch<'_>, log: u64) -> SeqNo {
        let mut seq = batch.first_seq;
        for op in &batch.ops {
            if self
                .keep
                .as_ref()
                .is_none_or(|keep| keep(op.keyspace, log, seq))
            {
                // Refused only for a (key, sequence) pair already inserted,
                // whose first value stays, or a key or value over 4 GiB,
                // which no record whose checksum held can carry: repair
                // keeps what it can read.
                let memtable = self.mems.entry(op.keyspace).or_default();
                let _ = memtable.apply(op, seq);
            }
            seq = seq.next();
        }
        batch.last_seq().unwrap_or(SeqNo(0))
    }
}

impl Repair<'_> {
    /// Reads what can be read of a log into `recovered`; returns the
    /// largest sequence number replayed.
    pub(super) fn salvage_log(
        &mut self,
        number: u64,
        bytes: &[u8],
        action: LogAction,
        recovered: &mut Recovered,
    ) -> SeqNo {
        let name = wal_file_name(number);
        let log = salvage(bytes);
        let mut max = SeqNo(0);
        for (_, batch) in &log.batches {
            max = max.max(recovered.apply(batch, number));
        }
        if !log.lost.is_empty() {
            self.report.uncertain.push(format!(
                "{name}: {} damaged stretch(es) of records skipped; which keys they wrote is \
                 unknown, so a key they deleted or overwrote may show its older value",
                log.lost.len()
            ));
        }
        self.report.logs.push(LogReport {
            file: name.to_string(),
            action,
            records_kept: log.batches.len() as u64,
            lost: log.lost,
            torn_tail: log.torn_tail.map(|t| (t.offset, t.reason)),
        });
        max
    }
}
