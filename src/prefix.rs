//! Prefix extractors: which leading bytes of a key name its group, so that a
//! table's filter can answer "may this table hold a key starting with p?"
//! and a prefix scan can skip the tables that cannot.
//!
//! Owns: [`PrefixExtractor`] (fixed-length or custom, each with a name a
//! table records), the rule an extractor must keep, and
//! [`PrefixExtractor::shared_prefix`], which finds the one extractor prefix
//! every key within a pair of scan bounds has, if there is one.
//! Must never: call two ranges "one prefix" unless every key between the
//! bounds has that prefix (a scan would then skip a table holding a key of
//! its range), or hand out a prefix longer than its key.
//!
//! # The rule an extractor keeps
//!
//! An extractor maps a key to the length of its prefix, or to `None` when
//! the key has no prefix (it is *out of domain*: a key shorter than a fixed
//! extractor's length). It must be **prefix-closed**: when `p` is the prefix
//! of some key, every key that starts with `p` has prefix `p` too. Then the
//! keys whose prefix is `p` are exactly the keys starting with `p` — one
//! contiguous run in key order — which is what lets a table builder add each
//! prefix once and a scan of `[a, b]` inside that run ask the filter for `p`.
//! A fixed-length extractor keeps the rule by construction; a custom one
//! must (e.g. "everything up to and including the first `:`", or "the first
//! 8 bytes"; not "the first 4 bytes, or 8 when the key is longer than 12").
//! Table builders check the part they can see (the prefix of a prefix is
//! itself) and build no prefix entries when it fails; a table built with an
//! extractor of another name is never asked about prefixes.
//!
//! ```
//! use std::ops::Bound;
//! use siftdb::PrefixExtractor;
//! let fixed = PrefixExtractor::fixed(4)?;
//! assert_eq!(fixed.name(), "siftdb.fixed:4");
//! assert_eq!(fixed.prefix(b"user1234"), Some(&b"user"[..]));
//! assert_eq!(fixed.prefix(b"usr"), None);
//! // Every key within ["user12", "user19"] starts with "user":
//! let (a, b) = (&b"user12"[..], &b"user19"[..]);
//! assert_eq!(fixed.shared_prefix(Bound::Included(a), Bound::Included(b)), Some(&b"user"[..]));
//! // ["user9", "uses") ends where the keys starting with "user" end:
//! let (a, b) = (&b"user9"[..], &b"uses"[..]);
//! assert_eq!(fixed.shared_prefix(Bound::Included(a), Bound::Excluded(b)), Some(&b"user"[..]));
//! // ["user9", "usez"] crosses into other prefixes:
//! let b = &b"usez"[..];
//! assert_eq!(fixed.shared_prefix(Bound::Included(a), Bound::Included(b)), None);
//!
//! let colon = PrefixExtractor::custom("up-to-colon", |key| {
//!     key.iter().position(|&b| b == b':').map(|at| at + 1)
//! })?;
//! assert_eq!(colon.prefix(b"tenant:42"), Some(&b"tenant:"[..]));
//! # Ok::<(), siftdb::Error>(())
//! ```

use std::fmt;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use crate::error::{Error, Result};

/// Names beginning with this are siftdb's own extractors.
pub const RESERVED_NAME_PREFIX: &str = "siftdb.";
/// The longest extractor name a table records, in bytes.
pub const MAX_NAME_LEN: usize = 255;
/// The longest fixed prefix, in bytes (the largest key).
pub const MAX_FIXED_LEN: usize = crate::key::MAX_KEY_LEN;

/// A custom extractor's function: the length of `key`'s prefix, or `None`
/// when the key has none.
pub type PrefixFn = dyn Fn(&[u8]) -> Option<usize> + Send + Sync;

#[derive(Clone)]
enum Kind {
    Fixed(usize),
    Custom(Arc<PrefixFn>),
}

/// Which leading bytes of a key are its prefix. Cheap to clone. Two
/// extractors are equal when their names are: a name stands for one
/// function, forever (tables record it and trust it by name).
#[derive(Clone)]
pub struct PrefixExtractor {
    name: Arc<str>,
    kind: Kind,
}

