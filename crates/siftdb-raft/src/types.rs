//! The replicated commands and openraft's type configuration.
//!
//! Owns: [`TypeConfig`], the command set a client sends ([`Command`],
//! [`Op`]), what one raft entry carries ([`Proposal`]: the commands a leader
//! gathered from concurrent clients), what applying a command answers
//! ([`Response`]), and the size limits a command is checked against before
//! it is proposed and again when applied.
//! Must never: let a command that siftdb would refuse reach the log
//! unchecked — an apply that fails is fatal to a raft node, so a command
//! that breaks a limit is answered `Rejected` on every node alike.

use serde::{Deserialize, Serialize};

/// A node's id in the cluster.
pub type NodeId = u64;

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
    /// HTTP addresses as nodes, snapshots as files.
    pub TypeConfig:
        D = Proposal,
        R = Vec<Response>,
        NodeId = NodeId,
        Node = openraft::BasicNode,
        Entry = openraft::Entry<TypeConfig>,
        SnapshotData = tokio::fs::File,
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
}

/// What one raft entry carries: commands of any number of clients, applied
/// in order, each atomically (the whole entry is one siftdb batch).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proposal {
    /// The commands.
    pub commands: Vec<Command>,
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
}

impl Command {
    /// Bytes of keys and values.
    pub fn payload_bytes(&self) -> usize {
        self.ops()
            .iter()
            .map(|op| match op {
                OpRef::Put(k, v) => k.len().saturating_add(v.len()),
                OpRef::Delete(k) => k.len(),
            })
            .fold(0, usize::saturating_add)
    }

    /// The command's writes, in order.
    pub fn ops(&self) -> Vec<OpRef<'_>> {
        match self {
            Command::Put { key, value } => vec![OpRef::Put(key, value)],
            Command::Delete { key } => vec![OpRef::Delete(key)],
            Command::Batch(ops) => ops
                .iter()
                .map(|op| match op {
                    Op::Put { key, value } => OpRef::Put(key, value),
                    Op::Delete { key } => OpRef::Delete(key),
                })
                .collect(),
        }
    }

    /// `Err(reason)` when a key is empty or longer than [`MAX_KEY_LEN`], or
    /// the keys and values sum to more than [`MAX_COMMAND_BYTES`].
    pub fn validate(&self) -> Result<(), String> {
        let mut total = 0usize;
        for op in self.ops() {
            let (key, value_len) = match op {
                OpRef::Put(key, value) => (key, value.len()),
                OpRef::Delete(key) => (key, 0),
            };
            if key.is_empty() {
                return Err("empty key".to_string());
            }
            if key.len() > MAX_KEY_LEN {
                return Err(format!(
                    "key of {} bytes exceeds the {MAX_KEY_LEN}-byte limit",
                    key.len()
                ));
            }
            total = total.saturating_add(key.len()).saturating_add(value_len);
        }
        if total > MAX_COMMAND_BYTES {
            return Err(format!(
                "command of {total} bytes exceeds the {MAX_COMMAND_BYTES}-byte limit"
            ));
        }
        Ok(())
    }
}

/// A borrowed write of a command.
#[derive(Clone, Copy, Debug)]
pub enum OpRef<'a> {
    /// Put key, value.
    Put(&'a [u8], &'a [u8]),
    /// Delete key.
    Delete(&'a [u8]),
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
}
