#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| siftdb_testkit::fuzzing::table::block_decompress(data));
