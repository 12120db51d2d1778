#![no_main]
//! Logic and invariants: `siftdb_testkit::fuzzing::db::db_ops`.

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| siftdb_testkit::fuzzing::db::db_ops(data));
