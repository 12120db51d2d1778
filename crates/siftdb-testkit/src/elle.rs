//! A history checker for list-append transactions, after the design of
//! Jepsen's Elle (Kingsbury and Alvaro, "Elle: Inferring Isolation
//! Anomalies from Experimental Observations", VLDB 2020).
//!
//! Owns: [`Txn`], [`Op`], [`check`] and its [`Report`].
//! Must never: report a history clean when it holds an anomaly its edges
//! show (its tests plant each one and expect it found).
//!
//! Each key holds a list; a transaction reads lists and appends elements,
//! every element unique in the history. Since an element is appended once
//! and lists only grow, every read of a key is a prefix of the key's one
//! version order, and the longest read *is* that order: element `e` at
//! position `i` means the version written by `e`'s writer followed the one
//! of the element before it. From that order the checker infers Adya's
//! dependencies between committed transactions:
//! - `ww`: T1 appended the element just before T2's in a key's order;
//! - `wr`: T2 read a list whose last element T1 appended;
//! - `rw`: T1 read a list of a key (ending at `e`, or empty) and T2
//!   appended the element after `e` (the first one) in that key's order.
//!
//! and looks for cycles: `G0` (ww only), `G1c` (ww and wr), `G-single`
//! (exactly one rw edge), `G2` (any cycle with an rw edge). Without a
//! cycle it finds `G1a` (a read shows an element of an aborted
//! transaction), `G1b` (a read ends at an element its writer later followed
//! with another append to the same key), lost updates (two committed
//! transactions read the same version of a key and both appended to it),
//! and reads that are no prefix of the key's order (`incompatible_order`).
//! Real-time order is not used: the checks are of isolation, not
//! linearizability.
#![expect(
    clippy::indexing_slicing,
    reason = "every index is a transaction's position in the history (or a window's \
              two elements), and the graph and Tarjan's arrays have one slot per transaction"
)]

use std::collections::{HashMap, HashSet, VecDeque};

/// One operation of a transaction.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// Appended `element` to `key`'s list.
    Append {
        /// The key.
        key: u64,
        /// A value appended nowhere else in the history.
        element: u64,
    },
    /// Read `key`'s list.
    Read {
        /// The key.
        key: u64,
        /// The list read.
        list: Vec<u64>,
    },
}

/// One transaction as observed: its operations, in order, and whether it
/// committed (an aborted one's appends must never be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Txn {
    /// Its operations.
    pub ops: Vec<Op>,
    /// It committed.
    pub committed: bool,
}

/// What [`check`] found: a count per anomaly, and a few examples.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Committed transactions checked.
    pub transactions: usize,
    /// Dependency edges inferred (ww, wr, rw).
    pub edges: [usize; 3],
    /// Cycles of ww edges.
    pub g0: usize,
    /// Reads of elements appended by aborted transactions.
    pub g1a: usize,
    /// Reads of intermediate versions.
    pub g1b: usize,
    /// Cycles of ww and wr edges (at least one wr).
    pub g1c: usize,
    /// Cycles with exactly one rw edge.
    pub g_single: usize,
    /// Cycles with an rw edge (G-single's included).
    pub g2: usize,
    /// Versions read by two committed transactions that both appended.
    pub lost_update: usize,
    /// Reads that are not a prefix of their key's version order.
    pub incompatible_order: usize,
    /// Descriptions of some of the anomalies.
    pub examples: Vec<String>,
}

impl Report {
    /// Anomalies snapshot isolation forbids: everything but G2 proper.
    pub fn snapshot_isolation_anomalies(&self) -> usize {
        self.g0
            + self.g1a
            + self.g1b
            + self.g1c
            + self.g_single
            + self.lost_update
            + self.incompatible_order
    }

    /// Anomalies serializability forbids: all of them.
    pub fn serializable_anomalies(&self) -> usize {
        self.snapshot_isolation_anomalies() + self.g2
    }

    fn note(&mut self, example: String) {
        if self.examples.len() < 10 {
            self.examples.push(example);
        }
    }
}

const WW: usize = 0;
const WR: usize = 1;
const RW: usize = 2;

