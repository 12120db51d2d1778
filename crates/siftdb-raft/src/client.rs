//! A client of a cluster that follows the leader: writes and linearizable
//! reads are sent to the node it believes leads, redirected by a node that
//! knows better, and retried elsewhere while no leader answers.
//!
//! Owns: [`Client`] and its retry loop, its client sessions (each write
//! carries a session id and sequence number, and every retry of it the
//! same pair, so the cluster applies it once however many copies arrive),
//! and the per-node calls the tests and the bench use (status, local dump,
//! init); over https with a token or client certificate when given a
//! [`ClientAuth`].
//! Must never: report a write as acknowledged that the leader did not
//! answer for; retry past its deadline; send a command under a session
//! with another in flight under the same session (the state machine keeps
//! one answer per session).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::api::{
    self, Consistency, Members, MembershipChange, MembershipReply, NodeStatus, ReadReply,
    WriteReply,
};
use crate::retire::Verdict;
use crate::tls::ClientAuth;
use crate::types::{Command, NodeId, Request, Response, Session};

/// The read route with its `?consistency=`.
fn read_path(consistency: Consistency) -> String {
    format!("{}?consistency={}", api::READ, consistency.name())
}

/// Errors of a client call.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// No node acknowledged before the deadline; the last failure.
    #[error("no leader answered within {0:?}: {1}")]
    Deadline(Duration, String),
    /// The cluster refused the command (it breaks a limit).
    #[error("rejected: {0}")]
    Rejected(String),
    /// One node's answer could not be had or read.
    #[error("{0}")]
    Node(String),
    /// A node refused this client's credentials (401: no token, a wrong
    /// one, or no client certificate where one is required); not retried.
    #[error("refused: {0}")]
    Refused(String),
}

/// Why one request to one node failed.
#[derive(Debug)]
struct Failure {
    /// The node answered 401.
    refused: bool,
    message: String,
}

impl Failure {
    fn other(addr: &str, e: impl std::fmt::Display) -> Failure {
        Failure {
            refused: false,
            message: format!("{addr}: {e}"),
        }
    }

    /// `resp`'s status and text when it is not a success.
    async fn check(addr: &str, resp: reqwest::Response) -> Result<reqwest::Response, Failure> {
        let status = resp.status();
        if status.is_success() {
            return Ok(resp);
        }
        let text = resp.text().await.unwrap_or_default();
        Err(Failure {
            refused: status == reqwest::StatusCode::UNAUTHORIZED,
            message: format!("{addr}: status {status}: {}", text.trim_end()),
        })
    }
}

impl From<Failure> for ClientError {
    fn from(f: Failure) -> ClientError {
        if f.refused {
            ClientError::Refused(f.message)
        } else {
            ClientError::Node(f.message)
        }
    }
}

impl<T> From<Failure> for Attempt<T> {
    fn from(f: Failure) -> Attempt<T> {
        if f.refused {
            Attempt::Refused(f.message)
        } else {
            Attempt::Failed(f.message)
        }
    }
}

/// An acknowledged write.
#[derive(Clone, Debug)]
pub struct Ack {
    /// The log index it was committed at.
    pub index: u64,
    /// What applying it answered.
    pub response: Response,
}

/// A cluster client; share it between tasks.
pub struct Client {
    http: reqwest::Client,
    scheme: &'static str,
    nodes: Vec<String>,
    leader: Mutex<Option<String>>,
    next: AtomicUsize,
    deadline: Duration,
    request_timeout: Duration,
    /// Sessions not in use: (client id, next sequence number). A write
    /// takes one (or opens a new one) and gives it back after.
    sessions: Mutex<Vec<(u64, u64)>>,
}

/// A fresh client id: random (std's per-process random hash keys, the
/// clock and a counter), so two clients never share one in practice.
pub fn new_client_id() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    hasher.write_u32(std::process::id());
    if let Ok(now) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(now.as_nanos());
    }
    hasher.finish()
}

enum Attempt<T> {
    Done(T),
    NotLeader(Option<String>),
    Failed(String),
    /// Credentials refused: trying other nodes would not help.
    Refused(String),
}

impl Client {
    /// A client of the nodes at `nodes` (`host:port`) over plain HTTP; each
    /// call retries for up to `deadline`, each request waits up to
    /// `request_timeout`.
    pub fn new(
        nodes: Vec<String>,
        deadline: Duration,
        request_timeout: Duration,
    ) -> Result<Client, ClientError> {
        Client::with_auth(nodes, deadline, request_timeout, &ClientAuth::default())
    }

    /// [`Client::new`] reaching the nodes as `auth` says (https verifying
    /// them against a CA, a token, a client certificate).
    pub fn with_auth(
        nodes: Vec<String>,
        deadline: Duration,
        request_timeout: Duration,
        auth: &ClientAuth,
    ) -> Result<Client, ClientError> {
        let http = auth
            .http_client(
                reqwest::Client::builder()
                    .connect_timeout(Duration::from_millis(500))
                    .tcp_nodelay(true),
            )
            .map_err(|e| ClientError::Node(e.to_string()))?;
        Ok(Client {
            http,
            scheme: auth.scheme(),
            nodes,
            leader: Mutex::new(None),
            next: AtomicUsize::new(0),
            deadline,
            request_timeout,
            sessions: Mutex::new(Vec::new()),
        })
    }

