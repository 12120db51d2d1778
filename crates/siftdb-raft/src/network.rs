//! Raft messages between nodes over HTTP/1.1 (reqwest to send, axum to
//! receive; https with mutual TLS when the node has TLS, [`crate::tls`]),
//! bodies in postcard.
//!
//! Owns: [`Network`] (openraft's `RaftNetworkFactory`) and its per-peer
//! [`Connection`] (`RaftNetwork`: append-entries, vote, and snapshot chunks
//! through openraft's chunked transfer), the byte budget of an
//! append-entries message ([`APPEND_BODY_BUDGET`]), and [`routes`], the
//! receiving side, which keeps a follower receiving a snapshot from
//! standing for election, notes when a leader was last heard ([`Heard`], [`crate::heard`]),
//! and answers a vote request from a removed node `410 Gone`
//! ([`crate::retire`]); the send time of each append-entries message a
//! follower accepts, for the leader's lease ([`crate::lease::Acks`]);
//! the sending of an early append ([`crate::early_send`]).
//! Must never: turn a peer that cannot be reached into anything but
//! `Unreachable` (openraft then backs off instead of spinning), or panic on
//! a body it cannot decode (that is a 400).

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use openraft::error::{
    InstallSnapshotError, NetworkError, PayloadTooLarge, RPCError, RaftError, Unreachable,
};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, LogId, Raft};
use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::body::{bad_body, decode_body, encode_body};
pub use crate::heard::Heard;
use crate::lease::Acks;
use crate::retire::{self, Retirement, Verdict};
use crate::timings::{Step, Timings};
use crate::tls::{ClientAuth, TlsError};
use crate::types::{NodeId, TypeConfig};

/// Path of the append-entries RPC.
pub const APPEND: &str = "/raft/append";
/// Path of the vote RPC.
pub const VOTE: &str = "/raft/vote";
/// Path of the snapshot-chunk RPC.
pub const SNAPSHOT: &str = "/raft/snapshot";

type RpcResult<T, E> = Result<T, RPCError<NodeId, BasicNode, RaftError<NodeId, E>>>;

/// Opens connections to peers; clones share one HTTP connection pool.
#[derive(Clone)]
pub struct Network {
    http: reqwest::Client,
    scheme: &'static str,
    routes: Arc<std::collections::BTreeMap<NodeId, String>>,
    timings: Option<Arc<Timings>>,
    acks: Acks,
    retirement: Option<Arc<Retirement>>,
    early: EarlyAcks,
}

impl Network {
    /// A network whose TCP connections time out after `connect_timeout`,
    /// sending the messages for a node in `routes` to the address there
    /// instead of the node's own, with `auth` (the node's certificate when
    /// it has TLS).
    pub fn new(
        connect_timeout: Duration,
        routes: std::collections::BTreeMap<NodeId, String>,
        auth: &ClientAuth,
    ) -> Result<Network, TlsError> {
        let http = auth.http_client(
            reqwest::Client::builder()
                .connect_timeout(connect_timeout)
                .tcp_nodelay(true),
        )?;
        Ok(Network {
            http,
            scheme: auth.scheme(),
            routes: Arc::new(routes),
            timings: None,
            acks: Acks::default(),
            retirement: None,
            early: EarlyAcks::default(),
        })
    }

    /// The entries each follower accepted by early sends
    /// ([`crate::early_send`]), which openraft's messages then leave out.
    pub fn early_acks(&self) -> EarlyAcks {
        self.early.clone()
    }

    /// Times the append-entries round trips into `timings`.
    pub fn timed(mut self, timings: Arc<Timings>) -> Network {
        self.timings = Some(timings);
        self
    }

    /// Records the send time of each append-entries message a follower
    /// accepts into `acks` (the leader's lease).
    pub fn with_acks(mut self, acks: Acks) -> Network {
        self.acks = acks;
        self
    }

    /// Retires this node when a leader answers its vote request `410 Gone`
    /// (it is no longer a member).
    pub fn retiring(mut self, retirement: Arc<Retirement>) -> Network {
        self.retirement = Some(retirement);
        self
    }
}

/// The link to one peer.
pub struct Connection {
    http: reqwest::Client,
    scheme: &'static str,
    target: NodeId,
    addr: String,
    timings: Option<Arc<Timings>>,
    acks: Acks,
    retirement: Option<Arc<Retirement>>,
    early: EarlyAcks,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        self.connection(target, node)
    }
}

