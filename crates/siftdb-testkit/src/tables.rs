//! Table files for tests: built from sorted entries in one call.
//!
//! Owns: [`build_table`] and [`bench_key`], shared by the table tests.
//! Must never: hide a builder error — a table that cannot be built is a
//! failed test, so these helpers panic with the error.

use std::path::{Path, PathBuf};

use siftdb::internals::fs::OsFileSystem;
use siftdb::internals::table::{TableBuilder, TableInfo, TableOptions};

/// Builds a table of sorted `(internal key, value)` entries at `dir/name`;
/// panics (failing the test) if the builder refuses them.
pub fn build_table(
    dir: &Path,
    name: &str,
    options: &TableOptions,
    entries: &[(Vec<u8>, Vec<u8>)],
) -> (PathBuf, TableInfo) {
    let path = dir.join(name);
    let built = (|| {
        let mut builder = TableBuilder::create(&OsFileSystem, &path, options)?;
        for (key, value) in entries {
            builder.add(key, value)?;
        }
        builder.finish()
    })();
    match built {
        Ok(info) => (path, info),
        Err(e) => fail(&path, &e),
    }
}

#[expect(
    clippy::panic,
    reason = "a test helper: failing to build is a failed test"
)]
fn fail(path: &Path, error: &siftdb::Error) -> ! {
    panic!("building {}: {error}", path.display())
}

/// The workload key: `k` and 15 digits.
pub fn bench_key(j: u64) -> Vec<u8> {
    format!("k{j:015}").into_bytes()
}
