//! [`Table`]: an open, memory-mapped table and its point lookups.
//!
//! `get` goes: key-range check → filter (stop if absent) → binary search of
//! the index → one data block → binary search of its restarts. Index,
//! properties and filter are verified at open. A data block's checksum is
//! verified the first time a get or iterator reads it and remembered in a
//! bitmap: the file is immutable and mapped, so the bytes cannot change
//! under the verified bit, and a hot get does not CRC 4 KiB every time.
//!
//! Owns: opening a table, `get`, and the read counters' updates (`iter.rs`
//! adds `Table::iter`, `verify.rs` adds `Table::verify`).
//! Must never: return a value from a block whose checksum failed, miss a
//! present key because of a damaged filter (a filter that fails its checks
//! is treated as absent: every key "may match"), or panic on any file.

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::filter::{hash_key, FilterView};
use crate::fs::{FileSystem, OsFileSystem};
use crate::key::{encode_internal_key, parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::table::block::Block;
use crate::table::counters::ReadCounters;
use crate::table::format::{
    read_block, BlockHandle, BlockKind, BlockLocation, Checksum, Footer, FOOTER_LEN,
};
use crate::table::index::Index;
use crate::table::properties::TableProperties;

/// Per-thread buffers a get reuses: the lookup key, and the key a block
/// cursor rebuilds (so a get allocates nothing once they have grown).
#[derive(Default)]
struct GetScratch {
    target: Vec<u8>,
    key: Vec<u8>,
}

thread_local! {
    static GET_SCRATCH: std::cell::RefCell<GetScratch> = std::cell::RefCell::default();
}

/// What a table says about a key at a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableValue {
    /// The newest visible version is a put of this value (sharing the map).
    Put(Bytes),
    /// The newest visible version is a tombstone.
    Deleted,
}

/// The state of a table's filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FilterStatus {
    /// The filter was verified and is used.
    Ok,
    /// The table was built without a filter.
    Missing,
    /// The filter block failed its checks; every key "may match".
    Corrupt(String),
}

/// An open table. Cloning is cheap (a shared handle); iterators hold one.
#[derive(Debug, Clone)]
pub struct Table {
    pub(crate) inner: Arc<TableInner>,
}

#[derive(Debug)]
pub(crate) struct TableInner {
    name: Arc<str>,
    file: Bytes,
    footer: Footer,
    /// Offset of the footer: every block ends at or before it.
    blocks_end: u64,
    pub(crate) index: Index,
    properties: TableProperties,
    filter: Option<FilterView<Bytes>>,
    filter_status: FilterStatus,
    /// One bit per data block: its checksum was verified.
    verified: Vec<AtomicU64>,
    counters: Arc<ReadCounters>,
}

impl Table {
    /// Maps the table at `path` through `fs` and verifies its footer, index,
    /// properties and filter. Reads update `counters`.
    pub fn open(fs: &dyn FileSystem, path: &Path, counters: Arc<ReadCounters>) -> Result<Table> {
        let file = fs.read_all(path)?;
        let name = path
            .file_name()
            .map_or_else(|| path.to_string_lossy(), |n| n.to_string_lossy());
        Table::from_bytes(&name, file, counters)
    }

    /// [`Table::open`] on the real file system with fresh counters.
    pub fn open_path(path: &Path) -> Result<Table> {
        Table::open(&OsFileSystem, path, ReadCounters::new())
    }

