//! Fuzz targets of the table layer: `table_open` (any bytes as a table file),
//! `block_decode` (any bytes as a data block, and block round trips) and
//! `block_decompress` (any bytes as a compressed block — LZ4, zstd, zstd
//! with a dictionary — or as a zstd dictionary, and round trips).
//!
//! Owns: the invariants the fuzzer checks. Beyond "no panic, no hang, no
//! unchecked allocation": a table that [`Table::verify`] finds free of
//! errors must answer every get from its own entries and range tombstones, and a scan error must
//! be one that `verify` reports; a block whose structure checks out must
//! seek exactly like a linear scan.
//! Must never: panic on anything but a broken invariant.
#![expect(
    clippy::panic,
    clippy::expect_used,
    clippy::indexing_slicing,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch; indices come from the entries just decoded"
)]

use std::cmp::Ordering;
use std::ops::Bound;
use std::sync::OnceLock;

use bytes::Bytes;

use siftdb::internals::key::{
    compare_internal_keys, parse_internal_key, user_key_of, ValueKind, TAG_LEN,
};
use siftdb::internals::table::block::{Block, BlockBuilder};
use siftdb::internals::table::compression::{
    compress_block, decompress, train_dictionary, ZstdDictionary, ZstdEncoder, MAX_BLOCK_LEN,
    MAX_ZSTD_RATIO,
};
use siftdb::internals::table::Codec;
use siftdb::internals::table::{LookupKey, ReadCounters, Severity, Table, TableValue};
use siftdb::Compression;

/// Entries whose gets are cross-checked per input, to bound the work.
const CHECKED_GETS: usize = 256;

/// Opens `data` as a table; if it opens, scans, seeks, gets and verifies it.
pub fn table_open(data: &[u8]) {
    let file = Bytes::copy_from_slice(data);
    let Ok(table) = Table::from_bytes("fuzz.sst", file, ReadCounters::new()) else {
        return;
    };

    let mut entries: Vec<(Vec<u8>, Bytes)> = Vec::new();
    let mut it = table.iter();
    let mut scan = it.seek_to_first();
    while scan.is_ok() && it.valid() {
        // Every step consumes at least one 12-byte entry header: a longer
        // scan than that is a loop.
        assert!(entries.len() <= data.len() / 12, "scan does not terminate");
        entries.push((it.key().to_vec(), it.value()));
        scan = it.next();
    }

    // Gets and seeks of keys present, near-present and taken from the input.
    let mut probes: Vec<Vec<u8>> = entries
        .iter()
        .take(32)
        .map(|(k, _)| user_key_of(k).to_vec())
        .collect();
    probes.extend(data.chunks(9).take(16).map(<[u8]>::to_vec));
    for probe in &probes {
        let _ = table.get_key(probe);
        let _ = it.seek(probe);
        let mut longer = probe.clone();
        longer.push(0);
        let _ = table.get_key(&longer);
        // The scan filters answer any bounds without panicking.
        let (short, long) = (Bound::Included(&probe[..]), Bound::Excluded(&longer[..]));
        let _ = table.scan_may_match(None, short, long);
        let _ = table.scan_may_match(None, long, short);
        let _ = table.scan_may_match(None, Bound::Unbounded, short);
    }

    let problems = table.verify();
    let sound = problems.iter().all(|p| p.severity == Severity::Warning);
    if !sound {
        return;
    }
    if let Err(e) = scan {
        panic!("verify found no error, but the scan failed: {e}");
    }
    assert_eq!(
        entries.len() as u64,
        table.properties().entries,
        "scan count"
    );
    // verify checked that the range filter holds every key: a scan of any
    // key alone must not skip the table.
    for (key, _) in entries.iter().take(CHECKED_GETS) {
        let user_key = user_key_of(key);
        let alone = Bound::Included(user_key);
        assert!(
            table.scan_may_match(None, alone, alone),
            "the range filter rules out a key verify found"
        );
    }
    for pair in entries.windows(2) {
        if let [(a, _), (b, _)] = pair {
            assert_eq!(compare_internal_keys(a, b), Ordering::Less, "scan order");
        }
    }
    // The model of a get at an entry's own sequence: the first entry of that
    // user key (entries are sorted, versions newest first) whose sequence is
    // at most it — the entry itself unless a forged table repeats a sequence.
    for (i, (key, _)) in entries.iter().enumerate().take(CHECKED_GETS) {
        let parsed = parse_internal_key(key).expect("verify checked every key");
        let run_start = entries[..i]
            .iter()
            .rposition(|(k, _)| user_key_of(k) != parsed.user_key)
            .map_or(0, |p| p + 1);
        let (want_key, want_value) = entries[run_start..=i]
            .iter()
            .find(|(k, _)| parse_internal_key(k).is_ok_and(|p| p.seq <= parsed.seq))
            .expect("the entry itself qualifies");
        // A range tombstone of the table newer than that version, which
        // the get's snapshot sees, deletes it.
        let deleted_at = table
            .range_tombstones()
            .and_then(|list| list.covering_seq(parsed.user_key, parsed.seq));
        let want = match parse_internal_key(want_key).map(|p| (p.kind, p.seq)) {
            Ok((_, seq)) if deleted_at.is_some_and(|deleted_at| deleted_at > seq) => {
                TableValue::Deleted
            }
            Ok((ValueKind::Put, _)) => TableValue::Put(want_value.clone()),
            Ok((ValueKind::Merge, _)) => TableValue::Merge,
            _ => TableValue::Deleted,
        };
        let got = table
            .get(&LookupKey::new(parsed.user_key, parsed.seq))
            .expect("verify found every block sound");
        assert_eq!(got, Some(want), "get of a scanned entry");
    }
}

