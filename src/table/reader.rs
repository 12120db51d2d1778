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
//! Owns: opening a table, its metadata (`Table`'s accessors), reading and
//! caching data blocks, and their read counters. The point lookup is
//! `get.rs`'s, scans are `scan.rs`'s (with the cursor in `iter.rs`), the
//! full check is `verify.rs`'s.
//! Must never: return a value from a block whose checksum failed, miss a
//! present key because of a damaged filter (a filter that fails its checks,
//! or whose kind this build does not read, is treated as absent: every key
//! "may match"), raise a signal on a short
//! or failing file outside the opt-in map (a read past the end is an
//! `Error` naming the file), or panic on any file.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::counter::Sharded;
use crate::error::{Error, Result};
use crate::filter::fuse::ARITY;
use crate::filter::{AlignedBytes, AnyFilterView, FilterParseError};
use crate::fs::{RandomAccessFile, SharedFs};
use crate::key::{key_head, user_key_of};
use crate::range_tombstone::FragmentedTombstones;
use crate::table::block::Block;
use crate::table::block_buffer;
use crate::table::compression::decompress_block;
use crate::table::context::ReadContext;
use crate::table::counters::ReadCounters;
use crate::table::format::{
    check_block, BlockHandle, BlockKind, BlockLocation, Codec, Footer, FOOTER_LEN,
};
use crate::table::index::Index;
use crate::table::overlapped::ReadRequest;
use crate::table::properties::{RangeFilterInfo, TableProperties};
use crate::table::scan_filters::ScanFilters;

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

/// A file already in memory, read through the same positioned-read path as
/// a file on disk ([`Table::from_bytes`]).
struct MemoryFile(Bytes);

impl RandomAccessFile for MemoryFile {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<()> {
        let bytes = usize::try_from(offset)
            .ok()
            .and_then(|start| self.0.get(start..start.checked_add(buf.len())?))
            .ok_or_else(|| {
                crate::fs::short_read(Path::new("<memory>"), buf.len(), offset, self.len())
            })?;
        buf.copy_from_slice(bytes);
        Ok(())
    }

