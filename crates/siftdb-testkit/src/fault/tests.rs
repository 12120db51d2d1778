//! [`FaultFs`]'s unit tests: each power-loss mode against what it may and
//! may not keep, injected and persistent faults, dead processes' handles,
//! read faults and the space limit.
//! Must never: use a real file.

use std::collections::BTreeSet;

use super::*;

fn p(s: &str) -> PathBuf {
    PathBuf::from(s)
}

fn disk_with_dir() -> FaultFs {
    let fs = FaultFs::new();
    fs.create_dir_all(&p("/db")).unwrap();
    fs
}

fn write(fs: &FaultFs, path: &str, data: &[u8], sync: bool) {
    let mut f = fs.create(&p(path)).unwrap();
    f.append(data).unwrap();
    if sync {
        f.sync().unwrap();
    }
}

fn read(fs: &FaultFs, path: &str) -> Option<Vec<u8>> {
    fs.read_all(&p(path)).ok().map(|b| b.to_vec())
}

#[test]
fn reads_see_volatile_content_and_list_sees_live_entries() {
    let fs = disk_with_dir();
    write(&fs, "/db/a", b"hello", false);
    let mut f = fs.open_append(&p("/db/a")).unwrap();
    f.append(b" world").unwrap();
    assert_eq!(read(&fs, "/db/a").unwrap(), b"hello world");
    fs.create_dir_all(&p("/db/sub")).unwrap();
    assert_eq!(fs.list(&p("/db")).unwrap(), vec!["a", "sub"]);
    assert!(fs.exists(&p("/db/a")) && fs.exists(&p("/db")) && fs.is_dir(&p("/db")));
    assert!(!fs.is_dir(&p("/db/a")));
    assert!(fs.read_all(&p("/db/missing")).is_err());
    assert!(fs.create(&p("/nodir/x")).is_err());
}

#[test]
fn power_loss_keeps_only_synced_data_under_synced_names() {
    let fs = disk_with_dir();
    write(&fs, "/db/durable", b"kept", true);
    fs.sync_dir(&p("/db")).unwrap();
    let mut f = fs.open_append(&p("/db/durable")).unwrap();
    f.append(b" lost").unwrap();
    write(&fs, "/db/synced_data_only", b"data", true);
    write(&fs, "/db/nothing_synced", b"data", false);
    fs.power_loss(PowerLoss::DropUnsynced);
    assert_eq!(read(&fs, "/db/durable").unwrap(), b"kept");
    assert_eq!(read(&fs, "/db/synced_data_only"), None);
    assert_eq!(read(&fs, "/db/nothing_synced"), None);
    assert_eq!(fs.list(&p("/db")).unwrap(), vec!["durable"]);
    // The dead process's handle can no longer write.
    assert!(f.append(b"x").is_err());
    assert!(f.sync().is_err());
}

