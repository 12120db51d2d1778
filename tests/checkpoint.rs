//! Checkpoints of a live database: taken while 4 threads write, flush and
//! compact in 3 keyspaces, each opens and equals, key by key in every
//! keyspace, a snapshot at its sequence number; the live database goes on
//! unaffected. And under SIGKILL: a child process takes checkpoints while
//! writing, the parent kills it at a random moment; every checkpoint
//! directory then either opens whole or is refused.
//!
//! The child is this test binary run again with `CHILD_ENV` set: it then
//! runs only `child_process`.
#![expect(
    clippy::unwrap_used,
    reason = "test helpers outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use siftdb::{Db, DbIterator, Options, Snapshot, WriteBatch};
use siftdb_testkit::SplitMix64;

/// Set (to the parent directory of the database) in a child process.
const CHILD_ENV: &str = "SIFTDB_CHECKPOINT_CRASH_CHILD";
const KEYSPACES: [&str; 3] = ["default", "users", "orders"];

fn options() -> Options {
    // Small memtables: rotations, flushes and compactions while it runs.
    siftdb_testkit::busy_tree_options()
}

type Contents = BTreeMap<Bytes, Bytes>;

fn collect(iter: DbIterator) -> Contents {
    iter.collect::<siftdb::Result<_>>().unwrap()
}

/// Every keyspace of `db`, in `KEYSPACES` order.
fn contents(db: &Db) -> Vec<Contents> {
    KEYSPACES
        .iter()
        .map(|name| collect(db.keyspace(name).unwrap().iter()))
        .collect()
}

/// Every keyspace as `snapshot` (of `db`) sees it.
fn snapshot_contents(db: &Db, snapshot: &Snapshot) -> Vec<Contents> {
    KEYSPACES
        .iter()
        .map(|name| collect(snapshot.iter_in(&db.keyspace(name).unwrap())))
        .collect()
}

/// Writes batches across the keyspaces (puts, deletes, an occasional range
/// delete), flushing and compacting now and then, until `stop`.
fn writer(db: &Db, thread: u64, stop: &AtomicBool) -> u64 {
    let spaces: Vec<_> = KEYSPACES.iter().map(|n| db.keyspace(n).unwrap()).collect();
    let mut rng = SplitMix64::new(0x636b_7074 + thread);
    let mut i = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let mut batch = WriteBatch::new();
        for space in &spaces {
            let key = format!("k{:04}", rng.next() % 500);
            match rng.next() % 10 {
                0 => batch.delete_in(space, &key),
                1 => {
                    let other = format!("k{:04}", rng.next() % 500);
                    let (lo, hi) = if other < key {
                        (other, key)
                    } else {
                        (key, other)
                    };
                    batch.delete_range_in(space, lo.as_str()..hi.as_str());
                }
                _ => batch.put_in(space, &key, format!("t{thread}-{i}-{}", "x".repeat(40))),
            }
        }
        db.write(batch).unwrap();
        match i % 400 {
            100 if thread == 0 => db.flush().unwrap(),
            300 if thread == 1 => db.compact().unwrap(),
            _ => {}
        }
        i += 1;
    }
    i
}

#[test]
fn checkpoints_taken_under_writes_equal_a_snapshot_at_their_sequence() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open_with(dir.path().join("db"), options()).unwrap());
    for name in KEYSPACES {
        db.keyspace(name).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || writer(&db, t, &stop))
        })
        .collect();
    let mut checkpoints = Vec::new();
    for round in 0..6 {
        std::thread::sleep(std::time::Duration::from_millis(150));
        let target = dir.path().join(format!("ckpt{round}"));
        let (info, snapshot) = db.checkpoint_with_snapshot(&target).unwrap();
        assert_eq!(info.sequence, snapshot.sequence());
        assert_eq!(info.dir, target);
        assert!(!dir
            .path()
            .join(format!("ckpt{round}.checkpoint-tmp"))
            .exists());
        checkpoints.push((info, snapshot_contents(&db, &snapshot)));
    }
    stop.store(true, Ordering::Relaxed);
    let written: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(written > 0);
    // The live database is unaffected: a snapshot now equals a reopen.
    let live = contents(&db);
    let before: Vec<_> = checkpoints.iter().map(|(i, _)| i.sequence).collect();
    assert!(before.windows(2).all(|w| w[0] <= w[1]), "{before:?}");
    let mut linked = 0;
    for (info, expected) in &checkpoints {
        let copy = Db::open_with(&info.dir, options()).unwrap();
        assert_eq!(copy.keyspaces(), KEYSPACES, "{info:?}");
        assert_eq!(
            copy.stats().last_sequence,
            info.sequence,
            "checkpoint at {} replays past it",
            info.sequence
        );
        let got = contents(&copy);
        for ((name, got), want) in KEYSPACES.iter().zip(&got).zip(expected) {
            assert_eq!(
                got.len(),
                want.len(),
                "keyspace {name} at {}",
                info.sequence
            );
            for ((gk, gv), (wk, wv)) in got.iter().zip(want) {
                assert_eq!((gk, gv), (wk, wv), "keyspace {name} at {}", info.sequence);
            }
        }
        // The copy is a database of its own: it takes writes and compacts.
        copy.put("after", "checkpoint").unwrap();
        copy.compact().unwrap();
        linked += info.tables_linked;
    }
    assert!(linked > 0, "no table was hard-linked: {checkpoints:?}");
    assert_eq!(contents(&db), live);
    drop(db);
    let reopened = Db::open_with(dir.path().join("db"), options()).unwrap();
    assert_eq!(contents(&reopened), live);
}