impl Network {
    fn connection(&self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            http: self.http.clone(),
            scheme: self.scheme,
            target,
            addr: self.routes.get(&target).unwrap_or(&node.addr).clone(),
            timings: self.timings.clone(),
            acks: self.acks.clone(),
            retirement: self.retirement.clone(),
            early: self.early.clone(),
        }
    }

    /// Sends one encoded append-entries message to `target` (at `node`'s
    /// address, or its route) outside openraft: an early send
    /// ([`crate::early_send`]). Neither timed as openraft's round trips nor
    /// counted for the lease: openraft does not know of it.
    pub(crate) async fn send_append(
        &self,
        target: NodeId,
        node: &BasicNode,
        body: Vec<u8>,
        ttl: Duration,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.connection(target, node).send(APPEND, body, ttl).await
    }
}

impl Connection {
    async fn call<Req, Resp, E>(&self, path: &str, req: &Req, ttl: Duration) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        self.send(path, encode_request(req).map_err(RPCError::Network)?, ttl)
            .await
    }

    async fn send<Resp, E>(&self, path: &str, body: Vec<u8>, ttl: Duration) -> RpcResult<Resp, E>
    where
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let url = format!("{}://{}{path}", self.scheme, self.addr);
        let resp = self
            .http
            .post(url)
            .timeout(ttl)
            .body(body)
            .send()
            .await
            .map_err(|e| {
                if e.is_connect() {
                    RPCError::Unreachable(Unreachable::new(&e))
                } else {
                    RPCError::Network(NetworkError::new(&e))
                }
            })?;
        if !resp.status().is_success() {
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            if status == StatusCode::GONE && path == VOTE {
                // The leader says this node is no longer a member.
                if let Some(retirement) = &self.retirement {
                    let why = format!("node {}: {}", self.target, text.trim_end());
                    if let Err(e) = retirement.retire(&why).await {
                        tracing::error!("retiring: {e}");
                    }
                }
            }
            let e = std::io::Error::other(format!("{status} from node {}: {text}", self.target));
            return Err(RPCError::Network(NetworkError::new(&e)));
        }
        let bytes = resp
            .bytes()
            .await
            .map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let result: Result<Resp, RaftError<NodeId, E>> =
            postcard::from_bytes(&bytes).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        result.map_err(|e| RPCError::RemoteError(openraft::error::RemoteError::new(self.target, e)))
    }
}

fn encode_request<Req: Serialize>(req: &Req) -> Result<Vec<u8>, NetworkError> {
    postcard::to_allocvec(req).map_err(|e| NetworkError::new(&e))
}

/// An append-entries body stays under this many bytes unless it holds one
/// entry. openraft 0.9 limits a message by its entry count only, and gives
/// the answer one heartbeat interval: 64 entries of a few MiB each would
/// time out on every try, and each timed-out try is sent again whole.
pub const APPEND_BODY_BUDGET: usize = 1 << 20;

