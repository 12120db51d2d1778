//! What a compaction does about blob files: whether it reads its inputs'
//! blob pointers as they are (moving them into its outputs, the value left
//! where it is) and, once its result is installed, which blob files no
//! live table points into any more.
//!
//! A compaction with neither a compaction filter nor a merge operator
//! moves pointers. With either, it reads values resolved (the filter must
//! see the value, the operator merge it), and its outputs separate them
//! again into their own blob files: correct, at the cost of rewriting those
//! values.
//!
//! Owns: that choice, marking blob files obsolete at install, which
//! blob files the live tables point into (what an open keeps), and the
//! counting of the pointers a compaction reads and writes back (from which
//! `blob_garbage` takes each file's new garbage).
//! Must never: mark a blob file obsolete while a table of the installed
//! version points into it (a file so marked is removed only when the last
//! table holding it — in any version a snapshot or scan still pins — is
//! dropped, and an install that sees it referenced again unmarks it).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

use crate::blob::tally::{BlobBytes, BlobTally};
use crate::blob::BlobPointer;
use crate::db::blob_garbage::past_ratio;
use crate::db::flush::EntrySource;
use crate::db::version::{LiveTable, Version};
use crate::error::Result;
use crate::key::{split_internal_key, ValueKind};
use crate::options::Options;
use crate::table::ScanMode;

/// True when the compaction moves blob pointers rather than values.
pub(crate) fn moves_pointers(opts: &Options) -> bool {
    opts.compaction_filter.is_none() && opts.merge_operator.is_none()
}

/// The blob files whose values a compaction of `version` rewrites rather
/// than moving their pointers: the oldest `Options::blob_gc_age_cutoff`
/// share of the blob files its tables point into (RocksDB's age cutoff),
/// and those whose garbage share is at or past
/// `Options::blob_gc_garbage_ratio`.
pub(crate) fn collected_files(version: &Version, opts: &Options) -> Arc<BTreeSet<u64>> {
    let mut numbers = BTreeSet::new();
    for table in version.levels.iter().flatten() {
        if let Ok(table) = table.table.as_ref() {
            numbers.extend(table.blob_file_numbers().iter().copied());
        }
    }
    let share = opts.blob_gc_age_cutoff.clamp(0.0, 1.0);
    let limit = numbers.len() as f64 * share;
    Arc::new(
        numbers
            .into_iter()
            .enumerate()
            .take_while(|(i, _)| *i as f64 + 1.0 <= limit)
            .map(|(_, number)| number)
            .chain(past_ratio(version, opts).map(|file| file.file_number))
            .collect(),
    )
}

/// Counts the blob pointers of the entries a compaction writes to its
/// outputs, as they come from its merge (before an output separates
/// values of its own): the pointers it moves on, per blob file.
pub(crate) struct WrittenPointers<'a> {
    pub source: &'a mut dyn EntrySource,
    pub written: BTreeMap<u64, BlobBytes>,
}

impl EntrySource for WrittenPointers<'_> {
    fn next_entry(&mut self) -> Option<Result<(&[u8], &[u8])>> {
        let entry = self.source.next_entry();
        if let Some(Ok((key, value))) = &entry {
            let is_blob = split_internal_key(key)
                .is_some_and(|(_, tag)| tag & 0xff == ValueKind::Blob as u64);
            if let Some(pointer) = is_blob.then(|| BlobPointer::decode(value).ok()).flatten() {
                self.written
                    .entry(pointer.file_number)
                    .or_default()
                    .add(u64::from(pointer.length));
            }
        }
        entry
    }

    fn at_key_boundary(&self) -> bool {
        self.source.at_key_boundary()
    }
}

/// Counts in `tally` the blob pointers of inputs a compaction does not
/// read (a newer range tombstone covers them whole): all of them garbage.
pub(crate) fn tally_unread(tables: &[Arc<LiveTable>], tally: &Arc<BlobTally>) -> Result<()> {
    for live in tables {
        let Ok(table) = live.table.as_ref() else {
            continue;
        };
        if table.blob_file_numbers().is_empty() {
            continue;
        }
        let mut iter = table
            .iter_with(ScanMode::Sequential)
            .keep_blob_pointers()
            .tallying_blobs(Arc::clone(tally));
        iter.seek_to_first()?;
        while iter.valid() {
            iter.next()?;
        }
    }
    Ok(())
}

/// The blob files the tables of `versions` point into; `None` when a
/// table could not be opened (its blob files are then unknown). What an
/// open keeps of the blob files in the directory.
pub(crate) fn live_blob_files<'a>(
    versions: impl IntoIterator<Item = &'a Version>,
) -> Option<BTreeSet<u64>> {
    let mut live = BTreeSet::new();
    for table in versions.into_iter().flat_map(|v| v.levels.iter().flatten()) {
        live.extend(
            table
                .table
                .as_ref()
                .ok()?
                .blob_file_numbers()
                .iter()
                .copied(),
        );
    }
    Some(live)
}

/// After `version` was installed in place of the tables `obsolete`: the
/// blob files `obsolete` pointed into that no table of `version` does are
/// removed once unused; those it does are kept. With a table of `version`
/// that could not be opened (its blob files unknown), nothing is marked.
pub(crate) fn mark_unreferenced(version: &Version, obsolete: &[Arc<LiveTable>]) {
    let mut live = BTreeSet::new();
    for table in version.levels.iter().flatten() {
        match table.table.as_ref() {
            Ok(table) => {
                for file in table.blob_files() {
                    file.keep_file();
                    live.insert(file.number());
                }
            }
            Err(_) => return,
        }
    }
    for table in obsolete.iter().filter_map(|t| t.table.as_ref().ok()) {
        for file in table.blob_files() {
            if !live.contains(&file.number()) {
                file.remove_file_when_unused();
            }
        }
    }
}
