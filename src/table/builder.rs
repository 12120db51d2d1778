//! [`TableBuilder`]: writes a table file from entries in sorted order.
//!
//! Owns: the order data blocks, filter, index, properties and footer are
//! written in; each data block's codec (compressed only when it pays) and
//! its page alignment; the filter's kind (a binary fuse filter when the
//! options ask for one and it can be built, else a Bloom filter); and the
//! rule that `finish` reports success only after fsync. Tables are written in the current format version only.
//! Must never: write an out-of-order entry (it is refused with
//! `InvalidArgument` before anything changes), or report success for a file
//! that is not durable. A table of zero entries is refused by `finish`.

use std::cmp::Ordering;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::blob::BlobFileInfo;
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use crate::key::{
    compare_internal_keys, internal_key, parse_internal_key, user_key_of, SeqNo, ValueKind,
    MAX_KEY_LEN, MAX_VALUE_LEN,
};
use crate::range_tombstone::{inclusive_upper_bound, FragmentedTombstones};
use crate::table::block::BlockBuilder;
use crate::table::compression::CompressionSampler;
use crate::table::dictionary_training::PendingBlocks;
use crate::table::format::{
    encode_trailer, BlockHandle, BlockKind, Codec, Footer, TableFormat, FILTER_ALIGN, PAGE,
    TRAILER_LEN,
};
use crate::table::options::TableOptions;
use crate::table::properties::{PrefixFilterInfo, RangeFilterInfo, TableProperties};
use crate::table::scan_filters::FilterEntries;
use siftdb_filter::fuse::ARITY;
use siftdb_filter::range::RangeFilterBuilder;
use siftdb_filter::{BloomFilter, FilterKind, FuseFilter};

/// What a finished table holds, for the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableInfo {
    /// Bytes of the file.
    pub file_size: u64,
    /// Number of entries (versions and tombstones).
    pub entries: u64,
    /// The first internal key, or one before it for the start of the
    /// first range tombstone (see [`TableBuilder::set_range_tombstones`]).
    pub smallest: Bytes,
    /// The last internal key, or one after it for the end of the last
    /// range tombstone.
    pub largest: Bytes,
    /// Smallest sequence number of any entry or range tombstone.
    pub min_seq: SeqNo,
    /// Largest sequence number of any entry or range tombstone.
    pub max_seq: SeqNo,
    /// The filter written (`None`: no filter).
    pub filter_kind: Option<FilterKind>,
    /// Entries the filter was built over: distinct user keys, and distinct
    /// key prefixes when the table was built with a prefix extractor.
    pub filter_keys: u64,
    /// Time spent building the filter (hashing the keys excluded).
    pub filter_build_time: Duration,
    /// The blob file written beside the table, if one was (set by the
    /// flush or compaction that separated its values; `None` from the
    /// builder).
    pub blob: Option<BlobFileInfo>,
}

/// The point filter a table got (all empty when it got none).
#[derive(Debug, Default)]
struct FilterWritten {
    handle: Option<BlockHandle>,
    /// Probes per key (a fuse filter's: its three slots).
    probes: u32,
    kind: Option<FilterKind>,
    /// Hashes it was built from: distinct user keys kept whole, and
    /// distinct prefixes.
    entries: u64,
    /// Time its construction took (hashing the keys excluded).
    build_time: Duration,
    /// What it holds of prefixes.
    prefixes: Option<PrefixFilterInfo>,
}