    /// A table over bytes already in memory; `name` is used in errors.
    pub fn from_bytes(name: &str, file: Bytes, counters: Arc<ReadCounters>) -> Result<Table> {
        let name: Arc<str> = Arc::from(name);
        let footer = Footer::decode(&file, &name)?;
        let blocks_end = (file.len() - FOOTER_LEN) as u64;

        let properties_at =
            BlockLocation::new(&name, BlockKind::Properties, footer.properties.offset);
        let properties_block = read_block(
            &file,
            blocks_end,
            footer.properties,
            &properties_at,
            Checksum::Verify,
        )?;
        let properties = TableProperties::decode(&properties_block, &properties_at)?;

        let index_at = BlockLocation::new(&name, BlockKind::Index, footer.index.offset);
        let index_block = read_block(&file, blocks_end, footer.index, &index_at, Checksum::Verify)?;
        let index_block = Block::parse(index_block).map_err(|e| index_at.relocate(e))?;
        let index = Index::decode(&index_block, &index_at, &properties)?;
        if properties.data_size > blocks_end {
            return Err(properties_at.corruption(format!(
                "data size {} runs past the blocks at {blocks_end}",
                properties.data_size
            )));
        }

        let (filter, filter_status) = open_filter(&file, blocks_end, &name, &footer, &properties);
        if matches!(filter_status, FilterStatus::Corrupt(_)) {
            ReadCounters::bump(&counters.filter_fallbacks);
        }
        let verified = (0..index.len().div_ceil(64))
            .map(|_| AtomicU64::new(0))
            .collect();
        Ok(Table {
            inner: Arc::new(TableInner {
                name,
                file,
                footer,
                blocks_end,
                index,
                properties,
                filter,
                filter_status,
                verified,
                counters,
            }),
        })
    }

    /// The newest version of `user_key` with sequence ≤ `snapshot`, or `None`
    /// when the table holds no such version. `hash` is
    /// [`crate::filter::hash_key`]`(user_key)`, computed once per lookup by
    /// the caller and shared across tables.
    pub fn get(&self, user_key: &[u8], hash: u64, snapshot: SeqNo) -> Result<Option<TableValue>> {
        let inner = &*self.inner;
        if !inner.may_hold_user_key(user_key) {
            return Ok(None);
        }
        let counters = &inner.counters;
        if let Some(filter) = &inner.filter {
            ReadCounters::bump(&counters.filter_checks);
            if !filter.contains_hash(hash) {
                ReadCounters::bump(&counters.filter_skips);
                return Ok(None);
            }
        }
        self.get_past_filter(user_key, snapshot)
    }

    /// The filter's answers for many key hashes at once, into `maybe`
    /// (`true`: the key may be here), through the batched filter path,
    /// counted as `get` counts them; all `true` when the table has no usable
    /// filter.
    pub fn filter_answers(&self, hashes: &[u64], maybe: &mut Vec<bool>) {
        maybe.clear();
        let counters = &self.inner.counters;
        let Some(filter) = &self.inner.filter else {
            maybe.resize(hashes.len(), true);
            return;
        };
        maybe.extend(filter.contains_hashes(hashes));
        let skipped = maybe.iter().filter(|&&answer| !answer).count();
        ReadCounters::add(&counters.filter_checks, hashes.len() as u64);
        ReadCounters::add(&counters.filter_skips, skipped as u64);
    }

    /// [`Table::get`] for a key whose filter answer was already "maybe"
    /// (see [`Table::filter_answers`]): the index and the data block.
    pub fn get_past_filter(&self, user_key: &[u8], snapshot: SeqNo) -> Result<Option<TableValue>> {
        let inner = &*self.inner;
        if !inner.may_hold_user_key(user_key) {
            return Ok(None);
        }
        let counters = &inner.counters;
        let found = GET_SCRATCH.with(|scratch| -> Result<Option<TableValue>> {
            // A get of a table already in use on this thread (none today)
            // would find the scratch borrowed: it then allocates its own.
            let mut owned = GetScratch::default();
            let mut borrowed = scratch.try_borrow_mut();
            let scratch = match &mut borrowed {
                Ok(s) => &mut **s,
                Err(_) => &mut owned,
            };
            scratch.target.clear();
            encode_internal_key(&mut scratch.target, user_key, snapshot, ValueKind::Put);
            match inner.index.block_for(&scratch.target) {
                None => Ok(None),
                Some(block_no) => {
                    ReadCounters::bump(&counters.data_block_reads);
                    inner.find_in_block(block_no, user_key, scratch)
                }
            }
        })?;
        if found.is_none() && inner.filter.is_some() {
            ReadCounters::bump(&counters.filter_false_positives);
        }
        Ok(found)
    }

