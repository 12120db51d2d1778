//! Lease reads (`siftdb_raft::lease`): a leader answers them without a
//! quorum round trip while it holds its lease, and an isolated leader stops
//! answering them once the lease ran out — before a new leader can take a
//! write — instead of serving a stale value; and, with a lease made
//! unsafely long, that it does serve one, which the linearizability
//! checker rejects (the check can fail).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

mod common;

use std::time::{Duration, Instant};

use siftdb_raft::api::Consistency;
use siftdb_raft::lease::lease_duration;
use siftdb_raft::Command;
use siftdb_testkit::linearizability::{
    check_registers, format_history, KeyedOperation, Operation, RegisterInput, RegisterOutput,
    Verdict,
};

use common::proxy::Proxy;
use common::{find_leader, Cluster};

/// The test cluster's smallest election timeout (`Cluster`'s options).
const ELECTION_MIN: Duration = Duration::from_millis(300);

/// Three nodes (with `extra` serve options) whose raft messages go
/// through a fault proxy, initialised; a client of all of them.
async fn proxied_cluster(
    path: &std::path::Path,
    extra: &[&str],
) -> (Cluster, Proxy, siftdb_raft::client::Client) {
    let mut cluster = Cluster::new(path, 3, 1000, 100);
    let proxy = Proxy::start(&cluster.addrs).await;
    for id in 1..=3 {
        cluster.routes.insert(id, proxy.routes(id));
        cluster
            .extra
            .insert(id, extra.iter().map(|s| s.to_string()).collect());
        cluster.start(id);
    }
    let admin = cluster.client(Duration::from_secs(30), Duration::from_secs(5));
    admin.init(cluster.addr(1)).await.unwrap();
    (cluster, proxy, admin)
}

/// A client of every node but `leader`.
fn majority_without(cluster: &Cluster, leader: u64) -> siftdb_raft::client::Client {
    let others: Vec<String> = (1..=3)
        .filter(|&n| n != leader)
        .map(|n| cluster.addr(n).to_string())
        .collect();
    siftdb_raft::client::Client::new(others, Duration::from_secs(30), Duration::from_secs(2))
        .unwrap()
}

