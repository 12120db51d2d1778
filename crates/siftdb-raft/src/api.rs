//! The client side of a node: writes through raft, linearizable and local
//! reads, cluster initialisation and status, over HTTP.
//!
//! Owns: the request and reply types of `/api/*` (postcard bodies, for
//! [`crate::client`]), the plain `/kv/{key}` routes (and `/kv?start=&end=`
//! for a range delete) for curl, and the
//! status document `/api/metrics` (JSON).
//! Must never: answer a read from the state machine before leadership was
//! confirmed by a majority after the read arrived and the state applied
//! up to the read index — on the leader by `ensure_linearizable` or, for
//! a lease read, by a lease that holds ([`crate::lease`]), on a follower by
//! the leader's read index ([`READ_INDEX`]) and its own apply reaching it
//! — unless the caller asked for a stale read; serve a stale read before
//! it heard a leader since it started (or leads); serve anything
//! once this node was removed; propose a command that fails
//! [`Command::validate`].

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::{BasicNode, Raft};
use serde::{Deserialize, Serialize};

use crate::body::{bad_body, decode_body, encode_body};
use crate::heard::Heard;
use crate::lease::{self, Acks, Lease};
use crate::proposer::Proposer;
pub use crate::proposer::WriteReply;
use crate::retire::Retirement;
use crate::state_machine::{SmStats, StateReader};
use crate::timings::{Timings, TimingsReport};
use crate::types::{Command, NodeId, Request, TypeConfig, MAX_COMMAND_BYTES};
use std::sync::atomic::{AtomicU64, Ordering};

/// Path of a write (postcard [`Request`] → [`WriteReply`]).
pub const WRITE: &str = "/api/write";
/// Path of a read (postcard key → [`ReadReply`]); linearizable by
/// ReadIndex, or `?consistency=lease` / `stale` ([`Consistency`]).
pub const READ: &str = "/api/read";

/// How a read is served.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Consistency {
    /// Linearizable by ReadIndex: leadership confirmed by a majority round
    /// trip after the read arrived (on a follower, through the leader).
    #[default]
    Linearizable,
    /// Linearizable by the leader's lease, without a round trip while the
    /// lease holds (by ReadIndex when it does not, or on a follower); rests
    /// on the clock assumption of [`crate::lease`].
    Lease,
    /// This node's state as it is: may miss acknowledged writes.
    Stale,
}

impl Consistency {
    /// The name in `?consistency=`.
    pub fn name(self) -> &'static str {
        match self {
            Consistency::Linearizable => "linearizable",
            Consistency::Lease => "lease",
            Consistency::Stale => "stale",
        }
    }
}

impl std::str::FromStr for Consistency {
    type Err = String;

    fn from_str(s: &str) -> Result<Consistency, String> {
        match s {
            "linearizable" => Ok(Consistency::Linearizable),
            "lease" => Ok(Consistency::Lease),
            "stale" => Ok(Consistency::Stale),
            _ => Err(format!("{s:?}: expected linearizable, lease or stale")),
        }
    }
}
/// Path of a local scan (postcard prefix → postcard key/value pairs).
pub const DUMP: &str = "/api/dump";
/// Path of the status document (JSON [`NodeStatus`]).
pub const METRICS: &str = "/api/metrics";
/// Path that initialises the cluster with every configured peer as voter.
pub const INIT: &str = "/api/init";
/// Path of a membership change (postcard [`MembershipChange`] →
/// [`MembershipReply`]), on the leader.
pub const MEMBERSHIP: &str = "/api/membership";
/// Path of the membership this node knows (JSON [`Members`]).
pub const MEMBERS: &str = "/api/members";
/// Path the leader calls on a node it has just removed (postcard node id,
/// which must be the node's own): the node stops raft, refuses to serve
/// from then on, and refuses to start again ([`RETIRED_FILE`]).
pub const RETIRE: &str = "/api/retire";
/// Path of the leader's read index (empty body → postcard
/// [`ReadIndexReply`]): a follower's linearizable read asks it, then waits
/// until it has applied that far.
pub const READ_INDEX: &str = "/api/read-index";

