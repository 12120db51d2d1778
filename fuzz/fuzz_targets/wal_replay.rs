#![no_main]
//! Logic and invariants: `siftdb::fuzzing::storage::wal_replay`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| siftdb::fuzzing::storage::wal_replay(data));
