//! Lease reads on the leader: a read answered from the leader's state
//! without a quorum round trip, while the leader holds a lease.
//!
//! Owns: [`Acks`], the send time of the newest append-entries message each
//! follower accepted (recorded by [`crate::network`] when the answer comes
//! back, stamped with the time the message was *sent*); [`lease_duration`]
//! and the clock assumption it rests on ([`MAX_CLOCK_DRIFT`]); [`check`],
//! which decides inside openraft's core whether the lease holds now and
//! which commit index a read under it must wait for.
//! Must never: count an answer to another term's message, count a node
//! outside the configurations a new leader could be elected by, start a
//! lease before the leader committed an entry of its own term, or let a
//! read use a commit index captured at a moment the lease did not hold.
//!
//! # Why a lease read is linearizable
//!
//! openraft 0.9 gives every follower a *follower lease*: a follower whose
//! vote is a committed leader's rejects vote requests until
//! `election_timeout_max` (openraft's `leader_lease`, set from
//! `Config::election_timeout_max`) has passed on its own clock since the
//! last append-entries message it accepted from that leader
//! (`Engine::handle_vote_req`), and does not stand for election itself
//! before `leader_lease + election_timeout` has passed
//! (`RaftCore::handle_tick_election`). It saves the leader's committed vote
//! (synced, `LogStore::save_vote`) before it answers, and a node that
//! restarts counts the lease from its start (`UTime::new(now, vote)` when
//! the state is loaded), so a crash does not shorten the window.
//!
//! The leader stamps each message with `sent` just before sending it. A
//! follower that accepts it does so at a real time after `sent`, so from
//! `sent` on it refuses to help elect anyone else for at least
//! `election_timeout_max` of its clock. Take `Q` = the time at which a
//! majority of every voter configuration of the leader's membership
//! (effective and committed; each side of a joint configuration; the leader
//! itself counting as "now", the instant [`check`] runs inside the core,
//! when it has not voted for anyone else) had accepted messages sent at or
//! after it. Every majority that could elect a new leader intersects that
//! majority, so no other leader can be elected before `Q +
//! election_timeout_max × (1 − ρ)` of real time, where ρ bounds how far any
//! node's monotonic clock rate strays from real time. The leader measures
//! its lease `D` on its own clock, at most `D × (1 + ρ)` of real time, so
//! it is safe while `D × (1 + ρ) ≤ election_timeout_max × (1 − ρ)`. We take
//! `D = election_timeout_min × (1 − 2ρ)` with ρ = [`MAX_CLOCK_DRIFT`]
//! (5%): 0.9 × the smallest election timeout, below `election_timeout_min ×
//! (1 − ρ)` and so below the bound for any `election_timeout_max ≥
//! election_timeout_min`.
//!
//! A read at the leader, in term `T`: [`check`] runs inside openraft's core
//! (`Raft::with_raft_state`, one instant of its event loop) and requires
//! that the node is leader of `T`, that its commit index is an entry of
//! term `T` (a new leader's commit index covers every entry committed by
//! earlier leaders only once it commits one of its own), and that now < `Q
//! + D`; it then returns the commit index `c`. At that instant no other
//! leader exists, so every write acknowledged before the read arrived is at
//! or below `c`. The read waits until the state machine applied `c` and
//! reads the applied state `a ≥ c`, whose entries this leader committed no
//! later than the read: a point between the check and the read has exactly
//! `a` committed, which linearizes the read (even if the lease ran out
//! meanwhile: a later leader's entries all follow `a` in the log).
//!
//! Every node must run with the same election timeouts (`serve
//! --election-min-ms/--election-max-ms`): a follower's window is its own
//! `election_timeout_max`, the lease is the leader's
//! `election_timeout_min`-based one.
//!
//! The assumption is about clock *rates* (monotonic clocks, `Instant`), not
//! wall-clock agreement: a VM paused longer than the lease, or a clock
//! stepped forward by more than ρ × the election timeout, breaks it. That
//! is why lease reads are an option (`?consistency=lease`), off by default.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use openraft::{LogId, Raft, ServerState, Vote};
use parking_lot::Mutex;

use crate::types::{NodeId, TypeConfig};

/// The largest rate error of any node's monotonic clock assumed (5%: real
/// clocks drift by parts per million; this leaves room for a slewed or
/// virtualised clock, not for a paused VM).
pub const MAX_CLOCK_DRIFT: f64 = 0.05;

/// The lease a leader holds after a majority accepted its messages:
/// `election_timeout_min × (1 − 2 × MAX_CLOCK_DRIFT)`.
pub fn lease_duration(election_timeout_min: Duration) -> Duration {
    election_timeout_min.mul_f64(1.0 - 2.0 * MAX_CLOCK_DRIFT)
}

/// Per follower, the newest append-entries message it accepted: the
/// leader vote it carried and when it was sent. Shared by the network
/// (which records) and the read path (which checks); cheap to clone.
#[derive(Clone, Debug, Default)]
pub struct Acks {
    inner: Arc<Mutex<AcceptedBy>>,
}

/// Follower → (the vote its newest accepted message carried, its send time).
type AcceptedBy = BTreeMap<NodeId, (Vote<NodeId>, Instant)>;

