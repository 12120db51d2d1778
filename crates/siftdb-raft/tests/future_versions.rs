//! A snapshot stream (and a snapshot directory's `SNAPSHOT` header) of the
//! format version after this build's, its checksum made to match, is
//! refused with the engine's `UnsupportedVersion` naming both versions —
//! by the stream decoder a follower feeds and by `Header::parse` — never
//! read as this version's bytes and never called damage.
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

use openraft::{CommittedLeaderId, LogId, Membership, StoredMembership};
use siftdb_raft::codec::Error;
use siftdb_raft::snapshot_file::{Header, Meta, StreamDecoder, HEADER_FILE, VERSION};

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
