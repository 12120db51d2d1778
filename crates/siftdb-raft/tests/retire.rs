//! A node removed while it was down learns it when it comes back and
//! refuses to serve; a node just added is never retired
//! (`siftdb_raft::retire`).
//!
//! Checked: a voter and a learner killed, removed, and restarted from
//! their old directories retire (the `RETIRED` file, reads, local reads
//! and writes refused with "removed from the cluster"), without moving
//! the cluster's term by more than one election, and no acknowledged
//! write is lost; nodes just added as learners and promoted, and a
//! cluster that loses its leader meanwhile, retire no one, and only a
//! leader ever answers that a node is not a member.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

mod common;

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Duration, Instant};

use siftdb_raft::api::{MembershipChange, RETIRED_FILE};
use siftdb_raft::client::Client;
use siftdb_raft::retire::Verdict;
use siftdb_raft::Command;

use common::{find_leader, Cluster};

fn key(i: u64) -> Vec<u8> {
    format!("k-{i:06}").into_bytes()
}

/// Writes keys `from..to`, one at a time; all acknowledged.
async fn write(admin: &Client, from: u64, to: u64) {
    for i in from..to {
        admin
            .write(&Command::Put {
                key: key(i),
                value: i.to_be_bytes().to_vec(),
            })
            .await
            .unwrap();
    }
}

/// One node's cluster grown to `voters` voters and `learners` learners
/// after them.
async fn grown(dir: &Path, voters: u64, learners: u64) -> (Cluster, Client) {
    let mut cluster = Cluster::new(dir, voters + learners, 1000, 100);
    cluster.solo = true;
    cluster.start(1);
    let admin = cluster.client(Duration::from_secs(60), Duration::from_secs(5));
    admin.init(cluster.addr(1)).await.unwrap();
    for id in 2..=voters + learners {
        cluster.start(id);
        common::add_node(&admin, &cluster, id, id <= voters).await;
    }
    (cluster, admin)
}

fn retired_file(cluster: &Cluster, id: u64) -> bool {
    cluster
        .dir
        .join(format!("node-{id}"))
        .join(RETIRED_FILE)
        .exists()
}

/// Whether a log of node `id` has a line with `text` (the node logs at
/// warn level, retiring included).
fn log_says(cluster: &Cluster, id: u64, text: &str) -> bool {
    std::fs::read_dir(&cluster.dir).unwrap().any(|e| {
        let e = e.unwrap();
        let name = e.file_name().to_string_lossy().to_string();
        name.starts_with(&format!("node-{id}."))
            && name.ends_with(".log")
            && std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .lines()
                .any(|l| l.contains("retires") && l.contains(text))
    })
}

