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
use siftdb_raft::{Command, Request, Response, Session};

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
