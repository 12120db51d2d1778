//! [`KeyspaceOptions`]: the settings of one keyspace, as an application
//! gives them to `Db::keyspace_with`, and how they combine with the ones
//! stored before.
//!
//! Owns: the public builder, the split between what is stored (the data
//! settings, a [`KeyspaceSettings`]) and what is code (compaction filter,
//! merge operator, custom prefix extractor), and their application over the
//! database's [`Options`].
//! Must never: store code, or hand out options that [`Options::validate`]
//! refuses.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::manifest::KeyspaceSettings;
use crate::options::{CompactionFilter, Compression, MergeOperator, Options};
use crate::prefix::PrefixExtractor;
use siftdb_filter::FilterPolicy;

/// Settings of one keyspace: how its tables are built and filtered, its
/// memtable's size, and its compaction filter and merge operator. Unset
/// fields take the database's [`Options`].
///
/// [`Db::keyspace_with`](crate::Db::keyspace_with) applies the fields it is given over the
/// keyspace's current ones (a field not given keeps its value). The data
/// settings — filter policy, block size, compression (per level too), a fixed prefix
/// extractor, whole-key filtering, range filter bits, memtable size, blob
/// threshold — are
/// stored in the manifest, so the keyspace keeps them when the database is
/// opened again ([`Db::keyspace`](crate::Db::keyspace) then gives it with them). Code is not
/// stored: give the compaction filter, the merge operator and a custom
/// prefix extractor at each open (until then the keyspace has none). A
/// table keeps the settings it was built with, so a change applies to
/// tables written after it.
#[derive(Clone, Default)]
pub struct KeyspaceOptions {
    settings: KeyspaceSettings,
    custom_prefix_extractor: Option<PrefixExtractor>,
    compaction_filter: Option<Arc<dyn CompactionFilter>>,
    merge_operator: Option<Arc<dyn MergeOperator>>,
    /// `blob_threshold(Some(0))` was given: refused as `Options` refuses it.
    zero_blob_threshold: bool,
}

impl KeyspaceOptions {
    /// The database's settings, unchanged.
    pub fn new() -> KeyspaceOptions {
        KeyspaceOptions::default()
    }

    /// See [`Options::filter_policy`].
    pub fn filter_policy(mut self, policy: FilterPolicy) -> Self {
        self.settings.filter_policy = Some(policy);
        self
    }

    /// See [`Options::bloom_bits_per_key`].
    pub fn bloom_bits_per_key(self, bits: f64) -> Self {
        self.filter_policy(FilterPolicy::bits_per_key(bits))
    }

