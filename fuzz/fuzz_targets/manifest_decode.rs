#![no_main]
//! Logic and invariants: `siftdb_testkit::fuzzing::storage::manifest_decode`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| siftdb_testkit::fuzzing::storage::manifest_decode(data));