/// First byte even: the rest is a block to decode, seek and check.
/// Odd: the rest is split into entries, built into a block and read back.
/// Bits 2–6 of the first byte give the restart interval of a built block;
/// bits 1 and 7 are not read (they picked one of the entry codings there
/// were before format 7's was the only one).
pub fn block_decode(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    if mode % 2 == 0 {
        decode_untrusted(rest);
    } else {
        round_trip(usize::from((mode >> 2) & 0x1f) + 1, rest);
    }
}

fn decode_untrusted(bytes: &[u8]) {
    let Ok(block) = Block::parse(Bytes::copy_from_slice(bytes)) else {
        return;
    };
    let mut keys = Vec::new();
    let mut it = block.iter();
    let mut scan = it.seek_to_first();
    while scan.is_ok() && it.valid() {
        // An entry takes 3 bytes at least (three one-byte varints).
        assert!(keys.len() <= bytes.len() / 3, "scan does not terminate");
        keys.push(it.key().to_vec());
        scan = it.next();
    }
    let mut targets: Vec<Vec<u8>> = keys.iter().take(32).cloned().collect();
    targets.extend(keys.iter().take(32).map(|k| [k.as_slice(), &[0]].concat()));
    targets.extend(bytes.chunks(7).take(16).map(<[u8]>::to_vec));
    targets.push(Vec::new());

    let structured = block.check_structure();
    for target in &targets {
        let sought = it.seek(target);
        if let Ok(count) = structured {
            assert!(scan.is_ok(), "check_structure passed but the scan failed");
            assert_eq!(count, keys.len() as u64);
            sought.expect("seek in a well-formed block");
            // The keys are sorted (check_structure passed): the model is a binary search.
            let at = keys.partition_point(|k| compare_internal_keys(k, target) == Ordering::Less);
            let want = keys.get(at).map(Vec::as_slice);
            assert_eq!(it.valid().then(|| it.key()), want, "seek");
        }
    }
}

fn round_trip(restart_interval: usize, bytes: &[u8]) {
    let mut entries: Vec<(Vec<u8>, Vec<u8>)> = bytes
        .split(|&b| b == 0xff)
        .map(|chunk| {
            let (key, value) = chunk.split_at(chunk.len() / 2);
            (key.to_vec(), value.to_vec())
        })
        .collect();
    // A block stores internal keys only: at least a tag's bytes.
    entries.retain(|(key, _)| key.len() >= TAG_LEN);
    // A packed tag stores the two kinds there are, put and delete: the
    // kind byte (the tag's lowest, little-endian) is made 0 or 1.
    for (key, _) in &mut entries {
        if let Some(kind) = key
            .len()
            .checked_sub(TAG_LEN)
            .and_then(|at| key.get_mut(at))
        {
            *kind &= 1;
        }
    }
    entries.sort_by(|a, b| compare_internal_keys(&a.0, &b.0));
    entries.dedup_by(|a, b| compare_internal_keys(&a.0, &b.0) == Ordering::Equal);
    let mut builder = BlockBuilder::new(restart_interval);
    for (key, value) in &entries {
        builder.add(key, value).expect("a small block");
    }
    if builder.is_empty() {
        return;
    }
    let estimate = builder.estimated_size();
    let encoded = builder.finish();
    assert_eq!(estimate, encoded.len(), "size estimate");
    let block = Block::parse(Bytes::from(encoded)).expect("a built block parses");
    assert_eq!(
        block
            .check_structure()
            .expect("a built block is well-formed"),
        entries.len() as u64
    );
    let mut it = block.iter();
    it.seek_to_first().expect("first entry");
    for (key, value) in &entries {
        assert!(it.valid());
        assert_eq!(
            (it.key(), it.value_slice()),
            (key.as_slice(), value.as_slice())
        );
        it.next().expect("next entry");
    }
    assert!(!it.valid());
    for (key, _) in &entries {
        it.seek(key).expect("seek");
        assert_eq!(it.key(), key.as_slice());
    }
}

