//! `siftdb inspect`: what a table file or a database directory holds, the
//! filter figures of every table among it.
//!
//! Owns: the inspect flags and the text of `siftdb::internals::inspect`'s summaries.
//! Must never: compute a figure — they all come from `siftdb::internals::inspect`.

use std::path::PathBuf;
use std::process::ExitCode;

use siftdb::internals::backup_meta::{inspect_backup_dir, MetaSummary};
use siftdb::internals::inspect::{
    inspect_blob_file, inspect_dir, inspect_table, BlobSummary, DirSummary, FileRole,
    FilterFigures, FilterSummary, RangeFilterSummary, TableSummary,
};
use siftdb_bench::group_digits;

use crate::text::{print_lines, show};

/// Flags of `siftdb inspect`.
#[derive(clap::Args, Debug)]
#[command(after_help = "\
PATH is a table file (NNNNNN.sst), a blob file (NNNNNN.blob), a database \
directory or a backup directory. For a blob file: its format version, \
values and value bytes, and every checksum checked (header, each record, \
footer), naming the record that is damaged. For a table: \
key range, entries, blocks and sizes, and its filter (bits per key, probes, \
fill, estimated against actual keys, expected false-positive rate). For a \
directory: the manifest's counters, totals per level, every live table, \
and every file with its format version and what it is to the database. \
For a backup directory: each metadata file with its format version and \
the backup it describes. Reads only (works on a \
directory it may not write); takes no lock, so it runs beside a live \
writer, describing one manifest.\n\
Exit status: 0, 1 when a blob file is damaged, or 2 when PATH cannot be read.")]
pub struct InspectArgs {
    /// A table file, a blob file, a database directory or a backup directory.
    path: PathBuf,
}

/// Runs `siftdb inspect`.
pub fn run(args: &InspectArgs) -> Result<ExitCode, String> {
    let path = &args.path;
    let lines = if path.is_dir() && !path.join("MANIFEST").exists() && path.join("meta").is_dir() {
        backup_lines(
            path,
            &inspect_backup_dir(path)
                .map_err(|e| format!("cannot inspect {}: {e}", path.display()))?,
        )
    } else if path.is_dir() {
        dir_lines(
            &inspect_dir(path).map_err(|e| format!("cannot inspect {}: {e}", path.display()))?,
        )
    } else if path.extension().is_some_and(|e| e == "blob") {
        let summary = inspect_blob_file(path)
            .map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
        print_lines(&blob_lines(&summary))?;
        return Ok(if summary.is_sound() {
            ExitCode::SUCCESS
        } else {
            ExitCode::from(EXIT_DAMAGED)
        });
    } else {
        let summary =
            inspect_table(path).map_err(|e| format!("cannot inspect {}: {e}", path.display()))?;
        table_lines(&summary, "")
    };
    print_lines(&lines)?;
    Ok(ExitCode::SUCCESS)
}

/// Exit code when a blob file inspected is damaged.
const EXIT_DAMAGED: u8 = 1;

/// The lines describing one blob file.
fn blob_lines(b: &BlobSummary) -> Vec<String> {
    let known = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    let mut lines = vec![
        format!("blob file {}", b.path.display()),
        format!("  {:<18}{}", "file size", bytes(b.file_size)),
        format!(
            "  {:<18}{}",
            "format version",
            known(b.format_version.map(u64::from))
        ),
        format!("  {:<18}{}", "file number", known(b.file_number)),
        format!(
            "  {:<18}{} ({})",
            "values",
            group_digits(b.records),
            bytes(b.value_bytes)
        ),
    ];
    lines.push(match b.footer_counts {
        Some((records, value_bytes)) => format!(
            "  {:<18}{} values ({})",
            "footer counts",
            group_digits(records),
            bytes(value_bytes)
        ),
        None => format!("  {:<18}-", "footer counts"),
    });
    if b.is_sound() {
        lines.push("  checksums: ok (header, every record, footer)".to_string());
    }
    for damage in &b.damage {
        lines.push(format!("  DAMAGED: {damage}"));
    }
    lines
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
                "{} (filter {}, index {}, range filter {})",
                bytes(t.filter_memory + t.index_memory + t.range_filter_memory),
                group_digits(t.filter_memory),
                group_digits(t.index_memory),
                group_digits(t.range_filter_memory)
            ),
        ),
    ];
    match &t.filter {
        FilterSummary::Missing => rows.push(("filter", "none (every lookup reads a block)".into())),
        FilterSummary::Corrupt(reason) => rows.push((
            "filter",
            format!("DAMAGED, not used (every key may match): {reason}"),
        )),
        FilterSummary::UnknownKind(reason) => rows.push((
            "filter",
            format!("UNKNOWN KIND, not used (every key may match): {reason}"),
        )),
        FilterSummary::Present(f) => filter_rows(t, f, &mut rows),
    }
    if let Some(p) = &t.prefix_filter {
        rows.push((
            "filter prefixes",
            format!(
                "{} by {}{}",
                group_digits(p.prefixes),
                p.extractor,
                if p.whole_keys {
                    ", whole keys too"
                } else {
                    ", prefixes only"
                }
            ),
        ));
    }
    match &t.range_filter {
        RangeFilterSummary::Missing => {}
        RangeFilterSummary::Corrupt(reason) => rows.push((
            "range filter",
            format!("DAMAGED, not used (every range may match): {reason}"),
        )),
        RangeFilterSummary::Present {
            configured_bits_per_key,
            bits_per_key,
            mode,
        } => rows.push((
            "range filter",
            format!(
                "{} on disk, {} in memory: {bits_per_key:.2} bits/key ({configured_bits_per_key} configured), {mode}",
                bytes(t.range_filter_bytes),
                group_digits(t.range_filter_memory)
            ),
        )),
    }
    let mut lines = vec![format!("{indent}table {}", t.name)];
    lines.extend(
        rows.into_iter()
            .map(|(label, value)| format!("{indent}  {label:<18}{value}")),
    );
    lines
}

