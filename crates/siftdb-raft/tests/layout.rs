//! A node's one database: which keyspaces it holds, how a snapshot install
//! switches the state generation, and what open drops after a crash left a
//! half-built generation behind.

use std::path::Path;

use bytes::Bytes;
use openraft::storage::RaftStateMachine;
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, RaftSnapshotBuilder};
use siftdb_raft::codec;
use siftdb_raft::types::{Proposal, Request};
use siftdb_raft::{Command, TypeConfig};
use tokio::io::AsyncWriteExt;

fn put_entry(index: u64, key: &str, value: &str) -> Entry<TypeConfig> {
    Entry {
        log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
        payload: EntryPayload::Normal(Proposal {
            time_ms: 0,
            requests: vec![Request::unsessioned(Command::Put {
                key: key.as_bytes().to_vec(),
                value: value.as_bytes().to_vec(),
            })],
        }),
    }
}

/// The keyspaces of the database of the node directory `dir` (closed).
fn keyspaces(dir: &Path) -> siftdb::Result<Vec<String>> {
    Ok(siftdb::Db::open(dir.join(siftdb_raft::DB_DIR))?.keyspaces())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn install_switches_generation_and_drops_the_old_one() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();

    // The leader applies three entries and builds a snapshot of them.
    let (_log, mut leader, _) = siftdb_raft::open_storage(leader_dir.path()).unwrap();
    leader
        .apply(vec![
            put_entry(1, "a", "1"),
            put_entry(2, "b", "2"),
            put_entry(3, "a", "3"),
        ])
        .await
        .unwrap();
    let mut builder = leader.get_snapshot_builder().await;
    let snapshot = builder.build_snapshot().await.unwrap();
    let mut bytes = Vec::new();
    {
        use tokio::io::AsyncReadExt;
        let mut file = snapshot.snapshot;
        file.read_to_end(&mut bytes).await.unwrap();
    }

    // The follower has state of its own in generation 1, then installs.
    {
        let (log, mut follower, _) = siftdb_raft::open_storage(follower_dir.path()).unwrap();
        follower
            .apply(vec![put_entry(1, "stale", "x")])
            .await
            .unwrap();
        let reader = follower.reader();
        assert_eq!(reader.stats().generation, 1);
        let mut received = follower.begin_receiving_snapshot().await.unwrap();
        received.write_all(&bytes).await.unwrap();
        received.flush().await.unwrap();
        follower
            .install_snapshot(&snapshot.meta, received)
            .await
            .unwrap();
        assert_eq!(reader.stats().generation, 2);
        assert_eq!(reader.get(b"a").unwrap().as_deref(), Some(&b"3"[..]));
        assert_eq!(reader.get(b"stale").unwrap(), None);
        let (applied, _) = follower.applied_state().await.unwrap();
        assert_eq!(applied.map(|l| l.index), Some(3));
        drop((log, follower, reader));
    }
    assert_eq!(
        keyspaces(follower_dir.path()).unwrap(),
        [
            "default",
            codec::KEYSPACE_LOG,
            codec::KEYSPACE_META,
            "state.2"
        ]
    );

    // After a reopen the new generation is live, with its state.
    let (log, mut follower, _) = siftdb_raft::open_storage(follower_dir.path()).unwrap();
    let reader = follower.reader();
    assert_eq!(reader.stats().generation, 2);
    assert_eq!(
        reader.scan(b"").unwrap(),
        [
            (Bytes::from_static(b"a"), Bytes::from_static(b"3")),
            (Bytes::from_static(b"b"), Bytes::from_static(b"2"))
        ]
    );
    let (applied, _) = follower.applied_state().await.unwrap();
    assert_eq!(applied.map(|l| l.index), Some(3));
    drop((log, follower, reader));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_drops_a_generation_the_pointer_does_not_name() {
    let dir = tempfile::tempdir().unwrap();
    {
        let (log, mut sm, _) = siftdb_raft::open_storage(dir.path()).unwrap();
        sm.apply(vec![put_entry(1, "k", "v")]).await.unwrap();
        drop((log, sm));
    }
    // What a crash in the middle of an install leaves: the next
    // generation's keyspace, partly written, never made live.
    {
        let db = siftdb::Db::open(dir.path().join(siftdb_raft::DB_DIR)).unwrap();
        let half = db.keyspace(&codec::state_keyspace(2)).unwrap();
        half.put(b"dk", b"half-installed").unwrap();
    }
    let (log, sm, _) = siftdb_raft::open_storage(dir.path()).unwrap();
    let reader = sm.reader();
    assert_eq!(reader.stats().generation, 1);
    assert_eq!(reader.get(b"k").unwrap().as_deref(), Some(&b"v"[..]));
    drop((log, sm, reader));
    assert_eq!(
        keyspaces(dir.path()).unwrap(),
        [
            "default",
            codec::KEYSPACE_LOG,
            codec::KEYSPACE_META,
            "state.1"
        ]
    );
}