    /// The nodes this client knows.
    pub fn nodes(&self) -> &[String] {
        &self.nodes
    }

    async fn post<Req: Serialize, Resp: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        req: &Req,
        timeout: Duration,
    ) -> Result<Resp, Failure> {
        let body = postcard::to_allocvec(req).map_err(|e| Failure::other(addr, e))?;
        let resp = self
            .http
            .post(format!("{}://{addr}{path}", self.scheme))
            .timeout(timeout)
            .body(body)
            .send()
            .await
            .map_err(|e| Failure::other(addr, e))?;
        let resp = Failure::check(addr, resp).await?;
        let bytes = resp.bytes().await.map_err(|e| Failure::other(addr, e))?;
        postcard::from_bytes(&bytes).map_err(|e| Failure::other(addr, e))
    }

    fn target(&self) -> String {
        if let Some(leader) = self.leader.lock().clone() {
            return leader;
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        self.nodes
            .get(n % self.nodes.len().max(1))
            .cloned()
            .unwrap_or_default()
    }

    /// Runs `attempt` against the leader until it is done or the deadline
    /// passes.
    async fn with_leader<T, F, Fut>(&self, mut attempt: F) -> Result<T, ClientError>
    where
        F: FnMut(String) -> Fut,
        Fut: std::future::Future<Output = Result<Attempt<T>, ClientError>>,
    {
        let start = Instant::now();
        let mut last = String::from("no attempt");
        while start.elapsed() < self.deadline {
            let addr = self.target();
            match attempt(addr.clone()).await? {
                Attempt::Done(value) => {
                    *self.leader.lock() = Some(addr);
                    return Ok(value);
                }
                Attempt::NotLeader(Some(leader)) if leader != addr => {
                    *self.leader.lock() = Some(leader);
                    continue;
                }
                Attempt::NotLeader(_) => {
                    last = format!("{addr}: not the leader, no leader known");
                }
                Attempt::Failed(e) => last = e,
                Attempt::Refused(e) => return Err(ClientError::Refused(e)),
            }
            // No leader reachable through this node: forget it, try the
            // next one after a pause (an election takes a few hundred ms).
            *self.leader.lock() = None;
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Err(ClientError::Deadline(self.deadline, last))
    }

    /// Proposes `cmd` under one of this client's sessions and waits until
    /// it is committed and applied: applied once, however often it is
    /// retried. An error means its outcome is unknown (applied once or not
    /// at all).
    pub async fn write(&self, cmd: &Command) -> Result<Ack, ClientError> {
        let mut fresh_tries = 0;
        loop {
            let taken = self.sessions.lock().pop();
            let (client, seq) = taken.unwrap_or_else(|| (new_client_id(), 1));
            let req = Request {
                session: Some(Session { client, seq }),
                command: cmd.clone(),
            };
            let result = self.write_request(&req).await;
            if let Ok(Ack {
                response: Response::SessionExpired,
                ..
            }) = result
            {
                // The session was forgotten while idle: this number was
                // never applied under it (its retries all fit well within
                // the expiry). Again under a new session.
                fresh_tries += 1;
                if fresh_tries < 3 {
                    continue;
                }
            } else {
                // After an error too: the next number makes a late copy
                // of this one `Stale`, never applied.
                self.sessions.lock().push((client, seq + 1));
            }
            return result;
        }
    }

    /// Proposes `req` as it is (its session, if any, unchanged on every
    /// retry) and waits until it is committed and applied.
    pub async fn write_request(&self, req: &Request) -> Result<Ack, ClientError> {
        self.with_leader(|addr| async move {
            let reply = self
                .post::<_, WriteReply>(&addr, api::WRITE, req, self.request_timeout)
                .await;
            Ok(match reply {
                Ok(WriteReply::Applied { index, response }) => {
                    Attempt::Done(Ack { index, response })
                }
                Ok(WriteReply::NotLeader { leader }) => Attempt::NotLeader(leader),
                Ok(WriteReply::Rejected { reason }) => return Err(ClientError::Rejected(reason)),
                Ok(WriteReply::Unavailable { error }) => {
                    Attempt::Failed(format!("{addr}: {error}"))
                }
                Err(e) => e.into(),
            })
        })
        .await
    }

    /// A linearizable read of `key`: reflects every write acknowledged
    /// before it began.
    pub async fn read(&self, key: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        self.read_with(key, Consistency::Linearizable).await
    }

    /// A read of `key` at the leader as `consistency` says (a lease read:
    /// linearizable under the clock assumption of [`crate::lease`]).
    pub async fn read_with(
        &self,
        key: &[u8],
        consistency: Consistency,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        let key = key.to_vec();
        let path = read_path(consistency);
        self.with_leader(|addr| {
            let (key, path) = (key.clone(), path.clone());
            async move {
                let reply = self
                    .post::<_, ReadReply>(&addr, &path, &key, self.request_timeout)
                    .await;
                Ok(match reply {
                    Ok(ReadReply::Value(v)) => Attempt::Done(v),
                    Ok(ReadReply::NotLeader { leader }) => Attempt::NotLeader(leader),
                    Ok(ReadReply::Unavailable { error }) => {
                        Attempt::Failed(format!("{addr}: {error}"))
                    }
                    Err(e) => e.into(),
                })
            }
        })
        .await
    }

    /// Makes `change` to the cluster's members through its leader.
    pub async fn change_membership(
        &self,
        change: &MembershipChange,
    ) -> Result<Members, ClientError> {
        self.with_leader(|addr| async move {
            let reply = self
                .post::<_, MembershipReply>(&addr, api::MEMBERSHIP, change, self.deadline)
                .await;
            Ok(match reply {
                Ok(MembershipReply::Done(members)) => Attempt::Done(members),
                Ok(MembershipReply::NotLeader { leader }) => Attempt::NotLeader(leader),
                Ok(MembershipReply::Failed { error }) => {
                    Attempt::Failed(format!("{addr}: {error}"))
                }
                Err(e) => e.into(),
            })
        })
        .await
    }

    /// The members the node at `addr` knows.
    pub async fn members(&self, addr: &str) -> Result<Members, ClientError> {
        self.get_json(addr, api::MEMBERS).await
    }

    /// The JSON document at `path` of the node at `addr`.
    async fn get_json<T: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
    ) -> Result<T, ClientError> {
        let resp = self
            .http
            .get(format!("{}://{addr}{path}", self.scheme))
            .timeout(self.request_timeout)
            .send()
            .await
            .map_err(|e| Failure::other(addr, e))?;
        Failure::check(addr, resp)
            .await?
            .json()
            .await
            .map_err(|e| ClientError::Node(format!("{addr}: {e}")))
    }

    /// A linearizable read of `key` served by the node at `addr`, leader or
    /// follower (a follower asks the leader for its read index and waits
    /// until it has applied that far); one attempt.
    pub async fn read_at(&self, addr: &str, key: &[u8]) -> Result<Option<Vec<u8>>, ClientError> {
        self.read_at_with(addr, key, Consistency::Linearizable)
            .await
    }

    /// [`Self::read_at`] as `consistency` says (a lease read on a follower
    /// goes by ReadIndex).
    pub async fn read_at_with(
        &self,
        addr: &str,
        key: &[u8],
        consistency: Consistency,
    ) -> Result<Option<Vec<u8>>, ClientError> {
        match self
            .post::<_, ReadReply>(
                addr,
                &read_path(consistency),
                &key.to_vec(),
                self.request_timeout,
            )
            .await
        {
            Ok(ReadReply::Value(v)) => Ok(v),
            Ok(ReadReply::NotLeader { leader }) => Err(ClientError::Node(format!(
                "{addr}: no leader to ask for a read index (leader {leader:?})"
            ))),
            Ok(ReadReply::Unavailable { error }) => {
                Err(ClientError::Node(format!("{addr}: {error}")))
            }
            Err(e) => Err(e.into()),
        }
    }

    /// The leader's verdict, asked at `addr`, on whether node `id` is a
    /// member ([`crate::retire::verdict`]); one attempt.
    pub async fn member_verdict(&self, addr: &str, id: NodeId) -> Result<Verdict, ClientError> {
        self.post(addr, api::MEMBER, &id, self.request_timeout)
            .await
            .map_err(ClientError::from)
    }

    /// The status of the node at `addr`.
    pub async fn status(&self, addr: &str) -> Result<NodeStatus, ClientError> {
        self.get_json(addr, api::METRICS).await
    }

    /// Every key and value starting with `prefix` in the local state of the
    /// node at `addr` (not a linearizable read).
    pub async fn dump(
        &self,
        addr: &str,
        prefix: &[u8],
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>, ClientError> {
        self.post(
            addr,
            api::DUMP,
            &prefix.to_vec(),
            self.request_timeout.max(Duration::from_secs(30)),
        )
        .await
        .map_err(ClientError::from)
    }

    /// Initialises the cluster through the node at `addr` (every configured
    /// node a voter); retried until the deadline, a no-op once initialised.
    pub async fn init(&self, addr: &str) -> Result<String, ClientError> {
        let start = Instant::now();
        loop {
            let resp = self
                .http
                .post(format!("{}://{addr}{}", self.scheme, api::INIT))
                .timeout(self.request_timeout)
                .send()
                .await;
            let last = match resp {
                Ok(r) => match Failure::check(addr, r).await {
                    Ok(r) => return r.text().await.map_err(|e| ClientError::Node(e.to_string())),
                    Err(f) if f.refused => return Err(f.into()),
                    Err(f) => f.message,
                },
                Err(e) => format!("{addr}: {e}"),
            };
            if start.elapsed() >= self.deadline {
                return Err(ClientError::Deadline(self.deadline, last));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
