//! Proposal batching: the commands of concurrent clients become one raft
//! entry.
//!
//! Owns: [`Proposer`], a queue in front of `Raft::client_write` and the
//! task that drains it, and [`WriteReply`], what a proposed command
//! answers (the api sends it to clients as is). openraft 0.9 appends each `client_write` as its own
//! entry and waits for that append to be durable before the next, so each
//! proposal costs the leader one fsync; gathering the commands that arrive
//! while earlier proposals are in flight into one [`Proposal`] lets one
//! fsync carry them all. At most [`IN_FLIGHT`] proposals are in flight; the
//! next one is cut only when a slot frees, which is what makes commands
//! gather under load (and costs nothing when idle: a lone command goes at
//! once). Queued and in-flight commands hold at most [`QUEUE_BYTES`]; a
//! caller past that waits for room.
//! Must never: answer a command other than from the entry that carried it,
//! reorder the commands of one caller (a caller waits for each answer), or
//! cut a proposal past [`MAX_PROPOSAL_BYTES`] + one command.

use std::sync::Arc;
use std::time::Instant;

use openraft::error::{ClientWriteError, RaftError};
use openraft::Raft;
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot, OwnedSemaphorePermit, Semaphore};

use crate::timings::{Step, Timings};
use crate::types::{
    Proposal, Request, Response, TypeConfig, MAX_PROPOSAL_BYTES, MAX_PROPOSAL_COMMANDS,
};

/// Proposals in flight at once.
pub const IN_FLIGHT: usize = 2;

/// How long a proposal may wait for its entry to be applied before its
/// callers are answered `Unavailable` (outcome unknown; a retry under the
/// same client session applies at most once) and its slot is freed. Without
/// it, a `client_write` that never resolves (seen after long partitions:
/// the leader of a long-gone term) holds a slot for good, and with every
/// slot held the node takes no write again.
pub const PROPOSAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Bytes of keys and values queued or in flight at most (a command counts
/// at least one byte); a caller past that waits for room: back pressure on
/// the HTTP handlers instead of unbounded memory. At least one command of
/// [`crate::types::MAX_COMMAND_BYTES`] always fits.
pub const QUEUE_BYTES: u32 = 64 << 20;

/// What a write answered.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub enum WriteReply {
    /// Committed and applied at log `index`.
    Applied {
        /// The entry's log index.
        index: u64,
        /// What applying it answered.
        response: Response,
    },
    /// This node is not the leader; the leader's address when known.
    NotLeader {
        /// Address of the leader.
        leader: Option<String>,
    },
    /// The command breaks a limit and was not proposed.
    Rejected {
        /// Why.
        reason: String,
    },
    /// Raft could not take the write now (shutting down, membership change).
    Unavailable {
        /// Why.
        error: String,
    },
}

/// A queued command, its answer, its share of [`QUEUE_BYTES`] (given
/// back when its proposal is answered) and when it was queued.
type Waiter = (
    Request,
    oneshot::Sender<WriteReply>,
    OwnedSemaphorePermit,
    Instant,
);

/// The queue in front of a node's raft; clones share it.
#[derive(Clone)]
pub struct Proposer {
    queue: mpsc::UnboundedSender<Waiter>,
    room: Arc<Semaphore>,
}

impl Proposer {
    /// Starts the proposing task for `raft` on the current runtime; the
    /// queue waits and proposals are timed into `timings`.
    pub fn start(raft: Raft<TypeConfig>, timings: Arc<Timings>) -> Proposer {
        let (queue, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(raft, rx, timings));
        Proposer {
            queue,
            room: Arc::new(Semaphore::new(QUEUE_BYTES as usize)),
        }
    }

