//! `siftdb inspect`: what a table file or a database directory holds, the
//! filter figures of every table among it.
//!
//! Owns: the inspect flags and the text of `siftdb::inspect`'s summaries.
//! Must never: compute a figure — they all come from `siftdb::inspect`.

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::inspect::{
    inspect_dir, inspect_table, DirSummary, FileRole, FilterSummary, TableSummary,
};
use siftdb_bench::group_digits;

use crate::text::{print_lines, show};

/// Flags of `siftdb inspect`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
PATH is a table file (NNNNNN.sst) or a database directory. For a table: \
key range, entries, blocks and sizes, and its filter (bits per key, probes, \
fill, estimated against actual keys, expected false-positive rate). For a \
directory: the manifest's counters, totals per level, every live table, \
and every file with what it is to the database. Reads only (works on a \
directory it may not write); takes no lock, so it runs beside a live \
writer, describing one manifest.\n\
Exit status: 0, or 2 when PATH cannot be read.")]
pub struct InspectArgs {
    /// A table file or a database directory.
    path: PathBuf,
}

/// Runs `siftdb inspect`.
pub fn run(args: &InspectArgs) -> Result<ExitCode, String> {
    let path = &args.path;
    let lines = if path.is_dir() {
        dir_lines(
            &inspect_dir(path).map_err(|e| format!("cannot inspect {}: {e}", path.display()))?,
        )
    } else {
        let summary =
            inspect_table(path).map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
        table_lines(&summary, "")
    };
    print_lines(&lines)?;
    Ok(ExitCode::SUCCESS)
}

fn bytes(n: u64) -> String {
    format!("{} bytes", group_digits(n))
}

fn percent(fraction: f64) -> String {
    let pct = fraction * 100.0;
    if pct != 0.0 && pct < 0.001 {
        format!("{pct:.2e}%")
    } else {
        format!("{pct:.3}%")
    }
}

/// The lines describing one table, each starting with `indent`.
fn table_lines(t: &TableSummary, indent: &str) -> Vec<String> {
    let mut rows: Vec<(&str, String)> = vec![
        ("file size", bytes(t.file_size)),
        (
            "key range",
            format!(
                "\"{}\" .. \"{}\"",
                show(&t.smallest_user_key, false),
                show(&t.largest_user_key, false)
            ),
        ),
        ("sequences", format!("{} ..= {}", t.min_seq.0, t.max_seq.0)),
        (
            "entries",
            format!(
                "{} ({} deletions, {} distinct keys)",
                group_digits(t.entries),
                group_digits(t.deletions),
                group_digits(t.distinct_user_keys)
            ),
        ),
        (
            "data blocks",
            format!("{} ({})", group_digits(t.data_blocks), bytes(t.data_bytes)),
        ),
        ("index block", bytes(t.index_bytes)),
        ("properties block", bytes(t.properties_bytes)),
        ("format version", t.format_version.to_string()),
        (
            "held in memory",
            format!(
                "{} (filter {}, index {})",
                bytes(t.filter_memory + t.index_memory),
                group_digits(t.filter_memory),
                group_digits(t.index_memory)
            ),
        ),
    ];
    match &t.filter {
        FilterSummary::Missing => rows.push(("filter", "none (every lookup reads a block)".into())),
        FilterSummary::Corrupt(reason) => rows.push((
            "filter",
            format!("DAMAGED, not used (every key may match): {reason}"),
        )),
        FilterSummary::Present(f) => {
            rows.push(("filter block", bytes(t.filter_bytes)));
            rows.push((
                "filter bits/key",
                format!(
                    "{:.2} ({:.2} configured; {} bits in {} 512-bit lines)",
                    f.bits_per_key,
                    f.configured_bits_per_key,
                    group_digits(f.bits),
                    group_digits(f.lines)
                ),
            ));
            rows.push((
                "filter probes",
                format!("{} (layout {})", f.probes, f.layout.id()),
            ));
            rows.push((
                "filter fill",
                format!(
                    "{} ({} of {} bits set)",
                    percent(f.fill_ratio),
                    group_digits(f.set_bits),
                    group_digits(f.bits)
                ),
            ));
            let error = if f.actual_entries == 0 {
                0.0
            } else {
                f.estimated_entries / f.actual_entries as f64 - 1.0
            };
            rows.push((
                "filter entries",
                format!(
                    "{:.0} estimated from the fill, {} actual ({:+.2}%)",
                    f.estimated_entries,
                    group_digits(f.actual_entries),
                    error * 100.0
                ),
            ));
            rows.push((
                "expected FP rate",
                format!(
                    "{} (blocked-filter theory at {:.2} bits/key, {} probes); {} from the fill",
                    percent(f.expected_fp_rate),
                    f.bits_per_key,
                    f.probes,
                    percent(f.fill_fp_rate)
                ),
            ));
        }
    }
    let mut lines = vec![format!("{indent}table {}", t.name)];
    lines.extend(
        rows.into_iter()
            .map(|(label, value)| format!("{indent}  {label:<18}{value}")),
    );
    lines
}

