//! The replicated commands and openraft's type configuration.
//!
//! Owns: [`TypeConfig`], the command set a client sends ([`Command`],
//! [`Op`]), the client session a command may carry for exactly-once
//! application ([`Session`], [`Request`]), what one raft entry carries
//! ([`Proposal`]: the requests a leader gathered from concurrent clients and
//! the leader's clock when it cut them), what applying a command answers
//! ([`Response`]), and the size limits a command is checked against before
//! it is proposed and again when applied.
//! Must never: let a command that siftdb would refuse reach the log
//! unchecked — an apply that fails is fatal to a raft node, so a command
//! that breaks a limit is answered `Rejected` on every node alike.

use serde::{Deserialize, Serialize};

pub use crate::node_id::NodeId;

/// The largest key a command may carry: siftdb's limit less the one-byte
/// prefix the state machine puts before user keys.
pub const MAX_KEY_LEN: usize = siftdb::MAX_KEY_LEN - 1;

/// The largest command (keys and values summed) a node accepts.
pub const MAX_COMMAND_BYTES: usize = 1 << 20;

/// A leader stops adding commands to a proposal once it holds this many
/// bytes of keys and values, so an entry holds at most
/// `MAX_PROPOSAL_BYTES + MAX_COMMAND_BYTES`: with `MAX_PAYLOAD_ENTRIES`
/// entries per append that stays far below siftdb's 4 GiB batch limit and
/// the RPC body limit ([`crate::network::MAX_RPC_BODY`]).
pub const MAX_PROPOSAL_BYTES: usize = 4 << 20;

/// A leader puts at most this many commands in one proposal.
pub const MAX_PROPOSAL_COMMANDS: usize = 4096;

/// Entries per append-entries message (openraft's `max_payload_entries`).
pub const MAX_PAYLOAD_ENTRIES: u64 = 64;

openraft::declare_raft_types!(
    /// openraft's types for a siftdb key-value cluster: u64 node ids,
    /// HTTP addresses as nodes, snapshots as framed table files.
    pub TypeConfig:
        D = Proposal,
        R = Vec<Response>,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = crate::snapshot_file::SnapshotStream,
);

/// One write of a batch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Op {
    /// Stores `value` under `key`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Removes `key` (a no-op when absent).
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Removes every key in `[start, end)` (`end: None`: every key from
    /// `start` on), as one engine range delete.
    DeleteRange {
        /// The first key removed (empty: from the first key).
        start: Vec<u8>,
        /// The first key past the range (`None`: no upper bound).
        end: Option<Vec<u8>>,
    },
}

/// A replicated command: applied on every node, atomically, in log order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Stores `value` under `key`.
    Put {
        /// The key.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Removes `key`.
    Delete {
        /// The key.
        key: Vec<u8>,
    },
    /// Every op, in order, all or none.
    Batch(Vec<Op>),
    /// Sets `key` to `new` (removes it when `None`) if its value is
    /// `expected` (`None`: absent); answers [`Response::Swapped`] or
    /// [`Response::CasFailed`] with the value found.
    CompareAndSwap {
        /// The key.
        key: Vec<u8>,
        /// The value it must have (`None`: it must be absent).
        expected: Option<Vec<u8>>,
        /// The value to store (`None`: remove the key).
        new: Option<Vec<u8>>,
    },
    /// Adds `delta` (wrapping) to the counter under `key` (an 8-byte
    /// big-endian u64, 0 when absent) and answers [`Response::Counter`]
    /// with the new value; a key holding anything else is `Rejected`.
    Increment {
        /// The key.
        key: Vec<u8>,
        /// What to add.
        delta: u64,
    },
    /// Removes every key in `[start, end)` (`end: None`: every key from
    /// `start` on) with one engine range delete, however many keys it
    /// covers; answers [`Response::Applied`] with one op.
    DeleteRange {
        /// The first key removed (empty: from the first key).
        start: Vec<u8>,
        /// The first key past the range (`None`: no upper bound).
        end: Option<Vec<u8>>,
    },
}

/// A client's session: a client id (random, chosen by the client) and the
/// client's sequence number of this command (1, 2, ... one command at a
/// time per id). The state machine applies each (client, seq) at most once
/// and answers a repeat with the first answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Session {
    /// The client id.
    pub client: u64,
    /// The command's sequence number, from 1.
    pub seq: u64,
}