    fn len(&self) -> u64 {
        self.0.len() as u64
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
    id: u64,
    name: Arc<str>,
    source: Source,
    context: Arc<ReadContext>,
    file_size: u64,
    footer: Footer,
    pub(crate) index: Index,
    properties: TableProperties,
    filter: Option<AnyFilterView<AlignedBytes>>,
    filter_status: FilterStatus,
    /// The table's range tombstones, when it has any: read and checked at
    /// open like the index (a table whose tombstones cannot be read does
    /// not open, since it could not say what it deletes).
    pub(crate) range_tombstones: Option<Arc<FragmentedTombstones>>,
    /// Prefix trust and the range filter (`scan_filters.rs`).
    pub(crate) scan: ScanFilters,
    /// Lookups this table's filter answered "absent", and lookups it let
    /// through that found nothing: its measured false-positive rate. Kept
    /// per thread (a shard each, added to without a locked instruction),
    /// so readers on two cores that ask the same table do not pass its
    /// cache line back and forth.
    pub(crate) filter_answers: Sharded<FilterAnswers>,
    /// Bytes of memory the filter and the decoded index hold.
    filter_bytes: u64,
    index_bytes: u64,
    /// Remove the file when the last handle goes (the table left the
    /// database while readers still held it).
    remove_file_when_dropped: AtomicBool,
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
    first: usize,
    last: usize,
    offset: u64,
    bytes: Bytes,
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
    /// Opens the table file at `path` in `context`: reads and verifies its
    /// footer, properties, index and filter into memory. Data blocks are read
    /// later, through the context's block cache.
    pub fn open(context: &Arc<ReadContext>, path: &Path) -> Result<Table> {
        let name = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
        let id = context.new_table_id();
        let (source, file_size) = if context.settings.mmap_reads {
            let map = context.fs.map_read_only(path)?;
            let len = map.len() as u64;
            (
                Source::Mapped {
                    map,
                    verified: Vec::new(),
                },
                len,
            )
        } else {
            let file = context.file(id, path)?;
            (Source::File(path.to_path_buf()), file.len())
        };
        TableInner::open(context, id, &name, source, file_size)
            .inspect_err(|_| {
                context.forget_file(id);
            })
            .map_err(|e| e.at_path(path))
    }

    /// [`Table::open`] holding the file open for the table's life, outside
    /// the context's open-file cache: the table stays readable after its
    /// file is removed (a database opened read-only beside a writer that
    /// compacts it away). The block cache is used as by `open`.
    pub fn open_held(context: &Arc<ReadContext>, path: &Path) -> Result<Table> {
        let name = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
        let file = context.fs.open_read(path)?;
        let file_size = file.len();
        let id = context.new_table_id();
        TableInner::open(context, id, &name, Source::Held(file), file_size)
            .map_err(|e| e.at_path(path))
    }

    /// [`Table::open`] on the real file system with a context of its own
    /// (default settings, fresh counters).
    pub fn open_path(path: &Path) -> Result<Table> {
        Table::open(&ReadContext::standalone(), path)
    }

    /// [`Table::open`] through `fs` with a context of its own.
    pub fn open_with(fs: &SharedFs, path: &Path) -> Result<Table> {
        let context = ReadContext::new(
            Arc::clone(fs),
            crate::table::context::ReadSettings::default(),
            ReadCounters::new(),
        );
        Table::open(&context, path)
    }

    /// A table over bytes already in memory, read through the same
    /// positioned-read and block-cache path as a file (a context of its
    /// own with default settings); `name` is used in errors.
    pub fn from_bytes(name: &str, file: Bytes, counters: Arc<ReadCounters>) -> Result<Table> {
        let context = ReadContext::new(
            crate::fs::OsFileSystem::shared(),
            crate::table::context::ReadSettings::default(),
            counters,
        );
        Table::from_bytes_in(&context, name, file)
    }

    /// [`Table::from_bytes`] in a given context (its block cache and counters).
    pub fn from_bytes_in(context: &Arc<ReadContext>, name: &str, file: Bytes) -> Result<Table> {
        let file_size = file.len() as u64;
        let source = Source::Held(Arc::new(MemoryFile(file)));
        TableInner::open(context, context.new_table_id(), name, source, file_size)
    }

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
}

impl TableInner {
    fn open(
        context: &Arc<ReadContext>,
        id: u64,
        name: &str,
        source: Source,
        file_size: u64,
    ) -> Result<Table> {
        let name: Arc<str> = Arc::from(name);
        let tail_len = usize::try_from(file_size).map_or(FOOTER_LEN, |len| len.min(FOOTER_LEN));
        let tail = read_source(context, id, &source, file_size - tail_len as u64, tail_len)?;
        let footer = Footer::decode(&tail, file_size, &name)?;
        let mut table = TableInner {
            id,
            name,
            source,
            context: Arc::clone(context),
            file_size,
            footer,
            index: Index::empty(),
            properties: TableProperties::placeholder(),
            filter: None,
            filter_status: FilterStatus::Missing,
            range_tombstones: None,
            scan: ScanFilters::none(),
            filter_answers: Sharded::default(),
            filter_bytes: 0,
            index_bytes: 0,
            remove_file_when_dropped: AtomicBool::new(false),
        };
        let blocks_end = file_size - FOOTER_LEN as u64;

        let properties_at = table.location(BlockKind::Properties, footer.properties.offset);
        let (properties_block, _) = table.read_checked(footer.properties, BlockKind::Properties)?;
        let properties = TableProperties::decode(&properties_block, &properties_at)?;
        if properties.format_version != footer.format.version() {
            return Err(properties_at.corruption(format!(
                "properties say format version {}, the footer {}",
                properties.format_version,
                footer.format.version()
            )));
        }
        if properties.data_size > blocks_end {
            return Err(properties_at.corruption(format!(
                "data size {} runs past the blocks at {blocks_end}",
                properties.data_size
            )));
        }

        let index_at = table.location(BlockKind::Index, footer.index.offset);
        let (index_block, _) = table.read_checked(footer.index, BlockKind::Index)?;
        let index_block = Block::parse(index_block).map_err(|e| index_at.relocate(e))?;
        let index = Index::decode(&index_block, &index_at, &properties)?;
        drop(index_block);

        if let Some(handle) = properties.range_tombstones {
            table.range_tombstones = Some(Arc::new(table.read_range_tombstones(handle)?));
        }
        table.open_filter(&properties);
        if table.filter_status.is_unusable() {
            context.counters.local().bump(|c| &c.filter_fallbacks);
        }
        let range_block = properties
            .range_filter
            .map(|info| table.read_range_filter(&info));
        table.scan = ScanFilters::new(
            context.prefix_extractor.as_ref(),
            &context.keyspace_extractors,
            &properties,
            range_block,
        );
        if table.scan.range_error().is_some() {
            context.counters.local().bump(|c| &c.filter_fallbacks);
        }
        if let Source::Mapped { verified, .. } = &mut table.source {
            *verified = (0..index.len().div_ceil(64))
                .map(|_| AtomicU64::new(0))
                .collect();
        }
        table.index_bytes = index.heap_bytes() as u64;
        table.index = index;
        table.properties = properties;
        context.count_metadata(table.filter_bytes, table.index_bytes, true);
        context.count_range_filter(table.scan.range_bytes(), true);
        Ok(Table {
            inner: Arc::new(table),
        })
    }

