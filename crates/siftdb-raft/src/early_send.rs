//! Early sends: a leader's new entries go to its followers while its own
//! append is being fsynced, so one put waits for one fsync on a majority
//! (the leader's and a follower's side by side), not for two in a row.
//!
//! Why from outside openraft: openraft 0.9's core awaits the leader's own
//! log flush (`append_to_log` awaits the `LogFlushed` callback) before it
//! runs the replication commands queued behind the append, so its first
//! append-entries message for an entry leaves only after the leader's
//! fsync. Here the log store hands each append of the leader's own entries
//! ([`OwnAppend`], [`crate::log_store::LogStore::send_own_appends`]) to a
//! task that sends them at once as an ordinary append-entries message
//! (the leader's committed vote, the id of the entry before them, no
//! commit index). The follower appends and fsyncs them; when openraft's
//! own message for them arrives (after the leader's fsync) the follower's
//! core has finished that append (it awaits each flush before taking the
//! next message), finds the entries present and answers at once. A
//! follower's accepted early sends are recorded
//! ([`crate::network::EarlyAcks`]) and openraft's next message to it
//! leaves those entries out, naming the last of them as its
//! `prev_log_id`: each entry crosses the network once, and the follower's
//! check of `prev_log_id` is still what its answer rests on.
//!
//! Why it is safe (docs/design.md, "Early sends"): the message is one the
//! leader of that term may send at any time (its entries follow `prev` in
//! its log), and raft tolerates any message of a leader being duplicated,
//! delayed or reordered. The leader still counts itself towards a quorum
//! only once its own append is on disk (openraft's callback, fired by the
//! log writer after the fsync), and a follower answers openraft's message
//! only for entries on its disk. The answers to early sends change nothing
//! on the leader: not its view of a follower's progress, not its lease.
//!
//! Owns: the dispatch task (checks that this node still leads in the
//! entries' term, by its metrics, and hands the entries to one worker per
//! voter) and the workers (one message in flight per follower; what
//! queued meanwhile goes as one message, the newest consecutive entries
//! only). Must never: send entries of a term this node does not lead,
//! send entries that do not follow `prev` in this node's log, or wait for
//! anything on openraft's path (the log store's hand-off is an unbounded
//! channel send).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::raft::{AppendEntriesRequest, AppendEntriesResponse};
use openraft::{BasicNode, Raft, Vote};
use tokio::sync::mpsc;

use crate::log_store::OwnAppend;
use crate::network::{Network, APPEND_BODY_BUDGET};
use crate::timings::Timings;
use crate::types::{NodeId, TypeConfig, MAX_PAYLOAD_ENTRIES};

/// Starts the early sends of node `id`: the appends arriving on `appends`
/// go to the voters of `raft`'s membership through `network`, each message
/// given `ttl` for its answer; round trips are timed into `timings`. Ends
/// when the log store drops its sender.
pub fn start(
    id: NodeId,
    raft: Raft<TypeConfig>,
    network: Network,
    appends: mpsc::UnboundedReceiver<OwnAppend>,
    timings: Arc<Timings>,
    ttl: Duration,
) {
    tokio::spawn(dispatch(id, raft, network, appends, timings, ttl));
}

/// One follower's worker: its queue and the address it was started with.
struct Worker {
    queue: mpsc::UnboundedSender<Arc<OwnAppend>>,
    node: BasicNode,
}

async fn dispatch(
    id: NodeId,
    raft: Raft<TypeConfig>,
    network: Network,
    mut appends: mpsc::UnboundedReceiver<OwnAppend>,
    timings: Arc<Timings>,
    ttl: Duration,
) {
    let mut workers: BTreeMap<NodeId, Worker> = BTreeMap::new();
    while let Some(append) = appends.recv().await {
        let Some(term) = append.entries.first().map(|e| e.log_id.leader_id.term) else {
            continue;
        };
        let voters: Vec<(NodeId, BasicNode, bool)> = {
            let metrics = raft.metrics();
            let m = metrics.borrow();
            // Leading in the entries' term now (the metrics may lag: then
            // this append goes by openraft's path only).
            if m.current_leader != Some(id) || m.vote != Vote::new_committed(term, id) {
                continue;
            }
            let membership = m.membership_config.membership();
            // Only to followers that openraft saw holding everything before
            // these entries: one waiting on its round trip gets them with
            // openraft's next message anyway, and under load an early send
            // there would only double the messages (measured on 2 cores, 64
            // clients: 10% fewer puts/s when sent to every follower).
            let caught_up = |v: &NodeId| {
                m.replication
                    .as_ref()
                    .and_then(|r| r.get(v))
                    .is_some_and(|matching| *matching == append.prev)
            };
            membership
                .voter_ids()
                .filter(|v| *v != id)
                .filter_map(|v| Some((v, membership.get_node(&v)?.clone(), caught_up(&v))))
                .collect()
        };
        workers.retain(|v, w| {
            voters
                .iter()
                .any(|(id, node, _)| id == v && *node == w.node)
        });
        let append = Arc::new(append);
        for (target, node, _) in voters.into_iter().filter(|(_, _, caught_up)| *caught_up) {
            let worker = workers.entry(target).or_insert_with(|| {
                let (queue, rx) = mpsc::unbounded_channel();
                tokio::spawn(send_loop(
                    target,
                    node.clone(),
                    network.clone(),
                    rx,
                    Arc::clone(&timings),
                    ttl,
                ));
                Worker { queue, node }
            });
            // A worker gone (its task ended) is replaced at the next append.
            if worker.queue.send(Arc::clone(&append)).is_err() {
                workers.remove(&target);
            }
        }
    }
}