/// What the leader answers a follower's read-index request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ReadIndexReply {
    /// Leadership confirmed by a majority after the request arrived; a
    /// read that sees the state applied up to this index is linearizable.
    Index(Option<u64>),
    /// Not the leader; the leader's address when known.
    NotLeader {
        /// Address of the leader.
        leader: Option<String>,
    },
    /// Leadership could not be confirmed.
    Unavailable {
        /// Why.
        error: String,
    },
}

pub use crate::retire::{MEMBER, RETIRED_FILE};

/// A change of the cluster's members.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MembershipChange {
    /// Adds node `id` at `addr` as a learner and waits until it has caught
    /// up with the leader's log (by a snapshot when the entries it needs
    /// were purged).
    AddLearner {
        /// The new node's id.
        id: NodeId,
        /// Its address, `host:port`.
        addr: String,
    },
    /// Makes learner `id` a voter (a joint configuration, then the new
    /// one, each committed by a majority).
    Promote {
        /// The learner.
        id: NodeId,
    },
    /// Removes node `id` (a voter or a learner) from the cluster.
    Remove {
        /// The node.
        id: NodeId,
    },
}

/// The members of a cluster, as one node knows them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Members {
    /// The voters (of the last configuration; during a joint change, of
    /// both).
    pub voters: Vec<NodeId>,
    /// The learners.
    pub learners: Vec<NodeId>,
    /// Every member's address.
    pub nodes: BTreeMap<NodeId, String>,
}

/// What a membership change answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum MembershipReply {
    /// Committed; the members now.
    Done(Members),
    /// This node is not the leader; the leader's address when known.
    NotLeader {
        /// Address of the leader.
        leader: Option<String>,
    },
    /// The change was refused or could not be made.
    Failed {
        /// Why.
        error: String,
    },
}

/// What a linearizable read answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum ReadReply {
    /// The value as of a point after every write acknowledged before the
    /// read began.
    Value(Option<Vec<u8>>),
    /// This node is not the leader; the leader's address when known.
    NotLeader {
        /// Address of the leader.
        leader: Option<String>,
    },
    /// Leadership could not be confirmed (no quorum), or storage failed.
    Unavailable {
        /// Why.
        error: String,
    },
}

/// A node's status (`/api/metrics`).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct NodeStatus {
    /// This node.
    pub id: NodeId,
    /// Leader, Follower, Candidate, Learner or Shutdown.
    pub state: String,
    /// The current term.
    pub term: u64,
    /// The leader this node knows of.
    pub leader: Option<NodeId>,
    /// Last log index.
    pub last_log_index: Option<u64>,
    /// Last applied index.
    pub last_applied: Option<u64>,
    /// Last index covered by the current snapshot.
    pub snapshot: Option<u64>,
    /// Last purged index.
    pub purged: Option<u64>,
    /// State-machine counters.
    pub sm: SmStats,
    /// Storage timings.
    pub timings: TimingsReport,
    /// Lease reads answered under the lease, and those that went by
    /// ReadIndex instead (no lease held).
    #[serde(default)]
    pub lease_reads: (u64, u64),
}

/// What the client routes share.
#[derive(Clone)]
pub struct ApiState {
    /// This node's id.
    pub id: NodeId,
    /// This node's raft.
    pub raft: Raft<TypeConfig>,
    /// Its state machine.
    pub reader: StateReader,
    /// The cluster's nodes (for `init`).
    pub peers: BTreeMap<NodeId, BasicNode>,
    /// Storage timings.
    pub timings: Arc<Timings>,
    /// The queue that batches concurrent writes into proposals.
    pub proposer: Proposer,
    /// This node's retirement (once removed from the cluster).
    pub retirement: Arc<Retirement>,
    /// When followers accepted this leader's messages (lease reads).
    pub acks: Acks,
    /// The lease a leader holds after a majority accepted its messages
    /// ([`crate::lease::lease_duration`]).
    pub lease: std::time::Duration,
    /// Lease reads served under the lease, and gone by ReadIndex.
    pub lease_reads: Arc<(AtomicU64, AtomicU64)>,
    /// For the retire call to a removed node and a follower's read-index
    /// request (with the node's certificate when it has TLS).
    pub http: reqwest::Client,
    /// `http`, or `https` with TLS.
    pub scheme: &'static str,
    /// Where this node sends messages for a node, when not to the node's
    /// own address (`serve --route`): a follower's read-index request goes
    /// the way its raft messages go.
    pub routes: BTreeMap<NodeId, String>,
    /// How long a follower's read waits for the leader's answer and then
    /// for its own apply to reach the read index.
    pub read_wait: std::time::Duration,
    /// Whether (and when) a leader was heard since this node started: a
    /// stale read waits for one (`ApiState::current`).
    pub heard: Arc<Heard>,
}

