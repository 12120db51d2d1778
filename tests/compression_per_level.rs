//! Compression per level (`Options::compression_per_level`,
//! `KeyspaceOptions::compression_per_level`): each table carries the codec
//! of the level it was written to (level 0 by a flush, deeper ones by
//! compactions), the bottommost setting still wins at the bottom, data
//! reads right against a model through compactions and reopens, a
//! keyspace's list survives a reopen, and an empty or overlong list is
//! refused.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use siftdb::internals::table::{Codec, ReadCounters, Table};
use siftdb::{Compression, Db, Keyspace, KeyspaceOptions, Options, TableMetadata};

/// Compressible values: fields of words picked by a hash of key and round.
fn value_of(i: u64, round: u64) -> Vec<u8> {
    const WORDS: [&str; 8] = [
        "lorem", "ipsum", "dolor", "sit", "amet", "tempor", "magna", "aliqua",
    ];
    let mut state = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ round;
    let mut out = Vec::new();
    for field in 0..8 {
        out.extend_from_slice(format!("field{field}=").as_bytes());
        for _ in 0..3 {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.extend_from_slice(WORDS[(state >> 61) as usize].as_bytes());
            out.push(b' ');
        }
    }
    out
}

fn key_of(i: u64) -> Vec<u8> {
    format!("user{i:08}").into_bytes()
}

/// `[None, Lz4, zstd(1), zstd(3)]`.
fn four_levels() -> Vec<Compression> {
    vec![
        Compression::None,
        Compression::Lz4,
        Compression::zstd(1).unwrap(),
        Compression::zstd(3).unwrap(),
    ]
}

/// Small memtables, tables and levels, so a few hundred KiB reach levels
/// 1 to 3 and beyond by automatic compactions.
fn small_levels() -> Options {
    Options::default()
        .memtable_bytes(64 << 10)
        .table_target_bytes(32 << 10)
        .level1_bytes(48 << 10)
        .level_size_ratio(2)
        .level0_compaction_trigger(2)
}

/// `opts` without level-0 compactions before 8 tables, so a flush's
/// table stays in level 0 to be looked at.
fn level0_stays(opts: Options) -> Options {
    opts.level0_compaction_trigger(8).level0_quiet_trigger(8)
}

/// The codec of every data block of table `number` in `dir`.
fn codecs_of(dir: &Path, number: u64) -> Vec<u8> {
    let bytes = std::fs::read(dir.join(format!("{number:06}.sst"))).unwrap();
    let table = Table::from_bytes("t.sst", bytes.clone().into(), ReadCounters::new()).unwrap();
    table
        .data_block_handles()
        .iter()
        .map(|h| bytes[(h.offset + h.len) as usize + 1])
        .collect()
}

/// Every data block of every table of `tables` has one of the codecs
/// `allowed(level)` gives, or is raw (a block a codec does not shrink
/// enough is stored raw: a table of one short block often is), and each
/// level with one codec allowed uses it at least once; returns the levels
/// seen.
fn assert_codecs(
    dir: &Path,
    tables: &[TableMetadata],
    allowed: impl Fn(u32) -> Vec<Codec>,
) -> BTreeSet<u32> {
    let mut per_level: BTreeMap<u32, Vec<u8>> = BTreeMap::new();
    for table in tables {
        let codecs = codecs_of(dir, table.file_number);
        let allowed: Vec<u8> = allowed(table.level).iter().map(|&c| c as u8).collect();
        assert!(
            codecs
                .iter()
                .all(|c| allowed.contains(c) || *c == Codec::Raw as u8),
            "table {} at level {}: codecs {codecs:?}, allowed {allowed:?}",
            table.file_number,
            table.level
        );
        per_level.entry(table.level).or_default().extend(codecs);
    }
    for (level, codecs) in &per_level {
        let [want] = allowed(*level)[..] else {
            continue;
        };
        let want = want as u8;
        assert!(
            codecs.contains(&want),
            "level {level}: codecs {codecs:?}, want {want}"
        );
    }
    per_level.into_keys().collect()
}

/// The codec `[None, Lz4, zstd(1), zstd(3)]` gives level `level`.
fn four_levels_codec(level: u32) -> Vec<Codec> {
    vec![match level {
        0 => Codec::Raw,
        1 => Codec::Lz4,
        _ => Codec::Zstd,
    }]
}