/// Streams a sorted table to a file.
///
/// If any call fails, or the builder is dropped without `finish`, the file
/// is incomplete (it has no footer, so it will not open); the caller removes it.
pub struct TableBuilder {
    path: PathBuf,
    file: Box<dyn WritableFile>,
    options: TableOptions,
    offset: u64,
    data_block: BlockBuilder,
    index_block: BlockBuilder,
    last_key: Vec<u8>,
    smallest: Vec<u8>,
    /// The filter's entries: a hash per distinct user key (seed 0, as `get`
    /// computes it) and per distinct prefix (`scan_filters.rs`).
    filter_entries: FilterEntries,
    /// The range filter's keys, when the table gets one.
    range_filter: Option<RangeFilterBuilder>,
    entries: u64,
    deletions: u64,
    /// The blob files the entries of kind blob point into.
    blob_files: std::collections::BTreeSet<u64>,
    distinct_user_keys: u64,
    data_blocks: u64,
    min_seq: SeqNo,
    max_seq: SeqNo,
    /// A data block's compressed form, reused.
    compressed: Vec<u8>,
    /// Which data blocks get a compression attempt.
    sampler: CompressionSampler,
    /// Data blocks held back until the table's zstd dictionary is trained
    /// (only while a table that gets one gathers its samples).
    pending: Option<PendingBlocks>,
    /// The table's zstd dictionary, once trained (written by `finish`).
    dictionary: Option<Vec<u8>>,
    /// Where the last data block's trailer ends (0 before the first).
    data_end: u64,
    /// One index entry's handle, encoded (reused).
    handle_bytes: Vec<u8>,
    /// Padding, block and trailer, assembled for one append.
    out: Vec<u8>,
    /// Set when a write failed: the file's content is unknown.
    failed: bool,
    /// The table's range tombstones (written in their own block), with the
    /// largest key its bounds may claim for them.
    range_tombstones: Option<(FragmentedTombstones, Option<Vec<u8>>)>,
}

impl std::fmt::Debug for TableBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableBuilder")
            .field("path", &self.path)
            .field("entries", &self.entries)
            .field("offset", &self.offset)
            .finish_non_exhaustive()
    }
}

impl TableBuilder {
    /// Creates (truncating) the file at `path` through `fs`.
    pub fn create(
        fs: &dyn FileSystem,
        path: &Path,
        options: &TableOptions,
    ) -> Result<TableBuilder> {
        options.validate()?;
        let file = fs.create(path)?;
        Ok(TableBuilder {
            path: path.to_path_buf(),
            file,
            options: options.clone(),
            offset: 0,
            data_block: BlockBuilder::new(options.restart_interval),
            // Index entries share no prefix, so each separator is a
            // contiguous, zero-copy slice of the map when read.
            index_block: BlockBuilder::new(1),
            last_key: Vec::new(),
            smallest: Vec::new(),
            filter_entries: FilterEntries::new(options),
            range_filter: (options.range_filter_bits_per_key > 0.0)
                .then(|| RangeFilterBuilder::new(options.range_filter_bits_per_key))
                .transpose()?,
            entries: 0,
            deletions: 0,
            blob_files: std::collections::BTreeSet::new(),
            distinct_user_keys: 0,
            data_blocks: 0,
            min_seq: SeqNo::MAX,
            max_seq: SeqNo(0),
            compressed: Vec::new(),
            sampler: CompressionSampler::default(),
            pending: (options.zstd_dictionary_bytes > 0 && options.compression.is_zstd())
                .then(|| PendingBlocks::new(options.zstd_dictionary_bytes)),
            dictionary: None,
            data_end: 0,
            handle_bytes: Vec::new(),
            out: Vec::new(),
            failed: false,
            range_tombstones: None,
        })
    }

