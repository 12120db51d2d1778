//! Partitions, message loss and kills under a register workload, checked
//! for linearizability.
//!
//! Three node processes whose raft messages all go through a fault proxy
//! (`common::proxy`). Clients (talking to the nodes directly; two of them
//! reading at any node, followers by ReadIndex) read, write
//! and compare-and-swap a few keys holding u64 values, every write a value
//! never written before; each operation's call and return times are
//! recorded, and an operation that fails (deadline) is recorded as
//! indeterminate (it may or may not have taken effect; it took effect
//! before the same client's next acknowledged write returned, or never:
//! the client's session makes a late copy `Stale`). Meanwhile the
//! faults run one after another, each held for a while: the leader
//! isolated; a follower isolated (a majority/minority split); a bridge
//! (one node sees both others, which do not see each other); one-way loss
//! (the leader's messages to the followers lost, theirs to it delivered);
//! every link losing 20% of its chunks and delaying each by 5 ms; the
//! leader killed with SIGKILL (restarted after). Then every link heals.
//! Checked: the cluster takes a write within 60 s of the faults ending;
//! every history (one per key) is linearizable (Porcupine's algorithm,
//! `siftdb_testkit::linearizability`), which also means no acknowledged
//! write was lost: a final read of each key after the faults must see the
//! last write linearized.
//!
//! Each fault is held 2 s by default (about 30 s in all);
//! `SIFTDB_PARTITION_SECS=50` holds each for 50 s (10 minutes of faults).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

mod common;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use siftdb_raft::{Command, Response};
use siftdb_testkit::linearizability::{
    check_registers, summary, KeyedOperation, Operation, RegisterInput, RegisterOutput, Verdict,
};
use siftdb_testkit::SplitMix64;

use common::proxy::{Proxy, Rules};
use common::{find_leader, Cluster};

const NODES: u64 = 3;
const CLIENTS: u64 = 6;
const KEYS: u64 = 3;

fn key_name(k: u64) -> Vec<u8> {
    format!("register-{k}").into_bytes()
}

