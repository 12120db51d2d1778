#![no_main]
//! Fuzz target `fuse_decode`: the logic is `siftdb_testkit::fuzzing::fuse::fuse_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_testkit::fuzzing::fuse::fuse_decode(data);
});