/// How often a stale read waiting for a leader to be heard also checks
/// whether this node became the leader.
const POLL: Duration = Duration::from_millis(20);

impl ApiState {
    /// `Ok` once this node knows it belongs to the current cluster: it
    /// accepted a leader's message since it started, or it leads. Waits
    /// for that at most `read_wait`. A stale read (`?local=true`, a dump)
    /// asks this first: a node removed while it was down, restarted on its
    /// old directory, hears no leader and so serves no stale reads in the
    /// seconds before it learns it was removed (`crate::retire`).
    async fn current(&self) -> Result<(), String> {
        let leads = || self.raft.metrics().borrow().state == openraft::ServerState::Leader;
        if self.heard.any() || leads() {
            return Ok(());
        }
        let waited = Instant::now();
        while waited.elapsed() < self.read_wait {
            // Removed meanwhile: said so at once.
            if let Some(error) = self.removed() {
                return Err(error);
            }
            if self.heard.wait_any(POLL).await || leads() {
                return Ok(());
            }
        }
        if let Some(error) = self.removed() {
            return Err(error);
        }
        Err(format!(
            "node {} has heard no leader since it started (a removed node does not): no stale reads",
            self.id
        ))
    }

    /// `Some(why)` once this node has been removed from the cluster: it
    /// then serves no reads or writes (its state stops at its removal).
    fn removed(&self) -> Option<String> {
        if self.retirement.is_retired() {
            return Some(self.retirement.error());
        }
        let metrics = self.raft.metrics().borrow().clone();
        let config = &metrics.membership_config;
        let initialized = config.log_id().is_some();
        let member = config.membership().nodes().any(|(id, _)| *id == self.id);
        (initialized && !member).then(|| format!("node {} was removed from the cluster", self.id))
    }

    fn members(&self) -> Members {
        let metrics = self.raft.metrics().borrow().clone();
        let membership = metrics.membership_config.membership();
        Members {
            voters: membership.voter_ids().collect(),
            learners: membership.learner_ids().collect(),
            nodes: membership
                .nodes()
                .map(|(id, node)| (*id, node.addr.clone()))
                .collect(),
        }
    }