    /// Appends an entry. `internal_key` must sort strictly after the previous
    /// one (`key::compare_internal_keys`) and must not repeat the previous
    /// entry's user key and sequence number with another kind; otherwise, or
    /// when the key or value is malformed or too large, `InvalidArgument` and
    /// nothing changes.
    pub fn add(&mut self, internal_key: &[u8], value: &[u8]) -> Result<()> {
        self.check_usable()?;
        let parsed = parse_internal_key(internal_key)
            .map_err(|e| Error::invalid(format!("not an internal key: {}", e.detail())))?;
        if parsed.user_key.len() > MAX_KEY_LEN || value.len() > MAX_VALUE_LEN {
            return Err(Error::invalid(format!(
                "key of {} bytes or value of {} bytes exceeds the limits ({MAX_KEY_LEN}, {MAX_VALUE_LEN})",
                parsed.user_key.len(),
                value.len()
            )));
        }
        if self.entries > 0
            && compare_internal_keys(internal_key, &self.last_key) != Ordering::Greater
        {
            return Err(Error::invalid(format!(
                "table entries out of order: {:?} does not sort after {:?}",
                Bytes::copy_from_slice(internal_key),
                Bytes::copy_from_slice(&self.last_key)
            )));
        }
        let same_version = parse_internal_key(&self.last_key)
            .is_ok_and(|last| last.user_key == parsed.user_key && last.seq == parsed.seq);
        if self.entries > 0 && same_version {
            return Err(Error::invalid(format!(
                "two versions of one key with sequence number {}",
                parsed.seq.0
            )));
        }
        let blob_file = match parsed.kind {
            ValueKind::Blob => Some(
                crate::blob::BlobPointer::decode(value)
                    .map_err(|e| Error::invalid(format!("blob entry: {}", e.detail())))?
                    .file_number,
            ),
            _ => None,
        };

        // The trailer counts: at the default 4 KiB target a raw block and its
        // trailer fill at most one page.
        let projected = self.data_block.estimated_size()
            + self.data_block.entry_size(internal_key, value)
            + TRAILER_LEN;
        if !self.data_block.is_empty() && projected > self.options.block_size {
            self.flush_data_block()?;
        }
        self.data_block.add(internal_key, value)?;

        if self.entries == 0 || user_key_of(&self.last_key) != parsed.user_key {
            self.distinct_user_keys += 1;
            if self.options.bloom_bits_per_key > 0.0 {
                self.filter_entries.add(parsed.user_key);
            }
            if let Some(range_filter) = &mut self.range_filter {
                // User keys arrive in increasing order: never refused.
                range_filter.add(parsed.user_key)?;
            }
        }
        if self.entries == 0 {
            self.smallest = internal_key.to_vec();
        }
        self.entries += 1;
        if parsed.kind == ValueKind::Delete {
            self.deletions += 1;
        }
        if let Some(number) = blob_file {
            self.blob_files.insert(number);
        }
        self.min_seq = self.min_seq.min(parsed.seq);
        self.max_seq = self.max_seq.max(parsed.seq);
        self.last_key.clear();
        self.last_key.extend_from_slice(internal_key);
        Ok(())
    }

    /// Gives the table `tombstones` (fragmented; empty: none), written in a
    /// range tombstone block by `finish`. The table's bounds (its
    /// [`TableInfo`]'s smallest and largest keys, which the manifest
    /// records) then cover them: from the first fragment's start to the key
    /// before the last fragment's end ([`inclusive_upper_bound`]), but not
    /// past `largest_limit` when given (a compaction that cut the
    /// tombstones at the successor of the table's last key passes that key:
    /// the next table's range starts right after it). A table of
    /// tombstones only gets one point entry, a delete of the first
    /// fragment's start at its newest sequence number, which that fragment
    /// deletes anyway: every table holds at least one entry in one block.
    pub fn set_range_tombstones(
        &mut self,
        tombstones: FragmentedTombstones,
        largest_limit: Option<Vec<u8>>,
    ) {
        self.range_tombstones = (!tombstones.is_empty()).then_some((tombstones, largest_limit));
    }

