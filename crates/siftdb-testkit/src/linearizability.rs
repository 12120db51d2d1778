//! A linearizability checker for histories of concurrent operations, with
//! a register / compare-and-swap model on many keys.
//!
//! The algorithm is the one Porcupine implements: Wing and Gong's search
//! for a sequential order consistent with real time, with Lowe's
//! memoization of every (set of linearized operations, model state) pair
//! already explored, on each key's sub-history separately (a history of
//! independent keys is linearizable iff each key's is: Horn and Kroening's
//! P-compositionality). Written from the papers' description, not from
//! Porcupine's code. Two additions make long histories (hundreds of
//! thousands of operations) decidable: the history is split at quiet
//! points, and the memo keys a set by a 128-bit Zobrist fingerprint.
//!
//! **The walk.** The search walks a list of call and return events in time
//! order. At a call it tries to linearize that operation now: the model
//! must accept its input and recorded output in the current state, and the
//! pair (set with it, new state) must not have been explored; then the
//! operation's events leave the list and the walk restarts at the head. At
//! a return whose operation is not yet linearized, some operation
//! linearized earlier must move: the last one is undone (its events back
//! in the list) and the walk goes on at its call (its other outcomes, then
//! what follows).
//!
//! **Indeterminate operations** (a timeout: it may or may not have taken
//! effect) have no recorded output. One with a return time (a bound the
//! caller knows, e.g. the same client's next acknowledged write) is an
//! ordinary operation whose model step also offers "no effect"; the walk
//! places it with an effect only at its call, and with no effect only at
//! its return (where a determinate operation would be a dead end): a
//! no-effect placement changes no state, so its latest legal place is as
//! good as any, and trying every place made a partition's dozens of
//! overlapping timeouts exponential. One
//! without a return is *free*: it may be linearized at any instant after
//! its call, or never (the [`Model`] contract: an indeterminate operation
//! may always have had no effect, so a free operation left over at the end
//! is placed last, doing nothing).
//!
//! **Quiet points.** A history is cut into segments where every operation
//! with a return called so far has returned before the next call. In any
//! linearization, every operation of an earlier segment that has a return
//! precedes every operation of a later segment (it returned before the
//! other was called), so a linearization is one of each segment in turn,
//! except that a free operation may land in any segment from its own on.
//! What passes from one segment to the next is therefore a configuration:
//! (model state, free operations not yet linearized). Each segment is
//! searched from a configuration by the walk above, made exhaustive
//! (`Explorer`): each time the segment's last operation with a return is
//! linearized, the configuration reached is an end, handed to the next
//! segment's search at once (depth first over segments); only if that one
//! fails does the earlier search resume for its next end. A configuration
//! that failed at a boundary is not tried there again, nor one with the
//! same state and fewer free operations (more free operations can do all
//! that fewer can). The free operations carried in count as called at the
//! segment's start.
//!
//! **Why it is sound** (never accepts a history without a linearization):
//! an accepted history comes with a sequence of model steps, one per
//! operation with a return (and per free operation used), each taken from
//! a state the previous steps produced with the operation's recorded
//! output; within a segment the walk only linearizes an operation when no
//! unlinearized operation's return precedes its call in the list, and
//! across segments every operation of an earlier segment with a return
//! returned before any later one was called, and a free operation is
//! linearized after its call; an indeterminate operation placed at its
//! return event with no effect is placed where every operation returned
//! before its call is already placed. That sequence is a linearization.
//! Every pruning (the memo, the domination of configurations, placing an
//! indeterminate operation that would change nothing only at its return,
//! or for a free one at the end) removes only search branches whose every
//! completion is also reachable from a branch kept, so it can hide
//! nothing; and a memo
//! hit from a fingerprint collision (odds about 2^-128 per pair) could at
//! worst hide a linearization, making the verdict `Illegal`, never
//! `Linearizable`. The unit tests hold hand-made anomalies it must reject,
//! and compare it with a brute-force enumeration of every order on
//! 20,000 small random histories (free and bounded indeterminate
//! operations, many quiet points): the two agree both ways.
//!
//! **Registers.** [`check_registers`] checks each key on its own, after
//! [`merge_unobserved_values`]: values no read or compare-and-swap could
//! tell apart become one (an exact rewrite, argued on that function),
//! which keeps the states few when many timed-out writes overlap.
//!
//! Owns: [`Model`], [`Operation`], [`check`] and [`check_report`],
//! [`Register`] and [`check_registers`], a text form of register histories
//! ([`format_history`], [`parse_history`]).
//! Must never: accept a history that has no linearization; run without
//! bound (a search past its step budget answers [`Verdict::Unknown`]).

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::Hash;

/// A sequential specification.
pub trait Model {
    /// The object's state.
    type State: Clone + Eq + Hash;
    /// What an operation asks.
    type Input;
    /// What an operation answered.
    type Output;
    /// The state before any operation.
    fn init(&self) -> Self::State;
    /// Every state `input` in `state` can lead to while answering `output`
    /// (`None` recorded: an indeterminate operation, which may also have
    /// had no effect: the answer then always includes `state` itself);
    /// empty when it could not have answered so.
    fn step(
        &self,
        state: &Self::State,
        input: &Self::Input,
        output: Option<&Self::Output>,
    ) -> Vec<Self::State>;
}

/// One operation of a history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Operation<I, O> {
    /// What it asked.
    pub input: I,
    /// What it answered; `None` for an indeterminate operation.
    pub output: Option<O>,
    /// When it was called (any monotonic clock, same for all operations).
    pub call: u64,
    /// When its answer arrived; `None` for an indeterminate operation.
    pub ret: Option<u64>,
}

impl<I, O> Operation<I, O> {
    /// When it returned, for the search: an operation with an output but
    /// no return time (not a shape the callers make) returns at the end of
    /// time, so it must still be linearized; only an indeterminate one
    /// without a return is free.
    fn returned(&self) -> Option<u64> {
        match (self.ret, &self.output) {
            (None, Some(_)) => Some(u64::MAX),
            (ret, _) => ret,
        }
    }
}

/// What a check found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A linearization exists.
    Linearizable,
    /// None exists.
    Illegal,
    /// The search used up its step budget.
    Unknown,
}

/// One event of the search list.
#[derive(Clone, Copy)]
struct Event {
    /// The operation (an index into the search's own list).
    op: usize,
    is_call: bool,
    /// Index of the matching event: a call's return (none for an
    /// operation that never returns), a return's call.
    matching: Option<usize>,
    prev: Option<usize>,
    next: Option<usize>,
}

/// The search list: events in time order, doubly linked, with a head
/// sentinel at index 0 so lifting and unlifting need no special case.
struct Events {
    nodes: Vec<Event>,
}

const HEAD: usize = 0;

const NO_EVENT: Event = Event {
    op: usize::MAX,
    is_call: false,
    matching: None,
    prev: None,
    next: None,
};