    fn location(&self, kind: BlockKind, offset: u64) -> BlockLocation<'_> {
        BlockLocation::new(&self.name, kind, offset)
    }

    /// `len` bytes at `offset`: a slice of the map, or a positioned read.
    fn read_at(&self, offset: u64, len: usize) -> Result<Bytes> {
        read_source(&self.context, self.id, &self.source, offset, len)
    }

    /// The block at `handle` with its trailer checked (bounds were checked
    /// when the handle was decoded): its bytes as stored, and its codec.
    ///
    /// A positioned read lands in a buffer of its own, cut to the block
    /// before it becomes `Bytes` (a `Bytes` of a whole `Vec` that is then
    /// sliced pays a second allocation and an atomic swap on the slice).
    fn read_checked(&self, handle: BlockHandle, kind: BlockKind) -> Result<(Bytes, Codec)> {
        let location = self.location(kind, handle.offset);
        let len = self.stored_len(handle, &location)?;
        if let Source::Mapped { map, .. } = &self.source {
            let stored = slice_of(map, handle.offset, len, &self.name)?;
            return self.checked_stored(stored, &location);
        }
        let file = file_of(&self.context, self.id, &self.source)?;
        let direct = (kind == BlockKind::Data && self.context.settings.direct_reads)
            .then(|| file.read_direct_at(len, handle.offset))
            .flatten();
        let mut stored = match direct {
            Some(read) => {
                let counters = self.context.counters.local();
                counters.bump(|c| &c.direct_block_reads);
                read?
            }
            None => {
                let mut buffer = block_buffer::take(len);
                file.read_into_vec_at(&mut buffer, len, handle.offset)?;
                buffer
            }
        };
        let (block, codec) = check_block(&stored, &location)?;
        let block_len = block.len();
        stored.truncate(block_len);
        Ok((block_buffer::into_bytes(stored), codec))
    }

    /// Bytes of the block at `handle` with its trailer, as one read needs them.
    fn stored_len(&self, handle: BlockHandle, location: &BlockLocation<'_>) -> Result<usize> {
        handle
            .stored_len()
            .ok_or_else(|| location.corruption("block too large"))
    }

    fn checked_stored(
        &self,
        stored: Bytes,
        location: &BlockLocation<'_>,
    ) -> Result<(Bytes, Codec)> {
        let (block, codec) = check_block(&stored, location)?;
        let block_len = block.len();
        Ok((stored.slice(..block_len), codec))
    }

    /// The range filter block `info` names, its trailer checked and its bytes
    /// copied into memory of their own (a mapped table's bytes could change):
    /// `Corruption` when the handle runs past the blocks or the trailer fails.
    fn read_range_filter(&self, info: &RangeFilterInfo) -> Result<Vec<u8>> {
        let location = self.location(BlockKind::RangeFilter, info.handle.offset);
        let blocks_end = self.file_size.saturating_sub(FOOTER_LEN as u64);
        let fits = info
            .handle
            .end_with_trailer()
            .is_some_and(|end| end <= blocks_end);
        if !fits {
            return Err(location.corruption(format!(
                "handle (offset {}, length {}) runs past the blocks at {blocks_end}",
                info.handle.offset, info.handle.len
            )));
        }
        let (block, _) = self.read_checked(info.handle, BlockKind::RangeFilter)?;
        Ok(block.to_vec())
    }

