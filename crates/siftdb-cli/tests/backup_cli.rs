//! `siftdb backup` on what is not there: `list` and `verify` of a missing
//! backup directory fail with one clear line and a non-zero exit and create
//! nothing; `verify BACKUP_DIR ID` of a backup that does not exist says so
//! (not "DAMAGED") and exits non-zero; `restore` and `purge` of a missing
//! directory create nothing either.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::path::Path;
use std::process::{Command, Output};

fn siftdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_siftdb"))
        .args(args)
        .output()
        .unwrap()
}

fn both(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn arg(path: &Path) -> &str {
    path.to_str().unwrap()
}

#[test]
fn list_verify_restore_and_purge_of_a_missing_backup_directory_fail_and_create_nothing() {
    let root = tempfile::tempdir().unwrap();
    let typo = root.path().join("typo_dir");
    let restored = root.path().join("restored");
    for args in [
        vec!["backup", "list", arg(&typo)],
        vec!["backup", "verify", arg(&typo)],
        vec!["backup", "verify", arg(&typo), "1"],
        vec!["backup", "restore", arg(&typo), "1", arg(&restored)],
        vec!["backup", "purge", arg(&typo), "--keep", "1"],
    ] {
        let out = siftdb(&args);
        let said = both(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {said}");
        assert!(
            said.contains("typo_dir") && said.contains("no backup directory"),
            "{args:?}: {said}"
        );
        assert!(!typo.exists(), "{args:?} created {}", typo.display());
        assert!(
            !restored.exists(),
            "{args:?} created {}",
            restored.display()
        );
    }
}

#[test]
fn verify_of_a_backup_that_does_not_exist_says_so() {
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("db");
    let backups = root.path().join("bk");
    let out = siftdb(&["put", arg(&db), "k", "v"]);
    assert!(out.status.success(), "{}", both(&out));
    let out = siftdb(&["backup", "create", arg(&db), arg(&backups)]);
    assert!(out.status.success(), "{}", both(&out));

    let out = siftdb(&["backup", "verify", arg(&backups), "99"]);
    let said = both(&out);
    assert_eq!(out.status.code(), Some(2), "{said}");
    assert!(said.contains("no backup 99"), "{said}");
    assert!(!said.contains("DAMAGED"), "{said}");

    let out = siftdb(&["backup", "verify", arg(&backups), "1"]);
    assert!(out.status.success(), "{}", both(&out));
}