/// Waits until node `id` refuses reads as removed (and says so); it must
/// serve no stale read meanwhile (it hears no leader).
async fn wait_retired(cluster: &Cluster, id: u64, limit: Duration) {
    let started = Instant::now();
    loop {
        let url = format!("http://{}/kv/{}?local=true", cluster.addr(id), "k-000000");
        if let Ok(resp) = reqwest::get(url).await {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            assert!(
                !status.is_success(),
                "removed node {id} served a stale read before retiring: {text:?}"
            );
            if status == reqwest::StatusCode::SERVICE_UNAVAILABLE
                && text.contains("removed from the cluster")
            {
                return;
            }
        }
        assert!(
            started.elapsed() < limit,
            "node {id} did not retire within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_removed_while_down_retire_when_back() {
    common::in_test_dir(Duration::from_secs(180), |path| async move {
        // Voters 1-3, learner 4.
        let (mut cluster, admin) = grown(&path, 3, 1).await;
        write(&admin, 0, 100).await;
        // Every node has the membership and the writes on disk (a node
        // killed blank would come back as a fresh one, knowing nothing).
        let leader = find_leader(&admin, &cluster).await;
        let applied = admin
            .status(cluster.addr(leader))
            .await
            .unwrap()
            .last_applied;
        common::wait_applied(&admin, &cluster, applied.unwrap(), Duration::from_secs(30)).await;
        // Node 3 (a voter) and node 4 (a learner) go down and are removed
        // meanwhile: nobody can tell them.
        cluster.kill(3);
        cluster.kill(4);
        write(&admin, 100, 200).await;
        for id in [3, 4] {
            admin
                .change_membership(&MembershipChange::Remove { id })
                .await
                .unwrap();
        }
        write(&admin, 200, 300).await;
        let leader = find_leader(&admin, &cluster).await;
        let term_before = admin.status(cluster.addr(leader)).await.unwrap().term;

        // Back from their old directories: node 3 stands for election (the
        // leader answers its vote request that it is not a member), node 4
        // hears nothing and asks.
        cluster.start(3);
        cluster.start(4);
        let writer = {
            let client = cluster.client(Duration::from_secs(30), Duration::from_secs(5));
            tokio::spawn(async move { write(&client, 300, 600).await })
        };
        let limit = Duration::from_secs(30);
        wait_retired(&cluster, 3, limit).await;
        wait_retired(&cluster, 4, limit).await;
        writer.await.unwrap();
        // Each by its path: the voter by its vote request's answer, the
        // learner by asking after hearing nothing.
        assert!(log_says(&cluster, 3, "is not a member of the cluster"));
        assert!(log_says(&cluster, 4, "says it is not a member"));
        for id in [3, 4] {
            assert!(retired_file(&cluster, id), "node {id}: no {RETIRED_FILE}");
            let only = Client::new(
                vec![cluster.addr(id).to_string()],
                Duration::from_secs(2),
                Duration::from_secs(1),
            )
            .unwrap();
            let read = only.read_at(cluster.addr(id), &key(0)).await;
            assert!(
                read.as_ref()
                    .is_err_and(|e| e.to_string().contains("removed from the cluster")),
                "node {id} read: {read:?}"
            );
            let written = only
                .write(&Command::Put {
                    key: b"x".to_vec(),
                    value: vec![],
                })
                .await;
            assert!(
                written
                    .as_ref()
                    .is_err_and(|e| e.to_string().contains("removed from the cluster")),
                "node {id} write: {written:?}"
            );
        }
        // Their vote requests moved no term (openraft rejects them without
        // taking their term); allow one election a loaded machine may
        // cause by a late heartbeat.
        let leader = find_leader(&admin, &cluster).await;
        let term_after = admin.status(cluster.addr(leader)).await.unwrap().term;
        assert!(
            term_after <= term_before + 1,
            "term {term_before} -> {term_after}"
        );
        // No acknowledged write lost, on either member.
        for id in [1, 2] {
            let dump: BTreeMap<Vec<u8>, Vec<u8>> = admin
                .dump(cluster.addr(id), b"k-")
                .await
                .unwrap()
                .into_iter()
                .collect();
            let status = admin.status(cluster.addr(id)).await.unwrap();
            // A follower may trail; it applied everything once it has the
            // leader's last index.
            if dump.len() < 600 {
                assert_ne!(status.state, "Leader", "node {id} lost writes");
                continue;
            }
            for i in 0..600 {
                assert_eq!(
                    dump.get(&key(i)),
                    Some(&i.to_be_bytes().to_vec()),
                    "node {id} write {i}"
                );
            }
        }
        let m = admin.members(cluster.addr(leader)).await.unwrap();
        assert_eq!(m.voters, vec![1, 2]);
        println!("nodes 3 and 4 retired; term {term_before} -> {term_after}");
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_just_added_are_not_retired() {
    common::in_test_dir(Duration::from_secs(180), |path| async move {
        let mut cluster = Cluster::new(&path, 4, 1000, 100);
        cluster.solo = true;
        cluster.start(1);
        let admin = cluster.client(Duration::from_secs(60), Duration::from_secs(5));
        admin.init(cluster.addr(1)).await.unwrap();
        // A node never added is not a member, by the leader's word (once
        // it has committed an entry of its term).
        let started = Instant::now();
        loop {
            match admin.member_verdict(cluster.addr(1), 9).await.unwrap() {
                Verdict::NotMember => break,
                Verdict::Unknown { .. } if started.elapsed() < Duration::from_secs(10) => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                other => panic!("node 9: {other:?}"),
            }
        }
        for id in 2..=4 {
            cluster.start(id);
            common::add_node(&admin, &cluster, id, false).await;
            // Just added: a member at once, by the leader.
            assert_eq!(
                admin.member_verdict(cluster.addr(1), id).await.unwrap(),
                Verdict::Member
            );
            if id < 4 {
                admin
                    .change_membership(&MembershipChange::Promote { id })
                    .await
                    .unwrap();
            }
        }
        write(&admin, 0, 50).await;
        // A follower never says "not a member", whoever is asked about.
        let leader = find_leader(&admin, &cluster).await;
        let follower = (1..=3).find(|&n| n != leader).unwrap();
        for id in [4, 9] {
            let v = admin
                .member_verdict(cluster.addr(follower), id)
                .await
                .unwrap();
            assert_ne!(v, Verdict::NotMember, "node {follower} on {id}");
        }
        // The leader dies: the new voters elect one of them, the learner
        // hears nothing for a while; nobody retires.
        cluster.kill(leader);
        write(&admin, 50, 100).await;
        tokio::time::sleep(Duration::from_secs(4)).await;
        cluster.start(leader);
        write(&admin, 100, 150).await;
        for id in 1..=4 {
            assert!(!retired_file(&cluster, id), "node {id} retired");
            // The node restarted moments ago may not answer yet on a busy
            // machine (a refused or cut request is no answer): asked again
            // for up to 30 s; the answer it gives must be the value.
            let asked = Instant::now();
            let value = loop {
                match admin.read_at(cluster.addr(id), &key(149)).await {
                    Ok(value) => break value,
                    Err(e) if asked.elapsed() < Duration::from_secs(30) => {
                        let _ = e;
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    Err(e) => panic!("node {id} did not answer in 30 s: {e:?}"),
                }
            };
            assert_eq!(value, Some(149u64.to_be_bytes().to_vec()), "node {id}");
        }
    })
    .await;
}
