//! 256 concurrent `AsyncDb::get`s (and `multi_get`s of 32 keys) on a
//! 2-worker tokio runtime: the gets run on the blocking pool, so the
//! workers stay free while reads wait for the disk. Then a scan from both
//! ends (`AsyncIter`) and a transaction (`AsyncTransaction`), the same way.
//!
//! `cargo run --release --features tokio --example async_gets -- DIR N`
//! (DIR: a database of keys `key{i:012}`, filled here when it is empty;
//! N: keys, default 200,000).
#![allow(clippy::unwrap_used, clippy::expect_used, reason = "an example")]

use std::time::Instant;

use siftdb::{AsyncDb, Options};

fn main() {
    let mut args = std::env::args().skip(1);
    let dir = args.next().unwrap_or_else(|| "async-gets-db".to_string());
    let n: u64 = args.next().map_or(200_000, |s| s.parse().unwrap());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async move {
        let db = AsyncDb::open_with(&dir, Options::default()).await.unwrap();
        if db.get("key000000000000").await.unwrap().is_none() {
            let sync = db.blocking_handle().clone();
            tokio::task::spawn_blocking(move || {
                for i in 0..n {
                    sync.put(format!("key{i:012}"), format!("value{i}")).unwrap();
                }
                sync.flush().unwrap();
            })
            .await
            .unwrap();
        }
        const TASKS: u64 = 256;
        const PER_TASK: u64 = 200;
        let started = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let db = db.clone();
                tokio::spawn(async move {
                    for g in 0..PER_TASK {
                        let i = (t * 7919 + g * 104_729) % n;
                        let found = db.get(format!("key{i:012}")).await.unwrap();
                        assert!(found.is_some());
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        println!(
            "{TASKS} concurrent async gets, 2 workers: {:.0} gets/s ({} gets in {elapsed:.3} s)",
            (TASKS * PER_TASK) as f64 / elapsed,
            TASKS * PER_TASK
        );
        let started = Instant::now();
        let tasks: Vec<_> = (0..TASKS)
            .map(|t| {
                let db = db.clone();
                tokio::spawn(async move {
                    for g in 0..PER_TASK / 32 {
                        let keys = (0..32)
                            .map(|k| {
                                let i = (t * 7919 + (g * 32 + k) * 104_729) % n;
                                bytes::Bytes::from(format!("key{i:012}"))
                            })
                            .collect();
                        let found = db.multi_get(keys).await.unwrap();
                        assert!(found.iter().all(Option::is_some));
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let elapsed = started.elapsed().as_secs_f64();
        let keys = TASKS * (PER_TASK / 32) * 32;
        println!(
            "{TASKS} concurrent async multi_gets of 32, 2 workers: {:.0} keys/s ({keys} keys in {elapsed:.3} s)",
            keys as f64 / elapsed
        );
        let stats = db.blocking_handle().stats();
        println!(
            "block reads from files {}, overlapped reads: io_uring {}, pool {}",
            stats.block_reads_from_file, stats.overlapped_reads_uring, stats.overlapped_reads_pool
        );

        // A scan, a chunk at a time on the blocking pool, from either end.
        let mut scan = db.prefix("key00000000");
        let first = scan.next_chunk(100).await.unwrap();
        let last = scan.next_back().await.transpose().unwrap();
        println!(
            "scan of prefix key00000000: {} entries from the front, the last {:?}",
            first.len(),
            last.map(|(key, _)| key)
        );

        // A transaction: reads on the blocking pool, writes in this task.
        loop {
            let txn = db.transaction();
            let visits = txn
                .get_for_update("visits")
                .await
                .unwrap()
                .map_or(0u64, |v| String::from_utf8_lossy(&v).parse().unwrap_or(0));
            txn.put("visits", (visits + 1).to_string()).await.unwrap();
            match txn.commit().await {
                Err(siftdb::Error::Conflict) => continue,
                other => {
                    other.unwrap();
                    println!("visits: {}", visits + 1);
                    break;
                }
            }
        }
    });
}
