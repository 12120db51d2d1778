//! How values and keys of the raft database are encoded, and the crate's
//! error type.
//!
//! Owns: the one value encoding (a format-version byte, then the postcard
//! encoding of the value), the keyspace names and key layouts of a node's
//! database, [`Error`] and its conversion into openraft's `StorageError`.
//! Must never: trust bytes it did not check — a version byte of another
//! format is the engine's `UnsupportedVersion`, a zero version byte,
//! trailing bytes or a failed decode a corruption error, never a panic.

use openraft::{AnyError, ErrorSubject, ErrorVerb, StorageError, StorageIOError};
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::node_id::NodeId;

/// The version byte every encoded value starts with.
pub const VALUE_VERSION: u8 = 2;

/// The kind [`decode`] names in the `UnsupportedVersion` of a value whose
/// version byte is another format's.
pub const VALUE_KIND: &str = "raft value";

/// Errors of the raft storage layer. File and corruption errors are the
/// engine's own kinds (`siftdb::Error::Io`, `siftdb::Error::Corruption`),
/// so a caller matches one set of kinds whichever layer found the problem.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine failed, a file operation failed, or stored bytes are not
    /// what was written.
    #[error(transparent)]
    Db(#[from] siftdb::Error),
    /// A value could not be encoded.
    #[error("encoding {what}: {detail}")]
    Encode {
        /// Which value.
        what: String,
        /// Why.
        detail: String,
    },
    /// A blocking task did not finish (the runtime is shutting down).
    #[error("background task failed: {0}")]
    Task(String),
    /// A purge waited for the state machine to hold the entries it removes,
    /// and the state machine failed instead.
    #[error("the state machine failed before applying up to log index {0}")]
    StateMachineFailed(u64),
}

impl Error {
    /// A corruption error.
    pub fn corruption(what: impl std::fmt::Display, detail: impl std::fmt::Display) -> Error {
        Error::Db(siftdb::Error::Corruption {
            what: what.to_string(),
            detail: detail.to_string(),
        })
    }

    /// An I/O error on `path`.
    pub fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Db(siftdb::Error::Io {
            path: Some(path.to_path_buf()),
            source,
        })
    }

    /// An I/O error on a stream that has no path (`what` says which), its
    /// kind kept.
    pub fn io_in(what: &str, source: std::io::Error) -> Error {
        Error::Db(siftdb::Error::Io {
            path: None,
            source: std::io::Error::new(source.kind(), format!("{what}: {source}")),
        })
    }

    /// openraft's storage error for this error, on `subject` while `verb`.
    pub fn storage(self, subject: ErrorSubject<NodeId>, verb: ErrorVerb) -> StorageError<NodeId> {
        StorageIOError::new(subject, verb, AnyError::new(&self)).into()
    }
}

/// Result of the storage layer.
pub type Result<T> = std::result::Result<T, Error>;

/// `value` as a version byte and its postcard encoding.
pub fn encode<T: Serialize>(value: &T, what: &str) -> Result<Vec<u8>> {
    let mut out = vec![VALUE_VERSION];
    postcard::to_io(value, &mut out).map_err(|e| Error::Encode {
        what: what.to_string(),
        detail: e.to_string(),
    })?;
    Ok(out)
}

/// The value [`encode`] wrote, checked: version byte, a full decode, no
/// trailing bytes. A value of another format version (a newer build's, or
/// an older one this build no longer reads) is the engine's
/// `UnsupportedVersion` naming `what` and both versions, as a table or log
/// of another version is: not damage, so nothing treats it as such. A
/// version byte of 0, which no format has, is `Corruption`.
pub fn decode<T: DeserializeOwned>(bytes: &[u8], what: &str) -> Result<T> {
    let Some((&version, body)) = bytes.split_first() else {
        return Err(Error::corruption(what, "empty value"));
    };
    if version != VALUE_VERSION {
        if version == 0 {
            return Err(Error::corruption(what, "value format version 0"));
        }
        return Err(Error::Db(siftdb::Error::UnsupportedVersion {
            path: std::path::PathBuf::from(what),
            kind: VALUE_KIND,
            found: u64::from(version),
            supported: u64::from(VALUE_VERSION),
        }));
    }
    let (value, rest) =
        postcard::take_from_bytes::<T>(body).map_err(|e| Error::corruption(what, e))?;
    if !rest.is_empty() {
        return Err(Error::corruption(
            what,
            format!("{} trailing bytes after the value", rest.len()),
        ));
    }
    Ok(value)
}

/// The keyspace of the raft log: one entry per key.
pub const KEYSPACE_LOG: &str = "raft.log";
/// The keyspace of the node's small raft records: the vote, the last purged
/// log id, the committed log id and which state generation is live.
pub const KEYSPACE_META: &str = "raft.meta";
/// Every state-machine keyspace is named this and its generation number.
pub const STATE_KEYSPACE_PREFIX: &str = "state.";
/// The vote, in the meta keyspace.
pub const KEY_VOTE: &[u8] = b"vote";
/// The last purged log id, in the meta keyspace.
pub const KEY_PURGED: &[u8] = b"purged";
/// The committed log id, in the meta keyspace.
pub const KEY_COMMITTED: &[u8] = b"committed";
/// Which state generation and which snapshot file are live
/// ([`crate::pointer::Pointer`]), in the meta keyspace.
pub const KEY_LIVE: &[u8] = b"live";

