//! The point lookup of one table, in one place: range tombstones → filter
//! → index → one data block. [`Table::get`] checks the key range (the
//! version does it once, from the manifest's bounds, and calls
//! [`Table::get_covered`]); a table with range tombstones asks them first,
//! and one that covers the key at the snapshot makes the table answer
//! "deleted" unless a newer point version is found, whatever the filter
//! says (the filter's "absent" then only spares the block); then it asks the
//! point filter the hash it holds for the key (the key's own, or its
//! prefix's when the table kept prefixes only: `point_hash`) and stops on
//! "absent", then binary-searches the decoded index for the one data block
//! that may hold the key, reads that block (block cache, else file,
//! checksum verified; while file reads reach the device, a block that
//! would come from the file is first asked of the table's range filter, an
//! exact or hashed set of the same keys, which spares most false positives'
//! device reads) and binary-searches its restarts for the first entry
//! at or after `user key ‖ tag(snapshot, put)`: the answer when its user
//! key matches. [`Table::filter_answers`] and [`Table::get_past_filter`]
//! split the same lookup in two for batched gets (every table's filter
//! first, then the blocks).
//!
//! Owns: [`TableValue`], the `Table` methods of a get (and the questions
//! asked of the point filter alone, with their counters), the hash a get
//! asks the point filter with, and the search inside the one data block.
//! Must never: let a filter's "absent" hide a range tombstone of the
//! table, miss a present key — a filter that cannot answer for a key
//! (no usable filter, or prefixes kept by an extractor this database does
//! not trust) is not asked — or return a value from a block whose checksum
//! failed (the block read is `block_reads.rs`'s).

use bytes::Bytes;

