//! Every file kind siftdb writes, claiming the format version after this
//! build's (its checksum made to match, so nothing but the version is
//! wrong), is refused with `Error::UnsupportedVersion` naming the file, the
//! version found and the one this build reads — never read as this
//! version's bytes, never called damage (which would send open to the
//! manifest's copy or repair to a rebuild), never a panic. Tables, the log,
//! the manifest (and the keyspace settings it carries: they have no version
//! of their own), and backup metadata; the raft snapshot stream's test is
//! in `crates/siftdb-raft/tests/future_versions.rs`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;

use siftdb::backup::BackupEngine;
use siftdb::{Db, Error, KeyspaceOptions, Options};
use siftdb_testkit::files::files_ending;

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap())
}

/// `err` is `UnsupportedVersion` for `path` (`kind`, `found`, `supported`).
fn assert_refused(err: &Error, path: &Path, kind: &str, found: u64, supported: u64) {
    let Error::UnsupportedVersion {
        path: named,
        kind: named_kind,
        found: named_found,
        supported: named_supported,
    } = err
    else {
        panic!("not UnsupportedVersion: {err:?}");
    };
    assert_eq!(
        (named.as_path(), *named_kind, *named_found, *named_supported),
        (path, kind, found, supported),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("format version {found}")),
        "{err}"
    );
}

/// A closed database with one keyspace of stored settings, a table in
/// each keyspace and, unless `flushed`, records left in its log.
fn database(dir: &Path, flushed: bool) {
    let db = Db::open_with(dir, Options::default()).unwrap();
    let users = db
        .keyspace_with("users", KeyspaceOptions::new().block_size(8 << 10))
        .unwrap();
    db.put(b"k", b"v").unwrap();
    users.put(b"u", b"ann").unwrap();
    db.flush().unwrap();
    if !flushed {
        db.put(b"in-log", b"only").unwrap();
    }
    drop(users);
    db.close().unwrap();
}

/// The open paths an application has: read-write and read-only.
fn assert_opens_refused(dir: &Path, path: &Path, kind: &str, found: u64, supported: u64) {
    let err = Db::open_with(dir, Options::default()).unwrap_err();
    assert_refused(&err, path, kind, found, supported);
    let err = Db::open_read_only(dir).unwrap_err();
    assert_refused(&err, path, kind, found, supported);
}

/// `path` (a table) with its footer's version set to the next version
/// and the footer's CRC-32 made to match; the version it had. The footer
/// is the last 64 bytes: three handles, the version at 48, the CRC-32 (of
/// the bytes before it and the magic) at 52, the magic at 56.
fn bump_table(path: &Path) -> u32 {
    let mut bytes = std::fs::read(path).unwrap();
    let footer = bytes.len() - 64;
    let current = u32_at(&bytes, footer + 48);
    bytes[footer + 48..footer + 52].copy_from_slice(&(current + 1).to_le_bytes());
    let crc = {
        let mut hasher = crc32fast::Hasher::new();
        hasher.update(&bytes[footer..footer + 52]);
        hasher.update(&bytes[footer + 56..]);
        hasher.finalize()
    };
    bytes[footer + 52..footer + 56].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, &bytes).unwrap();
    current
}

#[test]
fn a_table_of_a_future_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    database(dir.path(), true);
    let table = files_ending(dir.path(), ".sst").pop().unwrap();
    let current = bump_table(&table);
    let (found, supported) = (u64::from(current) + 1, u64::from(current));
    assert_opens_refused(dir.path(), &table, "table", found, supported);
    let err = siftdb::repair(dir.path(), siftdb::RepairOptions::new()).unwrap_err();
    assert_refused(&err, &table, "table", found, supported);
}

/// A log's 20-byte header: magic, version at 4, log number, CRC-32 of
/// the 16 bytes before it.
#[test]
fn a_log_of_a_future_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    database(dir.path(), false);
    let log = files_ending(dir.path(), ".wal").pop().unwrap();
    let mut bytes = std::fs::read(&log).unwrap();
    let current = u32_at(&bytes, 4);
    let future = current + 1;
    bytes[4..8].copy_from_slice(&future.to_le_bytes());
    let crc = crc32fast::hash(&bytes[..16]);
    bytes[16..20].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(&log, &bytes).unwrap();

    let (found, supported) = (u64::from(future), u64::from(current));
    assert_opens_refused(dir.path(), &log, "write-ahead log", found, supported);
    let err = siftdb::repair(dir.path(), siftdb::RepairOptions::new()).unwrap_err();
    assert_refused(&err, &log, "write-ahead log", found, supported);
}

/// `path` (a manifest) with its version field (at 4) set to the next
/// version and its trailing CRC-32 made to match; the version it had.
fn bump_manifest(path: &Path) -> u32 {
    let mut bytes = std::fs::read(path).unwrap();
    let current = u32_at(&bytes, 4);
    bytes[4..8].copy_from_slice(&(current + 1).to_le_bytes());
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(path, &bytes).unwrap();
    current
}

