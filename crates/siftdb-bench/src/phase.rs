//! The phases and the exact operation sequence of each.
//!
//! Owns: [`Phase`] (names and order from `WORKLOADS.md`) and [`Workload`],
//! which holds the load and read orders for one N and answers, for every
//! operation number of every phase, which key it touches and what it must
//! see — so the siftdb runner and the peers crate cannot disagree.
//! Must never: time anything or touch an engine; everything here is
//! computed before a clock starts.

use std::fmt;
use std::str::FromStr;

use super::data::{shuffle, MAX_KEY_INDEX};
use super::zipfian::{Zipfian, MIXED_SEED, YCSB_ZIPFIAN_CONSTANT};

/// Seed of the shuffle that orders fillrandom's puts.
pub const LOAD_ORDER_SEED: u64 = 42;

/// Seed of the shuffle that orders every read phase.
pub const READ_ORDER_SEED: u64 = 7;

/// Entries one seekrandom scan asks for.
pub const SCAN_LENGTH: u64 = SCAN_ENTRIES as u64;

/// [`SCAN_LENGTH`] as a count of entries.
pub const SCAN_ENTRIES: usize = 10;

/// In the mixed phase, op `o` is a put when `o % MIXED_PUT_EVERY == MIXED_PUT_EVERY - 1`.
pub const MIXED_PUT_EVERY: u64 = 20;

/// The largest N a workload accepts: key(2N+1) must still have 15 digits.
pub const MAX_N: u64 = MAX_KEY_INDEX / 2 - 1;

/// One benchmark phase, named as in `db_bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Put the N present keys in load order, then flush and wait.
    FillRandom,
    /// N gets of present keys in read order.
    ReadRandom,
    /// N gets of absent keys in read order.
    ReadMissing,
    /// N gets of present keys from the first 1% of read order.
    ReadHot,
    /// N/10 scans of 10 entries from present keys in read order.
    SeekRandom,
    /// N operations, 95% get / 5% put, keys from a Zipfian(0.99).
    Mixed,
}

impl Phase {
    /// Every phase, in the order a run performs them.
    pub const ALL: [Phase; 6] = [
        Phase::FillRandom,
        Phase::ReadRandom,
        Phase::ReadMissing,
        Phase::ReadHot,
        Phase::SeekRandom,
        Phase::Mixed,
    ];

    /// The phase's name: `fillrandom`, `readrandom`, `readmissing`, `readhot`,
    /// `seekrandom`, `mixed`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::FillRandom => "fillrandom",
            Phase::ReadRandom => "readrandom",
            Phase::ReadMissing => "readmissing",
            Phase::ReadHot => "readhot",
            Phase::SeekRandom => "seekrandom",
            Phase::Mixed => "mixed",
        }
    }

    /// Operations the phase performs for `n` keys (scans count one each).
    pub fn ops(self, n: u64) -> u64 {
        match self {
            Phase::SeekRandom => n / SCAN_LENGTH,
            _ => n,
        }
    }

    /// True for the phases that only read and so can share their operation
    /// sequence between threads without changing what any operation sees.
    pub fn is_read_only(self) -> bool {
        matches!(
            self,
            Phase::ReadRandom | Phase::ReadMissing | Phase::ReadHot | Phase::SeekRandom
        )
    }
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Phase {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Phase::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| {
                let known: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
                format!("unknown phase {s:?} (known: {})", known.join(", "))
            })
    }
}

/// One operation of the mixed phase.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MixedOp {
    /// The key's number `j = 2i`, for the Zipfian item `i`.
    pub key_index: u64,
    /// For a put, the version it writes (1 for the first put to the key);
    /// for a get, the latest version written before it (0 = `value(j)`).
    pub version: u64,
    /// Put or get.
    pub is_put: bool,
}

/// The load and read orders for one N: everything a phase needs to know
/// which key each operation touches.
#[derive(Clone, Debug)]
pub struct Workload {
    n: u64,
    load_order: Vec<u64>,
    read_order: Vec<u64>,
}