/// Sends the appends queued for `target`, one message at a time.
async fn send_loop(
    target: NodeId,
    node: BasicNode,
    network: Network,
    mut queue: mpsc::UnboundedReceiver<Arc<OwnAppend>>,
    timings: Arc<Timings>,
    ttl: Duration,
) {
    let mut held = Vec::new();
    while let Some(first) = queue.recv().await {
        held.push(first);
        while let Ok(more) = queue.try_recv() {
            held.push(more);
        }
        let Some(req) = message(&held) else {
            held.clear();
            continue;
        };
        held.clear();
        let Ok(body) = postcard::to_allocvec(&req) else {
            continue;
        };
        // Large messages go by openraft's path alone (which cuts them).
        if body.len() > APPEND_BODY_BUDGET && req.entries.len() > 1 {
            continue;
        }
        let Some(last) = req.entries.last().map(|e| e.log_id) else {
            continue;
        };
        let sent = Instant::now();
        match network.send_append(target, &node, body, ttl).await {
            Ok(AppendEntriesResponse::Success) => {
                timings.early_send.add(sent.elapsed());
                network.early_acks().accepted(target, last);
            }
            // Behind, ahead, gone or a newer term: openraft's own messages
            // sort it out.
            _ => timings.early_missed.add(sent.elapsed()),
        }
    }
}

/// The one message for what queued: the newest appends that follow each
/// other without a gap, in one term, at most [`MAX_PAYLOAD_ENTRIES`]
/// entries (older ones are dropped: openraft sends them anyway).
fn message(held: &[Arc<OwnAppend>]) -> Option<AppendEntriesRequest<TypeConfig>> {
    let newest = held.last()?;
    let term = newest.entries.first()?.log_id.leader_id;
    // Walk back from the newest while each append follows the one before.
    let mut run = vec![newest];
    let mut count = newest.entries.len();
    for pair in held.windows(2).rev() {
        let [before, after] = pair else { break };
        let joins = before.entries.last().map(|e| e.log_id) == after.prev
            && before.entries.first().map(|e| e.log_id.leader_id) == Some(term);
        let fits =
            u64::try_from(count + before.entries.len()).is_ok_and(|n| n <= MAX_PAYLOAD_ENTRIES);
        if !joins || !fits {
            break;
        }
        run.push(before);
        count += before.entries.len();
    }
    run.reverse();
    Some(AppendEntriesRequest {
        vote: Vote::new_committed(term.term, term.node_id),
        prev_log_id: run.first()?.prev,
        entries: run.iter().flat_map(|a| a.entries.iter().cloned()).collect(),
        leader_commit: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId};

    fn append(term: u64, first: u64, n: u64) -> Arc<OwnAppend> {
        let id = |i: u64| LogId::new(CommittedLeaderId::new(term, 1), i);
        Arc::new(OwnAppend {
            prev: first.checked_sub(1).map(id),
            entries: (first..first + n)
                .map(|i| Entry {
                    log_id: id(i),
                    payload: EntryPayload::Blank,
                })
                .collect(),
        })
    }

    fn indexes(req: &AppendEntriesRequest<TypeConfig>) -> Vec<u64> {
        req.entries.iter().map(|e| e.log_id.index).collect()
    }

    #[test]
    fn consecutive_appends_go_as_one_message() {
        let req = message(&[append(2, 5, 2), append(2, 7, 1), append(2, 8, 3)]).unwrap();
        assert_eq!(indexes(&req), vec![5, 6, 7, 8, 9, 10]);
        assert_eq!(req.prev_log_id.map(|p| p.index), Some(4));
        assert_eq!(req.vote, Vote::new_committed(2, 1));
        assert_eq!(req.leader_commit, None);
    }

    #[test]
    fn only_the_newest_run_without_a_gap_goes() {
        let req = message(&[append(2, 5, 1), append(2, 9, 2), append(2, 11, 1)]).unwrap();
        assert_eq!(indexes(&req), vec![9, 10, 11]);
        assert_eq!(req.prev_log_id.map(|p| p.index), Some(8));
        // Another term ends the run.
        let req = message(&[append(2, 5, 1), append(3, 6, 1)]).unwrap();
        assert_eq!(indexes(&req), vec![6]);
        assert_eq!(req.vote, Vote::new_committed(3, 1));
        // So does the entry budget of a message.
        let req = message(&[append(2, 0, 60), append(2, 60, 5)]).unwrap();
        assert_eq!(indexes(&req), (60..65).collect::<Vec<_>>());
        assert!(message(&[]).is_none());
    }
}
