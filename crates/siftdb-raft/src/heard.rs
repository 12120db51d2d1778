//! When this node last heard a live leader: the receiving side of the
//! raft messages notes it, the retire watch and the node's status read it.
//!
//! Owns: [`Heard`].
//! Must never: go back in time (it keeps the latest moment noted) or block
//! a receiver.

use std::time::Duration;

/// When this node last accepted an append-entries message (a live leader
/// sends one every heartbeat interval), and whether it has since it
/// started.
#[derive(Debug)]
pub struct Heard {
    start: std::time::Instant,
    /// ms since `start`.
    last: std::sync::atomic::AtomicU64,
    /// Set by the first message accepted.
    any: tokio::sync::watch::Sender<bool>,
}

impl Default for Heard {
    fn default() -> Heard {
        Heard {
            start: std::time::Instant::now(),
            last: std::sync::atomic::AtomicU64::new(0),
            any: tokio::sync::watch::Sender::new(false),
        }
    }
}

impl Heard {
    fn now_ms(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Notes a message from a live leader, now.
    pub(crate) fn heard(&self) {
        self.last
            .fetch_max(self.now_ms(), std::sync::atomic::Ordering::Relaxed);
        self.any
            .send_if_modified(|any| !std::mem::replace(any, true));
    }

    /// Whether a leader was heard since this node started.
    pub fn any(&self) -> bool {
        *self.any.borrow()
    }

    /// Waits until a leader was heard since this node started, at most
    /// `limit`; whether one was.
    pub async fn wait_any(&self, limit: Duration) -> bool {
        let mut any = self.any.subscribe();
        let heard = tokio::time::timeout(limit, any.wait_for(|a| *a)).await;
        matches!(heard, Ok(Ok(_)))
    }

    /// How long since a leader was last heard (since the node started when
    /// none was).
    pub fn since(&self) -> Duration {
        let last = self.last.load(std::sync::atomic::Ordering::Relaxed);
        Duration::from_millis(self.now_ms().saturating_sub(last))
    }
}