    /// The user key of the last entry added (empty before the first).
    pub fn last_user_key(&self) -> &[u8] {
        user_key_of(&self.last_key)
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// The file's size if it were finished now (filter and index estimated).
    pub fn estimated_file_size(&self) -> u64 {
        #[expect(
            clippy::cast_possible_truncation,
            reason = "an estimate; float-to-int casts saturate"
        )]
        let filter = ((self.filter_entries.len() as f64 * self.options.bloom_bits_per_key
            + self.range_filter.as_ref().map_or(0.0, |r| {
                r.len() as f64 * self.options.range_filter_bits_per_key
            }))
            / 8.0) as u64;
        let index = self.data_blocks * (self.last_key.len() as u64 + 32);
        let pending = self.pending.as_ref().map_or(0, PendingBlocks::bytes) as u64;
        let dictionary = self.dictionary.as_ref().map_or(0, Vec::len) as u64;
        self.offset
            + self.data_block.estimated_size() as u64
            + pending
            + dictionary
            + filter
            + index
            + 256
    }

    /// Writes the last data block, the filter, index, properties and footer,
    /// and fsyncs the file. `InvalidArgument` when no entry was added (an
    /// empty table is never written; the caller removes the empty file).
    pub fn finish(mut self) -> Result<TableInfo> {
        self.check_usable()?;
        if let (0, Some((tombstones, _))) = (self.entries, &self.range_tombstones) {
            let first = tombstones
                .fragments()
                .first()
                .map(|f| internal_key(&f.start, f.newest(), ValueKind::Delete));
            if let Some(first) = first {
                self.add(&first, b"")?;
            }
        }
        if self.entries == 0 {
            return Err(Error::invalid(format!(
                "table {} has no entries; an empty table is not written",
                self.path.display()
            )));
        }
        if !self.data_block.is_empty() {
            self.flush_data_block()?;
        }
        self.write_pending_blocks()?;
        let data_size = self.offset;
        let dictionary_handle = match self.dictionary.take() {
            Some(dictionary) => Some(self.write_block(
                &dictionary,
                BlockKind::CompressionDictionary,
                Codec::Raw,
                0,
            )?),
            None => None,
        };

        let written = self.write_filter()?;
        let range_filter = self.write_range_filter()?;
        let range_tombstones = self.range_tombstones.take();
        let tombstones_handle = match &range_tombstones {
            Some((list, _)) => {
                Some(self.write_block(&list.encode(), BlockKind::RangeTombstones, Codec::Raw, 0)?)
            }
            None => None,
        };
        let index_bytes = self.index_block.finish();
        let index = self.write_block(&index_bytes, BlockKind::Index, Codec::Raw, 0)?;
        let mut properties = TableProperties {
            format_version: TableFormat::CURRENT.version(),
            entries: self.entries,
            deletions: self.deletions,
            distinct_user_keys: self.distinct_user_keys,
            data_blocks: self.data_blocks,
            data_size,
            min_seq: self.min_seq,
            max_seq: self.max_seq,
            filter_bits_per_key: if written.handle.is_some() {
                self.options.bloom_bits_per_key
            } else {
                0.0
            },
            filter_probes: written.probes,
            smallest: Bytes::from(std::mem::take(&mut self.smallest)),
            largest: Bytes::from(std::mem::take(&mut self.last_key)),
            prefix_filter: written.prefixes,
            range_filter,
            range_tombstones: tombstones_handle,
            compression_dictionary: dictionary_handle,
            keyspace: self.options.keyspace.clone(),
            blob_files: std::mem::take(&mut self.blob_files).into_iter().collect(),
        };
        // Every table is written in the one format this code reads.
        let format = TableFormat::CURRENT;
        properties.format_version = format.version();
        let properties_handle =
            self.write_block(&properties.encode(), BlockKind::Properties, Codec::Raw, 0)?;
        let footer = Footer {
            index,
            filter: written.handle,
            properties: properties_handle,
            format,
        };
        self.append(&footer.encode())?;
        self.file.sync().inspect_err(|_| self.failed = true)?;
        let (mut smallest, mut largest) = (properties.smallest, properties.largest);
        let (mut min_seq, mut max_seq) = (properties.min_seq, properties.max_seq);
        if let Some((list, limit)) = &range_tombstones {
            // The manifest's bounds cover the tombstones too, so that every
            // lookup and compaction in their range finds the table.
            if let Some((low, high)) = list.seq_range() {
                min_seq = min_seq.min(low);
                max_seq = max_seq.max(high);
            }
            if let Some(start) = list.smallest_key().filter(|s| *s < user_key_of(&smallest)) {
                smallest = Bytes::from(internal_key(start, max_seq, ValueKind::SEEK));
            }
            if let Some(end) = list.end() {
                let mut upper = inclusive_upper_bound(end);
                if let Some(limit) = limit.as_ref().filter(|l| upper > **l) {
                    upper.clone_from(limit);
                }
                if upper.as_slice() > user_key_of(&largest) {
                    largest = Bytes::from(internal_key(&upper, SeqNo(0), ValueKind::Delete));
                }
            }
        }
        Ok(TableInfo {
            file_size: self.offset,
            entries: properties.entries,
            smallest,
            largest,
            min_seq,
            max_seq,
            filter_kind: written.kind,
            filter_keys: written.entries,
            filter_build_time: written.build_time,
            blob: None,
        })
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed {
            return Err(Error::invalid(format!(
                "table builder for {} failed earlier; remove the file",
                self.path.display()
            )));
        }
        Ok(())
    }

    fn flush_data_block(&mut self) -> Result<()> {
        let raw = self.data_block.finish();
        if let Some(pending) = &mut self.pending {
            if pending.push(raw, self.last_key.clone()) {
                self.write_pending_blocks()?;
            }
            return Ok(());
        }
        let separator = std::mem::take(&mut self.last_key);
        let written = self.write_data_block(&raw, &separator);
        self.last_key = separator;
        written
    }

    /// Trains the table's dictionary from the blocks held back (when it
    /// gets one), then writes them, compressed with it.
    fn write_pending_blocks(&mut self) -> Result<()> {
        let Some(pending) = self.pending.take() else {
            return Ok(());
        };
        let (dictionary, blocks) = pending.train();
        if let (Some(dictionary), crate::options::Compression::Zstd { level }) =
            (&dictionary, self.options.compression)
        {
            self.sampler.use_dictionary(level, dictionary);
            self.dictionary = Some(dictionary.clone());
        }
        for (raw, separator) in blocks {
            self.write_data_block(&raw, &separator)?;
        }
        Ok(())
    }

    /// Writes one data block (`raw`, compressed when it pays) and its index
    /// entry, whose separator is the block's last key: ≥ every key in it,
    /// < every key in the next block.
    fn write_data_block(&mut self, raw: &[u8], separator: &[u8]) -> Result<()> {
        let mut compressed = std::mem::take(&mut self.compressed);
        let codec = self
            .sampler
            .compress(raw, self.options.compression, &mut compressed);
        let stored = match codec {
            Codec::Raw => raw,
            _ => &compressed,
        };
        let padding = if self.options.page_aligned_blocks {
            page_padding(self.offset, (stored.len() + TRAILER_LEN) as u64)
        } else {
            0
        };
        let written = self.write_block(stored, BlockKind::Data, codec, padding);
        self.compressed = compressed;
        let handle = written?;
        // The handle counts from the previous block's end (compact handles).
        self.handle_bytes.clear();
        handle.encode_compact(self.data_end, &mut self.handle_bytes);
        // `write_block` left the offset just past this block's trailer.
        self.data_end = self.offset;
        self.index_block.add(separator, &self.handle_bytes)?;
        self.data_blocks += 1;
        Ok(())
    }

    /// Builds the filter from the collected hashes — a binary fuse filter
    /// when the options ask for one and its construction succeeds, else a
    /// Bloom filter — and writes it at a 64-byte-aligned offset.
    fn write_filter(&mut self) -> Result<FilterWritten> {
        if self.options.bloom_bits_per_key <= 0.0 {
            return Ok(FilterWritten::default());
        }
        let entries = std::mem::replace(
            &mut self.filter_entries,
            FilterEntries::new(&TableOptions::default()),
        );
        // Whole-key hashes (when kept) and prefix hashes, one filter for
        // both whatever its kind. A prefix hash never equals a whole-key
        // hash but by a 64-bit coincidence, and fuse construction removes
        // equal hashes itself when they stop it.
        let (hashes, prefixes) = entries.finish();
        let started = Instant::now();
        let fuse = self
            .options
            .static_filter
            .and_then(|bits| FuseFilter::build(&hashes, bits).ok());
        let (block, probes, kind) = match fuse {
            Some(fuse) => {
                let kind = FilterKind::from(fuse.header().bits);
                (fuse.into_bytes(), u32::from(ARITY), kind)
            }
            None => {
                let mut filter =
                    BloomFilter::with_bits_per_key(hashes.len(), self.options.bloom_bits_per_key)?;
                filter.insert_hashes(&hashes);
                (filter.encode(), filter.hashes(), FilterKind::BlockedBloom)
            }
        };
        let build_time = started.elapsed();
        let padding = (FILTER_ALIGN - self.offset % FILTER_ALIGN) % FILTER_ALIGN;
        let handle = self.write_block(&block, BlockKind::Filter, Codec::Raw, padding)?;
        Ok(FilterWritten {
            handle: Some(handle),
            probes,
            kind: Some(kind),
            entries: hashes.len() as u64,
            build_time,
            prefixes,
        })
    }

    /// Writes the range filter block, when the table gets one.
    fn write_range_filter(&mut self) -> Result<Option<RangeFilterInfo>> {
        let Some(builder) = self.range_filter.take() else {
            return Ok(None);
        };
        let block = builder.finish()?;
        let handle = self.write_block(&block, BlockKind::RangeFilter, Codec::Raw, 0)?;
        Ok(Some(RangeFilterInfo {
            handle,
            bits_per_key: self.options.range_filter_bits_per_key,
        }))
    }

    /// Appends `padding` zero bytes, then `block` stored with `codec` and
    /// its trailer, with one append.
    fn write_block(
        &mut self,
        block: &[u8],
        kind: BlockKind,
        codec: Codec,
        padding: u64,
    ) -> Result<BlockHandle> {
        let handle = BlockHandle {
            offset: self.offset + padding,
            len: block.len() as u64,
        };
        let trailer = encode_trailer(block, kind, codec, handle.offset);
        // Less than a page: fits in any usize.
        let padding_len = usize::try_from(padding)
            .map_err(|_| Error::invalid(format!("padding of {padding} bytes")))?;
        let mut out = std::mem::take(&mut self.out);
        out.clear();
        out.resize(padding_len, 0);
        out.extend_from_slice(block);
        out.extend_from_slice(&trailer);
        let appended = self.append(&out);
        self.out = out;
        appended?;
        Ok(handle)
    }

    fn append(&mut self, bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            return Ok(());
        }
        self.file
            .append(bytes)
            .inspect_err(|_| self.failed = true)?;
        self.offset += bytes.len() as u64;
        Ok(())
    }
}