/// A hard link is a second name for the same data: it outlives the
/// first name's removal, refuses a taken name, and like any new name
/// is lost to a power cut unless its directory was synced.
#[test]
fn a_hard_link_names_the_same_data_and_needs_a_directory_sync() {
    let fs = disk_with_dir();
    fs.create_dir_all(&p("/other")).unwrap();
    write(&fs, "/db/a", b"data", true);
    fs.sync_dir(&p("/db")).unwrap();
    fs.hard_link(&p("/db/a"), &p("/other/kept")).unwrap();
    fs.hard_link(&p("/db/a"), &p("/other/lost")).unwrap();
    assert!(fs.hard_link(&p("/db/a"), &p("/other/kept")).is_err());
    assert!(fs.hard_link(&p("/db/missing"), &p("/other/x")).is_err());
    fs.remove(&p("/db/a")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    assert_eq!(read(&fs, "/other/kept").unwrap(), b"data");
    let mut f = fs.open_append(&p("/other/kept")).unwrap();
    f.append(b"+").unwrap();
    assert_eq!(read(&fs, "/other/lost").unwrap(), b"data+");
    f.sync().unwrap();
    drop(f);
    fs.remove(&p("/other/lost")).unwrap();
    fs.sync_dir(&p("/other")).unwrap();
    fs.hard_link(&p("/other/kept"), &p("/other/unsynced"))
        .unwrap();
    fs.power_loss(PowerLoss::DropUnsynced);
    assert_eq!(read(&fs, "/other/kept").unwrap(), b"data+");
    assert_eq!(read(&fs, "/other/unsynced"), None);
    assert_eq!(read(&fs, "/db/a"), None);
}

/// A directory's rename moves it and the directories under it, with
/// their files, durable at once; it refuses a target that exists.
#[test]
fn a_directory_rename_moves_the_tree_and_survives_a_power_loss() {
    let fs = disk_with_dir();
    fs.create_dir_all(&p("/db/tmp/sub")).unwrap();
    write(&fs, "/db/tmp/a", b"a", true);
    write(&fs, "/db/tmp/sub/b", b"b", true);
    fs.sync_dir(&p("/db/tmp")).unwrap();
    fs.sync_dir(&p("/db/tmp/sub")).unwrap();
    fs.create_dir_all(&p("/db/taken")).unwrap();
    assert!(fs.rename(&p("/db/tmp"), &p("/db/taken")).is_err());
    assert!(fs.rename(&p("/db/tmp"), &p("/db/tmp/sub/inside")).is_err());
    assert!(fs.rename(&p("/db/tmp"), &p("/nodir/x")).is_err());
    fs.rename(&p("/db/tmp"), &p("/db/done")).unwrap();
    assert!(!fs.exists(&p("/db/tmp")) && !fs.exists(&p("/db/tmp/a")));
    assert!(fs.is_dir(&p("/db/done/sub")));
    fs.power_loss(PowerLoss::DropUnsynced);
    assert_eq!(read(&fs, "/db/done/a").unwrap(), b"a");
    assert_eq!(read(&fs, "/db/done/sub/b").unwrap(), b"b");
    assert_eq!(fs.list(&p("/db/done")).unwrap(), vec!["a", "sub"]);
}

#[test]
fn unsynced_rename_and_remove_are_undone() {
    let fs = disk_with_dir();
    write(&fs, "/db/old", b"old", true);
    write(&fs, "/db/tmp", b"new", true);
    write(&fs, "/db/doomed", b"d", true);
    fs.sync_dir(&p("/db")).unwrap();
    fs.rename(&p("/db/tmp"), &p("/db/old")).unwrap();
    fs.remove(&p("/db/doomed")).unwrap();
    assert_eq!(read(&fs, "/db/old").unwrap(), b"new");
    assert_eq!(fs.list(&p("/db")).unwrap(), vec!["old"]);
    fs.power_loss(PowerLoss::DropUnsynced);
    assert_eq!(read(&fs, "/db/old").unwrap(), b"old");
    assert_eq!(read(&fs, "/db/tmp").unwrap(), b"new");
    assert_eq!(read(&fs, "/db/doomed").unwrap(), b"d");

    fs.rename(&p("/db/tmp"), &p("/db/old")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    fs.power_loss(PowerLoss::DropUnsynced);
    assert_eq!(read(&fs, "/db/old").unwrap(), b"new");
    assert_eq!(read(&fs, "/db/tmp"), None);
}

#[test]
fn torn_power_loss_keeps_prefixes_and_replays_by_seed() {
    let outcome = |seed: u64| {
        let fs = disk_with_dir();
        write(&fs, "/db/a", b"0123", true);
        fs.sync_dir(&p("/db")).unwrap();
        let mut f = fs.open_append(&p("/db/a")).unwrap();
        f.append(b"456789abcdef").unwrap();
        write(&fs, "/db/b", b"b", true);
        fs.rename(&p("/db/b"), &p("/db/c")).unwrap();
        fs.power_loss(PowerLoss::TornUnsynced { seed });
        (read(&fs, "/db/a").unwrap(), fs.list(&p("/db")).unwrap())
    };
    let mut lengths = BTreeSet::new();
    let mut listings = BTreeSet::new();
    for seed in 0..200 {
        let (a, names) = outcome(seed);
        assert!(b"0123456789abcdef".starts_with(&a) && a.len() >= 4, "{a:?}");
        lengths.insert(a.len());
        // Changes apply in order: never the rename without the creation.
        assert!(
            names == ["a"] || names == ["a", "b"] || names == ["a", "c"],
            "{names:?}"
        );
        listings.insert(names);
        assert_eq!(outcome(seed).0, a, "seed {seed} must replay");
    }
    assert!(lengths.contains(&4) && lengths.contains(&16) && lengths.len() > 5);
    assert_eq!(listings.len(), 3);
}

#[test]
fn reordered_power_loss_keeps_any_subset_of_directory_changes() {
    let mut listings = BTreeSet::new();
    for seed in 0..100 {
        let fs = disk_with_dir();
        write(&fs, "/db/first", b"1", true);
        write(&fs, "/db/second", b"2", true);
        fs.power_loss(PowerLoss::ReorderedUnsynced { seed });
        listings.insert(fs.list(&p("/db")).unwrap());
    }
    // Including the later change without the earlier one.
    assert_eq!(listings.len(), 4, "{listings:?}");
    assert!(listings.contains(&vec!["second".to_string()]));
}

#[test]
fn nth_operation_fails_once_or_persistently() {
    let fs = disk_with_dir();
    let start = fs.op_count();
    fs.fail_after(2, FaultMode::Once);
    let mut f = fs.create(&p("/db/a")).unwrap();
    let err = f.append(b"x").unwrap_err();
    assert!(err.to_string().contains("injected fault"), "{err}");
    f.append(b"y").unwrap();
    assert_eq!(read(&fs, "/db/a").unwrap(), b"y");
    assert_eq!(fs.op_count(), start + 4);
    assert_eq!(fs.faults_injected(), 1);

    fs.fail_after(1, FaultMode::Persistent);
    assert!(f.sync().is_err());
    assert!(fs.list(&p("/db")).is_err());
    assert!(fs.sync_dir(&p("/db")).is_err());
    fs.clear_faults();
    f.sync().unwrap();
    assert_eq!(fs.faults_injected(), 4);
}

#[test]
fn matching_faults_hit_only_their_operation_and_path() {
    let fs = disk_with_dir();
    let kind = std::io::ErrorKind::StorageFull;
    fs.fail_matching("create", ".sst", FaultMode::Once, kind);
    write(&fs, "/db/a.wal", b"log", true);
    let err = fs.create(&p("/db/1.sst")).err().unwrap();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == kind),
        "{err}"
    );
    write(&fs, "/db/2.sst", b"table", true);
    fs.fail_matching("append", "", FaultMode::Persistent, kind);
    let mut f = fs.create(&p("/db/3.sst")).unwrap();
    assert!(f.append(b"x").is_err());
    assert!(f.append(b"y").is_err());
    f.sync().unwrap();
    fs.clear_faults();
    f.append(b"z").unwrap();
    assert_eq!(read(&fs, "/db/3.sst").unwrap(), b"z");
    assert_eq!(fs.faults_injected(), 3);
}

