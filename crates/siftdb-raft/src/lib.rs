//! # siftdb-raft
//!
//! siftdb as the storage of an [openraft](https://docs.rs/openraft/0.9)
//! cluster (openraft 0.9, storage v2): the replicated log, the vote and the
//! committed index in one siftdb database ([`log_store`]), the key-value
//! state machine and its snapshots in another ([`state_machine`]), a small
//! HTTP network layer ([`network`], [`api`]), a node ([`node`]) and a client
//! that follows the leader ([`client`]). The `siftdb-raft` binary runs a node
//! and talks to a cluster.
//!
//! Data flows one way: node → api/network → raft → log store / state
//! machine → siftdb. The storage modules use only siftdb's public API.
//!
//! What is on disk, byte by byte, is in `docs/format.md` ("Replicated
//! storage (siftdb-raft)"); what a cluster guarantees is in
//! `docs/replication.md`.

pub mod api;
pub mod client;
pub mod codec;
pub mod log_store;
pub mod network;
pub mod node;
pub mod pointer;
pub mod proposer;
pub mod snapshot_file;
pub mod state_machine;
pub mod timings;
pub mod types;

pub use log_store::LogStore;
pub use state_machine::{StateMachine, StateReader};
pub use types::{Command, NodeId, Op, Proposal, Response, TypeConfig};

/// Opens (creating when missing) a node's storage under `dir`: the log in
/// `dir/log`, the committed index in `dir/log-soft`, the state machine and
/// its snapshots under `dir/sm`; both time their siftdb calls into the
/// returned [`timings::Timings`].
pub fn open_storage(
    dir: &std::path::Path,
) -> codec::Result<(LogStore, StateMachine, std::sync::Arc<timings::Timings>)> {
    let timings = std::sync::Arc::new(timings::Timings::default());
    let log = LogStore::open(dir, std::sync::Arc::clone(&timings))?;
    let sm = StateMachine::open(&dir.join("sm"), std::sync::Arc::clone(&timings))?;
    Ok((log, sm, timings))
}
