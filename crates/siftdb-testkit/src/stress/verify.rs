//! The offline check a stress run makes of the closed database each round.
//!
//! Owns: [`verify_database`], which runs the `siftdb verify` logic
//! ([`siftdb::internals::inspect::verify_dir`]).
//! Must never: modify the database.

use std::path::Path;

use siftdb::internals::inspect::verify_dir;

/// Checks the closed database at `dir` with `siftdb verify`'s logic: every
/// checksum of every live file. Errors fail the round; warnings (a torn log
/// tail a kill may leave) are allowed.
pub fn verify_database(dir: &Path) -> Result<(), String> {
    let report = verify_dir(dir).map_err(|e| format!("verify: {e}"))?;
    let first_error = report.errors().next().map(|p| format!("verify: {p}"));
    first_error.map_or(Ok(()), Err)
}
