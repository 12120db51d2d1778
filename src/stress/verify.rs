//! The offline check a stress run makes of the closed database each round.
//!
//! Owns: [`verify_database`], the one place to switch to the `siftdb
//! verify` logic once it is in the library.
//! Must never: modify the database.

use std::path::Path;

use crate::filename::table_file_name;
use crate::fs::OsFileSystem;
use crate::manifest::read_manifest;
use crate::table::Table;

/// Checks the closed database at `dir`: the manifest decodes, and every
/// table it names exists with the recorded size and verifies without a
/// single problem (warnings included: nothing here was damaged on purpose).
pub fn verify_database(dir: &Path) -> Result<(), String> {
    let state = read_manifest(&OsFileSystem, dir)
        .map_err(|e| format!("manifest: {e}"))?
        .ok_or_else(|| format!("{} has no manifest", dir.display()))?;
    for record in &state.tables {
        let path = dir.join(table_file_name(record.file_number));
        let table = Table::open_path(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        if table.file_size() != record.file_size {
            return Err(format!(
                "{}: {} bytes, the manifest says {}",
                path.display(),
                table.file_size(),
                record.file_size
            ));
        }
        if let Some(problem) = table.verify().first() {
            return Err(format!(
                "{}: {:?} block at {}: {}",
                path.display(),
                problem.block,
                problem.offset,
                problem.detail
            ));
        }
    }
    Ok(())
}
