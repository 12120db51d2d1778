//! `siftdb compact`: a full compaction of a database or of one keyspace, or
//! of one keyspace's key range.
//!
//! Owns: its flags and the before/after summary it prints.
//! Must never: create a database or a keyspace (a mistyped name is an
//! error, not a new empty one).

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::Db;

use crate::point::{keyspace, open_db};
use crate::text::key_range;

/// Flags of `siftdb compact`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Flushes the memtables, then merges every table of the database (or of \
--keyspace NAME alone) into one sorted run at the deepest level in use: \
overwritten values, deletions and range-deleted keys leave the files. With \
--from/--to, only the keyspace's tables holding keys in [A, B) (and every \
table they overlap) are merged, into the deepest level among them. Prints the tables and bytes per keyspace before and after. \
Exit status: 0, or 2 on an error.")]
pub struct CompactArgs {
    /// The database directory.
    dir: PathBuf,
    /// Compact this keyspace only (with --from/--to: the default keyspace
    /// unless given).
    #[arg(long, value_name = "NAME")]
    keyspace: Option<String>,
    /// Only the tables holding keys at or after A.
    #[arg(long, value_name = "A")]
    from: Option<String>,
    /// Only the tables holding keys before B.
    #[arg(long, value_name = "B")]
    to: Option<String>,
    /// A and B are hex.
    #[arg(long)]
    hex: bool,
}

/// Runs `siftdb compact`.
pub fn run(args: &CompactArgs) -> Result<ExitCode, String> {
    let range = (args.from.is_some() || args.to.is_some())
        .then(|| key_range(args.from.as_deref(), args.to.as_deref(), args.hex))
        .transpose()?;
    let db = open_db(&args.dir, false)?;
    let before = summary(&db);
    match (&args.keyspace, range) {
        (name, Some(range)) => {
            let name = name.as_deref().unwrap_or("default");
            keyspace(&db, name, false)?
                .compact_range::<Vec<u8>, _>(range)
                .map_err(|e| format!("compacting a range of keyspace {name:?} failed: {e}"))?;
        }
        (Some(name), None) => keyspace(&db, name, false)?
            .compact()
            .map_err(|e| format!("compacting keyspace {name:?} failed: {e}"))?,
        (None, None) => db
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
