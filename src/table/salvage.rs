//! [`TableSalvager`]: what is readable of a damaged table, block by block,
//! for `siftdb repair`.
//!
//! A table whose footer, index and properties are intact is walked through
//! its index: every data block is read and checked on its own (checksum,
//! codec, restarts, key order inside it and against the blocks before it),
//! and a block that fails is reported lost with the key range the index
//! gives it. A table that cannot be opened at all is scanned from its first
//! byte: data blocks lie back to back from offset 0 (with zero padding
//! before a block that would straddle a 4 KiB page, except in a flush's
//! level-0 tables), and each block's end is found where its trailer's
//! checksum — which covers the block, its type, its codec, its offset and
//! the format version — holds; the chain of such
//! blocks is salvaged up to the first that cannot be found, and what
//! follows is reported lost unless the filter or index block starts there.
//! The range tombstone block is read from the table when it opens, else
//! found by walking the metadata blocks that follow the data (filter, range
//! filter, range tombstones, index: each where the one before ends): a walk
//! that reaches the index without meeting it says the table had none, a
//! walk that breaks off says nothing ([`SalvagedTombstones::Unknown`]).
//!
//! Owns: reading a table past damage.
//! Must never: hand out an entry from a block whose checksum failed, or
//! entries out of internal-key order; or panic on any file.

use std::cmp::Ordering;
use std::path::Path;
use std::sync::Arc;

use bytes::Bytes;

use crate::error::Error;
use crate::error::Result;
use crate::key::{compare_internal_keys, parse_internal_key};
use crate::range_tombstone::FragmentedTombstones;
use crate::table::block::Block;
use crate::table::block_scan::{align_up, find_block};
use crate::table::compression::decompress;
use crate::table::context::ReadContext;
use crate::table::format::{
    check_block, BlockHandle, BlockKind, BlockLocation, Codec, Footer, FILTER_ALIGN, FOOTER_LEN,
    PAGE, TRAILER_LEN,
};
use crate::table::properties::TableProperties;
use crate::table::reader::Table;
use crate::table::salvage_dictionary::dictionary_by_walk;
use crate::table::zstd_codec::ZstdDictionary;

/// A data block read whole: its entries in order.
#[derive(Debug, Clone)]
pub struct SalvagedBlock {
    /// The block's file offset.
    pub offset: u64,
    /// Its entries: (internal key, value), in internal-key order.
    pub entries: Vec<(Bytes, Bytes)>,
}

/// Data that could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostBlock {
    /// Where the lost bytes start.
    pub offset: u64,
    /// Its entries all sort after this internal key (`None`: from the start
    /// of the table).
    pub after: Option<Vec<u8>>,
    /// Its entries all sort at or before this internal key (`None`: up to the
    /// end of the table, as far as the file tells).
    pub through: Option<Vec<u8>>,
    /// What was wrong.
    pub reason: String,
}

/// What the next step of a salvage found.
#[derive(Debug, Clone)]
pub enum Salvaged {
    /// A readable data block.
    Block(SalvagedBlock),
    /// Data that is lost.
    Lost(LostBlock),
}

/// What a salvage knows of a table's range tombstones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SalvagedTombstones {
    /// The table has none.
    None,
    /// Its range tombstone block, read whole and checked.
    Found(FragmentedTombstones),
    /// Whether it had any, and which, cannot be told: why.
    Unknown(String),
}

enum Walk {
    /// Through the index of a table that opened.
    Indexed { table: Table, next: usize },
    /// Scanning the bytes of a table that did not; `next` is where the next
    /// block may start (`None` once the walk has ended); `metadata` where
    /// the metadata blocks start once the data blocks ended whole.
    Scanned {
        bytes: Bytes,
        next: Option<u64>,
        metadata: Option<u64>,
        /// The table's zstd dictionary, when its footer and properties
        /// name one that verifies (its dictionary-coded blocks are lost
        /// without it).
        dictionary: Option<ZstdDictionary>,
    },
}

