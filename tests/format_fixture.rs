//! The fixture of the current formats: a database written by a documented
//! command (tests/data/format_v10_db) opened and read key by key, every
//! keyspace setting and file kind in it checked; and the refusal of a
//! table or log of any other format version by open, repair and verify,
//! with the version found and the version this build reads.
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

use siftdb::internals::inspect::verify_dir;
use siftdb::internals::table::{Table, TableFormat};
use siftdb::{Db, Error, Options};
use siftdb_testkit::files::files_ending;

/// A copy of the database kept in tests/data/`name`, in a temporary directory.
fn copy_of_fixture(name: &str) -> tempfile::TempDir {
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name);
    let dir = tempfile::tempdir().unwrap();
    for entry in std::fs::read_dir(&fixture).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), dir.path().join(entry.file_name())).unwrap();
    }
    dir
}

/// One step of the writes that made tests/data/format_v10_db: puts (a
/// value) and deletes (none), then range deletes (`[start, end)`), then what
/// the database did after them.
struct FixtureStep {
    writes: Vec<(String, Option<String>)>,
    range_deletes: Vec<(String, String)>,
    then: AfterStep,
}

enum AfterStep {
    /// `Db::compact`: everything so far into one sorted run below level 0.
    Compact,
    /// `Db::flush`: the memtable into a level-0 table.
    Flush,
    /// Nothing: the writes stay in the log, which the clean close ends
    /// with its close record.
    StayInLog,
}

/// The writes of tests/data/format_v10_db, in order.
fn format_v10_steps() -> Vec<FixtureStep> {
    let key = |i: u32| format!("v10key{i:04}");
    let put = |i: u32, how: &str| (key(i), Some(format!("value {i}, {how}")));
    vec![
        FixtureStep {
            writes: (0..300)
                .map(|i| put(i, "compacted below level 0"))
                .collect(),
            range_deletes: Vec::new(),
            then: AfterStep::Compact,
        },
        FixtureStep {
            writes: (0..300)
                .step_by(3)
                .map(|i| put(i, "rewritten in level 0"))
                .chain((1..300).step_by(10).map(|i| (key(i), None)))
                .collect(),
            range_deletes: vec![(key(40), key(60))],
            then: AfterStep::Flush,
        },
        FixtureStep {
            writes: (300..350)
                .map(|i| put(i, "in a second level-0 table"))
                .collect(),
            range_deletes: Vec::new(),
            then: AfterStep::Flush,
        },
        FixtureStep {
            writes: (0..350)
                .step_by(7)
                .map(|i| put(i, "in the log"))
                .chain([(key(2), None), (key(349), None)])
                .collect(),
            range_deletes: vec![(key(320), key(331))],
            then: AfterStep::StayInLog,
        },
    ]
}

/// What tests/data/format_v10_db holds: the steps applied to a map.
fn format_v10_contents() -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut model = BTreeMap::new();
    for step in format_v10_steps() {
        for (key, value) in step.writes {
            match value {
                Some(value) => model.insert(key.into_bytes(), value.into_bytes()),
                None => model.remove(key.as_bytes()),
            };
        }
        for (start, end) in step.range_deletes {
            model.retain(|key, _| {
                key.as_slice() < start.as_bytes() || key.as_slice() >= end.as_bytes()
            });
        }
    }
    model
}

/// Writes tests/data/format_v10_db anew with today's code (run by hand,
/// `SIFTDB_WRITE_FIXTURE=1 cargo test -p siftdb --test format_fixture --
/// --ignored write_format_v10_fixture`, only when the format's version
/// changes before the first release: from then on a fixture is never
/// rewritten, a new one is added beside it).
#[test]
#[ignore = "writes the fixture in the source tree; run by hand"]
fn write_format_v10_fixture() {
    if std::env::var("SIFTDB_WRITE_FIXTURE").as_deref() != Ok("1") {
        return;
    }
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/format_v10_db");
    if fixture.exists() {
        std::fs::remove_dir_all(&fixture).unwrap();
    }
    // Bottommost tables zstd-coded with a dictionary (format 10's blocks).
    let db = Db::open_with(&fixture, fixture_options()).unwrap();
    // Every write lands in the default keyspace and, in the same batch,
    // in keyspace "events" (value prefixed "e-"), whose stored settings
    // the manifest records.
    let events = db
        .keyspace_with("events", fixture_events_settings())
        .unwrap();
    for step in format_v10_steps() {
        for (key, value) in step.writes {
            let mut batch = siftdb::WriteBatch::new();
            match value {
                Some(value) => {
                    batch.put(&key, &value);
                    batch.put_in(&events, &key, format!("e-{value}"));
                }
                None => {
                    batch.delete(&key);
                    batch.delete_in(&events, &key);
                }
            }
            db.write(batch).unwrap();
        }
        for (start, end) in step.range_deletes {
            let mut batch = siftdb::WriteBatch::new();
            batch.delete_range(start.as_str()..end.as_str());
            batch.delete_range_in(&events, start.as_str()..end.as_str());
            db.write(batch).unwrap();
        }
        match step.then {
            AfterStep::Compact => db.compact().unwrap(),
            AfterStep::Flush => db.flush().unwrap(),
            AfterStep::StayInLog => {}
        }
    }
    db.wait_for_background().unwrap();
    drop((db, events));
    // The lock file is no part of the database.
    let _ = std::fs::remove_file(fixture.join("LOCK"));
}

