//! Fuzz target for the range tombstone block.
//!
//! Owns: `range_tombstone_decode` — arbitrary bytes through
//! `FragmentedTombstones::decode`, and the same bytes read as a list of
//! range tombstones that is fragmented, encoded and decoded again.
//! Must never: panic unless the block's decoder or the fragments broke a
//! promise — a decoder that panics or refuses with anything but
//! `Corruption`, an accepted block that is not its own canonical encoding
//! or whose fragments overlap, are out of order or carry sequence numbers
//! not strictly decreasing, or fragments that answer a lookup otherwise
//! than the tombstones they were cut from.
#![expect(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch"
)]

use siftdb::internals::key::SeqNo;
use siftdb::internals::range_tombstone::{FragmentedTombstones, RangeTombstone};

/// Arbitrary bytes as a range tombstone block, then as a tombstone list.
pub fn range_tombstone_decode(data: &[u8]) {
    check_block(data);
    check_fragmented(data);
}

/// Keys to look up: fixed ones, each fragment's bounds and a key just past.
fn probes(list: &FragmentedTombstones) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = vec![Vec::new(), b"a".to_vec(), b"m".to_vec(), vec![0xff; 4]];
    for f in list.fragments().iter().take(16) {
        out.push(f.start.clone());
        let mut after = f.start.clone();
        after.push(0);
        out.push(after);
        out.extend(f.end.clone());
    }
    out
}

fn check_block(data: &[u8]) {
    let list = match FragmentedTombstones::decode(data) {
        Ok(list) => list,
        Err(e) => {
            assert!(e.is_corruption(), "decode refused with {e}");
            return;
        }
    };
    assert_eq!(list.encode(), data, "an accepted block is its own encoding");
    for pair in list.fragments().windows(2) {
        let [a, b] = pair else { continue };
        assert!(
            a.end
                .as_deref()
                .is_some_and(|end| end <= b.start.as_slice()),
            "fragments overlap or are out of order"
        );
    }
    for f in list.fragments() {
        assert!(!f.seqs.is_empty(), "a fragment without a sequence number");
        assert!(
            f.seqs.windows(2).all(|w| matches!(w, [x, y] if x > y)),
            "sequence numbers not strictly decreasing"
        );
        assert!(f.end.as_deref().is_none_or(|end| f.start.as_slice() < end));
    }
    // A lookup agrees with a walk over the fragments.
    let tombstones: Vec<RangeTombstone> = list.tombstones().collect();
    for key in probes(&list) {
        for snapshot in [SeqNo(0), SeqNo(5), SeqNo::MAX] {
            assert_eq!(
                list.covering_seq(&key, snapshot),
                brute(&tombstones, &key, snapshot)
            );
        }
    }
    // Fragmenting the fragments again changes nothing they cover.
    let again = FragmentedTombstones::new(tombstones.iter().cloned());
    for key in probes(&list) {
        assert_eq!(
            again.covering_seq(&key, SeqNo::MAX),
            list.covering_seq(&key, SeqNo::MAX)
        );
    }
}

/// The newest sequence number at most `snapshot` of a tombstone covering `key`.
fn brute(tombstones: &[RangeTombstone], key: &[u8], snapshot: SeqNo) -> Option<SeqNo> {
    tombstones
        .iter()
        .filter(|t| {
            t.seq <= snapshot
                && t.start.as_slice() <= key
                && t.end.as_deref().is_none_or(|end| key < end)
        })
        .map(|t| t.seq)
        .max()
}

/// The bytes as tombstones: each a seq byte, a start (a length byte's low
/// three bits and that many bytes) and an end (the same; length byte 7:
/// unbounded).
fn check_fragmented(data: &[u8]) {
    let mut rest = data;
    let mut take = |n: usize| {
        let (head, tail) = rest.split_at(n.min(rest.len()));
        rest = tail;
        head.to_vec()
    };
    let mut tombstones = Vec::new();
    while tombstones.len() < 32 {
        let header = take(2);
        let [seq, lens] = header[..] else {
            break;
        };
        let start = take(usize::from(lens & 7));
        let end_len = usize::from((lens >> 3) & 7);
        let end = (end_len != 7).then(|| take(end_len));
        tombstones.push(RangeTombstone::new(start, end, SeqNo(u64::from(seq))));
    }
    let list = FragmentedTombstones::new(tombstones.iter().cloned());
    let decoded = match FragmentedTombstones::decode(&list.encode()) {
        Ok(decoded) => decoded,
        Err(e) => panic!("fragments of {tombstones:?} do not decode: {e}"),
    };
    assert_eq!(decoded, list);
    let mut keys = probes(&list);
    keys.extend(tombstones.iter().map(|t| t.start.clone()));
    for key in keys {
        for snapshot in [SeqNo(0), SeqNo(100), SeqNo::MAX] {
            assert_eq!(
                list.covering_seq(&key, snapshot),
                brute(&tombstones, &key, snapshot),
                "{key:?} at {snapshot:?} in {tombstones:?}"
            );
        }
    }
}