    /// [`Table::get`] of the newest version, hashing the key here.
    pub fn get_key(&self, user_key: &[u8]) -> Result<Option<TableValue>> {
        self.get(user_key, hash_key(user_key), SeqNo::MAX)
    }

    /// False when the filter rules out a key with this hash (no counters).
    pub fn may_contain(&self, hash: u64) -> bool {
        self.inner
            .filter
            .as_ref()
            .is_none_or(|f| f.contains_hash(hash))
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

    /// Bytes of the file.
    pub fn file_size(&self) -> u64 {
        self.inner.file.len() as u64
    }

    /// The table's file name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// Whether the filter is in use.
    pub fn filter_status(&self) -> &FilterStatus {
        &self.inner.filter_status
    }

    /// The verified filter block, queried in place; `None` when the table
    /// has no filter or its filter failed its checks (see
    /// [`Table::filter_status`]). For statistics: fill, estimated keys.
    pub fn filter_view(&self) -> Option<&FilterView<Bytes>> {
        self.inner.filter.as_ref()
    }

    /// The footer (handles of the index, filter and properties blocks).
    pub fn footer(&self) -> &Footer {
        &self.inner.footer
    }

    /// The handle of every data block, in key order.
    pub fn data_block_handles(&self) -> &[BlockHandle] {
        self.inner.index.handles()
    }

    /// The counters this table updates.
    pub fn counters(&self) -> &Arc<ReadCounters> {
        &self.inner.counters
    }
}

impl TableInner {
    /// False when `user_key` lies outside the table's key range.
    fn may_hold_user_key(&self, user_key: &[u8]) -> bool {
        user_key >= user_key_of(&self.properties.smallest)
            && user_key <= user_key_of(&self.properties.largest)
    }

    /// The answer of data block `block_no` for `user_key`: the first entry
    /// ≥ `target` (the lookup key), when it is a version of `user_key`.
    fn find_in_block(
        &self,
        block_no: usize,
        user_key: &[u8],
        scratch: &mut GetScratch,
    ) -> Result<Option<TableValue>> {
        let buffer = std::mem::take(&mut scratch.key);
        let mut entries = self.data_block(block_no)?.into_cursor_with(buffer);
        let answer = (|| {
            entries
                .seek(&scratch.target)
                .map_err(|e| self.locate(block_no, e))?;
            if !entries.valid() || user_key_of(entries.key()) != user_key {
                return Ok(None);
            }
            let parsed = parse_internal_key(entries.key()).map_err(|e| self.locate(block_no, e))?;
            Ok(Some(match parsed.kind {
                ValueKind::Put => TableValue::Put(entries.value()),
                ValueKind::Delete => TableValue::Deleted,
            }))
        })();
        scratch.key = entries.into_key_buffer();
        answer
    }

    /// Data block `block_no`, its checksum verified on first use.
    pub(crate) fn data_block(&self, block_no: usize) -> Result<Block> {
        let (word, bit) = (block_no / 64, 1u64 << (block_no % 64));
        let flags = self.verified.get(word);
        let known_good = flags.is_some_and(|f| f.load(AtomicOrdering::Relaxed) & bit != 0);
        let checksum = if known_good {
            Checksum::AlreadyVerified
        } else {
            Checksum::Verify
        };
        let block = self.read_data_block(block_no, checksum)?;
        if let (false, Some(flags)) = (known_good, flags) {
            flags.fetch_or(bit, AtomicOrdering::Relaxed);
        }
        Ok(block)
    }

