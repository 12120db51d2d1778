//! Another engine's directory is never taken over: `siftdb repair`, `put`,
//! `get` and `verify` on a directory of RocksDB's and LevelDB's file names
//! (`000009.sst` among them, a name siftdb parses as one of its tables)
//! each exit non-zero with one line of error and leave it byte-identical —
//! no file changed, moved or created (not even `LOCK`, nor `lost/`).
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Command, Output};

/// The files another engine leaves: RocksDB's and LevelDB's names.
const FOREIGN: [(&str, usize); 9] = [
    ("000009.sst", 8192),
    ("000004.log", 3000),
    ("000005.ldb", 4096),
    ("CURRENT", 16),
    ("MANIFEST-000005", 700),
    ("IDENTITY", 36),
    ("LOCK", 0),
    ("LOG", 1500),
    ("OPTIONS-000007", 6000),
];

/// Every entry below `dir`, directories included (as `name/`), with the
/// bytes of each file.
fn contents(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut pending = vec![(dir.to_path_buf(), String::new())];
    while let Some((at, prefix)) = pending.pop() {
        for entry in std::fs::read_dir(&at).unwrap() {
            let entry = entry.unwrap();
            let name = format!("{prefix}{}", entry.file_name().to_string_lossy());
            if entry.file_type().unwrap().is_dir() {
                out.insert(format!("{name}/"), Vec::new());
                pending.push((entry.path(), format!("{name}/")));
            } else {
                out.insert(name, std::fs::read(entry.path()).unwrap());
            }
        }
    }
    out
}

/// SplitMix64: the bytes of the foreign files.
fn random_bytes(seed: &mut u64, len: usize) -> Vec<u8> {
    (0..len)
        .map(|_| {
            *seed = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = *seed;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            (z ^ (z >> 31)).to_le_bytes()[0]
        })
        .collect()
}

fn siftdb(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_siftdb"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn another_engines_directory_is_left_byte_identical_by_every_command() {
    for seed in [1u64, 2, 3] {
        let dir = tempfile::tempdir().unwrap();
        let mut state = seed;
        for (name, len) in FOREIGN {
            std::fs::write(dir.path().join(name), random_bytes(&mut state, len)).unwrap();
        }
        let before = contents(dir.path());
        assert_eq!(before.len(), FOREIGN.len());
        let path = dir.path().to_str().unwrap();
        let commands: [&[&str]; 6] = [
            &["repair", path],
            &["repair", "--dry-run", path],
            &["put", path, "k", "v"],
            &["get", path, "k"],
            &["verify", path],
            &["delete", path, "k"],
        ];
        for args in commands {
            let out = siftdb(args);
            let stderr = String::from_utf8_lossy(&out.stderr);
            let what = format!("siftdb {args:?}: {stderr}");
            assert_ne!(out.status.code(), Some(0), "{what}");
            assert!(out.status.code().is_some(), "killed by a signal: {what}");
            assert_eq!(stderr.lines().count(), 1, "{what}");
            assert!(stderr.starts_with("siftdb: error: "), "{what}");
            assert!(stderr.contains("not a siftdb database"), "{what}");
            assert!(!stderr.contains("panicked"), "{what}");
            assert!(out.stdout.is_empty(), "{what}");
            let after = contents(dir.path());
            assert_eq!(
                after.keys().collect::<Vec<_>>(),
                before.keys().collect::<Vec<_>>(),
                "{what}"
            );
            assert!(after == before, "a file's bytes changed: {what}");
        }
    }
}

#[test]
fn the_same_directory_without_a_lock_file_gets_none() {
    let dir = tempfile::tempdir().unwrap();
    let mut state = 7;
    for (name, len) in FOREIGN.iter().filter(|(n, _)| *n != "LOCK") {
        std::fs::write(dir.path().join(name), random_bytes(&mut state, *len)).unwrap();
    }
    let before = contents(dir.path());
    let path = dir.path().to_str().unwrap();
    for args in [
        &["repair", path][..],
        &["put", path, "k", "v"],
        &["get", path, "k"],
        &["verify", path],
    ] {
        let out = siftdb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            contents(dir.path()) == before,
            "{args:?} changed the directory"
        );
    }
}
