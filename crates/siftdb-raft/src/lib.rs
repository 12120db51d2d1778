//! # siftdb-raft
//!
//! siftdb as the storage of an [openraft](https://docs.rs/openraft/0.9)
//! cluster (openraft 0.9, storage v2): one siftdb database per node, with
//! one write-ahead log, holding the replicated log, the vote and the
//! committed index ([`log_store`]) and the key-value state machine
//! ([`state_machine`]) in keyspaces of their own, the state machine's
//! snapshot files beside it; a small
//! HTTP network layer ([`network`], [`api`]) with TLS and client
//! authentication ([`tls`]), a node ([`node`]) and a client that follows
//! the leader ([`client`]). The `siftdb-raft` binary runs a node
//! and talks to a cluster.
//!
//! Data flows one way: node → api/network → raft → log store / state
//! machine → siftdb. The storage modules use only siftdb's public API.
//!
//! What is on disk, byte by byte, is in `docs/format.md` ("Replicated
//! storage (siftdb-raft)"); what a cluster guarantees is in
//! `docs/replication.md`.

pub mod api;
mod apply;
pub mod bench;
mod body;
pub mod client;
pub mod codec;
pub mod early_send;
pub mod fs_util;
pub mod fuzzing;
pub mod heard;
pub mod lease;
pub mod log_store;
pub mod network;
pub mod node;
pub mod node_id;
pub mod pointer;
pub mod proposer;
pub mod retire;
pub mod snapshot_file;
pub mod state_machine;
pub mod timings;
pub mod tls;
pub mod types;

pub use log_store::LogStore;
pub use state_machine::{StateMachine, StateReader};
pub use types::{Command, NodeId, Op, Proposal, Request, Response, Session, TypeConfig};

/// The node directory's siftdb database.
pub const DB_DIR: &str = "db";

/// Opens (creating when missing) a node's storage under `dir`: one siftdb
/// database in `dir/db` (keyspaces `raft.log`, `raft.meta` and the state
/// machine's `state.<n>`), the snapshot files in `dir/snapshots`; both
/// halves time their siftdb calls into the returned [`timings::Timings`].
pub fn open_storage(
    dir: &std::path::Path,
) -> codec::Result<(LogStore, StateMachine, std::sync::Arc<timings::Timings>)> {
    use std::sync::Arc;
    let timings = Arc::new(timings::Timings::default());
    // Not synced by default: each write says whether it is (appends, the
    // vote and the live pointer are; applies and the committed index not).
    let db = Arc::new(siftdb::Db::open_with(
        dir.join(DB_DIR),
        siftdb::Options::default().sync_writes(false),
    )?);
    let log = LogStore::open(Arc::clone(&db), Arc::clone(&timings))?;
    let sm = StateMachine::open(db, dir, Arc::clone(&timings))?;
    Ok((log, sm, timings))
}