/// How many of `entries` entries whose encoding took `body` bytes fit in
/// [`APPEND_BODY_BUDGET`] (at least one).
fn entries_that_fit(entries: usize, body: usize) -> u64 {
    let fit = u128::try_from(entries).unwrap_or(u128::MAX)
        * u128::try_from(APPEND_BODY_BUDGET).unwrap_or(u128::MAX)
        / u128::try_from(body.max(1)).unwrap_or(u128::MAX);
    u64::try_from(fit).unwrap_or(u64::MAX).max(1)
}

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        let (vote, last) = (rpc.vote, rpc.entries.last().map(|e| e.log_id.index));
        let rpc = self.early.leave_out(self.target, rpc);
        let body = encode_request(&rpc).map_err(RPCError::Network)?;
        if body.len() > APPEND_BODY_BUDGET && rpc.entries.len() > 1 {
            // openraft sends again at once with at most this many entries
            // (for its next ten messages to this peer).
            let hint = entries_that_fit(rpc.entries.len(), body.len());
            return Err(RPCError::PayloadTooLarge(
                PayloadTooLarge::new_entries_hint(hint),
            ));
        }
        // Heartbeats (no entries) are not round trips of the write path.
        let timings = self.timings.as_ref().filter(|_| last.is_some());
        if let (Some(t), Some(last)) = (timings, last) {
            t.step(Step::Sent, last, true, Step::Flushed, |t| &t.to_send);
        }
        let timer = timings.map(|t| t.replicate.start());
        let sent = std::time::Instant::now();
        let answer = self.send(APPEND, body, option.hard_ttl()).await;
        drop(timer);
        if let (Some(t), Some(last), Ok(AppendEntriesResponse::Success)) = (timings, last, &answer)
        {
            t.step(Step::Answered, last, true, Step::Sent, |t| &t.first_answer);
        }
        if let Ok(
            AppendEntriesResponse::Success
            | AppendEntriesResponse::PartialSuccess(_)
            | AppendEntriesResponse::Conflict,
        ) = &answer
        {
            // The follower accepted this leader's vote (a conflict too:
            // the vote is checked before the log).
            self.acks.accepted(self.target, vote, sent);
        }
        answer
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<InstallSnapshotResponse<NodeId>, InstallSnapshotError> {
        self.call(SNAPSHOT, &rpc, option.hard_ttl()).await
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        option: RPCOption,
    ) -> RpcResult<VoteResponse<NodeId>, openraft::error::Infallible> {
        self.call(VOTE, &rpc, option.hard_ttl()).await
    }
}

/// Per follower, the last entry it accepted from an early send
/// ([`crate::early_send`]): on its disk, and with it every entry before it
/// (raft's log matching). openraft's next message to it leaves those
/// entries out (it names the last of them as its `prev_log_id` instead),
/// so each entry crosses the network once; the follower still checks that
/// it holds `prev_log_id` before it answers, so a stale record costs a
/// conflict and a resend, never a wrong answer.
#[derive(Clone, Debug, Default)]
pub struct EarlyAcks(Arc<Mutex<std::collections::BTreeMap<NodeId, LogId<NodeId>>>>);

impl EarlyAcks {
    /// Records that `target` accepted an early send ending at `last`.
    pub fn accepted(&self, target: NodeId, last: LogId<NodeId>) {
        self.0.lock().insert(target, last);
    }

    /// `rpc` without the leading entries `target` accepted by early sends.
    /// Only entries of the sending leader's own term are left out, up to
    /// the last accepted one: a leader's entries of its term are in its
    /// log for good, so the follower holding the last accepted one holds
    /// them all.
    fn leave_out(
        &self,
        target: NodeId,
        mut rpc: AppendEntriesRequest<TypeConfig>,
    ) -> AppendEntriesRequest<TypeConfig> {
        let Some(acked) = self.0.lock().get(&target).copied() else {
            return rpc;
        };
        if acked.leader_id != *rpc.vote.leader_id() {
            return rpc;
        }
        let held = rpc
            .entries
            .iter()
            .take_while(|e| e.log_id.leader_id == acked.leader_id && e.log_id.index <= acked.index)
            .count();
        if let Some(last) = held.checked_sub(1).and_then(|i| rpc.entries.get(i)) {
            rpc.prev_log_id = Some(last.log_id);
            rpc.entries.drain(..held);
        }
        rpc
    }
}

/// What the receiving routes share.
#[derive(Clone)]
struct Receiver {
    raft: Raft<TypeConfig>,
    snapshots: Arc<SnapshotReceipt>,
    heard: Arc<Heard>,
    /// Where a follower's share of an append is timed.
    timings: Option<Arc<Timings>>,
}

/// Keeps a follower from standing for election while it receives a
/// snapshot. openraft 0.9 hands the chunks before the last one to the
/// receiver without touching the follower's election timer, and the leader
/// sends no heartbeat to it meanwhile; a transfer longer than the election
/// timeout would make the follower stand for election mid-transfer, its
/// higher term would make the sending leader step down, and the transfer
/// would start over with the next leader, forever: the whole cluster
/// unavailable while one node catches up. While chunks keep arriving (or one
/// is being installed) the follower does not stand; once none came for
/// `quiet` (the sender may be gone) it may again.
struct SnapshotReceipt {
    raft: Raft<TypeConfig>,
    state: Mutex<ReceiptState>,
    quiet: Duration,
}

