//! `multi_get` with overlapped block reads: answers against a
//! BTreeMap model over random batches — duplicate keys, absent keys, keys
//! in the memtable, level 0 and the deepest level — with a block cache of a
//! few blocks, from 8 threads, on the io_uring path and the forced pool
//! path; a failed block read fails the call, never mismatches an answer;
//! a table truncated or removed under a live database gives an error or the
//! right answers, never a wrong value, and returns. The same with data
//! blocks read past the page cache (`Options::direct_reads`), and where
//! the file system refuses `O_DIRECT` (tmpfs), through it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test helpers"
)]

use std::collections::BTreeMap;
use std::sync::Arc;

use siftdb::internals::table::io_uring_available;
use siftdb::{Db, Options};
use siftdb_testkit::SplitMix64 as Rng;
use siftdb_testkit::{FaultFs, FaultMode};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn key(i: u64) -> Vec<u8> {
    format!("key{i:07}").into_bytes()
}

fn value(i: u64, round: u64) -> Vec<u8> {
    format!("value-{i}-{round}-{}", "x".repeat((i % 40) as usize)).into_bytes()
}

fn options() -> Options {
    Options::default()
        .memtable_bytes(64 << 10)
        .block_size(512)
        // A few blocks: most reads of a batch miss the cache.
        .block_cache_bytes(4 * 1024)
        .level1_bytes(256 << 10)
        .table_target_bytes(64 << 10)
}

/// `count` random writes to keys below `keys` of `round`'s values, one in
/// `delete_one_in` a delete, in the database and the model.
fn write_random(
    db: &Db,
    model: &mut Model,
    rng: &mut Rng,
    (count, keys, delete_one_in): (u64, u64, u64),
    round: u64,
) {
    for _ in 0..count {
        let i = rng.below(keys);
        if rng.below(delete_one_in) == 0 {
            db.delete(key(i)).unwrap();
            model.remove(&key(i));
        } else {
            db.put(key(i), value(i, round)).unwrap();
            model.insert(key(i), value(i, round));
        }
    }
}

/// Writes keys that end in the deepest level (compacted), then level 0
/// (flushed), then the memtable, with overwrites and deletes across them.
fn fill(db: &Db, model: &mut Model, rng: &mut Rng) {
    let stages: [(u64, u64, bool); 3] = [(4000, 0, true), (800, 1, false), (200, 2, false)];
    for (count, round, compact) in stages {
        write_random(db, model, rng, (count, 6000, 10), round);
        if compact {
            db.compact().unwrap();
        } else if round == 1 {
            db.flush().unwrap();
        }
    }
}

fn check_batches(db: &Arc<Db>, model: &Arc<Model>, threads: u64, batches: u64) {
    let workers: Vec<_> = (0..threads)
        .map(|t| {
            let (db, model) = (Arc::clone(db), Arc::clone(model));
            std::thread::spawn(move || {
                let mut rng = Rng::new(0x3600 + t);
                for _ in 0..batches {
                    let len = 1 + rng.below(150) as usize;
                    let mut keys: Vec<Vec<u8>> = (0..len).map(|_| key(rng.below(6500))).collect();
                    // Duplicates of keys already in the batch.
                    for _ in 0..rng.below(8) {
                        let again = keys[rng.below(keys.len() as u64) as usize].clone();
                        keys.push(again);
                    }
                    let answers = db.multi_get(&keys).unwrap();
                    assert_eq!(answers.len(), keys.len());
                    for (k, answer) in keys.iter().zip(answers) {
                        assert_eq!(
                            answer.as_deref(),
                            model.get(k).map(Vec::as_slice),
                            "key {}",
                            String::from_utf8_lossy(k)
                        );
                    }
                }
            })
        })
        .collect();
    for worker in workers {
        worker.join().unwrap();
    }
}

#[test]
fn answers_match_a_model_on_both_io_paths_from_8_threads() {
    for uring in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_with(dir.path(), options().io_uring(uring)).unwrap();
        let mut model = Model::new();
        fill(&db, &mut model, &mut Rng::new(36));
        let stats = db.stats();
        assert!(stats.level_tables[0] > 0, "{:?}", stats.level_tables);
        assert!(stats.level_tables.iter().skip(1).any(|&n| n > 0));
        let (db, model) = (Arc::new(db), Arc::new(model));
        check_batches(&db, &model, 8, 40);
        let stats = db.stats();
        assert!(stats.overlapped_batches > 0, "{stats:?}");
        if uring && io_uring_available() {
            assert!(stats.overlapped_reads_uring > 0);
            assert_eq!(stats.overlapped_reads_pool, 0);
        } else {
            assert!(stats.overlapped_reads_pool > 0);
        }
        if !uring {
            assert_eq!(stats.overlapped_reads_uring, 0, "forced pool path");
        }
    }
}