/// A command as a client sends it: with a session for exactly-once, or
/// without (applied each time it is committed).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// The session, if any.
    pub session: Option<Session>,
    /// The command.
    pub command: Command,
}

impl Request {
    /// `command` without a session.
    pub fn unsessioned(command: Command) -> Request {
        Request {
            session: None,
            command,
        }
    }
}

/// What one raft entry carries: requests of any number of clients, applied
/// in order, each atomically (the whole entry is one siftdb batch), and the
/// leader's wall clock when it cut the proposal: the only clock the state
/// machine reads (session expiry), so every node applies alike.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The leader's clock, ms since the Unix epoch.
    pub time_ms: u64,
    /// The requests.
    pub requests: Vec<Request>,
}

/// What applying a command answered.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Response {
    /// The command was applied; `ops` writes.
    Applied {
        /// Writes applied.
        ops: usize,
    },
    /// The command broke a limit and changed nothing (on any node).
    Rejected {
        /// Why.
        reason: String,
    },
    /// A compare-and-swap found the expected value and stored the new one.
    Swapped,
    /// A compare-and-swap found another value (`current`) and changed
    /// nothing.
    CasFailed {
        /// The value found (`None`: absent).
        current: Option<Vec<u8>>,
    },
    /// An increment stored this value.
    Counter {
        /// The counter's new value.
        value: u64,
    },
    /// The request's sequence number is below its client's last applied
    /// one: a late copy of a request the client has moved past; not
    /// applied.
    Stale,
    /// The request names a client session that is unknown (expired after
    /// [`SESSION_EXPIRY_MS`] idle, or never opened) with a sequence number
    /// above 1: not applied; the client must open a new session (the
    /// outcome of its earlier request with this number is unknown).
    SessionExpired,
}

/// A client session idle (no command applied) for this long by the
/// entries' clock is forgotten. Clocks of successive leaders must agree to
/// well within this; a leader whose clock runs ahead expires sessions
/// early (their clients then see [`Response::SessionExpired`]), never
/// applies a command twice.
pub const SESSION_EXPIRY_MS: u64 = 60 * 60 * 1000;

/// Expired sessions are removed when an entry whose index is a multiple
/// of this is applied.
pub const SESSION_SWEEP_EVERY: u64 = 1024;

impl Command {
    /// Bytes of keys and values (a compare-and-swap's expected value and
    /// a range delete's bounds included).
    pub fn payload_bytes(&self) -> usize {
        self.ops()
            .iter()
            .map(OpRef::payload_bytes)
            .fold(self.expected_bytes(), usize::saturating_add)
    }

    fn expected_bytes(&self) -> usize {
        match self {
            Command::CompareAndSwap {
                expected: Some(v), ..
            } => v.len(),
            _ => 0,
        }
    }

    /// The command's writes, in order (a compare-and-swap's write as if it
    /// succeeds, its expected value not counted; an increment as a put of
    /// its 8 bytes).
    pub fn ops(&self) -> Vec<OpRef<'_>> {
        match self {
            Command::Put { key, value } => vec![OpRef::Put(key, value)],
            Command::Delete { key } => vec![OpRef::Delete(key)],
            Command::CompareAndSwap {
                key,
                new: Some(value),
                ..
            } => vec![OpRef::Put(key, value)],
            Command::CompareAndSwap { key, new: None, .. } => vec![OpRef::Delete(key)],
            Command::Increment { key, .. } => vec![OpRef::Put(key, &[0; 8])],
            Command::DeleteRange { start, end } => vec![OpRef::DeleteRange(start, end.as_deref())],
            Command::Batch(ops) => ops
                .iter()
                .map(|op| match op {
                    Op::Put { key, value } => OpRef::Put(key, value),
                    Op::Delete { key } => OpRef::Delete(key),
                    Op::DeleteRange { start, end } => OpRef::DeleteRange(start, end.as_deref()),
                })
                .collect(),
        }
    }

    /// `Err(reason)` when a key is empty or longer than [`MAX_KEY_LEN`], a
    /// range delete's bound is longer than that or its range is empty
    /// (`end <= start`), or the keys and values sum to more than
    /// [`MAX_COMMAND_BYTES`].
    pub fn validate(&self) -> Result<(), String> {
        let mut total = self.expected_bytes();
        for op in self.ops() {
            match op {
                OpRef::Put(key, _) | OpRef::Delete(key) => {
                    if key.is_empty() {
                        return Err("empty key".to_string());
                    }
                    check_key_len(key)?;
                }
                OpRef::DeleteRange(start, end) => {
                    check_key_len(start)?;
                    if let Some(end) = end {
                        check_key_len(end)?;
                        if end <= start {
                            return Err(
                                "empty range: its end does not sort after its start".to_string()
                            );
                        }
                    }
                }
            }
            total = total.saturating_add(op.payload_bytes());
        }
        if total > MAX_COMMAND_BYTES {
            return Err(format!(
                "command of {total} bytes exceeds the {MAX_COMMAND_BYTES}-byte limit"
            ));
        }
        Ok(())
    }
}