    /// The range tombstone block at `handle`, checked (bounds, trailer,
    /// then the fragments' own order): `Corruption` naming the block when
    /// any check fails.
    fn read_range_tombstones(&self, handle: BlockHandle) -> Result<FragmentedTombstones> {
        let location = self.location(BlockKind::RangeTombstones, handle.offset);
        let blocks_end = self.file_size.saturating_sub(FOOTER_LEN as u64);
        if handle.end_with_trailer().is_none_or(|end| end > blocks_end) {
            return Err(location.corruption(format!(
                "handle (offset {}, length {}) runs past the blocks at {blocks_end}",
                handle.offset, handle.len
            )));
        }
        let (block, _) = self.read_checked(handle, BlockKind::RangeTombstones)?;
        let list = FragmentedTombstones::decode(&block).map_err(|e| location.relocate(e))?;
        if list.is_empty() {
            return Err(location.corruption("a range tombstone block without a tombstone"));
        }
        Ok(list)
    }

    /// Reads the filter into an aligned buffer, or records why there is none.
    /// Never fails: a filter that cannot be trusted, or of a kind this build
    /// does not read, is treated as absent.
    fn open_filter(&mut self, properties: &TableProperties) {
        let Some(handle) = self.footer.filter else {
            self.filter_status = FilterStatus::Missing;
            return;
        };
        match self.read_filter(handle, properties) {
            Ok((view, heap_bytes)) => {
                self.filter_bytes = heap_bytes as u64;
                self.filter = Some(view);
                self.filter_status = FilterStatus::Ok;
            }
            Err(status) => self.filter_status = status,
        }
    }

    /// The filter, or the status that says why it is not used.
    fn read_filter(
        &self,
        handle: BlockHandle,
        properties: &TableProperties,
    ) -> std::result::Result<(AnyFilterView<AlignedBytes>, usize), FilterStatus> {
        let location = self.location(BlockKind::Filter, handle.offset);
        let corrupt = |e: Error| FilterStatus::Corrupt(e.to_string());
        let buffer = self.read_filter_block(handle, &location).map_err(corrupt)?;
        let heap_bytes = buffer.heap_bytes();
        let view = match AnyFilterView::parse(buffer) {
            Ok(view) => view,
            Err(FilterParseError::UnknownKind { magic }) => {
                return Err(FilterStatus::UnknownKind(format!(
                    "table {}: filter block at offset {}: a kind this build does not read \
                     (magic {:?})",
                    location.file,
                    handle.offset,
                    String::from_utf8_lossy(&magic)
                )));
            }
            Err(FilterParseError::Corrupt(e)) => return Err(corrupt(location.relocate(e.into()))),
        };
        let disagreement = match &view {
            AnyFilterView::Bloom(bloom) => {
                let header = bloom.header();
                (header.probes != properties.filter_probes || header.seed != 0).then(|| {
                    format!(
                        "filter has {} probes and seed {}, properties say {} probes and seed 0",
                        header.probes, header.seed, properties.filter_probes
                    )
                })
            }
            AnyFilterView::Fuse(fuse) => {
                let keys = fuse.header().keys;
                let arity = u32::from(ARITY);
                // Distinct user keys, plus the prefixes a prefix filter added.
                let most = properties.point_filter_max_entries();
                (properties.filter_probes != arity || keys > most).then(|| {
                    format!(
                        "binary fuse filter of {keys} keys, properties say {} probes \
                         (not {arity}) and at most {most} entries",
                        properties.filter_probes
                    )
                })
            }
        };
        match disagreement {
            None => Ok((view, heap_bytes)),
            Some(detail) => Err(corrupt(location.corruption(detail))),
        }
    }

    /// The filter block at `handle` in an aligned buffer, its trailer checked.
    fn read_filter_block(
        &self,
        handle: BlockHandle,
        location: &BlockLocation<'_>,
    ) -> Result<AlignedBytes> {
        let len = self.stored_len(handle, location)?;
        let mut buffer = AlignedBytes::zeroed(len);
        match &self.source {
            Source::Mapped { map, .. } => {
                let bytes = slice_of(map, handle.offset, len, &self.name)?;
                buffer.as_mut_bytes().copy_from_slice(&bytes);
            }
            source => {
                file_of(&self.context, self.id, source)?
                    .read_exact_at(buffer.as_mut_bytes(), handle.offset)?;
            }
        }
        let (block, _) = check_block(buffer.as_ref(), location)?;
        let block_len = block.len();
        buffer.truncate(block_len);
        Ok(buffer)
    }

