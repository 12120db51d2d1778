//! The child side of a stress run: write planned batches until killed.
//!
//! Owns: the child's protocol on stdout, one line each, flushed at once —
//! `open` when the database is open; `present B` or `absent B` for the
//! start batch `B` (the batch the previous child may have had in flight:
//! when the parent did not check the database after that kill, the child
//! finds out, and continues after it if it is there); `ack B` after batch
//! `B` was acknowledged; `stats F C` now and then (flushes and compactions
//! so far).
//! Must never: print `ack B` before `Db::write` returned `Ok` for batch `B`,
//! or write batches out of order — the parent's model assumes exactly one
//! batch can be in flight.

use std::io::Write;
use std::path::Path;

use crate::stress::plan::plan_batch;
use crate::stress::stress_options;
use siftdb::Db;

/// Every this many batches the child asks for an explicit flush …
const FLUSH_EVERY: u64 = 400;
/// … and every this many for a full compaction (automatic ones happen anyway).
const COMPACT_EVERY: u64 = 2500;
/// Every this many batches the child reports its flush and compaction counts.
const STATS_EVERY: u64 = 128;

/// Opens the database at `dir`, finds out whether batch `start_batch` is
/// there, and writes the batches after it (or from it, when absent) planned
/// from `seed`, acknowledging each on `out`, until killed.
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
    let maybe_written = plan_batch(seed, start_batch);
    let marker = maybe_written
        .marker()
        .ok_or("a planned batch has no marker")?;
    let found = db
        .get(&marker.key)
        .map_err(|e| format!("reading the marker of batch {start_batch}: {e}"))?;
    let present = found.as_deref() == marker.value.as_deref();
    let verdict = if present { "present" } else { "absent" };
    say(out, &format!("{verdict} {start_batch}"))?;
    for b in start_batch + u64::from(present).. {
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
