//! The filters a scan asks before it reads a table: prefix entries in the
//! table's point filter, and the range filter block.
//!
//! A table built with a prefix extractor (`TableOptions::prefix_extractor`)
//! adds to its point filter, beside whole keys, the hash of each distinct
//! key prefix ([`crate::table::filter_hash::prefix_hash`], a seed of its own so a prefix never answers
//! for an equal whole key). A table built with `range_filter_bits_per_key`
//! carries a range filter block ([`siftdb_filter::range`]) over its distinct
//! user keys. A scan whose range lies within one prefix asks the first
//! ([`PrefixProbe`]); a scan with both bounds asks the second; either "no"
//! means the table holds no key — no version, no tombstone — in the range.
//!
//! Owns: what the builder adds to the point filter for prefixes
//! (`FilterEntries`), the checks of a range filter read at open, which
//! prefixes a table's point filter may be trusted for (the hash a `get`
//! asks it with is `get.rs`'s), and the answer to a scan's question with
//! its counters
//! (`ScanFilters::may_match`, asked through `Table::scan_may_match`).
//! Must never: rule a table out for a range that holds one of its keys —
//! prefixes are trusted only from a table built with an extractor of the
//! database's or a keyspace's name, or with one of siftdb's own, whose
//! name defines it; a damaged or inconsistent range filter is treated as
//! absent (every range may match); and every key a table holds
//! (tombstones included) is in both filters.

use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use crate::error::{Error, Result};
use crate::prefix::{KnownExtractors, PrefixExtractor};
use crate::table::counters::ReadCounters;
use crate::table::filter_hash::prefix_hash;
use crate::table::options::TableOptions;
use crate::table::properties::{PrefixFilterInfo, TableProperties};
use siftdb_filter::range::RangeFilterView;
use siftdb_filter::{hash_key, AlignedBytes, AnyFilterView};

/// The point-filter entries of a table under construction: whole-key hashes
/// and prefix hashes, collected key by key in sorted order.
#[derive(Debug)]
pub(crate) struct FilterEntries {
    extractor: Option<PrefixExtractor>,
    whole_keys: bool,
    /// Hashes that go into the filter whatever happens.
    hashes: Vec<u64>,
    /// Whole-key hashes of keys that have a prefix, kept aside when whole
    /// keys are not filtered: they go in after all if the extractor turns
    /// out not to keep its rule.
    held_back: Vec<u64>,
    prefix_hashes: Vec<u64>,
    last_prefix: Option<Vec<u8>>,
    /// Set when the extractor broke its rule on this table's keys.
    broken: bool,
}

impl FilterEntries {
    pub(crate) fn new(options: &TableOptions) -> FilterEntries {
        FilterEntries {
            extractor: options.prefix_extractor.clone(),
            whole_keys: options.whole_key_filtering || options.prefix_extractor.is_none(),
            hashes: Vec::new(),
            held_back: Vec::new(),
            prefix_hashes: Vec::new(),
            last_prefix: None,
            broken: false,
        }
    }

    /// Adds the entries of the next distinct user key (keys come sorted).
    pub(crate) fn add(&mut self, user_key: &[u8]) {
        let prefix = match &self.extractor {
            Some(extractor) if !self.broken => extractor.prefix(user_key),
            _ => None,
        };
        let Some(prefix) = prefix else {
            self.hashes.push(hash_key(user_key));
            return;
        };
        if self.whole_keys {
            self.hashes.push(hash_key(user_key));
        } else {
            self.held_back.push(hash_key(user_key));
        }
        if self.last_prefix.as_deref() == Some(prefix) {
            return;
        }
        // The rule, as far as one table shows it: a prefix is its own
        // prefix, and distinct prefixes come in increasing order (the keys
        // of one prefix are one run).
        let own = self
            .extractor
            .as_ref()
            .is_some_and(|e| e.prefix(prefix) == Some(prefix));
        let increasing = self.last_prefix.as_deref().is_none_or(|last| last < prefix);
        if !(own && increasing) {
            self.broken = true;
            return;
        }
        self.prefix_hashes.push(prefix_hash(prefix));
        let last = self.last_prefix.get_or_insert_with(Vec::new);
        last.clear();
        last.extend_from_slice(prefix);
    }

    /// Entries so far (for size estimates).
    pub(crate) fn len(&self) -> usize {
        self.hashes.len() + self.prefix_hashes.len()
    }