    /// See [`Options::block_size`].
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.settings.block_size = Some(u32::try_from(bytes).unwrap_or(u32::MAX));
        self
    }

    /// See [`Options::compression`].
    pub fn compression(mut self, compression: Compression) -> Self {
        self.settings.compression = Some(compression);
        self
    }

    /// See [`Options::compression_per_level`].
    pub fn compression_per_level(mut self, compressions: Vec<Compression>) -> Self {
        self.settings.compression_per_level = Some(compressions);
        self
    }

    /// See [`Options::bottommost_compression`].
    pub fn bottommost_compression(mut self, compression: Compression) -> Self {
        self.settings.bottommost_compression = Some(compression);
        self
    }

    /// See [`Options::bottommost_zstd_dictionary_bytes`].
    pub fn bottommost_zstd_dictionary_bytes(mut self, bytes: usize) -> Self {
        self.settings.bottommost_dictionary_bytes = Some(u32::try_from(bytes).unwrap_or(u32::MAX));
        self
    }

    /// See [`Options::prefix_extractor`]. A fixed extractor is stored; a
    /// custom one is code, given at each open.
    pub fn prefix_extractor(mut self, extractor: PrefixExtractor) -> Self {
        match extractor.fixed_len() {
            Some(len) => {
                self.settings.prefix_len = Some(u32::try_from(len).unwrap_or(u32::MAX));
                self.custom_prefix_extractor = None;
            }
            None => {
                self.settings.prefix_len = Some(0);
                self.custom_prefix_extractor = Some(extractor);
            }
        }
        self
    }

    /// See [`Options::whole_key_filtering`].
    pub fn whole_key_filtering(mut self, whole_keys: bool) -> Self {
        self.settings.whole_key_filtering = Some(whole_keys);
        self
    }

    /// See [`Options::range_filter_bits_per_key`].
    pub fn range_filter_bits_per_key(mut self, bits: f64) -> Self {
        self.settings.range_filter_bits_per_key = Some(bits);
        self
    }

    /// See [`Options::memtable_bytes`].
    pub fn memtable_bytes(mut self, bytes: usize) -> Self {
        self.settings.memtable_bytes = Some(bytes as u64);
        self
    }

    /// See [`Options::blob_threshold`]: this keyspace's, stored with its
    /// other settings. `None` keeps every value of this keyspace inline
    /// whatever the database's threshold; a keyspace never given one takes
    /// the database's.
    pub fn blob_threshold(mut self, bytes: Option<usize>) -> Self {
        // 0 is what the settings store for `None`, so `Some(0)` (which
        // `Options::validate` refuses) is remembered apart and refused by
        // `apply`.
        self.zero_blob_threshold = bytes == Some(0);
        self.settings.blob_threshold = Some(bytes.map_or(0, |bytes| bytes as u64));
        self
    }

    /// See [`Options::compaction_filter`]: this keyspace's.
    pub fn compaction_filter(mut self, filter: Arc<dyn CompactionFilter>) -> Self {
        self.compaction_filter = Some(filter);
        self
    }

    /// See [`Options::merge_operator`]: this keyspace's.
    pub fn merge_operator(mut self, operator: Arc<dyn MergeOperator>) -> Self {
        self.merge_operator = Some(operator);
        self
    }

    /// A keyspace's options as the manifest stored them.
    pub(crate) fn from_settings(settings: KeyspaceSettings) -> KeyspaceOptions {
        KeyspaceOptions {
            settings,
            ..KeyspaceOptions::default()
        }
    }

    /// The custom prefix extractor given, if one was.
    pub(crate) fn custom_prefix_extractor(&self) -> Option<&PrefixExtractor> {
        self.custom_prefix_extractor.as_ref()
    }

    /// What the manifest stores of these options.
    pub(crate) fn settings(&self) -> &KeyspaceSettings {
        &self.settings
    }

    /// These options with the fields `given` sets replacing theirs.
    pub(crate) fn overlaid(&self, given: &KeyspaceOptions) -> KeyspaceOptions {
        let (mut out, g) = (self.clone(), &given.settings);
        let s = &mut out.settings;
        s.filter_policy = g.filter_policy.or(s.filter_policy);
        s.block_size = g.block_size.or(s.block_size);
        s.compression = g.compression.or(s.compression);
        if g.prefix_len.is_some() {
            s.prefix_len = g.prefix_len;
            out.custom_prefix_extractor = given.custom_prefix_extractor.clone();
        }
        s.whole_key_filtering = g.whole_key_filtering.or(s.whole_key_filtering);
        s.range_filter_bits_per_key = g.range_filter_bits_per_key.or(s.range_filter_bits_per_key);
        s.memtable_bytes = g.memtable_bytes.or(s.memtable_bytes);
        s.bottommost_compression = g.bottommost_compression.or(s.bottommost_compression);
        s.bottommost_dictionary_bytes = g
            .bottommost_dictionary_bytes
            .or(s.bottommost_dictionary_bytes);
        s.blob_threshold = g.blob_threshold.or(s.blob_threshold);
        out.zero_blob_threshold |= given.zero_blob_threshold;
        if g.compression_per_level.is_some() {
            s.compression_per_level = g.compression_per_level.clone();
        }
        if let Some(filter) = &given.compaction_filter {
            out.compaction_filter = Some(Arc::clone(filter));
        }
        if let Some(operator) = &given.merge_operator {
            out.merge_operator = Some(Arc::clone(operator));
        }
        out
    }

    /// `base` with these settings applied, checked as [`Options::validate`] does.
    pub(crate) fn apply(&self, base: &Options) -> Result<Options> {
        if self.zero_blob_threshold {
            return Err(Error::invalid(
                "blob_threshold must be at least 1 byte (None keeps values inline)",
            ));
        }
        let mut opts = self.settings.apply_to(base);
        if let Some(extractor) = &self.custom_prefix_extractor {
            opts.prefix_extractor = Some(extractor.clone());
        }
        if let Some(filter) = &self.compaction_filter {
            opts = opts.compaction_filter(Arc::clone(filter));
        }
        if let Some(operator) = &self.merge_operator {
            opts = opts.merge_operator(Arc::clone(operator));
        }
        opts.validate()?;
        Ok(opts)
    }
}

impl std::fmt::Debug for KeyspaceOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeyspaceOptions")
            .field("settings", &self.settings)
            .field(
                "custom_prefix_extractor",
                &self.custom_prefix_extractor.as_ref().map(|p| p.name()),
            )
            .field("compaction_filter", &self.compaction_filter.is_some())
            .field("merge_operator", &self.merge_operator.is_some())
            .finish()
    }
}
