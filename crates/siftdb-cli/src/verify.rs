//! `siftdb verify`: every checksum of every live file of a database
//! directory, read without opening the database.
//!
//! Owns: the verify flags, the report's text and the exit status.
//! Must never: write to the directory or take its lock — the checks are
//! `siftdb::internals::inspect::verify_dir`, which only reads.

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::internals::inspect::verify_dir;
use siftdb_bench::group_digits;

use crate::text::print_lines;

/// Exit code when verify found an error.
const EXIT_DAMAGED: u8 = 1;

/// Flags of `siftdb verify`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Reads every block of every live file (manifest, tables, logs) and checks \
every checksum; prints one line per problem with the file, the block and \
the offset. Does not take the database lock and writes nothing: it can run \
on a closed database, or beside an open one — where it may see a log in the \
middle of an append (reported as a torn tail) or a table a compaction has \
just removed. Run it on a closed database for a definitive answer.\n\
Exit status: 0 when there is no error (warnings — a damaged filter, a torn \
log tail — are printed but reads survive them), 1 when there is an error, \
2 when DIR could not be verified at all.")]
pub struct VerifyArgs {
    /// The database directory.
    dir: PathBuf,
}

fn plural(n: u64, one: &str) -> String {
    format!("{} {one}{}", group_digits(n), if n == 1 { "" } else { "s" })
}

/// Runs `siftdb verify`.
pub fn run(args: &VerifyArgs) -> Result<ExitCode, String> {
    let report =
        verify_dir(&args.dir).map_err(|e| format!("cannot verify {}: {e}", args.dir.display()))?;
    let mut lines = Vec::new();
    lines.push(format!(
        "checked {}: {} ({}), {} ({})",
        report.dir.display(),
        plural(report.tables_checked as u64, "table"),
        plural(report.data_blocks_checked, "data block"),
        plural(report.logs_checked as u64, "log"),
        plural(report.log_records_checked, "record"),
    ));
    lines.extend(report.problems.iter().map(|p| p.to_string()));
    lines.extend(report.notes.iter().map(|n| format!("note: {n}")));
    let (errors, warnings) = (
        report.errors().count() as u64,
        report.warnings().count() as u64,
    );
    lines.push(if errors == 0 && warnings == 0 {
        "ok: no problem found".to_string()
    } else if errors == 0 {
        format!("ok: {}, reads are correct", plural(warnings, "warning"))
    } else {
        format!(
            "damaged: {}, {}",
            plural(errors, "error"),
            plural(warnings, "warning")
        )
    });
    print_lines(&lines)?;
    Ok(if errors == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(EXIT_DAMAGED)
    })
}
