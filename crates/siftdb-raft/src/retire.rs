//! Retiring a node that was removed from the cluster, including one that
//! was down when it was removed and comes back believing it is a member.
//!
//! Owns: [`Retirement`] (the node's retired flag, the synced
//! [`RETIRED_FILE`] that keeps it from starting again, and the signal that
//! stops its raft), [`verdict`] — the leader's answer to "is node N a
//! member?" — and [`watch`], the loop by which a node that has heard no
//! leader for a while asks its peers that question (at [`MEMBER`]).
//! Must never: retire a node on the word of anything but a leader that
//! confirmed its leadership with a majority after the question arrived and
//! has committed an entry of its own term; retire a node that is in the
//! leader's committed or effective membership.
//!
//! # The protocol
//!
//! A node removed while it was up is told by the leader (`/api/retire`). A
//! node that was down misses that; when it comes back its log still makes
//! it a voter (it stands for election) or a learner (it waits for appends
//! that never come). Two paths reach it:
//!
//! - *Vote.* A leader that receives a vote request from a node missing
//!   from its effective membership asks [`verdict`]; on
//!   [`Verdict::NotMember`] it answers the request `410 Gone` instead of
//!   voting, and the candidate's network ([`crate::network`]) retires it.
//!   Followers vote as usual (openraft rejects the stale candidate: its log
//!   lacks the removal entry, and followers hold a leader lease).
//! - *Silence.* A node that accepted no append-entries message for
//!   [`SILENCE_ELECTIONS`] × the largest election timeout asks every peer
//!   in its membership `/api/member` (peer route); a leader answers with
//!   [`verdict`]. A learner, which never votes, is reached this way.
//!
//! Retiring = the same path `/api/retire` takes: the `RETIRED` file synced,
//! raft stopped, every client request answered "node N was removed from
//! the cluster".
//!
//! # Why a member is never retired
//!
//! Say node N asks (a vote request or `/api/member`) at time `s`, believing
//! itself a member because some entry `E` of its log adds it (from a leader
//! of term `t_E`). Leader `R` of term `T` answers `NotMember` only if (1) a
//! majority acknowledged `R` as leader of `T` at a time `c` after the
//! question arrived (`Raft::get_read_log_id`), (2) `R`'s commit index is an
//! entry of term `T`, and (3) neither `R`'s committed nor its effective
//! membership holds N, (2) and (3) read at one instant in term `T`.
//!
//! - If `t_E > T`: a leader of term `t_E` existed before `s < c`, so a
//!   majority had voted past `T` and (1) could not hold.
//! - If `t_E = T`: `E` is `R`'s own entry, in its log; its effective
//!   membership is `E` or a later change, which holds N unless N was
//!   removed again after being added.
//! - If `t_E < T` and `E` is not in `R`'s log: `E` can never be committed:
//!   `R` committed an entry of term `T` (2), every later leader has it, and
//!   entries after it have terms ≥ `T` — N's addition failed (its caller
//!   was never told it succeeded) and N is not a member.
//! - If `E` is in `R`'s log: it lies at or below `R`'s commit index (by (2)
//!   every entry of an earlier term is), so `R`'s committed membership is
//!   `E` or a later committed change; lacking N, that change removed N.
//!
//! So N is retired only if it was never a member or a committed change
//! removed it. A node added a moment ago is in its leader's effective
//! membership from the moment the leader appends the change, before N
//! hears of it, and any later leader has the change once it was committed.
//! A node that is not leader never answers `NotMember`.

use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use openraft::{LogId, Raft, ServerState};
use serde::{Deserialize, Serialize};

use crate::types::{NodeId, TypeConfig};

/// Path of the leader's membership verdict on a node (postcard node id →
/// postcard [`Verdict`]): a node that heard no leader for a
/// while asks whether it is still a member.
pub const MEMBER: &str = "/api/member";

/// The file in a node directory that says the node was removed.
pub const RETIRED_FILE: &str = "RETIRED";

/// A node that accepted no append-entries message for this many of its
/// largest election timeouts asks its peers whether it is still a member.
pub const SILENCE_ELECTIONS: u32 = 5;

/// A node's retirement: once retired, it serves nothing and never starts
/// again from its directory.
#[derive(Debug)]
pub struct Retirement {
    id: NodeId,
    dir: PathBuf,
    retired: AtomicBool,
    stop: tokio::sync::Notify,
}

impl Retirement {
    /// Node `id` with directory `dir`, not retired.
    pub fn new(id: NodeId, dir: PathBuf) -> Arc<Retirement> {
        Arc::new(Retirement {
            id,
            dir,
            retired: AtomicBool::new(false),
            stop: tokio::sync::Notify::new(),
        })
    }

    /// Whether this node was retired.
    pub fn is_retired(&self) -> bool {
        self.retired.load(Ordering::SeqCst)
    }

    /// The error every client request gets once retired.
    pub fn error(&self) -> String {
        format!("node {} was removed from the cluster", self.id)
    }

