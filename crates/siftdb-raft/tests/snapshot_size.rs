//! Measures a snapshot's build, transfer and install at a given size of
//! state, and a node's disk use — run by hand (ignored by default):
//!
//! ```text
//! RSNAP_KEYS=10000000 RSNAP_DIR=/var/tmp/rsnap-bench \
//!   cargo test --release -p siftdb-raft --test snapshot_size -- --ignored --nocapture
//! ```
//!
//! It drives the storage layer the way openraft does (apply, build, send
//! in `--snapshot-chunk-kib` sized chunks through the snapshot data's
//! read/seek and the receiver's seek/write, install), without the network:
//! the transfer time is what the two ends' storage costs, not HTTP.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    missing_docs,
    reason = "a measurement tool"
)]
// Unix only: the disk use it reports counts inodes' allocated blocks
// (`MetadataExt::ino`, `blocks`), which Windows does not expose.
#![cfg(unix)]

mod common;

use std::collections::HashSet;
use std::io::SeekFrom;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::Instant;

use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder};
use siftdb_raft::{Command, Op, Proposal, Request, TypeConfig};
use tokio::io::{AsyncReadExt, AsyncSeekExt, AsyncWriteExt};

/// Bytes on disk under `dir`, each inode once (hard links count once).
fn disk_use(dir: &Path) -> u64 {
    fn walk(dir: &Path, seen: &mut HashSet<u64>, total: &mut u64) {
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in entries.flatten() {
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                walk(&entry.path(), seen, total);
            } else if seen.insert(meta.ino()) {
                *total += meta.blocks() * 512;
            }
        }
    }
    let mut seen = HashSet::new();
    let mut total = 0;
    walk(dir, &mut seen, &mut total);
    total
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1 << 20) as f64
}

/// A value that does not compress.
fn value(i: u64, len: usize) -> Vec<u8> {
    common::incompressible(i, len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run by hand with --ignored --nocapture"]
async fn snapshot_at_scale() {
    let keys: u64 = std::env::var("RSNAP_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(200_000);
    let value_len: usize = 100;
    let root = std::path::PathBuf::from(
        std::env::var("RSNAP_DIR").unwrap_or_else(|_| "/var/tmp/rsnap-bench".into()),
    );
    let chunk = 3 << 20;
    let _ = std::fs::remove_dir_all(&root);
    let (leader_dir, follower_dir) = (root.join("leader"), root.join("follower"));
    let (_log, mut leader, _) = siftdb_raft::open_storage(&leader_dir).unwrap();

    let per_entry = 1000u64;
    let started = Instant::now();
    let mut index = 0u64;
    let mut logical = 0u64;
    let mut i = 0u64;
    while i < keys {
        let mut entries = Vec::new();
        for _ in 0..10 {
            if i >= keys {
                break;
            }
            let n = per_entry.min(keys - i);
            let ops = (i..i + n)
                .map(|k| {
                    let key = format!("key-{k:012}").into_bytes();
                    logical += (key.len() + value_len) as u64;
                    Op::Put {
                        key,
                        value: value(k, value_len),
                    }
                })
                .collect();
            i += n;
            index += 1;
            entries.push(Entry::<TypeConfig> {
                log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
                payload: EntryPayload::Normal(Proposal {
                    time_ms: index,
                    requests: vec![Request::unsessioned(Command::Batch(ops))],
                }),
            });
        }
        leader.apply(entries).await.unwrap();
    }
    let load = started.elapsed();
    let after_load = disk_use(&leader_dir);
    println!(
        "loaded {keys} keys ({:.0} MiB of keys and values) in {load:.1?}; leader dir {:.0} MiB",
        mib(logical),
        mib(after_load)
    );

    let started = Instant::now();
    let mut builder = leader.get_snapshot_builder().await;
    let built = builder.build_snapshot().await.unwrap();
    let build = started.elapsed();
    drop(built);
    let leader_disk = disk_use(&leader_dir);

    let (_flog, mut follower, _) = siftdb_raft::open_storage(&follower_dir).unwrap();
    let started = Instant::now();
    let mut snap = leader.get_current_snapshot().await.unwrap().unwrap();
    let mut receiving = follower.begin_receiving_snapshot().await.unwrap();
    let end = snap.snapshot.seek(SeekFrom::End(0)).await.unwrap();
    let mut offset = 0u64;
    let mut sent = 0u64;
    loop {
        snap.snapshot.seek(SeekFrom::Start(offset)).await.unwrap();
        let mut buf = Vec::with_capacity(chunk);
        while buf.capacity() > buf.len() {
            if snap.snapshot.read_buf(&mut buf).await.unwrap() == 0 {
                break;
            }
        }
        receiving.seek(SeekFrom::Start(offset)).await.unwrap();
        receiving.write_all(&buf).await.unwrap();
        offset += buf.len() as u64;
        sent += buf.len() as u64;
        if offset == end {
            break;
        }
    }
    receiving.shutdown().await.unwrap();
    let transfer = started.elapsed();
    let started = Instant::now();
    follower
        .install_snapshot(&snap.meta, receiving)
        .await
        .unwrap();
    let install = started.elapsed();
    drop(snap);
    let follower_disk = disk_use(&follower_dir);
    let leader_disk_after = disk_use(&leader_dir);
    let probe = format!("key-{:012}", keys / 2);
    assert_eq!(
        follower.reader().get(probe.as_bytes()).unwrap().as_deref(),
        Some(&value(keys / 2, value_len)[..])
    );
    println!(
        "snapshot build {build:.2?}; transfer {transfer:.2?} ({:.0} MiB in {} KiB chunks); \
         install {install:.2?}",
        mib(sent),
        chunk >> 10
    );
    println!(
        "disk: leader {:.0} MiB after the build ({:.2}x the loaded dir, {:.2}x the keys and \
         values), {:.0} MiB after sending; follower {:.0} MiB after the install ({:.2}x the keys \
         and values)",
        mib(leader_disk),
        leader_disk as f64 / after_load as f64,
        leader_disk as f64 / logical as f64,
        mib(leader_disk_after),
        mib(follower_disk),
        follower_disk as f64 / logical as f64
    );
    drop(leader);
    drop(follower);
    if std::env::var("RSNAP_KEEP").is_err() {
        let _ = std::fs::remove_dir_all(&root);
    }
}
