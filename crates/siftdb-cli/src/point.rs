//! `siftdb get`, `siftdb put` and `siftdb delete`: one key at a time, for
//! manual use.
//!
//! Owns: their flags, and opening the database for a command
//! ([`open_db`] to write, [`open_for_reading`] for `get` and `scan`).
//! Must never: create a database for a command that only reads or deletes —
//! a mistyped directory is an error, not a new empty database.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use siftdb::internals::filename::MANIFEST_FILE;
use siftdb::{Db, Keyspace, Options};

use crate::text::{parse_arg, print_lines, show};

/// Exit code of `get` when the key is absent.
const EXIT_NOT_FOUND: u8 = 1;

/// Flags of `siftdb get`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Prints the value (lossy UTF-8 with control characters escaped as scan \
does, or hex with --hex) and a newline. Opens the database read-only: \
writes nothing, takes no lock, works beside a process writing to it and \
without write permission. \
Exit status: 0 when found, 1 when absent, 2 on an error.")]
pub struct GetArgs {
    /// The database directory.
    dir: PathBuf,
    /// The key.
    key: String,
    /// KEY is hex, and the value is printed as hex.
    #[arg(long)]
    hex: bool,
    /// The keyspace to read.
    #[arg(long, value_name = "NAME", default_value = "default")]
    keyspace: String,
}

/// Flags of `siftdb put`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Creates the database when DIR has none. Exit status: 0, or 2 on an error.")]
pub struct PutArgs {
    /// The database directory.
    dir: PathBuf,
    /// The key.
    key: String,
    /// The value.
    value: String,
    /// KEY and VALUE are hex.
    #[arg(long)]
    hex: bool,
    /// The keyspace to write (created when missing).
    #[arg(long, value_name = "NAME", default_value = "default")]
    keyspace: String,
}

/// Flags of `siftdb delete`.
#[derive(clap::Args, Debug)]
#[command(after_help = "Deleting an absent key is not an error. Exit status: 0, or 2 on an error.")]
pub struct DeleteArgs {
    /// The database directory.
    dir: PathBuf,
    /// The key.
    key: String,
    /// KEY is hex.
    #[arg(long)]
    hex: bool,
    /// The keyspace to delete from.
    #[arg(long, value_name = "NAME", default_value = "default")]
    keyspace: String,
}

/// Opens the database in `dir` (taking its lock and recovering, like any
/// open). Unless `create`, a directory without a manifest is refused. A log
/// the recovery found cut short after a clean close is a loss this open
/// is the only one to see (it moves the database past that log): it is
/// printed as a warning on stderr, as are a manifest read from its copy
/// and a log whose header or close record was mended.
pub fn open_db(dir: &Path, create: bool) -> Result<Db, String> {
    let opts = Options::default().create_if_missing(create);
    let db = Db::open_with(dir, opts).map_err(|e| match e {
        siftdb::Error::NotADatabase { .. } if !create => format!(
            "{} is not a siftdb database (it has no {MANIFEST_FILE})",
            dir.display()
        ),
        e => format!("cannot open {}: {e}", dir.display()),
    })?;
    let report = db.recovery_report();
    if let Some((file, _, what)) = &report.log_cut_short {
        eprintln!("siftdb: warning: {}: {file}: {what}", dir.display());
    }
    // Mended damage, gone after this open: said once.
    if let Some(recovered) = &report.manifest_recovered {
        eprintln!(
            "siftdb: warning: {}: {}: {}; opened from {}",
            dir.display(),
            recovered.damaged,
            recovered.problem,
            recovered.recovered_from
        );
    }
    for (file, what) in &report.logs_mended {
        eprintln!("siftdb: warning: {}: {file}: mended: {what}", dir.display());
    }
    Ok(db)
}

/// Opens the database in `dir` for reading only (`Db::open_read_only`):
/// no lock, no recovery that writes, nothing created — so it works on a
/// directory it may not write, and beside a process writing to it.
pub fn open_for_reading(dir: &Path) -> Result<Db, String> {
    Db::open_read_only(dir).map_err(|e| format!("cannot open {}: {e}", dir.display()))
}

/// The keyspace `name` of `db`; unless `create`, one the database does
/// not have is an error.
pub fn keyspace(db: &Db, name: &str, create: bool) -> Result<Keyspace, String> {
    if !create && !db.keyspaces().iter().any(|k| k == name) {
        return Err(format!(
            "{} has no keyspace {name:?} (it has {})",
            db.path().display(),
            db.keyspaces().join(", ")
        ));
    }
    db.keyspace(name)
        .map_err(|e| format!("keyspace {name:?}: {e}"))
}

/// Runs `siftdb get`.
pub fn get(args: &GetArgs) -> Result<ExitCode, String> {
    let key = parse_arg(&args.key, args.hex, "key")?;
    let db = open_for_reading(&args.dir)?;
    let keyspace = keyspace(&db, &args.keyspace, false)?;
    match keyspace.get(&key).map_err(|e| format!("get failed: {e}"))? {
        Some(value) => {
            // Escaped: a value must not drive the terminal (ESC sequences).
            print_lines(&[show(&value, args.hex)])?;
            Ok(ExitCode::SUCCESS)
        }
        None => {
            eprintln!("siftdb: key {:?} not found", args.key);
            Ok(ExitCode::from(EXIT_NOT_FOUND))
        }
    }
}

/// Runs `siftdb put`.
pub fn put(args: &PutArgs) -> Result<ExitCode, String> {
    let key = parse_arg(&args.key, args.hex, "key")?;
    let value = parse_arg(&args.value, args.hex, "value")?;
    let db = open_db(&args.dir, true)?;
    keyspace(&db, &args.keyspace, true)?
        .put(&key, &value)
        .map_err(|e| format!("put failed: {e}"))?;
    Ok(ExitCode::SUCCESS)
}

/// Runs `siftdb delete`.
pub fn delete(args: &DeleteArgs) -> Result<ExitCode, String> {
    let key = parse_arg(&args.key, args.hex, "key")?;
    let db = open_db(&args.dir, false)?;
    keyspace(&db, &args.keyspace, false)?
        .delete(&key)
        .map_err(|e| format!("delete failed: {e}"))?;
    Ok(ExitCode::SUCCESS)
}