impl Events {
    /// The events of operations with these (call, return) times; an
    /// operation without a return has only its call event.
    fn new(spans: &[(u64, Option<u64>)]) -> Events {
        // (time, calls before returns at equal times: touching operations
        // count as concurrent, the permissive reading), op, is_call.
        let mut order: Vec<(u64, u8, usize, bool)> = Vec::with_capacity(spans.len() * 2);
        for (i, &(call, ret)) in spans.iter().enumerate() {
            order.push((call, 0, i, true));
            if let Some(ret) = ret {
                // A return recorded before its call (a clock step back)
                // counts as at the call.
                order.push((ret.max(call), 1, i, false));
            }
        }
        order.sort_unstable();
        let mut nodes = Vec::with_capacity(order.len() + 1);
        nodes.push(NO_EVENT);
        let mut call_at = vec![None; spans.len()];
        let mut ret_at = vec![None; spans.len()];
        for (position, &(_, _, op, is_call)) in order.iter().enumerate() {
            let at = position + 1;
            if let Some(slot) = if is_call { &mut call_at } else { &mut ret_at }.get_mut(op) {
                *slot = Some(at);
            }
            nodes.push(Event {
                op,
                is_call,
                matching: None,
                prev: Some(at - 1),
                next: (at < order.len()).then_some(at + 1),
            });
        }
        if let Some(head) = nodes.get_mut(HEAD) {
            head.next = (!order.is_empty()).then_some(1);
        }
        for node in nodes.iter_mut().skip(1) {
            node.matching = if node.is_call { &ret_at } else { &call_at }
                .get(node.op)
                .copied()
                .flatten();
        }
        Events { nodes }
    }

    fn get(&self, at: usize) -> Event {
        self.nodes.get(at).copied().unwrap_or(NO_EVENT)
    }

    fn set_next(&mut self, at: Option<usize>, next: Option<usize>) {
        if let Some(node) = at.and_then(|a| self.nodes.get_mut(a)) {
            node.next = next;
        }
    }

    fn set_prev(&mut self, at: Option<usize>, prev: Option<usize>) {
        if let Some(node) = at.and_then(|a| self.nodes.get_mut(a)) {
            node.prev = prev;
        }
    }

    /// Takes event `at` out of the list (it keeps its own links, so
    /// [`Events::unlift_one`] puts it back).
    fn lift_one(&mut self, at: usize) {
        let e = self.get(at);
        self.set_next(e.prev, e.next);
        self.set_prev(e.next, e.prev);
    }

    fn unlift_one(&mut self, at: usize) {
        let e = self.get(at);
        self.set_next(e.prev, Some(at));
        self.set_prev(e.next, Some(at));
    }

    /// Takes call `at` and its return out.
    fn lift(&mut self, at: usize) {
        let ret = self.get(at).matching;
        self.lift_one(at);
        if let Some(ret) = ret {
            self.lift_one(ret);
        }
    }

    /// Puts call `at` and its return back (in the reverse order of
    /// [`Events::lift`]; lifts are undone last first).
    fn unlift(&mut self, at: usize) {
        if let Some(ret) = self.get(at).matching {
            self.unlift_one(ret);
        }
        self.unlift_one(at);
    }
}

/// What a check found, with the figures of its search.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Report {
    /// The answer.
    pub verdict: Verdict,
    /// Search steps taken (events visited), over every segment.
    pub steps: u64,
    /// Segments the history was split into (at instants where no
    /// operation with a return was in flight).
    pub segments: usize,
    /// Operations in the largest segment (operations carried into it from
    /// earlier segments included).
    pub largest_segment: usize,
    /// The most configurations (state, indeterminate operations still
    /// free) tried at one segment boundary.
    pub largest_frontier: usize,
    /// For [`Verdict::Illegal`], the call time of the first operation of
    /// the segment no configuration got through: the anomaly is there.
    pub illegal_at: Option<u64>,
}

/// Whether `ops` (one object's history) is linearizable under `model`,
/// searching at most `budget` steps.
pub fn check<M: Model>(model: &M, ops: &[Operation<M::Input, M::Output>], budget: u64) -> Verdict {
    check_report(model, ops, budget).verdict
}

/// A configuration at a segment boundary: the model's state, and the
/// operations without a return (global indexes, ascending) not linearized
/// yet, which may still take effect later.
type Config<S> = (S, Vec<usize>);

/// [`check`], with the figures of the search.
///
/// The segments are searched depth first: each end configuration one
/// segment's search finds starts the next segment's search at once, and
/// the earlier search resumes (for its other end configurations) only if
/// that fails. A configuration that failed at a boundary, or one with the
/// same state and fewer free operations than one that failed, is not
/// tried there again.
pub fn check_report<M: Model>(
    model: &M,
    ops: &[Operation<M::Input, M::Output>],
    budget: u64,
) -> Report {
    let segments = segments(ops);
    let mut report = Report {
        verdict: Verdict::Linearizable,
        steps: 0,
        segments: segments.len(),
        largest_segment: 0,
        largest_frontier: 0,
        illegal_at: None,
    };
    if segments.is_empty() {
        return report;
    }
    // Per boundary (the segment it starts), the configurations tried.
    let mut tried: Vec<HashMap<M::State, Vec<Vec<usize>>>> =
        (0..segments.len()).map(|_| HashMap::new()).collect();
    let mut deepest = 0;
    let mut stack: Vec<(usize, Explorer<'_, M>)> = Vec::new();
    let mut start = Some((0, (model.init(), Vec::new())));
    loop {
        if let Some((index, (state, free))) = start.take() {
            let at = tried.get_mut(index).and_then(|t| {
                let same_state = t.entry(state.clone()).or_default();
                // Tried already with these free operations or more.
                let covered = same_state
                    .iter()
                    .any(|more| free.iter().all(|x| more.binary_search(x).is_ok()));
                (!covered).then(|| same_state.push(free.clone()))
            });
            if at.is_some() {
                let width = tried
                    .get(index)
                    .map_or(0, |t| t.values().map(Vec::len).sum());
                report.largest_frontier = report.largest_frontier.max(width);
                deepest = deepest.max(index);
                let segment = segments.get(index).map_or(&[][..], Vec::as_slice);
                let explorer = Explorer::new(ops, &free, segment, state);
                report.largest_segment = report.largest_segment.max(explorer.members.len());
                stack.push((index, explorer));
            }
        }
        let Some((index, explorer)) = stack.last_mut() else {
            report.verdict = Verdict::Illegal;
            report.illegal_at = segments
                .get(deepest)
                .and_then(|s| s.first())
                .and_then(|&g| ops.get(g))
                .map(|o| o.call);
            return report;
        };
        match explorer.next_end(model, &mut report.steps, budget) {
            Next::End(config) => {
                if *index + 1 == segments.len() {
                    return report;
                }
                start = Some((*index + 1, config));
            }
            Next::Exhausted => {
                stack.pop();
            }
            Next::OutOfBudget => {
                report.verdict = Verdict::Unknown;
                return report;
            }
        }
    }
}

/// The history's operations (indexes) in segments, in call order: a
/// segment ends where every operation of it that has a return has
/// returned before the next operation's call. An operation without a
/// return does not hold a segment open (it may take effect at any later
/// instant; the search carries it forward instead).
fn segments<I, O>(ops: &[Operation<I, O>]) -> Vec<Vec<usize>> {
    let mut order: Vec<usize> = (0..ops.len()).collect();
    order.sort_by_key(|&i| ops.get(i).map(|o| o.call));
    let mut segments: Vec<Vec<usize>> = Vec::new();
    let mut current: Vec<usize> = Vec::new();
    // The latest return of the current segment's operations.
    let mut reach: Option<u64> = None;
    for i in order {
        let Some(op) = ops.get(i) else { continue };
        if !current.is_empty() && reach.is_none_or(|r| r < op.call) {
            segments.push(std::mem::take(&mut current));
            reach = None;
        }
        current.push(i);
        if let Some(ret) = op.returned() {
            let ret = ret.max(op.call);
            reach = Some(reach.map_or(ret, |r| r.max(ret)));
        }
    }
    if !current.is_empty() {
        segments.push(current);
    }
    segments
}

/// A 128-bit key per operation, for the memo's fingerprint of a set
/// (Zobrist hashing: a set's fingerprint is the XOR of its members' keys,
/// updated in O(1) when one is added or removed).
fn zobrist(n: usize) -> Vec<u128> {
    let mut rng = crate::SplitMix64::new(0x6c69_6e65_6172);
    (0..n)
        .map(|_| (u128::from(rng.next()) << 64) | u128::from(rng.next()))
        .collect()
}

/// What [`Explorer::next_end`] found.
enum Next<S> {
    /// An end configuration (global indexes of the free operations).
    End(Config<S>),
    /// No more.
    Exhausted,
    /// The step budget is used up.
    OutOfBudget,
}

/// The search of one segment from one start configuration, resumable:
/// each [`Explorer::next_end`] answers one more end configuration. The
/// operations with a return must all be linearized (each between its call
/// and its return); those without one ("free": carried in from earlier
/// segments, as called at the start, or called in this one) may be,
/// anywhere after their call.
///
/// The walk is Wing and Gong's with Lowe's memo, made exhaustive: when
/// the last operation with a return is linearized, the configuration is
/// answered, and the next call backtracks from it as from a dead end.
struct Explorer<'a, M: Model> {
    /// The free operations carried in, then the segment's (global indexes).
    members: Vec<usize>,
    ops: Vec<&'a Operation<M::Input, M::Output>>,
    /// Per local operation, its position among the free ones.
    free_slot: Vec<Option<usize>>,
    events: Events,
    keys: Vec<u128>,
    /// Operations with a return not linearized yet.
    remaining: usize,
    linearized: Vec<bool>,
    /// Zobrist fingerprint of the linearized operations with a return.
    fingerprint: u128,
    /// The free operations linearized, as bits by free position.
    free_done: Vec<u64>,
    /// Lowe's memo, widened for free operations: per (fingerprint of the
    /// linearized operations with a return, state), the sets of free
    /// operations linearized with them already explored. A configuration
    /// is skipped when one with the same fingerprint and state and a
    /// subset of its free operations was explored (fewer spent can do all
    /// that more can). Only ever prunes: a false hit (two sets with one
    /// fingerprint, odds about 2^-128 per pair) could hide a
    /// linearization, never invent one.
    seen: HashMap<(u128, M::State), Vec<Vec<u64>>>,
    /// (call event, state before it, whether placed at its return) of
    /// each linearized operation.
    stack: Vec<(usize, M::State, bool)>,
    state: M::State,
    at: Option<usize>,
    /// Backtrack before walking (after an answered end, or at the start
    /// of a segment with nothing to linearize, once answered).
    backtrack: bool,
    trivial: bool,
}

