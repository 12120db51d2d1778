//! `siftdb::internals::repair` on real files: a sound database is left untouched; a
//! damaged table, manifest or log is rebuilt into a database that opens,
//! verifies clean and answers every key right or (inside what the report
//! says was lost) not at all — never with an older value a lost tombstone
//! or overwrite had hidden; originals go to `lost/`; a second repair
//! changes nothing. And on `FaultFs`: a repair cut short by a power loss at
//! any step, run again, gives the same database.
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

use siftdb::internals::filename::{parse_file_name, FileKind, MANIFEST_FILE};
use siftdb::internals::fs::{FileSystem, OsFileSystem};
use siftdb::internals::inspect::verify_dir;
use siftdb::internals::manifest::read_manifest;
use siftdb::internals::repair::LOST_DIR;
use siftdb::internals::table::Table;
use siftdb::{repair, Db, Error, Options, RepairOptions, RepairReport, WriteBatch};
use siftdb::{LogAction, ManifestFinding, TableAction};
use siftdb_testkit::files::{flip_byte, snapshot};
use siftdb_testkit::{FaultFs, PowerLoss};

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn options() -> Options {
    Options::default()
        .block_size(256)
        .level0_compaction_trigger(8)
        .level0_stop_writes(16)
}

fn key(i: u32) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

fn value(tag: &str, i: u32) -> Vec<u8> {
    format!("{tag}-{i:04}-{}", "x".repeat((i % 23) as usize)).into_bytes()
}

/// Applies `ops` as one batch to the database and the model.
fn apply(db: &Db, model: &mut Model, ops: &[(Vec<u8>, Option<Vec<u8>>)]) {
    let mut batch = WriteBatch::new();
    for (k, v) in ops {
        match v {
            Some(v) => {
                batch.put(k, v);
                model.insert(k.clone(), v.clone());
            }
            None => {
                batch.delete(k);
                model.remove(k);
            }
        }
    }
    db.write(batch).unwrap();
}

/// A closed database: 400 keys compacted to level 1, a level-0 table
/// overwriting and deleting many of them, and three batches in the log.
fn build(dir: &Path, opts: Options) -> Model {
    let mut model = Model::new();
    let db = Db::open_with(dir, opts).unwrap();
    for chunk in (0..400u32).collect::<Vec<_>>().chunks(20) {
        let ops: Vec<_> = chunk
            .iter()
            .map(|&i| (key(i), Some(value("a", i))))
            .collect();
        apply(&db, &mut model, &ops);
    }
    db.compact().unwrap();
    for i in 0..400u32 {
        if i % 3 == 0 {
            apply(&db, &mut model, &[(key(i), None)]);
        } else if i % 5 == 0 {
            apply(&db, &mut model, &[(key(i), Some(value("b", i)))]);
        }
    }
    db.flush().unwrap();
    apply(
        &db,
        &mut model,
        &[(key(7), Some(value("c", 7))), (key(9), None)],
    );
    apply(&db, &mut model, &[(key(500), Some(value("c", 500)))]);
    apply(
        &db,
        &mut model,
        &[(key(11), None), (key(12), Some(value("c", 12)))],
    );
    drop(db);
    model
}

fn universe() -> Vec<Vec<u8>> {
    (0..410u32).chain([500, 999]).map(key).collect()
}

fn files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

fn of_kind(dir: &Path, kind: FileKind) -> Vec<String> {
    files(dir)
        .into_iter()
        .filter(|n| parse_file_name(n).is_some_and(|(k, _)| k == kind))
        .collect()
}

fn flip(path: &Path, offset: u64) {
    flip_byte(path, offset, 0x5a);
}

/// The level-0 table (the one holding the tombstones) and the level-1 one.
fn tables_by_level(dir: &Path) -> BTreeMap<u32, Vec<PathBuf>> {
    let state = read_manifest(&OsFileSystem, dir).unwrap().unwrap();
    let mut out: BTreeMap<u32, Vec<PathBuf>> = BTreeMap::new();
    for t in state.tables {
        out.entry(t.level)
            .or_default()
            .push(dir.join(siftdb::internals::filename::table_file_name(t.file_number)));
    }
    out
}

