//! Blob garbage: the figures of each blob file a keyspace's tables point
//! into — what was written to it, and how much of that no table points to
//! any more — carried by every version into the manifest, and the
//! compaction they call for once a file's garbage share reaches
//! `Options::blob_gc_garbage_ratio`.
//!
//! A flush or compaction that writes a blob file adds its figures; a
//! compaction adds to a file's garbage what it read of the file less what
//! it wrote back as pointers: the pointers it dropped (older versions,
//! deletes, range deletes, a filter's removals) and the values it
//! relocated. A file at or past the ratio has its values rewritten by
//! every compaction that meets them (`compaction_blobs::collected_files`),
//! and when no level is over its budget the picker rewrites a table that
//! points into it ([`garbage_pick`]); the file goes once no table lists it.
//!
//! Owns: [`BlobEdit`] and its application to a version, which files are
//! past the ratio, and which table the garbage pick rewrites.
//! Must never: let a file's garbage pass its total, keep figures of a file
//! no table of the version points into (unless a damaged table hides
//! which), or pick a damaged table.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::blob::tally::BlobBytes;
use crate::blob::BlobFileInfo;
use crate::db::version::{LiveTable, Version};
use crate::manifest::BlobFileRecord;
use crate::options::Options;

/// What one flush or compaction changes of the blob file figures.
#[derive(Debug, Default)]
pub(crate) struct BlobEdit {
    /// The blob files it wrote.
    pub added: Vec<BlobFileInfo>,
    /// Per blob file, the pointers it read (its inputs' entries).
    pub read: BTreeMap<u64, BlobBytes>,
    /// Per blob file, the pointers it wrote back (moved into its outputs).
    pub written: BTreeMap<u64, BlobBytes>,
}

impl BlobEdit {
    /// The edit of a flush (or a recovery) that wrote `added`.
    pub fn adding(added: impl IntoIterator<Item = BlobFileInfo>) -> BlobEdit {
        BlobEdit {
            added: added.into_iter().collect(),
            ..BlobEdit::default()
        }
    }
}

/// `version` (just built by `Version::apply` from the version the edit
/// was made against) with `edit` applied to its blob file figures, and the
/// figures of files none of its tables point into dropped.
pub(crate) fn with_edit(mut version: Version, edit: &BlobEdit) -> Version {
    let mut files = (*version.blob_files).clone();
    for info in &edit.added {
        files.insert(
            info.number,
            BlobFileRecord {
                file_number: info.number,
                total_bytes: info.value_bytes,
                total_values: info.records,
                ..BlobFileRecord::default()
            },
        );
    }
    for (number, read) in &edit.read {
        let written = edit.written.get(number).copied().unwrap_or_default();
        if let Some(file) = files.get_mut(number) {
            let bytes = read.bytes.saturating_sub(written.bytes);
            let values = read.values.saturating_sub(written.values);
            file.garbage_bytes = file
                .garbage_bytes
                .saturating_add(bytes)
                .min(file.total_bytes);
            file.garbage_values = file
                .garbage_values
                .saturating_add(values)
                .min(file.total_values);
        }
    }
    if let Some(live) = referenced(&version) {
        files.retain(|number, _| live.binary_search(number).is_ok());
    }
    version.blob_files = Arc::new(files);
    version
}

/// The blob files the tables of `version` point into, sorted; `None` when
/// a table could not be opened (its blob files are unknown).
fn referenced(version: &Version) -> Option<Vec<u64>> {
    let mut live = Vec::new();
    for table in version.levels.iter().flatten() {
        live.extend_from_slice(table.table.as_ref().ok()?.blob_file_numbers());
    }
    live.sort_unstable();
    live.dedup();
    Some(live)
}

/// The blob files of `version` whose garbage share is at or past
/// `Options::blob_gc_garbage_ratio` (none when it is off).
pub(crate) fn past_ratio<'v>(
    version: &'v Version,
    opts: &Options,
) -> impl Iterator<Item = &'v BlobFileRecord> {
    let ratio = opts.blob_gc_garbage_ratio;
    version
        .blob_files
        .values()
        .filter(move |file| ratio.is_some_and(|ratio| file.garbage_share() >= ratio))
}

/// What a garbage collection compacts, as (output level, inputs): for the
/// blob file most past the ratio, the shallowest readable table pointing
/// into it. Deeper than level 0 that table alone, rewritten within its
/// level; at level 0 the whole level and what it overlaps of level 1, as
/// a level-0 compaction (a level-0 table is never rewritten alone: the
/// tables beside it may overlap it), and only when none is damaged.
pub(crate) fn garbage_pick(
    version: &Version,
    opts: &Options,
) -> Option<(usize, Vec<Arc<LiveTable>>)> {
    let mut files: Vec<&BlobFileRecord> = past_ratio(version, opts).collect();
    files.sort_by(|a, b| b.garbage_share().total_cmp(&a.garbage_share()));
    let points_into = |t: &Arc<LiveTable>, number: u64| {
        t.table
            .as_ref()
            .is_ok_and(|table| table.blob_file_numbers().binary_search(&number).is_ok())
    };
    files.into_iter().find_map(|file| {
        let (level, table) = version
            .levels
            .iter()
            .enumerate()
            .find_map(|(level, tables)| {
                let table = tables.iter().find(|t| points_into(t, file.file_number))?;
                Some((level, Arc::clone(table)))
            })?;
        if level > 0 {
            return Some((level, vec![table]));
        }
        let level0 = version.levels.first()?;
        let lo = level0.iter().map(|t| t.smallest_user_key()).min()?;
        let hi = level0.iter().map(|t| t.largest_user_key()).max()?;
        let mut inputs = level0.clone();
        inputs.extend(version.overlapping(1, lo, hi));
        inputs
            .iter()
            .all(|t| !t.is_damaged())
            .then_some((1, inputs))
    })
}
