#![no_main]
//! Logic and invariants: `siftdb::fuzzing::storage::manifest_decode`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| siftdb::fuzzing::storage::manifest_decode(data));
