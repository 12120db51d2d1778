//! `siftdb scan`: entries in key order, all of them, those with a prefix,
//! or those in a range.
//!
//! Owns: the scan flags and the one-entry-per-line output.
//! Must never: print an entry across two lines (keys and values are
//! escaped, or hex with `--hex`).

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::DbIterator;

use crate::point::open_for_reading;
use crate::text::{key_range, parse_arg, show, Out, Wrote};

/// Flags of `siftdb scan`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Prints one entry per line: key, a tab, value (lossy UTF-8 with control \
characters escaped, or hex with --hex). Opens the database read-only (see \
get): the entries as of the moment it opened. Exit status: 0, or 2 on an \
error.")]
pub struct ScanArgs {
    /// The database directory.
    dir: PathBuf,
    /// Only keys starting with P.
    #[arg(long, value_name = "P", conflicts_with_all = ["from", "to"])]
    prefix: Option<String>,
    /// Only keys at or after A.
    #[arg(long, value_name = "A")]
    from: Option<String>,
    /// Only keys before B.
    #[arg(long, value_name = "B")]
    to: Option<String>,
    /// At most N entries.
    #[arg(long, value_name = "N")]
    limit: Option<u64>,
    /// P, A and B are hex, and keys and values are printed as hex.
    #[arg(long)]
    hex: bool,
    /// Descending key order (the last N entries with --limit).
    #[arg(long)]
    reverse: bool,
    /// The keyspace to scan.
    #[arg(long, value_name = "NAME", default_value = "default")]
    keyspace: String,
}

/// Runs `siftdb scan`.
pub fn run(args: &ScanArgs) -> Result<ExitCode, String> {
    let prefix = args
        .prefix
        .as_deref()
        .map(|p| parse_arg(p, args.hex, "prefix"))
        .transpose()?;
    let (from, to) = key_range(args.from.as_deref(), args.to.as_deref(), args.hex)?;

    let db = open_for_reading(&args.dir)?;
    let keyspace = crate::point::keyspace(&db, &args.keyspace, false)?;
    let entries: DbIterator = match prefix {
        Some(prefix) => keyspace.prefix(prefix),
        None => keyspace.range::<Vec<u8>, _>((from, to)),
    };
    let entries: Box<dyn Iterator<Item = siftdb::Result<_>>> = if args.reverse {
        Box::new(entries.rev())
    } else {
        Box::new(entries)
    };
    let limit = args.limit.unwrap_or(u64::MAX);
    let mut out = Out::new();
    for entry in entries.take(usize::try_from(limit).unwrap_or(usize::MAX)) {
        let (key, value) = entry.map_err(|e| format!("scan failed: {e}"))?;
        let line = format!("{}\t{}", show(&key, args.hex), show(&value, args.hex));
        if let Wrote::Closed = out.line(&line)? {
            return Ok(ExitCode::SUCCESS);
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}
