#![no_main]
//! Fuzz target `backup_meta_decode`: the logic is `siftdb_testkit::fuzzing::backup_meta::backup_meta_decode`.

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    siftdb_testkit::fuzzing::backup_meta::backup_meta_decode(data);
});