impl PrefixExtractor {
    /// The first `len` bytes of every key of at least `len` bytes; shorter
    /// keys have no prefix. Named `siftdb.fixed:<len>`. `len` must be
    /// within `1..=MAX_FIXED_LEN` (the longest key siftdb takes).
    pub fn fixed(len: usize) -> Result<PrefixExtractor> {
        if !(1..=MAX_FIXED_LEN).contains(&len) {
            return Err(Error::invalid(format!(
                "a fixed prefix length must be within 1..={MAX_FIXED_LEN}, got {len}"
            )));
        }
        Ok(PrefixExtractor {
            name: Arc::from(format!("{RESERVED_NAME_PREFIX}fixed:{len}")),
            kind: Kind::Fixed(len),
        })
    }

    /// An extractor of your own: `prefix_len(key)` is the length of `key`'s
    /// prefix, or `None` when it has none; it must be prefix-closed (see
    /// the module docs) and always give the same answer for the same key.
    /// `name` (1..=255 bytes, not starting with `siftdb.`) is recorded in
    /// every table built with it: give a new name to a changed function, or
    /// old tables would be trusted for prefixes they were not built with.
    /// A length beyond the key is treated as "no prefix".
    pub fn custom(
        name: &str,
        prefix_len: impl Fn(&[u8]) -> Option<usize> + Send + Sync + 'static,
    ) -> Result<PrefixExtractor> {
        if name.is_empty() || name.len() > MAX_NAME_LEN {
            return Err(Error::invalid(format!(
                "a prefix extractor's name must have 1..={MAX_NAME_LEN} bytes, got {}",
                name.len()
            )));
        }
        if name.starts_with(RESERVED_NAME_PREFIX) {
            return Err(Error::invalid(format!(
                "prefix extractor names starting with {RESERVED_NAME_PREFIX:?} are siftdb's own: {name:?}"
            )));
        }
        Ok(PrefixExtractor {
            name: Arc::from(name),
            kind: Kind::Custom(Arc::new(prefix_len)),
        })
    }

    /// The extractor a table names when the name is one of siftdb's own
    /// (`siftdb.fixed:<len>`, exactly as [`PrefixExtractor::fixed`] writes
    /// it): the name alone defines the function, so a table built with it
    /// can be trusted by any reader. `None` for any other name.
    pub(crate) fn builtin(name: &str) -> Option<PrefixExtractor> {
        let len: usize = name
            .strip_prefix(RESERVED_NAME_PREFIX)?
            .strip_prefix("fixed:")?
            .parse()
            .ok()?;
        PrefixExtractor::fixed(len)
            .ok()
            .filter(|fixed| fixed.name() == name)
    }

    /// The length of a fixed extractor ([`PrefixExtractor::fixed`]);
    /// `None` for a custom one.
    pub(crate) fn fixed_len(&self) -> Option<usize> {
        match self.kind {
            Kind::Fixed(len) => Some(len),
            Kind::Custom(_) => None,
        }
    }

    /// The name tables record.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `key`'s prefix, or `None` when it has none.
    #[inline]
    pub fn prefix<'k>(&self, key: &'k [u8]) -> Option<&'k [u8]> {
        let len = match &self.kind {
            Kind::Fixed(len) => *len,
            Kind::Custom(f) => f(key)?,
        };
        key.get(..len)
    }

    /// The prefix every key within the bounds has, when there is one: the
    /// prefix `p` of the start bound's key, provided the end bound lies
    /// within the keys starting with `p`. With a prefix-closed extractor
    /// those are exactly the keys whose prefix is `p`, so a table whose
    /// filter rules `p` out holds no key within the bounds. `None` for an
    /// unbounded start, a start key without a prefix, or an end beyond the
    /// run of `p`.
    pub fn shared_prefix<'k>(&self, start: Bound<&'k [u8]>, end: Bound<&[u8]>) -> Option<&'k [u8]> {
        let start = match start {
            Bound::Included(key) | Bound::Excluded(key) => key,
            Bound::Unbounded => return None,
        };
        let prefix = self.prefix(start)?;
        let within = match end {
            // Below every key starting with `p`'s successor: starts with `p`
            // itself, since it is at least `start`.
            Bound::Included(end) => end.starts_with(prefix),
            Bound::Excluded(end) => at_most_successor(end, prefix),
            Bound::Unbounded => prefix.iter().all(|&b| b == u8::MAX),
        };
        within.then_some(prefix)
    }
}

