//! The state machine's unit tests: applies (sessions, compare-and-swap,
//! range deletes, a random model), snapshot builds and installs, and the
//! retirement of old generations, each through [`StateMachine`] as openraft
//! drives it.
//! Must never: reach past the state machine into siftdb's files to make a
//! case pass (each case sees only what a node would).

use std::collections::BTreeMap;

use super::*;
use crate::types::{Command, Op, OpRef, Request, SESSION_EXPIRY_MS};
use openraft::CommittedLeaderId;

use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn put(index: u64, key: &[u8], value: &[u8]) -> Entry<TypeConfig> {
    entry(
        index,
        0,
        vec![Request::unsessioned(Command::Put {
            key: key.to_vec(),
            value: value.to_vec(),
        })],
    )
}

/// The stream of a snapshot of a fresh node that applied `entries`.
async fn snapshot_of(entries: Vec<Entry<TypeConfig>>) -> (Meta, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    sm.apply(entries).await.unwrap();
    build(&mut sm).await
}

/// A snapshot of `sm` now: its meta and its stream.
async fn build(sm: &mut StateMachine) -> (Meta, Vec<u8>) {
    let snap = sm
        .get_snapshot_builder()
        .await
        .build_snapshot()
        .await
        .unwrap();
    let mut bytes = Vec::new();
    let mut data = snap.snapshot;
    data.read_to_end(&mut bytes).await.unwrap();
    (snap.meta, bytes)
}

/// Receives `bytes` and installs them as the snapshot `meta`.
async fn try_install(sm: &mut StateMachine, meta: &Meta, bytes: &[u8]) -> bool {
    let mut received = sm.begin_receiving_snapshot().await.unwrap();
    // In chunks, one of them sent twice (as after a lost answer).
    let mut offset = 0;
    for chunk in bytes.chunks(1000) {
        use tokio::io::AsyncSeekExt;
        received
            .seek(std::io::SeekFrom::Start(offset as u64))
            .await
            .unwrap();
        if received.write_all(chunk).await.is_err() {
            return false;
        }
        if offset == 0 && chunk.len() == 1000 {
            received.seek(std::io::SeekFrom::Start(0)).await.unwrap();
            received.write_all(chunk).await.unwrap();
        }
        offset += chunk.len();
    }
    sm.install_snapshot(meta, received).await.is_ok()
}

async fn install(sm: &mut StateMachine, meta: &Meta, bytes: &[u8]) {
    assert!(try_install(sm, meta, bytes).await);
}

/// A reader that took the live generation before an install keeps
/// reading it; its keyspace is dropped when that reader lets go.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_generation_is_dropped_after_its_last_reader() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    let (meta, bytes) = snapshot_of(vec![put(5, b"k", b"one")]).await;
    install(&mut sm, &meta, &bytes).await;
    let held = Arc::clone(&sm.shared.live.read().generation);
    assert_eq!(held.number, 2);

    let (meta, bytes) = snapshot_of(vec![put(9, b"k", b"two")]).await;
    install(&mut sm, &meta, &bytes).await;
    assert_eq!(sm.reader().get(b"k").unwrap().as_deref(), Some(&b"two"[..]));
    // Retired but held: still there, still read.
    assert!(sm.shared.db.keyspaces().contains(&state_keyspace(2)));
    assert_eq!(
        held.keyspace.get(data_key(b"k")).unwrap().as_deref(),
        Some(&b"one"[..])
    );
    drop(held);
    assert!(!sm.shared.db.keyspaces().contains(&state_keyspace(2)));
    assert!(sm.shared.db.keyspaces().contains(&state_keyspace(3)));
}

/// A snapshot that fails its checks (a flipped byte anywhere: header,
/// frame, frame checksum) leaves the old state live, no keyspace of
/// the failed install and no received files behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_snapshot_leaves_the_old_state_and_no_keyspace() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    let (meta, bytes) = snapshot_of(vec![put(5, b"k", b"one")]).await;
    install(&mut sm, &meta, &bytes).await;
    let (meta, bytes) = snapshot_of(vec![put(8, b"k", b"two"), put(9, b"l", b"x")]).await;
    for at in [3, bytes.len() / 2, bytes.len() - 1] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 1;
        assert!(!try_install(&mut sm, &meta, &damaged).await, "byte {at}");
        assert_eq!(sm.reader().stats().generation, 2);
        assert_eq!(sm.reader().get(b"k").unwrap().as_deref(), Some(&b"one"[..]));
        assert!(!sm.shared.db.keyspaces().contains(&state_keyspace(3)));
        let left: Vec<_> = fs::read_dir(dir.path().join(SNAPSHOTS))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left.len(), 1, "{left:?}");
    }
    // The same snapshot undamaged installs.
    install(&mut sm, &meta, &bytes).await;
    assert_eq!(sm.reader().get(b"l").unwrap().as_deref(), Some(&b"x"[..]));
}