impl Workload {
    /// Shuffles `0..n` twice (seeds 42 and 7). `n` must be within `1..=MAX_N`.
    pub fn new(n: u64) -> Result<Self, String> {
        if n == 0 || n > MAX_N {
            return Err(format!("N must be within 1..={MAX_N}, got {n}"));
        }
        Ok(Workload {
            n,
            load_order: shuffle(n, LOAD_ORDER_SEED),
            read_order: shuffle(n, READ_ORDER_SEED),
        })
    }

    /// Number of present keys.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Item numbers in the order fillrandom puts them (present key `2i`).
    pub fn load_order(&self) -> &[u64] {
        &self.load_order
    }

    /// Item numbers in the order the read phases visit them.
    pub fn read_order(&self) -> &[u64] {
        &self.read_order
    }

    /// Key number put by fillrandom op `p`: `2·load_order[p]`.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        clippy::cast_possible_truncation,
        reason = "positions are below N: the runner asks only positions of its phase, and N fits in memory"
    )]
    pub fn fill_key_index(&self, p: u64) -> u64 {
        2 * self.load_order[p as usize]
    }

    /// Key number read by readrandom op `g`: `2·read_order[g]`.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        clippy::cast_possible_truncation,
        reason = "positions are below N: the runner asks only positions of its phase, and N fits in memory"
    )]
    pub fn read_key_index(&self, g: u64) -> u64 {
        2 * self.read_order[g as usize]
    }

    /// Key number read by readmissing op `g`: `2·read_order[g] + 1`, absent.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        clippy::cast_possible_truncation,
        reason = "positions are below N: the runner asks only positions of its phase, and N fits in memory"
    )]
    pub fn missing_key_index(&self, g: u64) -> u64 {
        2 * self.read_order[g as usize] + 1
    }

    /// How many read-order positions readhot cycles through: N/100, at least 1.
    pub fn hot_positions(&self) -> u64 {
        (self.n / 100).max(1)
    }

    /// Key number read by readhot op `g`: read-order position `g mod (N/100)`.
    #[inline]
    pub fn hot_key_index(&self, g: u64) -> u64 {
        self.read_key_index(g % self.hot_positions())
    }

    /// Scan `s` of seekrandom: the item it starts at (the present key
    /// `2·read_order[s]`) and how many entries it must return,
    /// `min(10, N - item)`: the start key and the present keys after it.
    #[inline]
    #[expect(
        clippy::indexing_slicing,
        clippy::cast_possible_truncation,
        reason = "positions are below N: the runner asks only positions of its phase, and N fits in memory"
    )]
    pub fn scan(&self, s: u64) -> (u64, u64) {
        let item = self.read_order[s as usize];
        (item, SCAN_LENGTH.min(self.n - item))
    }

    /// The mixed phase's N operations, drawn before any clock starts: item
    /// `i` from YCSB's Zipfian(0.99) over `0..N` with uniform input from
    /// splitmix64 seeded with 99 (one output per op, the first for op 0);
    /// op `o` is a put when `o % 20 == 19`; each put writes the next version
    /// of its key and each get expects the latest.
    #[expect(
        clippy::indexing_slicing,
        clippy::cast_possible_truncation,
        reason = "positions are below N: the runner asks only positions of its phase, and N fits in memory"
    )]
    pub fn mixed_ops(&self) -> Vec<MixedOp> {
        let zipf = Zipfian::new(self.n, YCSB_ZIPFIAN_CONSTANT);
        let items = zipf.draws(self.n, MIXED_SEED);
        let mut versions = vec![0u64; self.n as usize];
        items
            .into_iter()
            .enumerate()
            .map(|(o, item)| {
                let is_put = o as u64 % MIXED_PUT_EVERY == MIXED_PUT_EVERY - 1;
                let version = &mut versions[item as usize];
                if is_put {
                    *version += 1;
                }
                MixedOp {
                    key_index: 2 * item,
                    version: *version,
                    is_put,
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn phase_names_round_trip_in_spec_order() {
        let names: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            [
                "fillrandom",
                "readrandom",
                "readmissing",
                "readhot",
                "seekrandom",
                "mixed"
            ]
        );
        for p in Phase::ALL {
            assert_eq!(p.name().parse::<Phase>().unwrap(), p);
            assert_eq!(p.to_string(), p.name());
        }
        let err = "readall".parse::<Phase>().unwrap_err();
        assert!(
            err.contains("readall") && err.contains("seekrandom"),
            "{err}"
        );
        assert!(Phase::ALL.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn op_counts_follow_the_spec() {
        assert_eq!(Phase::FillRandom.ops(2000), 2000);
        assert_eq!(Phase::SeekRandom.ops(2000), 200);
        assert_eq!(Phase::SeekRandom.ops(9), 0);
        assert_eq!(Phase::Mixed.ops(2000), 2000);
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        assert!(Workload::new(0).is_err());
        assert!(Workload::new(MAX_N + 1).is_err());
        assert!(Workload::new(1).is_ok());
    }

    #[test]
    fn key_indices_follow_the_orders() {
        let w = Workload::new(1000).unwrap();
        assert_eq!(w.load_order(), shuffle(1000, 42).as_slice());
        assert_eq!(w.read_order(), shuffle(1000, 7).as_slice());
        assert_eq!(w.fill_key_index(3), 2 * w.load_order()[3]);
        assert_eq!(w.read_key_index(3), 2 * w.read_order()[3]);
        assert_eq!(w.missing_key_index(3), 2 * w.read_order()[3] + 1);
        assert_eq!(w.hot_positions(), 10);
        assert_eq!(w.hot_key_index(13), w.read_key_index(3));
        let (item, len) = w.scan(0);
        assert_eq!(item, w.read_order()[0]);
        assert_eq!(len, 10.min(1000 - item));
    }

    #[test]
    fn readhot_reads_each_hot_key_about_a_hundred_times() {
        let w = Workload::new(2000).unwrap();
        let mut counts = std::collections::HashMap::new();
        for g in 0..2000 {
            *counts.entry(w.hot_key_index(g)).or_insert(0) += 1;
        }
        assert_eq!(counts.len(), 20);
        assert!(counts.values().all(|&c| c == 100));
        assert_eq!(Workload::new(50).unwrap().hot_positions(), 1);
    }

    #[test]
    fn scans_near_the_end_return_what_is_left() {
        let w = Workload::new(2000).unwrap();
        let mut short = 0;
        for s in 0..200 {
            let (item, len) = w.scan(s);
            assert_eq!(len, 10.min(2000 - item));
            short += u64::from(len < 10);
        }
        let last = w.read_order().iter().position(|&i| i == 1999).unwrap();
        assert_eq!(w.scan(last as u64), (1999, 1));
        assert!(short <= 9);
    }

    #[test]
    fn mixed_ops_put_every_twentieth_and_track_versions() {
        let w = Workload::new(2000).unwrap();
        let ops = w.mixed_ops();
        assert_eq!(ops.len(), 2000);
        assert_eq!(ops.iter().filter(|o| o.is_put).count(), 100);
        let mut latest = std::collections::HashMap::new();
        for (o, op) in ops.iter().enumerate() {
            assert_eq!(op.is_put, o % 20 == 19);
            assert_eq!(op.key_index % 2, 0);
            assert!(op.key_index < 4000);
            let v = latest.entry(op.key_index).or_insert(0u64);
            if op.is_put {
                *v += 1;
            }
            assert_eq!(op.version, *v);
        }
        // Zipfian: item 0 (key 0) is the hottest and gets puts beyond version 1.
        assert!(latest[&0] > 1, "{}", latest[&0]);
        let zipf = Zipfian::new(2000, YCSB_ZIPFIAN_CONSTANT);
        let items = zipf.draws(2000, MIXED_SEED);
        assert!(ops.iter().zip(items).all(|(op, i)| op.key_index == 2 * i));
        assert_eq!(w.mixed_ops(), ops);
    }
}
