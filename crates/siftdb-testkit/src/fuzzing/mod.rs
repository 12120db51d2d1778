//! Fuzz-target logic, kept in the library so stable-Rust tests can replay
//! the corpora (`tests/fuzz_replay_*.rs`) through the very same code the
//! `cargo fuzz` targets in `fuzz/` call.
//!
//! Owns: one function per fuzz target, grouped by area.
//! Must never: panic except when the invariant it checks is violated.

pub mod db;
pub mod filter;
pub mod range_filter;
pub mod storage;
pub mod table;
