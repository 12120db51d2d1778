//! `DbIterator::fill_cache(false)`: a scan that reads its tables' blocks
//! in spans straight from the files gives the same entries as one through
//! the block cache — forward, backward, bounded, after seeks, with
//! memtable entries, deletes and range deletes over the tables — and
//! leaves the block cache as it found it.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;

use siftdb::{Db, DbIterator, Options};
use siftdb_testkit::SplitMix64;

fn entries(scan: DbIterator, backward: bool) -> Vec<(Vec<u8>, Vec<u8>)> {
    let owned = |e: siftdb::Result<(bytes::Bytes, bytes::Bytes)>| {
        let (k, v) = e.unwrap();
        (k.to_vec(), v.to_vec())
    };
    if backward {
        let mut all: Vec<_> = scan.rev().map(owned).collect();
        all.reverse();
        all
    } else {
        scan.map(owned).collect()
    }
}

#[test]
fn a_scan_without_the_cache_reads_the_same_and_caches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let options = || {
        Options::default()
            .compression(siftdb::Compression::None)
            .table_target_bytes(256 << 10)
    };
    let mut model = BTreeMap::new();
    let mut rng = SplitMix64::new(3);
    {
        let db = Db::open_with(dir.path(), options()).unwrap();
        for i in 0..20_000u32 {
            let key = format!("k{i:06}").into_bytes();
            let value = rng.bytes(100);
            db.put(&key, &value).unwrap();
            model.insert(key, value);
        }
        db.compact().unwrap();
        // Level 0 over the compacted tables: deletes, a range delete, new
        // values.
        for i in (0..20_000u32).step_by(7) {
            let key = format!("k{i:06}").into_bytes();
            db.delete(&key).unwrap();
            model.remove(&key);
        }
        db.delete_range(&b"k004000"[..]..&b"k006000"[..]).unwrap();
        model.retain(|k, _| !(&b"k004000"[..]..&b"k006000"[..]).contains(&k.as_slice()));
        db.flush().unwrap();
        // And the memtable.
        for i in (1..20_000u32).step_by(11) {
            let key = format!("k{i:06}").into_bytes();
            db.put(&key, b"mem").unwrap();
            model.insert(key, b"mem".to_vec());
        }
        db.close().unwrap();
    }
    let db = Db::open_with(dir.path(), options()).unwrap();
    assert_eq!(
        db.stats().block_cache_bytes,
        0,
        "a fresh open caches no block"
    );
    let want: Vec<(Vec<u8>, Vec<u8>)> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    for backward in [false, true] {
        assert_eq!(
            entries(db.iter().fill_cache(false), backward),
            want,
            "backward {backward}"
        );
        let bounded: Vec<_> = model
            .range(b"k003000".to_vec()..b"k012345".to_vec())
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let scan = db.range(&b"k003000"[..]..&b"k012345"[..]).fill_cache(false);
        assert_eq!(
            entries(scan, backward),
            bounded,
            "bounded, backward {backward}"
        );
    }
    // Seeks both ways.
    let mut scan = db.iter().fill_cache(false);
    scan.seek(b"k015000");
    let (key, _) = scan.next().unwrap().unwrap();
    let expected = model.range(b"k015000".to_vec()..).next().unwrap().0;
    assert_eq!(key.as_ref(), expected.as_slice());
    // (A fresh scan: the two sides of one never pass each other.)
    let mut scan = db.iter().fill_cache(false);
    scan.seek_for_prev(b"k009999");
    let (key, _) = scan.next_back().unwrap().unwrap();
    let expected = model.range(..=b"k009999".to_vec()).next_back().unwrap().0;
    assert_eq!(key.as_ref(), expected.as_slice());
    let stats = db.stats();
    assert_eq!(stats.block_cache_bytes, 0, "the scans cached nothing");
    assert_eq!(stats.block_cache_misses, 0);
    // The same scan through the cache fills it.
    assert_eq!(entries(db.iter(), false), want);
    assert!(db.stats().block_cache_bytes > 1 << 20);
}
