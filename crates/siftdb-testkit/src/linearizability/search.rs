//! The search of the linearizability checker: does a sequential order
//! of one object's operations exist that respects real time and the
//! model?
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
//! Owns: [`Model`], [`Operation`], [`Verdict`], [`Report`], [`check`] and
//! [`check_report`], the cutting of a history at quiet points and the
//! resumable search of each segment.
//! Must never: accept a history that has no linearization; run without
//! bound (a search past its step budget answers [`Verdict::Unknown`]);
//! know any particular model (those are the caller's, e.g. the register
//! one level up).

use std::collections::{BTreeSet, HashMap};
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