    /// Retires this node: marks its directory (synced), then signals
    /// [`Self::stopped`].
    pub async fn retire(&self, why: &str) -> Result<(), String> {
        if self.is_retired() {
            return Ok(());
        }
        tracing::warn!("node {} retires: {why}", self.id);
        let dir = self.dir.clone();
        let write = tokio::task::spawn_blocking(move || {
            std::fs::File::create(dir.join(RETIRED_FILE))?.sync_all()?;
            // The file's name is durable with its directory.
            std::fs::File::open(&dir)?.sync_all()
        });
        write
            .await
            .map_err(|e| e.to_string())?
            .map_err(|e| e.to_string())?;
        self.retired.store(true, Ordering::SeqCst);
        self.stop.notify_one();
        Ok(())
    }

    /// Completes once this node retired (one waiter).
    pub async fn stopped(&self) {
        self.stop.notified().await;
    }
}

/// A leader's answer to "is node N a member?" (`/api/member`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Verdict {
    /// In the leader's committed or effective membership.
    Member,
    /// Not a member, by a leader confirmed by a majority that has
    /// committed an entry of its term: the node must retire.
    NotMember,
    /// This node cannot say (not the leader, leadership unconfirmed, or
    /// its term's first entry not yet committed); the leader's address when
    /// known.
    Unknown {
        /// The leader's address, when known.
        leader: Option<String>,
    },
}

/// Whether `id` is a member, as this node can say (see the module doc).
pub async fn verdict(raft: &Raft<TypeConfig>, id: NodeId) -> Verdict {
    let unknown = || {
        let leader = raft.metrics().borrow().current_leader;
        let m = raft.metrics().borrow().clone();
        let addr = leader.and_then(|l| {
            m.membership_config
                .membership()
                .get_node(&l)
                .map(|n| n.addr.clone())
        });
        Verdict::Unknown { leader: addr }
    };
    // Read under one instant of the core: leader of `term`, and whether the
    // term's first entry is committed and `id` is a member.
    let look = move |st: &openraft::RaftState<NodeId, openraft::BasicNode, _>| {
        let vote = st.vote_ref();
        let term = vote.leader_id().get_term();
        let leader = st.server_state == ServerState::Leader && vote.is_committed();
        let own_commit =
            matches!(st.committed, Some(LogId { leader_id, .. }) if leader_id.term == term);
        let ms = &st.membership_state;
        let holds = |m: &openraft::EffectiveMembership<NodeId, openraft::BasicNode>| {
            m.membership().nodes().any(|(n, _)| *n == id)
        };
        let member = holds(ms.committed()) || holds(ms.effective());
        (leader && own_commit, term, member)
    };
    let Ok((leading, term, member)) = raft.with_raft_state(look).await else {
        return unknown();
    };
    if member {
        return Verdict::Member;
    }
    if !leading {
        return unknown();
    }
    // A majority confirms this leadership after the question arrived.
    if raft.get_read_log_id().await.is_err() {
        return unknown();
    }
    match raft.with_raft_state(look).await {
        Ok((_, _, true)) => Verdict::Member,
        Ok((true, now, false)) if now == term => Verdict::NotMember,
        _ => unknown(),
    }
}

/// How [`watch`] reaches its peers.
pub struct Asker {
    /// An HTTP client for peer calls (the node's certificate with TLS).
    pub http: reqwest::Client,
    /// `http` or `https`.
    pub scheme: &'static str,
    /// Where to send a peer's messages instead of its own address.
    pub routes: std::collections::BTreeMap<NodeId, String>,
}

/// Until this node retires or stops: whenever it has accepted no
/// append-entries message for `silence` (as `last_heard` says), and is
/// initialised and not the leader, asks each peer of its membership whether
/// it is a member; retires on a `NotMember` verdict.
pub async fn watch(
    raft: Raft<TypeConfig>,
    retirement: Arc<Retirement>,
    last_heard: Arc<crate::heard::Heard>,
    asker: Asker,
    silence: Duration,
) {
    loop {
        tokio::time::sleep(silence / 2).await;
        if retirement.is_retired() || last_heard.since() < silence {
            continue;
        }
        let m = raft.metrics().borrow().clone();
        if m.running_state.is_err() {
            return;
        }
        if m.state == ServerState::Leader || m.membership_config.log_id().is_none() {
            continue;
        }
        let peers: Vec<(NodeId, String)> = m
            .membership_config
            .membership()
            .nodes()
            .filter(|(n, _)| **n != m.id)
            .map(|(n, node)| (*n, asker.routes.get(n).unwrap_or(&node.addr).clone()))
            .collect();
        for (peer, addr) in peers {
            let Ok(body) = postcard::to_allocvec(&m.id) else {
                continue;
            };
            let sent = asker
                .http
                .post(format!("{}://{addr}{}", asker.scheme, MEMBER))
                .timeout(silence)
                .body(body)
                .send()
                .await;
            let Ok(resp) = sent else { continue };
            let Ok(bytes) = resp.bytes().await else {
                continue;
            };
            if let Ok(Verdict::NotMember) = postcard::from_bytes::<Verdict>(&bytes) {
                let why = format!("leader {peer} says it is not a member");
                if let Err(e) = retirement.retire(&why).await {
                    tracing::error!("retiring: {e}");
                }
                return;
            }
        }
    }
}
