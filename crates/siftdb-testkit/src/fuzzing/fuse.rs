//! Fuzz target for the binary fuse filter block.
//!
//! Owns: `fuse_decode` — arbitrary bytes through [`FuseView::parse`] and
//! [`AnyFilterView::parse`], and the same bytes read as a key set that is
//! built into a filter, encoded, parsed and asked again.
//! Must never: panic unless the filter broke a promise — a decoder that
//! panics or refuses with anything but `Corruption`, two parsers that
//! disagree, an accepted block that answers other than its format says, a
//! lost key, a build that fails on an ordinary key set.
#![expect(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch"
)]

use siftdb::filter::fuse_block::{CHECKSUM_LEN, HEADER_LEN, MAGIC};
use siftdb::filter::{
    hash_key, hash_key_seeded, AnyFilterView, FilterKind, FilterParseError, FingerprintBits,
    FuseFilter, FuseView,
};

use crate::fuzzing::with_checksum_fixed;

/// Arbitrary bytes, tried three ways:
///
/// 1. as a block, as they are;
/// 2. as a block with the last four bytes replaced by the crc32 of the rest —
///    a fuzzer cannot forge a checksum, and without this try everything the
///    decoder checks after it (width, hash, arity, geometry, length, key
///    count) would stay out of its reach;
/// 3. as a key set (see [`fuse_keys`]), built into a filter.
///
/// A refused block must be `Corruption` (from [`FuseView::parse`]) and the
/// same refusal from [`AnyFilterView::parse`]; an accepted one must answer
/// every probe hash as the format defines it (`docs/format.md`, computed
/// here from the raw bytes), alike through every query path.
pub fn fuse_decode(data: &[u8]) {
    decode_checked(data);
    if let Some(fixed) = with_checksum_fixed(data) {
        decode_checked(&fixed);
    }
    build_and_ask(data);
}

/// Hashes to ask a decoded filter: fixed ones plus words of the input.
fn probe_hashes(data: &[u8]) -> Vec<u64> {
    let mut hashes = vec![0, u64::MAX, hash_key(b""), hash_key(b"a")];
    hashes.extend(data.chunks(8).take(16).map(|chunk| {
        let mut word = [0u8; 8];
        for (slot, byte) in word.iter_mut().zip(chunk) {
            *slot = *byte;
        }
        u64::from_le_bytes(word)
    }));
    hashes
}

fn decode_checked(data: &[u8]) {
    let view = FuseView::parse(data);
    let any = AnyFilterView::parse(data);
    let view = match (view, any) {
        (Ok(view), Ok(AnyFilterView::Fuse(other))) => {
            assert_eq!(
                view.header(),
                other.header(),
                "parsers disagree on the header"
            );
            view
        }
        (Err(e), any) => {
            assert!(e.is_corruption(), "parse refused with {e}");
            match any {
                Err(FilterParseError::UnknownKind { magic }) => {
                    assert!(!FilterKind::is_known_magic(data), "{magic:02x?} is known")
                }
                Err(FilterParseError::Corrupt(e)) => assert!(e.is_corruption(), "{e}"),
                // Another kind (a Bloom block) may parse; a fuse block may not.
                Ok(AnyFilterView::Bloom(_)) => assert!(!data.starts_with(&MAGIC)),
                Ok(AnyFilterView::Fuse(_)) => {
                    panic!("AnyFilterView accepted what FuseView refused")
                }
            }
            return;
        }
        (Ok(_), any) => panic!(
            "FuseView accepted, AnyFilterView gave {:?}",
            any.map(|v| v.kind())
        ),
    };
    let hashes = probe_hashes(data);
    let any = AnyFilterView::Fuse(view.clone());
    let singles: Vec<bool> = hashes.iter().map(|&h| view.contains_hash(h)).collect();
    for (&hash, &answer) in hashes.iter().zip(&singles) {
        assert_eq!(answer, defined_answer(&view, hash), "hash {hash:#x}");
        assert_eq!(any.contains_hash(hash), answer);
    }
    assert!(view.contains_hashes(&hashes).eq(singles.iter().copied()));
    assert!(any.contains_hashes(&hashes).eq(singles.iter().copied()));
    let h = view.header();
    assert!(h.keys <= h.geometry.slots());
    assert_eq!(any.block_bytes(), data.len());
}

