//! `DbIterator::fill_cache(false)`: a scan that reads its tables' blocks
//! in spans straight from the files gives the same entries as one through
//! the block cache — forward, backward, bounded, after seeks, with
//! memtable entries, deletes and range deletes over the tables — and
//! leaves the block cache as it found it; so do a transaction's scans and
//! the async scans.
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

/// Owned entries, in key order.
type Entries = Vec<(Vec<u8>, Vec<u8>)>;

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

/// A database of 5,000 entries in tables, reopened so that nothing is
/// cached, and what it holds.
fn reopened_with_tables(dir: &std::path::Path) -> (Db, Entries) {
    let options = || Options::default().compression(siftdb::Compression::None);
    let mut want = Vec::new();
    {
        let db = Db::open_with(dir, options()).unwrap();
        for i in 0..5_000u32 {
            let key = format!("k{i:05}").into_bytes();
            let value = format!("value {i}").into_bytes();
            db.put(&key, &value).unwrap();
            want.push((key, value));
        }
        db.close().unwrap();
    }
    let db = Db::open_with(dir, options()).unwrap();
    assert_eq!(db.stats().block_cache_bytes, 0);
    (db, want)
}

#[test]
fn a_transactions_scan_without_the_cache_caches_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, mut want) = reopened_with_tables(dir.path());
    let mut txn = db.transaction();
    txn.put("k00002", "own").unwrap();
    txn.delete("k00003").unwrap();
    want[2].1 = b"own".to_vec();
    want.remove(3);
    for backward in [false, true] {
        let owned = |e: siftdb::Result<(bytes::Bytes, bytes::Bytes)>| {
            let (k, v) = e.unwrap();
            (k.to_vec(), v.to_vec())
        };
        let mut got: Vec<_> = if backward {
            txn.iter().fill_cache(false).rev().map(owned).collect()
        } else {
            txn.iter().fill_cache(false).map(owned).collect()
        };
        if backward {
            got.reverse();
        }
        assert_eq!(got, want, "backward {backward}");
    }
    assert_eq!(db.stats().block_cache_bytes, 0, "the scans cached nothing");
    assert_eq!(txn.iter().count(), want.len());
    assert!(
        db.stats().block_cache_bytes > 0,
        "a scan through the cache fills it"
    );
}

#[cfg(feature = "tokio")]
#[tokio::test(flavor = "current_thread")]
async fn async_scans_without_the_cache_cache_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let (db, want) = reopened_with_tables(dir.path());
    let db = siftdb::AsyncDb::new(db);
    let owned = |chunk: Vec<(bytes::Bytes, bytes::Bytes)>| -> Entries {
        chunk
            .into_iter()
            .map(|(k, v)| (k.to_vec(), v.to_vec()))
            .collect()
    };
    let got = owned(
        db.iter()
            .fill_cache(false)
            .next_chunk(10_000)
            .await
            .unwrap(),
    );
    assert_eq!(got, want);
    let mut scan = db.prefix("k0").fill_cache(false);
    let mut backward = Vec::new();
    while let Some(entry) = scan.next_back().await {
        backward.push(entry.unwrap());
    }
    backward.reverse();
    assert_eq!(owned(backward), want);
    let txn = db.transaction();
    let scan = txn.range("k00100".."k00200").await.unwrap();
    let got = owned(scan.fill_cache(false).next_chunk(1_000).await.unwrap());
    assert_eq!(got, want[100..200].to_vec());
    assert_eq!(db.stats().block_cache_bytes, 0, "the scans cached nothing");
    assert_eq!(
        db.iter().next_chunk(10_000).await.unwrap().len(),
        want.len()
    );
    assert!(
        db.stats().block_cache_bytes > 0,
        "a scan through the cache fills it"
    );
}
