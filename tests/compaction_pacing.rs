//! `Options::compaction_bytes_per_sec`: a compaction that writes more than
//! the pacer's step waits (counted in `Stats::compaction_paced_micros`),
//! flushes are not paced, and the data comes through intact.

use siftdb::{Db, Options};

#[test]
fn a_paced_compaction_waits_and_keeps_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let opts = Options::default()
        .level0_compaction_trigger(64)
        .level0_quiet_trigger(64)
        .level0_stop_writes(128)
        .compaction_bytes_per_sec(1 << 20);
    let db = Db::open_with(dir.path(), opts).unwrap();
    // Values that do not compress: the compaction writes ~650 KB.
    let value = |i: u32| -> Vec<u8> {
        let mut x = u64::from(i) ^ 0x9e37_79b9_7f4a_7c15;
        (0..100)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (x >> 56) as u8
            })
            .collect()
    };
    for round in 0..4u32 {
        for i in 0..1500u32 {
            let k = i * 4 + round;
            db.put(format!("key{k:06}"), value(k)).unwrap();
        }
        db.flush().unwrap();
    }
    let flushed = db.stats();
    assert_eq!(flushed.compaction_paced_micros, 0, "flushes are not paced");
    assert_eq!(flushed.level_tables[0], 4);
    db.compact().unwrap();
    let stats = db.stats();
    assert!(
        stats.compaction_bytes_written > 256 << 10,
        "{} bytes compacted: too few to pace",
        stats.compaction_bytes_written
    );
    assert!(stats.compaction_paced_micros > 0, "{stats:?}");
    assert_eq!(db.iter().count(), 6000);
    assert_eq!(
        db.get("key005999").unwrap().as_deref(),
        Some(&value(5999)[..])
    );
    assert!(Options::default()
        .compaction_bytes_per_sec(1000)
        .validate()
        .is_err());
}