impl<'a, M: Model> Explorer<'a, M> {
    fn new(
        all: &'a [Operation<M::Input, M::Output>],
        free: &[usize],
        segment: &[usize],
        state: M::State,
    ) -> Explorer<'a, M> {
        let members: Vec<usize> = free.iter().chain(segment).copied().collect();
        let ops: Vec<&Operation<M::Input, M::Output>> =
            members.iter().filter_map(|&g| all.get(g)).collect();
        // Carried operations count as called at the segment's start.
        let spans: Vec<(u64, Option<u64>)> = ops
            .iter()
            .enumerate()
            .map(|(local, op)| {
                if local < free.len() {
                    (0, None)
                } else {
                    (op.call, op.returned())
                }
            })
            .collect();
        let mut free_count = 0;
        let free_slot: Vec<Option<usize>> = spans
            .iter()
            .map(|s| {
                s.1.is_none().then(|| {
                    free_count += 1;
                    free_count - 1
                })
            })
            .collect();
        let remaining = spans.len() - free_count;
        let events = Events::new(&spans);
        Explorer {
            keys: zobrist(members.len()),
            linearized: vec![false; members.len()],
            members,
            ops,
            free_slot,
            at: events.get(HEAD).next,
            events,
            remaining,
            fingerprint: 0,
            free_done: vec![0; free_count.div_ceil(64)],
            seen: HashMap::new(),
            stack: Vec::new(),
            state,
            backtrack: false,
            trivial: remaining == 0,
        }
    }

    /// The current configuration, as an end.
    fn end(&self) -> Config<M::State> {
        let free = self
            .free_slot
            .iter()
            .zip(&self.linearized)
            .zip(&self.members)
            .filter(|((slot, done), _)| slot.is_some() && !**done)
            .map(|(_, &global)| global)
            .collect::<BTreeSet<usize>>()
            .into_iter()
            .collect();
        (self.state.clone(), free)
    }

    fn flip_free(&mut self, op: usize) {
        if let Some(slot) = self.free_slot.get(op).copied().flatten() {
            if let Some(word) = self.free_done.get_mut(slot / 64) {
                *word ^= 1 << (slot % 64);
            }
        }
    }

    /// Explored already, with the same or fewer free operations spent.
    fn covered(&self, fingerprint: u128, state: &M::State, free_done: &[u64]) -> bool {
        self.seen
            .get(&(fingerprint, state.clone()))
            .is_some_and(|sets| {
                sets.iter()
                    .any(|fewer| fewer.iter().zip(free_done).all(|(f, d)| f & !d == 0))
            })
    }

    fn next_end(&mut self, model: &M, steps: &mut u64, budget: u64) -> Next<M::State> {
        if self.trivial {
            // Nothing to linearize: the start is the one end.
            if self.backtrack {
                return Next::Exhausted;
            }
            self.backtrack = true;
            return Next::End(self.end());
        }
        loop {
            if !std::mem::take(&mut self.backtrack) {
                let Some(here) = self.at else {
                    self.backtrack = true;
                    continue;
                };
                *steps += 1;
                if *steps > budget {
                    return Next::OutOfBudget;
                }
                let e = self.events.get(here);
                let indeterminate = self.ops.get(e.op).is_some_and(|op| op.output.is_none());
                if !e.is_call {
                    // A return before its call was linearized: a dead end,
                    // unless the operation is indeterminate: then it had no
                    // effect, placed here (the one place tried for that).
                    let call = e.matching.unwrap_or(HEAD);
                    let with = self.fingerprint ^ self.keys.get(e.op).copied().unwrap_or(0);
                    if !indeterminate || self.covered(with, &self.state, &self.free_done) {
                        self.backtrack = true;
                        continue;
                    }
                    let state = self.state.clone();
                    if let Some(end) = self.linearize(e.op, call, with, state, true) {
                        return end;
                    }
                    continue;
                }
                let free = self.free_slot.get(e.op).copied().flatten().is_some();
                let key = self.keys.get(e.op).copied().unwrap_or(0);
                let with = if free {
                    self.fingerprint
                } else {
                    self.fingerprint ^ key
                };
                let mut free_with = self.free_done.clone();
                if let Some(slot) = self.free_slot.get(e.op).copied().flatten() {
                    if let Some(word) = free_with.get_mut(slot / 64) {
                        *word |= 1 << (slot % 64);
                    }
                }
                let candidates = self.ops.get(e.op).map_or_else(Vec::new, |op| {
                    model.step(&self.state, &op.input, op.output.as_ref())
                });
                // The first outcome not explored yet with this set (after a
                // backtrack to this call, the next one). An indeterminate
                // operation that would change nothing now is not placed
                // here: a free one may stay free (it does all that does),
                // a bounded one is placed at its return.
                let fresh = candidates.into_iter().find(|next| {
                    let idle = (free || indeterminate) && *next == self.state;
                    !idle && !self.covered(with, next, &free_with)
                });
                let Some(next_state) = fresh else {
                    self.at = e.next;
                    continue;
                };
                if let Some(end) = self.linearize(e.op, here, with, next_state, false) {
                    return end;
                }
                continue;
            }
            // Undo the last choice and try what follows it.
            let Some((call, before, at_return)) = self.stack.pop() else {
                return Next::Exhausted;
            };
            self.state = before;
            let op = self.events.get(call).op;
            let free = self.free_slot.get(op).copied().flatten().is_some();
            if free {
                self.flip_free(op);
            } else {
                self.fingerprint ^= self.keys.get(op).copied().unwrap_or(0);
                self.remaining += 1;
            }
            if let Some(flag) = self.linearized.get_mut(op) {
                *flag = false;
            }
            self.events.unlift(call);
            if at_return {
                // Placed at its return, its only place: back further.
                self.backtrack = true;
            } else {
                // The same call again: its other outcomes, then what
                // follows.
                self.at = Some(call);
            }
        }
    }

    /// Linearizes operation `op` (call event `call`) into `next` (the
    /// memo's set fingerprint becoming `with`); an end when it was the
    /// last operation with a return.
    fn linearize(
        &mut self,
        op: usize,
        call: usize,
        with: u128,
        next: M::State,
        at_return: bool,
    ) -> Option<Next<M::State>> {
        self.flip_free(op);
        self.seen
            .entry((with, next.clone()))
            .or_default()
            .push(self.free_done.clone());
        self.stack
            .push((call, std::mem::replace(&mut self.state, next), at_return));
        self.fingerprint = with;
        if let Some(flag) = self.linearized.get_mut(op) {
            *flag = true;
        }
        self.events.lift(call);
        if self.free_slot.get(op).copied().flatten().is_none() {
            self.remaining -= 1;
        }
        if self.remaining > 0 {
            self.at = self.events.get(HEAD).next;
            return None;
        }
        // Every operation with a return is placed: an end.
        self.backtrack = true;
        Some(Next::End(self.end()))
    }
}