fn entry(index: u64, time_ms: u64, requests: Vec<Request>) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(crate::types::Proposal { time_ms, requests }),
    }
}

fn incr(client: u64, seq: u64) -> Request {
    Request {
        session: Some(crate::types::Session { client, seq }),
        command: Command::Increment {
            key: b"n".to_vec(),
            delta: 1,
        },
    }
}

fn counter(sm: &StateMachine) -> u64 {
    let v = sm.reader().get(b"n").unwrap().unwrap();
    u64::from_be_bytes(v.as_ref().try_into().unwrap())
}

/// A repeated (client, seq) is answered with the first answer and not
/// applied again, in the same entry, in a later entry and in a later
/// `apply` call; a lower seq is `Stale`; an unknown session above seq 1
/// is `SessionExpired`; requests without a session apply every time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_request_is_applied_once() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    let out = sm
        .apply(vec![
            entry(1, 10, vec![incr(7, 1), incr(7, 1), incr(8, 1)]),
            entry(2, 10, vec![incr(7, 1), incr(7, 2)]),
        ])
        .await
        .unwrap();
    let c = |value| Response::Counter { value };
    assert_eq!(out, vec![vec![c(1), c(1), c(2)], vec![c(1), c(3)]]);
    let out = sm
        .apply(vec![entry(
            3,
            11,
            vec![
                incr(7, 2),
                incr(7, 1),
                incr(9, 5),
                Request::unsessioned(Command::Increment {
                    key: b"n".to_vec(),
                    delta: 1,
                }),
                Request::unsessioned(Command::Increment {
                    key: b"n".to_vec(),
                    delta: 1,
                }),
            ],
        )])
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![vec![
            c(3),
            Response::Stale,
            Response::SessionExpired,
            c(4),
            c(5)
        ]]
    );
    assert_eq!(counter(&sm), 5);
}

/// Compare-and-swap reads the writes of earlier requests of the same
/// `apply` call, and answers what it found when it fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_and_swap_sees_earlier_writes() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    let cas = |expected: Option<&[u8]>, new: Option<&[u8]>| {
        Request::unsessioned(Command::CompareAndSwap {
            key: b"r".to_vec(),
            expected: expected.map(<[u8]>::to_vec),
            new: new.map(<[u8]>::to_vec),
        })
    };
    let out = sm
        .apply(vec![
            entry(1, 0, vec![cas(None, Some(b"a")), cas(None, Some(b"b"))]),
            entry(2, 0, vec![cas(Some(b"a"), Some(b"c"))]),
        ])
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![
            vec![
                Response::Swapped,
                Response::CasFailed {
                    current: Some(b"a".to_vec())
                }
            ],
            vec![Response::Swapped]
        ]
    );
    let out = sm
        .apply(vec![entry(
            3,
            0,
            vec![cas(Some(b"c"), None), cas(None, None)],
        )])
        .await
        .unwrap();
    assert_eq!(out, vec![vec![Response::Swapped, Response::Swapped]]);
    assert_eq!(sm.reader().get(b"r").unwrap(), None);
}

/// An idle session is removed by the sweep at an index that is a
/// multiple of `SESSION_SWEEP_EVERY` once the entries' clock passed its
/// expiry; a session used recently stays.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_expire_by_the_entries_clock() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    sm.apply(vec![entry(1, 1_000, vec![incr(1, 1), incr(2, 1)])])
        .await
        .unwrap();
    let late = 1_000 + SESSION_EXPIRY_MS + 1;
    // Client 2 is used just before the sweep; client 1 is idle.
    sm.apply(vec![
        entry(SESSION_SWEEP_EVERY - 1, late, vec![incr(2, 2)]),
        entry(SESSION_SWEEP_EVERY, late, vec![]),
    ])
    .await
    .unwrap();
    let out = sm
        .apply(vec![entry(
            SESSION_SWEEP_EVERY + 1,
            late,
            vec![incr(1, 2), incr(2, 3)],
        )])
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![vec![
            Response::SessionExpired,
            Response::Counter { value: 4 }
        ]]
    );
}

