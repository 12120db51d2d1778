//! Power loss under Windows' durability rules, simulated on Linux: the
//! in-memory [`FaultFs`] with [`Durability::WindowsWriteThrough`], where a
//! directory sync does nothing (Windows has none; `OsFileSystem::sync_dir`
//! is a no-op there) and what makes a directory change durable is a rename
//! with `MOVEFILE_WRITE_THROUGH` or a file's flush, each committing NTFS's
//! journal up to itself.
//!
//! The guarantees checked, at a power loss before every step in turn:
//! - the manifest switch (`MANIFEST.tmp` written, synced, renamed over
//!   `MANIFEST.copy` and then `MANIFEST`) leaves the old manifest or the
//!   new one, never none and never a damaged one, and the copy is never
//!   older; once the switch returned, the new one stays;
//! - a database with `sync_writes(true)` opens again and holds every
//!   acknowledged write, through flushes and compactions.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;

use siftdb::internals::filename::table_file_name;
use siftdb::internals::fs::FileSystem;
use siftdb::internals::key::{internal_key, SeqNo, ValueKind};
use siftdb::internals::manifest::{
    read_manifest, read_manifest_copy, write_manifest, KeyspaceRecord, KeyspaceSettings,
    ManifestState, TableRecord,
};
use siftdb::{Db, Options};
use siftdb_testkit::{Durability, FaultFs, PowerLoss};

const DB: &str = "/db";

fn windows_disk() -> FaultFs {
    FaultFs::with_durability(Durability::WindowsWriteThrough)
}

fn mode_for(choice: u64, seed: u64) -> PowerLoss {
    match choice % 3 {
        0 => PowerLoss::DropUnsynced,
        1 => PowerLoss::TornUnsynced { seed },
        _ => PowerLoss::ReorderedUnsynced { seed },
    }
}

/// A manifest naming tables 3 and 7, and 12 when `with_12`.
fn manifest(with_12: bool) -> ManifestState {
    let table = |level: u32, number: u64, low: &[u8], high: &[u8]| TableRecord {
        keyspace: 0,
        level,
        file_number: number,
        file_size: 4096 * number,
        entries: 10 * number,
        smallest: internal_key(low, SeqNo(5), ValueKind::Put),
        largest: internal_key(high, SeqNo(2), ValueKind::Delete),
        min_seq: SeqNo(2),
        max_seq: SeqNo(5 + number),
    };
    let mut tables = vec![table(1, 7, b"b", b"b"), table(2, 3, b"", b"zz")];
    if with_12 {
        tables.insert(0, table(0, 12, b"a", b"m"));
    }
    ManifestState {
        next_file_number: 20,
        last_sequence: SeqNo(if with_12 { 1000 } else { 900 }),
        log_number: 19,
        closed_log: None,
        next_keyspace_id: 1,
        keyspaces: vec![KeyspaceRecord {
            id: 0,
            name: "default".to_string(),
            log_number: 19,
            settings: KeyspaceSettings::default(),
        }],
        tables,
        blob_files: Vec::new(),
    }
}

/// A disk holding tables 3 and 7 and the manifest naming them, then table
/// 12 (created and synced, as a flush leaves it before the switch).
fn disk_before_the_switch() -> FaultFs {
    let fs = windows_disk();
    let dir = Path::new(DB);
    fs.create_dir_all(dir).unwrap();
    let create = |number: u64| {
        let mut f = fs.create(&dir.join(table_file_name(number))).unwrap();
        f.append(b"table").unwrap();
        f.sync().unwrap();
    };
    create(3);
    create(7);
    write_manifest(&fs, dir, &manifest(false)).unwrap();
    create(12);
    fs
}

/// Counted operations of one whole switch (the copy's six steps, then the
/// manifest's).
fn steps_of_a_switch() -> u64 {
    let fs = disk_before_the_switch();
    let before = fs.op_count();
    write_manifest(&fs, Path::new(DB), &manifest(true)).unwrap();
    fs.op_count() - before
}

