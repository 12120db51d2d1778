//! One cluster node: its storage, its raft, and one HTTP listener for both
//! the raft messages and the client API.
//!
//! Owns: [`NodeConfig`] (id, directory, address, peers, raft timing, TLS
//! files and client token) and [`run`], which opens the storage, starts
//! openraft, serves until told to stop and shuts raft down; which routes
//! only peers may call ([`PEER_ROUTES`]).
//! Must never: start raft on storage it could not open, serve a node id
//! that is not among its peers, or listen on an address other than
//! loopback without TLS unless told `insecure`.

use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use openraft::{BasicNode, Config, Raft, SnapshotPolicy};

use crate::api::{self, ApiState};
use crate::early_send;
use crate::lease::{self, Acks};
use crate::network::{self, Network};
use crate::proposer::Proposer;
use crate::retire::{self, Retirement};
use crate::tls::{self, Gate, NodeTls, TlsError, TlsFiles, Token};
use crate::types::NodeId;
use crate::types::MAX_PAYLOAD_ENTRIES;

/// How long a leader waits for the answer to a snapshot chunk, in ms. The
/// answer to the last chunk waits for the whole install (the state loaded
/// into a fresh keyspace and the switch synced), which takes seconds for a large
/// state; openraft's default (200 ms) would time out and resend it.
pub const INSTALL_SNAPSHOT_TIMEOUT_MS: u64 = 60_000;

/// How a node is started.
#[derive(Clone, Debug)]
pub struct NodeConfig {
    /// This node's id (stable across restarts).
    pub id: NodeId,
    /// Its directory (created when missing).
    pub dir: PathBuf,
    /// The address it listens on (its own entry in `peers`).
    pub listen: SocketAddr,
    /// Every node of the cluster, this one included: id → `host:port`.
    pub peers: BTreeMap<NodeId, String>,
    /// Where this node sends raft messages for a node, when not to the
    /// node's own address (a fault proxy in tests): id → `host:port`.
    pub routes: BTreeMap<NodeId, String>,
    /// Heartbeat interval, ms.
    pub heartbeat_ms: u64,
    /// Election timeout range, ms.
    pub election_ms: (u64, u64),
    /// A snapshot is built every this many applied entries.
    pub snapshot_every: u64,
    /// Entries kept in the log behind a snapshot (for lagging followers).
    pub keep_logs: u64,
    /// Bytes of snapshot file per message to a follower.
    pub snapshot_chunk_bytes: u64,
    /// TLS for peers and clients (mutual TLS between nodes); plain HTTP
    /// without.
    pub tls: Option<TlsFiles>,
    /// A file holding the token clients must show (clients with a
    /// certificate from the CA need none).
    pub client_token_file: Option<PathBuf>,
    /// Serve plain HTTP on an address other than loopback (no encryption,
    /// no peer authentication).
    pub insecure: bool,
    /// As leader, send new entries to the followers while they are being
    /// fsynced here ([`crate::early_send`]); off only to measure what it
    /// saves.
    pub early_send: bool,
    /// Test only: the leader's lease for lease reads instead of the one
    /// derived from the election timeout ([`lease::lease_duration`]). A
    /// lease longer than the election timeout is unsafe: an isolated
    /// leader may serve stale reads, which is what a test sets it for
    /// (to show its checker catches them).
    pub unsafe_lease: Option<Duration>,
}

/// The routes only peers call: the raft messages, a follower's read-index
/// request and the leader's retire call. With TLS, each needs a certificate
/// from the CA; a client token does not open them.
pub const PEER_ROUTES: &[&str] = &[
    network::APPEND,
    network::VOTE,
    network::SNAPSHOT,
    api::READ_INDEX,
    api::RETIRE,
    api::MEMBER,
];

