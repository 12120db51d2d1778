#![no_main]
//! Fuzz target `range_filter_decode`: the logic is `siftdb_testkit::fuzzing::range_filter::range_filter_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_testkit::fuzzing::range_filter::range_filter_decode(data);
});