    async fn change(&self, change: MembershipChange) -> MembershipReply {
        use openraft::error::ClientWriteError;
        use openraft::ChangeMembers;
        use std::collections::BTreeSet;
        let result = match change {
            MembershipChange::AddLearner { id, addr } => {
                self.raft.add_learner(id, BasicNode::new(addr), true).await
            }
            MembershipChange::Promote { id } => {
                self.raft
                    .change_membership(ChangeMembers::AddVoterIds(BTreeSet::from([id])), false)
                    .await
            }
            MembershipChange::Remove { id } => {
                let members = self.members();
                let change = if members.voters.contains(&id) {
                    ChangeMembers::RemoveVoters(BTreeSet::from([id]))
                } else {
                    ChangeMembers::RemoveNodes(BTreeSet::from([id]))
                };
                let result = self.raft.change_membership(change, false).await;
                if result.is_ok() {
                    if let Some(addr) = members.nodes.get(&id) {
                        self.retire(id, addr).await;
                    }
                }
                result
            }
        };
        match result {
            Ok(_) => MembershipReply::Done(self.members()),
            Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                MembershipReply::NotLeader {
                    leader: f.leader_node.map(|n| n.addr),
                }
            }
            Err(e) => MembershipReply::Failed {
                error: e.to_string(),
            },
        }
    }

    /// Tells removed node `id` at `addr` so (best effort: a node that is
    /// down then must be wiped, not restarted; docs/replication.md).
    async fn retire(&self, id: NodeId, addr: &str) {
        let Ok(body) = postcard::to_allocvec(&id) else {
            return;
        };
        let sent = self
            .http
            .post(format!("{}://{addr}{RETIRE}", self.scheme))
            .timeout(std::time::Duration::from_secs(2))
            .body(body)
            .send()
            .await;
        if let Err(e) = sent {
            tracing::warn!("telling removed node {id} at {addr}: {e}");
        }
    }

    /// A read of `key` as `consistency` says.
    async fn read_as(&self, key: &[u8], consistency: Consistency) -> ReadReply {
        match consistency {
            Consistency::Linearizable => self.read(key).await,
            Consistency::Lease => self.lease_read(key).await,
            Consistency::Stale => {
                let read = match self.current().await {
                    Ok(()) => self.local_get(key.to_vec()).await,
                    Err(e) => Err(e),
                };
                match read {
                    Ok(v) => ReadReply::Value(v),
                    Err(error) => ReadReply::Unavailable { error },
                }
            }
        }
    }

    /// A read under the leader's lease: when the lease holds, waits until
    /// the state applied the commit index seen with it and reads; else (not
    /// the leader, no lease) by ReadIndex.
    async fn lease_read(&self, key: &[u8]) -> ReadReply {
        if let Some(error) = self.removed() {
            return ReadReply::Unavailable { error };
        }
        match lease::check(&self.raft, self.id, &self.acks, self.lease).await {
            Ok(Lease::Held { commit, .. }) => {
                self.lease_reads.0.fetch_add(1, Ordering::Relaxed);
                let applied = self
                    .raft
                    .wait(Some(self.read_wait))
                    .applied_index_at_least(Some(commit), "lease read")
                    .await;
                if let Err(e) = applied {
                    return ReadReply::Unavailable {
                        error: format!("applying up to the commit index: {e}"),
                    };
                }
                match self.local_get(key.to_vec()).await {
                    Ok(v) => ReadReply::Value(v),
                    Err(error) => ReadReply::Unavailable { error },
                }
            }
            Ok(_) => {
                self.lease_reads.1.fetch_add(1, Ordering::Relaxed);
                self.read(key).await
            }
            Err(error) => ReadReply::Unavailable { error },
        }
    }

    async fn write(&self, req: Request) -> WriteReply {
        if let Some(error) = self.removed() {
            return WriteReply::Unavailable { error };
        }
        if let Err(reason) = req.command.validate() {
            return WriteReply::Rejected { reason };
        }
        self.proposer.propose(req).await
    }

    async fn read(&self, key: &[u8]) -> ReadReply {
        if let Some(error) = self.removed() {
            return ReadReply::Unavailable { error };
        }
        match self.raft.ensure_linearizable().await {
            Ok(_) => {}
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                let (Some(id), Some(node)) = (f.leader_id, f.leader_node) else {
                    return ReadReply::NotLeader { leader: None };
                };
                // A follower: ReadIndex through the leader.
                let via = self.routes.get(&id).unwrap_or(&node.addr).clone();
                if let Err(reply) = self.follower_wait(&via).await {
                    return reply;
                }
            }
            Err(e) => {
                return ReadReply::Unavailable {
                    error: e.to_string(),
                }
            }
        }
        match self.local_get(key.to_vec()).await {
            Ok(v) => ReadReply::Value(v),
            Err(error) => ReadReply::Unavailable { error },
        }
    }

    /// Asks the leader (at `addr`) for its read index and waits until this
    /// node has applied that far.
    async fn follower_wait(&self, addr: &str) -> Result<(), ReadReply> {
        let unavailable = |error: String| ReadReply::Unavailable { error };
        let resp = self
            .http
            .post(format!("{}://{addr}{READ_INDEX}", self.scheme))
            .timeout(self.read_wait)
            .send()
            .await
            .map_err(|e| unavailable(format!("read index from {addr}: {e}")))?;
        let body = resp
            .bytes()
            .await
            .map_err(|e| unavailable(format!("read index from {addr}: {e}")))?;
        let reply = decode_body::<ReadIndexReply>(&body)
            .map_err(|e| unavailable(format!("read index from {addr}: {e}")))?;
        match reply {
            ReadIndexReply::Index(index) => {
                self.raft
                    .wait(Some(self.read_wait))
                    .applied_index_at_least(index, "read index")
                    .await
                    .map_err(|e| unavailable(format!("applying up to the read index: {e}")))?;
                Ok(())
            }
            ReadIndexReply::NotLeader { leader } => Err(ReadReply::NotLeader { leader }),
            ReadIndexReply::Unavailable { error } => Err(unavailable(error)),
        }
    }

    /// The leader's side of [`Self::follower_wait`].
    async fn read_index(&self) -> ReadIndexReply {
        if let Some(error) = self.removed() {
            return ReadIndexReply::Unavailable { error };
        }
        match self.raft.get_read_log_id().await {
            Ok((read, _applied)) => ReadIndexReply::Index(read.map(|l| l.index)),
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                ReadIndexReply::NotLeader {
                    leader: f.leader_node.map(|n| n.addr),
                }
            }
            Err(e) => ReadIndexReply::Unavailable {
                error: e.to_string(),
            },
        }
    }

    async fn local_get(&self, key: Vec<u8>) -> Result<Option<Vec<u8>>, String> {
        if let Some(error) = self.removed() {
            return Err(error);
        }
        let reader = self.reader.clone();
        tokio::task::spawn_blocking(move || reader.get(&key))
            .await
            .map_err(|e| e.to_string())?
            .map(|v| v.map(|b| b.to_vec()))
            .map_err(|e| e.to_string())
    }

    fn status(&self) -> NodeStatus {
        let m = self.raft.metrics().borrow().clone();
        NodeStatus {
            id: m.id,
            state: format!("{:?}", m.state),
            term: m.current_term,
            leader: m.current_leader,
            last_log_index: m.last_log_index,
            last_applied: m.last_applied.map(|l| l.index),
            snapshot: m.snapshot.map(|l| l.index),
            purged: m.purged.map(|l| l.index),
            sm: self.reader.stats(),
            timings: self.timings.report(),
            lease_reads: (
                self.lease_reads.0.load(Ordering::Relaxed),
                self.lease_reads.1.load(Ordering::Relaxed),
            ),
        }
    }
}

