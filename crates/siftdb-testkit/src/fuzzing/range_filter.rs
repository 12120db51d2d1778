//! Fuzz target for the range filter block.
//!
//! Owns: `range_filter_decode` — arbitrary bytes through
//! `RangeFilterView::parse` and every query, and the same bytes read as a
//! key set, built into a filter that is then held to "no false negative".
//! Must never: panic unless the range filter broke a promise — a parser
//! that panics or refuses with anything but `Corruption`, an answer that
//! depends on the byte container, "maybe" for a range holding no string at
//! all, or "no" for a range holding a key.
#![expect(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch"
)]

use std::collections::BTreeSet;
use std::ops::Bound;

use siftdb::filter::range::{RangeFilter, RangeFilterView};

/// Strings to bound queries with: fixed ones plus windows of the input.
fn probe_strings(data: &[u8]) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![Vec::new(), b"k000000000000001".to_vec(), vec![0xff; 9]];
    out.extend(data.chunks(7).take(3).map(<[u8]>::to_vec));
    out
}

/// Arbitrary bytes as a range filter block, then as a key set.
///
/// The block is tried twice: as it is, and with its last four bytes
/// replaced by the crc32 of the rest (a fuzzer cannot forge a checksum;
/// without the second try every check past it would stay out of reach).
pub fn range_filter_decode(data: &[u8]) {
    check_block(data);
    if let Some(fixed) = super::with_checksum_fixed(data) {
        check_block(&fixed);
    }
    check_built(data);
}

fn check_block(data: &[u8]) {
    let view = match RangeFilterView::parse(data) {
        Ok(view) => view,
        Err(e) => {
            assert!(e.is_corruption(), "parse refused with {e}");
            return;
        }
    };
    let owned = match RangeFilterView::parse(data.to_vec()) {
        Ok(owned) => owned,
        Err(e) => panic!("parse accepted a slice and refused its copy: {e}"),
    };
    assert_eq!(view.header(), owned.header());
    let probes = probe_strings(data);
    for a in &probes {
        assert_eq!(view.may_contain(a), owned.may_contain(a));
        assert!(!view.may_contain_half_open(a, a), "[a, a) holds nothing");
        for b in &probes {
            let answer = view.may_contain_range(a, b);
            assert_eq!(answer, owned.may_contain_range(a, b));
            if a > b {
                assert!(!answer, "an inverted range holds nothing");
            }
            let bounds = [
                (Bound::Excluded(&a[..]), Bound::Excluded(&b[..])),
                (Bound::Unbounded, Bound::Included(&b[..])),
                (Bound::Excluded(&a[..]), Bound::Unbounded),
            ];
            for (start, end) in bounds {
                view.may_contain_bounds(start, end);
                if let Some((lo, hi)) = view.mapped_range(start, end) {
                    assert!(lo <= hi, "mapped range {lo} > {hi}");
                }
            }
        }
    }
}

/// The input as a key set: byte 0 picks bits per key in 3..=48; then each
/// key is a length byte (low five bits) and that many bytes, 32 keys at most.
fn key_set(data: &[u8]) -> Option<(f64, Vec<&[u8]>)> {
    let (&first, mut rest) = data.split_first()?;
    let bits = 3.0 + f64::from(first % 46);
    let mut keys = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let len = usize::from(len & 0x1f).min(tail.len());
        let (key, after) = tail.split_at(len);
        keys.push(key);
        rest = after;
        if keys.len() == 32 {
            break;
        }
    }
    Some((bits, keys))
}

fn check_built(data: &[u8]) {
    let Some((bits, keys)) = key_set(data) else {
        return;
    };
    let filter = match RangeFilter::from_keys(&keys, bits) {
        Ok(filter) => filter,
        Err(e) => panic!(
            "building from {} keys at {bits} bits failed: {e}",
            keys.len()
        ),
    };
    let set: BTreeSet<&[u8]> = keys.iter().copied().collect();
    assert_eq!(filter.header().keys, set.len() as u64);
    // Bounds: every key and its neighbours in string order; each bound is
    // paired with itself and the next few, where short ranges live.
    let mut bounds: BTreeSet<Vec<u8>> = BTreeSet::new();
    for key in &set {
        bounds.insert(key.to_vec());
        let mut after = key.to_vec();
        after.push(0);
        bounds.insert(after);
        if let Some((_, shorter)) = key.split_last() {
            bounds.insert(shorter.to_vec());
        }
    }
    let bounds: Vec<Vec<u8>> = bounds.into_iter().take(12).collect();
    for (i, a) in bounds.iter().enumerate() {
        assert!(
            !set.contains(&a[..]) || filter.may_contain(a),
            "key {a:02x?} lost"
        );
        for b in bounds.iter().skip(i).take(3) {
            for (start, end) in [
                (Bound::Included(&a[..]), Bound::Included(&b[..])),
                (Bound::Included(&a[..]), Bound::Excluded(&b[..])),
                (Bound::Excluded(&a[..]), Bound::Included(&b[..])),
            ] {
                // The first key from `start` on decides.
                let holds = set
                    .range::<&[u8], _>((start.map(|s| s), Bound::Unbounded))
                    .next()
                    .is_some_and(|k| end_ok(end, k));
                if holds {
                    assert!(
                        filter.may_contain_bounds(start, end),
                        "false negative for {start:02x?}..{end:02x?} over {set:02x?}"
                    );
                }
            }
        }
    }
    match RangeFilterView::parse(filter.as_bytes()) {
        Ok(again) => assert_eq!(again.header(), filter.header()),
        Err(e) => panic!("a built block does not parse: {e}"),
    }
}

fn end_ok(end: Bound<&[u8]>, k: &[u8]) -> bool {
    match end {
        Bound::Included(b) => k <= b,
        Bound::Excluded(b) => k < b,
        Bound::Unbounded => true,
    }
}
