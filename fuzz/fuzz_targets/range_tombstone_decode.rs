#![no_main]
//! Fuzz target `range_tombstone_decode`: the logic is `siftdb_testkit::fuzzing::range_tombstone::range_tombstone_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_testkit::fuzzing::range_tombstone::range_tombstone_decode(data);
});