/// A register operation's request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterInput {
    /// Read the value.
    Read,
    /// Set the value (`None`: remove it).
    Write(Option<u64>),
    /// Set `new` if the value is `expected`.
    Cas {
        /// The value required (`None`: absent).
        expected: Option<u64>,
        /// The value to set (`None`: remove it).
        new: Option<u64>,
    },
}

/// A register operation's answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RegisterOutput {
    /// A read's value.
    Read(Option<u64>),
    /// A write was done.
    Written,
    /// Whether a compare-and-swap swapped.
    Cas(bool),
}

/// A register holding an optional `u64`, initially absent.
pub struct Register;

impl Model for Register {
    type State = Option<u64>;
    type Input = RegisterInput;
    type Output = RegisterOutput;

    fn init(&self) -> Option<u64> {
        None
    }

    fn step(
        &self,
        state: &Option<u64>,
        input: &RegisterInput,
        output: Option<&RegisterOutput>,
    ) -> Vec<Option<u64>> {
        match (input, output) {
            (RegisterInput::Read, None) => vec![*state],
            (RegisterInput::Read, Some(RegisterOutput::Read(v))) => {
                if v == state {
                    vec![*state]
                } else {
                    vec![]
                }
            }
            (RegisterInput::Write(v), Some(RegisterOutput::Written)) => vec![*v],
            // Written, or lost.
            (RegisterInput::Write(v), None) => vec![*v, *state],
            // Swapped (only if the value was as expected), or lost.
            (RegisterInput::Cas { expected, new }, None) => {
                if state == expected {
                    vec![*new, *state]
                } else {
                    vec![*state]
                }
            }
            (RegisterInput::Cas { expected, new }, Some(RegisterOutput::Cas(swapped))) => {
                match (state == expected, swapped) {
                    (true, true) => vec![*new],
                    (false, false) => vec![*state],
                    _ => vec![],
                }
            }
            _ => vec![],
        }
    }
}

/// Merges the values no operation can tell apart into one, which keeps
/// the register's states few when many indeterminate writes overlap (a
/// partition): the history after is linearizable iff the one before was.
///
/// A value is *observed* when a determinate read returned it, a
/// determinate compare-and-swap expected it, or an indeterminate one
/// expected it and would set an observed value (or remove the value);
/// absence is always observed. Every other value (written, never
/// observed) becomes one `other` value not in the history. Why this is
/// exact: map `f` sends each unobserved value to `other` and keeps the
/// rest. Each step of the register depends on its state only through
/// comparisons with observed values (a read's answer, a determinate
/// compare-and-swap's expected value), which `f` preserves; an
/// indeterminate compare-and-swap expecting an unobserved value sets an
/// unobserved one, which under `f` is no change, as is its "no effect".
/// So an order of the operations is legal before iff it is after, the
/// states related by `f`. Answers how many values were merged.
pub fn merge_unobserved_values(ops: &mut [Operation<RegisterInput, RegisterOutput>]) -> usize {
    let mut observed: HashSet<u64> = HashSet::new();
    let mut values: HashSet<u64> = HashSet::new();
    for op in ops.iter() {
        match (&op.input, &op.output) {
            (RegisterInput::Read, Some(RegisterOutput::Read(Some(v)))) => {
                observed.insert(*v);
            }
            (
                RegisterInput::Cas {
                    expected: Some(e), ..
                },
                Some(_),
            ) => {
                observed.insert(*e);
            }
            _ => {}
        }
        match &op.input {
            RegisterInput::Write(Some(v)) => {
                values.insert(*v);
            }
            RegisterInput::Cas { expected, new } => {
                values.extend(expected.iter().chain(new));
            }
            _ => {}
        }
    }
    // Indeterminate compare-and-swaps that would set an observed value
    // make their expected value observed, to a fixed point.
    loop {
        let before = observed.len();
        for op in ops.iter().filter(|op| op.output.is_none()) {
            if let RegisterInput::Cas {
                expected: Some(e),
                new,
            } = &op.input
            {
                if new.is_none_or(|n| observed.contains(&n)) {
                    observed.insert(*e);
                }
            }
        }
        if observed.len() == before {
            break;
        }
    }
    let merged = values.iter().filter(|v| !observed.contains(v)).count();
    if merged < 2 {
        return 0;
    }
    let mut other = u64::MAX;
    while values.contains(&other) {
        other -= 1;
    }
    let map = |v: &mut Option<u64>| {
        if v.is_some_and(|x| !observed.contains(&x)) {
            *v = Some(other);
        }
    };
    for op in ops.iter_mut() {
        match &mut op.input {
            RegisterInput::Write(v) => map(v),
            RegisterInput::Cas { expected, new } => {
                map(expected);
                map(new);
            }
            RegisterInput::Read => {}
        }
    }
    merged
}