#[test]
fn an_injected_panic_leaves_the_disk_usable() {
    let fs = disk_with_dir();
    fs.panic_matching("create", ".sst");
    write(&fs, "/db/a.wal", b"log", true);
    let other = fs.clone();
    let panicked = std::thread::spawn(move || other.create(&p("/db/1.sst")).map(|_| ()))
        .join()
        .unwrap_err();
    let message = panicked.downcast_ref::<String>().unwrap();
    assert!(message.contains("injected panic"), "{message}");
    write(&fs, "/db/1.sst", b"table", true);
    assert_eq!(read(&fs, "/db/1.sst").unwrap(), b"table");
}

#[test]
fn a_full_disk_writes_what_fits_and_removal_gives_space_back() {
    let fs = disk_with_dir();
    write(&fs, "/db/a", &[1; 100], true);
    assert_eq!(fs.used_bytes(), 100);
    fs.set_space_limit(Some(150));
    let mut f = fs.create(&p("/db/b")).unwrap();
    f.append(&[2; 30]).unwrap();
    let err = f.append(&[3; 30]).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull),
        "{err}"
    );
    assert_eq!(read(&fs, "/db/b").unwrap().len(), 50);
    assert!(f.append(&[4]).is_err());
    // Removed, even before the removal is durable: the space is back.
    fs.remove(&p("/db/a")).unwrap();
    f.append(&[4; 100]).unwrap();
    assert_eq!(fs.used_bytes(), 150);
    fs.set_space_limit(None);
    f.append(&[5; 1000]).unwrap();
}

#[test]
fn a_failed_append_can_tear() {
    let fs = disk_with_dir();
    let mut f = fs.create(&p("/db/a")).unwrap();
    fs.tear_failed_appends(true);
    fs.fail_after(1, FaultMode::Once);
    assert!(f.append(b"abcdef").is_err());
    assert_eq!(read(&fs, "/db/a").unwrap(), b"abc");
}