    /// Hints the operating system to start reading data block `block_no`
    /// from its file, unless the block cache holds it or the table is
    /// mapped (see [`Table::prefetch_seek`]).
    pub(crate) fn will_need_block(&self, block_no: usize) {
        // Direct reads do not look in the page cache: a hint would read
        // the block twice.
        if self.context.settings.direct_reads || self.context.holds_block(self.id, block_no) {
            return;
        }
        let Ok(handle) = self.handle(block_no) else {
            return;
        };
        // A mapped table has no file to hint (`file_of` refuses it).
        let len = handle.stored_len();
        if let (Some(len), Ok(file)) = (len, file_of(&self.context, self.id, &self.source)) {
            file.will_need(handle.offset, len);
        }
    }

    /// Data block `block_no` for a get or a scan: from the block cache, or
    /// read from the file, verified, and cached.
    ///
    /// The cache is keyed by block number, not offset, so its lookup does
    /// not wait for the block's handle: the handle's line (a cache miss of
    /// its own in a large index) is requested first and loads beside the
    /// lookup, and only a miss reads it.
    pub(crate) fn data_block(&self, block_no: usize) -> Result<Block> {
        match self.data_block_at_hand(block_no)? {
            Some(block) => Ok(block),
            None => self.read_data_block(block_no),
        }
    }

    /// Data block `block_no` when it costs no file read: the table is
    /// mapped, or the block cache holds it (counted as a hit). `None`: only
    /// [`TableInner::read_data_block`] brings it in.
    pub(crate) fn data_block_at_hand(&self, block_no: usize) -> Result<Option<Block>> {
        if let Source::Mapped { map, verified } = &self.source {
            let handle = self.handle(block_no)?;
            if let Some(block) = self.mapped_raw_block(map, verified, block_no, handle)? {
                return Ok(Some(block));
            }
        }
        self.index.prefetch_handle(block_no);
        let block = self.context.cached_block(self.id, block_no);
        if block.is_some() {
            self.context.counters.local().bump(|c| &c.block_cache_hits);
        }
        Ok(block)
    }

    /// Data block `block_no` read from the file (counted as a cache miss
    /// and a read from the file), verified, and cached.
    pub(crate) fn read_data_block(&self, block_no: usize) -> Result<Block> {
        let counters = self.context.counters.local();
        let handle = self.handle(block_no)?;
        counters.bump(|c| &c.block_cache_misses);
        counters.bump(|c| &c.block_reads_from_file);
        // One read in FILE_READ_SAMPLE is timed: the average only has to
        // tell the page cache from the device, and two clock reads per
        // read cost more than that (about 1% of an in-memory get).
        let timed = counters
            .block_reads_from_file
            .load(AtomicOrdering::Relaxed)
            .is_multiple_of(FILE_READ_SAMPLE);
        let started = timed.then(Instant::now);
        let (stored, codec) = self.read_checked(handle, BlockKind::Data)?;
        if let Some(started) = started {
            self.context.note_file_read(started.elapsed());
        }
        let block = self.decode_data_block(stored, codec, handle)?;
        self.context.cache_block(self.id, block_no, &block);
        Ok(block)
    }

    /// Data block `block_no` for a batched get: the block when the block
    /// cache holds it (counted as a hit) or the table is mapped, else the
    /// read that brings it in (nothing counted yet: see
    /// [`TableInner::finish_block_read`]).
    pub(crate) fn cached_block_or_read(&self, block_no: usize) -> Result<BlockOrRead> {
        // A mapped table's block comes from the map, compressed or not.
        if let Source::Mapped { .. } = &self.source {
            return self.data_block(block_no).map(BlockOrRead::Block);
        }
        if let Some(block) = self.data_block_at_hand(block_no)? {
            return Ok(BlockOrRead::Block(block));
        }
        let handle = self.handle(block_no)?;
        let location = self.location(BlockKind::Data, handle.offset);
        let len = self.stored_len(handle, &location)?;
        let file = file_of(&self.context, self.id, &self.source)?;
        let direct = self.context.settings.direct_reads && file.reads_direct();
        Ok(BlockOrRead::Read(ReadRequest {
            file,
            offset: handle.offset,
            len,
            direct,
        }))
    }