/// Errors starting a node.
#[derive(Debug, thiserror::Error)]
pub enum NodeError {
    /// A setting is wrong.
    #[error("configuration: {0}")]
    Config(String),
    /// The storage could not be opened.
    #[error("storage: {0}")]
    Storage(#[from] crate::codec::Error),
    /// Raft failed to start or stopped.
    #[error("raft: {0}")]
    Raft(String),
    /// The TLS files or client token could not be loaded.
    #[error("TLS: {0}")]
    Tls(#[from] TlsError),
    /// The listener failed.
    #[error("listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

impl NodeConfig {
    /// openraft's configuration for this node.
    pub fn raft_config(&self) -> Result<Config, NodeError> {
        let config = Config {
            cluster_name: "siftdb-raft".into(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_ms.0,
            election_timeout_max: self.election_ms.1,
            snapshot_policy: SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.keep_logs,
            snapshot_max_chunk_size: self.snapshot_chunk_bytes,
            // Purge right after each snapshot: the purge is one range
            // delete, however many entries it covers.
            purge_batch_size: 1,
            max_payload_entries: MAX_PAYLOAD_ENTRIES,
            install_snapshot_timeout: INSTALL_SNAPSHOT_TIMEOUT_MS,
            ..Config::default()
        };
        config
            .validate()
            .map_err(|e| NodeError::Config(e.to_string()))
    }

    fn nodes(&self) -> BTreeMap<NodeId, BasicNode> {
        self.peers
            .iter()
            .map(|(&id, addr)| (id, BasicNode::new(addr)))
            .collect()
    }
}

/// Binds `addr` with SO_REUSEADDR (a restarted node takes its port back
/// while old connections linger), retrying for a few seconds.
async fn bind(addr: SocketAddr) -> Result<tokio::net::TcpListener, NodeError> {
    let mut last = None;
    for _ in 0..50 {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4(),
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6(),
        }
        .map_err(|source| NodeError::Listen { addr, source })?;
        socket
            .set_reuseaddr(true)
            .map_err(|source| NodeError::Listen { addr, source })?;
        match socket.bind(addr).and_then(|()| socket.listen(1024)) {
            Ok(listener) => return Ok(listener),
            Err(e) => {
                last = Some(e);
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    Err(NodeError::Listen {
        addr,
        source: last.unwrap_or_else(|| std::io::Error::other("bind failed")),
    })
}

/// Runs the node until `shutdown` completes.
pub async fn run(
    cfg: NodeConfig,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), NodeError> {
    if !cfg.peers.contains_key(&cfg.id) {
        return Err(NodeError::Config(format!(
            "node {} is not among the peers",
            cfg.id
        )));
    }
    if cfg.dir.join(api::RETIRED_FILE).exists() {
        return Err(NodeError::Config(format!(
            "node {} was removed from the cluster ({} in {}); start a node with a fresh directory instead",
            cfg.id,
            api::RETIRED_FILE,
            cfg.dir.display()
        )));
    }
    if !cfg.listen.ip().is_loopback() && cfg.tls.is_none() && !cfg.insecure {
        return Err(NodeError::Config(format!(
            "{} is not a loopback address: serving it without TLS would let anyone who reaches it read the traffic and write to the cluster; give --tls-cert, --tls-key and --tls-ca (and --client-token-file), or --insecure to serve plain HTTP without authentication anyway",
            cfg.listen
        )));
    }
    let node_tls = cfg.tls.as_ref().map(NodeTls::load).transpose()?;
    let token = cfg
        .client_token_file
        .as_deref()
        .map(Token::from_file)
        .transpose()?;
    let peer_auth = node_tls
        .as_ref()
        .map(NodeTls::peer_auth)
        .unwrap_or_default();
    let gate = Gate::new(node_tls.is_some(), token, PEER_ROUTES);
    let config = Arc::new(cfg.raft_config()?);
    let dir = cfg.dir.clone();
    let (mut log, sm, timings) = tokio::task::spawn_blocking(move || crate::open_storage(&dir))
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))??;
    log.gate_purges(sm.purge_gate());
    let reader = sm.reader();
    let retirement = Retirement::new(cfg.id, cfg.dir.clone());
    let acks = Acks::default();
    let network = Network::new(Duration::from_millis(500), cfg.routes.clone(), &peer_auth)?
        .timed(Arc::clone(&timings))
        .with_acks(acks.clone())
        .retiring(Arc::clone(&retirement));
    let own_appends = cfg.early_send.then(|| {
        let (to, from) = tokio::sync::mpsc::unbounded_channel();
        log.send_own_appends(cfg.id, to);
        (from, network.clone())
    });
    let raft = Raft::new(cfg.id, config, network, log, sm)
        .await
        .map_err(|e| NodeError::Raft(e.to_string()))?;
    if let Some((appends, network)) = own_appends {
        early_send::start(
            cfg.id,
            raft.clone(),
            network,
            appends,
            Arc::clone(&timings),
            Duration::from_millis(cfg.election_ms.0),
        );
    }
    let election_max = Duration::from_millis(cfg.election_ms.1);
    let heard = Arc::new(network::Heard::default());
    // Once retired (told by the leader, or found out), raft stops.
    tokio::spawn({
        let (raft, retirement) = (raft.clone(), Arc::clone(&retirement));
        async move {
            retirement.stopped().await;
            if let Err(e) = raft.shutdown().await {
                tracing::warn!("stopping raft after removal: {e}");
            }
        }
    });
    tokio::spawn(retire::watch(
        raft.clone(),
        Arc::clone(&retirement),
        Arc::clone(&heard),
        retire::Asker {
            http: peer_auth.http_client(reqwest::Client::builder())?,
            scheme: peer_auth.scheme(),
            routes: cfg.routes.clone(),
        },
        election_max * retire::SILENCE_ELECTIONS,
    ));
    let app = network::routes(
        raft.clone(),
        election_max,
        Arc::clone(&heard),
        Some(Arc::clone(&timings)),
    )
    .merge(api::routes(ApiState {
        id: cfg.id,
        raft: raft.clone(),
        reader,
        peers: cfg.nodes(),
        proposer: Proposer::start(raft.clone(), Arc::clone(&timings)),
        timings: Arc::clone(&timings),
        retirement,
        acks,
        lease: cfg
            .unsafe_lease
            .unwrap_or_else(|| lease::lease_duration(Duration::from_millis(cfg.election_ms.0))),
        lease_reads: Arc::default(),
        http: peer_auth.http_client(reqwest::Client::builder())?,
        scheme: peer_auth.scheme(),
        routes: cfg.routes.clone(),
        read_wait: Duration::from_millis(cfg.election_ms.1.saturating_mul(2)),
        heard,
    }))
    .layer(axum::middleware::from_fn_with_state(gate, tls::authorize));
    let listener = bind(cfg.listen).await?;
    let served = tls::serve(listener, app, node_tls.as_ref(), shutdown)
        .await
        .map_err(|source| NodeError::Listen {
            addr: cfg.listen,
            source,
        });
    // Already stopped when the node was removed.
    if let Err(e) = raft.shutdown().await {
        tracing::warn!("raft shutdown: {e}");
    }
    served
}