use crate::error::Result;
use crate::key::{parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::table::block::Block;
use crate::table::filter_hash::prefix_hash;
use crate::table::lookup::LookupKey;
use crate::table::reader::{BlockOrRead, Table, TableInner};
use crate::table::scan_filters::ScanFilters;
use siftdb_filter::{hash_key, AlignedBytes, AnyFilterView};

thread_local! {
    /// The key buffer a get's block cursor rebuilds keys in, reused so a
    /// get allocates nothing once it has grown.
    static KEY_SCRATCH: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// What a table says about a key at a snapshot.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TableValue {
    /// The newest visible version is a put of this value (sharing the
    /// cached block).
    Put(Bytes),
    /// The newest visible version is a tombstone.
    Deleted,
    /// The newest visible version is a merge operand (see
    /// [`crate::memtable::MemValue::Merge`]).
    Merge,
}

impl Table {
    /// The newest version of the lookup's user key with sequence ≤ its
    /// snapshot, or `None` when the table holds no such version.
    pub fn get(&self, key: &LookupKey<'_>) -> Result<Option<TableValue>> {
        if !self.covers(key.user_key()) && self.inner.range_tombstones.is_none() {
            return Ok(None);
        }
        self.get_covered(key)
    }

    /// [`Table::get`] for a key the caller already found within the table's
    /// range: the table's range tombstones when it has any, then the
    /// filter, the index and one data block.
    pub fn get_covered(&self, key: &LookupKey<'_>) -> Result<Option<TableValue>> {
        if let Some(deleted_at) = self.range_tombstone_seq(key) {
            return self.get_under_range_tombstone(key, deleted_at);
        }
        // The filter asked here, not below `get_point`: a key it rules out
        // (most keys of most tables a get meets) returns without moving the
        // larger answer of a block search through every call on the way.
        if self.filter_rules_out(key) {
            return Ok(None);
        }
        self.get_past_filter(key)
    }

    /// The lookup of a key a range tombstone of this table deletes at
    /// `deleted_at`: whatever the filter says, the table answers (at least
    /// "deleted"); a filter's "absent" only spares the data block. A point
    /// version newer than the tombstone answers instead.
    #[cold]
    fn get_under_range_tombstone(
        &self,
        key: &LookupKey<'_>,
        deleted_at: SeqNo,
    ) -> Result<Option<TableValue>> {
        let newer = match self.get_point_versioned(key)? {
            Some((value, seq)) if seq > deleted_at => value,
            _ => TableValue::Deleted,
        };
        Ok(Some(newer))
    }

    /// The point entries' answer alone, with the sequence number of the
    /// version found: the filter, then the index and one data block.
    fn get_point_versioned(&self, key: &LookupKey<'_>) -> Result<Option<(TableValue, SeqNo)>> {
        if self.filter_rules_out(key) {
            return Ok(None);
        }
        self.get_past_filter_versioned(key)
    }

    /// True when the point filter rules the key out (counted as a check
    /// and a skip); false when it may be here or no filter can answer.
    #[inline]
    pub(crate) fn filter_rules_out(&self, key: &LookupKey<'_>) -> bool {
        let Some((filter, hash)) = self.point_filter_probe(key) else {
            return false;
        };
        let inner = &*self.inner;
        let counters = inner.context().counters.local();
        counters.bump(|c| &c.filter_checks);
        if filter.contains_hash(hash) {
            return false;
        }
        counters.bump(|c| &c.filter_skips);
        inner.filter_answers.local().bump(|a| &a.negatives);
        true
    }

    /// True when the table's range filter (a set of the same user keys the
    /// point filter holds, see [`siftdb_filter::range`]) rules the key out
    /// (counted as a point skip). Asked only for a key the point filter
    /// let through whose data block would be read from the file, and only
    /// while file reads reach the device (`file_reads_are_slow`): there a
    /// false positive costs a device read (~60 µs) against ~0.3 µs for this
    /// check. From the page cache a read costs ~3 µs, and the check, wasted
    /// on every present key, cost in-memory readrandom ~9% (N = 1M,
    /// `--range-bits 16`); a block at hand costs less to search than the
    /// check would.
    #[inline]
    pub(crate) fn range_filter_rules_out(&self, key: &LookupKey<'_>) -> bool {
        let Some(range) = self.inner.scan.range() else {
            return false;
        };
        if !self.inner.context().file_reads_are_slow() {
            return false;
        }
        if range.may_contain(key.user_key()) {
            return false;
        }
        let counters = self.inner.context().counters.local();
        counters.bump(|c| &c.range_filter_point_skips);
        true
    }

    /// The newest sequence number at most the lookup's snapshot of a range
    /// tombstone of this table that covers its key (counted as a hit).
    /// Without range tombstones, one test of a field.
    #[inline]
    pub(crate) fn range_tombstone_seq(&self, key: &LookupKey<'_>) -> Option<SeqNo> {
        let tombstones = self.inner.range_tombstones.as_ref()?;
        let seq = tombstones.covering_seq(key.user_key(), key.snapshot())?;
        let counters = self.inner.context().counters.local();
        counters.bump(|c| &c.range_tombstone_hits);
        Some(seq)
    }

    /// The filter's answers for many key hashes at once, into `maybe`
    /// (`true`: the key may be here), through the batched filter path,
    /// counted as `get` counts them; all `true` when the table has no usable
    /// filter.
    pub fn filter_answers(&self, hashes: &[u64], maybe: &mut Vec<bool>) {
        maybe.clear();
        let Some(filter) = self.inner.filter() else {
            maybe.resize(hashes.len(), true);
            return;
        };
        maybe.extend(filter.contains_hashes(hashes));
        let skipped = maybe.iter().filter(|&&answer| !answer).count();
        let counters = self.inner.context().counters.local();
        counters.add(|c| &c.filter_checks, hashes.len() as u64);
        counters.add(|c| &c.filter_skips, skipped as u64);
        self.inner
            .filter_answers
            .local()
            .add(|a| &a.negatives, skipped as u64);
    }

    /// [`Table::get`] for a key whose filter answer was already "maybe"
    /// (see [`Table::filter_answers`]): the index and the data block.
    pub fn get_past_filter(&self, key: &LookupKey<'_>) -> Result<Option<TableValue>> {
        Ok(self.get_past_filter_versioned(key)?.map(|(value, _)| value))
    }

    /// [`Table::get_past_filter`] with the sequence number of the version
    /// found (range tombstones not asked).
    pub(crate) fn get_past_filter_versioned(
        &self,
        key: &LookupKey<'_>,
    ) -> Result<Option<(TableValue, SeqNo)>> {
        let inner = &*self.inner;
        let counters = inner.context().counters.local();
        let found = match inner.index.block_for(key.head(), key.internal_key()) {
            None => None,
            Some(block_no) => match inner.data_block_at_hand(block_no)? {
                Some(block) => {
                    counters.bump(|c| &c.data_block_reads);
                    inner.search_block(block, block_no, key)?
                }
                None if self.range_filter_rules_out(key) => None,
                None => {
                    counters.bump(|c| &c.data_block_reads);
                    inner.search_block(inner.read_data_block(block_no)?, block_no, key)?
                }
            },
        };
        if found.is_none() && self.point_filter_probe(key).is_some() {
            counters.bump(|c| &c.filter_false_positives);
            inner.filter_answers.local().bump(|a| &a.false_positives);
        }
        Ok(found)
    }

    /// The data block [`Table::get_past_filter_versioned`] would read for
    /// `key`, or `None` when the index rules the key out; a batched get
    /// reads the block itself (counting it with
    /// [`Table::count_data_block_read`] unless the range filter spares it)
    /// and then asks [`Table::get_in_block`].
    pub(crate) fn candidate_block(&self, key: &LookupKey<'_>) -> Option<usize> {
        self.inner.index.block_for(key.head(), key.internal_key())
    }

    /// Counts one data block a batched get searches or reads for a key, as
    /// [`Table::get_past_filter_versioned`] counts its own.
    pub(crate) fn count_data_block_read(&self) {
        self.inner
            .context()
            .counters
            .local()
            .bump(|c| &c.data_block_reads);
    }

    /// The rest of [`Table::get_past_filter_versioned`] once the key's
    /// candidate block is at hand (`None` for no candidate): the search in
    /// `block`, and the false positive counted when nothing is found.
    pub(crate) fn get_in_block(
        &self,
        block: Option<(Block, usize)>,
        key: &LookupKey<'_>,
    ) -> Result<Option<(TableValue, SeqNo)>> {
        let inner = &*self.inner;
        let found = match block {
            Some((block, block_no)) => inner.search_block(block, block_no, key)?,
            None => None,
        };
        if found.is_none() && self.point_filter_probe(key).is_some() {
            inner
                .context()
                .counters
                .local()
                .bump(|c| &c.filter_false_positives);
            inner.filter_answers.local().bump(|a| &a.false_positives);
        }
        Ok(found)
    }

    /// Data block `block_no` for a batched get: at hand (block cache, or
    /// a mapped table), or the read that brings it in, to be finished by
    /// [`Table::finish_block_read`].
    pub(crate) fn block_or_read(&self, block_no: usize) -> Result<BlockOrRead> {
        self.inner.cached_block_or_read(block_no)
    }

    /// Data block `block_no` from the bytes a batched read brought in:
    /// checked, decoded and cached (or the read's error).
    pub(crate) fn finish_block_read(
        &self,
        block_no: usize,
        stored: Result<Bytes>,
    ) -> Result<Block> {
        self.inner.finish_block_read(block_no, stored)
    }

    /// Counts a data block a batched get found already read for another
    /// key of its batch (a cache hit, as a second `get` would count it).
    pub(crate) fn count_block_cache_hit(&self) {
        let counters = self.inner.context().counters.local();
        counters.bump(|c| &c.block_cache_hits);
    }

    /// Counts one batch of overlapped block reads: `uring` through the
    /// ring, `pool` on the read pool, `direct` of them past the page cache.
    pub(crate) fn note_overlapped_batch(&self, uring: u64, pool: u64, direct: u64) {
        let counters = self.inner.context().counters.local();
        counters.bump(|c| &c.overlapped_batches);
        counters.add(|c| &c.direct_block_reads, direct);
        counters.add(|c| &c.overlapped_reads_uring, uring);
        counters.add(|c| &c.overlapped_reads_pool, pool);
    }

    /// Feeds the average block read time that tells whether reads reach
    /// the device (one sample per batch: about one device latency).
    pub(crate) fn note_file_read(&self, elapsed: std::time::Duration) {
        self.inner.context().note_file_read(elapsed);
    }

    /// Data block `block_no`, as a `get` reads it (cache, else its file).
    pub(crate) fn data_block(&self, block_no: usize) -> Result<Block> {
        self.inner.data_block(block_no)
    }

    /// Unique among the tables of one database (block cache key).
    pub(crate) fn id(&self) -> u64 {
        self.inner.id()
    }

    /// [`Table::get`] of the newest version.
    pub fn get_key(&self, user_key: &[u8]) -> Result<Option<TableValue>> {
        self.get(&LookupKey::new(user_key, SeqNo::MAX))
    }

    /// False when the filter rules out a key with this hash (no counters).
    /// The hash must be the one the filter holds for the key: its whole-key
    /// hash, unless the table kept prefixes only ([`Table::may_contain_key`]
    /// asks with the right one).
    pub fn may_contain(&self, hash: u64) -> bool {
        self.inner.filter().is_none_or(|f| f.contains_hash(hash))
    }

    /// The hash this table's point filter answers `key` with (the key's,
    /// or its prefix's when the table kept prefixes only), with the filter;
    /// `None` when there is no usable filter or it cannot answer for `key`.
    #[inline]
    pub(crate) fn point_filter_probe(
        &self,
        key: &LookupKey<'_>,
    ) -> Option<(&AnyFilterView<AlignedBytes>, u64)> {
        let inner = &*self.inner;
        let filter = inner.filter()?;
        let hash = point_hash(&inner.scan, key.user_key(), key.hash())?;
        Some((filter, hash))
    }

    /// Requests the filter memory [`Table::get_covered`] will read for
    /// `key` (a hint only: no counter moves, no answer changes), so a `get`
    /// can have every candidate table's filter load in flight before it
    /// asks the first.
    #[inline]
    pub(crate) fn prefetch_point_filter(&self, key: &LookupKey<'_>) {
        if let Some((filter, hash)) = self.point_filter_probe(key) {
            filter.prefetch_hash(hash);
        }
    }

    /// False when the point filter rules `user_key` out (no counters): it
    /// asks the hash the filter holds for the key (its prefix's, when the
    /// table kept prefixes only); true without a usable filter or when the
    /// filter cannot answer for the key.
    pub fn may_contain_key(&self, user_key: &[u8]) -> bool {
        let inner = &*self.inner;
        let Some(filter) = inner.filter() else {
            return true;
        };
        point_hash(&inner.scan, user_key, hash_key(user_key))
            .is_none_or(|hash| filter.contains_hash(hash))
    }
}

/// The hash `scan`'s table's point filter holds for `user_key`: its whole-key hash
/// (`whole`, computed by the caller) when whole keys are kept or the key
/// has no prefix, its prefix's hash otherwise; `None` when the filter
/// kept prefixes only and the extractor is not trusted (the filter
/// cannot answer for the key).
#[inline]
pub(crate) fn point_hash(scan: &ScanFilters, user_key: &[u8], whole: u64) -> Option<u64> {
    if scan.whole_keys() {
        return Some(whole);
    }
    let extractor = scan.trusted_extractor()?;
    Some(extractor.prefix(user_key).map_or(whole, prefix_hash))
}

impl TableInner {
    /// The answer of `block` (data block `block_no`, already read) for
    /// `key`: the first entry ≥ its internal lookup key, when it is a
    /// version of its user key.
    fn search_block(
        &self,
        block: Block,
        block_no: usize,
        key: &LookupKey<'_>,
    ) -> Result<Option<(TableValue, SeqNo)>> {
        KEY_SCRATCH.with(|scratch| {
            // A get nested in another on this thread (none today) would find
            // the buffer borrowed: it then uses a fresh one.
            let buffer = scratch
                .try_borrow_mut()
                .map(|mut b| std::mem::take(&mut *b))
                .unwrap_or_default();
            let mut entries = block.into_cursor_with(buffer);
            let answer = (|| {
                entries
                    .seek(key.internal_key())
                    .map_err(|e| self.locate(block_no, e))?;
                if !entries.valid() || user_key_of(entries.key()) != key.user_key() {
                    return Ok(None);
                }
                let parsed =
                    parse_internal_key(entries.key()).map_err(|e| self.locate(block_no, e))?;
                let value = match parsed.kind {
                    ValueKind::Put => TableValue::Put(entries.value()),
                    ValueKind::Delete => TableValue::Deleted,
                    ValueKind::Merge => TableValue::Merge,
                    // The blob read comes last: filter → index → block → blob.
                    ValueKind::Blob => {
                        let pointer = entries.value();
                        let (file, pointer) = self
                            .blob_for(&pointer)
                            .map_err(|e| self.locate(block_no, e))?;
                        TableValue::Put(file.read_value(&pointer)?)
                    }
                };
                Ok(Some((value, parsed.seq)))
            })();
            if let Ok(mut b) = scratch.try_borrow_mut() {
                *b = entries.into_key_buffer();
            }
            answer
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::fs::OsFileSystem;
    use crate::key::internal_key;
    use crate::table::counters::ReadCounters;
    use crate::table::reader::FilterStatus;
    use crate::table::{TableBuilder, TableOptions};

    /// Builds a table in a temp dir and returns its bytes.
    pub(crate) fn build(options: &TableOptions, entries: &[(Vec<u8>, Vec<u8>)]) -> Bytes {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.sst");
        let mut b = TableBuilder::create(&OsFileSystem, &path, options).unwrap();
        for (k, v) in entries {
            b.add(k, v).unwrap();
        }
        b.finish().unwrap();
        Bytes::from(std::fs::read(&path).unwrap())
    }

    pub(crate) fn versions() -> Vec<(Vec<u8>, Vec<u8>)> {
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
            let at = |seq| table.get(&LookupKey::new(b"k", SeqNo(seq))).unwrap();
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
    fn values_share_the_cached_block() {
        let table = Table::from_bytes(
            "t.sst",
            build(&TableOptions::default(), &versions()),
            ReadCounters::new(),
        )
        .unwrap();
        let get = |key: &[u8]| match table.get_key(key).unwrap() {
            Some(TableValue::Put(value)) => value,
            other => panic!("{other:?}"),
        };
        let (a, z) = (get(b"a"), get(b"z"));
        // One block holds both; the second get was a cache hit.
        let distance = (z.as_ptr() as usize).abs_diff(a.as_ptr() as usize);
        assert!(distance < 4096, "{distance}");
        let stats = table.counters().snapshot();
        assert_eq!(
            (
                stats.block_cache_hits,
                stats.block_cache_misses,
                stats.block_reads_from_file
            ),
            (1, 1, 1)
        );
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
}