/// Sessions travel in snapshots: a follower that installed one answers
/// a repeat with the first answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_survive_a_snapshot_install() {
    let leader_dir = tempfile::tempdir().unwrap();
    let (_log, mut leader, _) = crate::open_storage(leader_dir.path()).unwrap();
    leader
        .apply(vec![entry(1, 5, vec![incr(3, 1), incr(3, 2)])])
        .await
        .unwrap();
    let (meta, bytes) = build(&mut leader).await;

    let follower_dir = tempfile::tempdir().unwrap();
    let (_log, mut follower, _) = crate::open_storage(follower_dir.path()).unwrap();
    install(&mut follower, &meta, &bytes).await;
    let out = follower
        .apply(vec![entry(2, 6, vec![incr(3, 2), incr(3, 3)])])
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![vec![
            Response::Counter { value: 2 },
            Response::Counter { value: 3 }
        ]]
    );
    assert_eq!(counter(&follower), 3);
}

fn req(command: Command) -> Request {
    Request::unsessioned(command)
}

fn put_cmd(key: &[u8], value: &[u8]) -> Command {
    Command::Put {
        key: key.to_vec(),
        value: value.to_vec(),
    }
}

fn range_cmd(start: &[u8], end: Option<&[u8]>) -> Command {
    Command::DeleteRange {
        start: start.to_vec(),
        end: end.map(<[u8]>::to_vec),
    }
}

fn cas_cmd(key: &[u8], expected: Option<&[u8]>, new: &[u8]) -> Command {
    Command::CompareAndSwap {
        key: key.to_vec(),
        expected: expected.map(<[u8]>::to_vec),
        new: Some(new.to_vec()),
    }
}

/// Every user key and value of `sm`'s state.
fn contents(sm: &StateMachine) -> Vec<(Vec<u8>, Vec<u8>)> {
    let scanned = sm.reader().scan(b"").unwrap();
    scanned
        .into_iter()
        .map(|(k, v)| (k.to_vec(), v.to_vec()))
        .collect()
}

/// Inside one entry, reads after a range delete see the keys it covers
/// absent (those already stored and those the entry put before it),
/// but a put after it present; the keyspace ends the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_in_the_entry_of_a_range_delete_see_it() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    sm.apply(vec![entry(
        1,
        0,
        vec![req(put_cmd(b"a", b"1")), req(put_cmd(b"b", b"22"))],
    )])
    .await
    .unwrap();
    let applied = Response::Applied { ops: 1 };
    let out = sm
        .apply(vec![entry(
            2,
            0,
            vec![
                // Stored keys, then a read of each.
                req(range_cmd(b"a", Some(b"c"))),
                req(cas_cmd(b"a", None, b"new-a")),
                req(Command::Increment {
                    key: b"b".to_vec(),
                    delta: 5,
                }),
                // A put of this entry, deleted, then read.
                req(put_cmd(b"p", b"early")),
                req(Command::Batch(vec![
                    Op::Put {
                        key: b"q".to_vec(),
                        value: b"early".to_vec(),
                    },
                    Op::DeleteRange {
                        start: b"p".to_vec(),
                        end: Some(b"r".to_vec()),
                    },
                ])),
                req(cas_cmd(b"p", None, b"p-absent")),
                req(cas_cmd(b"q", Some(b"early"), b"q-present")),
                // Deleted, put again, read.
                req(put_cmd(b"x", b"early")),
                req(range_cmd(b"x", Some(b"y"))),
                req(put_cmd(b"x", b"late")),
                req(cas_cmd(b"x", Some(b"late"), b"x-late")),
            ],
        )])
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![vec![
            applied.clone(),
            Response::Swapped,
            Response::Counter { value: 5 },
            applied.clone(),
            Response::Applied { ops: 2 },
            Response::Swapped,
            Response::CasFailed { current: None },
            applied.clone(),
            applied.clone(),
            applied,
            Response::Swapped,
        ]]
    );
    assert_eq!(
        contents(&sm),
        vec![
            (b"a".to_vec(), b"new-a".to_vec()),
            (b"b".to_vec(), 5u64.to_be_bytes().to_vec()),
            (b"p".to_vec(), b"p-absent".to_vec()),
            (b"x".to_vec(), b"x-late".to_vec()),
        ]
    );
}