/// Writes rounds of puts, overwrites and deletes to `keyspace` (the
/// default one for `None`) and `model`, flushing after each and waiting
/// for the compactions they start.
fn fill(
    db: &Db,
    keyspace: Option<&Keyspace>,
    rounds: std::ops::Range<u64>,
    model: &mut BTreeMap<Vec<u8>, Vec<u8>>,
) {
    for round in rounds {
        for i in 0..1500u64 {
            let key = key_of(i * 3 + round % 3);
            if i % 13 == 4 && round > 0 {
                match keyspace {
                    Some(ks) => ks.delete(&key).unwrap(),
                    None => db.delete(&key).unwrap(),
                }
                model.remove(&key);
            } else {
                let value = value_of(i, round);
                match keyspace {
                    Some(ks) => ks.put(&key, &value).unwrap(),
                    None => db.put(&key, &value).unwrap(),
                }
                model.insert(key, value);
            }
        }
        db.flush().unwrap();
        db.wait_for_background().unwrap();
    }
}

fn check_against(db: &Db, keyspace: Option<&Keyspace>, model: &BTreeMap<Vec<u8>, Vec<u8>>) {
    for i in 0..4600u64 {
        let key = key_of(i);
        let got = match keyspace {
            Some(ks) => ks.get(&key).unwrap(),
            None => db.get(&key).unwrap(),
        };
        assert_eq!(got.as_deref(), model.get(&key).map(Vec::as_slice), "{i}");
    }
    let iter = match keyspace {
        Some(ks) => ks.iter(),
        None => db.iter(),
    };
    let scanned: BTreeMap<Vec<u8>, Vec<u8>> = iter
        .map(|entry| {
            let (k, v) = entry.unwrap();
            (k.to_vec(), v.to_vec())
        })
        .collect();
    assert_eq!(&scanned, model);
}

#[test]
fn each_level_gets_its_codec_and_reads_match_a_model_through_compaction_and_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || small_levels().compression_per_level(four_levels());
    let mut model = BTreeMap::new();
    let db = Db::open_with(dir.path(), opts()).unwrap();
    fill(&db, None, 0..6, &mut model);
    check_against(&db, None, &model);
    let levels = assert_codecs(dir.path(), &db.live_tables(), four_levels_codec);
    assert!(
        levels.iter().filter(|&&l| l >= 1).count() >= 2,
        "levels {levels:?}"
    );
    drop(db);

    // Reopened with the same list: more writes and compactions keep the
    // rule and the model.
    let db = Db::open_with(dir.path(), opts()).unwrap();
    check_against(&db, None, &model);
    fill(&db, None, 6..9, &mut model);
    check_against(&db, None, &model);
    let seen = assert_codecs(dir.path(), &db.live_tables(), four_levels_codec);
    let all: BTreeSet<u32> = levels.union(&seen).copied().collect();
    assert!(
        all.contains(&1) && all.iter().any(|&l| l >= 2),
        "levels {all:?}"
    );
    // Everything compacted to one run at the deepest level: zstd.
    db.compact().unwrap();
    check_against(&db, None, &model);
    let tables = db.live_tables();
    assert!(tables.iter().all(|t| t.level >= 2), "{tables:?}");
    assert_codecs(dir.path(), &tables, four_levels_codec);
    drop(db);

    // A flush that stays in level 0 (no level-0 compaction before 8
    // tables): raw.
    let db = Db::open_with(dir.path(), level0_stays(opts())).unwrap();
    db.put(key_of(1), value_of(1, 99)).unwrap();
    model.insert(key_of(1), value_of(1, 99));
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let tables = db.live_tables();
    assert!(tables.iter().any(|t| t.level == 0), "{tables:?}");
    assert_codecs(dir.path(), &tables, four_levels_codec);
    check_against(&db, None, &model);
    drop(db);

    // Reading needs no compression options: each block names its codec.
    let db = Db::open_with(dir.path(), Options::default()).unwrap();
    check_against(&db, None, &model);
}