/// The settings the fixture's keyspace "events" was given.
fn fixture_events_settings() -> siftdb::KeyspaceOptions {
    siftdb::KeyspaceOptions::new()
        .block_size(1024)
        .prefix_extractor(siftdb::PrefixExtractor::fixed(5).unwrap())
        .bottommost_compression(siftdb::Compression::zstd(3).unwrap())
        .bottommost_zstd_dictionary_bytes(1024)
        .compression_per_level(vec![siftdb::Compression::None, siftdb::Compression::Lz4])
}

/// The database options the fixture was written with: small blocks, so
/// that its bottommost tables have enough of them to train a dictionary,
/// and values of 24 bytes or more in blob files (entries of kind 3).
fn fixture_options() -> Options {
    Options::default()
        .block_size(1024)
        .bottommost_compression(siftdb::Compression::zstd(3).unwrap())
        .bottommost_zstd_dictionary_bytes(1024)
        .blob_threshold(Some(24))
}

/// The one fixture of the format this build writes: tests/data/format_v10_db
/// (tables of format 10 in level 0 and below it, the bottom ones
/// zstd-coded with a dictionary, one with a range
/// tombstone, in two keyspaces, a log of format 6 holding the last writes and a range delete), made by `write_format_v10_fixture`. Until the first
/// release a format change replaces the format and this fixture with it;
/// from the first release on every format change keeps reading the
/// previous ones, and this fixture (never rewritten) checks that it does.
#[test]
fn the_format_v10_fixture_opens_and_reads_every_key() {
    let dir = copy_of_fixture("format_v10_db");
    let tables = files_ending(dir.path(), ".sst");
    assert!(tables.len() >= 3, "{tables:?}");
    for path in &tables {
        let format = Table::open_path(path).unwrap().footer().format;
        assert_eq!(format, TableFormat::CURRENT, "{}", path.display());
        assert_eq!(format.version(), 10);
    }
    assert!(
        tables
            .iter()
            .any(|p| Table::open_path(p).unwrap().range_tombstones().is_some()),
        "no table of the fixture holds a range tombstone"
    );
    let state = siftdb::internals::manifest::read_manifest(
        &siftdb::internals::fs::OsFileSystem,
        dir.path(),
    )
    .unwrap()
    .unwrap();
    let levels: Vec<u32> = state.tables.iter().map(|t| t.level).collect();
    assert!(
        levels.contains(&0) && levels.iter().any(|&l| l > 0),
        "{levels:?}"
    );
    let logs: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "wal"))
        .collect();
    let [log] = &logs[..] else {
        panic!("{logs:?}");
    };
    let log_bytes = std::fs::read(log).unwrap();
    assert_eq!(&log_bytes[4..8], &6u32.to_le_bytes());
    assert_eq!(
        state
            .keyspaces
            .iter()
            .map(|k| k.name.as_str())
            .collect::<Vec<_>>(),
        ["default", "events"]
    );
    let stored = &state.keyspaces[1].settings;
    assert_eq!(
        (stored.block_size, stored.prefix_len, stored.compression),
        (Some(1024), Some(5), None)
    );
    assert_eq!(
        (
            stored.bottommost_compression,
            stored.bottommost_dictionary_bytes
        ),
        (Some(siftdb::Compression::zstd(3).unwrap()), Some(1024))
    );
    assert_eq!(
        stored.compression_per_level,
        Some(vec![siftdb::Compression::None, siftdb::Compression::Lz4])
    );
    assert!(
        tables.iter().any(|p| Table::open_path(p)
            .unwrap()
            .properties()
            .compression_dictionary
            .is_some()),
        "no table of the fixture holds a zstd dictionary"
    );
    let replayed = siftdb::internals::wal::replay(&log_bytes, "log").unwrap();
    assert!(replayed.closed_cleanly && !replayed.records.is_empty());
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");

    let want = format_v10_contents();
    let check = |db: &Db| {
        for i in 0..360 {
            let key = format!("v10key{i:04}");
            let got = db.get(&key).unwrap();
            assert_eq!(
                got.as_deref(),
                want.get(key.as_bytes()).map(Vec::as_slice),
                "{key}"
            );
        }
        let scanned: BTreeMap<Vec<u8>, Vec<u8>> = db
            .iter()
            .map(|entry| {
                let (key, value) = entry.unwrap();
                (key.to_vec(), value.to_vec())
            })
            .collect();
        assert_eq!(scanned, want);
        let events = db.keyspace("events").unwrap();
        let scanned: BTreeMap<Vec<u8>, Vec<u8>> = events
            .iter()
            .map(|entry| {
                let (key, value) = entry.unwrap();
                (key.to_vec(), value.to_vec())
            })
            .collect();
        let want_events: BTreeMap<Vec<u8>, Vec<u8>> = want
            .iter()
            .map(|(k, v)| (k.clone(), [&b"e-"[..], v].concat()))
            .collect();
        assert_eq!(scanned, want_events);
    };
    let db = Db::open_with(dir.path(), Options::default()).unwrap();
    assert!(db.recovery_report().records_replayed > 0);
    check(&db);
    drop(db);
    check(&Db::open_read_only(dir.path()).unwrap());
}