/// The rows describing a filter in use.
fn filter_rows(t: &TableSummary, f: &FilterFigures, rows: &mut Vec<(&str, String)>) {
    rows.push(("filter", f.kind.to_string()));
    rows.push(("filter block", bytes(t.filter_bytes)));
    let shape = match &f.bloom {
        Some(b) => format!(
            "{} bits in {} 512-bit lines",
            group_digits(f.bits),
            group_digits(b.lines)
        ),
        None => format!("{} bits of fingerprint slots", group_digits(f.bits)),
    };
    rows.push((
        "filter bits/key",
        format!(
            "{:.2} ({:.2} chosen by the policy; {shape})",
            f.bits_per_key, f.configured_bits_per_key
        ),
    ));
    let theory = match &f.bloom {
        Some(b) => {
            rows.push((
                "filter probes",
                format!("{} (layout {})", f.probes, b.layout.id()),
            ));
            rows.push((
                "filter fill",
                format!(
                    "{} ({} of {} bits set)",
                    percent(b.fill_ratio),
                    group_digits(b.set_bits),
                    group_digits(f.bits)
                ),
            ));
            let error = if f.actual_entries == 0 {
                0.0
            } else {
                b.estimated_entries / f.actual_entries as f64 - 1.0
            };
            rows.push((
                "filter entries",
                format!(
                    "{:.0} estimated from the fill, {} actual ({:+.2}%)",
                    b.estimated_entries,
                    group_digits(f.actual_entries),
                    error * 100.0
                ),
            ));
            format!(
                "blocked-filter theory at {:.2} bits/key, {} probes; {} from the fill",
                f.bits_per_key,
                f.probes,
                percent(b.fill_fp_rate)
            )
        }
        None => {
            rows.push(("filter entries", group_digits(f.actual_entries)));
            "2^-w for w-bit fingerprints".to_string()
        }
    };
    rows.push((
        "expected FP rate",
        format!("{} ({theory})", percent(f.expected_fp_rate)),
    ));
    rows.push((
        "measured FP rate",
        format!(
            "{} ({} of {} random absent keys let through)",
            percent(f.measured_fp_rate()),
            group_digits(f.probe_positives),
            group_digits(f.probed)
        ),
    ));
}

fn role_text(role: FileRole) -> String {
    match role {
        FileRole::Manifest => "manifest".into(),
        FileRole::ManifestTemp => "half-written manifest (ignored)".into(),
        FileRole::ManifestCopy => "the manifest's second copy".into(),
        FileRole::Lock => "lock file".into(),
        FileRole::LiveTable { level } => format!("live table, level {level}"),
        FileRole::MissingTable { level } => {
            format!("MISSING: named by the manifest (level {level}), not in the directory")
        }
        FileRole::UnlistedTable => "table the manifest does not name (open removes it)".into(),
        FileRole::LiveLog => "live log (replayed by open)".into(),
        FileRole::ObsoleteLog => "obsolete log, already in tables (open removes it)".into(),
        FileRole::LiveBlob => "blob file a live table points into".into(),
        FileRole::UnreferencedBlob => {
            "blob file no live table points into (open removes it)".into()
        }
        FileRole::MissingBlob => {
            "MISSING: blob file a live table points into, not in the directory".into()
        }
        FileRole::Other => "not a database file".into(),
    }
}

