//! `DbIterator::seek` and `seek_for_prev` against a `BTreeMap` model: after
//! any sequence of seeks, `next` and `next_back` on a bounded scan over
//! memtables and tables (with deletes and range deletes), each side returns
//! what the model says from its position, and the two sides never pass
//! each other.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

use siftdb::{Db, Options};
use siftdb_testkit::SplitMix64;

const KEYS: u64 = 400;

fn key(i: u64) -> Vec<u8> {
    format!("k{i:04}").into_bytes()
}

/// The model's scan: the keys within `range`, and each side's position.
struct ModelScan<'m> {
    model: &'m BTreeMap<Vec<u8>, Vec<u8>>,
    range: (Bound<Vec<u8>>, Bound<Vec<u8>>),
    /// Keys before this one are behind the forward side (exclusive bound).
    front: Bound<Vec<u8>>,
    /// Keys after this one are behind the backward side.
    back: Bound<Vec<u8>>,
    /// The last key each side returned: the other stops there.
    front_taken: Option<Vec<u8>>,
    back_taken: Option<Vec<u8>>,
    /// A side that returned `None` returns `None` until it is sought.
    front_done: bool,
    back_done: bool,
    /// The key each side was last sought to: the other stops short of it.
    front_floor: Option<Vec<u8>>,
    back_ceiling: Option<Vec<u8>>,
}

impl ModelScan<'_> {
    fn next(&mut self) -> Option<Vec<u8>> {
        let found = self.front_next();
        self.front_done = found.is_none();
        found
    }

    fn front_next(&mut self) -> Option<Vec<u8>> {
        if self.front_done {
            return None;
        }
        let (k, _) = self
            .model
            .range::<Vec<u8>, _>((self.front.clone(), Bound::Unbounded))
            .find(|(k, _)| self.range.contains(*k))?;
        if self.back_taken.as_ref().is_some_and(|b| k >= b)
            || self.back_ceiling.as_ref().is_some_and(|c| k > c)
        {
            return None;
        }
        self.front = Bound::Excluded(k.clone());
        self.front_taken = Some(k.clone());
        Some(k.clone())
    }

    fn next_back(&mut self) -> Option<Vec<u8>> {
        let found = self.back_next();
        self.back_done = found.is_none();
        found
    }

    fn back_next(&mut self) -> Option<Vec<u8>> {
        if self.back_done {
            return None;
        }
        let (k, _) = self
            .model
            .range::<Vec<u8>, _>((Bound::Unbounded, self.back.clone()))
            .rev()
            .find(|(k, _)| self.range.contains(*k))?;
        if self.front_taken.as_ref().is_some_and(|f| k <= f)
            || self.front_floor.as_ref().is_some_and(|f| k < f)
        {
            return None;
        }
        self.back = Bound::Excluded(k.clone());
        self.back_taken = Some(k.clone());
        Some(k.clone())
    }

    fn seek(&mut self, to: &[u8]) {
        self.front = Bound::Included(to.to_vec());
        self.front_taken = None;
        self.front_done = false;
        self.front_floor = Some(to.to_vec());
    }

    fn seek_for_prev(&mut self, to: &[u8]) {
        self.back = Bound::Included(to.to_vec());
        self.back_taken = None;
        self.back_done = false;
        self.back_ceiling = Some(to.to_vec());
    }
}

fn bound(rng: &mut SplitMix64) -> Bound<Vec<u8>> {
    match rng.next() % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(key(rng.next() % KEYS)),
        _ => Bound::Excluded(key(rng.next() % KEYS)),
    }
}

#[test]
fn seeks_agree_with_the_model() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(
        dir.path(),
        Options::default()
            .memtable_bytes(8 << 10)
            .table_target_bytes(8 << 10),
    )
    .unwrap();
    let mut model = BTreeMap::new();
    let mut rng = SplitMix64::new(7);
    for round in 0..30u64 {
        for _ in 0..100 {
            let i = rng.next() % KEYS;
            match rng.next() % 8 {
                0 => {
                    db.delete(key(i)).unwrap();
                    model.remove(&key(i));
                }
                1 => {
                    let end = (i + rng.next() % 20).min(KEYS);
                    db.delete_range(key(i)..key(end)).unwrap();
                    model.retain(|k, _| !(key(i)..key(end)).contains(k));
                }
                _ => {
                    let v = round.to_be_bytes().to_vec();
                    db.put(key(i), &v).unwrap();
                    model.insert(key(i), v);
                }
            }
        }
        if round % 5 == 4 {
            db.flush().unwrap();
        }
        for _ in 0..20 {
            let (lo, hi) = (bound(&mut rng), bound(&mut rng));
            let mut scan = db.range::<Vec<u8>, _>((lo.clone(), hi.clone()));
            let mut want = ModelScan {
                model: &model,
                range: (lo.clone(), hi.clone()),
                front: lo.clone(),
                back: hi.clone(),
                front_taken: None,
                back_taken: None,
                front_done: false,
                back_done: false,
                front_floor: None,
                back_ceiling: None,
            };
            let mut log: Vec<String> = Vec::new();
            for step in 0..30 {
                let what =
                    format!("round {round}, range {lo:?}..{hi:?}, step {step}, after {log:?}");
                match rng.next() % 6 {
                    0 => {
                        let to = key(rng.next() % KEYS);
                        scan.seek(&to);
                        log.push(format!("seek {}", String::from_utf8_lossy(&to)));
                        // The model's front starts at the range's start at least.
                        want.seek(&to);
                        if let Bound::Included(s) | Bound::Excluded(s) = &lo {
                            if to < *s {
                                want.front = lo.clone();
                            }
                        }
                    }
                    1 => {
                        let to = key(rng.next() % KEYS);
                        scan.seek_for_prev(&to);
                        log.push(format!("seek_for_prev {}", String::from_utf8_lossy(&to)));
                        want.seek_for_prev(&to);
                        if let Bound::Included(e) | Bound::Excluded(e) = &hi {
                            if to > *e {
                                want.back = hi.clone();
                            }
                        }
                    }
                    2 | 3 => {
                        let got = scan.next().transpose().unwrap().map(|(k, _)| k.to_vec());
                        assert_eq!(got, want.next(), "{what}: next");
                        log.push(format!(
                            "next {:?}",
                            got.map(|k| String::from_utf8_lossy(&k).to_string())
                        ));
                    }
                    _ => {
                        let got = scan
                            .next_back()
                            .transpose()
                            .unwrap()
                            .map(|(k, _)| k.to_vec());
                        assert_eq!(got, want.next_back(), "{what}: next_back");
                        log.push(format!(
                            "back {:?}",
                            got.map(|k| String::from_utf8_lossy(&k).to_string())
                        ));
                    }
                }
            }
        }
    }
}