    /// The hashes to build the filter from, and what the properties say of
    /// prefixes (`None`: none were added — no extractor, or it broke its
    /// rule, and then every key is in whole).
    pub(crate) fn finish(mut self) -> (Vec<u64>, Option<PrefixFilterInfo>) {
        let Some(extractor) = self.extractor.take() else {
            return (self.hashes, None);
        };
        if self.broken {
            self.hashes.append(&mut self.held_back);
            return (self.hashes, None);
        }
        let info = PrefixFilterInfo {
            extractor: extractor.name().to_string(),
            whole_keys: self.whole_keys,
            prefixes: self.prefix_hashes.len() as u64,
        };
        self.hashes.append(&mut self.prefix_hashes);
        (self.hashes, Some(info))
    }
}

/// A scan's question to prefix filters: "may you hold a key with this
/// prefix, as extractor `extractor` cuts keys?"
#[derive(Debug, Clone, Copy)]
pub struct PrefixProbe<'a> {
    extractor: &'a str,
    hash: u64,
    /// The scan's range is the prefix's whole run (`Db::prefix` of a
    /// prefix): a table the prefix entry lets through holds a key of the
    /// range unless the entry was a false positive, so its range filter is
    /// not asked.
    whole_run: bool,
}

impl<'a> PrefixProbe<'a> {
    /// The probe for `prefix` as `extractor` cut it.
    pub fn new(extractor: &'a PrefixExtractor, prefix: &[u8]) -> PrefixProbe<'a> {
        PrefixProbe {
            extractor: extractor.name(),
            hash: prefix_hash(prefix),
            whole_run: false,
        }
    }

    /// The probe for the one prefix every key within the bounds has, if
    /// there is one (see [`PrefixExtractor::shared_prefix`]).
    pub fn for_bounds(
        extractor: &'a PrefixExtractor,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> Option<PrefixProbe<'a>> {
        let prefix = extractor.shared_prefix(start, end)?;
        let whole_run = start == Bound::Included(prefix)
            && match end {
                Bound::Excluded(end) => crate::prefix::successor(prefix).as_deref() == Some(end),
                Bound::Unbounded => prefix.iter().all(|&b| b == u8::MAX),
                Bound::Included(_) => false,
            };
        Some(PrefixProbe {
            whole_run,
            ..PrefixProbe::new(extractor, prefix)
        })
    }
}

/// The scan-side state of an open table.
#[derive(Debug)]
pub(crate) struct ScanFilters {
    /// Every key is in the point filter whole (no extractor, or
    /// `whole_key_filtering`).
    whole_keys: bool,
    /// The extractor the table was built with, when the reading database
    /// has one of the same name or it is one of siftdb's own; or, once
    /// asked for, the keyspace's custom extractor of that name.
    trusted: OnceLock<PrefixExtractor>,
    /// The extractor the table was built with when none of its name was
    /// known at its open: where a keyspace's custom one is looked up.
    unresolved: Option<Unresolved>,
    range: Option<RangeFilterView<Vec<u8>>>,
    /// Why the range filter the properties name is not used.
    range_error: Option<String>,
    range_bytes: u64,
}

/// A table's extractor by name, not yet found among the keyspaces'.
#[derive(Debug)]
struct Unresolved {
    name: Box<str>,
    known: Arc<KnownExtractors>,
    /// One more than the [`KnownExtractors::generation`] last searched in
    /// vain (0: never searched), so a get does not search again until an
    /// extractor is given.
    searched: AtomicU64,
}

impl ScanFilters {
    /// No prefixes, no range filter (a table under construction).
    pub(crate) fn none() -> ScanFilters {
        ScanFilters {
            whole_keys: true,
            trusted: OnceLock::new(),
            unresolved: None,
            range: None,
            range_error: None,
            range_bytes: 0,
        }
    }

    /// The scan filters of a table with these properties, read by a
    /// database whose extractor is `extractor`, with the range filter block
    /// the properties name as read (`None` when they name none). Never
    /// fails: a range filter that could not be read, does not parse, or
    /// was built from another number of keys is absent, and its status
    /// says why.
    pub(crate) fn new(
        extractor: Option<&PrefixExtractor>,
        keyspace_extractors: &Arc<KnownExtractors>,
        properties: &TableProperties,
        range_block: Option<Result<Vec<u8>>>,
    ) -> ScanFilters {
        let prefix = properties.prefix_filter.as_ref();
        let mut filters = ScanFilters {
            whole_keys: prefix.is_none_or(|p| p.whole_keys),
            ..ScanFilters::none()
        };
        if let Some(p) = prefix {
            let known = extractor
                .filter(|e| e.name() == p.extractor)
                .cloned()
                .or_else(|| PrefixExtractor::builtin(&p.extractor));
            match known {
                Some(known) => {
                    let _ = filters.trusted.set(known);
                }
                None => {
                    filters.unresolved = Some(Unresolved {
                        name: p.extractor.clone().into_boxed_str(),
                        known: Arc::clone(keyspace_extractors),
                        searched: AtomicU64::new(0),
                    });
                }
            }
        }
        let checked = range_block.map(|block| {
            let view = RangeFilterView::parse(block?)?;
            let keys = view.header().keys;
            if keys != properties.distinct_user_keys {
                return Err(Error::corruption(
                    "range filter block",
                    format!(
                        "built from {keys} keys, properties say {} distinct keys",
                        properties.distinct_user_keys
                    ),
                ));
            }
            Ok(view)
        });
        match checked {
            None => {}
            Some(Ok(view)) => {
                filters.range_bytes = view.as_bytes().len() as u64;
                filters.range = Some(view);
            }
            Some(Err(e)) => filters.range_error = Some(e.to_string()),
        }
        filters
    }

    /// Whether a table whose point filter is `filter` and properties
    /// `properties` may hold a key within the bounds (see
    /// `Table::scan_may_match`); counts into `counters`.
    /// Whether [`ScanFilters::may_match`] can answer `false` for a scan
    /// with this prefix probe and these bounds in any table: a prefix to
    /// probe, or a range bounded at both ends for a range filter. When it
    /// cannot, a scan need not ask table by table.
    pub fn can_rule_out(
        prefix: Option<&PrefixProbe<'_>>,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
    ) -> bool {
        prefix.is_some() || Self::bounded(start, end)
    }

    fn bounded(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
        !matches!(start, Bound::Unbounded) && !matches!(end, Bound::Unbounded)
    }

    pub(crate) fn may_match(
        &self,
        filter: Option<&AnyFilterView<AlignedBytes>>,
        properties: &TableProperties,
        counters: &ReadCounters,
        prefix: Option<&PrefixProbe<'_>>,
        (start, end): (Bound<&[u8]>, Bound<&[u8]>),
    ) -> bool {
        if let (Some(probe), Some(filter)) = (prefix, filter) {
            let built_with = properties.prefix_filter.as_ref();
            if built_with.is_some_and(|p| p.extractor == probe.extractor) {
                let tally = counters.local();
                tally.bump(|t| &t.prefix_filter_checks);
                if !filter.contains_hash(probe.hash) {
                    tally.bump(|t| &t.prefix_filter_skips);
                    return false;
                }
                if probe.whole_run {
                    // The range filter could only catch the prefix
                    // entry's false positives (about 1%), at the cost of a
                    // successor search on every scan.
                    return true;
                }
            }
        }
        if let (true, Some(range)) = (Self::bounded(start, end), &self.range) {
            let tally = counters.local();
            tally.bump(|t| &t.range_filter_checks);
            if !range.may_contain_bounds(start, end) {
                tally.bump(|t| &t.range_filter_skips);
                return false;
            }
        }
        true
    }

    /// Bytes of memory the range filter holds.
    pub(crate) fn range_bytes(&self) -> u64 {
        self.range_bytes
    }

    /// Why the range filter the properties name is not used (`None` when
    /// it is, or there is none).
    pub(crate) fn range_error(&self) -> Option<&str> {
        self.range_error.as_deref()
    }

    pub(crate) fn range(&self) -> Option<&RangeFilterView<Vec<u8>>> {
        self.range.as_ref()
    }

    /// Every key is in the point filter whole.
    pub(crate) fn whole_keys(&self) -> bool {
        self.whole_keys
    }

    /// The extractor the table was built with, when the reading database
    /// or one of its keyspaces has one of the same name or it is one of
    /// siftdb's own (prefixes are trusted only then).
    pub(crate) fn trusted_extractor(&self) -> Option<&PrefixExtractor> {
        if let Some(trusted) = self.trusted.get() {
            return Some(trusted);
        }
        let unresolved = self.unresolved.as_ref()?;
        let generation = unresolved.known.generation();
        if unresolved.searched.load(Ordering::Relaxed) == generation.wrapping_add(1) {
            return None;
        }
        match unresolved.known.named(&unresolved.name) {
            Some(found) => Some(self.trusted.get_or_init(|| found)),
            None => {
                unresolved
                    .searched
                    .store(generation.wrapping_add(1), Ordering::Relaxed);
                None
            }
        }
    }

    /// The prefix hashes the point filter must hold for `user_key`, for
    /// `verify` (none when the extractor is not trusted).
    pub(crate) fn prefix_entry(&self, user_key: &[u8]) -> Option<u64> {
        self.trusted_extractor()
            .and_then(|e| e.prefix(user_key))
            .map(prefix_hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table built with a custom extractor unknown at its open trusts
    /// the keyspace's of that name once it is given, not before; a fixed
    /// one is trusted by its name; an unknown name never is.
    #[test]
    fn a_custom_extractor_is_trusted_once_a_keyspace_gives_it() {
        let built_with = |name: &str| TableProperties {
            prefix_filter: Some(PrefixFilterInfo {
                extractor: name.to_owned(),
                whole_keys: false,
                prefixes: 1,
            }),
            ..TableProperties::placeholder()
        };
        let known = Arc::new(KnownExtractors::default());
        let custom = built_with("first-two");
        let filters = ScanFilters::new(None, &known, &custom, None);
        assert!(filters.trusted_extractor().is_none());
        // Searched in vain once, then not again until something is given.
        assert!(filters.trusted_extractor().is_none());
        known.remember(&PrefixExtractor::custom("other", |_| Some(1)).unwrap());
        assert!(filters.trusted_extractor().is_none());
        let first_two = PrefixExtractor::custom("first-two", |_| Some(2)).unwrap();
        known.remember(&first_two);
        assert_eq!(filters.trusted_extractor(), Some(&first_two));
        // A table opened after it was given finds it too.
        let later = ScanFilters::new(None, &known, &custom, None);
        assert_eq!(later.trusted_extractor(), Some(&first_two));

        let fixed = ScanFilters::new(None, &known, &built_with("siftdb.fixed:3"), None);
        assert_eq!(
            fixed
                .trusted_extractor()
                .and_then(PrefixExtractor::fixed_len),
            Some(3)
        );
        let unknown = ScanFilters::new(None, &known, &built_with("nobody"), None);
        assert!(unknown.trusted_extractor().is_none());
    }

    #[test]
    fn entries_hold_whole_keys_and_each_prefix_once() {
        let extractor = PrefixExtractor::fixed(2).unwrap();
        for whole_key_filtering in [true, false] {
            let options = TableOptions {
                prefix_extractor: Some(extractor.clone()),
                whole_key_filtering,
                ..TableOptions::default()
            };
            let mut entries = FilterEntries::new(&options);
            for key in [&b"a"[..], b"ab1", b"ab2", b"ac", b"b"] {
                entries.add(key);
            }
            let (hashes, info) = entries.finish();
            let info = info.unwrap();
            assert_eq!(info.prefixes, 2);
            assert_eq!(info.whole_keys, whole_key_filtering);
            assert_eq!(info.extractor, "siftdb.fixed:2");
            for p in [&b"ab"[..], b"ac"] {
                assert!(hashes.contains(&prefix_hash(p)));
            }
            // Keys without a prefix are always whole.
            for k in [&b"a"[..], b"b"] {
                assert!(hashes.contains(&hash_key(k)));
            }
            assert_eq!(
                hashes.contains(&hash_key(b"ab1")),
                whole_key_filtering,
                "{hashes:?}"
            );
            assert_eq!(hashes.len(), if whole_key_filtering { 7 } else { 4 });
        }
    }

    #[test]
    fn an_extractor_that_breaks_its_rule_leaves_whole_keys_only() {
        // "First 2 bytes, or 3 when the key is longer than 3": the prefix
        // "ab" of "ab12" is not "ab"'s own prefix... and prefixes repeat.
        let odd =
            PrefixExtractor::custom("odd", |k| Some(if k.len() > 3 { 3 } else { 2 })).unwrap();
        let options = TableOptions {
            prefix_extractor: Some(odd),
            whole_key_filtering: false,
            ..TableOptions::default()
        };
        let mut entries = FilterEntries::new(&options);
        for key in [&b"ab"[..], b"ab12", b"abc", b"abd1"] {
            entries.add(key);
        }
        let (hashes, info) = entries.finish();
        assert!(info.is_none());
        for key in [&b"ab"[..], b"ab12", b"abc", b"abd1"] {
            assert!(hashes.contains(&hash_key(key)), "{key:?}");
        }
    }

    #[test]
    fn no_extractor_means_whole_keys() {
        let mut entries = FilterEntries::new(&TableOptions::default());
        entries.add(b"x");
        entries.add(b"y");
        assert_eq!(entries.len(), 2);
        let (hashes, info) = entries.finish();
        assert_eq!(hashes, [hash_key(b"x"), hash_key(b"y")]);
        assert!(info.is_none());
        assert_ne!(prefix_hash(b"x"), hash_key(b"x"));
    }
}