#[test]
fn power_loss_after_n_operations_kills_the_process() {
    let fs = disk_with_dir();
    let process = fs.for_process();
    fs.power_loss_after(3, PowerLoss::DropUnsynced);
    let mut f = process.create(&p("/db/a")).unwrap();
    f.append(b"x").unwrap();
    assert!(f.sync().is_err());
    assert_eq!(fs.power_losses(), 1);
    assert!(process.create(&p("/db/b")).is_err());
    assert_eq!(read(&fs, "/db/a"), None);
    let next = fs.for_process();
    write(&next, "/db/b", b"b", false);
    assert_eq!(read(&fs, "/db/b").unwrap(), b"b");
}

#[test]
fn locks_are_exclusive_and_die_with_the_power() {
    let fs = disk_with_dir();
    let process = fs.for_process();
    let lock = p("/db/LOCK");
    let held = process.lock(&lock).unwrap();
    assert!(matches!(fs.lock(&lock), Err(Error::Locked(_))));
    drop(held);
    let held = fs.for_process().lock(&lock).unwrap();
    fs.power_loss(PowerLoss::DropUnsynced);
    let again = fs.for_process().lock(&lock).unwrap();
    // The dead process's lock going away must not free the new one.
    drop(held);
    assert!(matches!(fs.lock(&lock), Err(Error::Locked(_))));
    drop(again);
    fs.lock(&lock).unwrap();
}

#[test]
fn a_killed_process_loses_nothing_it_wrote() {
    let fs = disk_with_dir();
    let process = fs.for_process();
    let mut f = process.create(&p("/db/a")).unwrap();
    f.append(b"unsynced").unwrap();
    fs.kill_process();
    assert!(f.append(b"more").is_err());
    assert_eq!(read(&fs, "/db/a").unwrap(), b"unsynced");
    fs.power_loss(PowerLoss::DropUnsynced);
    assert_eq!(read(&fs, "/db/a"), None);
}

#[test]
fn removed_files_are_collected_once_their_removal_is_durable() {
    let fs = disk_with_dir();
    for i in 0..10 {
        write(&fs, &format!("/db/{i}"), &[0u8; 1000], true);
        fs.sync_dir(&p("/db")).unwrap();
        fs.remove(&p(&format!("/db/{i}"))).unwrap();
        fs.sync_dir(&p("/db")).unwrap();
    }
    assert_eq!(fs.machine.disk.lock().inodes.len(), 0);
}

#[test]
fn positioned_reads_fail_on_their_own_plan_and_keep_removed_files() {
    let fs = disk_with_dir();
    write(&fs, "/db/t", b"0123456789", true);
    fs.sync_dir(&p("/db")).unwrap();
    let ops = fs.op_count();
    let file = fs.open_read(&p("/db/t")).unwrap();
    assert_eq!(file.len(), 10);
    let mut buf = [0u8; 4];
    file.read_exact_at(&mut buf, 3).unwrap();
    assert_eq!(&buf, b"3456");
    let err = file.read_exact_at(&mut buf, 8).unwrap_err();
    assert!(
        matches!(&err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::UnexpectedEof),
        "{err}"
    );
    assert_eq!(fs.op_count(), ops, "reads do not move the write-side count");
    assert_eq!(fs.read_op_count(), 3);

    fs.fail_reads_after(2, FaultMode::Once);
    file.read_exact_at(&mut buf, 0).unwrap();
    assert!(file.read_exact_at(&mut buf, 0).is_err());
    file.read_exact_at(&mut buf, 0).unwrap();
    fs.fail_reads_after(1, FaultMode::Persistent);
    assert!(fs.open_read(&p("/db/t")).is_err());
    assert!(file.read_exact_at(&mut buf, 0).is_err());
    fs.clear_faults();

    // Removed and made durable: still readable through the open file.
    fs.remove(&p("/db/t")).unwrap();
    fs.sync_dir(&p("/db")).unwrap();
    assert!(fs.open_read(&p("/db/t")).is_err());
    file.read_exact_at(&mut buf, 6).unwrap();
    assert_eq!(&buf, b"6789");
    drop(file);
    assert_eq!(fs.machine.disk.lock().inodes.len(), 0);

    // A process's readable file dies with the process.
    write(&fs, "/db/u", b"abc", true);
    let file = fs.for_process().open_read(&p("/db/u")).unwrap();
    fs.kill_process();
    assert!(file.read_exact_at(&mut [0u8; 1], 0).is_err());
}

#[test]
fn is_send_sync_and_a_file_system() {
    fn check<T: Send + Sync + Clone + FileSystem>() {}
    check::<FaultFs>();
}