    /// The block a batched read of data block `block_no` brought in
    /// (`stored`, its bytes with the trailer): counted as a cache miss and
    /// a read from the file, checked, decoded and cached, as
    /// [`TableInner::data_block`] does with its own read.
    pub(crate) fn finish_block_read(
        &self,
        block_no: usize,
        stored: Result<Bytes>,
    ) -> Result<Block> {
        let counters = self.context.counters.local();
        counters.bump(|c| &c.block_cache_misses);
        counters.bump(|c| &c.block_reads_from_file);
        let handle = self.handle(block_no)?;
        let location = self.location(BlockKind::Data, handle.offset);
        let (stored, codec) = self.checked_stored(stored?, &location)?;
        let block = self.decode_data_block(stored, codec, handle)?;
        self.context.cache_block(self.id, block_no, &block);
        Ok(block)
    }

    /// Unique within the database: what the block cache keys this table's
    /// blocks by.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// A raw data block as a slice of the map, its checksum verified on its
    /// first read; `None` when the block is compressed (it goes through the
    /// block cache like a read from a file).
    fn mapped_raw_block(
        &self,
        map: &Bytes,
        verified: &[AtomicU64],
        block_no: usize,
        handle: BlockHandle,
    ) -> Result<Option<Block>> {
        let location = self.location(BlockKind::Data, handle.offset);
        let len = self.stored_len(handle, &location)?;
        let stored = slice_of(map, handle.offset, len, &self.name)?;
        let (word, bit) = (block_no / 64, 1u64 << (block_no % 64));
        let flags = verified.get(word);
        let known_good = flags.is_some_and(|f| f.load(AtomicOrdering::Relaxed) & bit != 0);
        let block_len = usize::try_from(handle.len).unwrap_or(usize::MAX);
        let codec = if known_good {
            // Verified before, on this immutable map: the codec byte with it.
            stored
                .get(block_len + 1)
                .and_then(|&byte| Codec::from_u8(byte))
                .unwrap_or(Codec::Raw)
        } else {
            let (_, codec) = check_block(&stored, &location)?;
            if let Some(flags) = flags {
                flags.fetch_or(bit, AtomicOrdering::Relaxed);
            }
            codec
        };
        if codec != Codec::Raw {
            return Ok(None);
        }
        let block = Block::parse(stored.slice(..block_len)).map_err(|e| location.relocate(e))?;
        Ok(Some(block))
    }

    /// The block of a checked stored block: decompressed when stored so,
    /// then its restart array checked.
    fn decode_data_block(&self, stored: Bytes, codec: Codec, handle: BlockHandle) -> Result<Block> {
        let location = self.location(BlockKind::Data, handle.offset);
        let bytes = match codec {
            Codec::Raw => stored,
            Codec::Lz4 => Bytes::from(decompress_block(&stored).map_err(|e| location.relocate(e))?),
        };
        Block::parse(bytes).map_err(|e| location.relocate(e))
    }

    /// Data blocks `first..` read with one positioned read, up to
    /// `max_bytes` (at least one block), bypassing the block cache: for
    /// scans that read a whole table once (compaction, verify).
    pub(crate) fn read_span(&self, first: usize, max_bytes: u64) -> Result<Span> {
        let start = self.handle(first)?;
        let mut last = first;
        let mut end = start.end_with_trailer().unwrap_or(u64::MAX);
        for (block_no, handle) in self.index.handles().iter().enumerate().skip(first + 1) {
            let next_end = handle.end_with_trailer().unwrap_or(u64::MAX);
            if next_end.saturating_sub(start.offset) > max_bytes {
                break;
            }
            (last, end) = (block_no, next_end);
        }
        let location = self.location(BlockKind::Data, start.offset);
        let len = usize::try_from(end - start.offset)
            .map_err(|_| location.corruption("block too large"))?;
        let bytes = self.read_at(start.offset, len)?;
        Ok(Span {
            first,
            last,
            offset: start.offset,
            bytes,
        })
    }

