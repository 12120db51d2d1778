//! `siftdb backup`: numbered, incremental backups of a database
//! (`siftdb::backup::BackupEngine`).
//!
//! Owns: the subcommands' flags and their reports.
//! Must never: create a database at DB (a mistyped directory is an error),
//! create a backup directory but for `create`, or report a backup good
//! that `verify` found damaged (or a missing one damaged).

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::backup::BackupEngine;
use siftdb_bench::group_digits;

use crate::point::open_db;
use crate::text::print_lines;

/// Exit code when `verify` found a damaged backup.
const EXIT_DAMAGED: u8 = 1;

/// Flags of `siftdb backup`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Backups live in BACKUP_DIR: tables in shared/ (a table already backed up is \
not stored again), each backup's logs and manifest in private/ID/, its \
metadata (every file's size and CRC-32) in meta/ID. `create` opens DB \
(taking its lock) and checks every checksum of what it stores. \
Only `create` makes BACKUP_DIR; the others refuse a missing one. \
Exit status: 0, 1 when verify found damage, 2 on an error (a missing \
backup directory, or no backup ID).")]
pub struct BackupArgs {
    #[command(subcommand)]
    command: BackupCommand,
}

#[derive(clap::Subcommand, Debug)]
enum BackupCommand {
    /// Make a new backup of DB.
    Create {
        /// The database directory.
        db: PathBuf,
        /// The backup directory (created when missing).
        backup_dir: PathBuf,
    },
    /// List the backups, oldest first.
    List {
        /// The backup directory.
        backup_dir: PathBuf,
    },
    /// Check every file of a backup (all when no ID) against its checksum.
    Verify {
        /// The backup directory.
        backup_dir: PathBuf,
        /// The backup to check.
        id: Option<u64>,
    },
    /// Restore backup ID into DIR (which must not exist).
    Restore {
        /// The backup directory.
        backup_dir: PathBuf,
        /// The backup to restore.
        id: u64,
        /// The new database directory.
        dir: PathBuf,
    },
    /// Remove all but the newest KEEP backups, and the files only they needed.
    Purge {
        /// The backup directory.
        backup_dir: PathBuf,
        /// How many of the newest backups to keep.
        #[arg(long)]
        keep: usize,
    },
}

/// The backup directory `dir`, created when missing (for `create`).
fn engine(dir: &std::path::Path) -> Result<BackupEngine, String> {
    BackupEngine::open(dir).map_err(|e| format!("cannot open backups {}: {e}", dir.display()))
}

/// The backup directory `dir`, which must exist (for reading backups: a
/// mistyped directory is an error, never created).
fn existing_engine(dir: &std::path::Path) -> Result<BackupEngine, String> {
    BackupEngine::open_existing(dir)
        .map_err(|e| format!("cannot open backups {}: {e}", dir.display()))
}

/// Runs `siftdb backup`.
pub fn run(args: &BackupArgs) -> Result<ExitCode, String> {
    let mut lines = Vec::new();
    let mut code = ExitCode::SUCCESS;
    match &args.command {
        BackupCommand::Create { db, backup_dir } => {
            let engine = engine(backup_dir)?;
            let db = open_db(db, false)?;
            let info = engine
                .create(&db)
                .map_err(|e| format!("backup failed: {e}"))?;
            db.close()
                .map_err(|e| format!("closing the database: {e}"))?;
            lines.push(format!(
                "backup {} at sequence {}: {} files, {} bytes ({} new)",
                info.id,
                info.sequence,
                info.files.len(),
                group_digits(info.size()),
                group_digits(info.new_bytes)
            ));
        }
        BackupCommand::List { backup_dir } => {
            for info in existing_engine(backup_dir)?
                .list()
                .map_err(|e| e.to_string())?
            {
                lines.push(format!(
                    "{}\tsequence {}\tcreated {}\t{} files\t{} bytes\t{} new",
                    info.id,
                    info.sequence,
                    info.created_unix_secs,
                    info.files.len(),
                    group_digits(info.size()),
                    group_digits(info.new_bytes)
                ));
            }
        }
        BackupCommand::Verify { backup_dir, id } => {
            let engine = existing_engine(backup_dir)?;
            let ids = match id {
                // No such backup is an error of the request, not damage.
                Some(id) if !engine.exists(*id) => {
                    return Err(format!("no backup {id} in {}", backup_dir.display()));
                }
                Some(id) => vec![*id],
                None => engine
                    .list()
                    .map_err(|e| e.to_string())?
                    .iter()
                    .map(|b| b.id)
                    .collect(),
            };
            for id in ids {
                match engine.verify(id) {
                    Ok(info) => lines.push(format!("backup {id}: ok ({} files)", info.files.len())),
                    Err(e) => {
                        lines.push(format!("backup {id}: DAMAGED: {e}"));
                        code = ExitCode::from(EXIT_DAMAGED);
                    }
                }
            }
        }
        BackupCommand::Restore {
            backup_dir,
            id,
            dir,
        } => {
            let info = existing_engine(backup_dir)?
                .restore(*id, dir)
                .map_err(|e| format!("restore failed: {e}"))?;
            lines.push(format!(
                "restored backup {id} (sequence {}) into {}",
                info.sequence,
                dir.display()
            ));
        }
        BackupCommand::Purge { backup_dir, keep } => {
            let gone = existing_engine(backup_dir)?
                .purge_old(*keep)
                .map_err(|e| format!("purge failed: {e}"))?;
            lines.push(format!("removed {} backups {gone:?}", gone.len()));
        }
    }
    print_lines(&lines)?;
    Ok(code)
}
