//! Stable-Rust replay of a fuzz target: its committed corpus, then seeded
//! mutations of it (random bytes, byte flips, truncations, insertions and
//! splices of one seed into another), for the `tests/fuzz_replay_*.rs`
//! tests of decoders that take one byte string.
//!
//! Owns: finding a target's corpus, the mutation mix, the replay loop.
//! Must never: pass an input that panicked — the panic names the input.
#![expect(
    clippy::panic,
    reason = "a replay reports a failing input by panicking, as the test it runs in expects"
)]

use std::panic::catch_unwind;
use std::path::{Path, PathBuf};

use crate::SplitMix64;

/// `fuzz/corpus/<target>` of the workspace.
pub fn corpus_dir(target: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fuzz/corpus")
        .join(target)
}

/// Every file of `target`'s corpus, in name order.
///
/// # Panics
/// When the directory cannot be read or is empty: a replay without its
/// corpus would test nothing it claims to.
pub fn read_corpus(target: &str) -> Vec<(PathBuf, Vec<u8>)> {
    let dir = corpus_dir(target);
    let mut files: Vec<PathBuf> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries.filter_map(|e| e.ok().map(|e| e.path())).collect(),
        Err(e) => panic!("{}: {e}", dir.display()),
    };
    files.sort();
    assert!(!files.is_empty(), "{} is empty", dir.display());
    files
        .into_iter()
        .map(|path| match std::fs::read(&path) {
            Ok(bytes) => (path, bytes),
            Err(e) => panic!("{}: {e}", path.display()),
        })
        .collect()
}

/// One generated input: a quarter are random bytes (up to 300), the rest
/// one to four mutations of a seed.
pub fn mutate(rng: &mut SplitMix64, seeds: &[Vec<u8>]) -> Vec<u8> {
    let random = |rng: &mut SplitMix64, max: usize| -> Vec<u8> {
        let len = rng.index(max);
        (0..len).map(|_| rng.next().to_le_bytes()[0]).collect()
    };
    if seeds.is_empty() || rng.index(4) == 0 {
        return random(rng, 300);
    }
    let mut input = seeds
        .get(rng.index(seeds.len()))
        .cloned()
        .unwrap_or_default();
    for _ in 0..=rng.index(3) {
        match rng.index(5) {
            0 => {
                let i = rng.index(input.len());
                let flip = rng.next().to_le_bytes()[0].max(1);
                if let Some(byte) = input.get_mut(i) {
                    *byte ^= flip;
                }
            }
            1 => input.truncate(rng.index(input.len() + 1)),
            2 => {
                let i = rng.index(input.len() + 1);
                let n = rng.index(8) + 1;
                let byte = if rng.index(2) == 0 {
                    0
                } else {
                    rng.next().to_le_bytes()[0]
                };
                input.splice(i..i, std::iter::repeat_n(byte, n));
            }
            3 => {
                let other = seeds
                    .get(rng.index(seeds.len()))
                    .map_or(&[][..], Vec::as_slice);
                let from = rng.index(other.len() + 1);
                let to = from + rng.index(other.len() - from + 1);
                let at = rng.index(input.len() + 1);
                input.splice(at..at, other.get(from..to).unwrap_or(&[]).iter().copied());
            }
            _ => input = random(rng, 40),
        }
    }
    input
}

/// Runs `check` on every corpus file of `target`, then on `generated`
/// mutations drawn from `seed`.
///
/// # Panics
/// When `check` panics on an input (the file or the bytes are named), or
/// when the corpus is missing.
pub fn replay(target: &str, check: fn(&[u8]), seed: u64, generated: usize) {
    let corpus = read_corpus(target);
    for (path, bytes) in &corpus {
        if catch_unwind(|| check(bytes)).is_err() {
            panic!("{target} fails on {}", path.display());
        }
    }
    let seeds: Vec<Vec<u8>> = corpus.into_iter().map(|(_, bytes)| bytes).collect();
    let mut rng = SplitMix64::new(seed);
    for _ in 0..generated {
        let input = mutate(&mut rng, &seeds);
        if catch_unwind(|| check(&input)).is_err() {
            panic!("{target} fails on {input:?}");
        }
    }
}
