//! [`Table`]: an open table, its metadata in memory, and its data blocks.
//!
//! At open the footer, properties, index and filter are read with
//! positioned reads, checksum-verified and kept in heap memory for the
//! table's life — the filter in a 64-byte-aligned buffer, the index decoded
//! into dense arrays — and never read from the file again, so bytes that
//! change on disk after open cannot change an answer. Data blocks are read
//! with positioned reads, their checksum verified on every read from the
//! file, decompressed when stored compressed, and kept in the database's
//! block cache ([`ReadContext`]); values share the cached block.
//!
//! With `Options::mmap_reads` the file is mapped instead: raw data blocks are
//! slices of the map, each verified the first time it is read (a bitmap
//! remembers it), and that mode's SIGBUS hazard is documented there.
//!
//! Owns: the `Table` handle and its state (`TableInner`: the metadata held
//! in memory, the source of its bytes, the filter's measured answers) and
//! `Table`'s metadata accessors. Opening is `open.rs`'s, reading and caching
//! blocks is `block_reads.rs`'s, the point lookup is `get.rs`'s, scans are
//! `scan.rs`'s (with the cursor in `iter.rs`), the full check is
//! `verify.rs`'s.
//! Must never: return a value from a block whose checksum failed, miss a
//! present key because of a damaged filter (a filter that fails its checks,
//! or whose kind this build does not read, is treated as absent: every key
//! "may match"), raise a signal on a short
//! or failing file outside the opt-in map (a read past the end is an
//! `Error` naming the file), or panic on any file.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use bytes::Bytes;

use crate::blob::{BlobFile, BlobPointer};
use crate::counter::Sharded;
use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::key::{key_head, user_key_of};
use crate::range_tombstone::FragmentedTombstones;
use crate::table::block::Block;
use crate::table::context::ReadContext;
use crate::table::counters::ReadCounters;
use crate::table::format::{BlockHandle, Footer};
use crate::table::index::Index;
use crate::table::overlapped::ReadRequest;
use crate::table::properties::TableProperties;
use crate::table::scan_filters::ScanFilters;
use crate::table::zstd_codec::ZstdDictionary;
use siftdb_filter::{AlignedBytes, AnyFilterView};

/// The state of a table's filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterStatus {
    /// The filter was verified and is used.
    Ok,
    /// The table was built without a filter.
    Missing,
    /// The filter block failed its checks; every key "may match".
    Corrupt(String),
    /// The filter block is of a kind this build does not read (written by
    /// a newer version); every key "may match".
    UnknownKind(String),
}

impl FilterStatus {
    /// True when the table has a filter block that is not used (damaged,
    /// or of an unknown kind).
    pub fn is_unusable(&self) -> bool {
        matches!(
            self,
            FilterStatus::Corrupt(_) | FilterStatus::UnknownKind(_)
        )
    }
}

/// Where a table's bytes come from.
pub(crate) enum Source {
    /// Positioned reads of the file at this path, through the context's
    /// open-file cache (which may close it and reopen it later).
    File(PathBuf),
    /// Positioned reads of one file held open for the table's life.
    Held(Arc<dyn RandomAccessFile>),
    /// The whole file mapped (`Options::mmap_reads`); one bit per data
    /// block: its checksum was verified.
    Mapped {
        map: Bytes,
        verified: Vec<AtomicU64>,
    },
}

impl std::fmt::Debug for Source {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Source::File(path) => write!(f, "File({})", path.display()),
            Source::Held(file) => write!(f, "Held({} bytes)", file.len()),
            Source::Mapped { map, .. } => write!(f, "Mapped({} bytes)", map.len()),
        }
    }
}

/// An open table. Cloning is cheap (a shared handle); iterators hold one.
#[derive(Debug, Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
}

