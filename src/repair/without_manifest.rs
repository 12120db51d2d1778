//! Repair without an intact manifest (damaged or missing): every table
//! and log file in the directory is read, and everything readable is
//! merged into one sorted run at the bottom level with a new manifest.
//!
//! Owns: `Repair::without_manifest`.
//! Must never: trust a table's claims beyond its checksummed properties,
//! or delete an original (it goes to `lost/`).

use std::collections::BTreeMap;

use crate::error::Result;
use crate::filename::{table_file_name, wal_file_name, FileKind, MANIFEST_FILE};
use crate::key::SeqNo;
use crate::manifest::{KeyspaceRecord, ManifestState, DEFAULT_KEYSPACE_ID, DEFAULT_KEYSPACE_NAME};
use crate::table::TableKeyspace;
use crate::wal::salvage;

use super::examine::{settings_from_tables, Candidate};
use super::logs::Recovered;
use super::merge::disjoint_runs;
use super::report::{LogAction, LogReport, TableAction, TableReport};
use super::{recovered_keyspace_name, Repair};

impl Repair<'_> {
    /// Without an intact manifest: every readable entry of every table and
    /// log, merged into one sorted run at the bottom level.
    pub(super) fn without_manifest(&mut self, numbered: &[(FileKind, u64)]) -> Result<()> {
        let mut examined = Vec::new();
        for &(kind, number) in numbered {
            if kind == FileKind::Table {
                let candidate = Candidate {
                    name: table_file_name(number),
                    record: None,
                };
                examined.push(self.examine(candidate)?);
            }
        }
        let zones = self.zones(&examined);
        // Per keyspace, the newest sequence number in its tables: its
        // records at or below it in a log were flushed before the manifest
        // was lost (a keyspace's memtables are flushed oldest first).
        let mut in_tables: BTreeMap<u32, SeqNo> = BTreeMap::new();
        for e in &examined {
            if let Some(max) = e.max_seq {
                let newest = in_tables.entry(e.keyspace.id).or_insert(max);
                *newest = (*newest).max(max);
            }
        }
        let flushed = in_tables.clone();
        let keep = move |id: u32, _log: u64, seq: SeqNo| flushed.get(&id).is_none_or(|&t| seq > t);
        let mut logs: Vec<u64> = numbered
            .iter()
            .filter(|&&(kind, _)| kind == FileKind::Wal)
            .map(|&(_, n)| n)
            .collect();
        logs.sort_unstable();
        let mut last_sequence = in_tables.values().copied().max().unwrap_or(SeqNo(0));
        let mut recovered = Recovered::default();
        for number in logs {
            let name = wal_file_name(number);
            let bytes = self.fs.read_all(&self.path(&name))?;
            let log = salvage(&bytes);
            let unflushed = log.batches.iter().any(|(_, b)| {
                b.ops_with_seq()
                    .any(|(seq, op)| keep(op.keyspace, number, seq))
            });
            let obsolete = !log.batches.is_empty() && log.lost.is_empty() && !unflushed;
            if obsolete {
                self.report.logs.push(LogReport {
                    file: name.clone(),
                    action: LogAction::Obsolete,
                    records_kept: 0,
                    lost: Vec::new(),
                    torn_tail: None,
                });
            } else {
                recovered.keep = Some(Box::new(keep.clone()));
                let max = self.salvage_log(number, &bytes, LogAction::Merged, &mut recovered);
                last_sequence = last_sequence.max(max);
            }
            self.replace(&name);
        }

        // Every keyspace found: in a table's properties, or only in a log.
        let mut keyspaces: BTreeMap<u32, String> = BTreeMap::new();
        keyspaces.insert(DEFAULT_KEYSPACE_ID, DEFAULT_KEYSPACE_NAME.to_string());
        for e in &examined {
            if e.keyspace.id != DEFAULT_KEYSPACE_ID {
                keyspaces
                    .entry(e.keyspace.id)
                    .or_insert_with(|| e.keyspace.name.clone());
            }
        }
        for &id in recovered.mems.keys() {
            keyspaces
                .entry(id)
                .or_insert_with(|| recovered_keyspace_name(id));
        }
        // Two keyspaces under one name (one recreated after a drop whose
        // tables survived): the older keeps the name.
        let mut names_taken = std::collections::HashSet::new();
        for (id, name) in keyspaces.iter_mut() {
            if !crate::manifest::valid_keyspace_name(name) || !names_taken.insert(name.clone()) {
                *name = recovered_keyspace_name(*id);
                names_taken.insert(name.clone());
            }
        }

        let mut settings = settings_from_tables(&examined);
        let runs = disjoint_runs(&examined);
        let mut counts = vec![(0u64, 0u64); examined.len()];
        let mut records = Vec::new();
        let mut out = None;
        let merged = (|| -> Result<()> {
            for (&id, name) in &keyspaces {
                let keyspace = TableKeyspace {
                    id,
                    name: name.clone(),
                };
                let memtable = recovered.mems.remove(&id).unwrap_or_default();
                self.merge_keyspace(
                    &keyspace,
                    &examined,
                    &runs,
                    memtable,
                    &zones,
                    &mut counts,
                    &mut records,
                    &mut out,
                )?;
            }
            Ok(())
        })();
        if let Err(err) = merged {
            if let Some(out) = out {
                self.abandon(out);
            }
            for r in &records {
                let _ = self.fs.remove(&self.path(&table_file_name(r.file_number)));
            }
            return Err(err);
        }
        for (e, (kept, dropped)) in examined.into_iter().zip(counts) {
            self.report.tables.push(TableReport {
                file: e.candidate.name.clone(),
                level: None,
                action: TableAction::Merged,
                entries_kept: kept,
                entries_dropped: dropped,
                lost: e.lost,
                problems: e.problems,
            });
            self.replace(&e.candidate.name);
        }
        if self.fs.exists(&self.path(MANIFEST_FILE)) {
            self.replace(MANIFEST_FILE);
        }
        for r in &records {
            last_sequence = last_sequence.max(r.max_seq);
        }
        let log_number = self.new_number();
        let new_state = ManifestState {
            next_file_number: self.next_number,
            last_sequence,
            log_number,
            closed_log: None,
            next_keyspace_id: keyspaces.keys().max().map_or(1, |&id| id + 1),
            keyspaces: keyspaces
                .into_iter()
                .map(|(id, name)| KeyspaceRecord {
                    id,
                    name,
                    log_number,
                    settings: settings.remove(&id).unwrap_or_default(),
                })
                .collect(),
            tables: records,
            blob_files: Vec::new(),
        };
        // The new tables hold everything read; the originals go before the
        // manifest is written, so a crash in between leaves a directory
        // whose next repair finds the same data in the new tables.
        if !self.dry_run {
            self.fs.sync_dir(self.dir)?;
        }
        self.move_replaced_to_lost()?;
        self.write_manifest(&new_state)
    }
}
