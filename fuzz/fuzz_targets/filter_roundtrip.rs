#![no_main]
//! Fuzz target `filter_roundtrip`: the logic is `siftdb_testkit::fuzzing::filter::filter_roundtrip`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_testkit::fuzzing::filter::filter_roundtrip(data);
});