#[derive(Debug)]
pub(crate) struct TableInner {
    /// Unique within the context: the block cache's and open-file cache's key.
    pub(super) id: u64,
    pub(super) name: Arc<str>,
    pub(super) source: Source,
    pub(super) context: Arc<ReadContext>,
    pub(super) file_size: u64,
    pub(super) footer: Footer,
    pub(crate) index: Index,
    pub(super) properties: TableProperties,
    pub(super) filter: Option<AnyFilterView<AlignedBytes>>,
    pub(super) filter_status: FilterStatus,
    /// The table's range tombstones, when it has any: read and checked at
    /// open like the index (a table whose tombstones cannot be read does
    /// not open, since it could not say what it deletes).
    pub(crate) range_tombstones: Option<Arc<FragmentedTombstones>>,
    /// The zstd dictionary of the table's dictionary-compressed data
    /// blocks, when it has one: read, checked and prepared at open (a table
    /// whose dictionary cannot be trusted does not open).
    pub(super) dictionary: Option<ZstdDictionary>,
    /// Prefix trust and the range filter (`scan_filters.rs`).
    pub(crate) scan: ScanFilters,
    /// Lookups this table's filter answered "absent", and lookups it let
    /// through that found nothing: its measured false-positive rate. Kept
    /// per thread (a shard each, added to without a locked instruction),
    /// so readers on two cores that ask the same table do not pass its
    /// cache line back and forth.
    pub(crate) filter_answers: Sharded<FilterAnswers>,
    /// Bytes of memory the filter and the decoded index hold.
    pub(super) filter_bytes: u64,
    pub(super) index_bytes: u64,
    /// Remove the file when the last handle goes (the table left the
    /// database while readers still held it).
    pub(super) remove_file_when_dropped: AtomicBool,
    /// The blob files the table's blob pointers name (properties field 6),
    /// held while the table is: a blob file outlives every table that
    /// points into it.
    pub(crate) blob_files: Vec<Arc<BlobFile>>,
}

/// One shard of a table's filter answers (see `TableInner::filter_answers`).
#[derive(Debug, Default)]
pub(crate) struct FilterAnswers {
    pub(crate) negatives: AtomicU64,
    pub(crate) false_positives: AtomicU64,
}

/// A data block a batched get has at hand, or the read it still needs.
pub(crate) enum BlockOrRead {
    Block(Block),
    Read(ReadRequest),
}

/// The bytes of several consecutive data blocks read with one positioned
/// read (scans that read a whole table: compaction, verify).
#[derive(Debug, Clone)]
pub(crate) struct Span {
    pub(super) first: usize,
    pub(super) last: usize,
    pub(super) offset: u64,
    pub(super) bytes: Bytes,
}

impl Span {
    pub(crate) fn holds(&self, block_no: usize) -> bool {
        (self.first..=self.last).contains(&block_no)
    }

    /// The first and the last block it holds.
    #[cfg(test)]
    pub(crate) fn blocks(&self) -> (usize, usize) {
        (self.first, self.last)
    }
}

impl Table {
    /// True when `user_key` lies within the table's key range.
    #[inline]
    pub fn covers(&self, user_key: &[u8]) -> bool {
        let properties = &self.inner.properties;
        user_key >= user_key_of(&properties.smallest)
            && user_key <= user_key_of(&properties.largest)
    }

    /// The properties block.
    pub fn properties(&self) -> &TableProperties {
        &self.inner.properties
    }

    /// The first internal key.
    pub fn smallest(&self) -> &[u8] {
        &self.inner.properties.smallest
    }

    /// The last internal key.
    pub fn largest(&self) -> &[u8] {
        &self.inner.properties.largest
    }

    /// Bytes of the file when it was opened.
    pub fn file_size(&self) -> u64 {
        self.inner.file_size
    }

    /// The table's file name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether the filter is in use.
    pub fn filter_status(&self) -> &FilterStatus {
        &self.inner.filter_status
    }

    /// The verified filter block (of either kind), held in memory and
    /// queried in place; `None` when the table has no filter or its filter
    /// is not used (see [`Table::filter_status`]). For statistics: kind,
    /// bits per key, fill.
    pub fn filter_view(&self) -> Option<&AnyFilterView<AlignedBytes>> {
        self.inner.filter.as_ref()
    }