/// The proxy closes its connections a moment after `partition` returns: a
/// heartbeat may still pass meanwhile and extend the lease by that much.
const SLACK: Duration = Duration::from_millis(50);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_isolated_leader_stops_serving_lease_reads_when_its_lease_ends() {
    common::in_test_dir(Duration::from_secs(120), |path| async move {
        let (cluster, proxy, admin) = proxied_cluster(&path, &[]).await;
        let put = |v: &'static [u8]| Command::Put {
            key: b"k".to_vec(),
            value: v.to_vec(),
        };
        admin.write(&put(b"old")).await.unwrap();
        let leader = find_leader(&admin, &cluster).await;
        let at = cluster.addr(leader).to_string();
        // Under a held lease, reads are answered without a round trip.
        for _ in 0..50 {
            let v = admin
                .read_at_with(&at, b"k", Consistency::Lease)
                .await
                .unwrap();
            assert_eq!(v.as_deref(), Some(&b"old"[..]));
        }
        let (served, _) = admin.status(&at).await.unwrap().lease_reads;
        // (Most do; on a loaded machine a late heartbeat lets the lease
        // lapse now and then, and those go by ReadIndex.)
        assert!(served >= 10, "{served} of 50 lease reads used the lease");

        // The leader is cut off from its followers (clients still reach
        // it). Reads called within the lease may still be answered (with
        // the old value: nothing else can be committed yet); any called
        // after it must not be.
        let lease = lease_duration(ELECTION_MIN);
        proxy.partition(&[leader]);
        let cut = Instant::now();
        let quick = cluster.client(Duration::from_secs(1), Duration::from_millis(800));
        let mut within = 0;
        while cut.elapsed() < lease * 3 {
            let called = cut.elapsed();
            // A refused read (Err) constrains nothing.
            if let Ok(v) = quick.read_at_with(&at, b"k", Consistency::Lease).await {
                assert!(
                    called < lease + SLACK,
                    "a read called {called:?} after the cut (lease {lease:?}) was answered: {v:?}"
                );
                assert_eq!(v.as_deref(), Some(&b"old"[..]));
                within += 1;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        // The majority elects a new leader and takes a write; the old
        // leader still does not answer with the old value.
        let majority = majority_without(&cluster, leader);
        majority.write(&put(b"new")).await.unwrap();
        let stale = quick.read_at_with(&at, b"k", Consistency::Lease).await;
        assert!(stale.is_err(), "the isolated leader answered {stale:?}");
        let (_, fell_back) = admin.status(&at).await.unwrap().lease_reads;
        assert!(fell_back > 0, "no read found the lease expired");
        // Healed: the old leader follows, and lease reads see the write.
        proxy.heal();
        let v = majority.read_with(b"k", Consistency::Lease).await.unwrap();
        assert_eq!(v.as_deref(), Some(&b"new"[..]));
        println!("{within} lease reads answered after the cut, all within the lease of {lease:?}");
    })
    .await;
}

/// Microseconds since `start`: the history's clock.
fn micros(start: Instant) -> u64 {
    u64::try_from(start.elapsed().as_micros()).unwrap()
}

/// The lease test's own check can fail: with a lease far longer than the
/// election timeout (`serve --unsafe-lease-ms`, a test-only knob), an
/// isolated old leader answers a lease read with the value a new leader
/// has already overwritten, and the linearizability checker the partition
/// test relies on rejects that history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unsafe_lease_serves_a_stale_read_the_checker_rejects() {
    common::in_test_dir(Duration::from_secs(120), |path| async move {
        let (cluster, proxy, admin) = proxied_cluster(&path, &["--unsafe-lease-ms", "60000"]).await;
        let start = Instant::now();
        let mut history: Vec<KeyedOperation> = Vec::new();
        let put = |v: u64| Command::Put {
            key: b"k".to_vec(),
            value: v.to_string().into_bytes(),
        };
        let mut write = |v: u64, call: u64, ret: u64| {
            history.push((
                0,
                Operation {
                    input: RegisterInput::Write(Some(v)),
                    output: Some(RegisterOutput::Written),
                    call,
                    ret: Some(ret),
                },
            ));
        };
        let call = micros(start);
        admin.write(&put(1)).await.unwrap();
        write(1, call, micros(start));
        let leader = find_leader(&admin, &cluster).await;
        let at = cluster.addr(leader).to_string();
        // The lease is held: served without a round trip.
        admin
            .read_at_with(&at, b"k", Consistency::Lease)
            .await
            .unwrap();

        // The leader cut off; the majority elects another and overwrites.
        proxy.partition(&[leader]);
        let majority = majority_without(&cluster, leader);
        let call = micros(start);
        majority.write(&put(2)).await.unwrap();
        write(2, call, micros(start));

        // The old leader still holds its (too long) lease: it answers with
        // the overwritten value.
        let quick = cluster.client(Duration::from_secs(2), Duration::from_secs(1));
        let call = micros(start);
        let stale = quick
            .read_at_with(&at, b"k", Consistency::Lease)
            .await
            .unwrap();
        let ret = micros(start);
        assert_eq!(stale.as_deref(), Some(&b"1"[..]), "the old leader's answer");
        history.push((
            0,
            Operation {
                input: RegisterInput::Read,
                output: Some(RegisterOutput::Read(Some(1))),
                call,
                ret: Some(ret),
            },
        ));
        let (verdict, key) = check_registers(&history, 1_000_000);
        assert_eq!(
            (verdict, key),
            (Verdict::Illegal, Some(0)),
            "{}",
            format_history(&history)
        );
        proxy.heal();
    })
    .await;
}
