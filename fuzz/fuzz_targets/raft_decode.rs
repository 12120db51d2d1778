#![no_main]
//! Fuzz target `raft_decode`: the logic is `siftdb_raft::fuzzing::raft_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_raft::fuzzing::raft_decode(data);
});