/// Whether `end ≤ successor(prefix)` (true when there is no successor),
/// without building the successor: it is `prefix` cut after its last byte
/// below 0xff, that byte plus one.
fn at_most_successor(end: &[u8], prefix: &[u8]) -> bool {
    let Some(last) = prefix.iter().rposition(|&b| b != u8::MAX) else {
        return true;
    };
    let (head, tail) = prefix.split_at(last);
    let Some(&byte) = tail.first() else {
        return true;
    };
    let (end_head, end_tail) = end.split_at(end.len().min(last));
    match end_head.cmp(head) {
        std::cmp::Ordering::Less => true,
        std::cmp::Ordering::Greater => false,
        // `end` is shorter than the successor: below it.
        std::cmp::Ordering::Equal => match end_tail.split_first() {
            None => true,
            Some((&b, rest)) => b <= byte || (b == byte + 1 && rest.is_empty()),
        },
    }
}

/// The smallest byte string greater than every string starting with
/// `prefix`, or `None` when there is none (`prefix` is all `0xff`): the end
/// of `Db::prefix(prefix)`'s range.
pub fn successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let keep = prefix.iter().rposition(|&b| b != u8::MAX)?;
    let mut out = prefix.get(..=keep)?.to_vec();
    if let Some(last) = out.last_mut() {
        *last += 1;
    }
    Some(out)
}

impl PartialEq for PrefixExtractor {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for PrefixExtractor {}

/// Custom extractors given to keyspaces (`KeyspaceOptions::prefix_extractor`),
/// by name: a table built with one of them that was opened before it was
/// given (at the database's open, for one) finds it here when first asked.
/// A name stands for one function, so the last one given under a name
/// replaces the one before.
#[derive(Debug, Default)]
pub(crate) struct KnownExtractors {
    known: parking_lot::RwLock<Vec<PrefixExtractor>>,
    /// Extractors remembered so far: a table that found none of its name
    /// looks again only once this has moved.
    generation: AtomicU64,
}

impl KnownExtractors {
    /// Makes `extractor` known by its name.
    pub(crate) fn remember(&self, extractor: &PrefixExtractor) {
        let mut known = self.known.write();
        match known.iter_mut().find(|e| e.name() == extractor.name()) {
            Some(slot) => *slot = extractor.clone(),
            None => known.push(extractor.clone()),
        }
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// How many extractors were remembered so far; read before
    /// [`KnownExtractors::named`], a later change shows as a larger value.
    pub(crate) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The extractor of this name, if one was given.
    pub(crate) fn named(&self, name: &str) -> Option<PrefixExtractor> {
        self.known.read().iter().find(|e| e.name() == name).cloned()
    }
}

impl fmt::Debug for PrefixExtractor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PrefixExtractor").field(&self.name).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_siftdbs_own_names_define_an_extractor() {
        let four = PrefixExtractor::builtin("siftdb.fixed:4").unwrap();
        assert_eq!(four.fixed_len(), Some(4));
        assert_eq!(four.name(), "siftdb.fixed:4");
        let max = format!("siftdb.fixed:{MAX_FIXED_LEN}");
        assert_eq!(
            PrefixExtractor::builtin(&max).unwrap().fixed_len(),
            Some(MAX_FIXED_LEN)
        );
        for name in [
            "siftdb.fixed:04",
            "siftdb.fixed:+4",
            "siftdb.fixed:0",
            "siftdb.fixed:",
            "siftdb.fixed:4 ",
            "siftdb.fixed:99999999999999999999999",
            "siftdb.fixedd:4",
            "fixed:4",
            "up-to-colon",
            "",
        ] {
            assert!(PrefixExtractor::builtin(name).is_none(), "{name:?}");
        }
        let too_long = format!("siftdb.fixed:{}", MAX_FIXED_LEN + 1);
        assert!(PrefixExtractor::builtin(&too_long).is_none());
    }

