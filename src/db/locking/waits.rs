//! The wait-for graph of transactions waiting for row locks.
//!
//! Owns: [`WaitGraph`] — for each waiting transaction, the one transaction
//! holding the lock it waits for — and the cycle check made when a wait
//! starts.
//! Must never: hold a cycle (an edge that would close one is refused, so
//! the graph stays a forest and every walk along it ends), or keep an edge
//! to a transaction that released its locks.
//!
//! Locks are exclusive and a transaction waits for one lock at a time, so
//! each transaction has at most one outgoing edge, and a holder keeps its
//! locks until it ends: while `a -> b` stands, `a` cannot go on before `b`
//! ends. A cycle is therefore a real deadlock, never a passing state, and
//! the wait that would close one is the one refused (its transaction is
//! the victim; the others wait on).

use std::collections::HashMap;

/// Waiting transaction -> the transaction holding the lock it waits for.
#[derive(Debug, Default)]
pub(crate) struct WaitGraph {
    waits_for: HashMap<u64, u64>,
}

impl WaitGraph {
    /// Records that `waiter` waits for `holder`, unless that closes a cycle
    /// (`holder` waits, directly or through others, for `waiter`): then
    /// nothing is recorded, `waiter`'s earlier edge is gone too, and the
    /// answer is `false`.
    pub fn start_wait(&mut self, waiter: u64, holder: u64) -> bool {
        self.waits_for.remove(&waiter);
        // The graph holds no cycle, so this walk ends within its length.
        let mut at = holder;
        for _ in 0..=self.waits_for.len() {
            if at == waiter {
                return false;
            }
            match self.waits_for.get(&at) {
                Some(&next) => at = next,
                None => break,
            }
        }
        self.waits_for.insert(waiter, holder);
        true
    }

    /// `waiter` waits no more (it took the lock, or gave up).
    pub fn end_wait(&mut self, waiter: u64) {
        self.waits_for.remove(&waiter);
    }

    /// `holder` released its locks: whoever waited for it waits for no one
    /// until it looks again (and records whom it then waits for).
    pub fn released(&mut self, holder: u64) {
        self.waits_for.retain(|_, h| *h != holder);
    }

    /// Transactions waiting.
    pub fn len(&self) -> usize {
        self.waits_for.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wait_that_closes_a_cycle_is_refused() {
        let mut graph = WaitGraph::default();
        assert!(graph.start_wait(1, 2));
        assert!(graph.start_wait(2, 3));
        // 3 -> 1 would close 1 -> 2 -> 3 -> 1.
        assert!(!graph.start_wait(3, 1));
        assert_eq!(graph.len(), 2);
        // Once 3 released its locks, 2 waits for no one.
        graph.released(3);
        assert!(graph.start_wait(3, 1));
        // A two-cycle, and a transaction waiting for itself.
        assert!(!graph.start_wait(1, 3));
        assert!(!graph.start_wait(4, 4));
    }
}
