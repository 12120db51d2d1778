//! A linearizability checker for histories of concurrent operations, with
//! a register / compare-and-swap model on many keys.
//!
//! The algorithm is the one Porcupine implements: Wing and Gong's search
//! for a sequential order consistent with real time, with Lowe's
//! memoization of every (set of linearized operations, model state) pair
//! already explored, on each key's sub-history separately (a history of
//! independent keys is linearizable iff each key's is: Horn and Kroening's
//! P-compositionality). Written from the papers' description, not from
//! Porcupine's code.
//!
//! The search walks a list of call and return events in time order. At a
//! call it tries to linearize that operation now: the model must accept
//! its input and recorded output in the current state, and the pair (set
//! with it, new state) must not have been explored; then the operation's
//! two events leave the list and the walk restarts at the head. At a
//! return whose operation is not yet linearized, some operation linearized
//! earlier must move: the last one is undone (its events back in the list)
//! and the walk goes on after its call. The history is linearizable when
//! the list empties, not when nothing is left to undo.
//!
//! An indeterminate operation (a timeout: it may or may not have taken
//! effect) has no recorded output and returns at the end of time: it may be
//! linearized anywhere after its call, and since it constrains nothing
//! after it, placing it last is the same as its never having happened.
//!
//! Owns: [`Model`], [`Operation`], [`check`], [`Register`] and
//! [`check_registers`].
//! Must never: accept a history that has no linearization (the unit tests
//! hold hand-made anomalies it must reject); run without bound (a search
//! past its step budget answers [`Verdict::Unknown`]).

use std::collections::{BTreeMap, HashMap, HashSet};
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
    /// had no effect); empty when it could not have answered so.
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
    op: usize,
    is_call: bool,
    /// Index of the matching event (a call's return, a return's call).
    matching: usize,
    prev: Option<usize>,
    next: Option<usize>,
}

/// The search list: events in time order, doubly linked, with a head
/// sentinel at index 0 so lifting and unlifting need no special case.
struct Events {
    nodes: Vec<Event>,
}

const HEAD: usize = 0;

impl Events {
    fn new<I, O>(ops: &[Operation<I, O>]) -> Events {
        // (time, calls before returns at equal times: touching operations
        // count as concurrent, the permissive reading), op, is_call.
        let mut order: Vec<(u64, u8, usize, bool)> = Vec::with_capacity(ops.len() * 2);
        for (i, op) in ops.iter().enumerate() {
            order.push((op.call, 0, i, true));
            order.push((op.ret.unwrap_or(u64::MAX), 1, i, false));
        }
        order.sort_unstable();
        let mut nodes = Vec::with_capacity(order.len() + 1);
        nodes.push(Event {
            op: usize::MAX,
            is_call: false,
            matching: 0,
            prev: None,
            next: None,
        });
        let mut call_at = vec![0usize; ops.len()];
        let mut ret_at = vec![0usize; ops.len()];
        for (position, &(_, _, op, is_call)) in order.iter().enumerate() {
            let at = position + 1;
            if let Some(slot) = if is_call { &mut call_at } else { &mut ret_at }.get_mut(op) {
                *slot = at;
            }
            nodes.push(Event {
                op,
                is_call,
                matching: 0,
                prev: Some(at - 1),
                next: (at < order.len()).then_some(at + 1),
            });
        }
        if let Some(head) = nodes.get_mut(HEAD) {
            head.next = (!order.is_empty()).then_some(1);
        }
        for node in nodes.iter_mut().skip(1) {
            node.matching = if node.is_call {
                ret_at.get(node.op).copied().unwrap_or(0)
            } else {
                call_at.get(node.op).copied().unwrap_or(0)
            };
        }
        Events { nodes }
    }

    fn get(&self, at: usize) -> Event {
        self.nodes.get(at).copied().unwrap_or(Event {
            op: usize::MAX,
            is_call: false,
            matching: 0,
            prev: None,
            next: None,
        })
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
        self.lift_one(ret);
    }

    /// Puts call `at` and its return back (in the reverse order of
    /// [`Events::lift`]).
    fn unlift(&mut self, at: usize) {
        let ret = self.get(at).matching;
        self.unlift_one(ret);
        self.unlift_one(at);
    }
}

/// A set of operation indexes as bits (the memo's key).
#[derive(Clone, PartialEq, Eq, Hash)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize) -> Bits {
        Bits(vec![0; n.div_ceil(64)])
    }

    fn flip(&mut self, i: usize) {
        if let Some(word) = self.0.get_mut(i / 64) {
            *word ^= 1 << (i % 64);
        }
    }
}

/// Whether `ops` (one object's history) is linearizable under `model`,
/// searching at most `budget` steps.
pub fn check<M: Model>(model: &M, ops: &[Operation<M::Input, M::Output>], budget: u64) -> Verdict {
    let mut events = Events::new(ops);
    let mut linearized = Bits::new(ops.len());
    let mut seen: HashSet<(Bits, M::State)> = HashSet::new();
    // (call event, state before it) of each linearized operation.
    let mut stack: Vec<(usize, M::State)> = Vec::new();
    let mut state = model.init();
    let mut at = events.get(HEAD).next;
    let mut steps = 0u64;
    while let Some(here) = at {
        steps += 1;
        if steps > budget {
            return Verdict::Unknown;
        }
        let e = events.get(here);
        let op = ops.get(e.op);
        if e.is_call {
            let candidates = op.map_or_else(Vec::new, |op| {
                model.step(&state, &op.input, op.output.as_ref())
            });
            let mut with = linearized.clone();
            with.flip(e.op);
            // The first outcome not explored yet with this set (after a
            // backtrack to this call, the next one).
            let fresh = candidates
                .into_iter()
                .find(|next| !seen.contains(&(with.clone(), next.clone())));
            if let Some(next_state) = fresh {
                seen.insert((with.clone(), next_state.clone()));
                stack.push((here, std::mem::replace(&mut state, next_state)));
                linearized = with;
                events.lift(here);
                at = events.get(HEAD).next;
                continue;
            }
            at = e.next;
        } else {
            // A return before its call was linearized: undo the last
            // choice and try what follows it.
            let Some((call, before)) = stack.pop() else {
                return Verdict::Illegal;
            };
            state = before;
            linearized.flip(events.get(call).op);
            events.unlift(call);
            // The same call again: its other outcomes, then what follows.
            at = Some(call);
        }
    }
    Verdict::Linearizable
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

/// A register operation on a key.
pub type KeyedOperation = (u64, Operation<RegisterInput, RegisterOutput>);

/// Checks a history of register operations on many keys, each key's
/// sub-history on its own; the first key that is not linearizable (or
/// whose search ran out of `budget`) and the verdict.
pub fn check_registers(ops: &[KeyedOperation], budget: u64) -> (Verdict, Option<u64>) {
    let mut by_key: BTreeMap<u64, Vec<Operation<RegisterInput, RegisterOutput>>> = BTreeMap::new();
    for (key, op) in ops {
        by_key.entry(*key).or_default().push(op.clone());
    }
    let mut unknown = None;
    for (key, history) in &by_key {
        match check(&Register, history, budget) {
            Verdict::Linearizable => {}
            Verdict::Illegal => return (Verdict::Illegal, Some(*key)),
            Verdict::Unknown => unknown = unknown.or(Some(*key)),
        }
    }
    match unknown {
        Some(key) => (Verdict::Unknown, Some(key)),
        None => (Verdict::Linearizable, None),
    }
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
}