#[test]
fn one_read_at_a_time_gives_the_same_answers() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        options().multi_get_in_flight(1).multi_get_batch(7),
    )
    .unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut Rng::new(7));
    let (db, model) = (Arc::new(db), Arc::new(model));
    check_batches(&db, &model, 2, 20);
    assert_eq!(db.stats().overlapped_batches, 0);
}

#[test]
fn a_batch_in_the_cache_reads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options().block_cache_bytes(64 << 20)).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut Rng::new(8));
    // No flush or compaction still running: a table written between the
    // two calls would hold blocks the first call never cached.
    db.wait_for_background().unwrap();
    let keys: Vec<Vec<u8>> = (0..200).map(|i| key(i * 29)).collect();
    let first = db.multi_get(&keys).unwrap();
    let before = db.stats();
    assert_eq!(db.multi_get(&keys).unwrap(), first);
    let after = db.stats();
    assert_eq!(after.block_reads_from_file, before.block_reads_from_file);
    assert_eq!(after.overlapped_batches, before.overlapped_batches);
}

#[test]
fn a_failed_block_read_fails_the_call_and_mismatches_nothing() {
    let fs = FaultFs::new();
    let dir = std::path::PathBuf::from("/multi_get_faults");
    let db = Db::open_with(&dir, options().file_system(fs.shared())).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut Rng::new(9));
    let mut rng = Rng::new(10);
    let mut failed = 0;
    for n in 1..40 {
        let keys: Vec<Vec<u8>> = (0..100).map(|_| key(rng.below(6500))).collect();
        fs.fail_reads_after(n % 7 + 1, FaultMode::Once);
        match db.multi_get(&keys) {
            Ok(answers) => {
                for (k, answer) in keys.iter().zip(answers) {
                    assert_eq!(answer.as_deref(), model.get(k).map(Vec::as_slice));
                }
            }
            Err(e) => {
                failed += 1;
                assert!(e.to_string().contains(".sst"), "{e}");
            }
        }
        fs.clear_faults();
        // The failure left nothing wrong behind (no cached block, no answer).
        let answers = db.multi_get(&keys).unwrap();
        for (k, answer) in keys.iter().zip(answers) {
            assert_eq!(answer.as_deref(), model.get(k).map(Vec::as_slice));
        }
    }
    assert!(failed > 0);
    let stats = db.stats();
    // A file system without descriptors reads on the pool.
    assert!(stats.overlapped_reads_pool > 0, "{stats:?}");
    assert_eq!(stats.overlapped_reads_uring, 0);
}

#[test]
fn a_table_truncated_or_removed_under_the_database_errs_or_answers_right() {
    for (uring, direct) in [(true, false), (false, false), (true, true), (false, true)] {
        for remove in [false, true] {
            let dir = tempfile::tempdir().unwrap();
            let db = Db::open_with(
                dir.path(),
                options()
                    .io_uring(uring)
                    .direct_reads(direct)
                    .max_open_files(2),
            )
            .unwrap();
            let mut model = Model::new();
            fill(&db, &mut model, &mut Rng::new(11));
            for entry in std::fs::read_dir(dir.path()).unwrap() {
                let path = entry.unwrap().path();
                if path.extension().is_some_and(|e| e == "sst") {
                    if remove {
                        std::fs::remove_file(&path).unwrap();
                    } else {
                        let len = std::fs::metadata(&path).unwrap().len();
                        let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
                        file.set_len(len / 3).unwrap();
                    }
                }
            }
            let mut rng = Rng::new(12);
            let mut errors = 0;
            for _ in 0..30 {
                let keys: Vec<Vec<u8>> = (0..120).map(|_| key(rng.below(6500))).collect();
                match db.multi_get(&keys) {
                    Ok(answers) => {
                        for (k, answer) in keys.iter().zip(answers) {
                            assert_eq!(answer.as_deref(), model.get(k).map(Vec::as_slice));
                        }
                    }
                    Err(_) => errors += 1,
                }
                for k in (0..40).map(|_| key(rng.below(6500))) {
                    match db.get(&k) {
                        Ok(answer) => {
                            assert_eq!(answer.as_deref(), model.get(&k).map(Vec::as_slice))
                        }
                        Err(_) => errors += 1,
                    }
                }
            }
            // A removed file still open reads its old (right) bytes; a
            // truncated one cannot hide its missing blocks.
            assert!(remove || errors > 0, "uring {uring} direct {direct}");
        }
    }
}