    /// Lookups since open that this table's filter answered "absent", and
    /// lookups it let through that found no version of their key (its false
    /// positives, for lookups at the newest snapshot): the filter's measured
    /// rate is `false_positives / (negatives + false_positives)`.
    pub fn filter_answers_since_open(&self) -> (u64, u64) {
        self.inner
            .filter_answers
            .iter()
            .fold((0, 0), |(negatives, false_positives), shard| {
                (
                    negatives + shard.negatives.load(AtomicOrdering::Relaxed),
                    false_positives + shard.false_positives.load(AtomicOrdering::Relaxed),
                )
            })
    }

    /// Bytes of memory the table's filter holds (0 without one).
    pub fn filter_memory(&self) -> u64 {
        self.inner.filter_bytes
    }

    /// Bytes of memory the table's decoded index holds.
    pub fn index_memory(&self) -> u64 {
        self.inner.index_bytes
    }

    /// The footer (handles of the index, filter and properties blocks, and
    /// the format version).
    pub fn footer(&self) -> &Footer {
        &self.inner.footer
    }

    /// The table's range tombstones, fragmented; `None` when it has none.
    pub fn range_tombstones(&self) -> Option<&Arc<FragmentedTombstones>> {
        self.inner.range_tombstones.as_ref()
    }

    /// The handle of every data block, in key order.
    pub fn data_block_handles(&self) -> &[BlockHandle] {
        self.inner.index.handles()
    }

    /// About where in the file the entries ≥ `target` (an internal key)
    /// begin: the offset of the first data block whose last key is ≥
    /// `target`, or the file's size when every key is smaller (the index,
    /// filter and properties after the data count with the last keys). So
    /// the offsets of two targets bound, to a block at each end, the bytes
    /// the entries between them take. Reads nothing: the index is in
    /// memory.
    pub fn approximate_offset_of(&self, target: &[u8]) -> u64 {
        let index = &self.inner.index;
        index
            .block_for(key_head(user_key_of(target)), target)
            .and_then(|block_no| index.handle(block_no))
            .map_or(self.inner.file_size, |handle| handle.offset)
    }

    /// The counters this table updates.
    pub fn counters(&self) -> &Arc<ReadCounters> {
        &self.inner.context.counters
    }

    /// Removes the table's file once the last handle on the table is
    /// dropped: the database calls it when a durable manifest stopped naming
    /// the table, so readers that still hold it (scans, snapshots) keep
    /// reading it until they let go.
    pub fn remove_file_when_unused(&self) {
        self.inner
            .remove_file_when_dropped
            .store(true, AtomicOrdering::Relaxed);
    }

    /// The blob files the table's blob pointers name.
    pub fn blob_file_numbers(&self) -> &[u64] {
        &self.inner.properties.blob_files
    }

    /// The handles on the blob files the table points into (empty for a
    /// table opened from bytes, which cannot resolve its pointers).
    pub(crate) fn blob_files(&self) -> &[Arc<BlobFile>] {
        &self.inner.blob_files
    }

    /// The value an entry of kind blob holds a pointer to: read from the
    /// blob file and checked against the pointer's checksum.
    pub fn resolve_blob(&self, pointer: &[u8]) -> Result<Bytes> {
        self.inner.resolve_blob(pointer)
    }

    /// Takes handles on the blob files the table names, in `dir` (a table
    /// just opened, not yet shared).
    pub(crate) fn attach_blob_files(mut self, dir: &std::path::Path) -> Table {
        if let Some(inner) = Arc::get_mut(&mut self.inner) {
            let context = Arc::clone(&inner.context);
            inner.blob_files = inner
                .properties
                .blob_files
                .iter()
                .map(|&number| context.blob_files.get(&context.fs, dir, number))
                .collect();
        }
        self
    }
}