fn decode(v: Option<Vec<u8>>) -> Option<u64> {
    v.map(|b| u64::from_be_bytes(b.try_into().unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_and_kills_keep_histories_linearizable() {
    let hold = std::env::var("SIFTDB_PARTITION_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(2u64);
    common::in_test_dir(Duration::from_secs(300 + 12 * hold), |path| async move {
        run(&path, hold).await;
    })
    .await;
}

async fn run(dir: &std::path::Path, hold: u64) {
    let mut cluster = Cluster::new(dir, NODES, 200, 50);
    let proxy = Proxy::start(&cluster.addrs).await;
    for id in 1..=NODES {
        cluster.routes.insert(id, proxy.routes(id));
        cluster.start(id);
    }
    let nodes: Vec<String> = cluster.addrs.values().cloned().collect();
    let admin = Arc::new(cluster.client(Duration::from_secs(60), Duration::from_secs(5)));
    admin.init(cluster.addr(1)).await.unwrap();
    admin
        .write(&Command::Put {
            key: b"warm-up".to_vec(),
            value: b"1".to_vec(),
        })
        .await
        .unwrap();

    let start = Instant::now();
    let history: Arc<Mutex<Vec<KeyedOperation>>> = Arc::new(Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let next_value = Arc::new(AtomicU64::new(1));
    let mut workers = Vec::new();
    for c in 0..CLIENTS {
        // Short deadlines: a client stuck behind a partition gives up
        // (indeterminate) and goes on.
        let client = cluster.client(Duration::from_secs(2), Duration::from_millis(700));
        // Clients 4 and 5 read at any node, followers included (ReadIndex).
        let any_node = (c >= 4).then(|| nodes.clone());
        let (history, stop, next_value) = (
            Arc::clone(&history),
            Arc::clone(&stop),
            Arc::clone(&next_value),
        );
        workers.push(tokio::spawn(async move {
            let mut rng = SplitMix64::new(c + 1);
            // This client's indeterminate writes not yet bounded (indexes
            // in the history).
            let mut pending: Vec<usize> = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let k = rng.below(KEYS);
                let now = || start.elapsed().as_micros() as u64;
                let call = now();
                let op = match rng.below(3) {
                    0 => match match &any_node {
                        Some(all) => {
                            let at = &all[rng.below(all.len() as u64) as usize];
                            client.read_at(at, &key_name(k)).await
                        }
                        None => client.read(&key_name(k)).await,
                    } {
                        Ok(v) => Some(Operation {
                            input: RegisterInput::Read,
                            output: Some(RegisterOutput::Read(decode(v))),
                            call,
                            ret: Some(now()),
                        }),
                        // A failed read constrains nothing.
                        Err(_) => None,
                    },
                    1 => {
                        let v = next_value.fetch_add(1, Ordering::SeqCst);
                        let cmd = Command::Put {
                            key: key_name(k),
                            value: v.to_be_bytes().to_vec(),
                        };
                        let input = RegisterInput::Write(Some(v));
                        Some(match client.write(&cmd).await {
                            Ok(ack) => {
                                assert_eq!(ack.response, Response::Applied { ops: 1 });
                                Operation {
                                    input,
                                    output: Some(RegisterOutput::Written),
                                    call,
                                    ret: Some(now()),
                                }
                            }
                            Err(_) => Operation {
                                input,
                                output: None,
                                call,
                                ret: None,
                            },
                        })
                    }
                    _ => {
                        // Expect a recent value (or absent) so some succeed.
                        let recent = next_value.load(Ordering::SeqCst);
                        let expected = if rng.chance(10) {
                            None
                        } else {
                            Some(recent.saturating_sub(1 + rng.below(3)))
                        };
                        let new = next_value.fetch_add(1, Ordering::SeqCst);
                        let cmd = Command::CompareAndSwap {
                            key: key_name(k),
                            expected: expected.map(|e| e.to_be_bytes().to_vec()),
                            new: Some(new.to_be_bytes().to_vec()),
                        };
                        let input = RegisterInput::Cas {
                            expected,
                            new: Some(new),
                        };
                        Some(match client.write(&cmd).await {
                            Ok(ack) => {
                                let swapped = match ack.response {
                                    Response::Swapped => true,
                                    Response::CasFailed { .. } => false,
                                    other => panic!("a CAS answered {other:?}"),
                                };
                                Operation {
                                    input,
                                    output: Some(RegisterOutput::Cas(swapped)),
                                    call,
                                    ret: Some(now()),
                                }
                            }
                            Err(_) => Operation {
                                input,
                                output: None,
                                call,
                                ret: None,
                            },
                        })
                    }
                };
                if let Some(op) = op {
                    let mut history = history.lock();
                    let acknowledged_write = op.ret.is_some() && op.input != RegisterInput::Read;
                    if acknowledged_write {
                        // The client's session makes a lost request unable
                        // to take effect after a later one of the same
                        // session is applied (it would answer `Stale`):
                        // each pending one took effect before this one
                        // returned, or never.
                        for i in pending.drain(..) {
                            if let Some((_, lost)) = history.get_mut(i) {
                                lost.ret = op.ret;
                            }
                        }
                    } else if op.ret.is_none() {
                        pending.push(history.len());
                    }
                    history.push((k, op));
                }
            }
        }));
    }

    let cut = Rules {
        cut: true,
        ..Rules::default()
    };
    let held = Duration::from_secs(hold);
    let mut faults = Vec::new();
    for round in 0..2 {
        let leader = find_leader(&admin, &cluster).await;
        let followers: Vec<u64> = (1..=NODES).filter(|&n| n != leader).collect();

        faults.push(format!("round {round}: leader {leader} isolated"));
        proxy.partition(&[leader]);
        tokio::time::sleep(held).await;
        proxy.heal();
        tokio::time::sleep(Duration::from_millis(500)).await;

        let leader = find_leader(&admin, &cluster).await;
        let followers_now: Vec<u64> = (1..=NODES).filter(|&n| n != leader).collect();
        faults.push(format!("follower {} isolated", followers_now[0]));
        proxy.partition(&[followers_now[0]]);
        tokio::time::sleep(held).await;
        proxy.heal();

        faults.push(format!(
            "bridge: {} and {} apart",
            followers[0], followers[1]
        ));
        proxy.cut_between(followers[0], followers[1]);
        tokio::time::sleep(held).await;
        proxy.heal();

        let leader = find_leader(&admin, &cluster).await;
        faults.push(format!("one-way: leader {leader}'s messages lost"));
        for n in 1..=NODES {
            if n != leader {
                proxy.set(leader, n, cut);
            }
        }
        tokio::time::sleep(held).await;
        proxy.heal();

        faults.push("every link: 20% loss, 5 ms delay".to_string());
        proxy.all(Rules {
            cut: false,
            delay_ms: 5,
            drop_percent: 20,
        });
        tokio::time::sleep(held).await;
        proxy.heal();

        let leader = find_leader(&admin, &cluster).await;
        faults.push(format!("leader {leader} killed"));
        cluster.kill(leader);
        tokio::time::sleep(held).await;
        cluster.start(leader);
    }
    proxy.heal();
    let healed = Instant::now();
    // The cluster recovers: a write is taken within 60 s.
    let recovery = cluster.client(Duration::from_secs(60), Duration::from_secs(2));
    let recovered = recovery
        .write(&Command::Put {
            key: b"recovered".to_vec(),
            value: b"1".to_vec(),
        })
        .await;
    if let Err(e) = recovered {
        let mut statuses = Vec::new();
        for addr in &nodes {
            statuses.push(format!("{addr}: {:?}", admin.status(addr).await));
        }
        panic!(
            "the cluster did not take a write within 60 s of the faults ending: {e}; {statuses:#?}"
        );
    }
    let recovered_in = healed.elapsed();
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.await.unwrap();
    }
    // Final reads of every key, after everything.
    for k in 0..KEYS {
        let call = start.elapsed().as_micros() as u64;
        let v = recovery.read(&key_name(k)).await.unwrap();
        history.lock().push((
            k,
            Operation {
                input: RegisterInput::Read,
                output: Some(RegisterOutput::Read(decode(v))),
                call,
                ret: Some(start.elapsed().as_micros() as u64),
            },
        ));
    }
    let history = history.lock().clone();
    let checked = Instant::now();
    let (verdict, key) = check_registers(&history, 1_000_000);
    println!(
        "faults (each {hold} s): {faults:?}; operations {:?}; recovered in {:.1} s; \
         verdict {verdict:?} (checked in {:.2} s)",
        summary(&history),
        recovered_in.as_secs_f64(),
        checked.elapsed().as_secs_f64()
    );
    assert_eq!(
        verdict,
        Verdict::Linearizable,
        "key {key:?}: the history is not linearizable"
    );
}
