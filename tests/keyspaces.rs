//! Keyspaces: a model test (a `BTreeMap` per keyspace) over random puts,
//! deletes and cross-keyspace batches in three keyspaces, with flushes,
//! compactions, reopens, drops and recreations, and snapshots checked later
//! by forward, reverse and mixed-direction scans, `get` and `multi_get`;
//! bad input (names, dropped handles, the default keyspace).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;

use proptest::prelude::*;
use siftdb::{Db, DbIterator, Error, Keyspace, Options, Snapshot, WriteBatch};

/// The keyspaces of the model; index 0 is the default one.
const NAMES: [&str; 3] = ["default", "users", "events.v2"];

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

#[derive(Debug, Clone)]
enum Op {
    Put(usize, u8, Vec<u8>),
    Delete(usize, u8),
    /// `Keyspace::delete_range(key(a)..key(b))` (reversed: refused).
    DeleteRange(usize, u8, u8),
    /// One batch across keyspaces: (keyspace, key, what).
    Batch(Vec<(usize, u8, Write)>),
    Get(usize, u8),
    MultiGet(usize, Vec<u8>),
    Scan(usize, u8, u8, Direction),
    Snapshot,
    CheckSnapshots,
    Flush,
    Compact,
    /// `Keyspace::compact` of one keyspace.
    CompactKeyspace(usize),
    /// `Keyspace::compact_range` of one keyspace, from one key to another
    /// (excluded).
    CompactRange(usize, u8, u8),
    Reopen,
    /// Drops keyspace 1 or 2 and creates it again, empty.
    DropAndRecreate(usize),
}

#[derive(Debug, Clone)]
enum Write {
    Put(Vec<u8>),
    Delete,
    /// A range delete from the key to `key(end)`.
    DeleteRange(u8),
}

#[derive(Debug, Clone, Copy)]
enum Direction {
    Forward,
    Reverse,
    /// `next` and `next_back` alternating by the pattern's bits.
    Mixed(u32),
}

fn key(k: u8) -> Vec<u8> {
    format!("key{:02}", k % 48).into_bytes()
}

fn op() -> impl Strategy<Value = Op> {
    let value = proptest::collection::vec(any::<u8>(), 0..200);
    let ks = 0usize..3;
    let direction = prop_oneof![
        Just(Direction::Forward),
        Just(Direction::Reverse),
        any::<u32>().prop_map(Direction::Mixed),
    ];
    prop_oneof![
        8 => (ks.clone(), any::<u8>(), value.clone()).prop_map(|(s, k, v)| Op::Put(s, k, v)),
        2 => (ks.clone(), any::<u8>()).prop_map(|(s, k)| Op::Delete(s, k)),
        1 => (ks.clone(), any::<u8>(), any::<u8>()).prop_map(|(s, a, b)| Op::DeleteRange(s, a, b)),
        4 => proptest::collection::vec(
            (
                ks.clone(),
                any::<u8>(),
                prop_oneof![
                    4 => value.prop_map(Write::Put),
                    1 => Just(Write::Delete),
                    1 => any::<u8>().prop_map(Write::DeleteRange),
                ],
            ),
            0..8
        )
        .prop_map(Op::Batch),
        3 => (ks.clone(), any::<u8>()).prop_map(|(s, k)| Op::Get(s, k)),
        2 => (ks.clone(), proptest::collection::vec(any::<u8>(), 0..16))
            .prop_map(|(s, k)| Op::MultiGet(s, k)),
        2 => (ks.clone(), any::<u8>(), any::<u8>(), direction)
            .prop_map(|(s, a, b, d)| Op::Scan(s, a, b, d)),
        1 => Just(Op::Snapshot),
        1 => Just(Op::CheckSnapshots),
        1 => Just(Op::Flush),
        1 => Just(Op::Compact),
        1 => ks.clone().prop_map(Op::CompactKeyspace),
        2 => (ks.clone(), any::<u8>(), any::<u8>()).prop_map(|(s, a, b)| Op::CompactRange(s, a, b)),
        1 => Just(Op::Reopen),
        1 => (1usize..3).prop_map(Op::DropAndRecreate),
    ]
}

fn options() -> Options {
    // Small memtables: rotations (one keyspace's, sealing the others that
    // span two logs), flushes and compactions in every run; a budget below
    // the three keyspaces' memtables together seals the largest too.
    Options::default()
        .memtable_bytes(4096)
        .total_memtable_bytes(8192)
        .block_size(256)
        .level0_compaction_trigger(2)
        .level1_bytes(8192)
        .table_target_bytes(4096)
}