impl TableInner {
    /// See [`Table::resolve_blob`].
    pub(crate) fn resolve_blob(&self, pointer: &[u8]) -> Result<Bytes> {
        let (file, pointer) = self.blob_for(pointer)?;
        file.read_value(&pointer)
    }

    /// The pointer an entry of kind blob holds, and the blob file it names:
    /// an error here is the table's (a damaged entry), to be located in its
    /// block; an error reading the value is the blob file's.
    pub(crate) fn blob_for(&self, pointer: &[u8]) -> Result<(&Arc<BlobFile>, BlobPointer)> {
        let pointer = BlobPointer::decode(pointer)?;
        let Some(file) = self
            .blob_files
            .iter()
            .find(|f| f.number() == pointer.file_number)
        else {
            return Err(Error::corruption(
                "blob pointer",
                format!(
                    "names blob file {}, which the table does not list",
                    pointer.file_number
                ),
            ));
        };
        Ok((file, pointer))
    }
}

impl TableInner {
    pub(crate) fn filter(&self) -> Option<&AnyFilterView<AlignedBytes>> {
        self.filter.as_ref()
    }

    pub(crate) fn filter_status(&self) -> &FilterStatus {
        &self.filter_status
    }

    pub(crate) fn properties(&self) -> &TableProperties {
        &self.properties
    }

    pub(crate) fn footer(&self) -> &Footer {
        &self.footer
    }

    pub(crate) fn context(&self) -> &ReadContext {
        &self.context
    }
}

