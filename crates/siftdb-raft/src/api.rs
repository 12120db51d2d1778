//! The client side of a node: writes through raft, linearizable and local
//! reads, cluster initialisation and status, over HTTP.
//!
//! Owns: the request and reply types of `/api/*` (postcard bodies, for
//! [`crate::client`]), the plain `/kv/{key}` routes for curl, and the
//! status document `/api/metrics` (JSON).
//! Must never: answer a read from the state machine before
//! `ensure_linearizable` has confirmed leadership and waited for the apply
//! (unless the caller asked for a local read); propose a command that fails
//! [`Command::validate`].

use std::collections::BTreeMap;
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use openraft::error::{CheckIsLeaderError, RaftError};
use openraft::{BasicNode, Raft};
use serde::{Deserialize, Serialize};

use crate::network::{bad_body, decode_body, encode_body};
use crate::proposer::Proposer;
pub use crate::proposer::WriteReply;
use crate::state_machine::{SmStats, StateReader};
use crate::timings::{Timings, TimingsReport};
use crate::types::{Command, NodeId, Request, TypeConfig, MAX_COMMAND_BYTES};

/// Path of a write (postcard [`Request`] → [`WriteReply`]).
pub const WRITE: &str = "/api/write";
/// Path of a linearizable read (postcard key → [`ReadReply`]).
pub const READ: &str = "/api/read";
/// Path of a local scan (postcard prefix → postcard key/value pairs).
pub const DUMP: &str = "/api/dump";
/// Path of the status document (JSON [`NodeStatus`]).
pub const METRICS: &str = "/api/metrics";
/// Path that initialises the cluster with every configured peer as voter.
pub const INIT: &str = "/api/init";

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
}

/// What the client routes share.
#[derive(Clone)]
pub struct ApiState {
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
}

impl ApiState {
    async fn write(&self, req: Request) -> WriteReply {
        if let Err(reason) = req.command.validate() {
            return WriteReply::Rejected { reason };
        }
        self.proposer.propose(req).await
    }

    async fn read(&self, key: &[u8]) -> ReadReply {
        match self.raft.ensure_linearizable().await {
            Ok(_) => {}
            Err(RaftError::APIError(CheckIsLeaderError::ForwardToLeader(f))) => {
                return ReadReply::NotLeader {
                    leader: f.leader_node.map(|n| n.addr),
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

    async fn local_get(&self, key: Vec<u8>) -> Result<Option<Vec<u8>>, String> {
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
        }
    }
}

async fn write(State(api): State<ApiState>, body: Bytes) -> Response {
    match decode_body::<Request>(&body) {
        Ok(req) => encode_body(&api.write(req).await),
        Err(e) => bad_body(e),
    }
}

async fn read(State(api): State<ApiState>, body: Bytes) -> Response {
    match decode_body::<Vec<u8>>(&body) {
        Ok(key) => encode_body(&api.read(&key).await),
        Err(e) => bad_body(e),
    }
}

async fn dump(State(api): State<ApiState>, body: Bytes) -> Response {
    let prefix = match decode_body::<Vec<u8>>(&body) {
        Ok(p) => p,
        Err(e) => return bad_body(e),
    };
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
    let reply = if q.local.unwrap_or(false) {
        match api.local_get(key.into_bytes()).await {
            Ok(v) => ReadReply::Value(v),
            Err(error) => ReadReply::Unavailable { error },
        }
    } else {
        api.read(key.as_bytes()).await
    };
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

/// The client routes.
pub fn routes(state: ApiState) -> Router {
    Router::new()
        .route(WRITE, post(write))
        .route(READ, post(read))
        .route(DUMP, post(dump))
        .route(METRICS, get(metrics))
        .route(INIT, post(init))
        .route("/kv/{key}", get(kv_get).put(kv_put).delete(kv_delete))
        // A command is at most MAX_COMMAND_BYTES of keys and values; its
        // encoding adds a few bytes per op.
        .layer(axum::extract::DefaultBodyLimit::max(2 * MAX_COMMAND_BYTES))
        .with_state(state)
}