async fn write(State(api): State<ApiState>, body: Bytes) -> Response {
    let _timer = api.timings.write_request.start();
    match decode_body::<Request>(&body) {
        Ok(req) => encode_body(&api.write(req).await),
        Err(e) => bad_body(e),
    }
}

async fn read(State(api): State<ApiState>, Query(q): Query<ReadQuery>, body: Bytes) -> Response {
    match decode_body::<Vec<u8>>(&body) {
        Ok(key) => encode_body(&api.read_as(&key, q.consistency.unwrap_or_default()).await),
        Err(e) => bad_body(e),
    }
}

async fn dump(State(api): State<ApiState>, body: Bytes) -> Response {
    let prefix = match decode_body::<Vec<u8>>(&body) {
        Ok(p) => p,
        Err(e) => return bad_body(e),
    };
    if let Some(error) = api.removed() {
        return (StatusCode::GONE, error).into_response();
    }
    if let Err(error) = api.current().await {
        return (StatusCode::SERVICE_UNAVAILABLE, error).into_response();
    }
    let reader = api.reader.clone();
    let scanned = tokio::task::spawn_blocking(move || reader.scan(&prefix)).await;
    match scanned {
        Ok(Ok(pairs)) => {
            let pairs: Vec<(Vec<u8>, Vec<u8>)> = pairs
                .into_iter()
                .map(|(k, v)| (k.to_vec(), v.to_vec()))
                .collect();
            encode_body(&pairs)
        }
        Ok(Err(e)) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
        Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()).into_response(),
    }
}

async fn membership(State(api): State<ApiState>, body: Bytes) -> Response {
    match decode_body::<MembershipChange>(&body) {
        Ok(change) => encode_body(&api.change(change).await),
        Err(e) => bad_body(e),
    }
}

async fn read_index(State(api): State<ApiState>) -> Response {
    encode_body(&api.read_index().await)
}

async fn retire(State(api): State<ApiState>, body: Bytes) -> Response {
    match decode_body::<NodeId>(&body) {
        Ok(id) if id == api.id => match api.retirement.retire("told by the leader").await {
            Ok(()) => (StatusCode::OK, "retired\n").into_response(),
            Err(e) => (StatusCode::INTERNAL_SERVER_ERROR, e).into_response(),
        },
        Ok(id) => (
            StatusCode::BAD_REQUEST,
            format!("this is node {}, not node {id}\n", api.id),
        )
            .into_response(),
        Err(e) => bad_body(e),
    }
}

async fn member(State(api): State<ApiState>, body: Bytes) -> Response {
    match decode_body::<NodeId>(&body) {
        Ok(id) => encode_body(&crate::retire::verdict(&api.raft, id).await),
        Err(e) => bad_body(e),
    }
}

