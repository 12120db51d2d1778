//! The hashes a table's point filter holds: a whole user key's
//! ([`siftdb_filter::hash_key`]) and a key prefix's ([`prefix_hash`], with a
//! seed of its own so a prefix never answers for an equal whole key).
//! Computed by the builder (`scan_filters::FilterEntries`) when it fills the
//! filter, by a get (`get.rs`, `point_hash`) when it asks it, and by the
//! scan's prefix probe and the full check.
//!
//! Owns: the prefix hash and its seed (`docs/format.md`, the filter block's entries).
//! Must never: change a hash a table file holds — tables written with one
//! hash are asked with the same one for their whole life; it depends on
//! nothing above it in `table/`.

use siftdb_filter::hash_key_seeded;

/// The seed of a prefix's filter hash (xxh3-64), so that the entry of
/// prefix `p` and the entry of a whole key equal to `p` are different
/// hashes: "prefix:" in ASCII, then 1.
pub const PREFIX_HASH_SEED: u64 = 0x7072_6566_6978_3a01;

/// The hash a table's filter holds for the key prefix `prefix`.
#[inline]
pub fn prefix_hash(prefix: &[u8]) -> u64 {
    hash_key_seeded(prefix, PREFIX_HASH_SEED)
}