/// A register operation on a key.
pub type KeyedOperation = (u64, Operation<RegisterInput, RegisterOutput>);

/// Checks a history of register operations on many keys, each key's
/// sub-history on its own; the first key that is not linearizable (or
/// whose search ran out of `budget`) and the verdict.
pub fn check_registers(ops: &[KeyedOperation], budget: u64) -> (Verdict, Option<u64>) {
    let reports = check_registers_by_key(ops, budget);
    let first = |verdict: Verdict| {
        reports
            .iter()
            .find(|(_, r)| r.verdict == verdict)
            .map(|(key, _)| (verdict, Some(*key)))
    };
    first(Verdict::Illegal)
        .or_else(|| first(Verdict::Unknown))
        .unwrap_or((Verdict::Linearizable, None))
}

/// Each key's sub-history checked on its own (a history of independent
/// keys is linearizable iff each key's is), with `budget` steps per key.
pub fn check_registers_by_key(ops: &[KeyedOperation], budget: u64) -> BTreeMap<u64, Report> {
    let mut by_key: BTreeMap<u64, Vec<Operation<RegisterInput, RegisterOutput>>> = BTreeMap::new();
    for (key, op) in ops {
        by_key.entry(*key).or_default().push(op.clone());
    }
    by_key
        .into_iter()
        .map(|(key, mut history)| {
            merge_unobserved_values(&mut history);
            (key, check_report(&Register, &history, budget))
        })
        .collect()
}

/// How many operations of each kind a history holds, for reports.
pub fn summary(ops: &[KeyedOperation]) -> HashMap<&'static str, usize> {
    let mut out = HashMap::new();
    for (_, op) in ops {
        let kind = match (&op.input, op.output.is_some()) {
            (RegisterInput::Read, _) => "read",
            (RegisterInput::Write(_), true) => "write",
            (RegisterInput::Cas { .. }, true) => "cas",
            (_, false) => "indeterminate",
        };
        *out.entry(kind).or_insert(0) += 1;
    }
    out
}

/// A history as text, one operation a line (`key call ret input output`,
/// `-` for an indeterminate operation's return and output), for keeping a
/// long run's history and checking it again with [`parse_history`].
pub fn format_history(ops: &[KeyedOperation]) -> String {
    let value = |v: &Option<u64>| v.map_or_else(|| "none".to_string(), |v| v.to_string());
    let mut out = String::new();
    for (key, op) in ops {
        let ret = op.ret.map_or_else(|| "-".to_string(), |r| r.to_string());
        let input = match &op.input {
            RegisterInput::Read => "read".to_string(),
            RegisterInput::Write(v) => format!("write {}", value(v)),
            RegisterInput::Cas { expected, new } => {
                format!("cas {} {}", value(expected), value(new))
            }
        };
        let output = match &op.output {
            None => "-".to_string(),
            Some(RegisterOutput::Read(v)) => format!("read {}", value(v)),
            Some(RegisterOutput::Written) => "written".to_string(),
            Some(RegisterOutput::Cas(swapped)) => format!("cas {swapped}"),
        };
        out.push_str(&format!("{key} {} {ret} {input} {output}\n", op.call));
    }
    out
}

