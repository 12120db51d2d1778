//! Fuzz targets for the filter block and the Bloom filter.
//!
//! Owns: `filter_decode` (arbitrary bytes through both decoders) and
//! `filter_roundtrip` (an arbitrary key set built, encoded and decoded).
//! Must never: panic unless the filter broke a promise — a decoder that
//! panics, two decoders that disagree, a lost key, an encoding that changes.
#![expect(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch"
)]

// Panicking is this module's job; reading out of bounds is not.

use siftdb::filter::bloom::{hash_key_seeded, line_index};
use siftdb::filter::probe::scalar_has_probes;
use siftdb::filter::{BloomFilter, FilterView, Layout};

/// Keys to ask a decoded filter: fixed ones plus windows of the input itself.
fn probe_keys(data: &[u8]) -> Vec<Vec<u8>> {
    let mut keys: Vec<Vec<u8>> = vec![Vec::new(), b"a".to_vec(), b"k000000000000000".to_vec()];
    keys.extend(data.chunks(16).take(8).map(<[u8]>::to_vec));
    keys
}

/// Arbitrary bytes → [`BloomFilter::decode`] and [`FilterView::parse`]: they
/// agree on accepting; refusals are `Corruption`; an accepted block answers
/// every query alike through both and re-encodes to exactly its input.
///
/// The input is tried twice: as it is, and with its last four bytes replaced
/// by the crc32 of the rest — a fuzzer cannot forge a checksum, and without
/// the second try everything the decoder checks after the checksum (layout,
/// hash, probes, line count, reserved bytes) would stay out of its reach.
pub fn filter_decode(data: &[u8]) {
    decode_both_ways(data);
    if let Some(fixed) = super::with_checksum_fixed(data) {
        decode_both_ways(&fixed);
    }
}

fn decode_both_ways(data: &[u8]) {
    let owned = BloomFilter::decode(data);
    let view = FilterView::parse(data);
    let (owned, view) = match (owned, view) {
        (Ok(owned), Ok(view)) => (owned, view),
        (Err(a), Err(b)) => {
            assert!(a.is_corruption(), "decode refused with {a}");
            assert!(b.is_corruption(), "parse refused with {b}");
            return;
        }
        (owned, view) => panic!(
            "decoders disagree: decode {:?}, parse {:?}",
            owned.map(|_| ()),
            view.map(|_| ())
        ),
    };
    let header = view.header();
    assert_eq!(owned.lines(), header.lines);
    assert_eq!(owned.hashes(), header.probes);
    assert_eq!(owned.seed(), header.seed);
    assert_eq!(owned.layout(), header.layout);
    assert_eq!(owned.encode(), data, "re-encoding changed the block");
    let keys = probe_keys(data);
    for key in &keys {
        assert_eq!(owned.contains(key), view.contains(key), "key {key:02x?}");
        let hash = hash_key_seeded(key, header.seed);
        let answer = owned.contains_hash(hash);
        assert_eq!(view.contains_hash(hash), answer);
        // Whatever kernel this CPU runs, it answers as the layout's definition.
        let line = view
            .lines()
            .get(line_index(hash, header.lines))
            .unwrap_or_else(|| panic!("line index out of range"));
        let defined = scalar_has_probes(header.layout, line, hash, header.probes);
        assert_eq!(answer, defined, "kernel and definition disagree");
    }
    let singles: Vec<bool> = keys.iter().map(|key| view.contains(key)).collect();
    assert!(owned.contains_keys(&keys).eq(singles.iter().copied()));
    assert!(view.contains_keys(&keys).eq(singles.iter().copied()));
    assert_eq!(
        owned.estimated_items().to_bits(),
        view.estimated_items().to_bits()
    );
}

/// The bits per key a round-trip input asks for: its first two bytes mapped
/// onto `[0.5, 24]`.
pub fn roundtrip_bits_per_key(lo: u8, hi: u8) -> f64 {
    0.5 + f64::from(u16::from_le_bytes([lo, hi])) / f64::from(u16::MAX) * 23.5
}

/// Splits a round-trip input: bytes 0–1 bits per key, byte 2 the seed (low
/// six bits; 0 is the table seed; the top two bits are ignored — they chose
/// among layouts replaced before the first release), then keys, each a length byte (low six bits) and that
/// many bytes (fewer at the end of the input).
pub fn roundtrip_input(data: &[u8]) -> Option<(f64, Layout, u64, Vec<&[u8]>)> {
    let (&lo, rest) = data.split_first()?;
    let (&hi, rest) = rest.split_first()?;
    let (&seed, mut rest) = rest.split_first()?;
    let mut keys = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let (key, tail) = tail.split_at(usize::from(len & 0x3f).min(tail.len()));
        keys.push(key);
        rest = tail;
    }
    let layout = Layout::DEFAULT;
    Some((
        roundtrip_bits_per_key(lo, hi),
        layout,
        u64::from(seed & 0x3f),
        keys,
    ))
}

/// An arbitrary key set and bits per key (see [`roundtrip_input`]) → build →
/// encode → decode: the batched build equals one insert per key; every key
/// is found by the original, the decoded filter and the view; other keys
/// get one answer from all three; the encoding is stable.
pub fn filter_roundtrip(data: &[u8]) {
    let Some((bits_per_key, layout, seed, keys)) = roundtrip_input(data) else {
        return;
    };
    let mut filter = BloomFilter::with_bits_per_key(keys.len(), bits_per_key)
        .unwrap_or_else(|e| panic!("{} keys at {bits_per_key} bits/key: {e}", keys.len()))
        .with_seed(seed)
        .with_layout(layout);
    for key in &keys {
        filter.insert(key);
    }
    // The batched build (keys of 9 to 16 bytes hashed eight at a time with
    // AVX-512) sets exactly the bits of one insert per key.
    let mut batched = BloomFilter::with_bits_per_key(keys.len(), bits_per_key)
        .unwrap_or_else(|e| panic!("{} keys at {bits_per_key} bits/key: {e}", keys.len()))
        .with_seed(seed)
        .with_layout(layout);
    batched.insert_keys(&keys);
    assert!(batched == filter, "insert_keys set other bits than insert");
    let bytes = filter.encode();
    let decoded = BloomFilter::decode(&bytes).unwrap_or_else(|e| panic!("own encoding: {e}"));
    let view = FilterView::parse(&bytes[..]).unwrap_or_else(|e| panic!("own encoding: {e}"));
    assert!(decoded == filter, "decoding changed the filter");
    assert_eq!(decoded.encode(), bytes, "re-encoding changed the block");
    for key in &keys {
        assert!(filter.contains(key), "lost key {key:02x?}");
        assert!(decoded.contains(key), "decoded filter lost key {key:02x?}");
        assert!(view.contains(key), "view lost key {key:02x?}");
    }
    assert!(
        filter.contains_keys(&keys).all(|found| found),
        "batch lost a key"
    );
    assert!(
        view.contains_keys(&keys).all(|found| found),
        "batch lost a key"
    );
    for key in &keys {
        for other in [
            [key, b"x".as_slice()].concat(),
            key.iter().rev().copied().collect(),
        ] {
            let want = filter.contains(&other);
            assert_eq!(decoded.contains(&other), want, "key {other:02x?}");
            assert_eq!(view.contains(&other), want, "key {other:02x?}");
        }
    }
}