    /// Proposes `req` (its command already validated) and waits for its
    /// entry to be applied, or for the reason it was not.
    pub async fn propose(&self, req: Request) -> WriteReply {
        let bytes = u32::try_from(req.command.payload_bytes())
            .unwrap_or(u32::MAX)
            .clamp(1, QUEUE_BYTES);
        let Ok(room) = Arc::clone(&self.room).acquire_many_owned(bytes).await else {
            return WriteReply::Unavailable {
                error: "proposer stopped".into(),
            };
        };
        let (tx, rx) = oneshot::channel();
        if self.queue.send((req, tx, room, Instant::now())).is_err() {
            return WriteReply::Unavailable {
                error: "proposer stopped".into(),
            };
        }
        rx.await.unwrap_or_else(|_| WriteReply::Unavailable {
            error: "proposal dropped (raft shutting down)".into(),
        })
    }
}

async fn run(
    raft: Raft<TypeConfig>,
    mut rx: mpsc::UnboundedReceiver<Waiter>,
    timings: Arc<Timings>,
) {
    let slots = Arc::new(Semaphore::new(IN_FLIGHT));
    loop {
        // A slot first: while every slot is busy, commands gather in `rx`.
        let Ok(permit) = Arc::clone(&slots).acquire_owned().await else {
            return;
        };
        let Some(first) = rx.recv().await else {
            return;
        };
        let mut bytes = first.0.command.payload_bytes();
        let mut group = vec![first];
        while bytes < MAX_PROPOSAL_BYTES && group.len() < MAX_PROPOSAL_COMMANDS {
            match rx.try_recv() {
                Ok(next) => {
                    bytes = bytes.saturating_add(next.0.command.payload_bytes());
                    group.push(next);
                }
                Err(_) => break,
            }
        }
        let raft = raft.clone();
        let timings = Arc::clone(&timings);
        tokio::spawn(async move {
            let count = group.len();
            let mut requests = Vec::with_capacity(count);
            let mut waiters = Vec::with_capacity(count);
            let mut room = Vec::with_capacity(count);
            let cut = Instant::now();
            for (request, waiter, bytes, queued) in group {
                timings.write_queued.add(cut.duration_since(queued));
                requests.push(request);
                waiters.push(waiter);
                room.push(bytes);
            }
            // The leader's clock, the one the state machine reads (session
            // expiry): a clock before 1970 counts as 0.
            let time_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
            let timer = timings.proposal.start();
            let called = Instant::now();
            let result = tokio::time::timeout(
                PROPOSAL_TIMEOUT,
                raft.client_write(Proposal { time_ms, requests }),
            )
            .await;
            drop(timer);
            if let Ok(Ok(resp)) = &result {
                let index = resp.log_id.index;
                if let Some(appended) = timings
                    .stamps
                    .get(Step::Appended, index)
                    .filter(|&a| a >= called)
                {
                    timings.raft_in.add(appended.duration_since(called));
                }
                timings.since(|t| &t.answer, Step::Applied, index, Instant::now());
            }
            drop(permit);
            drop(room);
            let Ok(result) = result else {
                for tx in waiters {
                    let _ = tx.send(WriteReply::Unavailable {
                        error: format!(
                            "not applied within {PROPOSAL_TIMEOUT:?}; the outcome is unknown"
                        ),
                    });
                }
                return;
            };
            match result {
                Ok(resp) if resp.data.len() == count => {
                    let index = resp.log_id.index;
                    for (tx, response) in waiters.into_iter().zip(resp.data) {
                        let _ = tx.send(WriteReply::Applied { index, response });
                    }
                }
                Ok(resp) => {
                    let error = format!(
                        "entry {} answered {} of {count} commands",
                        resp.log_id.index,
                        resp.data.len()
                    );
                    for tx in waiters {
                        let _ = tx.send(WriteReply::Unavailable {
                            error: error.clone(),
                        });
                    }
                }
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => {
                    let leader = f.leader_node.map(|n| n.addr);
                    for tx in waiters {
                        let _ = tx.send(WriteReply::NotLeader {
                            leader: leader.clone(),
                        });
                    }
                }
                Err(e) => {
                    let error = e.to_string();
                    for tx in waiters {
                        let _ = tx.send(WriteReply::Unavailable {
                            error: error.clone(),
                        });
                    }
                }
            }
        });
    }
}
