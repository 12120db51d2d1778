//! `siftdb repair`: rebuild a damaged database from what is readable.
//!
//! Owns: the repair flags, the report's text and JSON, and the exit status.
//! Must never: decide anything about the data — that is
//! `siftdb::internals::repair`, which keeps only what it read whole and moves every
//! original it replaces into `DIR/lost/`.

use std::path::PathBuf;
use std::process::ExitCode;

use serde_json::{json, Value};
use siftdb::{repair, RepairOptions, RepairReport};
use siftdb::{LogAction, LogReport, LostRange, ManifestFinding, TableAction, TableReport};
use siftdb_bench::group_digits;

use crate::text::{print_lines, show, to_hex};

/// Exit code when the repair had to leave data behind (the report says what).
const EXIT_LOST: u8 = 1;

/// Flags of `siftdb repair`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
Rebuilds a working database from what is readable: every sound table is \
kept as it is; the readable blocks of a damaged table go into a new one; \
older versions of keys a lost block may have held newer versions (or \
deletions) of are dropped, so a lost deletion never brings a value back; \
the readable records of a damaged log go into a new table; a damaged or \
missing manifest is rebuilt from the tables and logs. The original of \
everything replaced is moved into DIR/lost/, never deleted. A database with \
nothing damaged is left as it is. Takes the database lock: the database \
must be closed.\n\
Exit status: 0 when nothing was lost (or nothing was damaged), 1 when the \
repair had to leave data behind (the report says what: tables, blocks and \
their key ranges, log records), 2 when it could not run.")]
pub struct RepairArgs {
    /// The database directory.
    dir: PathBuf,
    /// Report what a repair would do; write, move and lock nothing.
    #[arg(long)]
    dry_run: bool,
    /// Print the report as one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

/// Runs `siftdb repair`.
pub fn run(args: &RepairArgs) -> Result<ExitCode, String> {
    let report = repair(&args.dir, RepairOptions::new().dry_run(args.dry_run))
        .map_err(|e| format!("cannot repair {}: {e}", args.dir.display()))?;
    let lines = if args.json {
        vec![to_json(&report).to_string()]
    } else {
        text(&report)
    };
    print_lines(&lines)?;
    Ok(if report.lost_anything() {
        ExitCode::from(EXIT_LOST)
    } else {
        ExitCode::SUCCESS
    })
}

fn count(n: u64, one: &str, many: &str) -> String {
    format!("{} {}", group_digits(n), if n == 1 { one } else { many })
}

fn key_text(key: Option<&[u8]>, open_end: &str) -> String {
    key.map_or_else(
        || open_end.to_string(),
        |k| format!("\"{}\"", show(k, false)),
    )
}

fn lost_range_text(r: &LostRange) -> String {
    let at = r.offset.map_or_else(
        || "the whole table".to_string(),
        |o| format!("at offset {o}"),
    );
    format!(
        "lost {at}: keys {} ..= {}: {}",
        key_text(r.first_key.as_deref(), "(start)"),
        key_text(r.last_key.as_deref(), "(end)"),
        r.reason
    )
}

fn table_text(t: &TableReport) -> Vec<String> {
    let level = t
        .level
        .map_or_else(String::new, |l| format!(" (level {l})"));
    let action = match &t.action {
        TableAction::Kept => "kept as it is".to_string(),
        TableAction::Rewritten { into: Some(into) } => format!("rewritten into {into}"),
        TableAction::Rewritten { into: None } => "dropped: nothing left to keep".to_string(),
        TableAction::Merged => "merged into the new tables".to_string(),
        // A variant added by a later siftdb, shown as it prints itself.
        other => format!("{other:?}"),
    };
    let mut lines = vec![format!(
        "  table {}{level}: {action}; {} kept, {} dropped",
        t.file,
        count(t.entries_kept, "entry", "entries"),
        group_digits(t.entries_dropped)
    )];
    lines.extend(t.problems.iter().map(|p| format!("    problem: {p}")));
    lines.extend(t.lost.iter().map(|r| format!("    {}", lost_range_text(r))));
    lines
}

fn log_action(action: &LogAction) -> &'static str {
    match action {
        LogAction::Kept => "kept (the next open replays it)",
        LogAction::Replaced => "damaged: its readable records went into a new table",
        LogAction::Merged => "replayed into the new tables",
        LogAction::Obsolete => "already in tables: set aside",
        _ => "another action (see the JSON report)",
    }
}

fn log_text(l: &LogReport) -> Vec<String> {
    let mut lines = vec![format!(
        "  log {}: {}; {} kept",
        l.file,
        log_action(&l.action),
        count(l.records_kept, "record", "records")
    )];
    lines.extend(l.lost.iter().map(|r| {
        format!(
            "    lost {} bytes of records at offset {}: {}",
            group_digits(r.len),
            r.offset,
            r.reason
        )
    }));
    if let Some((offset, reason)) = &l.torn_tail {
        lines.push(format!(
            "    torn tail at offset {offset} (a crash's, not counted as lost): {reason}"
        ));
    }
    lines
}

