//! `siftdb checkpoint`: an openable copy of a database at one sequence
//! number (`Db::checkpoint`).
//!
//! Owns: the command's flags and its one-line report.
//! Must never: create a database at DB (a mistyped directory is an error)
//! or write into an existing DIR.

use std::path::PathBuf;
use std::process::ExitCode;

use crate::point::open_db;
use crate::text::print_lines;

/// Flags of `siftdb checkpoint`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Opens DB (taking its lock: not beside another process that has it open; \
an application calls Db::checkpoint itself) and writes DIR, which must not \
exist: tables hard-linked when DIR is on the same file system, copied \
otherwise. DIR appears whole or not at all (it is written as \
DIR.checkpoint-tmp and renamed). Exit status: 0, or 2 on an error.")]
pub struct CheckpointArgs {
    /// The database directory.
    db: PathBuf,
    /// Where the checkpoint goes (must not exist).
    dir: PathBuf,
}

/// Runs `siftdb checkpoint`.
pub fn run(args: &CheckpointArgs) -> Result<ExitCode, String> {
    let db = open_db(&args.db, false)?;
    let info = db
        .checkpoint(&args.dir)
        .map_err(|e| format!("checkpoint failed: {e}"))?;
    db.close()
        .map_err(|e| format!("closing {}: {e}", args.db.display()))?;
    print_lines(&[format!(
        "checkpoint {} at sequence {}: {} tables ({} hard-linked), {} logs, {} bytes copied",
        info.dir.display(),
        info.sequence,
        info.tables,
        info.tables_linked,
        info.logs,
        info.bytes_copied
    )])?;
    Ok(ExitCode::SUCCESS)
}