impl Acks {
    /// `target` accepted a message carrying `vote`, sent at `sent`.
    pub fn accepted(&self, target: NodeId, vote: Vote<NodeId>, sent: Instant) {
        let mut acks = self.inner.lock();
        match acks.get_mut(&target) {
            Some((v, t)) if *v == vote => *t = (*t).max(sent),
            Some((v, _)) if *v > vote => {}
            _ => {
                acks.insert(target, (vote, sent));
            }
        }
    }

    /// When `target` last accepted a message of `vote`.
    fn sent_for(&self, target: NodeId, vote: &Vote<NodeId>) -> Option<Instant> {
        self.inner
            .lock()
            .get(&target)
            .filter(|(v, _)| v == vote)
            .map(|(_, t)| *t)
    }
}

/// Whether a lease read may go ahead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Lease {
    /// The lease holds for `remaining`; the read must see the state applied
    /// up to `commit` (log index).
    Held {
        /// The commit index when the lease was checked.
        commit: u64,
        /// How much of the lease is left.
        remaining: Duration,
    },
    /// Not the leader (the read goes by ReadIndex).
    NotLeader,
    /// The leader has not committed an entry of its term yet.
    NotCommitted,
    /// No majority accepted a message within the lease.
    Expired,
}

/// The time by which a majority of `voters` had accepted messages of
/// `vote`, `me` counting as `now` (`None`: no majority yet).
fn quorum_sent(
    voters: &std::collections::BTreeSet<NodeId>,
    me: NodeId,
    now: Instant,
    acks: &Acks,
    vote: &Vote<NodeId>,
) -> Option<Instant> {
    let mut times: Vec<Instant> = voters
        .iter()
        .filter_map(|&v| {
            if v == me {
                Some(now)
            } else {
                acks.sent_for(v, vote)
            }
        })
        .collect();
    let majority = voters.len() / 2 + 1;
    if times.len() < majority {
        return None;
    }
    times.sort_unstable_by(|a, b| b.cmp(a));
    times.get(majority - 1).copied()
}

/// Decides, at one instant of openraft's core, whether `me` holds its
/// lease of length `lease` (see the module doc for why this is sound).
pub async fn check(
    raft: &Raft<TypeConfig>,
    me: NodeId,
    acks: &Acks,
    lease: Duration,
) -> Result<Lease, String> {
    let acks = acks.clone();
    raft.with_raft_state(move |st| {
        let now = Instant::now();
        let vote = *st.vote_ref();
        if st.server_state != ServerState::Leader
            || !vote.is_committed()
            || vote.leader_id().voted_for() != Some(me)
        {
            return Lease::NotLeader;
        }
        let term = vote.leader_id().get_term();
        let commit = match st.committed {
            Some(LogId { leader_id, index }) if leader_id.term == term => index,
            _ => return Lease::NotCommitted,
        };
        let membership = &st.membership_state;
        let mut start: Option<Instant> = None;
        for config in [membership.effective(), membership.committed()] {
            for voters in config.membership().get_joint_config() {
                match quorum_sent(voters, me, now, &acks, &vote) {
                    Some(t) => start = Some(start.map_or(t, |s| s.min(t))),
                    None => return Lease::Expired,
                }
            }
        }
        let Some(end) = start.map(|s| s + lease) else {
            return Lease::Expired;
        };
        if now < end {
            Lease::Held {
                commit,
                remaining: end - now,
            }
        } else {
            Lease::Expired
        }
    })
    .await
    .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn the_lease_is_within_the_bound() {
        let min = Duration::from_millis(1000);
        let d = lease_duration(min);
        assert_eq!(d, Duration::from_millis(900));
        // D (1 + ρ) ≤ election_timeout_min (1 − ρ) ≤ election_timeout_max (1 − ρ).
        assert!(d.as_secs_f64() * (1.0 + MAX_CLOCK_DRIFT) <= 1.0 * (1.0 - MAX_CLOCK_DRIFT));
    }

    #[test]
    fn the_quorum_time_is_the_majoritys_oldest() {
        let acks = Acks::default();
        let vote = Vote::new_committed(3, 1);
        let now = Instant::now();
        let t = |ms: u64| now.checked_sub(Duration::from_millis(ms)).unwrap_or(now);
        let voters: BTreeSet<NodeId> = [1, 2, 3, 4, 5].into();
        assert_eq!(quorum_sent(&voters, 1, now, &acks, &vote), None);
        acks.accepted(2, vote, t(10));
        acks.accepted(3, vote, t(30));
        assert_eq!(quorum_sent(&voters, 1, now, &acks, &vote), Some(t(30)));
        acks.accepted(4, vote, t(20));
        assert_eq!(quorum_sent(&voters, 1, now, &acks, &vote), Some(t(20)));
        // An older message answered late does not move the time back.
        acks.accepted(2, vote, t(100));
        assert_eq!(quorum_sent(&voters, 1, now, &acks, &vote), Some(t(20)));
        // Answers to another term's messages do not count.
        let old = Vote::new_committed(2, 1);
        acks.accepted(5, old, t(1));
        assert_eq!(quorum_sent(&voters, 1, now, &acks, &vote), Some(t(20)));
        // A leader outside the configuration counts for nothing.
        let others: BTreeSet<NodeId> = [2, 3, 4].into();
        assert_eq!(quorum_sent(&others, 1, now, &acks, &vote), Some(t(20)));
        let next = Vote::new_committed(4, 1);
        acks.accepted(3, next, t(5));
        assert_eq!(quorum_sent(&others, 1, now, &acks, &next), None);
    }
}