/// Walks a table's data blocks past damage; see the module docs.
pub struct TableSalvager {
    name: String,
    walk: Walk,
    /// Why the table could not be opened, if it could not.
    open_error: Option<String>,
    /// The last key handed out, which every later entry must follow.
    last_key: Option<Vec<u8>>,
}

impl std::fmt::Debug for TableSalvager {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TableSalvager")
            .field("name", &self.name)
            .field("open_error", &self.open_error)
            .finish_non_exhaustive()
    }
}

/// Every entry of a checked block, each key parsed, in order.
fn entries_of(block: Block) -> Result<Vec<(Bytes, Bytes)>> {
    block.check_structure()?;
    let mut cursor = block.into_cursor();
    cursor.seek_to_first()?;
    let mut entries = Vec::new();
    while cursor.valid() {
        parse_internal_key(cursor.key())?;
        entries.push((Bytes::copy_from_slice(cursor.key()), cursor.value()));
        cursor.next()?;
    }
    Ok(entries)
}

/// The block of stored bytes `stored` with `codec`, decoded and checked
/// (with the table's zstd `dictionary` when it was found; without it a
/// dictionary-coded block is an error, and its keys are lost).
fn decode(
    stored: &[u8],
    codec: Codec,
    dictionary: Option<&ZstdDictionary>,
) -> Result<Vec<(Bytes, Bytes)>> {
    let bytes = match codec {
        Codec::Raw => Bytes::copy_from_slice(stored),
        codec => Bytes::from(decompress(stored, codec, dictionary)?),
    };
    entries_of(Block::parse(bytes)?)
}