struct Under {
    db: Db,
    handles: Vec<Keyspace>,
}

impl Under {
    fn open(dir: &std::path::Path) -> Under {
        let db = Db::open_with(dir, options()).unwrap();
        let handles = NAMES.iter().map(|n| db.keyspace(n).unwrap()).collect();
        Under { db, handles }
    }
}

fn collect(iter: DbIterator, direction: Direction) -> Vec<(Vec<u8>, Vec<u8>)> {
    let entry = |r: siftdb::Result<(bytes::Bytes, bytes::Bytes)>| {
        let (k, v) = r.unwrap();
        (k.to_vec(), v.to_vec())
    };
    match direction {
        Direction::Forward => iter.map(entry).collect(),
        Direction::Reverse => {
            let mut got: Vec<_> = iter.rev().map(entry).collect();
            got.reverse();
            got
        }
        Direction::Mixed(pattern) => {
            let mut iter = iter;
            let (mut front, mut back) = (Vec::new(), Vec::new());
            for step in 0.. {
                let item = if pattern.rotate_left(step % 32) & 1 == 0 {
                    iter.next().map(|r| front.push(entry(r)))
                } else {
                    iter.next_back().map(|r| back.push(entry(r)))
                };
                if item.is_none() {
                    break;
                }
            }
            // One side ran dry: the other has nothing left either.
            assert!(iter.next().is_none() && iter.next_back().is_none());
            back.reverse();
            front.extend(back);
            front
        }
    }
}