/// Keys with a version in several levels — overwritten, deleted and range
/// deleted round after round, each round flushed to level 0 and compacted
/// down by the background — read by `multi_get` now and at snapshots taken
/// between rounds: every answer is the newest version the snapshot sees,
/// whichever level holds it, though all levels' blocks are read in one
/// wave (a call of at most `multi_get_batch` keys makes one overlapped
/// batch, and one more only after a filter false positive).
#[test]
fn keys_in_several_levels_take_the_newest_version_in_one_wave() {
    for uring in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_with(
            dir.path(),
            options()
                .io_uring(uring)
                .memtable_bytes(16 << 10)
                .level1_bytes(12 << 10)
                .table_target_bytes(8 << 10),
        )
        .unwrap();
        let mut rng = Rng::new(0x36_0001);
        let mut model = Model::new();
        let mut snapshots = Vec::new();
        for round in 0..10u64 {
            write_random(&db, &mut model, &mut rng, (900, 3000, 6), round);
            if round % 3 == 1 {
                let start = rng.below(2950);
                let end = start + 1 + rng.below(40);
                db.delete_range(key(start)..key(end)).unwrap();
                model.retain(|k, _| k < &key(start) || k >= &key(end));
            }
            db.flush().unwrap();
            if round == 7 {
                // The last two rounds stay in level 0, above the rest.
                db.wait_for_background().unwrap();
            }
            if round % 4 == 2 {
                snapshots.push((db.snapshot(), model.clone()));
            }
        }
        let levels = db.stats().level_tables;
        assert!(
            levels.iter().filter(|&&n| n > 0).count() >= 3,
            "versions spread over level 0 and at least two deeper levels: {levels:?}"
        );
        let mut views: Vec<(Option<&siftdb::Snapshot>, &Model)> = vec![(None, &model)];
        views.extend(snapshots.iter().map(|(s, m)| (Some(s), m)));
        for (snapshot, model) in views {
            for _ in 0..30 {
                let len = 1 + rng.below(200) as usize;
                let keys: Vec<Vec<u8>> = (0..len).map(|_| key(rng.below(3100))).collect();
                let before = db.stats();
                let answers = match snapshot {
                    Some(s) => s.multi_get(&keys).unwrap(),
                    None => db.multi_get(&keys).unwrap(),
                };
                let after = db.stats();
                // A wave after the first needs a key whose newest candidate
                // block did not hold it: a filter false positive.
                let false_positives = after.filter_false_positives - before.filter_false_positives;
                assert!(
                    after.overlapped_batches <= before.overlapped_batches + 1 + false_positives,
                    "one wave per batch, and one more per false positive"
                );
                for (k, answer) in keys.iter().zip(answers) {
                    let single = match snapshot {
                        Some(s) => s.get(k).unwrap(),
                        None => db.get(k).unwrap(),
                    };
                    let expected = model.get(k).map(Vec::as_slice);
                    assert_eq!(
                        answer.as_deref(),
                        expected,
                        "{}",
                        String::from_utf8_lossy(k)
                    );
                    assert_eq!(single.as_deref(), expected);
                }
            }
        }
        assert!(db.stats().overlapped_batches > 0);
    }
}

/// True when `dir`'s file system opens files with `O_DIRECT` (tmpfs does not).
#[cfg(target_os = "linux")]
fn takes_direct_reads(dir: &std::path::Path) -> bool {
    use rustix::fs::{Mode, OFlags};
    let probe = dir.join("probe");
    std::fs::write(&probe, [0u8; 4096]).unwrap();
    let taken = rustix::fs::open(&probe, OFlags::RDONLY | OFlags::DIRECT, Mode::empty()).is_ok();
    std::fs::remove_file(&probe).unwrap();
    taken
}

/// Elsewhere the library's direct path takes every local file system
/// (`F_NOCACHE` on macOS, `FILE_FLAG_NO_BUFFERING` on Windows) or none.
#[cfg(not(target_os = "linux"))]
fn takes_direct_reads(_: &std::path::Path) -> bool {
    cfg!(any(target_vendor = "apple", windows))
}

/// A database in `dir` opened with `options` and `direct_reads`:
/// `multi_get` from 8 threads and `get` answer as the model does; returns
/// its stats.
fn check_direct_reads(dir: &std::path::Path, options: Options) -> siftdb::Stats {
    let db = Db::open_with(dir, options.direct_reads(true)).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut Rng::new(37));
    let (db, model) = (Arc::new(db), Arc::new(model));
    check_batches(&db, &model, 8, 20);
    for i in (0..6500).step_by(7) {
        let k = key(i);
        assert_eq!(
            db.get(&k).unwrap().as_deref(),
            model.get(&k).map(Vec::as_slice)
        );
    }
    let stats = db.stats();
    assert!(stats.block_reads_from_file > 0, "{stats:?}");
    stats
}