impl TableSalvager {
    /// Starts a salvage of the table at `path`, read through `context`'s
    /// file system: through its index when it opens, else by scanning its
    /// bytes. Fails when the file cannot be read at all, and with
    /// [`Error::UnsupportedVersion`] for a table of a format this build does
    /// not read (no block of it would verify: a scan would call all of it
    /// lost).
    pub fn open(context: &Arc<ReadContext>, path: &Path) -> Result<TableSalvager> {
        let name = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy())
            .into_owned();
        let (walk, open_error) = match Table::open(context, path) {
            Ok(table) => (Walk::Indexed { table, next: 0 }, None),
            Err(e @ Error::UnsupportedVersion { .. }) => return Err(e),
            Err(e) => {
                let bytes = context.fs.read_all(path)?;
                let dictionary =
                    dictionary_by_properties(&name, &bytes).or_else(|| dictionary_by_walk(&bytes));
                let walk = Walk::Scanned {
                    bytes,
                    next: Some(0),
                    metadata: None,
                    dictionary,
                };
                (walk, Some(e.to_string()))
            }
        };
        Ok(TableSalvager {
            name,
            walk,
            open_error,
            last_key: None,
        })
    }

    /// The open table, when its footer, index and properties are intact.
    pub fn table(&self) -> Option<&Table> {
        match &self.walk {
            Walk::Indexed { table, .. } => Some(table),
            Walk::Scanned { .. } => None,
        }
    }

    /// Why the table could not be opened (then its bytes are scanned).
    pub fn open_error(&self) -> Option<&str> {
        self.open_error.as_deref()
    }

    /// The table's range tombstones: from the table when it opened; else,
    /// once [`TableSalvager::next_block`] walked the data blocks to their
    /// whole end, from the metadata blocks that follow them.
    pub fn range_tombstones(&self) -> SalvagedTombstones {
        match &self.walk {
            Walk::Indexed { table, .. } => match table.range_tombstones() {
                Some(list) => SalvagedTombstones::Found(FragmentedTombstones::clone(list)),
                None => SalvagedTombstones::None,
            },
            Walk::Scanned {
                metadata, bytes, ..
            } => {
                if let Some(said) = tombstones_by_properties(&self.name, bytes) {
                    return said;
                }
                match metadata {
                    Some(start) => metadata_tombstones(bytes, *start),
                    None => SalvagedTombstones::Unknown(
                        "the data blocks do not end where a metadata block starts".into(),
                    ),
                }
            }
        }
    }

    /// The next data block, or the next stretch of lost data; `None` at the end.
    pub fn next_block(&mut self) -> Option<Salvaged> {
        let found = match &mut self.walk {
            Walk::Indexed { table, next } => {
                let inner = &table.inner;
                let block_no = *next;
                let handle = inner.index.handle(block_no)?;
                *next += 1;
                let read = inner
                    .read_span(block_no, 0)
                    .and_then(|span| inner.block_in_span(&span, block_no))
                    .and_then(entries_of);
                match read {
                    Ok(entries) => Ok(SalvagedBlock {
                        offset: handle.offset,
                        entries,
                    }),
                    Err(e) => Err(LostBlock {
                        offset: handle.offset,
                        after: block_no
                            .checked_sub(1)
                            .map(|previous| inner.index.separator(previous).to_vec()),
                        through: Some(inner.index.separator(block_no).to_vec()),
                        reason: e.to_string(),
                    }),
                }
            }
            Walk::Scanned {
                bytes,
                next,
                metadata,
                dictionary,
            } => {
                let start = (*next)?;
                match scan_block(bytes, start, dictionary.as_ref()) {
                    Some((block, end)) => {
                        *next = Some(end);
                        Ok(block)
                    }
                    None => {
                        *next = None;
                        if metadata_follows(bytes, start) {
                            *metadata = Some(start);
                            return None;
                        }
                        Err(LostBlock {
                            offset: start,
                            after: self.last_key.clone(),
                            through: None,
                            reason: format!(
                                "{}; no readable data block at offset {start}, and no filter or \
                                 index block either: the rest of the data is lost",
                                self.open_error.as_deref().unwrap_or("table unreadable")
                            ),
                        })
                    }
                }
            }
        };
        Some(match found {
            Ok(block) => self.in_order(block),
            Err(lost) => Salvaged::Lost(lost),
        })
    }

    /// `block` if its first key follows every key handed out before;
    /// otherwise it is lost (a block of another table, or damage the
    /// checksum missed).
    fn in_order(&mut self, block: SalvagedBlock) -> Salvaged {
        let first = block.entries.first().map(|(k, _)| k.as_ref());
        let follows = match (&self.last_key, first) {
            (Some(last), Some(first)) => compare_internal_keys(last, first) == Ordering::Less,
            _ => true,
        };
        if !follows {
            return Salvaged::Lost(LostBlock {
                offset: block.offset,
                after: self.last_key.clone(),
                through: block.entries.last().map(|(k, _)| k.to_vec()),
                reason: "its first key does not follow the previous block's last key".into(),
            });
        }
        if let Some((last, _)) = block.entries.last() {
            self.last_key = Some(last.to_vec());
        }
        Salvaged::Block(block)
    }
}

/// The data block starting at `start` (or, after zero padding, at the next
/// page boundary) and the offset just past its trailer.
fn scan_block(
    bytes: &[u8],
    start: u64,
    dictionary: Option<&ZstdDictionary>,
) -> Option<(SalvagedBlock, u64)> {
    let start_at = usize::try_from(start).ok()?;
    let page = align_up(start, PAGE);
    let padded = page > start
        && usize::try_from(page)
            .ok()
            .and_then(|end| bytes.get(start_at..end))
            .is_some_and(|gap| gap.iter().all(|&b| b == 0));
    // Zeros up to a page boundary are usually the padding before a block,
    // but a table written without padding (level 0) may start a block
    // there: its first byte, a restart's shared length, is 0. The boundary
    // is tried first, then `start`.
    let candidates = if padded {
        [Some(page), Some(start)]
    } else {
        [Some(start), None]
    };
    candidates.into_iter().flatten().find_map(|begin| {
        let begin_at = usize::try_from(begin).ok()?;
        let mut entries = None;
        let end = find_block(bytes, begin_at, &[BlockKind::Data], |end, codec| {
            entries = bytes
                .get(begin_at..end)
                .and_then(|stored| decode(stored, codec, dictionary).ok());
            entries.is_some()
        })?;
        let next = (end + TRAILER_LEN) as u64;
        Some((
            SalvagedBlock {
                offset: begin,
                entries: entries?,
            },
            next,
        ))
    })
}