fn want_range(model: &Model, lo: &[u8], hi: &[u8]) -> Vec<(Vec<u8>, Vec<u8>)> {
    if lo >= hi {
        return Vec::new();
    }
    model
        .range(lo.to_vec()..hi.to_vec())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

/// Checks everything a snapshot shows against the models it was taken at.
fn check_snapshot(snapshot: &Snapshot, handles: &[Keyspace], models: &[Model]) {
    for (at, (handle, model)) in handles.iter().zip(models).enumerate() {
        let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        let direction = [
            Direction::Forward,
            Direction::Reverse,
            Direction::Mixed(0x5a5a),
        ][at];
        let scanned = if at == 0 {
            collect(snapshot.iter(), direction)
        } else {
            collect(snapshot.iter_in(handle), direction)
        };
        assert_eq!(scanned, all, "snapshot scan of {}", NAMES[at]);
        let keys: Vec<Vec<u8>> = (0u8..48).map(key).collect();
        let got = snapshot.multi_get_in(handle, &keys).unwrap();
        for (k, value) in keys.iter().zip(got) {
            assert_eq!(value.as_deref(), model.get(k).map(Vec::as_slice));
            assert_eq!(
                snapshot.get_in(handle, k).unwrap().as_deref(),
                model.get(k).map(Vec::as_slice),
                "snapshot get of {} in {}",
                String::from_utf8_lossy(k),
                NAMES[at]
            );
        }
    }
}

fn run(ops: Vec<Op>) {
    let dir = tempfile::tempdir().unwrap();
    let mut under = Some(Under::open(dir.path()));
    let mut models: Vec<Model> = vec![Model::new(); 3];
    // Snapshots with the models they were taken at, and the handles
    // current then (a keyspace recreated since is another keyspace).
    let mut snapshots: Vec<(Snapshot, Vec<Keyspace>, Vec<Model>)> = Vec::new();
    for op in ops {
        let u = under.as_ref().unwrap();
        match op {
            Op::Put(s, k, v) => {
                if s == 0 {
                    u.db.put(key(k), &v).unwrap();
                } else {
                    u.handles[s].put(key(k), &v).unwrap();
                }
                models[s].insert(key(k), v);
            }
            Op::Delete(s, k) => {
                u.handles[s].delete(key(k)).unwrap();
                models[s].remove(&key(k));
            }
            Op::DeleteRange(s, a, b) => {
                let (lo, hi) = (key(a), key(b));
                let done = u.handles[s].delete_range(lo.clone()..hi.clone());
                if lo > hi {
                    assert!(matches!(done, Err(Error::InvalidArgument(_))), "{done:?}");
                } else {
                    done.unwrap();
                    models[s].retain(|k, _| k < &lo || k >= &hi);
                }
            }
            Op::Batch(writes) => {
                // Reversed ranges would refuse the whole batch: left out.
                let writes: Vec<_> = writes
                    .into_iter()
                    .filter(|(_, k, w)| !matches!(w, Write::DeleteRange(e) if key(*e) < key(*k)))
                    .collect();
                let mut batch = WriteBatch::new();
                for (s, k, w) in &writes {
                    let handle = &u.handles[*s];
                    match w {
                        Write::Put(v) => batch.put_in(handle, key(*k), v),
                        Write::Delete => batch.delete_in(handle, key(*k)),
                        Write::DeleteRange(e) => batch.delete_range_in(handle, key(*k)..key(*e)),
                    }
                }
                u.db.write(batch).unwrap();
                for (s, k, w) in writes {
                    match w {
                        Write::Put(v) => {
                            models[s].insert(key(k), v);
                        }
                        Write::Delete => {
                            models[s].remove(&key(k));
                        }
                        Write::DeleteRange(e) => {
                            let (lo, hi) = (key(k), key(e));
                            models[s].retain(|k, _| k < &lo || k >= &hi);
                        }
                    }
                }
            }
            Op::Get(s, k) => {
                let got = u.handles[s].get(key(k)).unwrap();
                assert_eq!(got.as_deref(), models[s].get(&key(k)).map(Vec::as_slice));
            }
            Op::MultiGet(s, ks) => {
                let keys: Vec<Vec<u8>> = ks.iter().map(|&k| key(k)).collect();
                let got = u.handles[s].multi_get(&keys).unwrap();
                for (k, value) in keys.iter().zip(got) {
                    assert_eq!(value.as_deref(), models[s].get(k).map(Vec::as_slice));
                }
            }
            Op::Scan(s, a, b, direction) => {
                let (lo, hi) = (key(a), key(b));
                let scanned = collect(u.handles[s].range(lo.clone()..hi.clone()), direction);
                assert_eq!(scanned, want_range(&models[s], &lo, &hi), "{direction:?}");
            }
            Op::Snapshot => {
                snapshots.push((u.db.snapshot(), u.handles.clone(), models.clone()));
            }
            Op::CheckSnapshots => {
                for (snapshot, handles, models) in &snapshots {
                    check_snapshot(snapshot, handles, models);
                }
            }
            Op::Flush => u.db.flush().unwrap(),
            Op::Compact => u.db.compact().unwrap(),
            Op::CompactKeyspace(s) => u.handles[s].compact().unwrap(),
            Op::CompactRange(s, a, b) => u.handles[s].compact_range(key(a)..key(b)).unwrap(),
            Op::Reopen => {
                // Snapshots hold the directory: checked, then dropped.
                for (snapshot, handles, models) in snapshots.drain(..) {
                    check_snapshot(&snapshot, &handles, &models);
                }
                // The old database is closed before the new one opens.
                drop(under.take());
                under = Some(Under::open(dir.path()));
            }
            Op::DropAndRecreate(s) => {
                let u = under.as_mut().unwrap();
                u.db.drop_keyspace(NAMES[s]).unwrap();
                assert!(u.handles[s].get(b"key00").is_err());
                u.handles[s] = u.db.keyspace(NAMES[s]).unwrap();
                models[s].clear();
                assert_eq!(u.handles[s].iter().count(), 0);
            }
        }
    }
    for (snapshot, handles, models) in snapshots.drain(..) {
        check_snapshot(&snapshot, &handles, &models);
    }
    // Everything, in every keyspace, after a last reopen.
    drop(under.take());
    let u = Under::open(dir.path());
    let mut names = u.db.keyspaces();
    names.sort();
    let mut want = NAMES.to_vec();
    want.sort_unstable();
    assert_eq!(names, want);
    for (s, model) in models.iter().enumerate() {
        let all: Vec<_> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(collect(u.handles[s].iter(), Direction::Forward), all);
        assert_eq!(collect(u.handles[s].iter(), Direction::Reverse), all);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn keyspaces_match_a_model_per_keyspace(ops in proptest::collection::vec(op(), 1..160)) {
        run(ops);
    }
}

/// Keys of one keyspace never show in another; each keyspace's own
/// tables, levels and stats; one log for all.
#[test]
fn keyspaces_are_separate_and_share_one_log() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    for i in 0..2000 {
        let k = format!("k{i:05}");
        a.put(&k, format!("a{i}")).unwrap();
        if i % 2 == 0 {
            b.put(&k, format!("b{i}")).unwrap();
        }
    }
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    assert_eq!(db.get("k00000").unwrap(), None);
    assert_eq!(a.get("k00001").unwrap().as_deref(), Some(&b"a1"[..]));
    assert_eq!(b.get("k00001").unwrap(), None);
    assert_eq!(a.iter().count(), 2000);
    assert_eq!(b.iter().rev().count(), 1000);
    assert_eq!(b.last_key_value().unwrap().unwrap().0.as_ref(), b"k01998");
    let stats = db.stats();
    let names: Vec<_> = stats.keyspaces.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["default", "a", "b"]);
    assert_eq!(stats.keyspaces[0].table_count, 0);
    assert!(stats.keyspaces[1].table_count > 0 && stats.keyspaces[2].table_count > 0);
    assert_eq!(
        stats.table_count,
        stats.keyspaces.iter().map(|k| k.table_count).sum::<usize>()
    );
    let logs = files_named(dir.path(), "wal");
    assert_eq!(logs, 1, "every keyspace flushed: one log left");
}