/// The per-level table of a directory: sizes, then filters.
pub fn level_lines(s: &DirSummary) -> Vec<String> {
    let row = |cells: [String; 11]| {
        let [level, tables, file_bytes, entries, kind, bpk, expected, measured, block, memory, index] =
            cells;
        format!(
            "  {level:<6}{tables:>7}{file_bytes:>16}{entries:>13}  {kind:<12}{bpk:>8}{expected:>11}{measured:>11}{block:>14}{memory:>14}{index:>14}"
        )
    };
    let mut lines = vec![row([
        "level",
        "tables",
        "bytes",
        "entries",
        "filter",
        "bits/key",
        "exp. FP",
        "meas. FP",
        "filter bytes",
        "filter memory",
        "index memory",
    ]
    .map(String::from))];
    let rate = |r: f64| percent(r);
    for l in &s.levels {
        let f = &l.filters;
        lines.push(row([
            l.level.to_string(),
            l.tables.to_string(),
            group_digits(l.file_bytes),
            group_digits(l.entries),
            f.kinds(),
            format!("{:.2}", f.bits_per_key()),
            rate(f.expected_fp_rate()),
            f.measured_fp_rate().map_or_else(|| "-".into(), rate),
            group_digits(l.filter_bytes),
            group_digits(l.filter_memory),
            group_digits(l.index_memory),
        ]));
    }
    let total = |f: fn(&siftdb::internals::inspect::LevelSummary) -> u64| -> String {
        group_digits(s.levels.iter().map(f).sum())
    };
    let mut all = siftdb::LevelFilterStats::default();
    for l in &s.levels {
        all.merge(&l.filters);
    }
    lines.push(row([
        "total".into(),
        total(|l| l.tables as u64),
        total(|l| l.file_bytes),
        total(|l| l.entries),
        all.kinds(),
        format!("{:.2}", all.bits_per_key()),
        rate(all.expected_fp_rate()),
        all.measured_fp_rate().map_or_else(|| "-".into(), rate),
        total(|l| l.filter_bytes),
        total(|l| l.filter_memory),
        total(|l| l.index_memory),
    ]));
    lines.push(
        "  (filter: the kinds in use; bits/key: filter bits per key; exp. FP: the rate theory \
         expects, by keys; meas. FP: random absent keys let through; memory: what an open \
         database holds for the filters and indexes, beside its block cache)"
            .into(),
    );
    lines
}

/// The lines describing a backup directory: each metadata file, its
/// format version and the backup it describes.
fn backup_lines(dir: &std::path::Path, metas: &[MetaSummary]) -> Vec<String> {
    let mut lines = vec![format!("backup directory {}", dir.display())];
    for m in metas {
        let what = match &m.backup {
            Ok(b) => format!(
                "backup {}: sequence {}, {} files, {}",
                b.id,
                b.sequence,
                b.files.len(),
                bytes(b.size())
            ),
            Err(reason) => format!("cannot be read: {reason}"),
        };
        lines.push(format!(
            "  meta/{:<10}{:<18}  {what}",
            m.name,
            version_text(m.format_version)
        ));
    }
    lines
}

/// "format version N", or "-" for a file of no versioned kind or a
/// damaged one.
fn version_text(version: Option<u64>) -> String {
    version.map_or_else(|| "-".to_string(), |v| format!("format version {v}"))
}

fn dir_lines(s: &DirSummary) -> Vec<String> {
    let manifest_version = version_text(
        s.files
            .iter()
            .find(|f| f.role == FileRole::Manifest)
            .and_then(|f| f.format_version),
    );
    let mut lines = vec![
        format!("database {}", s.dir.display()),
        format!(
            "  manifest: next file number {}, last sequence {}, log number {}, {manifest_version}",
            s.manifest.next_file_number, s.manifest.last_sequence.0, s.manifest.log_number
        ),
        String::new(),
        format!(
            "  {:<24}{:>6}{:>8}{:>16}{:>13}{:>12}",
            "keyspace", "id", "tables", "bytes", "entries", "log number"
        ),
    ];
    for k in &s.keyspaces {
        lines.push(format!(
            "  {:<24}{:>6}{:>8}{:>16}{:>13}{:>12}",
            k.name,
            k.id,
            k.tables,
            group_digits(k.file_bytes),
            group_digits(k.entries),
            k.log_number
        ));
    }
    for k in s
        .keyspaces
        .iter()
        .filter(|k| k.settings != Default::default())
    {
        lines.push(format!(
            "  {} settings: {} (stored in the manifest, {manifest_version})",
            k.name, k.settings
        ));
    }
    lines.push(String::new());
    lines.extend(level_lines(s));
    let keyspace_name = |id: u32| {
        s.keyspaces
            .iter()
            .find(|k| k.id == id)
            .map_or_else(|| id.to_string(), |k| k.name.clone())
    };
    for t in &s.tables {
        lines.push(String::new());
        lines.push(format!(
            "  level {}, keyspace {}",
            t.record.level,
            keyspace_name(t.record.keyspace)
        ));
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
        let values = f
            .blob_values
            .map_or_else(String::new, |(values, value_bytes)| {
                format!(
                    ", {} values of {}",
                    group_digits(values),
                    bytes(value_bytes)
                )
            });
        lines.push(format!(
            "    {:<14}{:>14}  {:<18}  {}{values}",
            f.name,
            size,
            version_text(f.format_version),
            role_text(f.role)
        ));
    }
    lines
}