/// A range delete over every user key leaves the client sessions (a
/// repeat is still answered with its first answer, in the same entry
/// and later) and the keys under `m/`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_delete_leaves_sessions_and_metadata() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    let state = Arc::clone(&sm.shared.live.read().generation);
    state.keyspace.put(b"m/marker", b"kept").unwrap();
    let c = |value| Response::Counter { value };
    let out = sm
        .apply(vec![
            entry(1, 5, vec![incr(7, 1), incr(7, 2)]),
            entry(
                2,
                5,
                vec![
                    incr(8, 1),
                    incr(8, 2),
                    req(range_cmd(b"", None)),
                    incr(8, 2),
                    incr(8, 3),
                ],
            ),
        ])
        .await
        .unwrap();
    assert_eq!(
        out,
        vec![
            vec![c(1), c(2)],
            vec![c(3), c(4), Response::Applied { ops: 1 }, c(4), c(1)]
        ]
    );
    let out = sm
        .apply(vec![entry(3, 5, vec![incr(7, 2), incr(7, 3)])])
        .await
        .unwrap();
    assert_eq!(out, vec![vec![c(2), c(2)]]);
    assert_eq!(
        state.keyspace.get(b"m/marker").unwrap().as_deref(),
        Some(&b"kept"[..])
    );
    for client in [7, 8] {
        assert!(state
            .keyspace
            .get(codec::session_key(client))
            .unwrap()
            .is_some());
    }
    let (applied, _) = read_applied(&state.keyspace).unwrap();
    assert_eq!(applied.map(|id| id.index), Some(3));
}

/// A range delete without an end removes every user key from its
/// start on, the longest included; one from the empty key removes all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_range_delete_without_an_end_reaches_the_last_key() {
    let dir = tempfile::tempdir().unwrap();
    let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
    let longest = vec![0xff; crate::types::MAX_KEY_LEN];
    sm.apply(vec![entry(
        1,
        0,
        vec![
            req(put_cmd(b"a", b"1")),
            req(put_cmd(b"b", b"2")),
            req(put_cmd(b"\xff", b"3")),
            req(put_cmd(&longest, b"4")),
        ],
    )])
    .await
    .unwrap();
    sm.apply(vec![entry(2, 0, vec![req(range_cmd(b"b", None))])])
        .await
        .unwrap();
    assert_eq!(contents(&sm), vec![(b"a".to_vec(), b"1".to_vec())]);
    sm.apply(vec![entry(3, 0, vec![req(range_cmd(b"", None))])])
        .await
        .unwrap();
    assert_eq!(contents(&sm), vec![]);
}

/// What a command does to a map of the user keys, and its answer.
fn model_apply(model: &mut BTreeMap<Vec<u8>, Vec<u8>>, cmd: &Command) -> Response {
    if let Err(reason) = cmd.validate() {
        return Response::Rejected { reason };
    }
    match cmd {
        Command::CompareAndSwap { key, expected, new } => {
            let current = model.get(key).cloned();
            if current != *expected {
                return Response::CasFailed { current };
            }
            match new {
                Some(value) => model.insert(key.clone(), value.clone()),
                None => model.remove(key),
            };
            Response::Swapped
        }
        Command::Increment { key, delta } => {
            let old = match model.get(key) {
                None => 0,
                Some(v) => match <[u8; 8]>::try_from(v.as_slice()) {
                    Ok(bytes) => u64::from_be_bytes(bytes),
                    Err(_) => {
                        return Response::Rejected {
                            reason: format!("the value is {} bytes, not a counter", v.len()),
                        }
                    }
                },
            };
            let value = old.wrapping_add(*delta);
            model.insert(key.clone(), value.to_be_bytes().to_vec());
            Response::Counter { value }
        }
        _ => {
            let ops = cmd.ops();
            for op in &ops {
                match *op {
                    OpRef::Put(key, value) => {
                        model.insert(key.to_vec(), value.to_vec());
                    }
                    OpRef::Delete(key) => {
                        model.remove(key);
                    }
                    OpRef::DeleteRange(start, end) => {
                        model.retain(|k, _| {
                            k.as_slice() < start || end.is_some_and(|end| k.as_slice() >= end)
                        });
                    }
                }
            }
            Response::Applied { ops: ops.len() }
        }
    }
}