/// Checks `history` (committed and aborted transactions, any order).
pub fn check(history: &[Txn]) -> Report {
    let mut report = Report {
        transactions: history.iter().filter(|t| t.committed).count(),
        ..Report::default()
    };
    // Who appended each element, and each transaction's last append per key.
    let mut writer: HashMap<u64, usize> = HashMap::new();
    let mut last_append: HashMap<(usize, u64), u64> = HashMap::new();
    for (t, txn) in history.iter().enumerate() {
        for op in &txn.ops {
            if let Op::Append { key, element } = op {
                writer.insert(*element, t);
                last_append.insert((t, *key), *element);
            }
        }
    }
    let reads = external_reads(history);
    // The version order of each key: its longest committed read.
    let mut order: HashMap<u64, Vec<u64>> = HashMap::new();
    for &(_, key, list) in &reads {
        let known = order.entry(key).or_default();
        if list.len() > known.len() {
            *known = list.clone();
        }
    }
    for &(t, key, list) in &reads {
        let known = order.get(&key).map_or(&[][..], Vec::as_slice);
        if !known.starts_with(list) {
            report.incompatible_order += 1;
            report.note(format!(
                "T{t} read {key} = {list:?}, not a prefix of {known:?}"
            ));
        }
        for element in list {
            if let Some(&w) = writer.get(element) {
                if !history[w].committed {
                    report.g1a += 1;
                    report.note(format!("T{t} read {element} of aborted T{w} in key {key}"));
                }
            }
        }
        if let Some(&last) = list.last() {
            if let Some(&w) = writer.get(&last) {
                if w != t && last_append.get(&(w, key)) != Some(&last) {
                    report.g1b += 1;
                    report.note(format!(
                        "T{t} read intermediate {last} of T{w} in key {key}"
                    ));
                }
            }
        }
    }
    // Lost updates: (key, version read) -> committed readers that appended.
    let mut read_then_appended: HashMap<(u64, Option<u64>), Vec<usize>> = HashMap::new();
    for &(t, key, list) in &reads {
        if last_append.contains_key(&(t, key)) {
            read_then_appended
                .entry((key, list.last().copied()))
                .or_default()
                .push(t);
        }
    }
    for ((key, version), txns) in &mut read_then_appended {
        // A transaction may have read the version more than once.
        txns.sort_unstable();
        txns.dedup();
        if txns.len() > 1 {
            report.lost_update += 1;
            report.note(format!(
                "{txns:?} all read {key} at {version:?} and appended"
            ));
        }
    }

    let graph = build_graph(history, &writer, &order, &reads, &mut report);
    find_cycles(&graph, &mut report);
    report
}

/// Committed reads not preceded by an append of the same transaction to
/// the same key: (transaction, key, list).
fn external_reads(history: &[Txn]) -> Vec<(usize, u64, &Vec<u64>)> {
    let mut reads = Vec::new();
    for (t, txn) in history.iter().enumerate().filter(|(_, t)| t.committed) {
        let mut appended = HashSet::new();
        for op in &txn.ops {
            match op {
                Op::Append { key, .. } => {
                    appended.insert(*key);
                }
                Op::Read { key, list } if !appended.contains(key) => reads.push((t, *key, list)),
                Op::Read { .. } => {}
            }
        }
    }
    reads
}

/// Adjacency: per transaction, (target, edge kind).
type Graph = Vec<Vec<(usize, usize)>>;

fn build_graph(
    history: &[Txn],
    writer: &HashMap<u64, usize>,
    order: &HashMap<u64, Vec<u64>>,
    reads: &[(usize, u64, &Vec<u64>)],
    report: &mut Report,
) -> Graph {
    let mut edges: HashSet<(usize, usize, usize)> = HashSet::new();
    let committed = |t: &usize| history.get(*t).is_some_and(|t| t.committed);
    for list in order.values() {
        for pair in list.windows(2) {
            if let (Some(&a), Some(&b)) = (writer.get(&pair[0]), writer.get(&pair[1])) {
                if a != b && committed(&a) && committed(&b) {
                    edges.insert((a, b, WW));
                }
            }
        }
    }
    for &(t, key, list) in reads {
        if let Some(&w) = list.last().and_then(|e| writer.get(e)) {
            if w != t && committed(&w) {
                edges.insert((w, t, WR));
            }
        }
        // The element after what was read: its writer overwrote it.
        let known = order.get(&key).map_or(&[][..], Vec::as_slice);
        if let Some(&w) = known.get(list.len()).and_then(|e| writer.get(e)) {
            if w != t && committed(&w) {
                edges.insert((t, w, RW));
            }
        }
    }
    let mut graph: Graph = vec![Vec::new(); history.len()];
    for (from, to, kind) in edges {
        report.edges[kind] += 1;
        graph[from].push((to, kind));
    }
    graph
}

