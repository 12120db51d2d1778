//! The point lookup of one table, in one place: filter → index → one data
//! block. [`Table::get`] checks the key range (the version does it once,
//! from the manifest's bounds, and calls [`Table::get_covered`]), asks the
//! point filter the hash it holds for the key (the key's own, or its
//! prefix's when the table kept prefixes only: `point_hash`) and stops on
//! "absent", then binary-searches the decoded index for the one data block
//! that may hold the key, reads that block (block cache, else file,
//! checksum verified) and binary-searches its restarts for the first entry
//! at or after `user key ‖ tag(snapshot, put)`: the answer when its user
//! key matches. [`Table::filter_answers`] and [`Table::get_past_filter`]
//! split the same lookup in two for batched gets (every table's filter
//! first, then the blocks).
//!
//! Owns: [`TableValue`], the `Table` methods of a get (and the questions
//! asked of the point filter alone, with their counters), the hash a get
//! asks the point filter with, and the search inside the one data block.
//! Must never: miss a present key — a filter that cannot answer for a key
//! (no usable filter, or prefixes kept by an extractor this database does
//! not trust) is not asked — or return a value from a block whose checksum
//! failed (the block read is `reader.rs`'s).

use bytes::Bytes;

use crate::error::Result;
use crate::filter::{hash_key, AlignedBytes, AnyFilterView};
use crate::key::{parse_internal_key, user_key_of, SeqNo, ValueKind};
use crate::table::lookup::LookupKey;
use crate::table::reader::{Table, TableInner};
use crate::table::scan_filters::{prefix_hash, ScanFilters};

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
}

impl Table {
    /// The newest version of the lookup's user key with sequence ≤ its
    /// snapshot, or `None` when the table holds no such version.
    pub fn get(&self, key: &LookupKey<'_>) -> Result<Option<TableValue>> {
        if !self.covers(key.user_key()) {
            return Ok(None);
        }
        self.get_covered(key)
    }

    /// [`Table::get`] for a key the caller already found within the table's
    /// range: the filter, then the index and one data block.
    pub fn get_covered(&self, key: &LookupKey<'_>) -> Result<Option<TableValue>> {
        if let Some((filter, hash)) = self.point_filter_probe(key) {
            let inner = &*self.inner;
            let counters = inner.context().counters.local();
            counters.bump(|c| &c.filter_checks);
            if !filter.contains_hash(hash) {
                counters.bump(|c| &c.filter_skips);
                inner.filter_answers.local().bump(|a| &a.negatives);
                return Ok(None);
            }
        }
        self.get_past_filter(key)
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
        let inner = &*self.inner;
        let counters = inner.context().counters.local();
        let found = match inner.index.block_for(key.head(), key.internal_key()) {
            None => None,
            Some(block_no) => {
                counters.bump(|c| &c.data_block_reads);
                inner.find_in_block(block_no, key)?
            }
        };
        if found.is_none() && self.point_filter_probe(key).is_some() {
            counters.bump(|c| &c.filter_false_positives);
            inner.filter_answers.local().bump(|a| &a.false_positives);
        }
        Ok(found)
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
    /// The answer of data block `block_no` for `key`: the first entry ≥ its
    /// internal lookup key, when it is a version of its user key.
    fn find_in_block(&self, block_no: usize, key: &LookupKey<'_>) -> Result<Option<TableValue>> {
        let block = self.data_block(block_no)?;
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
                Ok(Some(match parsed.kind {
                    ValueKind::Put => TableValue::Put(entries.value()),
                    ValueKind::Delete => TableValue::Deleted,
                }))
            })();
            if let Ok(mut b) = scratch.try_borrow_mut() {
                *b = entries.into_key_buffer();
            }
            answer
        })
    }
}