/// The codec a `block_decompress` input names with bits 1 and 2 of its
/// first byte: LZ4, zstd, zstd with [`fixed_dictionary`], or (3) the rest
/// is a dictionary to parse.
fn codec_of_mode(mode: u8) -> u8 {
    (mode >> 1) % 4
}

/// A zstd dictionary trained once from fixed samples: what dictionary
/// inputs of `block_decompress` are coded with.
pub fn fixed_dictionary() -> &'static (Vec<u8>, ZstdDictionary) {
    static DICTIONARY: OnceLock<(Vec<u8>, ZstdDictionary)> = OnceLock::new();
    DICTIONARY.get_or_init(|| {
        let samples: Vec<Vec<u8>> = (0..64u32)
            .map(|i| {
                (0..40u32)
                    .flat_map(|j| {
                        format!("key{:05} value {} {} ", i * 40 + j, j % 7, i % 3).into_bytes()
                    })
                    .collect()
            })
            .collect();
        let bytes = train_dictionary(&samples, 2048).expect("the fixed samples train a dictionary");
        let prepared = ZstdDictionary::parse(&bytes).expect("a trained dictionary parses");
        (bytes, prepared)
    })
}

/// First byte even: the rest is a stored compressed block (`length u32 LE ‖
/// LZ4 block` or `‖ zstd frame`, the codec chosen by [`codec_of_mode`]) to
/// decompress — refused as `Corruption` or decoded to exactly the length
/// it claims, never more than the codec can expand its bytes to, never a
/// panic. Odd: the rest is a raw block, compressed and decompressed back.
/// Mode 3 (bits 1-2): the rest is a zstd dictionary, parsed, and when it
/// parses a fixed zstd block is decoded with it (an error or the claimed
/// length, never a panic).
pub fn block_decompress(data: &[u8]) {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let (codec, ratio) = match codec_of_mode(mode) {
        0 => (Codec::Lz4, 255),
        1 => (Codec::Zstd, MAX_ZSTD_RATIO),
        2 => (Codec::ZstdDictionary, MAX_ZSTD_RATIO),
        _ => return dictionary_input(rest),
    };
    let dictionary = &fixed_dictionary().1;
    if mode % 2 == 0 {
        match decompress(rest, codec, Some(dictionary)) {
            Ok(block) => {
                let claimed = rest
                    .first_chunk::<4>()
                    .map(|p| u32::from_le_bytes(*p) as usize);
                assert_eq!(Some(block.len()), claimed, "decoded length");
                assert!(block.len() <= MAX_BLOCK_LEN);
                assert!(
                    block.len() <= ratio * rest.len().saturating_sub(4),
                    "expansion"
                );
            }
            Err(e) => assert!(e.is_corruption(), "{e}"),
        }
        return;
    }
    let mut stored = Vec::new();
    let written = match codec {
        Codec::Lz4 => compress_block(rest, Compression::Lz4, &mut stored),
        Codec::Zstd => compress_block(rest, Compression::zstd(1).expect("level 1"), &mut stored),
        _ => {
            let mut encoder = ZstdEncoder::new(1, Some(&fixed_dictionary().0)).expect("an encoder");
            if encoder.compress(rest, &mut stored) {
                Codec::ZstdDictionary
            } else {
                Codec::Raw
            }
        }
    };
    if written != Codec::Raw {
        assert_eq!(written, codec);
        if codec != Codec::ZstdDictionary {
            assert!(stored.len() <= rest.len() - rest.len() / 4, "it pays");
        }
        let back =
            decompress(&stored, codec, Some(dictionary)).expect("a compressed block decodes");
        assert_eq!(back, rest, "round trip");
    }
    assert_eq!(
        compress_block(rest, Compression::None, &mut stored),
        Codec::Raw
    );
}

/// `rest` as a dictionary: `Corruption` or a dictionary that decodes a
/// fixed block to its claimed length or refuses it, never a panic.
fn dictionary_input(rest: &[u8]) {
    match ZstdDictionary::parse(rest) {
        Ok(dictionary) => {
            static BLOCK: OnceLock<Vec<u8>> = OnceLock::new();
            let block = BLOCK.get_or_init(|| {
                let mut encoder =
                    ZstdEncoder::new(3, Some(&fixed_dictionary().0)).expect("an encoder");
                let mut stored = Vec::new();
                let raw = b"key00001 value 1 1 key00002 value 2 1 key00003 value 3 1 ".repeat(8);
                assert!(encoder.compress(&raw, &mut stored));
                stored
            });
            if let Ok(decoded) = decompress(block, Codec::ZstdDictionary, Some(&dictionary)) {
                assert_eq!(decoded.len(), 8 * 57);
            }
        }
        Err(e) => assert!(e.is_corruption(), "{e}"),
    }
}