    #[test]
    fn fixed_and_custom_prefixes() {
        let fixed = PrefixExtractor::fixed(3).unwrap();
        assert_eq!(fixed.prefix(b"abcd"), Some(&b"abc"[..]));
        assert_eq!(fixed.prefix(b"abc"), Some(&b"abc"[..]));
        assert_eq!(fixed.prefix(b"ab"), None);
        assert!(PrefixExtractor::fixed(0).is_err());
        assert!(PrefixExtractor::fixed(MAX_FIXED_LEN + 1).is_err());
        let long = PrefixExtractor::custom("too-long", |_| Some(10)).unwrap();
        assert_eq!(long.prefix(b"short"), None);
        assert!(PrefixExtractor::custom("", |_| None).is_err());
        assert!(PrefixExtractor::custom("siftdb.fixed:3", |_| None).is_err());
        assert!(PrefixExtractor::custom(&"x".repeat(256), |_| None).is_err());
        assert_eq!(fixed, PrefixExtractor::fixed(3).unwrap());
        assert_ne!(fixed, PrefixExtractor::fixed(4).unwrap());
        assert_eq!(format!("{fixed:?}"), "PrefixExtractor(\"siftdb.fixed:3\")");
    }

    #[test]
    fn successor_skips_trailing_max_bytes() {
        assert_eq!(successor(b"ab"), Some(b"ac".to_vec()));
        assert_eq!(successor(b"a\xff"), Some(b"b".to_vec()));
        assert_eq!(successor(b"\xff\xff"), None);
        assert_eq!(successor(b""), None);
        // The comparison without the successor agrees with the one with it.
        let bytes = [0u8, 1, 0x61, 0x62, 0xfe, 0xff];
        let mut strings: Vec<Vec<u8>> = vec![Vec::new()];
        for _ in 0..3 {
            let longer: Vec<Vec<u8>> = strings
                .iter()
                .flat_map(|s| {
                    bytes.iter().map(move |&b| {
                        let mut t = s.clone();
                        t.push(b);
                        t
                    })
                })
                .collect();
            strings.extend(longer);
        }
        strings.sort();
        strings.dedup();
        for prefix in &strings {
            for end in &strings {
                let want = successor(prefix).is_none_or(|s| end.as_slice() <= s.as_slice());
                assert_eq!(at_most_successor(end, prefix), want, "{prefix:?} {end:?}");
            }
        }
    }

    fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
        match b {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        }
    }

    /// Every key within the bounds, over a small alphabet, has the shared
    /// prefix the extractor names: checked against brute force.
    #[test]
    fn shared_prefix_holds_for_every_key_within_the_bounds() {
        let alphabet = [0u8, 1, 0xfe, 0xff];
        let mut keys: Vec<Vec<u8>> = vec![Vec::new()];
        for len in 1..=4 {
            let mut next = Vec::new();
            for key in keys.iter().filter(|k| k.len() == len - 1) {
                for &b in &alphabet {
                    let mut k = key.clone();
                    k.push(b);
                    next.push(k);
                }
            }
            keys.extend(next);
        }
        keys.sort();
        let extractors = [
            PrefixExtractor::fixed(1).unwrap(),
            PrefixExtractor::fixed(2).unwrap(),
            PrefixExtractor::custom("to-first-zero", |k| {
                k.iter().position(|&b| b == 0).map(|at| at + 1)
            })
            .unwrap(),
        ];
        let bounds = |k: &[u8]| {
            [
                Bound::Included(k.to_vec()),
                Bound::Excluded(k.to_vec()),
                Bound::Unbounded,
            ]
        };
        let mut shared = 0;
        for e in &extractors {
            for a in keys.iter().step_by(3) {
                for b in keys.iter().step_by(5) {
                    for start in bounds(a) {
                        for end in bounds(b) {
                            let Some(p) = e.shared_prefix(as_ref(&start), as_ref(&end)) else {
                                continue;
                            };
                            shared += 1;
                            let range = (as_ref(&start), as_ref(&end));
                            for k in &keys {
                                if std::ops::RangeBounds::<&[u8]>::contains(&range, &k.as_slice()) {
                                    assert_eq!(e.prefix(k), Some(p), "{e:?} {range:?} {k:?}");
                                }
                            }
                        }
                    }
                }
            }
        }
        assert!(shared > 1000, "{shared}");
    }
}
