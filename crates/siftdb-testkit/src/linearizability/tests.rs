//! The checker's unit tests: hand-made anomalies it must reject, histories
//! it must accept, quiet-point segmentation, indeterminate operations, and
//! agreement both ways with a brute-force enumeration of every order on
//! small random histories.
//! Must never: take long (the random histories are small; a brute force
//! over more than a few operations is out of reach).

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
                && (0..ops.len()).all(|j| placed[j] || ops[j].ret.is_none_or(|r| r >= ops[i].call));
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
