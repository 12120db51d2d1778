//! The read path beyond RAM: table metadata held in memory, data blocks
//! through positioned reads and a bounded block cache, file handles through
//! a bounded open-file cache, compressed blocks. (The fixture of the
//! current formats is tests/format_fixture.rs.)
//!
//! Tests that could die of a signal (a truncated file under a memory map)
//! or that change a process-wide limit (`RLIMIT_NOFILE`) run their body in
//! a child process: this test binary, re-run on that one test with
//! `CHILD_ENV` set, so a signal fails the test instead of killing the
//! runner.
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
use std::process::{Command, Output};
use std::sync::Arc;

use siftdb::internals::inspect::verify_dir;
use siftdb::internals::table::format::{block_checksum, TRAILER_LEN};
use siftdb::internals::table::{BlockKind, Codec, Table};
use siftdb::Compression;
use siftdb::{Db, Error, Options};
use siftdb_testkit::files::files_ending;
use siftdb_testkit::SplitMix64;

const CHILD_ENV: &str = "SIFTDB_READ_PATH_CHILD";

/// True in the child process started for `test`.
fn in_child(test: &str) -> bool {
    std::env::var(CHILD_ENV).as_deref() == Ok(test)
}

/// Runs `test` of this binary alone in a child process, with `dir` passed on.
fn run_child(test: &str, dir: &Path) -> Output {
    Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, test)
        .env("SIFTDB_READ_PATH_DIR", dir)
        .output()
        .unwrap()
}

fn child_dir() -> PathBuf {
    PathBuf::from(std::env::var("SIFTDB_READ_PATH_DIR").unwrap())
}