/// A random command over a few short keys (an invalid range now and
/// then).
fn random_command(rng: &mut siftdb_testkit::SplitMix64) -> Command {
    fn key(rng: &mut siftdb_testkit::SplitMix64, min_len: usize) -> Vec<u8> {
        let len = min_len + rng.index(3 - min_len);
        (0..len).map(|_| b"abcd"[rng.index(4)]).collect()
    }
    fn value(rng: &mut siftdb_testkit::SplitMix64) -> Vec<u8> {
        if rng.chance(30) {
            rng.below(4).to_be_bytes().to_vec()
        } else {
            vec![b'v'; rng.index(3)]
        }
    }
    fn range(rng: &mut siftdb_testkit::SplitMix64) -> (Vec<u8>, Option<Vec<u8>>) {
        let start = key(rng, 0);
        let end = if rng.chance(25) {
            None
        } else {
            let end = key(rng, 0);
            // Mostly a range that holds keys.
            if end <= start && rng.chance(80) {
                let mut past = start.clone();
                past.push(b'z');
                Some(past)
            } else {
                Some(end)
            }
        };
        (start, end)
    }
    match rng.index(7) {
        0 => Command::Put {
            key: key(rng, 1),
            value: value(rng),
        },
        1 => Command::Delete { key: key(rng, 1) },
        2 | 3 => {
            let (start, end) = range(rng);
            Command::DeleteRange { start, end }
        }
        4 => Command::Batch(
            (0..1 + rng.index(4))
                .map(|_| match rng.index(3) {
                    0 => Op::Put {
                        key: key(rng, 1),
                        value: value(rng),
                    },
                    1 => Op::Delete { key: key(rng, 1) },
                    _ => {
                        let (start, end) = range(rng);
                        Op::DeleteRange { start, end }
                    }
                })
                .collect(),
        ),
        5 => Command::CompareAndSwap {
            key: key(rng, 1),
            expected: rng.chance(50).then(|| value(rng)),
            new: rng.chance(80).then(|| value(rng)),
        },
        _ => Command::Increment {
            key: key(rng, 1),
            delta: rng.below(3),
        },
    }
}

/// Random puts, deletes, range deletes, batches, compare-and-swaps and
/// increments, several to an entry and several entries to an apply
/// call, answer and store what a map does with them; now and then the
/// state is flushed (range deletes into tables), and at the end a
/// snapshot of it installed on another node holds the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn random_commands_match_a_model() {
    for seed in 1..=4u64 {
        let mut rng = siftdb_testkit::SplitMix64::new(seed);
        let dir = tempfile::tempdir().unwrap();
        let (_log, mut sm, _) = crate::open_storage(dir.path()).unwrap();
        let mut model = BTreeMap::new();
        let mut index = 0;
        for call in 0..150 {
            let mut entries = Vec::new();
            let mut want = Vec::new();
            for _ in 0..1 + rng.index(3) {
                index += 1;
                let commands: Vec<Command> = (0..rng.index(7))
                    .map(|_| random_command(&mut rng))
                    .collect();
                want.push(
                    commands
                        .iter()
                        .map(|cmd| model_apply(&mut model, cmd))
                        .collect::<Vec<_>>(),
                );
                entries.push(entry(index, 0, commands.into_iter().map(req).collect()));
            }
            let got = sm.apply(entries.clone()).await.unwrap();
            assert_eq!(got, want, "seed {seed}, call {call}: {entries:?}");
            let expected: Vec<_> = model.clone().into_iter().collect();
            assert_eq!(contents(&sm), expected, "seed {seed}, call {call}");
            if rng.chance(10) {
                sm.shared.db.flush().unwrap();
            }
        }
        let (meta, bytes) = build(&mut sm).await;
        let other_dir = tempfile::tempdir().unwrap();
        let (_log, mut other, _) = crate::open_storage(other_dir.path()).unwrap();
        install(&mut other, &meta, &bytes).await;
        let expected: Vec<_> = model.into_iter().collect();
        assert_eq!(contents(&other), expected, "seed {seed}, installed");
    }
}
