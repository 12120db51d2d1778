//! Raft messages between nodes over HTTP/1.1 (reqwest to send, axum to
//! receive), bodies in postcard.
//!
//! Owns: [`Network`] (openraft's `RaftNetworkFactory`) and its per-peer
//! [`Connection`] (`RaftNetwork`: append-entries, vote, and snapshot chunks
//! through openraft's chunked transfer), and [`routes`], the receiving side.
//! Must never: turn a peer that cannot be reached into anything but
//! `Unreachable` (openraft then backs off instead of spinning), or panic on
//! a body it cannot decode (that is a 400).

use std::time::Duration;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::Router;
use openraft::error::{InstallSnapshotError, NetworkError, RPCError, RaftError, Unreachable};
use openraft::network::{RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::{BasicNode, Raft};
use serde::de::DeserializeOwned;
use serde::Serialize;

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
}

impl Network {
    /// A network whose TCP connections time out after `connect_timeout`.
    pub fn new(connect_timeout: Duration) -> Result<Network, reqwest::Error> {
        let http = reqwest::Client::builder()
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .build()?;
        Ok(Network { http })
    }
}

/// The link to one peer.
pub struct Connection {
    http: reqwest::Client,
    target: NodeId,
    addr: String,
}

impl RaftNetworkFactory<TypeConfig> for Network {
    type Network = Connection;

    async fn new_client(&mut self, target: NodeId, node: &BasicNode) -> Connection {
        Connection {
            http: self.http.clone(),
            target,
            addr: node.addr.clone(),
        }
    }
}

impl Connection {
    async fn call<Req, Resp, E>(&self, path: &str, req: &Req, ttl: Duration) -> RpcResult<Resp, E>
    where
        Req: Serialize,
        Resp: DeserializeOwned,
        E: std::error::Error + DeserializeOwned,
    {
        let body =
            postcard::to_allocvec(req).map_err(|e| RPCError::Network(NetworkError::new(&e)))?;
        let url = format!("http://{}{path}", self.addr);
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

impl RaftNetwork<TypeConfig> for Connection {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<TypeConfig>,
        option: RPCOption,
    ) -> RpcResult<AppendEntriesResponse<NodeId>, openraft::error::Infallible> {
        self.call(APPEND, &rpc, option.hard_ttl()).await
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

/// A postcard body.
pub(crate) fn decode_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, postcard::Error> {
    postcard::from_bytes(body)
}

/// The 400 answering a body that did not decode.
pub(crate) fn bad_body(e: postcard::Error) -> Response {
    (StatusCode::BAD_REQUEST, format!("undecodable body: {e}")).into_response()
}

/// `value` as a postcard body, or a 500.
pub(crate) fn encode_body<T: Serialize>(value: &T) -> Response {
    match postcard::to_allocvec(value) {
        Ok(bytes) => bytes.into_response(),
        Err(e) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("unencodable reply: {e}"),
        )
            .into_response(),
    }
}

async fn append(State(raft): State<Raft<TypeConfig>>, body: Bytes) -> Response {
    match decode_body::<AppendEntriesRequest<TypeConfig>>(&body) {
        Ok(req) => encode_body(&raft.append_entries(req).await),
        Err(e) => bad_body(e),
    }
}

async fn vote(State(raft): State<Raft<TypeConfig>>, body: Bytes) -> Response {
    match decode_body::<VoteRequest<NodeId>>(&body) {
        Ok(req) => encode_body(&raft.vote(req).await),
        Err(e) => bad_body(e),
    }
}

async fn snapshot(State(raft): State<Raft<TypeConfig>>, body: Bytes) -> Response {
    match decode_body::<InstallSnapshotRequest<TypeConfig>>(&body) {
        Ok(req) => encode_body(&raft.install_snapshot(req).await),
        Err(e) => bad_body(e),
    }
}

/// The largest raft message body accepted: openraft sends at most
/// [`crate::types::MAX_PAYLOAD_ENTRIES`] entries of at most
/// `MAX_PROPOSAL_BYTES + MAX_COMMAND_BYTES` (5 MiB) each, or one snapshot
/// chunk (`snapshot_max_chunk_size`, 3 MiB by default).
pub const MAX_RPC_BODY: usize = 512 << 20;

/// The receiving side of the raft RPCs.
pub fn routes(raft: Raft<TypeConfig>) -> Router {
    Router::new()
        .route(APPEND, post(append))
        .route(VOTE, post(vote))
        .route(SNAPSHOT, post(snapshot))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_RPC_BODY))
        .with_state(raft)
}
