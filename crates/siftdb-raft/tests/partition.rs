//! Partitions, message loss and kills under a register workload, checked
//! for linearizability.
//!
//! Three node processes whose raft messages all go through a fault proxy
//! (`common::proxy`). Clients (talking to the nodes directly; two of them
//! reading at any node, followers by ReadIndex, one reading at the leader
//! by its lease, `siftdb_raft::lease`) read, write
//! and compare-and-swap a few keys holding u64 values, every write a value
//! never written before; each operation's call and return times are
//! recorded, and an operation that fails (deadline) is recorded as
//! indeterminate (it may or may not have taken effect; it took effect
//! before the same client's next acknowledged write returned, or never:
//! the client's session makes a late copy `Stale`). Meanwhile the
//! faults take turns, each held for a while (`PATTERNS`): the leader
//! isolated; a follower isolated (a majority/minority split); a bridge
//! (one node sees both others, which do not see each other); one-way loss
//! (the leader's messages to the followers lost, theirs to it delivered);
//! every link losing 20% of its chunks and delaying each by 5 ms; the
//! leader killed with SIGKILL; a follower killed while the other two's
//! link loses 20% (killed nodes restart when the fault ends). Then every
//! link heals. Checked: the cluster takes a write within 60 s of the
//! faults ending; every history (one per key) is linearizable (Porcupine's
//! algorithm, `siftdb_testkit::linearizability`; Unknown, a search out of
//! budget, fails the test too), which also means no acknowledged write was
//! lost: a final read of each key after the faults must see the last write
//! linearized.
//!
//! By default 10 faults of 2 s each (every pattern at least once; about
//! 30 s in all). The long run: `SIFTDB_PARTITION_SECS=600` (fault time in
//! all; each held `SIFTDB_PARTITION_HOLD` seconds, 10 by default when the
//! total is 120 or more), with `--nocapture` for the report and
//! `SIFTDB_PARTITION_HISTORY=FILE` to keep the history (checked again by
//! `siftdb_testkit`'s `saved_history` test).
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
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use siftdb_raft::api::Consistency;
use siftdb_raft::{Command, Response};
use siftdb_testkit::linearizability::{
    check_registers_by_key, format_history, summary, KeyedOperation, Operation, RegisterInput,
    RegisterOutput, Verdict,
};
use siftdb_testkit::SplitMix64;

use common::proxy::{Proxy, Rules};
use common::{find_leader, Cluster};

const NODES: u64 = 3;
const CLIENTS: u64 = 6;
const KEYS: u64 = 3;

const LEADER_ISOLATED: &str = "leader isolated";
const FOLLOWER_ISOLATED: &str = "follower isolated";
const BRIDGE: &str = "bridge";
const ONE_WAY: &str = "one-way loss";
const LOSSY: &str = "20% loss, 5 ms delay";
const LEADER_KILLED: &str = "leader killed";
const FOLLOWER_KILLED: &str = "follower killed, lossy link";
/// The fault patterns, in the order they take turns.
const PATTERNS: [&str; 7] = [
    LEADER_ISOLATED,
    FOLLOWER_ISOLATED,
    BRIDGE,
    ONE_WAY,
    LOSSY,
    LEADER_KILLED,
    FOLLOWER_KILLED,
];
const CUT: Rules = Rules {
    cut: true,
    delay_ms: 0,
    drop_percent: 0,
};
const LOSS: Rules = Rules {
    cut: false,
    delay_ms: 0,
    drop_percent: 20,
};
/// Search steps the checker may take per key.
const CHECK_BUDGET: u64 = 100_000_000;

fn key_name(k: u64) -> Vec<u8> {
    format!("register-{k}").into_bytes()
}