/// True when the filter or index block starts at `start` (or after the
/// filter's alignment padding): the data blocks ended there whole.
fn metadata_follows(bytes: &[u8], start: u64) -> bool {
    let kinds = [
        BlockKind::Filter,
        BlockKind::RangeFilter,
        BlockKind::RangeTombstones,
        BlockKind::CompressionDictionary,
        BlockKind::Index,
    ];
    [start, align_up(start, FILTER_ALIGN)]
        .into_iter()
        .filter_map(|at| usize::try_from(at).ok())
        .any(|at| find_block(bytes, at, &kinds, |_, _| true).is_some())
}

/// The zstd dictionary the footer and properties block of a table that did
/// not open name, when both and the dictionary block verify.
fn dictionary_by_properties(name: &str, bytes: &[u8]) -> Option<ZstdDictionary> {
    let tail = bytes.get(bytes.len().checked_sub(FOOTER_LEN)?..)?;
    let footer = Footer::decode(tail, bytes.len() as u64, name).ok()?;
    let stored = |handle: BlockHandle, kind: BlockKind| {
        let start = usize::try_from(handle.offset).ok()?;
        let end = start.checked_add(handle.stored_len()?)?;
        let location = BlockLocation::new(name, kind, handle.offset);
        let (block, _) = check_block(bytes.get(start..end)?, &location).ok()?;
        Some((block, location))
    };
    let (block, location) = stored(footer.properties, BlockKind::Properties)?;
    let properties = TableProperties::decode(block, &location).ok()?;
    let handle = properties.compression_dictionary?;
    let (block, _) = stored(handle, BlockKind::CompressionDictionary)?;
    ZstdDictionary::parse(block).ok()
}

/// The range tombstones the footer and properties block of a table that
/// did not open say it has, when both are intact (the index may be what
/// failed): `None` when they cannot tell.
fn tombstones_by_properties(name: &str, bytes: &[u8]) -> Option<SalvagedTombstones> {
    let len = bytes.len() as u64;
    let tail = bytes.get(bytes.len().checked_sub(FOOTER_LEN)?..)?;
    let footer = Footer::decode(tail, len, name).ok()?;
    let stored = |handle: BlockHandle, kind: BlockKind| {
        let start = usize::try_from(handle.offset).ok()?;
        let end = start.checked_add(handle.stored_len()?)?;
        let location = BlockLocation::new(name, kind, handle.offset);
        let (block, _) = check_block(bytes.get(start..end)?, &location).ok()?;
        Some((block, location))
    };
    let (block, location) = stored(footer.properties, BlockKind::Properties)?;
    let properties = TableProperties::decode(block, &location).ok()?;
    let Some(handle) = properties.range_tombstones else {
        return Some(SalvagedTombstones::None);
    };
    Some(match stored(handle, BlockKind::RangeTombstones) {
        Some((block, _)) => match FragmentedTombstones::decode(block) {
            Ok(list) if !list.is_empty() => SalvagedTombstones::Found(list),
            Ok(_) => SalvagedTombstones::Unknown("an empty range tombstone block".into()),
            Err(e) => SalvagedTombstones::Unknown(e.to_string()),
        },
        None => SalvagedTombstones::Unknown(format!(
            "the range tombstone block at offset {} is damaged",
            handle.offset
        )),
    })
}