/// Opens the repaired database and checks every key: right, or — only
/// where the report says data was lost — absent. Returns how many keys were
/// lost.
fn check_repaired(dir: &Path, model: &Model, report: &RepairReport) -> usize {
    let verify = verify_dir(dir).unwrap();
    assert_eq!(verify.errors().count(), 0, "{verify:?}");
    let db = Db::open_with(dir, options()).unwrap();
    assert!(db.recovery_report().damaged_tables.is_empty());
    let mut lost = 0;
    for k in universe() {
        let got = db.get(&k).unwrap();
        let want = model.get(&k);
        if got.as_deref() == want.map(Vec::as_slice) {
            continue;
        }
        let in_lost_range = report.lost_ranges().any(|r| r.covers(&k));
        assert!(
            got.is_none() && in_lost_range,
            "{}: got {:?}, want {:?}; lost ranges {:?}",
            String::from_utf8_lossy(&k),
            got.map(|v| String::from_utf8_lossy(&v).into_owned()),
            want.map(|v| String::from_utf8_lossy(v).into_owned()),
            report.lost_ranges().collect::<Vec<_>>()
        );
        lost += 1;
    }
    // A scan agrees with the gets.
    let scanned: Vec<(Vec<u8>, Vec<u8>)> = db
        .iter()
        .map(|r| r.map(|(k, v)| (k.to_vec(), v.to_vec())).unwrap())
        .collect();
    for (k, v) in &scanned {
        assert_eq!(db.get(k).unwrap().as_deref(), Some(v.as_slice()));
    }
    lost
}

/// A second repair finds nothing to do and changes nothing.
fn assert_idempotent(dir: &Path) {
    let before = snapshot(dir);
    let again = repair(dir, RepairOptions::new().options(options())).unwrap();
    assert!(!again.changed(), "{again:#?}");
    assert!(!again.lost_anything(), "{again:#?}");
    assert_eq!(snapshot(dir), before);
}

#[test]
fn a_sound_database_is_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path(), options());
    let before = snapshot(dir.path());
    let report = repair(dir.path(), RepairOptions::new()).unwrap();
    assert_eq!(report.manifest, ManifestFinding::Intact);
    assert!(!report.changed() && !report.lost_anything(), "{report:#?}");
    assert!(report.tables.iter().all(|t| t.action == TableAction::Kept));
    assert!(report.logs.iter().all(|l| l.action == LogAction::Kept));
    // The lock file may appear; nothing else changes.
    let mut after = snapshot(dir.path());
    after.remove("LOCK");
    let mut before = before;
    before.remove("LOCK");
    assert_eq!(after, before);
    assert_eq!(check_repaired(dir.path(), &model, &report), 0);
}

#[test]
fn a_damaged_data_block_loses_only_its_range_and_shadows_no_older_value() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path(), options());
    // Damage a block of the level-0 table, which holds tombstones and new
    // values over the level-1 table: nothing older may come back.
    let level0 = tables_by_level(dir.path())[&0][0].clone();
    let name = level0.file_name().unwrap().to_string_lossy().into_owned();
    let block = Table::open_path(&level0).unwrap().data_block_handles()[1];
    flip(&level0, block.offset + 4);
    assert!(Db::open_with(dir.path(), options().paranoid_checks(true)).is_err());

    let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
    assert_eq!(report.manifest, ManifestFinding::Intact);
    let damaged = report.tables.iter().find(|t| t.file == name).unwrap();
    assert!(matches!(
        damaged.action,
        TableAction::Rewritten { into: Some(_) }
    ));
    assert_eq!(damaged.lost.len(), 1, "{damaged:#?}");
    assert_eq!(damaged.lost[0].offset, Some(block.offset));
    // The level-1 table held older versions within the lost range: dropped.
    let older = report.tables.iter().find(|t| t.level == Some(1)).unwrap();
    assert!(older.entries_dropped > 0, "{older:#?}");
    assert!(report
        .moved
        .iter()
        .any(|(from, to)| *from == name && to.starts_with(LOST_DIR)));
    assert_eq!(
        std::fs::read(dir.path().join(LOST_DIR).join(&name))
            .unwrap()
            .len() as u64,
        std::fs::metadata(dir.path().join(LOST_DIR).join(&name))
            .unwrap()
            .len()
    );
    assert!(!dir.path().join(&name).exists());
    let lost = check_repaired(dir.path(), &model, &report);
    assert!(lost > 0);
    assert!(lost < 40, "{lost} keys lost for one 256-byte block");
    assert_idempotent(dir.path());
}