/// `bytes` (a table file) with its footer's version field set to
/// `version` and the footer's checksum made to match.
fn with_table_version(bytes: &mut [u8], version: u32) {
    let footer = bytes.len() - 64;
    bytes[footer + 48..footer + 52].copy_from_slice(&version.to_le_bytes());
    let crc = {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&bytes[footer..footer + 52]);
        hasher.update(&bytes[bytes.len() - 8..]);
        hasher.finalize()
    };
    bytes[footer + 52..footer + 56].copy_from_slice(&crc.to_le_bytes());
}

/// `bytes` (a log file) with its header's version field set to `version`
/// and the header's checksum made to match.
fn with_log_version(bytes: &mut [u8], version: u32) {
    bytes[4..8].copy_from_slice(&version.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..16]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
}

fn assert_unsupported(err: &Error, path: &Path, kind: &str, found: u64, supported: u64) {
    let Error::UnsupportedVersion {
        path: named,
        kind: named_kind,
        found: named_found,
        supported: named_supported,
    } = err
    else {
        panic!("not UnsupportedVersion: {err}");
    };
    assert_eq!(
        (named.as_path(), *named_kind, *named_found, *named_supported),
        (path, kind, found, supported)
    );
    assert_eq!(
        err.to_string(),
        format!(
            "{kind} {} has format version {found}; this build reads version {supported} only",
            path.display()
        )
    );
}

/// A database one of whose tables carries an older format version (9, the
/// one before this build's) or an unknown later one is refused at open,
/// naming the table, its version and the one this build reads — by a
/// read-write and a read-only open alike, and by `Table::open`.
#[test]
fn a_database_with_a_table_of_another_format_version_is_refused() {
    for found in [9u32, 1, 11] {
        let dir = copy_of_fixture("format_v10_db");
        let table = files_ending(dir.path(), ".sst").pop().unwrap();
        let mut bytes = std::fs::read(&table).unwrap();
        with_table_version(&mut bytes, found);
        std::fs::write(&table, &bytes).unwrap();
        let (found, supported) = (u64::from(found), u64::from(TableFormat::CURRENT.version()));
        let err = Table::open_path(&table).unwrap_err();
        assert_unsupported(&err, &table, "table", found, supported);
        let err = Db::open_with(dir.path(), Options::default()).unwrap_err();
        assert_unsupported(&err, &table, "table", found, supported);
        let err = Db::open_read_only(dir.path()).unwrap_err();
        assert_unsupported(&err, &table, "table", found, supported);
        assert_refused_by_repair_and_verify(dir.path(), &table, "table", found, supported);
    }
}

/// `siftdb repair` refuses the database before it changes anything (a
/// salvage would read nothing of the file and call all of it lost), and
/// `siftdb verify` reports the file as an error naming its version.
fn assert_refused_by_repair_and_verify(
    dir: &Path,
    path: &Path,
    kind: &str,
    found: u64,
    supported: u64,
) {
    // The lock file aside (the opens before made it, a repair may).
    let files = || {
        let mut names: Vec<PathBuf> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| !p.ends_with("LOCK"))
            .collect();
        names.sort();
        names
    };
    let before = files();
    for dry_run in [true, false] {
        let options = siftdb::RepairOptions::new().dry_run(dry_run);
        let err = siftdb::repair(dir, options).unwrap_err();
        assert_unsupported(&err, path, kind, found, supported);
    }
    assert_eq!(files(), before);
    let report = verify_dir(dir).unwrap();
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        report
            .errors()
            .any(|p| p.file == name && p.detail.contains(&format!("has format version {found};"))),
        "{report:?}"
    );
}

/// A database whose log carries an older format version (5, the one
/// before merge operands) or an unknown later one is refused at open,
/// naming the log, its version and the one this build reads.
#[test]
fn a_database_with_a_log_of_another_format_version_is_refused() {
    for found in [5u32, 1, 7] {
        let dir = copy_of_fixture("format_v10_db");
        let log = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.extension().is_some_and(|e| e == "wal"))
            .unwrap();
        let mut bytes = std::fs::read(&log).unwrap();
        with_log_version(&mut bytes, found);
        std::fs::write(&log, &bytes).unwrap();
        let supported = u64::from(siftdb::internals::wal::FORMAT_VERSION);
        let err = Db::open_with(dir.path(), Options::default()).unwrap_err();
        assert_unsupported(&err, &log, "write-ahead log", found.into(), supported);
        let err = Db::open_read_only(dir.path()).unwrap_err();
        assert_unsupported(&err, &log, "write-ahead log", found.into(), supported);
        assert_refused_by_repair_and_verify(
            dir.path(),
            &log,
            "write-ahead log",
            found.into(),
            supported,
        );
    }
}