/// Cycles by kind: strongly connected components of the graph restricted
/// to the allowed kinds, and for G-single a search per rw edge.
fn find_cycles(graph: &Graph, report: &mut Report) {
    let components = |allowed: &[usize]| -> Vec<Vec<usize>> {
        strongly_connected(graph, allowed)
            .into_iter()
            .filter(|c| c.len() > 1)
            .collect()
    };
    for c in components(&[WW]) {
        report.g0 += 1;
        report.note(format!("G0 among {c:?}"));
    }
    let ww_only: HashSet<Vec<usize>> = components(&[WW]).into_iter().collect();
    for c in components(&[WW, WR]) {
        if !ww_only.contains(&c) {
            report.g1c += 1;
            report.note(format!("G1c among {c:?}"));
        }
    }
    // Components of the whole graph with an rw edge inside: G2. A cycle
    // with one rw edge: an rw edge a -> b with a path b ->* a of ww/wr.
    for c in components(&[WW, WR, RW]) {
        let inside: HashSet<usize> = c.iter().copied().collect();
        let rw_edges: Vec<(usize, usize)> = c
            .iter()
            .flat_map(|&a| graph[a].iter().map(move |&(b, k)| (a, b, k)))
            .filter(|&(_, b, k)| k == RW && inside.contains(&b))
            .map(|(a, b, _)| (a, b))
            .collect();
        if rw_edges.is_empty() {
            continue;
        }
        report.g2 += 1;
        report.note(format!("G2 among {c:?}"));
        if rw_edges.iter().any(|&(a, b)| reaches(graph, b, a, &inside)) {
            report.g_single += 1;
            report.note(format!("G-single among {c:?}"));
        }
    }
}

/// Whether `to` is reachable from `from` by ww and wr edges inside `within`.
fn reaches(graph: &Graph, from: usize, to: usize, within: &HashSet<usize>) -> bool {
    let mut seen = HashSet::from([from]);
    let mut queue = VecDeque::from([from]);
    while let Some(node) = queue.pop_front() {
        if node == to {
            return true;
        }
        for &(next, kind) in &graph[node] {
            if kind != RW && within.contains(&next) && seen.insert(next) {
                queue.push_back(next);
            }
        }
    }
    false
}

