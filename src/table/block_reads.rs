//! Reading a table's blocks: positioned reads of its file (through the
//! context's open-file cache, or the file it holds) or slices of its map,
//! trailer checks, decompression, and the block cache in front of the data
//! blocks.
//!
//! Owns: `TableInner`'s block reads — a data block for a get or a scan
//! (`data_block`), a batched get's cached block or pending read, spans of
//! blocks read at once for whole-table scans, the re-read of a metadata
//! block (`recheck`), and the read counters those reads move.
//! Must never: hand out a block whose trailer checksum failed, read past
//! a source's end (a short read is an `Error` naming the file, never a
//! signal outside the opt-in map), or decide what a key's answer is (that
//! is `get.rs`'s).

use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::fs::RandomAccessFile;
use crate::table::block::Block;
use crate::table::block_buffer;
use crate::table::compression::decompress;
use crate::table::context::ReadContext;
use crate::table::format::{check_block, BlockHandle, BlockKind, BlockLocation, Codec};
use crate::table::overlapped::ReadRequest;
use crate::table::reader::{BlockOrRead, Source, Span, TableInner};

impl TableInner {
    pub(super) fn location(&self, kind: BlockKind, offset: u64) -> BlockLocation<'_> {
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
    pub(super) fn read_checked(
        &self,
        handle: BlockHandle,
        kind: BlockKind,
    ) -> Result<(Bytes, Codec)> {
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
    pub(super) fn stored_len(
        &self,
        handle: BlockHandle,
        location: &BlockLocation<'_>,
    ) -> Result<usize> {
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
            codec => Bytes::from(
                decompress(&stored, codec, self.dictionary.as_ref())
                    .map_err(|e| location.relocate(e))?,
            ),
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

    /// Reads a block named by the footer from the file again and checks its
    /// trailer: what is on disk now, not what was read at open.
    pub(crate) fn recheck(&self, kind: BlockKind, handle: BlockHandle) -> Result<()> {
        self.read_checked(handle, kind).map(|_| ())
    }
}

/// One data block read from a file in this many is timed for
/// [`ReadContext::note_file_read`].
const FILE_READ_SAMPLE: u64 = 8;

/// The open file of a positioned-read source.
pub(super) fn file_of(
    context: &ReadContext,
    id: u64,
    source: &Source,
) -> Result<Arc<dyn RandomAccessFile>> {
    match source {
        Source::File(path) => context.file(id, path),
        Source::Held(file) => Ok(Arc::clone(file)),
        Source::Mapped { .. } => Err(Error::invalid("a mapped table has no file to read")),
    }
}

/// `len` bytes at `offset` of a source.
pub(super) fn read_source(
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
pub(super) fn slice_of(map: &Bytes, offset: u64, len: usize, name: &str) -> Result<Bytes> {
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
