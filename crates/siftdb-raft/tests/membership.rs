//! Membership changes while a client writes: one node grows to 3, then
//! to 5 (each new node added as a learner, caught up, promoted); a voter
//! is killed and replaced by a fresh node (the dead one removed, the new
//! one added and promoted); then the cluster shrinks back to one node.
//! Checked: every acknowledged write is on the last node and readable
//! linearizably; a removed node refuses reads, local reads and writes;
//! the members each step reports are the ones asked for.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use siftdb_raft::api::MembershipChange;
use siftdb_raft::client::Client;
use siftdb_raft::Command;

use common::Cluster;

fn key(i: u64) -> Vec<u8> {
    format!("k-{i:06}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn grow_replace_and_shrink_while_writing() {
    common::in_test_dir(
        Duration::from_secs(300),
        |path| async move { run(&path).await },
    )
    .await;
}

async fn add(admin: &Client, cluster: &Cluster, id: u64) {
    let m = common::add_node(admin, cluster, id, true).await;
    assert!(m.voters.contains(&id), "{m:?}");
}

async fn remove(admin: &Client, id: u64) {
    let m = admin
        .change_membership(&MembershipChange::Remove { id })
        .await
        .unwrap();
    assert!(
        !m.voters.contains(&id) && !m.nodes.contains_key(&id),
        "{m:?}"
    );
}

async fn run(dir: &std::path::Path) {
    // Snapshots every 100 entries, 10 kept: a late joiner catches up by a
    // snapshot.
    let mut cluster = Cluster::new(dir, 6, 100, 10);
    cluster.solo = true;
    cluster.start(1);
    let admin = Arc::new(cluster.client(Duration::from_secs(60), Duration::from_secs(10)));
    admin.init(cluster.addr(1)).await.unwrap();

    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (acked, stop) = (Arc::clone(&acked), Arc::clone(&stop));
        let client = cluster.client(Duration::from_secs(60), Duration::from_secs(5));
        tokio::spawn(async move {
            let mut i = 0;
            while !stop.load(Ordering::SeqCst) {
                client
                    .write(&Command::Put {
                        key: key(i),
                        value: i.to_be_bytes().to_vec(),
                    })
                    .await
                    .unwrap();
                i += 1;
                acked.store(i, Ordering::SeqCst);
            }
        })
    };
    let wait_writes = |n: u64| {
        let acked = Arc::clone(&acked);
        async move {
            let target = acked.load(Ordering::SeqCst) + n;
            while acked.load(Ordering::SeqCst) < target {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        }
    };

    wait_writes(300).await;
    for id in [2, 3] {
        cluster.start(id);
        add(&admin, &cluster, id).await;
        wait_writes(50).await;
    }
    for id in [4, 5] {
        cluster.start(id);
        add(&admin, &cluster, id).await;
        wait_writes(50).await;
    }
    let m = admin.members(cluster.addr(1)).await.unwrap();
    assert_eq!(m.voters, vec![1, 2, 3, 4, 5]);

    // Node 5 dies; node 6, fresh, replaces it.
    cluster.kill(5);
    wait_writes(50).await;
    remove(&admin, 5).await;
    cluster.start(6);
    add(&admin, &cluster, 6).await;
    wait_writes(50).await;

    // Shrink back to node 1 (leadership moves off a removed leader).
    for id in [2, 3, 4, 6] {
        remove(&admin, id).await;
        wait_writes(30).await;
    }
    let m = admin.members(cluster.addr(1)).await.unwrap();
    assert_eq!(m.voters, vec![1]);
    assert_eq!(m.nodes.keys().copied().collect::<Vec<_>>(), vec![1]);

    // A removed node refuses to serve, even local reads.
    let removed = Client::new(
        vec![cluster.addr(2).to_string()],
        Duration::from_secs(2),
        Duration::from_secs(1),
    )
    .unwrap();
    assert!(removed.read(&key(0)).await.is_err());
    assert!(removed.dump(cluster.addr(2), b"").await.is_err());
    let local = reqwest::get(format!("http://{}/kv/k-000000?local=true", cluster.addr(2)))
        .await
        .unwrap();
    assert!(!local.status().is_success(), "{}", local.status());

    stop.store(true, Ordering::SeqCst);
    writer.await.unwrap();
    let total = acked.load(Ordering::SeqCst);
    let dump: BTreeMap<Vec<u8>, Vec<u8>> = admin
        .dump(cluster.addr(1), b"k-")
        .await
        .unwrap()
        .into_iter()
        .collect();
    for i in 0..total {
        assert_eq!(
            dump.get(&key(i)),
            Some(&i.to_be_bytes().to_vec()),
            "write {i}"
        );
    }
    assert_eq!(
        admin.read(&key(total - 1)).await.unwrap(),
        Some((total - 1).to_be_bytes().to_vec())
    );
    println!(
        "{total} acknowledged writes through 1 -> 3 -> 5 nodes, node 5 replaced by 6, back to 1"
    );
}
