//! Helpers shared by the table integration tests.
#![allow(dead_code)]

#[allow(unused_imports)] // not every test binary that includes this module draws numbers
pub use siftdb_testkit::SplitMix64;
use std::path::{Path, PathBuf};

use siftdb::fs::OsFileSystem;
use siftdb::table::{TableBuilder, TableInfo, TableOptions};

/// Builds a table of sorted `(internal key, value)` entries at `dir/name`.
pub fn build_table(
    dir: &Path,
    name: &str,
    options: &TableOptions,
    entries: &[(Vec<u8>, Vec<u8>)],
) -> (PathBuf, TableInfo) {
    let path = dir.join(name);
    let mut builder = TableBuilder::create(&OsFileSystem, &path, options).unwrap();
    for (key, value) in entries {
        builder.add(key, value).unwrap();
    }
    (path.clone(), builder.finish().unwrap())
}

/// The workload key: `k` and 15 digits.
pub fn bench_key(j: u64) -> Vec<u8> {
    format!("k{j:015}").into_bytes()
}