fn role_text(role: FileRole) -> String {
    match role {
        FileRole::Manifest => "manifest".into(),
        FileRole::ManifestTemp => "half-written manifest (ignored)".into(),
        FileRole::Lock => "lock file".into(),
        FileRole::LiveTable { level } => format!("live table, level {level}"),
        FileRole::MissingTable { level } => {
            format!("MISSING: named by the manifest (level {level}), not in the directory")
        }
        FileRole::UnlistedTable => "table the manifest does not name (open removes it)".into(),
        FileRole::LiveLog => "live log (replayed by open)".into(),
        FileRole::ObsoleteLog => "obsolete log, already in tables (open removes it)".into(),
        FileRole::Other => "not a database file".into(),
    }
}

fn dir_lines(s: &DirSummary) -> Vec<String> {
    let mut lines = vec![
        format!("database {}", s.dir.display()),
        format!(
            "  manifest: next file number {}, last sequence {}, log number {}",
            s.manifest.next_file_number, s.manifest.last_sequence.0, s.manifest.log_number
        ),
        String::new(),
        format!(
            "  {:<6}{:>8}{:>18}{:>14}{:>16}{:>16}{:>16}",
            "level", "tables", "bytes", "entries", "filter bytes", "filter memory", "index memory"
        ),
    ];
    for l in &s.levels {
        lines.push(format!(
            "  {:<6}{:>8}{:>18}{:>14}{:>16}{:>16}{:>16}",
            l.level,
            l.tables,
            group_digits(l.file_bytes),
            group_digits(l.entries),
            group_digits(l.filter_bytes),
            group_digits(l.filter_memory),
            group_digits(l.index_memory)
        ));
    }
    let total = |f: fn(&siftdb::inspect::LevelSummary) -> u64| -> String {
        group_digits(s.levels.iter().map(f).sum())
    };
    lines.push(format!(
        "  {:<6}{:>8}{:>18}{:>14}{:>16}{:>16}{:>16}",
        "total",
        total(|l| l.tables as u64),
        total(|l| l.file_bytes),
        total(|l| l.entries),
        total(|l| l.filter_bytes),
        total(|l| l.filter_memory),
        total(|l| l.index_memory)
    ));
    lines.push(
        "  (memory: what an open database holds for the filters and indexes, beside its block cache)"
            .into(),
    );
    for t in &s.tables {
        lines.push(String::new());
        lines.push(format!("  level {}", t.record.level));
        match &t.table {
            Ok(summary) => lines.extend(table_lines(summary, "  ")),
            Err(reason) => lines.push(format!(
                "  table {:06}.sst: cannot open: {reason}",
                t.record.file_number
            )),
        }
    }
    lines.push(String::new());
    lines.push("  files".into());
    for f in &s.files {
        let size = f.size.map_or_else(|| "-".to_string(), group_digits);
        lines.push(format!(
            "    {:<14}{:>14}  {}",
            f.name,
            size,
            role_text(f.role)
        ));
    }
    lines
}