/// Tarjan's algorithm, iterative, over the edges of the allowed kinds.
fn strongly_connected(graph: &Graph, allowed: &[usize]) -> Vec<Vec<usize>> {
    let n = graph.len();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next_index = 0;
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        // (node, position in its adjacency list)
        let mut work = vec![(root, 0usize)];
        index[root] = next_index;
        low[root] = next_index;
        next_index += 1;
        stack.push(root);
        on_stack[root] = true;
        while let Some(&mut (node, ref mut pos)) = work.last_mut() {
            if let Some(&(next, kind)) = graph[node].get(*pos) {
                *pos += 1;
                if !allowed.contains(&kind) {
                    continue;
                }
                if index[next] == usize::MAX {
                    index[next] = next_index;
                    low[next] = next_index;
                    next_index += 1;
                    stack.push(next);
                    on_stack[next] = true;
                    work.push((next, 0));
                } else if on_stack[next] {
                    low[node] = low[node].min(index[next]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                component.sort_unstable();
                components.push(component);
            }
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn append(key: u64, element: u64) -> Op {
        Op::Append { key, element }
    }

    fn read(key: u64, list: &[u64]) -> Op {
        Op::Read {
            key,
            list: list.to_vec(),
        }
    }

    fn ok(ops: Vec<Op>) -> Txn {
        Txn {
            ops,
            committed: true,
        }
    }

    #[test]
    fn a_serial_history_is_clean() {
        let report = check(&[
            ok(vec![append(1, 1), append(2, 2)]),
            ok(vec![read(1, &[1]), append(1, 3)]),
            ok(vec![read(1, &[1, 3]), read(2, &[2])]),
        ]);
        assert_eq!(report.serializable_anomalies(), 0, "{report:?}");
        assert!(report.edges.iter().sum::<usize>() > 0);
    }

    #[test]
    fn finds_g0_write_cycles() {
        // T0 and T1 both append to keys 1 and 2, in opposite orders.
        let report = check(&[
            ok(vec![append(1, 1), append(2, 2)]),
            ok(vec![append(1, 3), append(2, 4)]),
            ok(vec![read(1, &[1, 3]), read(2, &[4, 2])]),
        ]);
        assert_eq!(report.g0, 1, "{report:?}");
    }

    #[test]
    fn finds_g1a_aborted_reads() {
        let report = check(&[
            Txn {
                ops: vec![append(1, 1)],
                committed: false,
            },
            ok(vec![read(1, &[1])]),
        ]);
        assert_eq!(report.g1a, 1, "{report:?}");
    }

    #[test]
    fn finds_g1b_intermediate_reads() {
        let report = check(&[
            ok(vec![append(1, 1), append(1, 2)]),
            ok(vec![read(1, &[1])]),
            ok(vec![read(1, &[1, 2])]),
        ]);
        assert_eq!(report.g1b, 1, "{report:?}");
    }

    #[test]
    fn finds_g1c_circular_information_flow() {
        // T0 appends to 1 and reads T1's append to 2; T1 the other way round.
        let report = check(&[
            ok(vec![append(1, 1), read(2, &[2])]),
            ok(vec![append(2, 2), read(1, &[1])]),
        ]);
        assert_eq!(report.g1c, 1, "{report:?}");
        assert_eq!(report.g0, 0);
    }

    #[test]
    fn finds_lost_updates_and_g_single() {
        // Both read key 1 empty and appended: one append overwrote the other.
        let report = check(&[
            ok(vec![read(1, &[]), append(1, 1)]),
            ok(vec![read(1, &[]), append(1, 2)]),
            ok(vec![read(1, &[1, 2])]),
        ]);
        assert_eq!(report.lost_update, 1, "{report:?}");
        assert_eq!(report.g_single, 1, "{report:?}");
    }

    #[test]
    fn finds_g_single_read_skew() {
        // T2 reads T0's key 1 before T1's append but T1's key 2 after it:
        // T2 -rw-> T1 -wr-> T2.
        let report = check(&[
            ok(vec![append(1, 1)]),
            ok(vec![append(1, 2), append(2, 3)]),
            ok(vec![read(1, &[1]), read(2, &[3])]),
            ok(vec![read(1, &[1, 2])]),
        ]);
        assert_eq!(report.g_single, 1, "{report:?}");
        assert_eq!(report.snapshot_isolation_anomalies(), 1);
    }

    #[test]
    fn finds_g2_write_skew_which_snapshot_isolation_allows() {
        // Each reads both keys empty and appends to a different one.
        let report = check(&[
            ok(vec![read(1, &[]), read(2, &[]), append(1, 1)]),
            ok(vec![read(1, &[]), read(2, &[]), append(2, 2)]),
            ok(vec![read(1, &[1]), read(2, &[2])]),
        ]);
        assert_eq!(report.g2, 1, "{report:?}");
        assert_eq!(report.g_single, 0, "{report:?}");
        assert_eq!(report.snapshot_isolation_anomalies(), 0);
        assert_eq!(report.serializable_anomalies(), 1);
    }

    #[test]
    fn finds_incompatible_orders() {
        let report = check(&[
            ok(vec![append(1, 1)]),
            ok(vec![append(1, 2)]),
            ok(vec![read(1, &[1, 2])]),
            ok(vec![read(1, &[2])]),
        ]);
        assert_eq!(report.incompatible_order, 1, "{report:?}");
    }
}
