#![no_main]
//! Fuzz target `filter_decode`: the logic is `siftdb::fuzzing::filter::filter_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb::fuzzing::filter::filter_decode(data);
});