/// Changed, and the election switch set, under one lock.
#[derive(Default)]
struct ReceiptState {
    /// Counts chunk arrivals and ends: a delayed re-enable acts only if
    /// nothing happened since it was armed.
    activity: u64,
    /// Chunks being handled now.
    in_hand: u64,
}

/// One chunk being handled. Dropped when its handler ends, or when the
/// handler's future is dropped because the sender went away (a killed
/// leader): either way the chunk no longer holds elections off.
struct ChunkInHand {
    receipt: Arc<SnapshotReceipt>,
}

impl SnapshotReceipt {
    fn chunk_arrived(self: &Arc<Self>) -> ChunkInHand {
        let mut state = self.state.lock();
        state.activity += 1;
        state.in_hand += 1;
        self.raft.runtime_config().elect(false);
        ChunkInHand {
            receipt: Arc::clone(self),
        }
    }

    /// Lets the follower stand again if no chunk came or was in hand since
    /// `armed`.
    fn reenable_if_quiet(&self, armed: u64) {
        let state = self.state.lock();
        if state.activity == armed && state.in_hand == 0 {
            self.raft.runtime_config().elect(true);
        }
    }
}

impl Drop for ChunkInHand {
    /// Elections come back after `quiet` without another chunk: by then a
    /// live leader has touched the follower's timer with an append.
    fn drop(&mut self) {
        let armed = {
            let mut state = self.receipt.state.lock();
            state.activity += 1;
            state.in_hand = state.in_hand.saturating_sub(1);
            state.activity
        };
        let receipt = Arc::clone(&self.receipt);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(async move {
                    tokio::time::sleep(receipt.quiet).await;
                    receipt.reenable_if_quiet(armed);
                });
            }
            // No runtime to wait on (shutting down): no reason to hold
            // elections off.
            Err(_) => receipt.reenable_if_quiet(armed),
        }
    }
}

async fn append(State(r): State<Receiver>, body: Bytes) -> Response {
    let entered = Instant::now();
    match decode_body::<AppendEntriesRequest<TypeConfig>>(&body) {
        Ok(req) => {
            let last = req.entries.last().map(|e| e.log_id.index);
            let answer = r.raft.append_entries(req).await;
            if let (Some(t), Some(last)) = (&r.timings, last) {
                let stamps = &t.stamps;
                let after = |step| stamps.get(step, last).filter(|&at| at >= entered);
                if let Some(appended) = after(Step::Appended) {
                    t.follower_in.add(appended.duration_since(entered));
                }
                if let Some(flushed) = after(Step::Flushed) {
                    t.follower_out.add(flushed.elapsed());
                }
            }
            if matches!(
                answer,
                Ok(AppendEntriesResponse::Success | AppendEntriesResponse::PartialSuccess(_))
            ) {
                r.heard.heard();
            }
            encode_body(&answer)
        }
        Err(e) => bad_body(e),
    }
}

async fn vote(State(r): State<Receiver>, body: Bytes) -> Response {
    match decode_body::<VoteRequest<NodeId>>(&body) {
        Ok(req) => {
            if let Some(candidate) = req.vote.leader_id().voted_for() {
                if removed_candidate(&r.raft, candidate).await {
                    return (
                        StatusCode::GONE,
                        format!("node {candidate} is not a member of the cluster\n"),
                    )
                        .into_response();
                }
            }
            encode_body(&r.raft.vote(req).await)
        }
        Err(e) => bad_body(e),
    }
}

/// Whether `candidate` asks for votes though the leader (this node) knows
/// it is no longer a member: only a leader whose effective membership lacks
/// it asks [`retire::verdict`] (which confirms the leadership first).
async fn removed_candidate(raft: &Raft<TypeConfig>, candidate: NodeId) -> bool {
    let suspect = {
        let m = raft.metrics().borrow().clone();
        m.state == openraft::ServerState::Leader
            && !m
                .membership_config
                .membership()
                .nodes()
                .any(|(n, _)| *n == candidate)
    };
    suspect && retire::verdict(raft, candidate).await == Verdict::NotMember
}

async fn snapshot(State(r): State<Receiver>, body: Bytes) -> Response {
    match decode_body::<InstallSnapshotRequest<TypeConfig>>(&body) {
        Ok(req) => {
            let in_hand = r.snapshots.chunk_arrived();
            let answer = r.raft.install_snapshot(req).await;
            drop(in_hand);
            if answer.is_ok() {
                // A leader is sending: not silence (`crate::retire`).
                r.heard.heard();
            }
            encode_body(&answer)
        }
        Err(e) => bad_body(e),
    }
}