/// The name of the state-machine keyspace of generation `generation`.
pub fn state_keyspace(generation: u64) -> String {
    format!("{STATE_KEYSPACE_PREFIX}{generation}")
}

/// The generation a state-machine keyspace's name says, or `None` for any
/// other name.
pub fn state_generation(keyspace: &str) -> Option<u64> {
    let digits = keyspace.strip_prefix(STATE_KEYSPACE_PREFIX)?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// The log keyspace's key of entry `index`: the index big endian, so key
/// order is index order and a range of indexes is a range of keys.
pub fn log_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The index a log key names, or `None` for a key that is not 8 bytes.
pub fn log_index(key: &[u8]) -> Option<u64> {
    let bytes: [u8; 8] = key.try_into().ok()?;
    Some(u64::from_be_bytes(bytes))
}

/// First byte of every user key in a state-machine keyspace.
pub const DATA_PREFIX: u8 = b'd';
/// First byte of every client-session key in a state-machine keyspace
/// (then the client id, u64 big-endian).
pub const SESSION_PREFIX: u8 = b's';
/// The last applied log id, in a state-machine keyspace.
pub const KEY_APPLIED: &[u8] = b"m/applied";
/// The last applied membership, in a state-machine keyspace.
pub const KEY_MEMBERSHIP: &[u8] = b"m/membership";

/// The state-machine keyspace's key of user key `key`.
pub fn data_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len() + 1);
    out.push(DATA_PREFIX);
    out.extend_from_slice(key);
    out
}

/// The state-machine keyspace's keys of the user keys in `[start, end)`
/// (`end: None`: every user key from `start` on), as a half-open range
/// that holds data keys only: unbounded, it ends where the data prefix
/// does, before the sessions and the metadata.
pub fn data_range(start: &[u8], end: Option<&[u8]>) -> (Vec<u8>, Vec<u8>) {
    const DATA_END: u8 = DATA_PREFIX + 1;
    let end = match end {
        Some(end) => data_key(end),
        None => vec![DATA_END],
    };
    (data_key(start), end)
}

/// The state-machine keyspace's key of client `client`'s session.
pub fn session_key(client: u64) -> [u8; 9] {
    let mut out = [SESSION_PREFIX; 9];
    for (slot, byte) in out.iter_mut().skip(1).zip(client.to_be_bytes()) {
        *slot = byte;
    }
    out
}

/// Whether `key` of a state-machine keyspace is replicated state (a user
/// key or a client session), which a snapshot carries, as opposed to the
/// node's bookkeeping under `m/`.
pub fn is_replicated_state(key: &[u8]) -> bool {
    matches!(key.first(), Some(&DATA_PREFIX) | Some(&SESSION_PREFIX))
}

