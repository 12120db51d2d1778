//! A follower killed (SIGKILL) while it receives a snapshot recovers: a
//! 3-node cluster of `siftdb-raft serve` processes on loopback holds about
//! 16 MB of state; a follower is stopped until the leader has purged the
//! entry it needs next, restarted, and killed again as soon as its
//! `snapshots/recv-*` directory holds part of a table file (the snapshot
//! half received); restarted once more, it must install a snapshot and end
//! with every acknowledged write, the same state as the other nodes.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use siftdb_raft::{Command, Op};

use common::{find_leader, Cluster};

const NODES: u64 = 3;
/// Commands of `PUTS` puts of `VALUE_BYTES` each (entries of 80 KB, several
/// to an append message): about 16 MB of state.
const COMMANDS: u64 = 200;
const PUTS: u64 = 20;
const VALUE_BYTES: usize = 4096;

fn key(c: u64, i: u64) -> Vec<u8> {
    format!("k{c:04}-{i:03}").into_bytes()
}

/// A value that does not compress (so the snapshot is as large as the
/// state and takes many chunks).
fn value(c: u64, i: u64) -> Vec<u8> {
    common::incompressible(c << 20 | i, VALUE_BYTES)
}

/// Bytes of table files in `node`'s snapshot directories being received.
fn receiving(node: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(node.join("snapshots")) else {
        return 0;
    };
    let mut bytes = 0;
    for entry in entries.flatten() {
        if !entry.file_name().to_string_lossy().starts_with("recv-") {
            continue;
        }
        for file in std::fs::read_dir(entry.path())
            .into_iter()
            .flatten()
            .flatten()
        {
            if file.file_name().to_string_lossy().ends_with(".sst") {
                bytes += file.metadata().map_or(0, |m| m.len());
            }
        }
    }
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_killed_mid_install_recovers() {
    // Stops by itself: a hang (a bug) fails after five minutes.
    common::in_test_dir(Duration::from_secs(300), |path| async move {
        install_kill(&path).await;
    })
    .await;
}

async fn install_kill(dir: &Path) {
    let mut cluster = Cluster::new(dir, NODES, 20, 5);
    for id in 1..=NODES {
        cluster.start(id);
    }
    let client = cluster.client(Duration::from_secs(120), Duration::from_secs(20));
    client.init(cluster.addr(1)).await.unwrap();
    let write = |c: u64| {
        Command::Batch(
            (0..PUTS)
                .map(|i| Op::Put {
                    key: key(c, i),
                    value: value(c, i),
                })
                .collect(),
        )
    };

    // Half the state, then a follower stops; the other half, and writes
    // until the leader purged past the follower's log.
    for c in 0..COMMANDS / 2 {
        client.write(&write(c)).await.unwrap();
    }
    let leader = find_leader(&client, &cluster).await;
    let follower = *cluster.children.keys().find(|&&id| id != leader).unwrap();
    cluster.kill(follower);
    // The follower holds no entry the leader had not when it stopped.
    let follower_last = client
        .status(cluster.addr(leader))
        .await
        .unwrap()
        .last_log_index
        .unwrap_or(0);
    let mut c = COMMANDS / 2;
    loop {
        if c < COMMANDS {
            client.write(&write(c)).await.unwrap();
            c += 1;
            continue;
        }
        let leader = find_leader(&client, &cluster).await;
        let purged = client
            .status(cluster.addr(leader))
            .await
            .ok()
            .and_then(|s| s.purged)
            .unwrap_or(0);
        if purged > follower_last {
            break;
        }
        assert!(
            c < COMMANDS + 400,
            "the leader never purged past {follower_last}"
        );
        client.write(&write(c)).await.unwrap();
        c += 1;
    }
    let written = c;

    // Restarted, the follower can only catch up by a snapshot: killed as
    // soon as part of it arrived.
    cluster.start(follower);
    let node_dir = dir.join(format!("node-{follower}"));
    let started = Instant::now();
    let mut seen = 0;
    while seen == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "node {follower} received no snapshot bytes"
        );
        seen = receiving(&node_dir);
        if seen == 0 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
    }
    cluster.kill(follower);
    let left = receiving(&node_dir);
    cluster.start(follower);

    // It recovers: applies up to a write made after all of the above.
    common::caught_up_by_snapshot(&client, &cluster, follower, Duration::from_secs(180)).await;
    // No received directory is left behind once installed.
    assert_eq!(receiving(&node_dir), 0);

    common::dumps_agree(&client, &cluster, b"k", |id, dump| {
        for c in 0..written {
            for i in 0..PUTS {
                assert_eq!(
                    dump.get(&key(c, i)),
                    Some(&value(c, i)),
                    "node {id}: acknowledged put {i} of command {c}"
                );
            }
        }
    })
    .await;
    println!(
        "node {follower} killed with {seen} bytes of snapshot tables received ({left} at the \
         kill), then installed a snapshot; {written} commands of {PUTS} puts checked on 3 nodes"
    );
}