fn manifest_text(m: &ManifestFinding) -> String {
    match m {
        ManifestFinding::Intact => "intact".to_string(),
        ManifestFinding::Damaged(reason) => format!("DAMAGED ({reason}): rebuilt from the files"),
        ManifestFinding::Missing => "missing: rebuilt from the files".to_string(),
        other => format!("{other:?}"),
    }
}

fn text(report: &RepairReport) -> Vec<String> {
    let mut lines = vec![
        format!(
            "{}repair of {}",
            if report.dry_run { "dry run: " } else { "" },
            report.dir.display()
        ),
        format!("  manifest: {}", manifest_text(&report.manifest)),
    ];
    lines.extend(report.tables.iter().flat_map(table_text));
    lines.extend(report.logs.iter().flat_map(log_text));
    lines.extend(report.new_tables.iter().map(|t| format!("  new table {t}")));
    // One line per original when few; a count and the first few when many.
    const LISTED: usize = 8;
    if report.moved.len() <= LISTED {
        lines.extend(
            report
                .moved
                .iter()
                .map(|(from, to)| format!("  moved {from} to {to}")),
        );
    } else {
        let names: Vec<&str> = report
            .moved
            .iter()
            .take(LISTED)
            .map(|(from, _)| from.as_str())
            .collect();
        lines.push(format!(
            "  moved {} originals into lost/: {}, ... (--json lists them all)",
            report.moved.len(),
            names.join(", ")
        ));
    }
    lines.extend(report.uncertain.iter().map(|u| format!("  uncertain: {u}")));
    lines.extend(report.blob_files.iter().map(|b| {
        format!(
            "  blob file {}: {}; the values it held are lost (reads of their keys fail, \
             never an older value), pointed into by {}",
            b.file,
            b.problem,
            b.tables.join(", ")
        )
    }));
    let verb = if report.dry_run { "would be" } else { "was" };
    lines.push(match (report.changed(), report.lost_anything()) {
        (false, false) => "ok: nothing to repair".to_string(),
        (false, true) => "nothing to rebuild; values lost with blob files (above)".to_string(),
        (true, false) => format!("repaired: nothing lost; the database {verb} rebuilt"),
        (true, true) => format!("repaired with losses (above); the database {verb} rebuilt"),
    });
    lines
}

fn key_json(key: Option<&[u8]>) -> Value {
    key.map_or(
        Value::Null,
        |k| json!({ "text": show(k, false), "hex": to_hex(k) }),
    )
}

fn to_json(report: &RepairReport) -> Value {
    let manifest = match &report.manifest {
        ManifestFinding::Intact => json!({ "state": "intact" }),
        ManifestFinding::Damaged(reason) => json!({ "state": "damaged", "reason": reason }),
        ManifestFinding::Missing => json!({ "state": "missing" }),
        other => json!({ "state": format!("{other:?}") }),
    };
    let tables: Vec<Value> = report
        .tables
        .iter()
        .map(|t| {
            let (action, into) = match &t.action {
                TableAction::Kept => ("kept", None),
                TableAction::Rewritten { into } => ("rewritten", into.clone()),
                TableAction::Merged => ("merged", None),
                _ => ("other", None),
            };
            json!({
                "file": t.file,
                "level": t.level,
                "action": action,
                "into": into,
                "entries_kept": t.entries_kept,
                "entries_dropped": t.entries_dropped,
                "problems": t.problems,
                "lost": t.lost.iter().map(|r| json!({
                    "offset": r.offset,
                    "first_key": key_json(r.first_key.as_deref()),
                    "last_key": key_json(r.last_key.as_deref()),
                    "max_sequence": r.max_sequence,
                    "reason": r.reason,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    let logs: Vec<Value> = report
        .logs
        .iter()
        .map(|l| {
            let action = match l.action {
                LogAction::Kept => "kept",
                LogAction::Replaced => "replaced",
                LogAction::Merged => "merged",
                LogAction::Obsolete => "obsolete",
                _ => "other",
            };
            json!({
                "file": l.file,
                "action": action,
                "records_kept": l.records_kept,
                "lost": l.lost.iter().map(|r| json!({
                    "offset": r.offset, "len": r.len, "reason": r.reason,
                })).collect::<Vec<_>>(),
                "torn_tail": l.torn_tail.as_ref().map(|(offset, reason)| json!({
                    "offset": offset, "reason": reason,
                })),
            })
        })
        .collect();
    json!({
        "dir": report.dir.display().to_string(),
        "dry_run": report.dry_run,
        "manifest": manifest,
        "tables": tables,
        "logs": logs,
        "new_tables": report.new_tables,
        "moved": report.moved.iter().map(|(from, to)| json!({ "from": from, "to": to })).collect::<Vec<_>>(),
        "manifest_written": report.manifest_written,
        "uncertain": report.uncertain,
        "blob_files": report.blob_files.iter().map(|b| json!({
            "file": b.file, "tables": b.tables, "problem": b.problem,
        })).collect::<Vec<_>>(),
        "changed": report.changed(),
        "lost_anything": report.lost_anything(),
    })
}