/// The manifest, and with it the keyspace settings it carries (a
/// keyspace's settings are read only from a manifest whose version this
/// build reads). A future `MANIFEST` is refused even when its copy is of
/// this version: the copy is for damage, and a newer build's manifest is
/// not damaged. `siftdb repair` refuses it too rather than rebuild it.
#[test]
fn a_manifest_of_a_future_version_is_refused_with_its_keyspace_settings() {
    let dir = tempfile::tempdir().unwrap();
    database(dir.path(), true);
    let manifest = dir.path().join("MANIFEST");
    let current = bump_manifest(&manifest);
    let (found, supported) = (u64::from(current) + 1, u64::from(current));

    assert_opens_refused(dir.path(), &manifest, "manifest", found, supported);
    let err = siftdb::repair(dir.path(), siftdb::RepairOptions::new()).unwrap_err();
    assert_refused(&err, &manifest, "manifest", found, supported);
    let err = siftdb::internals::inspect::inspect_dir(dir.path()).unwrap_err();
    assert_refused(&err, &manifest, "manifest", found, supported);

    // Both of them newer: the same refusal, naming MANIFEST.
    bump_manifest(&dir.path().join("MANIFEST.copy"));
    assert_opens_refused(dir.path(), &manifest, "manifest", found, supported);
}

/// A backup's metadata: its first line names its version
/// (`siftdb-backup 1`), its last line is the CRC-32 of the lines before.
#[test]
fn backup_metadata_of_a_future_version_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.put(b"k", b"v").unwrap();
    let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    let info = backups.create(&db).unwrap();
    db.close().unwrap();

    let meta = dir
        .path()
        .join("backups")
        .join("meta")
        .join(info.id.to_string());
    let text = std::fs::read_to_string(&meta).unwrap();
    let (first, rest) = text.split_once('\n').unwrap();
    let current: u64 = first
        .strip_prefix("siftdb-backup ")
        .unwrap()
        .parse()
        .unwrap();
    let future = current + 1;
    let body_end = rest.trim_end_matches('\n').rfind('\n').unwrap() + 1;
    let body = format!("siftdb-backup {future}\n{}", &rest[..body_end]);
    let crc = crc32fast::hash(body.as_bytes());
    std::fs::write(&meta, format!("{body}crc32 {crc:08x}\n")).unwrap();

    let backups = BackupEngine::open_existing(dir.path().join("backups")).unwrap();
    let err = backups.verify(info.id).unwrap_err();
    assert_refused(&err, &meta, "backup metadata", future, current);
    let err = backups.list().unwrap_err();
    assert_refused(&err, &meta, "backup metadata", future, current);
    let err = backups
        .restore(info.id, dir.path().join("restored"))
        .unwrap_err();
    assert_refused(&err, &meta, "backup metadata", future, current);
    assert!(!dir.path().join("restored").exists());
}

/// `siftdb inspect`'s library side names the format version of every
/// versioned file of a database directory (the manifest and its copy,
/// each table, each log; none for the lock file), a future one too, and
/// of every backup metadata file.
#[test]
fn inspect_shows_the_format_version_of_each_file() {
    use siftdb::internals::backup_meta::inspect_backup_dir;
    use siftdb::internals::inspect::{inspect_dir, FileRole};

    let dir = tempfile::tempdir().unwrap();
    let db_dir = dir.path().join("db");
    database(&db_dir, false);
    let version_in = |path: &Path, at: usize| {
        let bytes = std::fs::read(path).unwrap();
        let at = if at == usize::MAX {
            bytes.len() - 16
        } else {
            at
        };
        u64::from(u32_at(&bytes, at))
    };
    let summary = inspect_dir(&db_dir).unwrap();
    let mut kinds = Vec::new();
    for f in &summary.files {
        let path = db_dir.join(&f.name);
        let expected = match f.role {
            FileRole::Manifest | FileRole::ManifestCopy => Some(version_in(&path, 4)),
            FileRole::LiveTable { .. } => Some(version_in(&path, usize::MAX)),
            FileRole::LiveLog | FileRole::ObsoleteLog => Some(version_in(&path, 4)),
            _ => None,
        };
        assert_eq!(f.format_version, expected, "{f:?}");
        kinds.push(f.role);
    }
    for role in [
        FileRole::Manifest,
        FileRole::ManifestCopy,
        FileRole::LiveLog,
    ] {
        assert!(kinds.contains(&role), "{role:?} in {kinds:?}");
    }

    // A table of a future version: shown with it, the table refused.
    let table = files_ending(&db_dir, ".sst").pop().unwrap();
    let current = bump_table(&table);
    let name = table.file_name().unwrap().to_string_lossy().into_owned();
    let summary = inspect_dir(&db_dir).unwrap();
    let file = summary.files.iter().find(|f| f.name == name).unwrap();
    assert_eq!(file.format_version, Some(u64::from(current) + 1));
    let live = summary
        .tables
        .iter()
        .find(|t| format!("{:06}.sst", t.record.file_number) == name)
        .unwrap();
    let reason = live.table.as_ref().unwrap_err();
    assert!(
        reason.contains(&format!("format version {}", current + 1)),
        "{reason}"
    );

    let db = Db::open(dir.path().join("db2")).unwrap();
    let backups = BackupEngine::open(dir.path().join("backups")).unwrap();
    let info = backups.create(&db).unwrap();
    let metas = inspect_backup_dir(&dir.path().join("backups")).unwrap();
    assert_eq!(metas.len(), 1);
    assert_eq!(metas[0].name, info.id.to_string());
    assert_eq!(metas[0].format_version, Some(1));
    assert_eq!(metas[0].backup.as_ref().unwrap(), &info);
}
