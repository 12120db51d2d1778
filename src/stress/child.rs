//! The child side of a stress run: write planned batches until killed.
//!
//! Owns: the child's protocol on stdout, one line each, flushed at once —
//! `open` when the database is open, `ack B` after batch `B` was
//! acknowledged, `stats F C` now and then (flushes and compactions so far).
//! Must never: print `ack B` before `Db::write` returned `Ok` for batch `B`,
//! or write batches out of order — the parent's model assumes exactly one
//! batch can be in flight.

use std::io::Write;
use std::path::Path;

use crate::stress::plan::plan_batch;
use crate::stress::stress_options;
use crate::Db;

/// Every this many batches the child asks for an explicit flush …
const FLUSH_EVERY: u64 = 400;
/// … and every this many for a full compaction (automatic ones happen anyway).
const COMPACT_EVERY: u64 = 2500;
/// Every this many batches the child reports its flush and compaction counts.
const STATS_EVERY: u64 = 128;

/// Opens the database at `dir` and writes batches `start_batch, start_batch
/// + 1, …` planned from `seed`, acknowledging each on `out`, until killed.
/// Returns only on an error (including `out` closing: the parent is gone).
pub fn run_child(
    dir: &Path,
    seed: u64,
    start_batch: u64,
    sync: bool,
    out: &mut dyn Write,
) -> Result<(), String> {
    let say = |out: &mut dyn Write, line: &str| {
        writeln!(out, "{line}")
            .and_then(|()| out.flush())
            .map_err(|e| format!("cannot report to the parent: {e}"))
    };
    let db = Db::open_with(dir, stress_options(sync))
        .map_err(|e| format!("open {}: {e}", dir.display()))?;
    say(out, "open")?;
    for b in start_batch.. {
        db.write(plan_batch(seed, b).to_write_batch())
            .map_err(|e| format!("batch {b}: {e}"))?;
        say(out, &format!("ack {b}"))?;
        if b.is_multiple_of(FLUSH_EVERY) {
            db.flush()
                .map_err(|e| format!("flush after batch {b}: {e}"))?;
        }
        if b.is_multiple_of(COMPACT_EVERY) {
            db.compact()
                .map_err(|e| format!("compact after batch {b}: {e}"))?;
        }
        if b.is_multiple_of(STATS_EVERY) {
            let stats = db.stats();
            say(
                out,
                &format!("stats {} {}", stats.flushes, stats.compactions),
            )?;
        }
    }
    Ok(())
}