/// The user key of a state-machine data key.
pub fn user_key(data_key: &[u8]) -> Option<&[u8]> {
    match data_key.split_first() {
        Some((&DATA_PREFIX, rest)) => Some(rest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::TypeConfig;
    use openraft::LogId;

    #[test]
    fn log_keys_sort_by_index() {
        let mut keys: Vec<_> = [5u64, 256, 1, u64::MAX, 0, 255]
            .iter()
            .map(|&i| log_key(i))
            .collect();
        keys.sort();
        let back: Vec<_> = keys.iter().map(|k| log_index(k).unwrap()).collect();
        assert_eq!(back, vec![0, 1, 5, 255, 256, u64::MAX]);
        assert_eq!(log_index(b"vote"), None);
        assert_eq!(log_index(&[1, 2, 3, 4, 5, 6, 7, 8, 9]), None);
    }

    #[test]
    fn state_keyspace_names_round_trip() {
        assert_eq!(state_keyspace(7), "state.7");
        assert_eq!(state_generation(&state_keyspace(u64::MAX)), Some(u64::MAX));
        assert_eq!(state_generation("state."), None);
        assert_eq!(state_generation("state.-1"), None);
        assert_eq!(state_generation("state.1x"), None);
        assert_eq!(state_generation(KEYSPACE_LOG), None);
        assert_eq!(state_generation("default"), None);
    }

    #[test]
    fn values_are_checked() {
        let v = encode(&(7u64, "x".to_string()), "t").unwrap();
        assert_eq!(decode::<(u64, String)>(&v, "t").unwrap(), (7, "x".into()));
        assert!(decode::<(u64, String)>(&[], "t").is_err());
        let mut wrong = v.clone();
        wrong[0] = 9;
        assert!(matches!(
            decode::<(u64, String)>(&wrong, "t"),
            Err(Error::Db(siftdb::Error::UnsupportedVersion {
                found: 9,
                ..
            }))
        ));
        wrong[0] = 0;
        assert!(matches!(
            decode::<(u64, String)>(&wrong, "t"),
            Err(Error::Db(siftdb::Error::Corruption { .. }))
        ));
        let mut long = v.clone();
        long.push(0);
        assert!(decode::<(u64, String)>(&long, "t").is_err());
        assert!(decode::<(u64, String)>(&v[..v.len() - 1], "t").is_err());
    }

    /// The bytes `docs/format.md` describes: a change in openraft's serde
    /// layout or in postcard fails here before it reaches a disk.
    #[test]
    fn encodings_are_pinned() {
        use crate::types::{Command, Op, Proposal, Request, Session};
        use openraft::{CommittedLeaderId, Entry, EntryPayload, Vote};
        let id = LogId::<NodeId>::new(CommittedLeaderId::new(3, 2), 300);
        assert_eq!(encode(&id, "t").unwrap(), [2, 3, 2, 0xac, 0x02]);
        assert_eq!(encode(&Some(id), "t").unwrap(), [2, 1, 3, 2, 0xac, 0x02]);
        assert_eq!(encode(&None::<LogId<NodeId>>, "t").unwrap(), [2, 0]);
        assert_eq!(
            encode(&Vote::<NodeId>::new(5, 1), "t").unwrap(),
            [2, 5, 1, 0]
        );
        assert_eq!(
            encode(&Vote::<NodeId>::new_committed(5, 1), "t").unwrap(),
            [2, 5, 1, 1]
        );
        let at = LogId::<NodeId>::new(CommittedLeaderId::new(3, 2), 7);
        let blank = Entry::<TypeConfig> {
            log_id: at,
            payload: EntryPayload::Blank,
        };
        assert_eq!(encode(&blank, "t").unwrap(), [2, 3, 2, 7, 0]);
        let normal = Entry::<TypeConfig> {
            log_id: at,
            payload: EntryPayload::Normal(Proposal {
                time_ms: 300,
                requests: vec![
                    Request::unsessioned(Command::Put {
                        key: b"k".to_vec(),
                        value: b"v".to_vec(),
                    }),
                    Request {
                        session: Some(Session { client: 9, seq: 1 }),
                        command: Command::Delete { key: b"j".to_vec() },
                    },
                    Request::unsessioned(Command::CompareAndSwap {
                        key: b"c".to_vec(),
                        expected: None,
                        new: Some(b"n".to_vec()),
                    }),
                    Request::unsessioned(Command::Increment {
                        key: b"i".to_vec(),
                        delta: 2,
                    }),
                ],
            }),
        };
        assert_eq!(
            encode(&normal, "t").unwrap(),
            [
                2, 3, 2, 7, 1, 0xac, 0x02, 4, // time 300, four requests
                0, 0, 1, b'k', 1, b'v', // put k v
                1, 9, 1, 1, 1, b'j', // session 9/1, delete j
                0, 3, 1, b'c', 0, 1, 1, b'n', // cas c none -> n
                0, 4, 1, b'i', 2, // increment i by 2
            ]
        );
        // The range deletes, appended after the variants above.
        let range = Request::unsessioned(Command::DeleteRange {
            start: b"a".to_vec(),
            end: None,
        });
        assert_eq!(encode(&range, "t").unwrap(), [2, 0, 5, 1, b'a', 0]);
        let bounded = Request::unsessioned(Command::DeleteRange {
            start: Vec::new(),
            end: Some(b"b".to_vec()),
        });
        assert_eq!(encode(&bounded, "t").unwrap(), [2, 0, 5, 0, 1, 1, b'b']);
        let batch = Request::unsessioned(Command::Batch(vec![
            Op::Delete { key: b"k".to_vec() },
            Op::DeleteRange {
                start: b"a".to_vec(),
                end: Some(b"b".to_vec()),
            },
        ]));
        assert_eq!(
            encode(&batch, "t").unwrap(),
            [
                2, 0, 2, 2, // no session, a batch of two ops
                1, 1, b'k', // delete k
                2, 1, b'a', 1, 1, b'b', // range delete [a, b)
            ]
        );
    }

    #[test]
    fn data_keys_round_trip() {
        assert_eq!(user_key(&data_key(b"abc")), Some(&b"abc"[..]));
        assert_eq!(user_key(KEY_APPLIED), None);
    }

    /// An unbounded data range holds the largest user key and no session
    /// or metadata key.
    #[test]
    fn data_ranges_hold_data_keys_only() {
        let (start, end) = data_range(b"", None);
        let inside = |key: &[u8]| start.as_slice() <= key && key < end.as_slice();
        assert!(inside(&data_key(b"")));
        assert!(inside(&data_key(&[0xff; crate::types::MAX_KEY_LEN])));
        assert!(!inside(&session_key(0)));
        assert!(!inside(&session_key(u64::MAX)));
        assert!(!inside(KEY_APPLIED));
        assert!(!inside(KEY_MEMBERSHIP));
        assert_eq!(
            data_range(b"a", Some(b"b")),
            (data_key(b"a"), data_key(b"b"))
        );
    }
}