impl Drop for TableInner {
    fn drop(&mut self) {
        let context = &self.context;
        context.count_metadata(self.filter_bytes, self.index_bytes, false);
        context.count_range_filter(self.scan.range_bytes(), false);
        // The table's blocks can never be asked for again: free their room.
        for block_no in 0..self.index.len() {
            context.forget_block(self.id, block_no);
        }
        context.forget_file(self.id);
        if self.remove_file_when_dropped.load(AtomicOrdering::Relaxed) {
            if let Source::File(path) = &self.source {
                // Best effort: a file left behind is removed by the next open.
                let _ = context.fs.remove(path);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{compare_internal_keys, internal_key, SeqNo, ValueKind};
    use crate::table::get::tests::build;
    use crate::table::TableOptions;
    use std::cmp::Ordering;

    #[test]
    fn iterator_scans_and_seeks_across_blocks() {
        let entries: Vec<_> = (0..500u32)
            .map(|i| {
                (
                    internal_key(
                        format!("key{:05}", i * 2).as_bytes(),
                        SeqNo(i as u64),
                        ValueKind::Put,
                    ),
                    i.to_le_bytes().to_vec(),
                )
            })
            .collect();
        let options = TableOptions {
            block_size: 256,
            restart_interval: 3,
            ..TableOptions::default()
        };
        let table =
            Table::from_bytes("t.sst", build(&options, &entries), ReadCounters::new()).unwrap();
        assert!(table.data_block_handles().len() > 10);
        let mut it = table.iter();
        assert!(!it.valid());
        it.seek_to_first().unwrap();
        for (k, v) in &entries {
            assert_eq!((it.key(), &it.value()[..]), (&k[..], &v[..]));
            it.next().unwrap();
        }
        assert!(!it.valid());
        it.next().unwrap();
        assert!(!it.valid());
        for j in 0..1000u32 {
            it.seek(&internal_key(
                format!("key{j:05}").as_bytes(),
                SeqNo::MAX,
                ValueKind::Put,
            ))
            .unwrap();
            let want = j.div_ceil(2);
            if want >= 500 {
                assert!(!it.valid());
            } else {
                assert_eq!(it.key(), &entries[want as usize].0[..], "seek {j}");
            }
        }
        it.seek(b"zzzzzzzzzzzzzzzz").unwrap();
        assert!(!it.valid());
    }

    /// The offset of a target is that of the first data block whose last
    /// entry (read from the blocks themselves, not the index) is ≥ it, the
    /// file's size past the last key; half the keys lie about half way
    /// through the data; bytes that are no internal key give an offset in
    /// the file.
    #[test]
    fn approximate_offsets_name_the_block_a_seek_reads() {
        let entries: Vec<_> = (0..500u32)
            .map(|i| {
                let key = format!("key{:05}", i * 2);
                let ikey = internal_key(key.as_bytes(), SeqNo(u64::from(i)), ValueKind::Put);
                (ikey, vec![b'v'; 40])
            })
            .collect();
        let options = TableOptions {
            block_size: 256,
            ..TableOptions::default()
        };
        let table =
            Table::from_bytes("t.sst", build(&options, &entries), ReadCounters::new()).unwrap();
        let handles = table.data_block_handles().to_vec();
        assert!(handles.len() > 20);
        let last_keys: Vec<Vec<u8>> = (0..handles.len())
            .map(|block_no| {
                let mut entries = table.data_block(block_no).unwrap().into_cursor();
                entries.seek_to_last().unwrap();
                entries.key().to_vec()
            })
            .collect();
        for j in 0..=1001u32 {
            let target = internal_key(format!("key{j:05}").as_bytes(), SeqNo::MAX, ValueKind::Put);
            let expected = last_keys
                .iter()
                .position(|last| compare_internal_keys(last, &target) != Ordering::Less)
                .map_or(table.file_size(), |block_no| handles[block_no].offset);
            assert_eq!(table.approximate_offset_of(&target), expected, "key{j:05}");
        }
        let first = internal_key(b"key00000", SeqNo::MAX, ValueKind::Put);
        assert_eq!(table.approximate_offset_of(&first), handles[0].offset);
        let middle = internal_key(b"key00500", SeqNo::MAX, ValueKind::Put);
        let data_end = handles.last().map_or(0, |h| h.offset + h.len);
        let half = table.approximate_offset_of(&middle) as f64 / data_end as f64;
        assert!(
            (0.45..0.55).contains(&half),
            "half the keys end at {half} of the data"
        );
        for target in [&b""[..], b"\xff", &[0u8; 7], &[0xffu8; 9], &[0xffu8; 40]] {
            assert!(table.approximate_offset_of(target) <= table.file_size());
        }
    }

    #[test]
    fn seek_hints_follow_slow_reads_and_change_no_answer() {
        let entries: Vec<_> = (0..500u32)
            .map(|i| {
                let key = format!("key{:05}", i * 2);
                let ikey = internal_key(key.as_bytes(), SeqNo(u64::from(i)), ValueKind::Put);
                (ikey, i.to_le_bytes().to_vec())
            })
            .collect();
        let options = TableOptions {
            block_size: 256,
            ..TableOptions::default()
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        std::fs::write(&path, build(&options, &entries)).unwrap();
        let context = ReadContext::standalone();
        assert!(!context.file_reads_are_slow());
        for _ in 0..32 {
            context.note_file_read(std::time::Duration::from_micros(200));
        }
        assert!(context.file_reads_are_slow());
        let table = Table::open(&context, &path).unwrap();
        let mut it = table.iter();
        for j in 0..1001u32 {
            let target = internal_key(format!("key{j:05}").as_bytes(), SeqNo::MAX, ValueKind::Put);
            table.prefetch_seek(&target);
            it.seek(&target).unwrap();
            match entries.get(j.div_ceil(2) as usize) {
                Some((key, _)) => assert_eq!(it.key(), &key[..], "seek {j}"),
                None => assert!(!it.valid(), "seek {j}"),
            }
        }
        // Targets outside every block, or too short to be internal keys.
        for target in [&b""[..], b"a", b"zzzzzzzzzzzzzzzz"] {
            table.prefetch_seek(target);
        }
        // Reads from the page cache turn the hints off again.
        for _ in 0..64 {
            context.note_file_read(std::time::Duration::from_micros(1));
        }
        assert!(!context.file_reads_are_slow());
    }
}