#[test]
fn direct_reads_answer_as_the_model_on_both_io_paths() {
    for uring in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let direct = takes_direct_reads(dir.path());
        let stats = check_direct_reads(dir.path(), options().io_uring(uring));
        assert_eq!(stats.direct_block_reads > 0, direct, "{stats:?}");
    }
}

/// A file system without a direct path (`RandomAccessFile::read_direct_at`
/// answers `None`, as a refused `O_DIRECT` open does): the same answers,
/// read through the page cache, none counted as direct.
#[test]
fn direct_reads_go_through_the_page_cache_on_a_file_system_without_them() {
    let fs = FaultFs::new();
    let dir = std::path::PathBuf::from("/direct_refused");
    let stats = check_direct_reads(&dir, options().file_system(fs.shared()));
    assert_eq!(stats.direct_block_reads, 0, "{stats:?}");
}

#[test]
fn direct_reads_go_through_the_page_cache_where_o_direct_is_refused() {
    let shm = std::path::Path::new("/dev/shm");
    if !shm.is_dir() {
        eprintln!("no /dev/shm: skipped");
        return;
    }
    let dir = tempfile::tempdir_in(shm).unwrap();
    if takes_direct_reads(dir.path()) {
        eprintln!("/dev/shm takes O_DIRECT here: skipped");
        return;
    }
    for uring in [true, false] {
        let stats = check_direct_reads(dir.path(), options().io_uring(uring));
        assert_eq!(stats.direct_block_reads, 0, "{stats:?}");
    }
}

/// Reads start while later keys of the batch are still asked, so a block
/// an early key wanted may be in flight, or already read and evicted from
/// a cache of no blocks, when a late key wants it: it is read once per
/// wave all the same, and both keys get its answer.
#[test]
fn a_block_wanted_by_an_early_and_a_late_key_is_read_once() {
    for uring in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open_with(dir.path(), options().block_cache_bytes(0).io_uring(uring)).unwrap();
        let mut model = Model::new();
        fill(&db, &mut model, &mut Rng::new(37));
        // No flush or compaction still running: the calls compared below
        // must see the same tables.
        db.wait_for_background().unwrap();
        let mut rng = Rng::new(38);
        for _ in 0..20 {
            let early: Vec<Vec<u8>> = (0..60).map(|_| key(rng.below(6500))).collect();
            let before = db.stats();
            let alone = db.multi_get(&early).unwrap();
            let reads_alone = db.stats().block_reads_from_file - before.block_reads_from_file;
            // The same keys again after them, in reverse: each block is
            // wanted once early and once late.
            let mut twice = early.clone();
            twice.extend(early.iter().rev().cloned());
            let before = db.stats();
            let answers = db.multi_get(&twice).unwrap();
            let reads_twice = db.stats().block_reads_from_file - before.block_reads_from_file;
            assert_eq!(reads_twice, reads_alone, "each block read once a wave");
            assert_eq!(&answers[..early.len()], &alone[..]);
            for (k, answer) in twice.iter().zip(answers) {
                assert_eq!(answer.as_deref(), model.get(k).map(Vec::as_slice));
            }
        }
    }
}

/// A read that fails while the keys after it are still asked (their reads
/// start, complete and are cached meanwhile) fails the call and leaves
/// nothing wrong behind, whichever read of the batch it is.
#[test]
fn a_read_failing_while_later_keys_are_asked_leaves_them_right() {
    let fs = FaultFs::new();
    let dir = std::path::PathBuf::from("/multi_get_early_fault");
    let db = Db::open_with(&dir, options().file_system(fs.shared())).unwrap();
    let mut model = Model::new();
    fill(&db, &mut model, &mut Rng::new(39));
    let mut rng = Rng::new(40);
    let mut failed = 0;
    for nth in 1..30 {
        let keys: Vec<Vec<u8>> = (0..120).map(|_| key(rng.below(6500))).collect();
        fs.fail_reads_after(nth, FaultMode::Once);
        if let Err(e) = db.multi_get(&keys) {
            failed += 1;
            assert!(e.to_string().contains(".sst"), "{e}");
        }
        fs.clear_faults();
        // Every key alone, then the batch again: the right answers.
        for k in &keys {
            assert_eq!(
                db.get(k).unwrap().as_deref(),
                model.get(k).map(Vec::as_slice)
            );
        }
        let answers = db.multi_get(&keys).unwrap();
        for (k, answer) in keys.iter().zip(answers) {
            assert_eq!(answer.as_deref(), model.get(k).map(Vec::as_slice));
        }
    }
    assert!(failed > 0);
}
