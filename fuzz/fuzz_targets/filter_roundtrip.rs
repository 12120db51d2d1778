#![no_main]
//! Fuzz target `filter_roundtrip`: the logic is `siftdb::fuzzing::filter::filter_roundtrip`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb::fuzzing::filter::filter_roundtrip(data);
});