#[test]
fn a_table_whose_footer_or_index_is_damaged_is_salvaged_whole() {
    for tail in [true, false] {
        let dir = tempfile::tempdir().unwrap();
        let model = build(dir.path(), options());
        let level1 = tables_by_level(dir.path())[&1][0].clone();
        let at = if tail {
            std::fs::metadata(&level1).unwrap().len() - 20
        } else {
            Table::open_path(&level1).unwrap().footer().index.offset + 3
        };
        flip(&level1, at);
        // Opens without it (reads of its range fail); repair salvages it.
        let db = Db::open_with(dir.path(), options()).unwrap();
        assert_eq!(db.recovery_report().damaged_tables.len(), 1);
        drop(db);
        let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
        assert!(!report.lost_anything(), "{report:#?}");
        assert_eq!(check_repaired(dir.path(), &model, &report), 0);
        assert_idempotent(dir.path());
    }
}

#[test]
fn a_missing_or_damaged_manifest_is_rebuilt_from_the_files() {
    for damage in ["missing", "flipped"] {
        let dir = tempfile::tempdir().unwrap();
        let model = build(dir.path(), options());
        let manifest = dir.path().join(MANIFEST_FILE);
        if damage == "missing" {
            std::fs::remove_file(&manifest).unwrap();
        } else {
            flip(&manifest, 40);
        }
        // Its second copy lost as well (else the open reads that).
        std::fs::remove_file(dir.path().join("MANIFEST.copy")).unwrap();
        let err = Db::open_with(dir.path(), options()).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        if damage == "flipped" {
            assert!(err.to_string().contains("siftdb repair"), "{err}");
        }
        let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
        assert!(matches!(
            report.manifest,
            ManifestFinding::Missing | ManifestFinding::Damaged(_)
        ));
        assert!(report
            .tables
            .iter()
            .all(|t| t.action == TableAction::Merged));
        assert!(!report.lost_anything(), "{report:#?}");
        assert!(report.uncertain.is_empty(), "{report:#?}");
        assert!(of_kind(dir.path(), FileKind::Wal).is_empty());
        assert_eq!(check_repaired(dir.path(), &model, &report), 0);
        if damage == "flipped" {
            assert!(dir.path().join(LOST_DIR).join(MANIFEST_FILE).exists());
        }
        assert_idempotent(dir.path());
    }
}

#[test]
fn a_damaged_record_of_a_cleanly_closed_log_is_skipped_and_reported() {
    let dir = tempfile::tempdir().unwrap();
    let model = build(dir.path(), options());
    let log = dir.path().join(&of_kind(dir.path(), FileKind::Wal)[0]);
    let bytes = std::fs::read(&log).unwrap();
    let replayed = siftdb::internals::wal::replay(&bytes, "log").unwrap();
    assert_eq!(replayed.records.len(), 3);
    // The payload of the second record (key 500): its length stays readable.
    let header_len = siftdb::internals::wal::record_header_len(replayed.records[1].payload.len());
    let second = replayed.records[1].offset + header_len as u64 + 2;
    flip(&log, second);
    let err = Db::open_with(dir.path(), options()).unwrap_err();
    assert!(err.to_string().contains("siftdb repair"), "{err}");

    let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
    let log_report = &report.logs[0];
    assert_eq!(log_report.action, LogAction::Replaced);
    assert_eq!(log_report.records_kept, 2);
    assert_eq!(log_report.lost.len(), 1);
    assert_eq!(log_report.lost[0].offset, replayed.records[1].offset);
    assert!(!report.uncertain.is_empty());
    let db = Db::open_with(dir.path(), options()).unwrap();
    for k in universe() {
        let want = if k == key(500) { None } else { model.get(&k) };
        assert_eq!(db.get(&k).unwrap().as_deref(), want.map(Vec::as_slice));
    }
    drop(db);
    assert_idempotent(dir.path());
}

#[test]
fn a_log_record_whose_header_is_hit_is_kept_or_the_rest_given_up() {
    for bytes_hit in [1, 2] {
        let dir = tempfile::tempdir().unwrap();
        let model = build(dir.path(), options());
        let log = dir.path().join(&of_kind(dir.path(), FileKind::Wal)[0]);
        let bytes = std::fs::read(&log).unwrap();
        let replayed = siftdb::internals::wal::replay(&bytes, "log").unwrap();
        // The length of the second record (key 500): its one byte (after
        // the 2-byte length check), and then the check as well.
        let hit: &[u64] = if bytes_hit == 1 { &[2] } else { &[2, 0] };
        for at in hit {
            flip(&log, replayed.records[1].offset + at);
        }
        let report = repair(dir.path(), RepairOptions::new().options(options())).unwrap();
        let db = Db::open_with(dir.path(), options()).unwrap();
        if bytes_hit == 1 {
            // The length check names the one length that fits: kept whole.
            assert_eq!(report.logs[0].records_kept, 3, "{report:#?}");
            assert!(!report.lost_anything(), "{report:#?}");
            for k in universe() {
                assert_eq!(
                    db.get(&k).unwrap().as_deref(),
                    model.get(&k).map(Vec::as_slice)
                );
            }
        } else {
            // Where the next record starts is unknown: the rest is given up.
            assert_eq!(report.logs[0].records_kept, 1, "{report:#?}");
            let lost = &report.logs[0].lost;
            assert_eq!(lost.len(), 1);
            assert_eq!(lost[0].offset, replayed.records[1].offset);
            assert_eq!(db.get(key(500)).unwrap(), None);
            assert_eq!(
                db.get(key(7)).unwrap().as_deref(),
                model.get(&key(7)).map(Vec::as_slice)
            );
        }
    }
}

