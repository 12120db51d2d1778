//! Concurrency stress: writer and reader threads, plus a thread forcing
//! flushes and full compactions, for a bounded time on a database with tiny
//! memtables and levels (so tables are replaced under readers constantly).
//!
//! Checked throughout:
//! - read-your-writes: a writer's `get` right after its `put` sees it;
//! - no stale and no future reads: every key is owned by one writer, which
//!   publishes the counter it is about to write (`started`) and the one
//!   acknowledged (`acked`); a `get` returns a value within
//!   [acked before the get, started after it], and a reader never sees a
//!   key's counter go backwards;
//! - snapshot scans: an iterator's values lie within [acked before it was
//!   created, started right after], however long it is held while flushes
//!   and compactions replace the tables it reads, and pairs of keys that
//!   are always written together in one batch always read equal.
//!
//! The run time bounds the test; no assertion depends on timing.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use siftdb::{Db, Options, WriteBatch};

const RUN_FOR: Duration = Duration::from_secs(5);
const WRITERS: usize = 3;
const KEYS_PER_WRITER: usize = 40;
const READERS: usize = 2;
/// Pairs `a-pair-NN` / `z-pair-NN`, far apart in key order.
const PAIRS: usize = 8;
/// Threads and rounds of put-and-flush in the stall test.
const STALL_THREADS: usize = 3;
const STALL_ROUNDS: usize = 150;
/// No stall test round waits this long unless something hangs.
const STALL_HANG: Duration = Duration::from_secs(120);

fn options() -> Options {
    Options::default()
        .memtable_bytes(16 << 10)
        .block_size(512)
        .level0_compaction_trigger(2)
        .level1_bytes(32 << 10)
        .level_size_ratio(3)
        .table_target_bytes(8 << 10)
}

fn owned_key(writer: usize, k: usize) -> String {
    format!("m-w{writer}-k{k:03}")
}

/// A counter as a value: fixed width (so it sorts) plus filler.
fn encode(counter: u64, filler: usize) -> Vec<u8> {
    let mut v = format!("{counter:016}").into_bytes();
    v.resize(16 + filler, b'.');
    v
}

fn decode(value: &[u8]) -> u64 {
    std::str::from_utf8(value.get(..16).expect("a counter value"))
        .expect("ascii")
        .parse()
        .expect("a counter")
}

/// Per owned key: the counter being written, and the last one acknowledged.
struct Published {
    started: Vec<AtomicU64>,
    acked: Vec<AtomicU64>,
}

impl Published {
    fn new(n: usize) -> Published {
        Published {
            started: (0..n).map(|_| AtomicU64::new(0)).collect(),
            acked: (0..n).map(|_| AtomicU64::new(0)).collect(),
        }
    }
}

fn slot(writer: usize, k: usize) -> usize {
    writer * KEYS_PER_WRITER + k
}

/// The owned key a scanned key names, if it is one.
fn parse_owned(key: &[u8]) -> Option<usize> {
    let text = std::str::from_utf8(key).ok()?.strip_prefix("m-w")?;
    let (w, k) = text.split_once("-k")?;
    Some(slot(w.parse().ok()?, k.parse().ok()?))
}

fn writer(db: &Db, published: &Published, w: usize, stop: &AtomicBool) -> u64 {
    let mut writes = 0u64;
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        counter += 1;
        let k = (counter as usize * 7 + w) % KEYS_PER_WRITER;
        let key = owned_key(w, k);
        let value = encode(counter, (counter % 200) as usize);
        published.started[slot(w, k)].store(counter, Ordering::SeqCst);
        db.put(&key, &value).unwrap();
        published.acked[slot(w, k)].store(counter, Ordering::SeqCst);
        let got = db.get(&key).unwrap();
        assert_eq!(
            got.as_deref(),
            Some(&value[..]),
            "writer {w} does not read its own write of {key}"
        );
        writes += 1;
    }
    writes
}

/// The slot of pair `p` (after every owned key's).
fn pair_slot(p: usize) -> usize {
    WRITERS * KEYS_PER_WRITER + p
}

fn pair_writer(db: &Db, published: &Published, stop: &AtomicBool) -> u64 {
    let mut counter = 0u64;
    while !stop.load(Ordering::Relaxed) {
        counter += 1;
        let p = counter as usize % PAIRS;
        let value = encode(counter, 64);
        let mut batch = WriteBatch::new();
        batch.put(format!("a-pair-{p:02}"), &value);
        batch.put(format!("z-pair-{p:02}"), &value);
        published.started[pair_slot(p)].store(counter, Ordering::SeqCst);
        db.write(batch).unwrap();
        published.acked[pair_slot(p)].store(counter, Ordering::SeqCst);
    }
    counter
}