#[test]
fn a_checkpoint_into_an_existing_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.put("k", "v").unwrap();
    std::fs::create_dir(dir.path().join("taken")).unwrap();
    assert!(db.checkpoint(dir.path().join("taken")).is_err());
    // A leftover without the marker is not ours to remove.
    std::fs::create_dir(dir.path().join("other.checkpoint-tmp")).unwrap();
    assert!(db.checkpoint(dir.path().join("other")).is_err());
    // One with the marker is removed and replaced.
    let stale = dir.path().join("fresh.checkpoint-tmp");
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("CHECKPOINT-PARTIAL"), b"").unwrap();
    std::fs::write(stale.join("000007.sst"), b"junk").unwrap();
    assert!(Db::open(&stale).is_err(), "a partial checkpoint opened");
    let info = db.checkpoint(dir.path().join("fresh")).unwrap();
    assert!(!stale.exists());
    let copy = Db::open(&info.dir).unwrap();
    assert_eq!(copy.get("k").unwrap().as_deref(), Some(&b"v"[..]));
}

/// The body of one child process (does nothing in the parent): writes and
/// takes checkpoints `c0`, `c1`, ... until killed, printing each finished
/// one with its sequence number and the expected keyspace contents' sizes.
#[test]
fn child_process() {
    let Ok(parent) = std::env::var(CHILD_ENV) else {
        return;
    };
    let parent = Path::new(&parent);
    let db = Arc::new(Db::open_with(parent.join("db"), options()).unwrap());
    for name in KEYSPACES {
        db.keyspace(name).unwrap();
    }
    let stop = Arc::new(AtomicBool::new(false));
    let threads: Vec<_> = (0..2)
        .map(|t| {
            let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
            std::thread::spawn(move || writer(&db, t, &stop))
        })
        .collect();
    for n in 0.. {
        let (info, snapshot) = db
            .checkpoint_with_snapshot(parent.join(format!("c{n}")))
            .unwrap();
        let digest: Vec<String> = snapshot_contents(&db, &snapshot)
            .iter()
            .map(digest)
            .collect();
        println!("done c{n} {} {}", info.sequence, digest.join(","));
    }
    drop(threads);
}

/// A short fingerprint of a keyspace's contents.
fn digest(contents: &Contents) -> String {
    let mut h = 0xcbf2_9ce4_8422_2325u64;
    for (k, v) in contents {
        for b in k.iter().chain(b"=").chain(v.iter()).chain(b";") {
            h = (h ^ u64::from(*b)).wrapping_mul(0x100_0000_01b3);
        }
    }
    format!("{}:{h:016x}", contents.len())
}

#[test]
fn a_killed_checkpoint_leaves_nothing_that_opens_in_part() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let mut rng = SplitMix64::new(0x6b69_6c6c_636b_7074);
    let mut refused = 0;
    let mut complete = 0;
    for _round in 0..6 {
        let dir = tempfile::tempdir().unwrap();
        let mut child =
            siftdb_testkit::files::spawn_test_child("child_process", CHILD_ENV, dir.path());
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let reader = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        // Wait for a few checkpoints, then kill at a random moment.
        let mut done: BTreeMap<String, String> = BTreeMap::new();
        while done.len() < 2 {
            let line = rx.recv_timeout(std::time::Duration::from_secs(60)).unwrap();
            if let Some((name, rest)) = line.strip_prefix("done ").and_then(|l| l.split_once(' ')) {
                done.insert(name.to_string(), rest.to_string());
            }
        }
        std::thread::sleep(std::time::Duration::from_millis(rng.next() % 60));
        child.kill().unwrap();
        child.wait().unwrap();
        reader.join().unwrap();
        while let Ok(line) = rx.try_recv() {
            if let Some((name, rest)) = line.strip_prefix("done ").and_then(|l| l.split_once(' ')) {
                done.insert(name.to_string(), rest.to_string());
            }
        }
        for name in std::fs::read_dir(dir.path()).unwrap() {
            let name = name.unwrap().file_name().into_string().unwrap();
            if name == "db" {
                continue;
            }
            let path = dir.path().join(&name);
            if let Some(base) = name.strip_suffix(".checkpoint-tmp") {
                // Unfinished: refused, and never reported done.
                assert!(!done.contains_key(base), "{name} reported done");
                if std::fs::read_dir(&path).unwrap().next().is_none() {
                    // Killed between the directory's creation and its
                    // marker's: an empty directory, no database at all.
                    refused += 1;
                } else if Db::open_with(&path, options()).is_ok() {
                    // Only possible between the marker's removal and the
                    // rename: then it is whole (checked below as if renamed).
                    check_whole(&path, None);
                    complete += 1;
                } else {
                    refused += 1;
                }
                continue;
            }
            check_whole(&path, done.get(&name).map(String::as_str));
            complete += 1;
        }
    }
    assert!(complete > 0);
    println!("{complete} complete checkpoints, {refused} refused partial ones");
}

/// A finished checkpoint opens with every keyspace; when the child
/// reported it (`expected` is "SEQ DIGESTS"), it holds exactly that state.
fn check_whole(path: &Path, expected: Option<&str>) {
    let db = Db::open_with(path, options()).unwrap();
    assert_eq!(db.keyspaces(), KEYSPACES, "{}", path.display());
    if let Some(expected) = expected {
        let (seq, digests) = expected.split_once(' ').unwrap();
        assert_eq!(db.stats().last_sequence.to_string(), seq);
        let got: Vec<String> = contents(&db).iter().map(digest).collect();
        assert_eq!(got.join(","), digests, "{}", path.display());
    }
}
