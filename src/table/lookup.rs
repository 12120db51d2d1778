//! [`LookupKey`]: one point lookup's key in every form the read path needs,
//! built once per `get` and passed down to every table it asks.
//!
//! Owns: the user key, its filter hash (xxh3-64, seed 0, as every table
//! filter is built with), its head (`key::key_head`, for index searches),
//! the snapshot, and the encoded internal lookup key
//! `user key ‖ tag(snapshot, put)` — the first internal key a version of the
//! user key visible at the snapshot can have.
//! Must never: allocate for the keys a database usually holds (up to
//! [`INLINE_KEY_LEN`] bytes are encoded in place), or be re-encoded per table.

use crate::key::{encode_internal_key, key_head, tag, SeqNo, ValueKind, TAG_LEN};
use siftdb_filter::hash_key;

/// User keys up to this long are encoded without an allocation.
pub const INLINE_KEY_LEN: usize = 56;

/// The encoded internal lookup key: in place when short, on the heap otherwise.
#[derive(Debug, Clone)]
enum Encoded {
    Inline {
        bytes: [u8; INLINE_KEY_LEN + TAG_LEN],
        len: usize,
    },
    Heap(Vec<u8>),
}

/// A point lookup of one user key at one snapshot. See the module docs.
///
/// ```
/// use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
/// use siftdb::internals::table::LookupKey;
/// let lookup = LookupKey::new(b"apple", SeqNo(7));
/// assert_eq!(lookup.internal_key(), internal_key(b"apple", SeqNo(7), ValueKind::SEEK));
/// assert_eq!(lookup.hash(), siftdb::filter::hash_key(b"apple"));
/// ```
#[derive(Debug, Clone)]
pub struct LookupKey<'k> {
    user_key: &'k [u8],
    hash: u64,
    head: u128,
    snapshot: SeqNo,
    encoded: Encoded,
}

impl<'k> LookupKey<'k> {
    /// The lookup of `user_key` at `snapshot`: hashed and encoded once.
    pub fn new(user_key: &'k [u8], snapshot: SeqNo) -> LookupKey<'k> {
        LookupKey::with_hash(user_key, hash_key(user_key), snapshot)
    }

    /// [`LookupKey::new`] with the hash already computed
    /// ([`siftdb_filter::hash_key`] of `user_key`).
    pub fn with_hash(user_key: &'k [u8], hash: u64, snapshot: SeqNo) -> LookupKey<'k> {
        let encoded = if user_key.len() <= INLINE_KEY_LEN {
            let mut bytes = [0u8; INLINE_KEY_LEN + TAG_LEN];
            let len = user_key.len() + TAG_LEN;
            let tag_bytes = tag(snapshot, ValueKind::SEEK).to_le_bytes();
            // Two block copies (a byte-by-byte loop over the chained slices
            // cost a tenth of a missing key's get).
            let (key_part, tag_part) = bytes.split_at_mut(user_key.len());
            key_part.copy_from_slice(user_key);
            if let Some(tag_part) = tag_part.get_mut(..TAG_LEN) {
                tag_part.copy_from_slice(&tag_bytes);
            }
            Encoded::Inline { bytes, len }
        } else {
            let mut heap = Vec::with_capacity(user_key.len() + TAG_LEN);
            encode_internal_key(&mut heap, user_key, snapshot, ValueKind::SEEK);
            Encoded::Heap(heap)
        };
        LookupKey {
            user_key,
            hash,
            head: key_head(user_key),
            snapshot,
            encoded,
        }
    }

    /// The user key.
    #[inline]
    pub fn user_key(&self) -> &'k [u8] {
        self.user_key
    }

    /// The user key's filter hash.
    #[inline]
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The user key's head ([`crate::key::key_head`]).
    #[inline]
    pub(crate) fn head(&self) -> u128 {
        self.head
    }

    /// The snapshot the lookup reads at.
    #[inline]
    pub fn snapshot(&self) -> SeqNo {
        self.snapshot
    }

    /// `user key ‖ tag(snapshot, put)`: the entry a lookup seeks to.
    #[inline]
    pub fn internal_key(&self) -> &[u8] {
        match &self.encoded {
            Encoded::Inline { bytes, len } => bytes.get(..*len).unwrap_or_default(),
            Encoded::Heap(heap) => heap,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::internal_key;

    #[test]
    fn short_and_long_keys_encode_like_internal_key() {
        for len in [
            0,
            1,
            INLINE_KEY_LEN - 1,
            INLINE_KEY_LEN,
            INLINE_KEY_LEN + 1,
            1000,
        ] {
            let user_key = vec![b'x'; len];
            for seq in [SeqNo(0), SeqNo(5), SeqNo::MAX] {
                let lookup = LookupKey::new(&user_key, seq);
                assert_eq!(
                    lookup.internal_key(),
                    internal_key(&user_key, seq, ValueKind::SEEK)
                );
                assert_eq!(lookup.user_key(), &user_key[..]);
                assert_eq!(lookup.snapshot(), seq);
                assert_eq!(lookup.hash(), hash_key(&user_key));
                assert_eq!(lookup.head(), key_head(&user_key));
            }
        }
    }
}
