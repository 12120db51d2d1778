//! Fuzz-target logic, kept in the library so the same functions run under
//! libFuzzer (`fuzz/`) and in the stable replay tests (`tests/fuzz_replay_*.rs`).
//!
//! Owns: one `pub fn <target>(data: &[u8])` per fuzz target.
//! Must never: panic except when an invariant of the code under test is
//! violated — a panic here is a finding.

pub mod filter;
