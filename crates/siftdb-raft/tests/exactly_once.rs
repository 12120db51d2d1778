//! Exactly-once writes across leader kills: 3 node processes on loopback;
//! 8 writers each send increments under their own client session, every
//! one first through a client that gives up after a few milliseconds (its
//! answer is lost, the command often already proposed), then again, same
//! session and sequence number, through a patient client, which may itself
//! retry after a leader kill. The leader is killed twice and restarted.
//! Checked: every counter equals the number of increments acknowledged
//! for it (each applied once), and a repeat answers what the first
//! application answered (the counter value it produced, which is also
//! the sequence number's position in that writer's series).
//!
//! Also here (one binary less to build): range deletes committed through
//! the leader, by the client and by `DELETE /kv?start=&end=`, read alike
//! on every node, one of them caught up by a snapshot that carries them.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use siftdb_raft::client::new_client_id;
use siftdb_raft::{Command, Op, Request, Response, Session};

use common::{find_leader, Cluster};

const WRITERS: u64 = 8;
const INCREMENTS: u64 = 60;

fn counter_key(w: u64) -> Vec<u8> {
    format!("counter-{w}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn retried_increments_apply_once_across_leader_kills() {
    common::in_test_dir(
        Duration::from_secs(300),
        |path| async move { run(&path).await },
    )
    .await;
}

async fn run(dir: &std::path::Path) {
    let mut cluster = Cluster::new(dir, 3, 50, 10);
    for id in 1..=3 {
        cluster.start(id);
    }
    let patient = Arc::new(cluster.client(Duration::from_secs(60), Duration::from_secs(5)));
    // Sends once and gives up: the answer is lost.
    let lossy = Arc::new(cluster.client(Duration::from_millis(3), Duration::from_millis(3)));
    patient.init(cluster.addr(1)).await.unwrap();

    let acked = Arc::new(AtomicU64::new(0));
    let mut writers = Vec::new();
    for w in 0..WRITERS {
        let (patient, lossy, acked) =
            (Arc::clone(&patient), Arc::clone(&lossy), Arc::clone(&acked));
        writers.push(tokio::spawn(async move {
            let client = new_client_id();
            for seq in 1..=INCREMENTS {
                let req = Request {
                    session: Some(Session { client, seq }),
                    command: Command::Increment {
                        key: counter_key(w),
                        delta: 1,
                    },
                };
                let _lost = lossy.write_request(&req).await;
                let first = patient.write_request(&req).await.unwrap();
                let again = patient.write_request(&req).await.unwrap();
                assert_eq!(first.response, Response::Counter { value: seq });
                assert_eq!(again.response, first.response, "writer {w} seq {seq}");
                acked.fetch_add(1, Ordering::SeqCst);
            }
        }));
    }

    for k in 1..=2u64 {
        while acked.load(Ordering::SeqCst) < k * WRITERS * INCREMENTS / 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let leader = find_leader(&patient, &cluster).await;
        cluster.kill(leader);
        tokio::time::sleep(Duration::from_millis(800)).await;
        cluster.start(leader);
    }
    for w in writers {
        w.await.unwrap();
    }
    for w in 0..WRITERS {
        let value = patient.read(&counter_key(w)).await.unwrap().unwrap();
        assert_eq!(
            u64::from_be_bytes(value.try_into().unwrap()),
            INCREMENTS,
            "writer {w}'s counter"
        );
    }
    // The client's own sessions: each write() once, whatever it retried.
    for i in 1..=20 {
        let ack = patient
            .write(&Command::Increment {
                key: b"pooled".to_vec(),
                delta: 1,
            })
            .await
            .unwrap();
        assert_eq!(ack.response, Response::Counter { value: i });
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("k-{i:03}").into_bytes()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_deletes_reach_every_node() {
    common::in_test_dir(Duration::from_secs(300), |path| async move {
        run_range_deletes(&path).await
    })
    .await;
}

async fn run_range_deletes(dir: &std::path::Path) {
    let mut cluster = Cluster::new(dir, 3, 20, 5);
    for id in 1..=3 {
        cluster.start(id);
    }
    let client = cluster.client(Duration::from_secs(60), Duration::from_secs(5));
    client.init(cluster.addr(1)).await.unwrap();
    let puts = (0..100)
        .map(|i| Op::Put {
            key: key(i),
            value: b"v".to_vec(),
        })
        .collect();
    client.write(&Command::Batch(puts)).await.unwrap();
    // A follower misses the range deletes and, with the log purged
    // behind snapshots meanwhile, catches up by a snapshot.
    let leader = find_leader(&client, &cluster).await;
    let follower = (1..=3).find(|&id| id != leader).unwrap();
    cluster.kill(follower);

    let ack = client
        .write(&Command::DeleteRange {
            start: key(10),
            end: Some(key(50)),
        })
        .await
        .unwrap();
    assert_eq!(ack.response, Response::Applied { ops: 1 });
    let batch = Command::Batch(vec![
        Op::DeleteRange {
            start: key(80),
            end: None,
        },
        Op::Put {
            key: key(90),
            value: b"after".to_vec(),
        },
    ]);
    client.write(&batch).await.unwrap();
    let leader = find_leader(&client, &cluster).await;
    let over_http = reqwest::Client::new()
        .delete(format!(
            "http://{}/kv?start=k-060&end=k-070",
            cluster.addr(leader)
        ))
        .send()
        .await
        .unwrap();
    assert!(over_http.status().is_success(), "{over_http:?}");
    for i in 0..60 {
        client
            .write(&Command::Put {
                key: format!("filler-{i}").into_bytes(),
                value: b"f".to_vec(),
            })
            .await
            .unwrap();
    }
    cluster.start(follower);
    common::caught_up_by_snapshot(&client, &cluster, follower, Duration::from_secs(120)).await;

    let kept = |i: u64| !(10..50).contains(&i) && !(60..70).contains(&i) && (i < 80 || i == 90);
    common::dumps_agree(&client, &cluster, b"k-", |id, dump| {
        let want: Vec<Vec<u8>> = (0..100).filter(|&i| kept(i)).map(key).collect();
        let got: Vec<Vec<u8>> = dump.keys().cloned().collect();
        assert_eq!(got, want, "node {id}'s keys");
        assert_eq!(dump.get(&key(90)).map(Vec::as_slice), Some(&b"after"[..]));
    })
    .await;
    for id in 1..=3 {
        for i in [9, 10, 49, 50, 65, 79, 80, 90, 99] {
            let read = client.read_at(cluster.addr(id), &key(i)).await.unwrap();
            assert_eq!(read.is_some(), kept(i), "node {id}, key {i}");
        }
    }
}