fn decode(v: Option<Vec<u8>>) -> Option<u64> {
    v.map(|b| u64::from_be_bytes(b.try_into().unwrap()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_and_kills_keep_histories_linearizable() {
    let seconds = |name: &str| std::env::var(name).ok().and_then(|s| s.parse::<u64>().ok());
    let total = seconds("SIFTDB_PARTITION_SECS").unwrap_or(20);
    let hold = seconds("SIFTDB_PARTITION_HOLD").unwrap_or(if total >= 120 { 10 } else { 2 });
    common::in_test_dir(Duration::from_secs(300 + 2 * total), |path| async move {
        run(&path, total, hold).await;
    })
    .await;
}

async fn run(dir: &std::path::Path, total: u64, hold: u64) {
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
        // Clients 4 and 5 read at any node, followers included (ReadIndex);
        // client 3 reads at the leader by its lease.
        let any_node = (c >= 4).then(|| nodes.clone());
        let consistency = if c == 3 {
            Consistency::Lease
        } else {
            Consistency::Linearizable
        };
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
                        None => client.read_with(&key_name(k), consistency).await,
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

    // The faults, in turn, each held `hold`, until `total` has passed.
    let held = Duration::from_secs(hold);
    let mut faults: Vec<String> = Vec::new();
    let mut counts: BTreeMap<&'static str, u32> = BTreeMap::new();
    let faults_began = Instant::now();
    let mut turn = 0;
    while (faults.len() as u64) * hold < total {
        if turn > 0 {
            // A moment without faults, as after a real incident: the next
            // fault finds a leader.
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
        let pattern = PATTERNS[turn % PATTERNS.len()];
        turn += 1;
        *counts.entry(pattern).or_default() += 1;
        let leader = find_leader(&admin, &cluster).await;
        let followers: Vec<u64> = (1..=NODES).filter(|&n| n != leader).collect();
        // Which follower a fault hits turns too.
        let follower = followers[(turn / PATTERNS.len()) % followers.len()];
        let other = followers[1 - (turn / PATTERNS.len()) % followers.len()];
        let what = match pattern {
            LEADER_ISOLATED => {
                proxy.partition(&[leader]);
                format!("leader {leader} isolated")
            }
            FOLLOWER_ISOLATED => {
                proxy.partition(&[follower]);
                format!("follower {follower} isolated")
            }
            BRIDGE => {
                proxy.cut_between(follower, other);
                format!("bridge: {follower} and {other} apart, {leader} sees both")
            }
            ONE_WAY => {
                for n in &followers {
                    proxy.set(leader, *n, CUT);
                }
                format!("one-way: leader {leader}'s messages lost")
            }
            LOSSY => {
                proxy.all(Rules {
                    cut: false,
                    delay_ms: 5,
                    drop_percent: 20,
                });
                "every link: 20% loss, 5 ms delay".to_string()
            }
            LEADER_KILLED => {
                cluster.kill(leader);
                format!("leader {leader} killed")
            }
            _ => {
                cluster.kill(follower);
                // The survivors' link is lossy meanwhile.
                proxy.set(leader, other, LOSS);
                proxy.set(other, leader, LOSS);
                format!("follower {follower} killed, the others' link lossy")
            }
        };
        tokio::time::sleep(held).await;
        proxy.heal();
        for id in 1..=NODES {
            if !cluster.children.contains_key(&id) {
                cluster.start(id);
            }
        }
        faults.push(what);
    }
    let fault_time = faults_began.elapsed();
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
    // Lease reads answered under a lease / by ReadIndex instead, summed
    // over the nodes since their last start.
    let mut lease_reads = (0, 0);
    for addr in &nodes {
        if let Ok(s) = admin.status(addr).await {
            lease_reads.0 += s.lease_reads.0;
            lease_reads.1 += s.lease_reads.1;
        }
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
    if let Ok(path) = std::env::var("SIFTDB_PARTITION_HISTORY") {
        std::fs::write(path, format_history(&history)).unwrap();
    }
    let checked = Instant::now();
    let reports = check_registers_by_key(&history, CHECK_BUDGET);
    let check_time = checked.elapsed();
    let free = history.iter().filter(|(_, o)| o.ret.is_none()).count();
    let bounded = history
        .iter()
        .filter(|(_, o)| o.output.is_none() && o.ret.is_some())
        .count();
    println!(
        "{} faults, each held {hold} s ({} s of faults in {:.0} s): {counts:?}\n\
         in turn: {faults:?}\n\
         operations {:?} (indeterminate: {bounded} bounded by a later \
         acknowledged write of the same client, {free} never bounded)\n\
         recovered in {:.1} s after the faults ended; checked in {:.2} s\n\
         lease reads: {} under a lease, {} by ReadIndex (no lease held)",
        faults.len(),
        faults.len() as u64 * hold,
        fault_time.as_secs_f64(),
        summary(&history),
        recovered_in.as_secs_f64(),
        check_time.as_secs_f64(),
        lease_reads.0,
        lease_reads.1
    );
    for (key, report) in &reports {
        println!("key {key}: {report:?}");
    }
    for (key, report) in &reports {
        assert_eq!(
            report.verdict,
            Verdict::Linearizable,
            "key {key}: the history is not decided linearizable: {report:?}"
        );
    }
    // The checker is not vacuous on this history: key 0's final read
    // changed to a lost write (absent) or a stale one (the first value
    // acknowledged, overwritten by a write called after it returned) is
    // found.
    let written = |o: &Operation<RegisterInput, RegisterOutput>| match o.input {
        RegisterInput::Write(v) if o.output.is_some() => Some((v, o.call, o.ret.unwrap())),
        _ => None,
    };
    let key0: Vec<Operation<RegisterInput, RegisterOutput>> = history
        .iter()
        .filter(|(k, _)| *k == 0)
        .map(|(_, o)| o.clone())
        .collect();
    let first = key0.iter().filter_map(written).min_by_key(|w| w.2).unwrap();
    assert!(key0.iter().filter_map(written).any(|w| w.1 > first.2));
    for planted in [None, first.0] {
        let mut bad = key0.clone();
        let last = bad.len() - 1;
        assert_eq!(bad[last].input, RegisterInput::Read);
        bad[last].output = Some(RegisterOutput::Read(planted));
        let keyed: Vec<KeyedOperation> = bad.into_iter().map(|o| (0, o)).collect();
        assert_eq!(
            check_registers_by_key(&keyed, CHECK_BUDGET)[&0].verdict,
            Verdict::Illegal,
            "a final read of {planted:?} was not found"
        );
    }
}