/// Checks one `get` of an owned key against what was published around it.
fn checked_get(db: &Db, published: &Published, w: usize, k: usize, last_seen: &mut [u64]) {
    let s = slot(w, k);
    let acked_before = published.acked[s].load(Ordering::SeqCst);
    let got = db.get(owned_key(w, k)).unwrap();
    let started_after = published.started[s].load(Ordering::SeqCst);
    let counter = got.as_deref().map_or(0, decode);
    assert!(
        acked_before <= counter && counter <= started_after,
        "get {}: counter {counter}, but {acked_before} was acknowledged before the read \
         and {started_after} is the newest started after it",
        owned_key(w, k)
    );
    assert!(
        counter >= last_seen[s],
        "get {}: went back from {} to {counter}",
        owned_key(w, k),
        last_seen[s]
    );
    last_seen[s] = counter;
}

/// Scans everything at one snapshot, pausing halfway so flushes and
/// compactions replace tables under the iterator.
fn checked_scan(db: &Db, published: &Published, last_seen: &mut [u64], pause: bool) -> usize {
    let n = published.acked.len();
    let acked_before: Vec<u64> = (0..n)
        .map(|s| published.acked[s].load(Ordering::SeqCst))
        .collect();
    let iter = db.iter();
    let started_after: Vec<u64> = (0..n)
        .map(|s| published.started[s].load(Ordering::SeqCst))
        .collect();
    let mut seen = vec![None; n];
    let mut pairs_a = vec![None; PAIRS];
    let mut pairs_z = vec![None; PAIRS];
    let mut entries = 0;
    let mut previous: Option<Vec<u8>> = None;
    for item in iter {
        let (key, value) = item.unwrap();
        if let Some(prev) = &previous {
            assert!(prev.as_slice() < &key[..], "scan out of order at {key:?}");
        }
        previous = Some(key.to_vec());
        entries += 1;
        if pause && entries == 10 {
            std::thread::sleep(Duration::from_millis(30));
        }
        let text = String::from_utf8_lossy(&key).into_owned();
        if let Some(s) = parse_owned(&key) {
            seen[s] = Some(decode(&value));
        } else if let Some(p) = text.strip_prefix("a-pair-") {
            pairs_a[p.parse::<usize>().unwrap()] = Some(value.clone());
        } else if let Some(p) = text.strip_prefix("z-pair-") {
            pairs_z[p.parse::<usize>().unwrap()] = Some(value.clone());
        } else {
            panic!("scan yielded a key nobody wrote: {text}");
        }
    }
    for p in 0..PAIRS {
        assert_eq!(
            pairs_a[p], pairs_z[p],
            "pair {p} read unequal in one scan: a batch seen in part"
        );
        seen[pair_slot(p)] = pairs_a[p].as_deref().map(decode);
    }
    for s in 0..n {
        let counter = seen[s].unwrap_or(0);
        assert!(
            acked_before[s] <= counter && counter <= started_after[s],
            "scan: key slot {s} has counter {counter}, outside [{}, {}]: not the snapshot",
            acked_before[s],
            started_after[s]
        );
        assert!(counter >= last_seen[s], "scan: key slot {s} went backwards");
        last_seen[s] = counter;
    }
    entries
}

