//! The resources many databases share (`Options::block_cache`,
//! `Options::write_buffer_manager`, `Options::rate_limiter`), with real
//! databases: one cache holds both databases' blocks and never answers
//! one with the other's (their tables have the same ids); a write to one
//! database that brings the shared budget near its end flushes the
//! largest memtable, another database's; one limiter sees the flushes
//! and compactions of both; and nothing written is lost, across a reopen.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb::{Cache, Db, Options, RateLimiter, WriteBufferManager};

fn key(i: u32) -> String {
    format!("key{i:06}")
}

/// Database `d`'s value of key `i`, 200 bytes.
fn value(d: u32, i: u32) -> Vec<u8> {
    let mut v = format!("db{d}-value{i:06}-").into_bytes();
    v.resize(200, b'0' + (d % 10) as u8);
    v
}

/// Two databases, the same keys, different values, each flushed to its
/// first table (so both read tables of the same ids): reads of one never
/// get the other's cached blocks, and one cache holds both sets.
#[test]
fn one_cache_holds_both_databases_blocks_apart() {
    let dir = tempfile::tempdir().unwrap();
    let cache = Cache::new(8 << 20);
    let options = Options::default().block_cache(cache.clone());
    let dbs: Vec<Db> = (0..2)
        .map(|d| Db::open_with(dir.path().join(format!("db{d}")), options.clone()).unwrap())
        .collect();
    for (d, db) in (0u32..).zip(&dbs) {
        for i in 0..2000 {
            db.put(key(i), value(d, i)).unwrap();
        }
        db.flush().unwrap();
    }
    for round in 0..2 {
        for i in (0..2000).step_by(3) {
            for (d, db) in (0u32..).zip(&dbs) {
                let got = db.get(key(i)).unwrap();
                assert_eq!(
                    got.as_deref(),
                    Some(&value(d, i)[..]),
                    "round {round} db{d} {i}"
                );
            }
        }
    }
    let (a, b) = (dbs[0].stats(), dbs[1].stats());
    assert!(a.block_cache_hits > 0 && b.block_cache_hits > 0);
    // Each reports the shared cache, which holds both databases' blocks.
    assert_eq!(a.block_cache_bytes as usize, cache.usage());
    assert_eq!(b.block_cache_bytes as usize, cache.usage());
    assert!(
        cache.usage() > 2 * 300_000,
        "{} bytes cached",
        cache.usage()
    );
    assert!(cache.usage() <= cache.capacity());
}

/// A database written to near the budget's end has its own memtable
/// small; the largest is another database's, which is flushed though
/// nobody writes to it any more — and the limiter shared by both counts
/// the flushes of each.
#[test]
fn the_budget_flushes_the_largest_memtable_of_any_database() {
    let dir = tempfile::tempdir().unwrap();
    let budget = WriteBufferManager::new(16 << 20);
    let limiter = RateLimiter::new(1 << 30);
    // Memtables that never fill on their own: only the budget flushes.
    let options = Options::default()
        .memtable_bytes(64 << 20)
        .write_buffer_manager(budget.clone())
        .rate_limiter(limiter.clone());
    let big = Db::open_with(dir.path().join("big"), options.clone()).unwrap();
    let small = Db::open_with(dir.path().join("small"), options.clone()).unwrap();
    assert_eq!(budget.databases(), 2);
    // 12 MiB of the budget's 16 in the big database's memtable (its arena
    // grows by blocks of up to 4 MiB, counted whole): under 7/8 of it.
    let mut written = 0;
    while budget.usage() < 12 << 20 {
        big.put(key(written), value(0, written)).unwrap();
        written += 1;
    }
    assert_eq!(big.stats().flushes, 0);
    // The small database's writes take the total past 7/8 of the budget.
    let mut i = 0;
    while big.stats().flushes == 0 {
        small.put(key(i), value(1, i)).unwrap();
        i += 1;
        assert!(
            i < 100_000,
            "no flush of the largest memtable after {i} writes"
        );
        if budget.flushes_triggered() > 0 {
            big.wait_for_background().unwrap();
        }
    }
    assert!(budget.flushes_triggered() >= 1);
    assert_eq!(small.stats().flushes, 0, "the smaller memtable was flushed");
    assert!(
        budget.usage() < 8 << 20,
        "{} bytes after the flush",
        budget.usage()
    );
    let flushed = limiter.bytes_through();
    assert!(
        flushed >= big.stats().flush_bytes_written / 2,
        "{flushed} bytes through the limiter"
    );
    small.flush().unwrap();
    assert!(
        limiter.bytes_through() > flushed,
        "the other database's flush not paced"
    );
    drop((big, small));
    assert_eq!(budget.databases(), 0);
    assert_eq!(budget.usage(), 0);
    // Nothing written is lost.
    let big = Db::open(dir.path().join("big")).unwrap();
    for j in 0..written {
        assert_eq!(
            big.get(key(j)).unwrap().as_deref(),
            Some(&value(0, j)[..]),
            "{j}"
        );
    }
    let small = Db::open(dir.path().join("small")).unwrap();
    for j in 0..i {
        assert_eq!(
            small.get(key(j)).unwrap().as_deref(),
            Some(&value(1, j)[..]),
            "{j}"
        );
    }
}

/// Nonsense budgets and rates are refused at the open.
#[test]
fn too_small_a_budget_or_rate_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let small_budget = Options::default().write_buffer_manager(WriteBufferManager::new(100));
    assert!(Db::open_with(dir.path(), small_budget).is_err());
    let slow = Options::default().rate_limiter(RateLimiter::new(1000));
    assert!(Db::open_with(dir.path(), slow).is_err());
}