async fn members(State(api): State<ApiState>) -> Json<Members> {
    Json(api.members())
}

async fn metrics(State(api): State<ApiState>) -> Json<NodeStatus> {
    Json(api.status())
}

async fn init(State(api): State<ApiState>) -> Response {
    match api.raft.initialize(api.peers.clone()).await {
        Ok(()) => (StatusCode::OK, "initialized\n").into_response(),
        Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(e))) => {
            (StatusCode::OK, format!("already initialized: {e}\n")).into_response()
        }
        Err(e) => (StatusCode::SERVICE_UNAVAILABLE, format!("{e}\n")).into_response(),
    }
}

#[derive(Deserialize)]
struct KvQuery {
    local: Option<bool>,
    consistency: Option<Consistency>,
}

#[derive(Deserialize)]
struct ReadQuery {
    consistency: Option<Consistency>,
}

/// The range of `DELETE /kv?start=S&end=E`: `start` required (`start=`
/// is every key), no `end`: every key from `start` on.
#[derive(Deserialize)]
struct KvRange {
    start: String,
    end: Option<String>,
}

fn not_leader(leader: Option<String>) -> Response {
    let text = match leader {
        Some(addr) => format!("not the leader; the leader is {addr}\n"),
        None => "not the leader; no leader known\n".to_string(),
    };
    (StatusCode::MISDIRECTED_REQUEST, text).into_response()
}

fn write_response(reply: WriteReply) -> Response {
    match reply {
        WriteReply::Applied { index, .. } => {
            (StatusCode::OK, format!("ok {index}\n")).into_response()
        }
        WriteReply::NotLeader { leader } => not_leader(leader),
        WriteReply::Rejected { reason } => {
            (StatusCode::BAD_REQUEST, format!("{reason}\n")).into_response()
        }
        WriteReply::Unavailable { error } => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n")).into_response()
        }
    }
}

async fn kv_get(
    State(api): State<ApiState>,
    Path(key): Path<String>,
    Query(q): Query<KvQuery>,
) -> Response {
    let consistency = if q.local.unwrap_or(false) {
        Consistency::Stale
    } else {
        q.consistency.unwrap_or_default()
    };
    let reply = api.read_as(key.as_bytes(), consistency).await;
    match reply {
        ReadReply::Value(Some(v)) => (StatusCode::OK, v).into_response(),
        ReadReply::Value(None) => StatusCode::NOT_FOUND.into_response(),
        ReadReply::NotLeader { leader } => not_leader(leader),
        ReadReply::Unavailable { error } => {
            (StatusCode::SERVICE_UNAVAILABLE, format!("{error}\n")).into_response()
        }
    }
}

async fn kv_put(State(api): State<ApiState>, Path(key): Path<String>, body: Bytes) -> Response {
    write_response(
        api.write(Request::unsessioned(Command::Put {
            key: key.into_bytes(),
            value: body.to_vec(),
        }))
        .await,
    )
}

async fn kv_delete(State(api): State<ApiState>, Path(key): Path<String>) -> Response {
    write_response(
        api.write(Request::unsessioned(Command::Delete {
            key: key.into_bytes(),
        }))
        .await,
    )
}

async fn kv_delete_range(State(api): State<ApiState>, Query(range): Query<KvRange>) -> Response {
    write_response(
        api.write(Request::unsessioned(Command::DeleteRange {
            start: range.start.into_bytes(),
            end: range.end.map(String::into_bytes),
        }))
        .await,
    )
}

/// The client routes.
pub fn routes(state: ApiState) -> Router {
    Router::new()
        .route(WRITE, post(write))
        .route(READ, post(read))
        .route(DUMP, post(dump))
        .route(METRICS, get(metrics))
        .route(INIT, post(init))
        .route(MEMBERSHIP, post(membership))
        .route(MEMBERS, get(members))
        .route(RETIRE, post(retire))
        .route(READ_INDEX, post(read_index))
        .route(MEMBER, post(member))
        .route("/kv/{key}", get(kv_get).put(kv_put).delete(kv_delete))
        .route("/kv", delete(kv_delete_range))
        // A command is at most MAX_COMMAND_BYTES of keys and values; its
        // encoding adds a few bytes per op.
        .layer(axum::extract::DefaultBodyLimit::max(2 * MAX_COMMAND_BYTES))
        .with_state(state)
}