/// `Keyspace::compact` compacts that keyspace alone: its tables end in one
/// run below level 0, its overwritten values and range-deleted keys gone
/// from its files, while another keyspace's level-0 tables stay as they
/// were (`Db::compact` would merge them too).
#[test]
fn compacting_one_keyspace_leaves_the_others_alone() {
    let dir = tempfile::tempdir().unwrap();
    // No automatic compaction: every flush leaves a level-0 table.
    let opts = Options::default()
        .level0_compaction_trigger(64)
        .level0_quiet_trigger(64)
        .level0_stop_writes(128);
    let db = Db::open_with(dir.path(), opts).unwrap();
    let a = db.keyspace("a").unwrap();
    let b = db.keyspace("b").unwrap();
    for round in 0..3 {
        for i in 0..200 {
            let k = format!("k{i:04}");
            a.put(&k, format!("a{round}")).unwrap();
            b.put(&k, format!("b{round}")).unwrap();
        }
        db.flush().unwrap();
    }
    a.delete_range("k0000".."k0100").unwrap();
    let level0 = |db: &Db, ks: usize| db.stats().keyspaces[ks].level_tables[0];
    assert_eq!((level0(&db, 1), level0(&db, 2)), (3, 3));
    a.compact().unwrap();
    let stats = db.stats();
    let (sa, sb) = (&stats.keyspaces[1], &stats.keyspaces[2]);
    assert_eq!(sa.level_tables[0], 0, "a's level 0 after its compaction");
    assert!(sa.table_count >= 1);
    assert_eq!(
        sa.level_tables.iter().filter(|&&n| n > 0).count(),
        1,
        "one run"
    );
    assert_eq!(sb.level_tables[0], 3, "b untouched");
    assert_eq!(sb.table_count, 3);
    // a's files now hold 100 keys, one version each.
    assert!(sa.level_bytes.iter().sum::<u64>() < sb.level_bytes.iter().sum::<u64>() / 3);
    assert_eq!(a.iter().count(), 100);
    assert_eq!(a.get("k0150").unwrap().as_deref(), Some(&b"a2"[..]));
    assert_eq!(b.iter().count(), 200);
    // A dropped keyspace's handle is refused.
    db.drop_keyspace("b").unwrap();
    assert!(b.compact().is_err());
    db.compact().unwrap();
    assert_eq!(db.stats().keyspaces[1].table_count, sa.table_count);
}

/// A keyspace written rarely does not keep old logs alive: each rotation
/// seals every memtable that began in an older log.
#[test]
fn a_rarely_written_keyspace_does_not_pin_old_logs() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let rare = db.keyspace("rare").unwrap();
    rare.put("once", "v").unwrap();
    for i in 0..5000 {
        db.put(format!("k{i:05}"), [7u8; 64]).unwrap();
    }
    db.wait_for_background().unwrap();
    let logs = files_named(dir.path(), "wal");
    assert!(logs <= 3, "{logs} logs alive");
    assert_eq!(rare.get("once").unwrap().as_deref(), Some(&b"v"[..]));
    drop(db);
    // A handle outliving its `Db`: reads go on, writes are refused.
    assert_eq!(rare.get("once").unwrap().as_deref(), Some(&b"v"[..]));
    assert!(matches!(rare.put("late", "x"), Err(Error::Closed)));
    drop(rare);
    let db = Db::open_with(dir.path(), options()).unwrap();
    let rare = db.keyspace("rare").unwrap();
    assert_eq!(rare.get("once").unwrap().as_deref(), Some(&b"v"[..]));
}

