//! A linearizability checker for histories of concurrent operations, with
//! a register / compare-and-swap model on many keys.
//!
//! The search (Wing and Gong's, with Lowe's memo, per key, cut at quiet
//! points, and why it is sound) is in `linearizability/search.rs`; this
//! module is its face and the register model the tests use it with.
//!
//! **Registers.** [`check_registers`] checks each key on its own, after
//! [`merge_unobserved_values`]: values no read or compare-and-swap could
//! tell apart become one (an exact rewrite, argued on that function),
//! which keeps the states few when many timed-out writes overlap.
//!
//! Owns: [`Register`] and [`check_registers`], the merge of unobserved
//! values, a text form of register histories ([`format_history`],
//! [`parse_history`]); re-exports the search's [`Model`], [`Operation`],
//! [`check`] and [`check_report`].
//! Must never: accept a history that has no linearization; run without
//! bound (a search past its step budget answers [`Verdict::Unknown`]).

mod search;
#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, HashMap, HashSet};

pub use search::{check, check_report, Model, Operation, Report, Verdict};

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