/// `Err(reason)` when `key` is longer than [`MAX_KEY_LEN`].
fn check_key_len(key: &[u8]) -> Result<(), String> {
    if key.len() > MAX_KEY_LEN {
        return Err(format!(
            "key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit",
            key.len()
        ));
    }
    Ok(())
}

/// A borrowed write of a command.
#[derive(Clone, Copy, Debug)]
pub enum OpRef<'a> {
    /// Put key, value.
    Put(&'a [u8], &'a [u8]),
    /// Delete key.
    Delete(&'a [u8]),
    /// Delete every key in `[start, end)` (`None`: no upper bound).
    DeleteRange(&'a [u8], Option<&'a [u8]>),
}

impl OpRef<'_> {
    /// Bytes of its keys and value (a range delete's bounds).
    pub fn payload_bytes(&self) -> usize {
        match *self {
            OpRef::Put(key, value) => key.len().saturating_add(value.len()),
            OpRef::Delete(key) => key.len(),
            OpRef::DeleteRange(start, end) => {
                start.len().saturating_add(end.map_or(0, <[u8]>::len))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_are_checked() {
        assert!(Command::Put {
            key: b"k".to_vec(),
            value: vec![0; 10]
        }
        .validate()
        .is_ok());
        assert!(Command::Delete { key: vec![] }.validate().is_err());
        assert!(Command::Delete {
            key: vec![1; MAX_KEY_LEN + 1]
        }
        .validate()
        .is_err());
        assert!(Command::Delete {
            key: vec![1; MAX_KEY_LEN]
        }
        .validate()
        .is_ok());
        let big = Command::Batch(vec![
            Op::Put {
                key: b"a".to_vec(),
                value: vec![0; MAX_COMMAND_BYTES / 2],
            },
            Op::Put {
                key: b"b".to_vec(),
                value: vec![0; MAX_COMMAND_BYTES / 2],
            },
        ]);
        assert!(big.validate().is_err());
    }

    /// A range delete may start at the first key and have no end, but
    /// its bounds keep the key limit and its range must hold a key.
    #[test]
    fn range_delete_limits_are_checked() {
        let range = |start: &[u8], end: Option<&[u8]>| Command::DeleteRange {
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
        };
        assert!(range(b"", None).validate().is_ok());
        assert!(range(b"a", Some(b"b")).validate().is_ok());
        assert!(range(b"", Some(b"\0")).validate().is_ok());
        assert!(range(b"b", Some(b"b")).validate().is_err());
        assert!(range(b"b", Some(b"a")).validate().is_err());
        assert!(range(b"", Some(b"")).validate().is_err());
        assert!(range(&[1; MAX_KEY_LEN], None).validate().is_ok());
        assert!(range(&[1; MAX_KEY_LEN + 1], None).validate().is_err());
        assert!(range(b"a", Some(&[1; MAX_KEY_LEN + 1])).validate().is_err());
        let in_batch = Command::Batch(vec![
            Op::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            },
            Op::DeleteRange {
                start: b"z".to_vec(),
                end: Some(b"y".to_vec()),
            },
        ]);
        assert!(in_batch.validate().is_err());
        assert_eq!(range(b"ab", Some(b"cde")).payload_bytes(), 5);
        assert_eq!(range(b"ab", None).ops().len(), 1);
    }
}
