//! Expiring records with a compaction filter: each value carries its write
//! time (8 bytes, seconds since the Unix epoch, big-endian) before the
//! payload; compaction drops the values older than the time to live, and
//! reads hide them meanwhile.
//!
//! Run with `cargo run --example ttl`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use siftdb::{CompactionDecision, CompactionFilter, Db, Options};

/// Drops values written more than `ttl_secs` before `now()`.
struct Ttl {
    ttl_secs: u64,
    /// The clock (a function, so a test can stop it).
    now: fn() -> u64,
}

/// The write time a value carries (`None` for a value too short to carry one).
fn written_at(value: &[u8]) -> Option<u64> {
    let (time, _) = value.split_first_chunk::<8>()?;
    Some(u64::from_be_bytes(*time))
}

impl Ttl {
    fn expired(&self, value: &[u8]) -> bool {
        written_at(value).is_some_and(|t| t.saturating_add(self.ttl_secs) < (self.now)())
    }
}

impl CompactionFilter for Ttl {
    fn filter(&self, _level: usize, _key: &[u8], value: &[u8]) -> CompactionDecision {
        if self.expired(value) {
            CompactionDecision::Remove
        } else {
            CompactionDecision::Keep
        }
    }
}

fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// A value written at `time` with `payload`.
fn stamped(time: u64, payload: &[u8]) -> Vec<u8> {
    [&time.to_be_bytes()[..], payload].concat()
}

fn main() -> siftdb::Result<()> {
    let dir = tempfile::tempdir()?;
    let ttl = Arc::new(Ttl {
        ttl_secs: 3600,
        now: unix_now,
    });
    let db = Db::open_with(
        dir.path(),
        Options::default().compaction_filter(ttl.clone()),
    )?;
    let now = unix_now();
    db.put("session/fresh", stamped(now, b"alice"))?;
    db.put("session/stale", stamped(now - 7200, b"bob"))?;

    // Before a compaction the stale record is still stored; a reader hides
    // it with the same rule.
    let live = |key: &str| -> siftdb::Result<Option<Vec<u8>>> {
        Ok(db
            .get(key)?
            .filter(|v| !ttl.expired(v))
            .map(|v| v.get(8..).unwrap_or_default().to_vec()))
    };
    println!(
        "stale before compaction: stored {}",
        db.get("session/stale")?.is_some()
    );
    println!("stale as read: {:?}", live("session/stale")?);

    // A compaction drops it for good.
    db.compact()?;
    println!(
        "stale after compaction: stored {}",
        db.get("session/stale")?.is_some()
    );
    println!(
        "fresh: {:?}",
        live("session/fresh")?.map(|v| String::from_utf8_lossy(&v).into_owned())
    );
    assert!(db.get("session/stale")?.is_none());
    assert!(db.get("session/fresh")?.is_some());
    Ok(())
}
