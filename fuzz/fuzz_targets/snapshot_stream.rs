#![no_main]
//! Fuzz target `snapshot_stream`: the logic is `siftdb_raft::fuzzing::snapshot_stream`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_raft::fuzzing::snapshot_stream(data);
});
