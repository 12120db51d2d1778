//! Replays the `db_ops` fuzz target on stable Rust: every file of
//! `fuzz/corpus/db_ops/`, then seeded random inputs — random bytes, and
//! well-formed op sequences, mostly writes, with a crash armed in one of four.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use siftdb_testkit::SplitMix64;
use std::path::Path;

use siftdb_testkit::fuzzing::db::db_ops;

const GENERATED_INPUTS: usize = 400;

/// Appends one write operand group (kind, key, and a value unless a
/// delete; one in eight a range delete: kind, then two bounds).
fn write_op(rng: &mut SplitMix64, out: &mut Vec<u8>) {
    if rng.next().is_multiple_of(8) {
        out.push(16 + 32 * (rng.byte() % 8));
        out.extend([rng.byte(), rng.byte(), rng.byte(), rng.byte()]);
        return;
    }
    let kind = rng.byte();
    out.push(kind);
    if kind % 32 == 16 {
        out.extend([rng.byte(), rng.byte(), rng.byte(), rng.byte()]);
        return;
    }
    out.push(rng.byte());
    if !kind.is_multiple_of(4) {
        out.push(rng.byte());
    }
}

/// Appends one well-formed op, mostly writes; a crash only if `crashes`.
fn op(rng: &mut SplitMix64, out: &mut Vec<u8>, crashes: bool) {
    match rng.next() % 100 {
        0..=54 => {
            let opcode = (rng.next() % 3) as u8;
            out.push(opcode);
            if opcode == 2 {
                let n = rng.byte();
                out.push(n);
                for _ in 0..1 + n % 6 {
                    write_op(rng, out);
                }
            } else {
                write_op(rng, out);
            }
        }
        55..=64 => out.extend([3, rng.byte()]),
        65..=72 => out.extend([4, rng.byte(), rng.byte(), rng.byte(), rng.byte()]),
        73..=79 => out.push(5),
        80..=84 => out.push(6),
        85..=88 => out.push(7),
        89..=95 => {
            out.push(8);
            write_op(rng, out);
            write_op(rng, out);
            out.push(rng.byte());
        }
        _ if crashes => {
            out.extend([9, rng.byte(), rng.byte()]);
            // An odd byte arms a crash of the recovery too (two more bytes).
            let recovery = rng.byte();
            out.push(recovery);
            if recovery % 2 == 1 {
                out.extend([rng.byte(), rng.byte()]);
            }
        }
        _ => out.extend([3, rng.byte()]),
    }
}

#[test]
fn corpus_inputs_pass() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/corpus/db_ops");
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|entry| entry.unwrap().path())
        .collect();
    files.sort();
    assert!(!files.is_empty(), "the db_ops corpus is empty");
    for file in files {
        let data = std::fs::read(&file).unwrap();
        println!("{}", file.display());
        db_ops(&data);
    }
}

#[test]
fn generated_inputs_pass() {
    let mut rng = SplitMix64::new(0xdb_0b5);
    for i in 0..GENERATED_INPUTS {
        let len = 8 + (rng.next() % 400) as usize;
        let data: Vec<u8> = if i % 3 == 0 {
            (0..len).map(|_| rng.byte()).collect()
        } else {
            let crashes = i % 4 == 1;
            let mut out = vec![rng.byte()];
            while out.len() < len {
                op(&mut rng, &mut out, crashes);
            }
            out
        };
        db_ops(&data);
    }
}
