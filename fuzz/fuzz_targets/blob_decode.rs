#![no_main]
//! Fuzz target `blob_decode`: the logic is `siftdb_testkit::fuzzing::blob::blob_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_testkit::fuzzing::blob::blob_decode(data);
});