#[test]
fn the_bottommost_setting_wins_at_the_bottom() {
    let dir = tempfile::tempdir().unwrap();
    let opts = || {
        small_levels()
            .compression_per_level(vec![Compression::None, Compression::zstd(3).unwrap()])
            .bottommost_compression(Compression::Lz4)
    };
    let mut model = BTreeMap::new();
    let db = Db::open_with(dir.path(), opts()).unwrap();
    fill(&db, None, 0..4, &mut model);
    db.compact().unwrap();
    check_against(&db, None, &model);
    let tables = db.live_tables();
    let deepest = tables.iter().map(|t| t.level).max().unwrap();
    assert!(deepest >= 1, "{tables:?}");
    // The deepest level is LZ4. A level above it holds zstd, or LZ4 in a
    // table written while its level was the bottommost one (a table keeps
    // the codec it was written with when a deeper level fills later).
    assert_codecs(dir.path(), &tables, |level| match level {
        0 => vec![Codec::Raw],
        _ if level == deepest => vec![Codec::Lz4],
        _ => vec![Codec::Zstd, Codec::Lz4],
    });
    // A flush after it: level 0, raw.
    drop(db);
    let db = Db::open_with(dir.path(), level0_stays(opts())).unwrap();
    db.put(key_of(2), value_of(2, 99)).unwrap();
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let level0: Vec<TableMetadata> = db
        .live_tables()
        .into_iter()
        .filter(|t| t.level == 0)
        .collect();
    assert_eq!(level0.len(), 1);
    assert_codecs(dir.path(), &level0, |_| vec![Codec::Raw]);
}

#[test]
fn a_keyspace_keeps_its_list_across_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut model = BTreeMap::new();
    {
        // The database compresses every level with LZ4 (the default); the
        // keyspace asks for none at level 0 and zstd below level 1.
        let db = Db::open_with(dir.path(), small_levels()).unwrap();
        let ks = db
            .keyspace_with(
                "events",
                KeyspaceOptions::new().compression_per_level(four_levels()),
            )
            .unwrap();
        fill(&db, Some(&ks), 0..5, &mut model);
        check_against(&db, Some(&ks), &model);
        assert_codecs(dir.path(), &ks.live_tables(), four_levels_codec);
        db.put(key_of(7), value_of(7, 1)).unwrap();
        db.flush().unwrap();
        // The default keyspace keeps the database's LZ4, level 0 too.
        assert_codecs(dir.path(), &db.default_keyspace().live_tables(), |_| {
            vec![Codec::Lz4]
        });
    }
    // Opened again without the keyspace's options: the manifest gives them.
    let db = Db::open_with(dir.path(), level0_stays(small_levels())).unwrap();
    let ks = db.keyspace("events").unwrap();
    check_against(&db, Some(&ks), &model);
    ks.put(key_of(1), value_of(1, 99)).unwrap();
    model.insert(key_of(1), value_of(1, 99));
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let tables = ks.live_tables();
    assert!(tables.iter().any(|t| t.level == 0), "{tables:?}");
    assert_codecs(dir.path(), &tables, four_levels_codec);
    ks.compact().unwrap();
    check_against(&db, Some(&ks), &model);
    let tables = ks.live_tables();
    assert!(tables.iter().all(|t| t.level >= 2), "{tables:?}");
    assert_codecs(dir.path(), &tables, four_levels_codec);
}

#[test]
fn an_empty_or_overlong_list_is_refused() {
    for bad in [Vec::new(), vec![Compression::Lz4; 17]] {
        let dir = tempfile::tempdir().unwrap();
        let err = Db::open_with(
            dir.path(),
            Options::default().compression_per_level(bad.clone()),
        )
        .unwrap_err();
        assert!(err.to_string().contains("compression_per_level"), "{err}");
        let db = Db::open(dir.path()).unwrap();
        let err = db
            .keyspace_with("k", KeyspaceOptions::new().compression_per_level(bad))
            .unwrap_err();
        assert!(err.to_string().contains("compression_per_level"), "{err}");
        assert!(!db.keyspaces().iter().any(|name| name == "k"));
    }
    // Sixteen entries, one per possible level, are fine.
    let dir = tempfile::tempdir().unwrap();
    Db::open_with(
        dir.path(),
        Options::default().compression_per_level(vec![Compression::Lz4; 16]),
    )
    .unwrap();
}