/// The largest raft message body accepted: openraft sends at most
/// [`crate::types::MAX_PAYLOAD_ENTRIES`] entries of at most
/// `MAX_PROPOSAL_BYTES + MAX_COMMAND_BYTES` (5 MiB) each, or one snapshot
/// chunk (`snapshot_max_chunk_size`, 3 MiB by default).
pub const MAX_RPC_BODY: usize = 512 << 20;

/// The receiving side of the raft RPCs; `election_timeout_max` sets how
/// long a follower receiving a snapshot waits for the next chunk before it
/// may stand for election again (four times it, at least two seconds); `heard`
/// notes each append-entries message or snapshot chunk accepted; a
/// follower's share of each append is timed into `timings`.
pub fn routes(
    raft: Raft<TypeConfig>,
    election_timeout_max: Duration,
    heard: Arc<Heard>,
    timings: Option<Arc<Timings>>,
) -> Router {
    let snapshots = Arc::new(SnapshotReceipt {
        raft: raft.clone(),
        state: Mutex::new(ReceiptState::default()),
        quiet: (election_timeout_max * 4).max(Duration::from_secs(2)),
    });
    Router::new()
        .route(APPEND, post(append))
        .route(VOTE, post(vote))
        .route(SNAPSHOT, post(snapshot))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_RPC_BODY))
        .with_state(Receiver {
            raft,
            snapshots,
            heard,
            timings,
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(term: u64, prev: u64, entries: u64) -> AppendEntriesRequest<TypeConfig> {
        let id = |t: u64, i: u64| LogId::new(openraft::CommittedLeaderId::new(t, 1), i);
        AppendEntriesRequest {
            vote: openraft::Vote::new_committed(term, 1),
            prev_log_id: Some(id(term, prev)),
            entries: (prev + 1..=prev + entries)
                .map(|i| openraft::Entry {
                    log_id: id(term, i),
                    payload: openraft::EntryPayload::Blank,
                })
                .collect(),
            leader_commit: Some(id(term, prev)),
        }
    }

    fn first_and_prev(rpc: &AppendEntriesRequest<TypeConfig>) -> (Option<u64>, Option<u64>) {
        (
            rpc.entries.first().map(|e| e.log_id.index),
            rpc.prev_log_id.map(|p| p.index),
        )
    }

    #[test]
    fn entries_accepted_early_are_left_out() {
        let early = EarlyAcks::default();
        // Nothing accepted: the message goes whole.
        assert_eq!(
            first_and_prev(&early.leave_out(2, request(3, 10, 5))),
            (Some(11), Some(10))
        );
        early.accepted(2, LogId::new(openraft::CommittedLeaderId::new(3, 1), 12));
        // Up to the accepted entry: left out, named as prev; the commit stays.
        let rpc = early.leave_out(2, request(3, 10, 5));
        assert_eq!(first_and_prev(&rpc), (Some(13), Some(12)));
        assert_eq!(rpc.leader_commit.map(|c| c.index), Some(10));
        // All of them, when the follower accepted past them.
        assert_eq!(
            first_and_prev(&early.leave_out(2, request(3, 4, 3))),
            (None, Some(7))
        );
        // Another follower, or another term: whole.
        assert_eq!(
            first_and_prev(&early.leave_out(3, request(3, 10, 5))),
            (Some(11), Some(10))
        );
        assert_eq!(
            first_and_prev(&early.leave_out(2, request(4, 10, 5))),
            (Some(11), Some(10))
        );
    }

    #[test]
    fn entries_are_cut_to_the_budget() {
        assert_eq!(entries_that_fit(64, 64 * APPEND_BODY_BUDGET), 1);
        assert_eq!(entries_that_fit(64, 2 * APPEND_BODY_BUDGET), 32);
        assert_eq!(entries_that_fit(2, 100 * APPEND_BODY_BUDGET), 1);
        assert_eq!(entries_that_fit(10, APPEND_BODY_BUDGET + 1), 9);
        assert_eq!(entries_that_fit(usize::MAX, 0), u64::MAX);
    }
}