/// Files in `dir` whose extension is `extension`.
fn files_named(dir: &std::path::Path, extension: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == extension)
        })
        .count()
}

fn assert_invalid(result: siftdb::Result<impl std::fmt::Debug>, what: &str) {
    match result {
        Err(Error::InvalidArgument(message)) => {
            assert!(message.contains(what), "{message}");
        }
        other => panic!("expected InvalidArgument ({what}), got {other:?}"),
    }
}

#[test]
fn bad_names_and_dropped_handles_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    for name in [
        "",
        "a/b",
        "white space",
        "ünïcode",
        &"x".repeat(256),
        "..\0",
    ] {
        assert_invalid(db.keyspace(name), "keyspace name");
    }
    assert!(db.keyspace(&"x".repeat(255)).is_ok());
    assert_invalid(db.drop_keyspace("default"), "default keyspace");
    assert_invalid(db.drop_keyspace("nope"), "no keyspace");

    let dropped = db.keyspace("users").unwrap();
    dropped.put("u1", "ann").unwrap();
    let snapshot = db.snapshot();
    let other = db.keyspace("other").unwrap();
    other.put("u1", "other's").unwrap();
    db.drop_keyspace("users").unwrap();
    // The old handle: errors, never another keyspace's data.
    assert_invalid(dropped.get("u1"), "dropped");
    assert_invalid(dropped.put("u2", "x"), "dropped");
    assert_invalid(dropped.delete("u1"), "dropped");
    assert_invalid(dropped.multi_get(&["u1"]), "dropped");
    let mut scan = dropped.iter();
    assert!(matches!(scan.next(), Some(Err(Error::InvalidArgument(_)))));
    assert!(matches!(
        dropped.range("a".."z").next_back(),
        Some(Err(Error::InvalidArgument(_)))
    ));
    let mut batch = WriteBatch::new();
    batch.put("d", "default's");
    batch.put_in(&dropped, "u3", "x");
    assert_invalid(db.write(batch), "keyspace id");
    assert_eq!(db.get("d").unwrap(), None, "a refused batch writes nothing");
    // A snapshot taken before the drop still reads it.
    assert_eq!(
        snapshot.get_in(&dropped, "u1").unwrap().as_deref(),
        Some(&b"ann"[..])
    );
    // Recreated: a new, empty keyspace.
    let users = db.keyspace("users").unwrap();
    assert_eq!(users.get("u1").unwrap(), None);
    assert_eq!(users.iter().count(), 0);
    // A snapshot never sees a keyspace created after it.
    assert_eq!(snapshot.get_in(&other, "u1").unwrap(), None);
    assert_eq!(snapshot.iter_in(&users).count(), 0);
    drop((snapshot, dropped, users, other));
    drop(db);
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(
        db.keyspaces(),
        ["default", &"x".repeat(255), "other", "users"]
    );
    assert_eq!(db.keyspace("users").unwrap().get("u1").unwrap(), None);
    assert_eq!(
        db.keyspace("other").unwrap().get("u1").unwrap().as_deref(),
        Some(&b"other's"[..])
    );
}

/// A dropped keyspace's tables go once no snapshot reads them; the drop is
/// durable at once.
#[test]
fn a_dropped_keyspace_leaves_no_files_and_stays_dropped() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path(), options()).unwrap();
    let temp = db.keyspace("temp").unwrap();
    for i in 0..3000 {
        temp.put(format!("k{i:05}"), [1u8; 32]).unwrap();
    }
    db.put("keep", "me").unwrap();
    db.flush().unwrap();
    db.wait_for_background().unwrap();
    let tables = |dir: &std::path::Path| files_named(dir, "sst");
    let before = tables(dir.path());
    let snapshot = db.snapshot();
    db.drop_keyspace("temp").unwrap();
    assert_eq!(tables(dir.path()), before, "the snapshot still reads them");
    assert_eq!(snapshot.iter_in(&temp).count(), 3000);
    drop(snapshot);
    drop(temp);
    assert_eq!(tables(dir.path()), db.stats().table_count);
    drop(db);
    let db = Db::open(dir.path()).unwrap();
    assert_eq!(db.keyspaces(), ["default"]);
    assert_eq!(db.get("keep").unwrap().as_deref(), Some(&b"me"[..]));
    assert_eq!(db.keyspace("temp").unwrap().iter().count(), 0);
}