#[test]
fn readers_see_consistent_snapshots_while_writers_flush_and_compact() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open_with(dir.path(), options()).unwrap());
    let published = Arc::new(Published::new(WRITERS * KEYS_PER_WRITER + PAIRS));
    let stop = Arc::new(AtomicBool::new(false));

    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (db, published, stop) = (Arc::clone(&db), Arc::clone(&published), Arc::clone(&stop));
        writers.push(std::thread::spawn(move || {
            writer(&db, &published, w, &stop)
        }));
    }
    let pairs = {
        let (db, published, stop) = (Arc::clone(&db), Arc::clone(&published), Arc::clone(&stop));
        std::thread::spawn(move || pair_writer(&db, &published, &stop))
    };
    let mut readers = Vec::new();
    for r in 0..READERS {
        let (db, published, stop) = (Arc::clone(&db), Arc::clone(&published), Arc::clone(&stop));
        readers.push(std::thread::spawn(move || {
            let mut last_seen = vec![0u64; WRITERS * KEYS_PER_WRITER + PAIRS];
            let (mut gets, mut scans) = (0u64, 0u64);
            let mut i = r;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                for _ in 0..50 {
                    i = i.wrapping_mul(31).wrapping_add(17);
                    checked_get(
                        &db,
                        &published,
                        i % WRITERS,
                        (i / 7) % KEYS_PER_WRITER,
                        &mut last_seen,
                    );
                    gets += 1;
                }
                checked_scan(&db, &published, &mut last_seen, scans.is_multiple_of(4));
                scans += 1;
            }
            (gets, scans)
        }));
    }
    let maintenance = {
        let (db, stop) = (Arc::clone(&db), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut rounds = 0u64;
            while !stop.load(Ordering::Relaxed) {
                db.flush().unwrap();
                if rounds.is_multiple_of(3) {
                    db.compact().unwrap();
                }
                rounds += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            rounds
        })
    };

    let started = Instant::now();
    while started.elapsed() < RUN_FOR {
        std::thread::sleep(Duration::from_millis(50));
        let any_finished = writers.iter().any(|h| h.is_finished())
            || readers.iter().any(|h| h.is_finished())
            || pairs.is_finished()
            || maintenance.is_finished();
        if any_finished {
            break; // a thread panicked: stop the others and report it below
        }
    }
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers.into_iter().map(|h| h.join().unwrap()).sum();
    let pair_writes = pairs.join().unwrap();
    let (gets, scans) = readers
        .into_iter()
        .map(|h| h.join().unwrap())
        .fold((0, 0), |(g, s), (a, b)| (g + a, s + b));
    let maintenance_rounds = maintenance.join().unwrap();
    let stats = db.stats();
    println!(
        "{writes} writes, {pair_writes} pair batches, {gets} checked gets, {scans} checked scans, \
         {maintenance_rounds} forced flushes; engine: {} flushes, {} compactions, {} stalls",
        stats.flushes, stats.compactions, stats.write_stalls
    );
    assert!(writes > 0 && pair_writes > 0 && gets > 0 && scans > 0);

    // What was acknowledged last is what a reopened database holds.
    let expected: Vec<u64> = published
        .acked
        .iter()
        .map(|a| a.load(Ordering::SeqCst))
        .collect();
    drop(db);
    let db = Db::open_with(dir.path(), options()).unwrap();
    for w in 0..WRITERS {
        for k in 0..KEYS_PER_WRITER {
            let got = db.get(owned_key(w, k)).unwrap();
            assert_eq!(
                got.as_deref().map_or(0, decode),
                expected[slot(w, k)],
                "{}",
                owned_key(w, k)
            );
        }
    }
}

/// Writers that must wait for background work (two immutable memtables
/// pending, or level 0 full) and explicit flushes, from several threads on
/// tiny memtables: nothing may wait forever. A stalled writer used to check
/// the stall condition, then wait for the background thread's *next* unit
/// of work; when that thread finished its last pending unit in between and
/// went idle, the writer waited for progress that never came. The run is
/// bounded by operation counts; the watchdog turns a hang into a failure.
#[test]
fn stalled_writers_and_flushes_always_wake_up() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .memtable_bytes(4096)
        .level0_compaction_trigger(2)
        .level0_stop_writes(2)
        .level1_bytes(4096)
        .table_target_bytes(4096)
        .block_size(256);
    let db = Arc::new(Db::open_with(dir.path(), opts).unwrap());
    let (done_tx, done_rx) = mpsc::channel();
    for t in 0..STALL_THREADS {
        let (db, done_tx) = (Arc::clone(&db), done_tx.clone());
        std::thread::spawn(move || {
            for round in 0..STALL_ROUNDS {
                for i in 0..20 {
                    db.put(format!("t{t}-{i:02}"), vec![b'v'; 200 + round % 50])
                        .unwrap();
                }
                if (round + t) % 3 == 0 {
                    db.flush().unwrap();
                }
            }
            done_tx.send(t).unwrap();
        });
    }
    for _ in 0..STALL_THREADS {
        done_rx
            .recv_timeout(STALL_HANG)
            .expect("a writer or a flush waits forever for background work");
    }
    let stats = db.stats();
    println!(
        "{} flushes, {} compactions, {} write stalls",
        stats.flushes, stats.compactions, stats.write_stalls
    );
    assert!(stats.write_stalls > 0, "the test never stalled a writer");
}
