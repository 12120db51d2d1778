//! zstd in a database: LZ4 at the top and zstd (with and without a
//! per-table dictionary) at the bottom match a model through flushes,
//! compactions and a reopen; each table carries the codecs its level asks
//! for; damage to a zstd block or to a table's dictionary is a typed
//! `Corruption`, never a wrong value or a panic.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use siftdb::internals::table::format::{encode_trailer, TRAILER_LEN};
use siftdb::internals::table::{BlockKind, Codec, ReadCounters, Table};
use siftdb::{Compression, Db, Options};

/// Printable, compressible values like YCSB records: ten `fieldN=` fields
/// of words from a 32-word vocabulary, picked by a hash of key and version.
fn value_of(i: u64, version: u64) -> Vec<u8> {
    const WORDS: [&str; 32] = [
        "lorem",
        "ipsum",
        "dolor",
        "sit",
        "amet",
        "consectetur",
        "adipiscing",
        "elit",
        "sed",
        "do",
        "eiusmod",
        "tempor",
        "incididunt",
        "ut",
        "labore",
        "et",
        "dolore",
        "magna",
        "aliqua",
        "enim",
        "ad",
        "minim",
        "veniam",
        "quis",
        "nostrud",
        "exercitation",
        "ullamco",
        "laboris",
        "nisi",
        "aliquip",
        "ex",
        "ea",
    ];
    let mut state = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ version;
    let mut out = Vec::new();
    for field in 0..10 {
        out.extend_from_slice(format!("field{field}=").as_bytes());
        for _ in 0..3 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.extend_from_slice(WORDS[(state >> 59) as usize].as_bytes());
            out.push(b' ');
        }
    }
    out
}

fn key_of(i: u64) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// LZ4 everywhere but the bottommost level, zstd there (with a dictionary
/// of `dictionary` bytes, or none for 0); small tables and memtables.
fn options(dictionary: usize) -> Options {
    let options = Options::default()
        .compression(Compression::Lz4)
        .bottommost_compression(Compression::zstd(3).unwrap())
        .memtable_bytes(128 << 10)
        .table_target_bytes(64 << 10)
        .level0_compaction_trigger(8)
        .level0_quiet_trigger(8);
    if dictionary == 0 {
        options
    } else {
        options.bottommost_zstd_dictionary_bytes(dictionary)
    }
}

fn table_path(dir: &Path, number: u64) -> PathBuf {
    dir.join(format!("{number:06}.sst"))
}

/// The codec byte of every data block of the table at `path`.
fn codecs_of(path: &Path) -> (Vec<u8>, bool) {
    let bytes = std::fs::read(path).unwrap();
    let table = Table::from_bytes("t.sst", bytes.clone().into(), ReadCounters::new()).unwrap();
    let codecs = table
        .data_block_handles()
        .iter()
        .map(|h| bytes[(h.offset + h.len) as usize + 1])
        .collect();
    (codecs, table.properties().compression_dictionary.is_some())
}

/// Writes puts, overwrites and deletes in rounds, flushing and compacting
/// between them, into `db` and `model`; the last round stays in level 0.
fn fill(db: &Db, model: &mut BTreeMap<Vec<u8>, Vec<u8>>) {
    for round in 0..3u64 {
        for i in 0..2000u64 {
            let key = key_of(i * 3 + round % 2);
            if i % 11 == 5 && round > 0 {
                db.delete(&key).unwrap();
                model.remove(&key);
            } else {
                let value = value_of(i, round);
                db.put(&key, &value).unwrap();
                model.insert(key, value);
            }
        }
        db.flush().unwrap();
        if round < 2 {
            db.compact().unwrap();
        }
    }
    db.wait_for_background().unwrap();
}