#[test]
fn a_power_loss_at_every_step_of_the_switch_leaves_the_old_or_the_new_manifest() {
    let dir = Path::new(DB);
    let steps = steps_of_a_switch();
    assert!(steps >= 10, "the switch took only {steps} operations");
    let (old, new) = (manifest(false), manifest(true));
    let (mut kept_old, mut kept_new) = (0, 0);
    for seed in 0..48 {
        for n in 1..=steps + 2 {
            let context = format!("seed {seed}, power lost before step {n} of {steps}");
            let fs = disk_before_the_switch();
            fs.power_loss_after(n, mode_for(seed, seed ^ n));
            let switched = write_manifest(&fs.for_process(), dir, &new);
            fs.clear_faults();
            if fs.power_losses() == 0 {
                assert!(switched.is_ok(), "{context}: {switched:?}");
                fs.power_loss(mode_for(seed, seed ^ n));
            }
            let durable = read_manifest(&fs, dir)
                .unwrap_or_else(|e| panic!("{context}: the manifest does not read: {e}"))
                .unwrap_or_else(|| panic!("{context}: no manifest at all"));
            let copy = read_manifest_copy(&fs, dir)
                .unwrap_or_else(|e| panic!("{context}: the copy does not read: {e}"));
            if durable == new {
                kept_new += 1;
                assert_eq!(copy, Some(new.clone()), "{context}: the copy fell behind");
            } else {
                assert_eq!(
                    durable, old,
                    "{context}: neither the old nor the new manifest"
                );
                kept_old += 1;
                assert!(
                    copy == Some(old.clone()) || copy == Some(new.clone()),
                    "{context}: the copy is neither"
                );
            }
            if switched.is_ok() {
                assert_eq!(
                    durable, new,
                    "{context}: the switch returned, then was undone"
                );
            }
            for table in &durable.tables {
                let name = table_file_name(table.file_number);
                assert!(
                    fs.exists(&dir.join(&name)),
                    "{context}: the manifest names {name}, which is gone"
                );
            }
        }
    }
    assert!(
        kept_old > 48 && kept_new > 48,
        "{kept_old} old, {kept_new} new"
    );
}

fn db_options(fs: &FaultFs) -> Options {
    Options::default()
        .file_system(fs.shared())
        .sync_writes(true)
        .memtable_bytes(8 << 10)
        .block_size(512)
        .level0_compaction_trigger(2)
        .level0_stop_writes(4)
        .level1_bytes(16 << 10)
        .table_target_bytes(8 << 10)
}

fn key(i: usize) -> Vec<u8> {
    format!("k{:03}", i % 150).into_bytes()
}

fn value(i: usize) -> Vec<u8> {
    let mut v = format!("v{i}:").into_bytes();
    v.resize(40 + (i * 37) % 160, b'x');
    v
}

const WRITES: usize = 400;

/// Writes until the power goes (a flush and a compaction on the way);
/// returns the writes acknowledged.
fn write_until_power_loss(fs: &FaultFs) -> usize {
    let Ok(db) = Db::open_with(DB, db_options(fs)) else {
        return 0;
    };
    let mut acked = 0;
    for i in 0..WRITES {
        if db.put(key(i), value(i)).is_err() {
            break;
        }
        acked = i + 1;
        let chore = match i % 150 {
            60 => db.flush(),
            140 => db.compact(),
            _ => Ok(()),
        };
        if chore.is_err() {
            break;
        }
    }
    drop(db);
    acked
}

#[test]
fn acknowledged_writes_survive_a_power_loss_at_every_operation() {
    let clean = windows_disk();
    assert_eq!(write_until_power_loss(&clean), WRITES);
    let span = clean.op_count() + 5;
    let mut rounds = 0;
    for crash_at in (1..=span).step_by(3) {
        let context = format!("power lost before operation {crash_at} of {span}");
        let fs = windows_disk();
        let mode = mode_for(crash_at, crash_at);
        fs.power_loss_after(crash_at, mode);
        let acked = write_until_power_loss(&fs);
        fs.clear_faults();
        if fs.power_losses() == 0 {
            fs.power_loss(mode);
        }
        let db = Db::open_with(DB, db_options(&fs))
            .unwrap_or_else(|e| panic!("{context}: reopen failed: {e}"));
        // The newest acknowledged write of each key is there (the write in
        // flight may have landed too: then its value, never an older one).
        for i in acked.saturating_sub(150)..acked {
            let got = db.get(key(i)).unwrap();
            let overwritten_in_flight = i + 150 == acked && acked < WRITES;
            if overwritten_in_flight && got.as_deref() == Some(&value(acked)[..]) {
                continue;
            }
            assert_eq!(
                got.as_deref(),
                Some(&value(i)[..]),
                "{context}: write {i} of {acked} acknowledged"
            );
        }
        rounds += 1;
    }
    assert!(rounds > 100, "{rounds} rounds");
}
