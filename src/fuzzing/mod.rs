//! The logic of every fuzz target, in the library so that ordinary tests can
//! replay the fuzz corpus on stable Rust (`tests/fuzz_replay_*.rs`).
//!
//! Owns: one `pub fn <target>(data: &[u8])` per fuzz target.
//! Must never: panic except when an invariant of the code under test is
//! violated — a panic here is a finding.

pub mod table;