fn check_against(db: &Db, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..6100u64 {
        let key = key_of(i);
        assert_eq!(
            db.get(&key).unwrap().as_deref(),
            model.get(&key).map(Vec::as_slice)
        );
    }
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> = db
        .iter()
        .map(|entry| {
            let (k, v) = entry.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert_eq!(&scanned, model);
}

#[test]
fn lz4_at_the_top_and_zstd_at_the_bottom_match_a_model_through_compaction_and_reopen() {
    for dictionary in [4096, 0] {
        let dir = tempfile::tempdir().unwrap();
        let mut model = BTreeMap::new();
        let db = Db::open_with(dir.path(), options(dictionary)).unwrap();
        fill(&db, &mut model);
        check_against(&db, &model);
        let tables = db.live_tables();
        drop(db);

        let deepest = tables.iter().map(|t| t.level).max().unwrap();
        assert!(deepest > 0, "{tables:?}");
        let (mut top, mut bottom) = (0, 0);
        for table in &tables {
            let (codecs, has_dictionary) = codecs_of(&table_path(dir.path(), table.file_number));
            if table.level == deepest {
                bottom += 1;
                let want = if dictionary > 0 {
                    Codec::ZstdDictionary
                } else {
                    Codec::Zstd
                };
                assert_eq!(has_dictionary, dictionary > 0, "{table:?}");
                // A block the codec does not shrink by an eighth is stored
                // raw (codec 0), whatever the choice: a table's short last
                // block often is.
                assert!(
                    codecs
                        .iter()
                        .all(|&c| c == want as u8 || c == Codec::Raw as u8)
                        && codecs.contains(&(want as u8)),
                    "level {}: {codecs:?}",
                    table.level
                );
            } else {
                top += 1;
                assert!(!has_dictionary, "{table:?}");
                assert!(
                    codecs
                        .iter()
                        .all(|&c| c == Codec::Lz4 as u8 || c == Codec::Raw as u8)
                        && codecs.contains(&(Codec::Lz4 as u8)),
                    "level {}: {codecs:?}",
                    table.level
                );
            }
        }
        assert!(top >= 1 && bottom >= 2, "{tables:?}");

        // Reading needs no compression options: each block names its codec.
        let db = Db::open_with(dir.path(), Options::default()).unwrap();
        check_against(&db, &model);
        // A compaction with LZ4 only rewrites the bottom in LZ4; the data
        // stays the same.
        drop(db);
        let db =
            Db::open_with(dir.path(), Options::default().compression(Compression::Lz4)).unwrap();
        db.compact().unwrap();
        check_against(&db, &model);
    }
}

#[test]
fn levels_and_dictionaries_are_checked_when_options_are() {
    for bad in [
        Options::default().bottommost_zstd_dictionary_bytes(4096),
        Options::default()
            .bottommost_compression(Compression::Lz4)
            .bottommost_zstd_dictionary_bytes(4096),
        Options::default()
            .bottommost_compression(Compression::zstd(3).unwrap())
            .bottommost_zstd_dictionary_bytes(100),
        Options::default()
            .bottommost_compression(Compression::zstd(3).unwrap())
            .bottommost_zstd_dictionary_bytes(2 << 20),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let err = Db::open_with(dir.path(), bad).unwrap_err();
        assert!(err.to_string().contains("dictionary"), "{err}");
    }
    assert!(Compression::zstd(0).is_err() && Compression::zstd(23).is_err());
}

/// A database of `options(4096)` written and closed, and its bottom tables.
fn closed_database() -> (tempfile::TempDir, BTreeMap<Vec<u8>, Vec<u8>>, Vec<PathBuf>) {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    let db = Db::open_with(dir.path(), options(4096)).unwrap();
    fill(&db, &mut model);
    let tables = db.live_tables();
    drop(db);
    let deepest = tables.iter().map(|t| t.level).max().unwrap();
    let bottom = tables
        .iter()
        .filter(|t| t.level == deepest)
        .map(|t| table_path(dir.path(), t.file_number))
        .collect();
    (dir, model, bottom)
}

/// Every key reads as the model says or fails with `Corruption`; at least
/// one fails. A database that does not open must say `Corruption`.
fn reads_are_right_or_corruption(dir: &Path, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    let db = match Db::open_with(dir, Options::default()) {
        Ok(db) => db,
        Err(e) => {
            assert!(e.is_corruption(), "{e}");
            return;
        }
    };
    let mut failed = 0;
    for i in 0..6100u64 {
        let key = key_of(i);
        match db.get(&key) {
            Ok(got) => assert_eq!(got.as_deref(), model.get(&key).map(Vec::as_slice)),
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                failed += 1;
            }
        }
    }
    assert!(failed > 0, "no read met the damage");
}

/// Rewrites the block at `offset` (its stored bytes were `len` long) as
/// `stored` with a trailer that verifies, so that the decoder itself meets
/// what the checksum would otherwise catch.
fn rewrite_block(path: &Path, offset: u64, len: u64, stored: &[u8], kind: BlockKind, codec: u8) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = offset as usize;
    assert!(stored.len() as u64 <= len);
    let mut block = stored.to_vec();
    // The handle's length is fixed: pad a shorter frame with zeros.
    block.resize(len as usize, 0);
    let codec = match codec {
        2 => Codec::Zstd,
        3 => Codec::ZstdDictionary,
        _ => Codec::Raw,
    };
    let trailer = encode_trailer(&block, kind, codec, offset);
    bytes[at..at + block.len()].copy_from_slice(&block);
    bytes[at + block.len()..at + block.len() + TRAILER_LEN].copy_from_slice(&trailer);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn damaged_zstd_blocks_are_corruption_never_a_wrong_value() {
    let (dir, model, bottom) = closed_database();
    let path = &bottom[0];
    let bytes = std::fs::read(path).unwrap();
    let table = Table::from_bytes("t.sst", bytes.clone().into(), ReadCounters::new()).unwrap();
    let handles = table.data_block_handles().to_vec();
    drop(table);
    let h = handles[handles.len() / 2];
    let (start, end) = (h.offset as usize, (h.offset + h.len) as usize);
    assert_eq!(bytes[end + 1], Codec::ZstdDictionary as u8);

    // A flipped byte: the trailer's checksum fails.
    let mut flipped = bytes.clone();
    flipped[start + 7] ^= 0x10;
    std::fs::write(path, &flipped).unwrap();
    reads_are_right_or_corruption(dir.path(), &model);

    // Frames that verify but do not decode: cut short (zeros after), a
    // length prefix off by one, and a dictionary frame stored as codec 2
    // (decoded without the dictionary).
    let frame = &bytes[start..end];
    let mut off_by_one = frame.to_vec();
    let claimed = u32::from_le_bytes(off_by_one[..4].try_into().unwrap());
    off_by_one[..4].copy_from_slice(&(claimed + 1).to_le_bytes());
    for (stored, codec) in [
        (frame[..frame.len() / 2].to_vec(), 3),
        (off_by_one, 3),
        (frame.to_vec(), 2),
    ] {
        std::fs::write(path, &bytes).unwrap();
        rewrite_block(path, h.offset, h.len, &stored, BlockKind::Data, codec);
        reads_are_right_or_corruption(dir.path(), &model);
    }
}

#[test]
fn a_damaged_dictionary_is_corruption_at_open() {
    let (dir, model, bottom) = closed_database();
    let path = &bottom[0];
    let bytes = std::fs::read(path).unwrap();
    let table = Table::from_bytes("t.sst", bytes.clone().into(), ReadCounters::new()).unwrap();
    let handle = table.properties().compression_dictionary.unwrap();
    drop(table);
    let (start, len) = (handle.offset as usize, handle.len as usize);

    // A flipped byte: the trailer's checksum fails, the table does not open.
    let mut flipped = bytes.clone();
    flipped[start + len / 2] ^= 0x01;
    std::fs::write(path, &flipped).unwrap();
    let err = Table::from_bytes("t.sst", flipped.into(), ReadCounters::new()).unwrap_err();
    assert!(
        err.is_corruption() && err.to_string().contains("compression dictionary"),
        "{err}"
    );
    reads_are_right_or_corruption(dir.path(), &model);

    // Bytes that verify but are no zstd dictionary (its magic broken, or
    // all zeros): refused by zstd's own check.
    let mut wrong_magic = bytes[start..start + len].to_vec();
    wrong_magic[0] ^= 0xff;
    for stored in [wrong_magic, vec![0u8; len]] {
        std::fs::write(path, &bytes).unwrap();
        rewrite_block(
            path,
            handle.offset,
            handle.len,
            &stored,
            BlockKind::CompressionDictionary,
            0,
        );
        let err = Table::from_bytes(
            "t.sst",
            std::fs::read(path).unwrap().into(),
            ReadCounters::new(),
        )
        .unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("zstd dictionary"),
            "{err}"
        );
        reads_are_right_or_corruption(dir.path(), &model);
    }
}
