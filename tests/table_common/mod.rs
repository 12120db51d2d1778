//! Helpers shared by the table integration tests.
#![allow(dead_code)]

use std::path::{Path, PathBuf};

use siftdb::fs::OsFileSystem;
use siftdb::table::{TableBuilder, TableInfo, TableOptions};

/// A small deterministic generator (splitmix64).
pub struct SplitMix64(pub u64);

impl SplitMix64 {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    pub fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next() as u8).collect()
    }
}

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