/// Reads what [`format_history`] wrote; the first bad line's number on
/// error.
pub fn parse_history(text: &str) -> Result<Vec<KeyedOperation>, String> {
    fn number(word: Option<&str>) -> Option<u64> {
        word?.parse().ok()
    }
    fn value(word: Option<&str>) -> Option<Option<u64>> {
        match word? {
            "none" => Some(None),
            w => w.parse().ok().map(Some),
        }
    }
    fn line(text: &str) -> Option<KeyedOperation> {
        let mut words = text.split_whitespace();
        let key = number(words.next())?;
        let call = number(words.next())?;
        let ret = match words.next()? {
            "-" => None,
            r => Some(r.parse().ok()?),
        };
        let input = match words.next()? {
            "read" => RegisterInput::Read,
            "write" => RegisterInput::Write(value(words.next())?),
            "cas" => RegisterInput::Cas {
                expected: value(words.next())?,
                new: value(words.next())?,
            },
            _ => return None,
        };
        let output = match words.next()? {
            "-" => None,
            "read" => Some(RegisterOutput::Read(value(words.next())?)),
            "written" => Some(RegisterOutput::Written),
            "cas" => Some(RegisterOutput::Cas(words.next()?.parse().ok()?)),
            _ => return None,
        };
        if words.next().is_some() {
            return None;
        }
        Some((
            key,
            Operation {
                input,
                output,
                call,
                ret,
            },
        ))
    }
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| line(l).ok_or_else(|| format!("line {}: {l:?}", n + 1)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::SplitMix64;

    const BUDGET: u64 = 10_000_000;

    fn op(
        input: RegisterInput,
        output: RegisterOutput,
        call: u64,
        ret: u64,
    ) -> Operation<RegisterInput, RegisterOutput> {
        Operation {
            input,
            output: Some(output),
            call,
            ret: Some(ret),
        }
    }

    fn write(v: u64, call: u64, ret: u64) -> Operation<RegisterInput, RegisterOutput> {
        op(
            RegisterInput::Write(Some(v)),
            RegisterOutput::Written,
            call,
            ret,
        )
    }

    fn read(v: Option<u64>, call: u64, ret: u64) -> Operation<RegisterInput, RegisterOutput> {
        op(RegisterInput::Read, RegisterOutput::Read(v), call, ret)
    }

    fn cas(
        expected: Option<u64>,
        new: Option<u64>,
        swapped: bool,
        call: u64,
        ret: u64,
    ) -> Operation<RegisterInput, RegisterOutput> {
        op(
            RegisterInput::Cas { expected, new },
            RegisterOutput::Cas(swapped),
            call,
            ret,
        )
    }

    fn timed_out(input: RegisterInput, call: u64) -> Operation<RegisterInput, RegisterOutput> {
        Operation {
            input,
            output: None,
            call,
            ret: None,
        }
    }

    fn verdict(ops: &[Operation<RegisterInput, RegisterOutput>]) -> Verdict {
        check(&Register, ops, BUDGET)
    }

    #[test]
    fn sequential_and_concurrent_histories_are_accepted() {
        assert_eq!(verdict(&[]), Verdict::Linearizable);
        assert_eq!(
            verdict(&[
                write(1, 0, 1),
                read(Some(1), 2, 3),
                write(2, 4, 5),
                read(Some(2), 6, 7)
            ]),
            Verdict::Linearizable
        );
        // A read concurrent with a write may see either value.
        assert_eq!(
            verdict(&[
                write(1, 0, 1),
                write(2, 2, 6),
                read(Some(1), 3, 4),
                read(Some(2), 5, 7)
            ]),
            Verdict::Linearizable
        );
        // Two concurrent CAS from absent: exactly one wins.
        assert_eq!(
            verdict(&[
                cas(None, Some(1), false, 0, 5),
                cas(None, Some(2), true, 1, 4),
                read(Some(2), 6, 7)
            ]),
            Verdict::Linearizable
        );
    }

    #[test]
    fn a_stale_read_is_rejected() {
        // The write of 2 finished before the read began.
        assert_eq!(
            verdict(&[write(1, 0, 1), write(2, 2, 3), read(Some(1), 4, 5)]),
            Verdict::Illegal
        );
    }

    #[test]
    fn a_read_of_a_value_never_written_is_rejected() {
        assert_eq!(
            verdict(&[write(1, 0, 1), read(Some(7), 2, 3)]),
            Verdict::Illegal
        );
    }

    #[test]
    fn reads_going_back_in_time_are_rejected() {
        // Concurrent with the write, but once a read saw 2 a later read
        // cannot see 1 again.
        assert_eq!(
            verdict(&[
                write(1, 0, 1),
                write(2, 2, 10),
                read(Some(2), 3, 4),
                read(Some(1), 5, 6)
            ]),
            Verdict::Illegal
        );
    }

    #[test]
    fn two_successful_cas_from_the_same_value_are_rejected() {
        assert_eq!(
            verdict(&[
                write(0, 0, 1),
                cas(Some(0), Some(1), true, 2, 5),
                cas(Some(0), Some(2), true, 3, 6),
            ]),
            Verdict::Illegal
        );
        // A failed CAS while the value was as expected.
        assert_eq!(
            verdict(&[write(0, 0, 1), cas(Some(0), Some(1), false, 2, 3)]),
            Verdict::Illegal
        );
    }

    #[test]
    fn a_lost_acknowledged_write_is_rejected() {
        assert_eq!(
            verdict(&[write(1, 0, 1), read(None, 2, 3)]),
            Verdict::Illegal
        );
    }

    #[test]
    fn indeterminate_operations_may_or_may_not_have_happened() {
        // A timed-out write seen by a later read, or never seen.
        assert_eq!(
            verdict(&[
                timed_out(RegisterInput::Write(Some(5)), 0),
                read(Some(5), 10, 11)
            ]),
            Verdict::Linearizable
        );
        assert_eq!(
            verdict(&[
                timed_out(RegisterInput::Write(Some(5)), 0),
                read(None, 10, 11)
            ]),
            Verdict::Linearizable
        );
        // Seen, then unseen: a write cannot take effect twice... nor undo.
        assert_eq!(
            verdict(&[
                timed_out(RegisterInput::Write(Some(5)), 0),
                read(Some(5), 10, 11),
                read(None, 12, 13)
            ]),
            Verdict::Illegal
        );
        // It cannot take effect before it was called.
        assert_eq!(
            verdict(&[
                read(Some(5), 0, 1),
                timed_out(RegisterInput::Write(Some(5)), 2)
            ]),
            Verdict::Illegal
        );
        // A timed-out CAS from absent: either it swapped or not.
        let c = RegisterInput::Cas {
            expected: None,
            new: Some(3),
        };
        assert_eq!(
            verdict(&[timed_out(c.clone(), 0), read(Some(3), 5, 6)]),
            Verdict::Linearizable
        );
        assert_eq!(
            verdict(&[write(1, 0, 1), timed_out(c, 2), read(Some(3), 5, 6)]),
            Verdict::Illegal
        );
    }

    /// An indeterminate operation with a bound on its return: it took
    /// effect before the bound or never.
    #[test]
    fn a_bounded_indeterminate_write_happened_before_its_bound_or_never() {
        let lost = |call, ret| Operation {
            input: RegisterInput::Write(Some(5)),
            output: None,
            call,
            ret: Some(ret),
        };
        // Never took effect.
        assert_eq!(
            verdict(&[write(1, 0, 1), lost(2, 4), read(Some(1), 6, 7)]),
            Verdict::Linearizable
        );
        // Took effect before its bound.
        assert_eq!(
            verdict(&[write(1, 0, 1), lost(2, 4), read(Some(5), 6, 7)]),
            Verdict::Linearizable
        );
        // Not after the bound: once 7 was written after it, 5 cannot show.
        assert_eq!(
            verdict(&[lost(0, 2), write(7, 3, 4), read(Some(5), 5, 6)]),
            Verdict::Illegal
        );
    }

    #[test]
    fn keys_are_checked_apart() {
        let ok = vec![
            (1, write(1, 0, 1)),
            (2, write(2, 0, 1)),
            (1, read(Some(1), 2, 3)),
            (2, read(Some(2), 2, 3)),
        ];
        assert_eq!(check_registers(&ok, BUDGET), (Verdict::Linearizable, None));
        let mut bad = ok;
        bad.push((2, read(Some(1), 4, 5)));
        assert_eq!(check_registers(&bad, BUDGET), (Verdict::Illegal, Some(2)));
    }

    #[test]
    fn a_search_past_its_budget_is_unknown() {
        let ops: Vec<_> = (0..20).map(|i| write(i, 0, 100)).collect();
        assert_eq!(check(&Register, &ops, 5), Verdict::Unknown);
    }

    /// Histories produced by a real sequential register under random
    /// overlaps are accepted; the same with one read's answer changed to a
    /// value never written is rejected.
    #[test]
    fn random_histories_of_a_real_register() {
        let mut rng = SplitMix64::new(7);
        for round in 0..200 {
            // Operations run atomically at distinct instants; each is
            // called up to 5 time units before and returns up to 5 after.
            let mut value = None;
            let mut ops = Vec::new();
            for i in 0..12u64 {
                let at = 10 * (i + 1);
                let call = at - rng.below(6);
                let ret = at + rng.below(6);
                let o = match rng.below(3) {
                    0 => read(value, call, ret),
                    1 => {
                        let v = rng.below(3);
                        value = Some(v);
                        write(v, call, ret)
                    }
                    _ => {
                        let expected = Some(rng.below(3));
                        let new = Some(rng.below(3));
                        let swapped = value == expected;
                        if swapped {
                            value = new;
                        }
                        cas(expected, new, swapped, call, ret)
                    }
                };
                ops.push(o);
            }
            assert_eq!(
                verdict(&ops),
                Verdict::Linearizable,
                "round {round}: {ops:?}"
            );
            if let Some(r) = ops.iter_mut().find(|o| o.input == RegisterInput::Read) {
                r.output = Some(RegisterOutput::Read(Some(99)));
                assert_eq!(verdict(&ops), Verdict::Illegal, "round {round}: {ops:?}");
            }
        }
    }

    /// Every order of `ops` that keeps real time (an operation after every
    /// one that returned before its call), with every outcome: the
    /// definition, for small histories.
    fn brute_force(ops: &[Operation<RegisterInput, RegisterOutput>]) -> bool {
        fn go(
            ops: &[Operation<RegisterInput, RegisterOutput>],
            placed: &mut [bool],
            state: Option<u64>,
        ) -> bool {
            if placed.iter().all(|p| *p) {
                return true;
            }
            for i in 0..ops.len() {
                let ready = !placed[i]
                    && (0..ops.len())
                        .all(|j| placed[j] || ops[j].ret.is_none_or(|r| r >= ops[i].call));
                if !ready {
                    continue;
                }
                for next in Register.step(&state, &ops[i].input, ops[i].output.as_ref()) {
                    placed[i] = true;
                    let found = go(ops, placed, next);
                    placed[i] = false;
                    if found {
                        return true;
                    }
                }
            }
            false
        }
        go(ops, &mut vec![false; ops.len()], None)
    }

    /// A random small history over values 1..=3: half run on a real
    /// register (so mostly linearizable), half with random answers; some
    /// operations indeterminate, bounded or not; times spread so quiet
    /// points (segment boundaries) are common.
    fn random_small_history(rng: &mut SplitMix64) -> Vec<Operation<RegisterInput, RegisterOutput>> {
        let real = rng.chance(2);
        let n = 1 + rng.below(7);
        let mut value = None;
        let mut ops = Vec::new();
        let pick = |rng: &mut SplitMix64| match rng.below(4) {
            0 => None,
            v => Some(v),
        };
        for i in 0..n {
            let at = 6 * (i + 1);
            let call = at - rng.below(5);
            let ret = at + rng.below(5);
            let (input, output) = match rng.below(3) {
                0 => {
                    let seen = if real { value } else { pick(rng) };
                    (RegisterInput::Read, RegisterOutput::Read(seen))
                }
                1 => {
                    let v = Some(1 + rng.below(3));
                    value = v;
                    (RegisterInput::Write(v), RegisterOutput::Written)
                }
                _ => {
                    let (expected, new) = (pick(rng), Some(1 + rng.below(3)));
                    let swapped = if real {
                        value == expected
                    } else {
                        rng.chance(2)
                    };
                    if swapped {
                        value = new;
                    }
                    (
                        RegisterInput::Cas { expected, new },
                        RegisterOutput::Cas(swapped),
                    )
                }
            };
            let mut o = op(input, output, call, ret);
            match rng.below(6) {
                0 => o.output = None,
                1 => {
                    o.output = None;
                    o.ret = None;
                }
                _ => {}
            }
            ops.push(o);
        }
        ops
    }

    /// The segmented, exhaustive, memoized search agrees with the
    /// definition on thousands of small histories, both ways: it never
    /// accepts one that has no linearization (soundness) nor rejects one
    /// that has (completeness), indeterminate operations included.
    #[test]
    fn the_search_agrees_with_brute_force() {
        let mut rng = SplitMix64::new(11);
        let (mut accepted, mut rejected, mut split, mut merged) = (0, 0, 0, 0);
        for round in 0..20_000 {
            let ops = random_small_history(&mut rng);
            let report = check_report(&Register, &ops, BUDGET);
            let truth = brute_force(&ops);
            let mut merged_ops = ops.clone();
            if merge_unobserved_values(&mut merged_ops) > 0 {
                merged += 1;
            }
            assert_eq!(
                check(&Register, &merged_ops, BUDGET),
                report.verdict,
                "round {round}: {ops:?} merged {merged_ops:?}"
            );
            assert_eq!(
                report.verdict,
                if truth {
                    Verdict::Linearizable
                } else {
                    Verdict::Illegal
                },
                "round {round}: {ops:?}"
            );
            if truth {
                accepted += 1;
            } else {
                rejected += 1;
            }
            if report.segments > 1 {
                split += 1;
            }
        }
        // Both answers, split histories and merged values are common.
        assert!(
            accepted > 3_000 && rejected > 3_000 && split > 3_000 && merged > 1_000,
            "{accepted} {rejected} {split} {merged}"
        );
    }

    /// A sequential history of `n` writes, each read back, with a gap
    /// between operations: `n * 2` segments.
    fn quiet_history(n: u64) -> Vec<Operation<RegisterInput, RegisterOutput>> {
        (0..n)
            .flat_map(|i| {
                [
                    write(i, 10 * i, 10 * i + 2),
                    read(Some(i), 10 * i + 4, 10 * i + 6),
                ]
            })
            .collect()
    }

    #[test]
    fn a_history_splits_at_quiet_points() {
        let report = check_report(&Register, &quiet_history(1_000), BUDGET);
        assert_eq!(report.verdict, Verdict::Linearizable);
        assert_eq!(report.segments, 2_000);
        assert_eq!(report.largest_segment, 1);
        // Overlapping operations share a segment.
        let report = check_report(
            &Register,
            &[
                write(1, 0, 5),
                read(Some(1), 3, 8),
                read(Some(1), 7, 9),
                read(Some(1), 10, 11),
            ],
            BUDGET,
        );
        assert_eq!((report.segments, report.largest_segment), (2, 3));
    }

    /// Anomalies after thousands of quiet points are still found, and
    /// located: a stale read, a lost write, a CAS that won from a value
    /// already gone, a failed CAS while the value was as expected.
    #[test]
    fn an_anomaly_after_quiet_points_is_rejected() {
        let base = quiet_history(5_000);
        let t = 100_000;
        let anomalies = [
            vec![
                write(7, t, t + 1),
                write(8, t + 2, t + 3),
                read(Some(7), t + 4, t + 5),
            ],
            vec![write(7, t, t + 1), read(Some(4_999), t + 2, t + 3)],
            vec![
                write(7, t, t + 1),
                cas(Some(4_999), Some(9), true, t + 2, t + 3),
            ],
            vec![
                write(7, t, t + 1),
                cas(Some(7), Some(9), false, t + 2, t + 3),
            ],
        ];
        for anomaly in anomalies {
            let mut ops = base.clone();
            ops.extend(anomaly.iter().cloned());
            let report = check_report(&Register, &ops, BUDGET);
            assert_eq!(report.verdict, Verdict::Illegal, "{anomaly:?}");
            assert!(report.illegal_at.is_some_and(|at| at >= t), "{report:?}");
        }
        // The same operations in a legal order pass.
        let mut ops = base;
        ops.extend([
            write(7, t, t + 1),
            cas(Some(7), Some(9), true, t + 2, t + 3),
            read(Some(9), t + 4, t + 5),
        ]);
        assert_eq!(verdict(&ops), Verdict::Linearizable);
    }

    /// An indeterminate operation that never returned stays free across
    /// quiet points: it may take effect at any later instant, once.
    #[test]
    fn a_free_indeterminate_write_crosses_quiet_points() {
        let lost = timed_out(RegisterInput::Write(Some(5)), 0);
        // Seen long after, even after another write completed.
        let late = [
            lost.clone(),
            write(1, 10, 11),
            read(Some(1), 20, 21),
            read(Some(5), 30, 31),
        ];
        let report = check_report(&Register, &late, BUDGET);
        assert_eq!(report.verdict, Verdict::Linearizable);
        assert_eq!(report.segments, 4);
        // But once: 1 cannot come back after 5 was seen.
        let mut twice = late.to_vec();
        twice.push(read(Some(1), 40, 41));
        assert_eq!(verdict(&twice), Verdict::Illegal);
        // And not before it was called.
        assert_eq!(
            verdict(&[
                write(1, 0, 1),
                read(Some(5), 2, 3),
                timed_out(RegisterInput::Write(Some(5)), 4)
            ]),
            Verdict::Illegal
        );
        // A free CAS takes effect only from its expected value: from 1
        // (written at 10), not from 2 (written at 30).
        let c = timed_out(
            RegisterInput::Cas {
                expected: Some(1),
                new: Some(6),
            },
            0,
        );
        let mut ops = vec![
            c,
            write(1, 10, 11),
            read(Some(1), 20, 21),
            read(Some(6), 22, 23),
        ];
        assert_eq!(verdict(&ops), Verdict::Linearizable);
        ops.truncate(3);
        ops.extend([write(2, 30, 31), read(Some(6), 40, 41)]);
        assert_eq!(verdict(&ops), Verdict::Illegal);
        // Many free writes: the configurations stay few (each state with
        // the most free operations left).
        let mut ops: Vec<_> = (0..12)
            .map(|i| timed_out(RegisterInput::Write(Some(100 + i)), i))
            .collect();
        ops.extend((0..50).map(|i| read(None, 100 + 10 * i, 105 + 10 * i)));
        ops.push(read(Some(105), 1_000, 1_001));
        ops.push(read(Some(111), 1_010, 1_011));
        let report = check_report(&Register, &ops, BUDGET);
        assert_eq!(report.verdict, Verdict::Linearizable);
        assert!(report.largest_frontier <= 13, "{report:?}");
        ops.push(read(Some(105), 1_020, 1_021));
        assert_eq!(verdict(&ops), Verdict::Illegal);
    }

    /// An indeterminate operation may always have had no effect: the rule
    /// the search relies on when it leaves a free operation unlinearized.
    #[test]
    fn the_register_lets_an_indeterminate_operation_do_nothing() {
        let inputs = [
            RegisterInput::Read,
            RegisterInput::Write(Some(1)),
            RegisterInput::Write(None),
            RegisterInput::Cas {
                expected: Some(1),
                new: Some(2),
            },
            RegisterInput::Cas {
                expected: None,
                new: Some(2),
            },
        ];
        for state in [None, Some(1), Some(2)] {
            for input in &inputs {
                assert!(Register.step(&state, input, None).contains(&state));
            }
        }
    }

    /// A long history of many overlapping clients (each write a new
    /// value, like the partition test's) is decided within a number of
    /// steps linear in its length.
    #[test]
    fn a_long_concurrent_history_is_decided() {
        let mut rng = SplitMix64::new(3);
        let mut value = None;
        let mut ops = Vec::new();
        for i in 0..100_000u64 {
            let at = 10 * (i + 1);
            let (call, ret) = (at - rng.below(40), at + rng.below(40));
            let o = match rng.below(3) {
                0 => read(value, call, ret),
                1 => {
                    value = Some(i);
                    write(i, call, ret)
                }
                _ => {
                    let expected = value.map(|v| v.saturating_sub(rng.below(2)));
                    let swapped = value == expected;
                    if swapped {
                        value = Some(i);
                    }
                    cas(expected, Some(i), swapped, call, ret)
                }
            };
            ops.push(o);
        }
        // Some writes time out: free, or bounded a while later.
        for (i, o) in ops.iter_mut().enumerate() {
            if o.input != RegisterInput::Read && i % 97 == 0 {
                o.output = None;
                o.ret = (i % 2 == 0).then(|| o.call + 300);
            }
        }
        let report = check_report(&Register, &ops, 100 * 100_000);
        assert_eq!(report.verdict, Verdict::Linearizable, "{report:?}");
        assert!(report.segments > 100, "{report:?}");
    }

    /// Checks a history kept by a partition run
    /// (`SIFTDB_PARTITION_HISTORY=FILE`): `SIFTDB_HISTORY=FILE cargo test
    /// -p siftdb-testkit --lib saved_history -- --ignored --nocapture`.
    #[test]
    #[ignore = "needs SIFTDB_HISTORY, a history file"]
    fn saved_history() {
        let Ok(path) = std::env::var("SIFTDB_HISTORY") else {
            return;
        };
        let history = parse_history(&std::fs::read_to_string(path).unwrap()).unwrap();
        println!("operations {:?}", summary(&history));
        for (key, report) in check_registers_by_key(&history, 1_000_000_000) {
            println!("key {key}: {report:?}");
            assert_eq!(report.verdict, Verdict::Linearizable);
        }
    }

    #[test]
    fn a_history_reads_back_as_written() {
        let history: Vec<KeyedOperation> = vec![
            (1, write(5, 0, 3)),
            (2, read(None, 1, 2)),
            (1, cas(Some(5), None, true, 4, 9)),
            (1, cas(None, Some(2), false, 5, 6)),
            (2, timed_out(RegisterInput::Write(Some(3)), 7)),
            (
                3,
                Operation {
                    input: RegisterInput::Cas {
                        expected: Some(1),
                        new: Some(2),
                    },
                    output: None,
                    call: 8,
                    ret: Some(10),
                },
            ),
        ];
        let text = format_history(&history);
        assert_eq!(parse_history(&text), Ok(history));
        assert!(parse_history("1 2 3 read").is_err());
        assert!(parse_history("1 2 3 write 4 written extra").is_err());
    }

    /// Values nobody observed merge into one; what could tell them apart
    /// stays apart, and anomalies stay anomalies.
    #[test]
    fn unobserved_values_merge_and_anomalies_survive() {
        let c = |expected, new| RegisterInput::Cas { expected, new };
        let mut ops = vec![
            write(1, 0, 1),
            write(2, 2, 3),
            write(3, 4, 5),
            cas(Some(4), Some(5), false, 6, 7),
            // Sets 6, read later: 7, which it expects, is observed.
            timed_out(c(Some(7), Some(6)), 8),
            timed_out(c(Some(9), Some(10)), 8),
            read(Some(6), 20, 21),
        ];
        // 1, 2, 3, 5, 9, 10 merge; 4 (a determinate CAS expected it), 6
        // (read) and 7 (an indeterminate CAS to 6 expected it) stay.
        assert_eq!(merge_unobserved_values(&mut ops), 6);
        assert_eq!(ops[0].input, RegisterInput::Write(Some(u64::MAX)));
        assert_eq!(ops[3].input, c(Some(4), Some(u64::MAX)));
        assert_eq!(ops[4].input, c(Some(7), Some(6)));
        assert_eq!(ops[5].input, c(Some(u64::MAX), Some(u64::MAX)));
        // 6 is read but only 7 leads there, and 7 was never written.
        assert_eq!(verdict(&ops), Verdict::Illegal);
        let stale = [
            write(1, 0, 1),
            write(2, 2, 3),
            write(3, 4, 5),
            read(Some(1), 6, 7),
        ];
        let lost = [write(1, 0, 1), write(2, 2, 3), read(None, 4, 5)];
        for history in [&stale[..], &lost[..]] {
            let keyed: Vec<KeyedOperation> = history.iter().map(|o| (0, o.clone())).collect();
            let reports = check_registers_by_key(&keyed, BUDGET);
            assert_eq!(reports[&0].verdict, Verdict::Illegal, "{history:?}");
        }
    }

    /// An operation with an answer but no return time is not free: its
    /// answer must still fit somewhere after its call.
    #[test]
    fn an_answer_without_a_return_time_still_counts() {
        let odd = Operation {
            input: RegisterInput::Read,
            output: Some(RegisterOutput::Read(Some(7))),
            call: 2,
            ret: None,
        };
        assert_eq!(verdict(&[write(1, 0, 1), odd.clone()]), Verdict::Illegal);
        assert_eq!(
            verdict(&[write(1, 0, 1), odd, write(7, 5, 6)]),
            Verdict::Linearizable
        );
    }
}
