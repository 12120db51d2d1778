//! Fuzz-target logic, kept in the library so stable-Rust tests can replay
//! the corpora (`tests/fuzz_replay_*.rs`) through the very same code the
//! `cargo fuzz` targets in `fuzz/` call.
//!
//! Owns: one function per fuzz target, grouped by area.
//! Must never: panic except when the invariant it checks is violated.

pub mod backup_meta;
pub mod blob;
pub mod db;
pub mod filter;
pub mod fuse;
pub mod range_filter;
pub mod range_tombstone;
pub mod replay;
pub mod storage;
pub mod table;

/// `data` with its last four bytes replaced by the crc32 (IEEE) of the rest;
/// `None` when it is shorter than four bytes. A fuzzer cannot forge a
/// checksum, so the targets try each input this way too, to reach the
/// checks that come after one.
pub fn with_checksum_fixed(data: &[u8]) -> Option<Vec<u8>> {
    let body_len = data.len().checked_sub(4)?;
    let body = data.get(..body_len)?;
    let mut fixed = body.to_vec();
    fixed.extend_from_slice(&siftdb::internals::codec::crc32_of(&[body]).to_le_bytes());
    Some(fixed)
}
