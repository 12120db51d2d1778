#![no_main]
//! Fuzz target `filter_decode`: the logic is `siftdb_testkit::fuzzing::filter::filter_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_testkit::fuzzing::filter::filter_decode(data);
});
