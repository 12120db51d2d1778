//! `siftdb compact`: a full compaction of a database, or of one keyspace.
//!
//! Owns: its flags and the before/after summary it prints.
//! Must never: create a database or a keyspace (a mistyped name is an
//! error, not a new empty one).

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::Db;

use crate::point::{keyspace, open_db};

/// Flags of `siftdb compact`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Flushes the memtables, then merges every table of the database (or of \
--keyspace NAME alone) into one sorted run at the deepest level in use: \
overwritten values, deletions and range-deleted keys leave the files. \
Prints the tables and bytes per keyspace before and after. \
Exit status: 0, or 2 on an error.")]
pub struct CompactArgs {
    /// The database directory.
    dir: PathBuf,
    /// Compact this keyspace only.
    #[arg(long, value_name = "NAME")]
    keyspace: Option<String>,
}

/// Runs `siftdb compact`.
pub fn run(args: &CompactArgs) -> Result<ExitCode, String> {
    let db = open_db(&args.dir, false)?;
    let before = summary(&db);
    match &args.keyspace {
        Some(name) => keyspace(&db, name, false)?
            .compact()
            .map_err(|e| format!("compacting keyspace {name:?} failed: {e}"))?,
        None => db
            .compact()
            .map_err(|e| format!("compaction failed: {e}"))?,
    }
    let after = summary(&db);
    for ((name, tables, bytes), (_, tables_after, bytes_after)) in before.iter().zip(&after) {
        println!(
            "{name}: {tables} tables, {bytes} bytes -> {tables_after} tables, {bytes_after} bytes"
        );
    }
    db.close().map_err(|e| format!("close failed: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// (keyspace, live tables, bytes of live tables) per keyspace.
fn summary(db: &Db) -> Vec<(String, usize, u64)> {
    db.stats()
        .keyspaces
        .iter()
        .map(|k| (k.name.clone(), k.table_count, k.level_bytes.iter().sum()))
        .collect()
}