/// The range tombstones of the metadata blocks from `start` on (see
/// [`TableSalvager::range_tombstones`]).
fn metadata_tombstones(bytes: &[u8], start: u64) -> SalvagedTombstones {
    let kinds = [
        BlockKind::Filter,
        BlockKind::RangeFilter,
        BlockKind::RangeTombstones,
        BlockKind::CompressionDictionary,
        BlockKind::Index,
    ];
    let mut at = start;
    loop {
        let found = [at, align_up(at, FILTER_ALIGN)]
            .into_iter()
            .find_map(|begin| {
                let begin_at = usize::try_from(begin).ok()?;
                let end = find_block(bytes, begin_at, &kinds, |_, codec| codec == Codec::Raw)?;
                Some((begin_at, end))
            });
        let Some((begin, end)) = found else {
            return SalvagedTombstones::Unknown(format!("no metadata block starts at offset {at}"));
        };
        match bytes.get(end).copied().and_then(BlockKind::from_u8) {
            Some(BlockKind::Index) => return SalvagedTombstones::None,
            Some(BlockKind::RangeTombstones) => {
                let block = bytes.get(begin..end).unwrap_or_default();
                return match FragmentedTombstones::decode(block) {
                    Ok(list) if !list.is_empty() => SalvagedTombstones::Found(list),
                    Ok(_) => SalvagedTombstones::Unknown("an empty range tombstone block".into()),
                    Err(e) => SalvagedTombstones::Unknown(e.to_string()),
                };
            }
            _ => at = (end + TRAILER_LEN) as u64,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;
    use crate::key::{internal_key, SeqNo, ValueKind};
    use crate::options::Compression;
    use crate::table::{TableBuilder, TableOptions};

    fn build(dir: &Path, compression: Compression) -> (std::path::PathBuf, Vec<Vec<u8>>) {
        let path = dir.join("000001.sst");
        let options = TableOptions {
            block_size: 256,
            compression,
            ..TableOptions::default()
        };
        let mut b = TableBuilder::create(&OsFileSystem, &path, &options).unwrap();
        let mut keys = Vec::new();
        for i in 0..400u32 {
            let key = internal_key(format!("key{i:05}").as_bytes(), SeqNo(1), ValueKind::Put);
            b.add(
                &key,
                format!("value {i} {}", "v".repeat(i as usize % 40)).as_bytes(),
            )
            .unwrap();
            keys.push(key);
        }
        b.finish().unwrap();
        (path, keys)
    }

    fn salvage_all(path: &Path) -> (Vec<Vec<u8>>, Vec<LostBlock>, Option<String>) {
        let mut s = TableSalvager::open(&ReadContext::standalone(), path).unwrap();
        let (mut keys, mut lost) = (Vec::new(), Vec::new());
        while let Some(step) = s.next_block() {
            match step {
                Salvaged::Block(b) => keys.extend(b.entries.into_iter().map(|(k, _)| k.to_vec())),
                Salvaged::Lost(l) => lost.push(l),
            }
        }
        (keys, lost, s.open_error().map(str::to_string))
    }

    fn flip(path: &Path, at: u64) {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[usize::try_from(at).unwrap()] ^= 0x40;
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn an_intact_table_is_salvaged_whole() {
        for compression in [Compression::None, Compression::Lz4] {
            let dir = tempfile::tempdir().unwrap();
            let (path, keys) = build(dir.path(), compression);
            let (got, lost, error) = salvage_all(&path);
            assert_eq!(got, keys);
            assert!(lost.is_empty() && error.is_none());
        }
    }

    #[test]
    fn a_damaged_data_block_is_lost_with_its_key_range_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let (path, keys) = build(dir.path(), Compression::None);
        let table = Table::open_path(&path).unwrap();
        let third = table.data_block_handles()[2];
        drop(table);
        flip(&path, third.offset + 3);
        let (got, lost, error) = salvage_all(&path);
        assert!(error.is_none());
        assert_eq!(lost.len(), 1, "{lost:?}");
        let (after, through) = (
            lost[0].after.clone().unwrap(),
            lost[0].through.clone().unwrap(),
        );
        let missing: Vec<_> = keys.iter().filter(|k| !got.contains(k)).collect();
        assert!(!missing.is_empty());
        for k in &missing {
            assert!(k.as_slice() > after.as_slice() && k.as_slice() <= through.as_slice());
        }
        assert_eq!(got.len() + missing.len(), keys.len());
    }

    #[test]
    fn a_table_with_a_damaged_footer_or_index_is_scanned_whole() {
        for compression in [Compression::None, Compression::Lz4] {
            let dir = tempfile::tempdir().unwrap();
            let (path, keys) = build(dir.path(), compression);
            let index = Table::open_path(&path).unwrap().footer().index;
            let len = std::fs::metadata(&path).unwrap().len();
            for at in [len - 10, index.offset + 1] {
                let copy = dir.path().join("000002.sst");
                std::fs::copy(&path, &copy).unwrap();
                flip(&copy, at);
                let (got, lost, error) = salvage_all(&copy);
                assert!(error.is_some());
                assert!(lost.is_empty(), "{lost:?}");
                assert_eq!(got, keys, "{compression:?} flip at {at}");
            }
        }
    }

    #[test]
    fn an_unpadded_table_is_scanned_whole_where_a_block_starts_a_byte_before_a_page() {
        // Such a block's first byte (a restart's shared length, 0) looks
        // like padding up to the boundary.
        let dir = tempfile::tempdir().unwrap();
        let options = TableOptions {
            page_aligned_blocks: false,
            compression: Compression::None,
            ..TableOptions::default()
        };
        for shift in 0..64usize {
            let path = dir.path().join("000003.sst");
            let mut b = TableBuilder::create(&OsFileSystem, &path, &options).unwrap();
            let mut keys = Vec::new();
            for i in 0..20_000u32 {
                let key = internal_key(format!("key{i:06}").as_bytes(), SeqNo(1), ValueKind::Put);
                let len = 50 + (i as usize * 7 + shift) % 90;
                b.add(&key, "v".repeat(len).as_bytes()).unwrap();
                keys.push(key);
            }
            b.finish().unwrap();
            let handles = Table::open_path(&path)
                .unwrap()
                .data_block_handles()
                .to_vec();
            if !handles.iter().any(|h| h.offset % PAGE == PAGE - 1) {
                continue;
            }
            // Blocks back to back: no padding anywhere.
            let trailer = crate::table::format::TRAILER_LEN as u64;
            assert!(handles
                .windows(2)
                .all(|w| w[0].offset + w[0].len + trailer == w[1].offset));
            flip(&path, std::fs::metadata(&path).unwrap().len() - 10);
            let (got, lost, error) = salvage_all(&path);
            assert!(error.is_some() && lost.is_empty(), "{lost:?}");
            assert_eq!(got, keys);
            return;
        }
        panic!("no block started a byte before a page boundary");
    }

    #[test]
    fn a_scan_stops_at_a_damaged_block_and_reports_the_rest_lost() {
        let dir = tempfile::tempdir().unwrap();
        let (path, keys) = build(dir.path(), Compression::None);
        let table = Table::open_path(&path).unwrap();
        let fifth = table.data_block_handles()[4];
        drop(table);
        let len = std::fs::metadata(&path).unwrap().len();
        flip(&path, len - 10);
        flip(&path, fifth.offset + 5);
        let (got, lost, _) = salvage_all(&path);
        assert_eq!(lost.len(), 1);
        assert_eq!(lost[0].offset, fifth.offset);
        assert_eq!(lost[0].after.as_deref(), got.last().map(Vec::as_slice));
        assert_eq!(got, keys[..got.len()]);
        assert!(!got.is_empty());
    }

    #[test]
    fn garbage_gives_nothing_and_no_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000009.sst");
        for bytes in [
            Vec::new(),
            vec![0u8; 100],
            (0..5000u32)
                .map(|i| u8::try_from(i % 256).unwrap())
                .collect(),
        ] {
            std::fs::write(&path, &bytes).unwrap();
            let (got, lost, error) = salvage_all(&path);
            assert!(got.is_empty() && error.is_some());
            assert_eq!(lost.len(), 1);
        }
    }
}