/// Zero bytes to write before a data block of `stored_len` bytes (trailer
/// included) at file offset `offset`, so that one read of the block touches
/// as few pages as its size allows: a block that fits in a page never
/// straddles two (it moves to the next page boundary when the rest of the
/// current page is too short); a larger block starts on a boundary when that
/// saves a page and costs at most an eighth of it. A read from the file then
/// brings exactly the pages it needs into the operating system's page cache
/// — at the default 4 KiB target one page per raw block — instead of two
/// half-used ones.
fn page_padding(offset: u64, stored_len: u64) -> u64 {
    let into_page = offset % PAGE;
    if into_page == 0 {
        return 0;
    }
    let padding = PAGE - into_page;
    if stored_len <= PAGE {
        return if into_page + stored_len > PAGE {
            padding
        } else {
            0
        };
    }
    let pages_here = (into_page + stored_len).div_ceil(PAGE);
    let pages_aligned = stored_len.div_ceil(PAGE);
    if pages_aligned < pages_here && padding <= stored_len / 8 {
        padding
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;
    use crate::key::internal_key;
    use crate::options::Compression;

    fn ikey(k: &str, seq: u64) -> Vec<u8> {
        internal_key(k.as_bytes(), SeqNo(seq), ValueKind::Put)
    }

    #[test]
    fn refuses_out_of_order_and_stays_usable() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let mut b = TableBuilder::create(&OsFileSystem, &path, &TableOptions::default()).unwrap();
        b.add(&ikey("b", 5), b"1").unwrap();
        let same_seq_delete = internal_key(b"b", SeqNo(5), ValueKind::Delete);
        for bad in [ikey("a", 9), ikey("b", 5), ikey("b", 6), same_seq_delete] {
            let err = b.add(&bad, b"x").unwrap_err();
            assert!(matches!(err, Error::InvalidArgument(_)), "{err}");
        }
        assert!(b.add(b"short", b"x").is_err());
        b.add(&ikey("b", 4), b"2").unwrap();
        b.add(&ikey("c", 1), b"3").unwrap();
        let info = b.finish().unwrap();
        assert_eq!(info.entries, 3);
        assert_eq!((info.min_seq, info.max_seq), (SeqNo(1), SeqNo(5)));
        assert_eq!(&info.smallest[..], &ikey("b", 5)[..]);
        assert_eq!(&info.largest[..], &ikey("c", 1)[..]);
        assert_eq!(info.file_size, std::fs::metadata(&path).unwrap().len());
    }

    #[test]
    fn an_empty_table_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let b = TableBuilder::create(&OsFileSystem, &path, &TableOptions::default()).unwrap();
        assert!(matches!(b.finish(), Err(Error::InvalidArgument(_))));
    }

    #[test]
    fn bad_options_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        for options in [
            TableOptions {
                block_size: 0,
                ..TableOptions::default()
            },
            TableOptions {
                restart_interval: 0,
                ..TableOptions::default()
            },
            TableOptions {
                bloom_bits_per_key: f64::NAN,
                ..TableOptions::default()
            },
            TableOptions {
                bloom_bits_per_key: 0.1,
                ..TableOptions::default()
            },
        ] {
            assert!(TableBuilder::create(&OsFileSystem, &path, &options).is_err());
        }
    }

    #[test]
    fn the_filter_block_starts_cache_aligned_and_estimates_are_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let mut b = TableBuilder::create(&OsFileSystem, &path, &TableOptions::default()).unwrap();
        for i in 0..5000 {
            b.add(&ikey(&format!("key{i:06}"), 1), b"some value")
                .unwrap();
        }
        let estimate = b.estimated_file_size();
        let info = b.finish().unwrap();
        let ratio = estimate as f64 / info.file_size as f64;
        assert!(
            (0.8..1.25).contains(&ratio),
            "{estimate} vs {}",
            info.file_size
        );
        let bytes = std::fs::read(&path).unwrap();
        let tail = &bytes[bytes.len() - crate::table::format::FOOTER_LEN..];
        let footer = Footer::decode(tail, bytes.len() as u64, "t.sst").unwrap();
        assert_eq!(footer.filter.unwrap().offset % FILTER_ALIGN, 0);
        assert_eq!(footer.format, TableFormat::CURRENT);
    }

    #[test]
    fn static_filters_are_built_when_asked_and_recorded() {
        use siftdb_filter::{FilterChoice, FingerprintBits};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let choices = [
            (FilterChoice::None, None, 0, 0.0),
            (
                FilterChoice::Bloom { bits_per_key: 7.5 },
                Some(FilterKind::BlockedBloom),
                5,
                7.5,
            ),
            (
                FilterChoice::Fuse {
                    bits: FingerprintBits::Eight,
                    bits_per_key: 9.2,
                },
                Some(FilterKind::BinaryFuse8),
                3,
                9.2,
            ),
            (
                FilterChoice::Fuse {
                    bits: FingerprintBits::Sixteen,
                    bits_per_key: 500.0,
                },
                Some(FilterKind::BinaryFuse16),
                3,
                siftdb_filter::theory::MAX_BITS_PER_KEY,
            ),
        ];
        for (choice, kind, probes, bits) in choices {
            let options = TableOptions::default().with_filter(choice);
            let mut b = TableBuilder::create(&OsFileSystem, &path, &options).unwrap();
            for i in 0..3000 {
                b.add(&ikey(&format!("key{i:06}"), 1), b"v").unwrap();
            }
            let info = b.finish().unwrap();
            assert_eq!(info.filter_kind, kind, "{choice:?}");
            assert_eq!(info.filter_keys, if kind.is_some() { 3000 } else { 0 });
            let table = crate::table::Table::open_path(&path).unwrap();
            let properties = table.properties();
            assert_eq!(properties.filter_probes, probes, "{choice:?}");
            assert_eq!(properties.filter_bits_per_key, bits, "{choice:?}");
            assert_eq!(table.filter_view().map(|v| v.kind()), kind);
            for i in 0..3000 {
                assert!(table.may_contain(siftdb_filter::hash_key(format!("key{i:06}").as_bytes())));
            }
        }
    }

    #[test]
    fn every_filter_kind_holds_prefixes_beside_whole_keys() {
        use crate::prefix::PrefixExtractor;
        use crate::table::filter_hash::prefix_hash;
        use siftdb_filter::{FilterChoice, FingerprintBits};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let choices = [
            (
                FilterChoice::Bloom { bits_per_key: 10.0 },
                FilterKind::BlockedBloom,
            ),
            (
                FilterChoice::Fuse {
                    bits: FingerprintBits::Eight,
                    bits_per_key: 9.2,
                },
                FilterKind::BinaryFuse8,
            ),
            (
                FilterChoice::Fuse {
                    bits: FingerprintBits::Sixteen,
                    bits_per_key: 18.5,
                },
                FilterKind::BinaryFuse16,
            ),
        ];
        // 40 prefixes of 100 keys each; the extractor cuts 5 bytes.
        let key = |i: u32| format!("p{:03}:{:06}", i / 100, i);
        for (choice, kind) in choices {
            for whole_key_filtering in [true, false] {
                let options = TableOptions {
                    prefix_extractor: Some(PrefixExtractor::fixed(5).unwrap()),
                    whole_key_filtering,
                    range_filter_bits_per_key: 16.0,
                    ..TableOptions::default()
                }
                .with_filter(choice);
                let mut b = TableBuilder::create(&OsFileSystem, &path, &options).unwrap();
                for i in 0..4000 {
                    b.add(&ikey(&key(i), 1), b"v").unwrap();
                }
                let info = b.finish().unwrap();
                let case = format!("{choice:?}, whole keys {whole_key_filtering}");
                assert_eq!(info.filter_kind, Some(kind), "{case}");
                let entries = if whole_key_filtering { 4040 } else { 40 };
                assert_eq!(info.filter_keys, entries, "{case}");
                let table = crate::table::Table::open_path(&path).unwrap();
                // The fuse filter's key count (keys and prefixes) passes
                // the reader's check against the properties.
                assert_eq!(
                    table.filter_status(),
                    &crate::table::FilterStatus::Ok,
                    "{case}"
                );
                assert_eq!(table.filter_view().map(|v| v.kind()), Some(kind));
                let prefixes = table.properties().prefix_filter.clone().unwrap();
                assert_eq!(prefixes.prefixes, 40, "{case}");
                assert!(table.range_filter_view().is_some(), "{case}");
                for i in 0..4000 {
                    let k = key(i);
                    assert!(table.may_contain(prefix_hash(&k.as_bytes()[..5])));
                    if whole_key_filtering {
                        let whole = siftdb_filter::hash_key(k.as_bytes());
                        assert!(table.may_contain(whole), "{case}: {k}");
                    }
                    assert!(table.may_contain_key(k.as_bytes()), "{case}: {k}");
                    assert!(table.get_key(k.as_bytes()).unwrap().is_some(), "{case}");
                }
                if !whole_key_filtering {
                    // The whole keys are not in: most of them are ruled out.
                    let passed = (0..4000)
                        .filter(|&i| table.may_contain(siftdb_filter::hash_key(key(i).as_bytes())))
                        .count();
                    assert!(passed < 400, "{case}: {passed}");
                }
            }
        }
    }

    #[test]
    fn page_padding_keeps_blocks_off_page_boundaries() {
        // Fits in a page: moves to the next page when it would straddle.
        assert_eq!(page_padding(4000, 4000), 96);
        assert_eq!(page_padding(2000, 2500), 2096);
        assert_eq!(page_padding(4096, 4000), 0);
        assert_eq!(page_padding(100, 3000), 0);
        assert_eq!(page_padding(96, 4000), 0);
        // Larger than a page: aligned when that saves one for an eighth.
        assert_eq!(page_padding(8190, 8000), 2);
        assert_eq!(page_padding(4096 + 96, 8192), 0);
        assert_eq!(page_padding(4096 + 100, 5000), 0);
    }

    #[test]
    fn raw_blocks_fill_single_pages_and_compressed_ones_shrink() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        for compression in [Compression::None, Compression::Lz4] {
            let options = TableOptions {
                compression,
                ..TableOptions::default()
            };
            let mut b = TableBuilder::create(&OsFileSystem, &path, &options).unwrap();
            for i in 0..3000 {
                b.add(&ikey(&format!("key{i:06}"), 1), &[b'x'; 100])
                    .unwrap();
            }
            let info = b.finish().unwrap();
            let table = crate::table::Table::open_path(&path).unwrap();
            let handles = table.data_block_handles();
            for h in handles {
                let stored = h.len + TRAILER_LEN as u64;
                assert!(stored <= PAGE, "{h:?}");
                assert_eq!(h.offset / PAGE, (h.offset + stored - 1) / PAGE, "{h:?}");
            }
            if compression == Compression::Lz4 {
                assert!(info.file_size < 3000 * 50, "{}", info.file_size);
            }
            for i in (0..3000).step_by(7) {
                let got = table.get_key(format!("key{i:06}").as_bytes()).unwrap();
                assert_eq!(
                    got,
                    Some(crate::table::TableValue::Put(vec![b'x'; 100].into()))
                );
            }
        }
    }
}