    /// Data blocks `..=last` read with one positioned read, up to
    /// `max_bytes` (at least block `last`), bypassing the block cache: the
    /// span a backward scan reads next.
    pub(crate) fn read_span_ending(&self, last: usize, max_bytes: u64) -> Result<Span> {
        let end = self.handle(last)?.end_with_trailer().unwrap_or(u64::MAX);
        let mut first = last;
        while let Some(before) = first.checked_sub(1) {
            let offset = self.handle(before)?.offset;
            if end.saturating_sub(offset) > max_bytes {
                break;
            }
            first = before;
        }
        let offset = self.handle(first)?.offset;
        let location = self.location(BlockKind::Data, offset);
        let len = end
            .checked_sub(offset)
            .and_then(|len| usize::try_from(len).ok())
            .ok_or_else(|| location.corruption("block too large"))?;
        let bytes = self.read_at(offset, len)?;
        Ok(Span {
            first,
            last,
            offset,
            bytes,
        })
    }

    /// Data block `block_no` from a span that holds it, verified and decoded.
    pub(crate) fn block_in_span(&self, span: &Span, block_no: usize) -> Result<Block> {
        let handle = self.handle(block_no)?;
        let location = self.location(BlockKind::Data, handle.offset);
        let stored = handle
            .offset
            .checked_sub(span.offset)
            .and_then(|at| usize::try_from(at).ok())
            .zip(handle.stored_len())
            .and_then(|(at, len)| span.bytes.get(at..at.checked_add(len)?).map(|_| (at, len)))
            .map(|(at, len)| span.bytes.slice(at..at + len))
            .ok_or_else(|| location.corruption("not in the span read"))?;
        let (stored, codec) = self.checked_stored(stored, &location)?;
        self.decode_data_block(stored, codec, handle)
    }

    fn handle(&self, block_no: usize) -> Result<BlockHandle> {
        self.index.handle(block_no).ok_or_else(|| {
            Error::corruption(
                format!("table {}", self.name),
                format!("no data block {block_no}"),
            )
        })
    }

    /// Names the file, data block `block_no` and its offset in a decoder's error.
    pub(crate) fn locate(&self, block_no: usize, err: Error) -> Error {
        let offset = self.index.handle(block_no).unwrap_or_default().offset;
        self.location(BlockKind::Data, offset).relocate(err)
    }

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

    /// Reads a block named by the footer from the file again and checks its
    /// trailer: what is on disk now, not what was read at open.
    pub(crate) fn recheck(&self, kind: BlockKind, handle: BlockHandle) -> Result<()> {
        self.read_checked(handle, kind).map(|_| ())
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

/// One data block read from a file in this many is timed for
/// [`ReadContext::note_file_read`].
const FILE_READ_SAMPLE: u64 = 8;

/// The open file of a positioned-read source.
fn file_of(context: &ReadContext, id: u64, source: &Source) -> Result<Arc<dyn RandomAccessFile>> {
    match source {
        Source::File(path) => context.file(id, path),
        Source::Held(file) => Ok(Arc::clone(file)),
        Source::Mapped { .. } => Err(Error::invalid("a mapped table has no file to read")),
    }
}

/// `len` bytes at `offset` of a source.
fn read_source(
    context: &ReadContext,
    id: u64,
    source: &Source,
    offset: u64,
    len: usize,
) -> Result<Bytes> {
    if let Source::Mapped { map, .. } = source {
        return slice_of(map, offset, len, "mapped table");
    }
    let file = file_of(context, id, source)?;
    Ok(Bytes::from(file.read_vec_at(len, offset)?))
}

/// `len` bytes at `offset` of a map, or `Corruption` when they are not all in it.
fn slice_of(map: &Bytes, offset: u64, len: usize, name: &str) -> Result<Bytes> {
    usize::try_from(offset)
        .ok()
        .and_then(|start| {
            let end = start.checked_add(len)?;
            (end <= map.len()).then(|| map.slice(start..end))
        })
        .ok_or_else(|| {
            Error::corruption(
                format!("table {name}"),
                format!("{len} bytes at offset {offset} run past the end of the map"),
            )
        })
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