fn report(out: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn key(i: u32) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

/// A value that LZ4 does not shrink (pseudo-random bytes), or one it does.
fn value(i: u32, compressible: bool) -> Vec<u8> {
    if compressible {
        return format!("value {i:07} {}", "abcdefgh".repeat(12)).into_bytes();
    }
    let mut rng = SplitMix64::new(u64::from(i));
    rng.bytes(100)
}

/// A database of `n` keys in one flushed table, closed.
fn one_table_db(dir: &Path, n: u32, compressible: bool) {
    let db = Db::open_with(dir, Options::default()).unwrap();
    for i in 0..n {
        db.put(key(i), value(i, compressible)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
}

#[test]
fn a_truncated_live_table_is_an_error_not_a_signal() {
    const TEST: &str = "a_truncated_live_table_is_an_error_not_a_signal";
    if in_child(TEST) {
        let dir = child_dir();
        let db = Db::open_with(&dir, Options::default().block_cache_bytes(0)).unwrap();
        let table = files_ending(&dir, ".sst").pop().unwrap();
        let len = std::fs::metadata(&table).unwrap().len();
        // Half the data blocks go; the table's metadata was read at open.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&table)
            .unwrap()
            .set_len(len / 2)
            .unwrap();
        let (mut right, mut errors) = (0, 0);
        for i in 0..5000 {
            match db.get(key(i)) {
                Ok(got) => {
                    assert_eq!(got.unwrap(), value(i, false), "key {i}");
                    right += 1;
                }
                Err(e) => {
                    let text = e.to_string();
                    assert!(
                        matches!(e, Error::Io { .. }) && text.contains(".sst"),
                        "{text}"
                    );
                    errors += 1;
                }
            }
        }
        assert!(
            errors > 1000 && right > 1000,
            "{right} right, {errors} errors"
        );
        let scan: Result<Vec<_>, _> = db.iter().collect();
        assert!(scan.is_err());
        println!("child: {right} right, {errors} errors");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    one_table_db(dir.path(), 5000, false);
    let out = run_child(TEST, dir.path());
    assert!(out.status.success(), "{}", report(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("child: "),
        "{}",
        report(&out)
    );
}

/// The hazard `Options::mmap_reads` documents, shown: the same truncation
/// under a memory map kills the reading process with SIGBUS.
// Unix only: SIGBUS is a unix signal (Windows refuses to shrink a mapped
// file instead).
#[cfg(unix)]
#[test]
fn with_mmap_reads_a_truncated_table_is_the_documented_sigbus() {
    const TEST: &str = "with_mmap_reads_a_truncated_table_is_the_documented_sigbus";
    if in_child(TEST) {
        let dir = child_dir();
        let db = Db::open_with(&dir, Options::default().mmap_reads(true)).unwrap();
        let table = files_ending(&dir, ".sst").pop().unwrap();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&table)
            .unwrap()
            .set_len(8192)
            .unwrap();
        for i in 0..5000 {
            let _ = db.get(key(i));
        }
        println!("child: survived");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    one_table_db(dir.path(), 5000, false);
    let out = run_child(TEST, dir.path());
    use std::os::unix::process::ExitStatusExt;
    assert_eq!(out.status.signal(), Some(7), "SIGBUS; {}", report(&out));
}

#[test]
fn filter_and_index_overwritten_on_disk_after_open_change_no_answer() {
    let dir = tempfile::tempdir().unwrap();
    one_table_db(dir.path(), 5000, false);
    let path = files_ending(dir.path(), ".sst").pop().unwrap();
    let footer = *Table::open_path(&path).unwrap().footer();
    // No block cache: every get reads its data block from the file again.
    let db = Db::open_with(dir.path(), Options::default().block_cache_bytes(0)).unwrap();
    let mut file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    let filter = footer.filter.unwrap();
    // An all-zero filter answers "absent" for every key; a zeroed index
    // names no block.
    let mut write_at = |bytes: &[u8], offset: u64| {
        use std::io::{Seek, SeekFrom, Write};
        file.seek(SeekFrom::Start(offset)).unwrap();
        file.write_all(bytes).unwrap();
    };
    write_at(&vec![0u8; filter.len as usize], filter.offset);
    write_at(&vec![0xa5; footer.index.len as usize], footer.index.offset);
    file.sync_all().unwrap();
    for i in 0..5000 {
        assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, false), "key {i}");
    }
    for i in 0..1000 {
        // Absent, but inside the table's key range: the filter answers.
        let absent = [key(i), b"x".to_vec()].concat();
        assert_eq!(db.get(absent).unwrap(), None);
    }
    let stats = db.stats();
    assert_eq!(stats.block_reads_from_file, stats.data_block_reads);
    assert!(stats.filter_skips > 0);
    drop(db);
    // What is on disk now is damaged, and verify says so.
    assert!(!verify_dir(dir.path()).unwrap().is_clean());
}

// Unix only: Windows has no open-file limit to lower (setrlimit).
#[cfg(unix)]
#[test]
fn more_tables_than_open_files_allowed_under_a_low_rlimit() {
    const TEST: &str = "more_tables_than_open_files_allowed_under_a_low_rlimit";
    const KEYS: u32 = 40_000;
    let options = || {
        Options::default()
            .table_target_bytes(4096)
            .level1_bytes(1 << 40)
            .memtable_bytes(1 << 20)
    };
    if in_child(TEST) {
        use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
        let hard = getrlimit(Resource::Nofile).maximum;
        setrlimit(
            Resource::Nofile,
            Rlimit {
                current: Some(256),
                maximum: hard,
            },
        )
        .unwrap();
        // The default: half of the open-file limit.
        assert_eq!(options().effective_max_open_files(), 128);
        let db = Db::open_with(child_dir(), options()).unwrap();
        let stats = db.stats();
        assert!(stats.table_count >= 1000, "{} tables", stats.table_count);
        let mut rng = SplitMix64::new(5);
        for _ in 0..3 * KEYS {
            let i = rng.below(u64::from(KEYS) + 100) as u32;
            let got = db.get(key(i)).unwrap();
            assert_eq!(got, (i < KEYS).then(|| value(i, false).into()), "key {i}");
        }
        let mut count = 0;
        for entry in db.iter() {
            let (k, v) = entry.unwrap();
            assert_eq!(
                (&k[..], &v[..]),
                (&key(count)[..], &value(count, false)[..])
            );
            count += 1;
        }
        assert_eq!(count, KEYS);
        let stats = db.stats();
        assert!(stats.open_table_files <= 128, "{}", stats.open_table_files);
        println!("child: {} tables, all gets right", stats.table_count);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    {
        let db = Db::open_with(dir.path(), options()).unwrap();
        for i in 0..KEYS {
            db.put(key(i), value(i, false)).unwrap();
        }
        // One sorted run of tables of about 4 KiB each.
        db.compact().unwrap();
        assert!(
            db.stats().table_count >= 1000,
            "{:?}",
            db.stats().level_tables
        );
    }
    let out = run_child(TEST, dir.path());
    assert!(out.status.success(), "{}", report(&out));
}

#[test]
fn a_block_cache_of_a_few_blocks_serves_concurrent_readers() {
    let dir = tempfile::tempdir().unwrap();
    const KEYS: u32 = 20_000;
    let capacity = 4 * (4096 + 96);
    let db = Arc::new(
        Db::open_with(
            dir.path(),
            Options::default()
                .block_cache_bytes(capacity)
                .memtable_bytes(512 << 10),
        )
        .unwrap(),
    );
    for i in 0..KEYS {
        db.put(key(i), value(i, i % 2 == 0)).unwrap();
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let before = db.stats();
    let readers: Vec<_> = (0..4)
        .map(|t| {
            let db = Arc::clone(&db);
            std::thread::spawn(move || {
                let mut rng = SplitMix64::new(t);
                for n in 0..20_000 {
                    // A small hot set and the whole key space, mixed.
                    let i = if n % 2 == 0 {
                        rng.below(64) as u32
                    } else {
                        rng.below(u64::from(KEYS)) as u32
                    };
                    let got = db.get(key(i)).unwrap().unwrap();
                    assert_eq!(got, value(i, i % 2 == 0), "key {i}");
                }
            })
        })
        .collect();
    for reader in readers {
        reader.join().unwrap();
    }
    let stats = db.stats();
    let (hits, misses) = (
        stats.block_cache_hits - before.block_cache_hits,
        stats.block_cache_misses - before.block_cache_misses,
    );
    let lookups = stats.data_block_reads - before.data_block_reads;
    assert_eq!(hits + misses, lookups, "{stats:?}");
    assert_eq!(
        stats.block_reads_from_file - before.block_reads_from_file,
        misses
    );
    assert!(hits > 0 && misses > 0, "{hits} hits, {misses} misses");
    assert!(stats.block_cache_bytes <= capacity as u64, "{stats:?}");
    assert!(stats.filter_bytes > 0 && stats.index_bytes > 0, "{stats:?}");
    assert_eq!(
        stats.filter_bytes,
        stats.level_filter_bytes.iter().sum::<u64>()
    );
    assert_eq!(
        stats.index_bytes,
        stats.level_index_bytes.iter().sum::<u64>()
    );
}

#[test]
fn compressed_and_raw_tables_round_trip_and_damage_is_corruption() {
    for (compression, compressible) in [
        (Compression::Lz4, true),
        (Compression::None, true),
        (Compression::Lz4, false),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let options = || {
            Options::default()
                .compression(compression)
                .block_cache_bytes(0)
        };
        {
            let db = Db::open_with(dir.path(), options()).unwrap();
            for i in 0..3000 {
                db.put(key(i), value(i, compressible)).unwrap();
            }
            db.flush().unwrap();
        }
        let path = files_ending(dir.path(), ".sst").pop().unwrap();
        let table = Table::open_path(&path).unwrap();
        let handles = table.data_block_handles().to_vec();
        let file = std::fs::read(&path).unwrap();
        let codec_of =
            |h: &siftdb::internals::table::BlockHandle| file[(h.offset + h.len) as usize + 1];
        let compressed = handles
            .iter()
            .filter(|h| codec_of(h) == Codec::Lz4 as u8)
            .count();
        if compression == Compression::Lz4 && compressible {
            assert_eq!(compressed, handles.len());
        } else {
            assert_eq!(compressed, 0, "{compression:?} {compressible}");
        }
        let db = Db::open_with(dir.path(), options()).unwrap();
        for i in 0..3000 {
            assert_eq!(db.get(key(i)).unwrap().unwrap(), value(i, compressible));
        }
        drop(db);
        let report = verify_dir(dir.path()).unwrap();
        assert!(report.is_clean(), "{report:?}");
        if compressed == 0 {
            continue;
        }

        let mut rng = SplitMix64::new(9);
        for (n, handle) in handles.iter().enumerate().step_by(3) {
            let start = handle.offset as usize;
            let end = start + handle.len as usize;
            // A flipped bit anywhere in a compressed block: its checksum
            // fails before a byte is decompressed.
            let mut bytes = file.clone();
            let at = start + rng.below(handle.len) as usize;
            bytes[at] ^= 1 << rng.below(8);
            let outcomes = gets(bytes, handle.offset, compressible);
            assert!(outcomes.contains_key("checksum"), "block {n}: {outcomes:?}");
            assert!(outcomes.contains_key("right"), "block {n}: {outcomes:?}");

            // Hostile streams under a recomputed checksum (what a checksum
            // cannot catch: a writer's bug, or a forger): a length prefix
            // that does not match the stream is refused by the decoder; a
            // flipped stream byte decodes to an error or to other bytes of
            // the claimed length, never a panic or an unbounded allocation.
            for mutation in 0..2 {
                let mut bytes = file.clone();
                if mutation == 0 {
                    let claimed = u32::from_le_bytes(bytes[start..start + 4].try_into().unwrap());
                    bytes[start..start + 4].copy_from_slice(&(claimed + 1).to_le_bytes());
                } else {
                    let at = start + 4 + rng.below(handle.len - 4) as usize;
                    bytes[at] ^= 1 << rng.below(8);
                }
                let crc = block_checksum(
                    &bytes[start..end],
                    BlockKind::Data as u8,
                    Codec::Lz4 as u8,
                    handle.offset,
                );
                bytes[end + 2..end + TRAILER_LEN].copy_from_slice(&crc.to_le_bytes());
                let outcomes = gets(bytes, handle.offset, compressible);
                if mutation == 0 {
                    assert!(outcomes.contains_key("decoder"), "block {n}: {outcomes:?}");
                }
            }
        }
    }
}

/// Gets every key of a damaged table file: counts right answers, checksum
/// failures and other decoder errors (all `Corruption` naming the block at
/// `offset`), and answers with other bytes — which only a forged block under
/// a recomputed checksum may give.
fn gets(bytes: Vec<u8>, offset: u64, compressible: bool) -> BTreeMap<&'static str, u32> {
    let damaged = Table::from_bytes("000009.sst", bytes.into(), Default::default()).unwrap();
    let mut outcomes = BTreeMap::new();
    for i in 0..3000 {
        let outcome = match damaged.get_key(&key(i)) {
            Ok(Some(siftdb::internals::table::TableValue::Put(v)))
                if v == value(i, compressible) =>
            {
                "right"
            }
            Ok(_) => "other bytes",
            Err(e) => {
                assert!(e.is_corruption(), "{e}");
                let text = e.to_string();
                assert!(
                    text.contains(&format!("data block at offset {offset}")),
                    "{text}"
                );
                if text.contains("checksum mismatch") {
                    "checksum"
                } else {
                    "decoder"
                }
            }
        };
        *outcomes.entry(outcome).or_insert(0) += 1;
    }
    if let Some(other) = outcomes.get("other bytes") {
        // Only a forged stream under a recomputed checksum can get here.
        assert!(!outcomes.contains_key("checksum"), "{other} wrong answers");
    }
    outcomes
}

#[test]
fn scans_and_snapshots_keep_reading_tables_that_compaction_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .memtable_bytes(64 << 10)
            .max_open_files(2)
            .block_cache_bytes(0),
    )
    .unwrap();
    for i in 0..4000 {
        db.put(key(i), value(i, false)).unwrap();
    }
    db.flush().unwrap();
    // Nothing in flight: the directory's tables are the version's.
    db.wait_for_background().unwrap();
    let snapshot = db.snapshot();
    let mut scan = db.iter();
    let first = scan.next().unwrap().unwrap();
    assert_eq!(&first.0[..], &key(0)[..]);
    let before = files_ending(dir.path(), ".sst");
    for i in 0..4000 {
        db.put(key(i), b"newer").unwrap();
    }
    db.compact().unwrap();
    // The replaced tables' files stay while the scan and the snapshot hold
    // them (with two open files allowed, they are reopened by name).
    assert!(before.iter().all(|p| p.exists()));
    let mut count = 1;
    for entry in scan {
        let (k, v) = entry.unwrap();
        assert_eq!(v, value(count, false), "{k:?}");
        count += 1;
    }
    assert_eq!(count, 4000);
    for i in (0..4000).step_by(37) {
        assert_eq!(snapshot.get(key(i)).unwrap().unwrap(), value(i, false));
        assert_eq!(&db.get(key(i)).unwrap().unwrap()[..], b"newer");
    }
    drop(snapshot);
    // Once nothing holds them, their files go.
    assert!(before.iter().all(|p| !p.exists()), "{before:?}");
}

/// A `get` keeps its first 24 candidate tables on the stack and prefetches
/// their filters; the rest are asked afterwards, in the same order. With
/// 30 overlapping level-0 tables (compaction held off), every key must
/// still come back as its newest version, from the newest table as much as
/// from the oldest, and absent keys must stay absent.
#[test]
fn gets_past_the_prefetched_candidates_answer_from_the_right_table() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .level0_compaction_trigger(1000)
        .level0_quiet_trigger(1000)
        .level0_stop_writes(1000);
    let db = Db::open_with(dir.path(), opts).unwrap();
    let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
    let tables = 30u32;
    for t in 0..tables {
        // Every table spans the whole key range (so each is a candidate
        // for every key), and table t alone holds the keys ≡ t mod 30;
        // key 0 is rewritten by every table, key 1 deleted in the last.
        for i in [0, 29 * tables + 7, t, t + tables, t + 2 * tables] {
            let k = key(i);
            let v = format!("t{t}-{i}").into_bytes();
            db.put(&k, &v).unwrap();
            model.insert(k, v);
        }
        if t == tables - 1 {
            db.delete(key(1)).unwrap();
            model.remove(&key(1));
        }
        db.flush().unwrap();
    }
    // An absent key inside every table's range asks all 30 filters.
    let before = db.stats().filter_checks;
    assert_eq!(db.get(key(500)).unwrap(), None);
    assert_eq!(db.stats().filter_checks - before, u64::from(tables));
    for i in 0..31 * tables {
        let k = key(i);
        let got = db.get(&k).unwrap().map(|v| v.to_vec());
        assert_eq!(got.as_ref(), model.get(&k), "key {i}");
    }
}

/// A compaction into the bottom of the tree writes every key it keeps with
/// sequence number 0 (its one-byte tag is what format 6 stores cheapest);
/// reads — the current state, a snapshot taken before, and writes made
/// after — are unchanged.
#[test]
fn the_bottom_holds_sequence_number_zero_and_reads_stay_right() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default().memtable_bytes(64 << 10);
    let db = Db::open_with(dir.path(), options.clone()).unwrap();
    let mut model = BTreeMap::new();
    for round in 0..3u32 {
        for i in (0..3000u32).step_by(round as usize + 1) {
            let (key, value) = (format!("key{i:05}"), format!("value {i} of round {round}"));
            db.put(&key, &value).unwrap();
            model.insert(key, Some(value));
        }
    }
    for i in (0..3000u32).step_by(7) {
        let key = format!("key{i:05}");
        db.delete(&key).unwrap();
        model.insert(key, None);
    }
    let before = db.snapshot();
    let frozen = model.clone();
    db.compact().unwrap();
    let check = |db: &Db, model: &BTreeMap<String, Option<String>>| {
        for (key, want) in model {
            let got = db.get(key).unwrap();
            assert_eq!(got.as_deref(), want.as_deref().map(str::as_bytes), "{key}");
        }
        let live: Vec<(Vec<u8>, Vec<u8>)> = db
            .iter()
            .map(|e| e.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
            .collect();
        let want: Vec<(Vec<u8>, Vec<u8>)> = model
            .iter()
            .filter_map(|(k, v)| {
                v.as_ref()
                    .map(|v| (k.clone().into_bytes(), v.clone().into_bytes()))
            })
            .collect();
        assert_eq!(live, want);
    };
    check(&db, &model);
    for (key, want) in &frozen {
        let got = before.get(key).unwrap();
        assert_eq!(
            got.as_deref(),
            want.as_deref().map(str::as_bytes),
            "snapshot {key}"
        );
    }
    drop(before);
    // Newer writes sort before the zeroed versions, before and after the
    // next compaction, and survive a reopen.
    for i in (0..3000u32).step_by(5) {
        let (key, value) = (format!("key{i:05}"), format!("newer {i}"));
        db.put(&key, &value).unwrap();
        model.insert(key, Some(value));
    }
    check(&db, &model);
    db.compact().unwrap();
    check(&db, &model);
    drop(db);
    // Closed: only the last compaction's tables are left, all at the bottom.
    let tables = files_ending(dir.path(), ".sst");
    assert!(!tables.is_empty());
    for path in &tables {
        let table = Table::open_path(path).unwrap();
        let p = table.properties();
        assert_eq!((p.min_seq.0, p.max_seq.0), (0, 0), "{}", path.display());
    }
    let db = Db::open_with(dir.path(), options).unwrap();
    check(&db, &model);
    let report = verify_dir(dir.path()).unwrap();
    assert!(report.is_clean(), "{report:?}");
}
