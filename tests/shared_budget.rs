//! One block cache and one memtable budget for many databases
//! (`Options::block_cache`, `Options::write_buffer_manager`): twenty
//! databases in one process, all writing and reading at once under one
//! 64 MiB `Cache` and one 64 MiB `WriteBufferManager`, keep the process's
//! resident memory within those budgets and 64 MiB of fixed overhead
//! (code, threads' stacks, allocator slack, tables' filters and indexes),
//! and every value reads back.
//!
//! Resident memory is the kernel's count for the whole process, so the
//! databases run in a child process (this test binary run again with
//! `CHILD_ENV` set: it then runs only `child_process`) that reads its own
//! peak (`VmHWM` in /proc/self/status) — the test harness, other tests'
//! threads and the parent's allocations stay out of it. Linux only: that
//! is where /proc/self/status is.
//!
//! Without the shared budgets the same work holds far more: each database
//! then keeps its writes in its own 64 MiB memtable (20 × 10 MiB written,
//! none full, none flushed) and its blocks in its own 64 MiB cache.
//! `SIFTDB_SHARED_BUDGET_MODE=no-budget` (no write budget) or
//! `per-db-caches` (a cache per database) runs the child so, and the test
//! fails.
#![cfg(target_os = "linux")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    clippy::cast_precision_loss,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::process::Command;

use siftdb::{Cache, Db, Options, WriteBufferManager};
use siftdb_testkit::SplitMix64;

/// Set (to the directory) in the child process.
const CHILD_ENV: &str = "SIFTDB_SHARED_BUDGET_CHILD";
/// `shared` (the default), `no-budget` or `per-db-caches`: see the module docs.
const MODE_ENV: &str = "SIFTDB_SHARED_BUDGET_MODE";

const DATABASES: usize = 20;
const CACHE_BYTES: usize = 64 << 20;
const WRITE_BUDGET: usize = 64 << 20;
const FIXED_OVERHEAD: usize = 64 << 20;
/// Keys per database, of `VALUE_LEN`-byte values: 10 MiB each, 200 MiB
/// in all — three times what both budgets hold.
const KEYS: u64 = 10 * 1024;
const VALUE_LEN: usize = 1000;

fn key(i: u64) -> String {
    format!("key{i:08}")
}

/// Database `d`'s value of key `i`: random bytes, which LZ4 cannot shrink
/// (so tables and cached blocks are as large as the data).
fn value(d: usize, i: u64) -> Vec<u8> {
    SplitMix64::new((d as u64) << 32 | i).bytes(VALUE_LEN)
}

/// A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`: given in kB).
fn status_bytes(field: &str) -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find(|l| l.starts_with(field))
        .unwrap_or_else(|| panic!("no {field} in /proc/self/status"));
    let kib: usize = line
        .trim_start_matches(field)
        .trim_start_matches(':')
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .unwrap();
    kib * 1024
}

/// The body of the child process (does nothing in the parent): prints
/// `peak_rss <bytes>` and what the shared budgets held.
#[test]
fn child_process() {
    let Ok(dir) = std::env::var(CHILD_ENV) else {
        return;
    };
    let mode = std::env::var(MODE_ENV).unwrap_or_else(|_| "shared".into());
    let cache = Cache::new(CACHE_BYTES);
    let budget = WriteBufferManager::new(WRITE_BUDGET);
    let options = match mode.as_str() {
        "shared" => Options::default()
            .block_cache(cache.clone())
            .write_buffer_manager(budget.clone()),
        "no-budget" => Options::default().block_cache(cache.clone()),
        "per-db-caches" => Options::default().write_buffer_manager(budget.clone()),
        other => panic!("unknown {MODE_ENV} {other:?}"),
    };
    let databases: Vec<Db> = (0..DATABASES)
        .map(|d| Db::open_with(format!("{dir}/db{d:02}"), options.clone()).unwrap())
        .collect();
    let opened_rss = status_bytes("VmRSS");
    std::thread::scope(|s| {
        for (d, db) in databases.iter().enumerate() {
            s.spawn(move || {
                let mut rng = SplitMix64::new(d as u64);
                for i in 0..KEYS {
                    db.put(key(i), value(d, i)).unwrap();
                    // Reads beside the writes: recent keys and old ones.
                    if i % 8 == 7 {
                        let j = rng.below(i + 1);
                        assert_eq!(db.get(key(j)).unwrap().as_deref(), Some(&value(d, j)[..]));
                    }
                }
                // Then everything in tables, and every key read from them
                // (through the block cache) while the others still write.
                // Twice: blocks read again are kept (a cache admits a block
                // read once into a small probation ring only).
                db.flush().unwrap();
                for pass in 0..2 {
                    for i in 0..KEYS {
                        let got = db.get(key(i)).unwrap();
                        assert_eq!(
                            got.as_deref(),
                            Some(&value(d, i)[..]),
                            "db{d} key {i} ({pass})"
                        );
                    }
                }
            });
        }
    });
    let peak = status_bytes("VmHWM");
    // Each database's `Stats::block_cache_bytes` is the shared cache's
    // usage when it shares one: counted once then.
    let caches: u64 = if mode == "per-db-caches" {
        databases
            .iter()
            .map(|db| db.stats().block_cache_bytes)
            .sum()
    } else {
        cache.usage() as u64
    };
    println!("peak_rss {peak}");
    println!("block_caches {caches}");
    println!("opened_rss {opened_rss}");
    println!("cache_usage {}", cache.usage());
    println!("write_budget_usage {}", budget.usage());
    println!("flushes_triggered {}", budget.flushes_triggered());
    let (stalls, stalled) = budget.stalls();
    println!("stalls {stalls} stalled_ms {}", stalled.as_millis());
    assert!(cache.usage() <= CACHE_BYTES);
}

#[test]
fn twenty_databases_stay_within_one_cache_and_one_write_budget() {
    if std::env::var(CHILD_ENV).is_ok() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let exe = std::env::current_exe().unwrap();
    let output = Command::new(&exe)
        .args([
            "--exact",
            "child_process",
            "--test-threads",
            "1",
            "--quiet",
            "--nocapture",
        ])
        .env(CHILD_ENV, dir.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "child failed: {stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let figure = |name: &str| -> usize {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(name)?.trim().split(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in the child's output: {stdout}"))
    };
    let peak = figure("peak_rss");
    let mib = |bytes: usize| bytes as f64 / f64::from(1 << 20);
    eprintln!(
        "{DATABASES} databases, {} MiB written: peak RSS {:.1} MiB (at open {:.1} MiB), \
         block caches {:.1} MiB, memtables {:.1} MiB at the end; {} flushes triggered by \
         the budget; {}",
        mib(DATABASES * KEYS as usize * VALUE_LEN),
        mib(peak),
        mib(figure("opened_rss")),
        mib(figure("block_caches")),
        mib(figure("write_budget_usage")),
        figure("flushes_triggered"),
        stdout
            .lines()
            .find(|l| l.starts_with("stalls"))
            .unwrap_or(""),
    );
    let bound = CACHE_BYTES + WRITE_BUDGET + FIXED_OVERHEAD;
    assert!(
        peak <= bound,
        "peak RSS {:.1} MiB over the {:.0} MiB of both budgets and the fixed overhead",
        mib(peak),
        mib(bound)
    );
}