    /// Data block `block_no`: bounds and type byte always checked, the crc
    /// as asked.
    pub(crate) fn read_data_block(&self, block_no: usize, checksum: Checksum) -> Result<Block> {
        let handle = self.index.handle(block_no).unwrap_or_default();
        let location = BlockLocation::new(&self.name, BlockKind::Data, handle.offset);
        let bytes = read_block(&self.file, self.blocks_end, handle, &location, checksum)?;
        Block::parse(bytes).map_err(|e| location.relocate(e))
    }

    /// Names the file, data block `block_no` and its offset in a decoder's error.
    pub(crate) fn locate(&self, block_no: usize, err: Error) -> Error {
        let offset = self.index.handle(block_no).unwrap_or_default().offset;
        BlockLocation::new(&self.name, BlockKind::Data, offset).relocate(err)
    }

    pub(crate) fn filter(&self) -> Option<&FilterView<Bytes>> {
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

    /// Recomputes the trailer checksum of a block named by the footer.
    pub(crate) fn recheck(&self, kind: BlockKind, handle: BlockHandle) -> Result<()> {
        let location = BlockLocation::new(&self.name, kind, handle.offset);
        read_block(
            &self.file,
            self.blocks_end,
            handle,
            &location,
            Checksum::Verify,
        )
        .map(|_| ())
    }
}

/// The filter view, or why there is none. Never fails: a filter that cannot
/// be trusted is reported and treated as absent.
fn open_filter(
    file: &Bytes,
    blocks_end: u64,
    name: &str,
    footer: &Footer,
    properties: &TableProperties,
) -> (Option<FilterView<Bytes>>, FilterStatus) {
    let Some(handle) = footer.filter else {
        return (None, FilterStatus::Missing);
    };
    let location = BlockLocation::new(name, BlockKind::Filter, handle.offset);
    let checked = read_block(file, blocks_end, handle, &location, Checksum::Verify)
        .and_then(|block| FilterView::parse(block).map_err(|e| location.relocate(e)))
        .and_then(|view| {
            let probes = view.header().probes;
            if probes == properties.filter_probes && view.header().seed == 0 {
                Ok(view)
            } else {
                Err(location.corruption(format!(
                    "filter has {probes} probes and seed {}, properties say {} probes and seed 0",
                    view.header().seed,
                    properties.filter_probes
                )))
            }
        });
    match checked {
        Ok(view) => (Some(view), FilterStatus::Ok),
        Err(e) => (None, FilterStatus::Corrupt(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;
    use crate::table::{TableBuilder, TableOptions};

    /// Builds a table in a temp dir and returns its bytes.
    fn build(options: &TableOptions, entries: &[(Vec<u8>, Vec<u8>)]) -> Bytes {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let mut b = TableBuilder::create(&OsFileSystem, &path, options).unwrap();
        for (k, v) in entries {
            b.add(k, v).unwrap();
        }
        b.finish().unwrap();
        Bytes::from(std::fs::read(&path).unwrap())
    }

    fn versions() -> Vec<(Vec<u8>, Vec<u8>)> {
        vec![
            (internal_key(b"a", SeqNo(1), ValueKind::Put), b"a1".to_vec()),
            (internal_key(b"k", SeqNo(9), ValueKind::Put), b"v9".to_vec()),
            (internal_key(b"k", SeqNo(7), ValueKind::Delete), Vec::new()),
            (internal_key(b"k", SeqNo(5), ValueKind::Put), b"v5".to_vec()),
            (internal_key(b"z", SeqNo(2), ValueKind::Put), b"z2".to_vec()),
        ]
    }

    #[test]
    fn get_returns_the_newest_version_visible_at_the_snapshot() {
        for block_size in [1, 4096] {
            let options = TableOptions {
                block_size,
                ..TableOptions::default()
            };
            let table =
                Table::from_bytes("t.sst", build(&options, &versions()), ReadCounters::new())
                    .unwrap();
            let at = |seq| table.get(b"k", hash_key(b"k"), SeqNo(seq)).unwrap();
            assert_eq!(at(10), Some(TableValue::Put("v9".into())));
            assert_eq!(at(9), Some(TableValue::Put("v9".into())));
            assert_eq!(at(8), Some(TableValue::Deleted));
            assert_eq!(at(7), Some(TableValue::Deleted));
            assert_eq!(at(6), Some(TableValue::Put("v5".into())));
            assert_eq!(at(4), None);
            assert_eq!(
                table.get_key(b"a").unwrap(),
                Some(TableValue::Put("a1".into()))
            );
            assert_eq!(
                table.get_key(b"z").unwrap(),
                Some(TableValue::Put("z2".into()))
            );
            for absent in [&b""[..], b"0", b"b", b"k\0", b"zz"] {
                assert_eq!(table.get_key(absent).unwrap(), None);
            }
            assert!(table.verify().is_empty(), "{:?}", table.verify());
            assert_eq!(table.properties().entries, 5);
            assert_eq!(table.properties().deletions, 1);
            assert_eq!(table.properties().distinct_user_keys, 3);
            assert_eq!(
                table.data_block_handles().len(),
                if block_size == 1 { 5 } else { 1 }
            );
        }
    }

    #[test]
    fn values_share_the_map() {
        let file = build(&TableOptions::default(), &versions());
        let range = file.as_ptr() as usize..file.as_ptr() as usize + file.len();
        let table = Table::from_bytes("t.sst", file.clone(), ReadCounters::new()).unwrap();
        let Some(TableValue::Put(value)) = table.get_key(b"a").unwrap() else {
            panic!("a is present")
        };
        assert!(range.contains(&(value.as_ptr() as usize)));
    }

    #[test]
    fn counters_follow_the_read_path() {
        let counters = ReadCounters::new();
        let entries: Vec<_> = (0..1000u32)
            .map(|i| {
                (
                    internal_key(
                        format!("key{:05}", i * 2).as_bytes(),
                        SeqNo(1),
                        ValueKind::Put,
                    ),
                    vec![b'v'; 20],
                )
            })
            .collect();
        let table = Table::from_bytes(
            "t.sst",
            build(&TableOptions::default(), &entries),
            counters.clone(),
        )
        .unwrap();
        assert_eq!(table.filter_status(), &FilterStatus::Ok);
        table.get_key(b"key00002").unwrap().unwrap();
        let s = counters.snapshot();
        assert_eq!(
            (
                s.filter_checks,
                s.filter_skips,
                s.data_block_reads,
                s.filter_false_positives
            ),
            (1, 0, 1, 0)
        );
        // Out of range: no filter check, no read.
        table.get_key(b"zzz").unwrap();
        assert_eq!(counters.snapshot(), s);
        for i in 0..999u32 {
            table
                .get_key(format!("key{:05}", i * 2 + 1).as_bytes())
                .unwrap();
        }
        let d = counters.snapshot().since(&s);
        assert_eq!(d.filter_checks, 999);
        assert_eq!(d.filter_skips + d.filter_false_positives, 999);
        assert_eq!(d.data_block_reads, d.filter_false_positives);
        assert!(d.filter_skips > 950, "{d:?}");

        // No filter: every in-range get reads a block and nothing is counted as a check.
        let options = TableOptions {
            bloom_bits_per_key: 0.0,
            ..TableOptions::default()
        };
        let counters = ReadCounters::new();
        let table =
            Table::from_bytes("t.sst", build(&options, &entries), counters.clone()).unwrap();
        assert_eq!(table.filter_status(), &FilterStatus::Missing);
        assert!(table.footer().filter.is_none());
        table.get_key(b"key00001").unwrap();
        let s = counters.snapshot();
        assert_eq!(
            (
                s.filter_checks,
                s.data_block_reads,
                s.filter_false_positives
            ),
            (0, 1, 0)
        );
    }

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
}
