//! Opening a table: `Table::open` and its kin read the footer, the
//! properties, the index, the range tombstones and the filter with
//! positioned reads (or slices of the map), check each block's trailer, and
//! keep them in memory for the table's life.
//!
//! Owns: the `Table` constructors, `TableInner::open`, and reading the
//! metadata blocks (filter, range filter, range tombstones, compression
//! dictionary) at open.
//! Must never: open a table whose footer, properties, index, range
//! tombstones or compression dictionary fail their checks (that is `Error::Corruption` naming the
//! block), fail an open for a damaged filter or one of a kind this build
//! does not read (the filter is treated as absent), or read a data block.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;

use bytes::Bytes;

use crate::counter::Sharded;
use crate::error::{Error, Result};
use crate::fs::{RandomAccessFile, SharedFs};
use crate::options::Compression;
use crate::range_tombstone::FragmentedTombstones;
use crate::table::block::Block;
use crate::table::block_reads::{file_of, read_source, slice_of};
use crate::table::context::ReadContext;
use crate::table::counters::ReadCounters;
use crate::table::format::{
    check_block, BlockHandle, BlockKind, BlockLocation, Footer, FOOTER_LEN,
};
use crate::table::index::Index;
use crate::table::properties::{RangeFilterInfo, TableProperties};
use crate::table::reader::{FilterStatus, Source, Table, TableInner};
use crate::table::scan_filters::ScanFilters;
use crate::table::zstd_codec::ZstdDictionary;
use siftdb_filter::fuse::ARITY;
use siftdb_filter::{AlignedBytes, AnyFilterView, FilterParseError};

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
            .map(|table| table.attach_blob_files(path.parent().unwrap_or(Path::new("."))))
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
            .map(|table| table.attach_blob_files(path.parent().unwrap_or(Path::new("."))))
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
            dictionary: None,
            scan: ScanFilters::none(),
            filter_answers: Sharded::default(),
            filter_bytes: 0,
            index_bytes: 0,
            remove_file_when_dropped: AtomicBool::new(false),
            blob_files: Vec::new(),
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
        if let Some(handle) = properties.compression_dictionary {
            table.dictionary = Some(table.read_dictionary(handle)?);
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

    /// The zstd dictionary block at `handle`, checked (bounds, trailer, then
    /// zstd's own header) and prepared for decoding: `Corruption` naming the
    /// block when any check fails.
    fn read_dictionary(&self, handle: BlockHandle) -> Result<ZstdDictionary> {
        let location = self.location(BlockKind::CompressionDictionary, handle.offset);
        let blocks_end = self.file_size.saturating_sub(FOOTER_LEN as u64);
        let max = Compression::MAX_DICTIONARY_BYTES as u64;
        if handle.len > max || handle.end_with_trailer().is_none_or(|end| end > blocks_end) {
            return Err(location.corruption(format!(
                "handle (offset {}, length {}) runs past the blocks at {blocks_end} or over {max} bytes",
                handle.offset, handle.len
            )));
        }
        let (block, _) = self.read_checked(handle, BlockKind::CompressionDictionary)?;
        ZstdDictionary::parse(&block).map_err(|e| location.relocate(e))
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
}