/// The answer `docs/format.md` defines, computed from the raw bytes with
/// nothing of the filter's own query code.
fn defined_answer<B: AsRef<[u8]>>(view: &FuseView<B>, hash: u64) -> bool {
    let h = view.header();
    let bytes = view.as_bytes();
    let cells = bytes
        .get(HEADER_LEN..bytes.len() - CHECKSUM_LEN)
        .unwrap_or_else(|| panic!("accepted block without slots"));
    let g = hash_key_seeded(&hash.to_le_bytes(), h.seed);
    let length = u128::from(h.geometry.segment_length);
    let span = u128::from(h.geometry.segment_count) * length;
    let p0 = (u128::from(g) * span) >> 64;
    let mask = length - 1;
    let p1 = (p0 + length) ^ (u128::from(g) & mask);
    let p2 = (p0 + 2 * length) ^ (u128::from(g >> 18) & mask);
    let width = h.bits.bytes();
    let slot = |p: u128| -> u64 {
        let at = usize::try_from(p).unwrap_or_else(|_| panic!("slot {p} beyond usize")) * width;
        let cell = cells
            .get(at..at + width)
            .unwrap_or_else(|| panic!("slot {p} outside the block"));
        cell.iter()
            .rev()
            .fold(0u64, |acc, &byte| (acc << 8) | u64::from(byte))
    };
    let fingerprint = hash & ((1u64 << (8 * width)) - 1);
    slot(p0) ^ slot(p1) ^ slot(p2) == fingerprint
}

/// Reads a key-set input: byte 0's low bit picks the width (0: 8-bit, 1:
/// 16-bit), the rest is keys, each a length byte (low six bits) and that
/// many bytes (fewer at the end of the input). Equal keys may repeat.
pub fn fuse_keys(data: &[u8]) -> Option<(FingerprintBits, Vec<&[u8]>)> {
    let (&flags, mut rest) = data.split_first()?;
    let bits = if flags & 1 == 0 {
        FingerprintBits::Eight
    } else {
        FingerprintBits::Sixteen
    };
    let mut keys = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let (key, tail) = tail.split_at(usize::from(len & 0x3f).min(tail.len()));
        keys.push(key);
        rest = tail;
    }
    Some((bits, keys))
}

/// The input as a key set → build → encode → parse: every key is found by
/// every query path, the block parses to the same header, and a filter built
/// from the same keys in reverse order holds them too.
fn build_and_ask(data: &[u8]) {
    let Some((bits, keys)) = fuse_keys(data) else {
        return;
    };
    let hashes: Vec<u64> = keys.iter().map(|k| hash_key(k)).collect();
    let filter = FuseFilter::build(&hashes, bits)
        .unwrap_or_else(|e| panic!("{} keys, {bits:?}: {e}", keys.len()));
    let view = FuseView::parse(filter.as_bytes()).unwrap_or_else(|e| panic!("own block: {e}"));
    assert_eq!(view.header(), filter.header());
    let mut distinct = hashes.clone();
    distinct.sort_unstable();
    distinct.dedup();
    assert_eq!(
        view.header().keys,
        distinct.len() as u64,
        "distinct key count"
    );
    let any = AnyFilterView::parse(filter.as_bytes()).unwrap_or_else(|e| panic!("own block: {e}"));
    for (key, &hash) in keys.iter().zip(&hashes) {
        assert!(view.contains(key), "lost key {key:02x?}");
        assert!(any.contains_hash(hash), "lost key {key:02x?}");
        assert!(
            defined_answer(&view, hash),
            "lost key {key:02x?} by definition"
        );
    }
    assert!(
        view.contains_keys(&keys).all(|found| found),
        "batch lost a key"
    );
    assert!(
        any.contains_hashes(&hashes).all(|found| found),
        "batch lost a key"
    );
    let reversed: Vec<u64> = hashes.iter().rev().copied().collect();
    let again = FuseFilter::build(&reversed, bits).unwrap_or_else(|e| panic!("reversed: {e}"));
    assert!(
        hashes.iter().all(|&h| again.contains_hash(h)),
        "reversed build lost a key"
    );
}
