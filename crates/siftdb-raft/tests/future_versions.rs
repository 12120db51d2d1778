//! A snapshot stream (and a snapshot directory's `SNAPSHOT` header) of the
//! format version after this build's, its checksum made to match, is
//! refused with the engine's `UnsupportedVersion` naming both versions —
//! by the stream decoder a follower feeds and by `Header::parse` — never
//! read as this version's bytes and never called damage. So is a value of
//! the node's database (a log entry, the vote, a log id, a client session,
//! the live pointer) whose version byte is the next one: by the value
//! decoder, and by `LogStore::open` reading it back.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Membership, StoredMembership, Vote};
use siftdb_raft::codec::{self, Error, VALUE_KIND, VALUE_VERSION};
use siftdb_raft::snapshot_file::{Header, Meta, StreamDecoder, HEADER_FILE, VERSION};
use siftdb_raft::timings::Timings;
use siftdb_raft::{LogStore, NodeId, TypeConfig};

fn meta() -> Meta {
    let log_id = LogId::new(CommittedLeaderId::new(3, 1), 42);
    Meta {
        last_log_id: Some(log_id),
        last_membership: StoredMembership::new(
            Some(log_id),
            Membership::new(vec![BTreeSet::from([1, 2, 3])], None),
        ),
        snapshot_id: "3-1-42-7".into(),
    }
}

fn assert_refused(err: &Error, found: u64) {
    let Error::Db(siftdb::Error::UnsupportedVersion {
        path,
        kind,
        found: named_found,
        supported,
    }) = err
    else {
        panic!("not UnsupportedVersion: {err:?}");
    };
    assert_eq!(
        (path.as_path(), *kind, *named_found, *supported),
        (
            Path::new(HEADER_FILE),
            "raft snapshot",
            found,
            u64::from(VERSION)
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("format version {found}")),
        "{err}"
    );
}

/// The header: magic (8), version (4), body length (4), body, CRC-32 of
/// everything before it.
#[test]
fn a_snapshot_of_a_future_version_is_refused() {
    let mut bytes = Header::new(meta(), Vec::new()).unwrap().bytes;
    let future = VERSION + 1;
    bytes[8..12].copy_from_slice(&future.to_le_bytes());
    let body = bytes.len() - 4;
    let crc = crc32fast::hash(&bytes[..body]);
    bytes[body..].copy_from_slice(&crc.to_le_bytes());

    assert_refused(&Header::parse(&bytes).unwrap_err(), u64::from(future));
    for split in [1, 7, 16, bytes.len()] {
        let mut decoder = StreamDecoder::new();
        let mut fed = Ok(());
        for piece in bytes.chunks(split) {
            fed = decoder.feed(piece, &mut |_| panic!("no piece of it is handed on"));
            if fed.is_err() {
                break;
            }
        }
        assert_refused(&fed.unwrap_err(), u64::from(future));
        assert!(decoder.header().is_none());
    }
}

/// `err` is `UnsupportedVersion` for the value `what` of version `found`.
fn assert_value_refused(err: &Error, what: &str, found: u8) {
    let Error::Db(siftdb::Error::UnsupportedVersion {
        path,
        kind,
        found: named_found,
        supported,
    }) = err
    else {
        panic!("not UnsupportedVersion: {err:?}");
    };
    assert_eq!(
        (path.as_path(), *kind, *named_found, *supported),
        (
            Path::new(what),
            VALUE_KIND,
            u64::from(found),
            u64::from(VALUE_VERSION)
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains(&format!("format version {found}")),
        "{err}"
    );
}

/// `bytes` (an encoded value) claiming the next version.
fn future(mut bytes: Vec<u8>) -> Vec<u8> {
    bytes[0] = VALUE_VERSION + 1;
    bytes
}

/// Every kind of stored value: the decoder refuses the next version with
/// the typed error, whatever body follows (the body of the next version
/// may differ, so it is never read).
#[test]
fn a_value_of_a_future_version_is_refused() {
    let log_id = LogId::new(CommittedLeaderId::new(3, 1), 42);
    let entry: Entry<TypeConfig> = Entry {
        log_id,
        payload: EntryPayload::Blank,
    };
    let entry_bytes = codec::encode(&entry, "raft log entry").unwrap();
    assert!(codec::decode::<Entry<TypeConfig>>(&entry_bytes, "raft log entry").is_ok());
    let err =
        codec::decode::<Entry<TypeConfig>>(&future(entry_bytes), "raft log entry").unwrap_err();
    assert_value_refused(&err, "raft log entry", VALUE_VERSION + 1);

    let vote = codec::encode(&Vote::<NodeId>::new(3, 1), "vote").unwrap();
    let err = codec::decode::<Vote<NodeId>>(&future(vote), "vote").unwrap_err();
    assert_value_refused(&err, "vote", VALUE_VERSION + 1);

    let id = codec::encode(&Some(log_id), "committed log id").unwrap();
    let err = codec::decode::<Option<LogId<NodeId>>>(&future(id), "committed log id").unwrap_err();
    assert_value_refused(&err, "committed log id", VALUE_VERSION + 1);

    // A body that is not this version's encoding at all: still the version.
    let err = codec::decode::<Vote<NodeId>>(&[VALUE_VERSION + 1, 0xff, 0xff], "vote").unwrap_err();
    assert_value_refused(&err, "vote", VALUE_VERSION + 1);
    // Version 0 is no format's: damage.
    let err = codec::decode::<Vote<NodeId>>(&[0, 3, 1, 0], "vote").unwrap_err();
    assert!(
        matches!(err, Error::Db(siftdb::Error::Corruption { .. })),
        "{err:?}"
    );
}

/// A node's database holding a last-purged log id of the next version:
/// opening its log store is refused with the typed error, not corruption.
#[test]
fn a_log_store_with_a_future_value_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(siftdb::Db::open(dir.path()).unwrap());
    let log_id = LogId::new(CommittedLeaderId::new(3, 1), 42);
    let purged = codec::encode(&log_id, "last purged log id").unwrap();
    db.keyspace(codec::KEYSPACE_META)
        .unwrap()
        .put(codec::KEY_PURGED, future(purged))
        .unwrap();
    let Err(err) = LogStore::open(Arc::clone(&db), Arc::new(Timings::default())) else {
        panic!("a future value opened");
    };
    assert_value_refused(&err, "last purged log id", VALUE_VERSION + 1);
}