#[test]
fn repair_refuses_an_open_database_and_a_dry_run_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    build(dir.path(), options());
    let level0 = tables_by_level(dir.path())[&0][0].clone();
    flip(&level0, 10);
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert!(matches!(
        repair(dir.path(), RepairOptions::new()),
        Err(Error::Locked(_))
    ));
    drop(db);
    let before = snapshot(dir.path());
    let report = repair(dir.path(), RepairOptions::new().dry_run(true)).unwrap();
    assert!(report.dry_run && report.changed() && report.lost_anything());
    assert_eq!(snapshot(dir.path()), before);
    let empty = tempfile::tempdir().unwrap();
    assert!(matches!(
        repair(empty.path(), RepairOptions::new()),
        Err(Error::NotADatabase { .. })
    ));
    // Nothing created in it, not even the lock file.
    assert_eq!(std::fs::read_dir(empty.path()).unwrap().count(), 0);
}

/// The database `build` makes, on `fs` at `/db`, with one data block of
/// the level-0 table damaged.
fn damaged_on(fs: &FaultFs) -> Model {
    let opts = options().file_system(fs.shared());
    let model = build(Path::new("/db"), opts);
    let state = read_manifest(fs, Path::new("/db")).unwrap().unwrap();
    let level0 = state.tables.iter().find(|t| t.level == 0).unwrap();
    let path = Path::new("/db").join(siftdb::internals::filename::table_file_name(
        level0.file_number,
    ));
    let mut bytes = fs.read_all(&path).unwrap().to_vec();
    bytes[300] ^= 0x5a;
    let mut file = fs.create(&path).unwrap();
    file.append(&bytes).unwrap();
    file.sync().unwrap();
    fs.sync_dir(Path::new("/db")).unwrap();
    model
}

/// Every key as the database on `fs` answers it.
fn answers(fs: &FaultFs) -> Vec<Option<Vec<u8>>> {
    let db = Db::open_with("/db", options().file_system(fs.shared())).unwrap();
    assert!(db.recovery_report().damaged_tables.is_empty());
    universe()
        .iter()
        .map(|k| db.get(k).unwrap().map(|v| v.to_vec()))
        .collect()
}

#[test]
fn a_repair_cut_short_at_any_step_and_run_again_gives_the_same_database() {
    let reference = FaultFs::new();
    let model = damaged_on(&reference);
    let start = reference.op_count();
    let report = repair(
        "/db",
        RepairOptions::new().options(options().file_system(reference.shared())),
    )
    .unwrap();
    let steps = reference.op_count() - start;
    assert!(report.changed() && steps > 5, "{steps}");
    let want = answers(&reference);
    let lost = universe()
        .iter()
        .zip(&want)
        .filter(|(k, got)| got.as_deref() != model.get(*k).map(Vec::as_slice))
        .count();
    assert!(lost > 0);

    for step in 1..=steps {
        for mode in [
            PowerLoss::DropUnsynced,
            PowerLoss::TornUnsynced { seed: step },
        ] {
            let fs = FaultFs::new();
            damaged_on(&fs);
            fs.power_loss_after(step, mode);
            // Cut short (an error) or not, if the step came after its end.
            let _ = repair(
                "/db",
                RepairOptions::new().options(options().file_system(fs.shared())),
            );
            fs.clear_faults();
            // Whatever the cut left, a second repair finishes the job.
            repair(
                "/db",
                RepairOptions::new().options(options().file_system(fs.shared())),
            )
            .unwrap_or_else(|e| panic!("step {step} {mode:?}: {e}"));
            assert_eq!(answers(&fs), want, "step {step} {mode:?}");
        }
    }
}
