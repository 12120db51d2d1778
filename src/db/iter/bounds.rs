//! Key ranges as owned bounds: a caller's `RangeBounds`, or a prefix.
//!
//! Owns: turning a range or a prefix into the `(start, end)` bounds a scan
//! takes. Must never: read anything (these are pure conversions).

use std::ops::{Bound, RangeBounds};

/// `range` with owned bounds.
pub(crate) fn owned_range<K: AsRef<[u8]>, R: RangeBounds<K>>(
    range: R,
) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let own = |b: Bound<&K>| match b {
        Bound::Included(k) => Bound::Included(k.as_ref().to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.as_ref().to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    };
    (own(range.start_bound()), own(range.end_bound()))
}

/// The keys starting with `prefix`, as bounds.
pub(crate) fn prefix_range(prefix: &[u8]) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let end = match crate::prefix::successor(prefix) {
        Some(end) => Bound::Excluded(end),
        None => Bound::Unbounded,
    };
    (Bound::Included(prefix.to_vec()), end)
}
