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

use std::collections::HashMap;

use super::data::{shuffle, SplitMix64, MAX_KEY_INDEX, VALUE_LEN};
use super::ycsb::{YcsbMix, YCSB_VALUE_LEN};
use super::zipfian::{Zipfian, MIXED_SEED, YCSB_ZIPFIAN_CONSTANT};

/// Seed of the shuffle that orders fillrandom's puts.
pub const LOAD_ORDER_SEED: u64 = 42;

/// Seed of the shuffle that orders every read phase.
pub const READ_ORDER_SEED: u64 = 7;
/// Seed of the txn phases' key pairs.
const TXN_SEED: u64 = 0x7478_6e73;

/// Entries one seekrandom scan asks for.
pub const SCAN_LENGTH: u64 = SCAN_ENTRIES as u64;

/// [`SCAN_LENGTH`] as a count of entries.
pub const SCAN_ENTRIES: usize = 10;

/// Bytes of a key that seekprefix scans by: `k` and the first 13 of the 15
/// digits, so each prefix names 100 consecutive key numbers, 50 of them
/// present keys.
pub const PREFIX_LEN: usize = 14;

/// Key numbers one seekprefix prefix covers: `10^(KEY_LEN - PREFIX_LEN)`.
pub const KEYS_PER_PREFIX: u64 = 100;

/// Range deletes the deleterange phase makes (fewer below N = 10,000).
pub const DELETE_RANGES: u64 = 1000;

/// In the mixed phase, op `o` is a put when `o % MIXED_PUT_EVERY == MIXED_PUT_EVERY - 1`.
pub const MIXED_PUT_EVERY: u64 = 20;

/// The largest value `--value-size` accepts: 64 MiB.
pub const MAX_VALUE_LEN: usize = 64 << 20;

/// The largest N a workload accepts: key(2N+1) must still have 15 digits.
pub const MAX_N: u64 = MAX_KEY_INDEX / 2 - 1;

/// One benchmark phase, named as in `db_bench`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Phase {
    /// Put the N present keys in load order, then flush and wait.
    FillRandom,
    /// M gets of present keys in read order (M = N unless `--ops` says).
    ReadRandom,
    /// readrandom's M keys asked in `multi_get` batches of `--batch` keys
    /// (consecutive read-order positions; the last batch may be shorter).
    MultiGetRandom,
    /// M gets of absent keys in read order.
    ReadMissing,
    /// M gets of present keys from the first 1% of the read order's used part.
    ReadHot,
    /// M/10 scans of 10 entries from present keys in read order.
    SeekRandom,
    /// The seekrandom scans backwards: M/10 scans of the 10 entries at or
    /// before present keys in read order, in descending key order.
    SeekRandomRev,
    /// M/10 scans of the first 10 entries under the 14-byte prefix of a
    /// present key, in read order.
    SeekPrefix,
    /// M scans of the empty range between an absent key and the next
    /// present key, in read order.
    SeekEmpty,
    /// M operations, 95% get / 5% put, keys from a Zipfian(0.99).
    Mixed,
    /// 10% of the present keys deleted in 1,000 range deletes (before the
    /// clock starts), then M gets of present keys in read order: a deleted
    /// key must be absent, every other key present.
    DeleteRange,
    /// M transactions, each reading two keys drawn Zipfian(0.99), writing
    /// both back changed and committing, retried on conflict.
    Txn,
    /// The txn phase with its two keys drawn uniformly.
    TxnUniform,
    /// The txn phase's transactions (same Zipfian pairs) as locking ones:
    /// both keys read for update (locked), both written back, committed;
    /// a deadlock or a lock timeout rolls back and runs it again.
    TxnLocking,
    /// YCSB's load: N records (`user` keys, 1,000-byte stamped values by
    /// default) put in record order, then flush and wait.
    YcsbLoad,
    /// YCSB workload A: 50% reads, 50% updates, scrambled Zipfian.
    YcsbA,
    /// YCSB workload B: 95% reads, 5% updates, scrambled Zipfian.
    YcsbB,
    /// YCSB workload C: reads only, scrambled Zipfian.
    YcsbC,
    /// YCSB workload D: 95% reads of the latest records, 5% inserts.
    YcsbD,
    /// YCSB workload E: 95% scans of 1..=100 records from a scrambled
    /// Zipfian start, 5% inserts.
    YcsbE,
    /// YCSB workload F: 50% reads, 50% read-modify-writes.
    YcsbF,
}

impl Phase {
    /// Every phase, in the order a run performs them.
    pub const ALL: [Phase; 14] = [
        Phase::FillRandom,
        Phase::ReadRandom,
        Phase::MultiGetRandom,
        Phase::ReadMissing,
        Phase::ReadHot,
        Phase::SeekRandom,
        Phase::SeekRandomRev,
        Phase::SeekPrefix,
        Phase::SeekEmpty,
        Phase::Mixed,
        Phase::DeleteRange,
        Phase::Txn,
        Phase::TxnUniform,
        Phase::TxnLocking,
    ];

    /// The YCSB phases (Cooper et al., SoCC 2010), in the order a run
    /// performs them: the load, then the core workloads A to F. Not in
    /// [`Phase::ALL`], which keeps the phases of `WORKLOADS.md`'s 16-byte
    /// keys.
    pub const YCSB: [Phase; 7] = [
        Phase::YcsbLoad,
        Phase::YcsbA,
        Phase::YcsbB,
        Phase::YcsbC,
        Phase::YcsbD,
        Phase::YcsbE,
        Phase::YcsbF,
    ];

    /// Every phase there is, [`Phase::ALL`] then [`Phase::YCSB`]: the order
    /// `--phases` must follow.
    pub fn every() -> impl Iterator<Item = Phase> {
        Phase::ALL.into_iter().chain(Phase::YCSB)
    }

    /// True for the YCSB phases.
    pub fn is_ycsb(self) -> bool {
        self >= Phase::YcsbLoad
    }

    /// The YCSB workload's letter (`a` … `f`); `None` for the load and
    /// the other phases.
    pub fn ycsb_letter(self) -> Option<char> {
        Some(match self {
            Phase::YcsbA => 'a',
            Phase::YcsbB => 'b',
            Phase::YcsbC => 'c',
            Phase::YcsbD => 'd',
            Phase::YcsbE => 'e',
            Phase::YcsbF => 'f',
            _ => return None,
        })
    }

    /// True for the phases that load a fresh database: fillrandom and
    /// ycsb-load (each runs once in a run of several rounds).
    pub fn is_fill(self) -> bool {
        matches!(self, Phase::FillRandom | Phase::YcsbLoad)
    }

    /// True for the phases a run may repeat on the same database (rounds,
    /// a second thread count): all but the fills and the YCSB workloads
    /// that write, whose records the next YCSB phase expects as they left
    /// them.
    pub fn repeatable(self) -> bool {
        !self.is_fill() && (!self.is_ycsb() || self == Phase::YcsbC)
    }

    /// The phase's name: `fillrandom`, `readrandom`, `multigetrandom`, `readmissing`, `readhot`,
    /// `seekrandom`, `seekrandom-rev`, `seekprefix`, `seekempty`, `mixed`,
    /// `deleterange`, `txn`, `txn-uniform`, `txn-locking`.
    pub fn name(self) -> &'static str {
        match self {
            Phase::FillRandom => "fillrandom",
            Phase::ReadRandom => "readrandom",
            Phase::MultiGetRandom => "multigetrandom",
            Phase::ReadMissing => "readmissing",
            Phase::ReadHot => "readhot",
            Phase::SeekRandom => "seekrandom",
            Phase::SeekRandomRev => "seekrandom-rev",
            Phase::SeekPrefix => "seekprefix",
            Phase::SeekEmpty => "seekempty",
            Phase::Mixed => "mixed",
            Phase::DeleteRange => "deleterange",
            Phase::Txn => "txn",
            Phase::TxnUniform => "txn-uniform",
            Phase::TxnLocking => "txn-locking",
            Phase::YcsbLoad => "ycsb-load",
            Phase::YcsbA => "ycsb-a",
            Phase::YcsbB => "ycsb-b",
            Phase::YcsbC => "ycsb-c",
            Phase::YcsbD => "ycsb-d",
            Phase::YcsbE => "ycsb-e",
            Phase::YcsbF => "ycsb-f",
        }
    }

    /// True for the phases whose operations are scans (ycsb-e: 95% of them).
    pub fn is_scan(self) -> bool {
        matches!(
            self,
            Phase::SeekRandom
                | Phase::SeekRandomRev
                | Phase::SeekPrefix
                | Phase::SeekEmpty
                | Phase::YcsbE
        )
    }

    /// True for the phases that only read and so can share their operation
    /// sequence between threads without changing what any operation sees.
    pub fn is_read_only(self) -> bool {
        matches!(
            self,
            Phase::ReadRandom
                | Phase::MultiGetRandom
                | Phase::ReadMissing
                | Phase::ReadHot
                | Phase::SeekRandom
                | Phase::SeekRandomRev
                | Phase::SeekPrefix
                | Phase::SeekEmpty
                | Phase::YcsbC
        )
    }

    /// True for every phase but the fills (fillrandom, ycsb-load): the
    /// phases whose operations `--ops` counts and before which `--cold`
    /// drops the page cache.
    pub fn is_read_phase(self) -> bool {
        !self.is_fill()
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
        Phase::every().find(|p| p.name() == s).ok_or_else(|| {
            let known: Vec<&str> = Phase::every().map(|p| p.name()).collect();
            format!("unknown phase {s:?} (known: {})", known.join(", "))
        })
    }
}

/// Checks that `phases` (as `--phases` lists them) follow the spec order
/// without repeats: mixed overwrites values the earlier phases check, so
/// order is part of the work.
pub fn check_phase_order(phases: &[Phase]) -> Result<(), String> {
    if phases.is_empty() {
        return Err("--phases is empty".to_string());
    }
    for pair in phases.windows(2) {
        if let [a, b] = pair {
            if a >= b {
                let order: Vec<&str> = Phase::every().map(|p| p.name()).collect();
                return Err(format!(
                    "--phases must follow the order {} without repeats; {b} comes after {a}",
                    order.join(",")
                ));
            }
        }
    }
    Ok(())
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

/// Bytes the harness itself holds at most for a workload of `n` keys and
/// `ops` operations per read phase (`WORKLOADS.md`, "Operations per read
/// phase"): the read order is shuffled over all `n` positions before its
/// used prefix is kept, fillrandom holds the load order (`n` positions)
/// beside that prefix, and mixed holds its `ops` drawn operations, its
/// version map and one latency sample per eight operations. Engines'
/// memory comes on top. Saturates instead of overflowing.
pub fn harness_bytes(n: u64, ops: u64) -> u64 {
    const POSITION: u64 = 8;
    // A drawn mixed op, a version-map slot (hash map overhead included) and
    // a latency sample per eight ops.
    const PER_OP: u64 = 24 + 32 + 1;
    let prefix = n.min(ops).saturating_mul(POSITION);
    let orders = n.saturating_mul(POSITION).saturating_add(prefix);
    let mixed = ops.saturating_mul(PER_OP).saturating_add(prefix);
    orders.max(mixed)
}

/// The work of one run for one N and one operation count: which key every
/// operation of every phase touches.
///
/// Holds only the part of the read order the read phases use (its first
/// `min(ops, n)` positions); the load order is shuffled when fillrandom
/// asks for it ([`Workload::load_order`]) and freed after, so a large N with
/// few operations keeps the harness small.
#[derive(Clone, Debug)]
pub struct Workload {
    n: u64,
    ops: u64,
    read_order: Vec<u64>,
    /// `--value-size`; `None`: 100 bytes for the phases of `WORKLOADS.md`,
    /// 1,000 for YCSB.
    value_len: Option<usize>,
    /// The YCSB phases the run performs, in order: each YCSB workload's
    /// records are those the ones before it left.
    ycsb_phases: Vec<Phase>,
}

impl Workload {
    /// The workload of `WORKLOADS.md` for `n` keys with `n` operations per
    /// read phase. `n` must be within `1..=MAX_N`.
    pub fn new(n: u64) -> Result<Self, String> {
        Workload::with_ops(n, n)
    }

    /// The workload for `n` keys with `ops` operations per read phase
    /// (`WORKLOADS.md`, "Operations per read phase"). Both must be within
    /// `1..=MAX_N`; memory the orders need is reserved fallibly, so a size
    /// this process cannot hold is an error, not an abort.
    pub fn with_ops(n: u64, ops: u64) -> Result<Self, String> {
        if n == 0 || n > MAX_N {
            return Err(format!("N must be within 1..={MAX_N}, got {n}"));
        }
        if ops == 0 || ops > MAX_N {
            return Err(format!(
                "operations per read phase must be within 1..={MAX_N}, got {ops}"
            ));
        }
        let mut read_order = shuffle(n, READ_ORDER_SEED)?;
        read_order.truncate(usize::try_from(n.min(ops)).unwrap_or(usize::MAX));
        read_order.shrink_to_fit();
        Ok(Workload {
            n,
            ops,
            read_order,
            value_len: None,
            ycsb_phases: Phase::YCSB.to_vec(),
        })
    }

    /// The workload with every value `len` bytes (`--value-size`): the
    /// phases of `WORKLOADS.md` write the first `len` bytes of the stream
    /// their 100-byte values are cut from, YCSB its stamped records of
    /// `len` bytes. Refuses 0 and more than 64 MiB.
    pub fn with_value_len(mut self, len: usize) -> Result<Self, String> {
        if !(1..=MAX_VALUE_LEN).contains(&len) {
            return Err(format!(
                "--value-size must be within 1..={MAX_VALUE_LEN} bytes, got {len}"
            ));
        }
        self.value_len = Some(len);
        Ok(self)
    }

    /// The workload for a run of `phases`: a YCSB workload expects the
    /// records the YCSB phases listed before it leave (without this, every
    /// YCSB phase before it in [`Phase::YCSB`] order).
    pub fn with_phases(mut self, phases: &[Phase]) -> Self {
        self.ycsb_phases = phases.iter().copied().filter(|p| p.is_ycsb()).collect();
        self
    }

    /// The YCSB phases the run performs, in order.
    pub fn ycsb_phases(&self) -> &[Phase] {
        &self.ycsb_phases
    }

    /// Bytes of every value the phases of `WORKLOADS.md` write: 100 unless
    /// `--value-size` says.
    pub fn value_len(&self) -> usize {
        self.value_len.unwrap_or(VALUE_LEN)
    }

    /// Bytes of every YCSB record: 1,000 (10 fields of 100 bytes) unless
    /// `--value-size` says.
    pub fn ycsb_value_len(&self) -> usize {
        self.value_len.unwrap_or(YCSB_VALUE_LEN)
    }

    /// Number of present keys.
    pub fn n(&self) -> u64 {
        self.n
    }

    /// Operations of each read phase but seekrandom (M; N unless given).
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// Operations `phase` performs (scans count one each): N puts for
    /// fillrandom, M for readrandom, readmissing, readhot, seekempty,
    /// mixed and deleterange (its range deletes not counted), and M/10 rounded up (at least one scan) for seekrandom and
    /// seekprefix.
    pub fn phase_ops(&self, phase: Phase) -> u64 {
        match phase {
            Phase::FillRandom => self.n,
            Phase::SeekRandom | Phase::SeekRandomRev | Phase::SeekPrefix => {
                self.ops.div_ceil(SCAN_LENGTH)
            }
            Phase::ReadRandom
            | Phase::MultiGetRandom
            | Phase::ReadMissing
            | Phase::ReadHot
            | Phase::SeekEmpty
            | Phase::Mixed
            | Phase::DeleteRange
            | Phase::Txn
            | Phase::TxnUniform
            | Phase::TxnLocking => self.ops,
            Phase::YcsbLoad => self.n,
            Phase::YcsbA
            | Phase::YcsbB
            | Phase::YcsbC
            | Phase::YcsbD
            | Phase::YcsbE
            | Phase::YcsbF => self.ops,
        }
    }

    /// Gets or scans `phase` issues: its operations less mixed's puts
    /// (fillrandom issues none).
    pub fn phase_reads(&self, phase: Phase) -> u64 {
        match phase {
            Phase::FillRandom => 0,
            Phase::Mixed => self.ops - self.ops / MIXED_PUT_EVERY,
            Phase::YcsbLoad => 0,
            // The runner counts the drawn reads exactly; this is the mix's
            // share.
            phase if phase.is_ycsb() => {
                let mix = phase.ycsb_letter().and_then(YcsbMix::of);
                let share = mix.map_or(1.0, |m| m.read + m.scan + m.read_modify_write);
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a share of a u64 count; casts saturate"
                )]
                let reads = (self.ops as f64 * share).round() as u64;
                reads
            }
            _ => self.phase_ops(phase),
        }
    }

    /// The ranges deleterange deletes, as present-item ranges `[first,
    /// past)` (present key `2i` for item `i`): `R = min(1000, max(1,
    /// N/10))` ranges, range `r` the first `D = max(1, N/(10·R))` items of
    /// stride `r·S`, `S = N/R` — at N = 1M, 1,000 ranges of 100 keys, every
    /// 1,000th item starting one: 10% of the keys.
    pub fn delete_ranges(&self) -> Vec<(u64, u64)> {
        let (ranges, stride, width) = self.delete_geometry();
        (0..ranges)
            .map(|r| (r * stride, (r * stride + width).min(self.n)))
            .collect()
    }

    /// `(R, S, D)` of [`Workload::delete_ranges`].
    fn delete_geometry(&self) -> (u64, u64, u64) {
        let ranges = (self.n / 10).clamp(1, DELETE_RANGES);
        let stride = (self.n / ranges).max(1);
        let width = (self.n / (10 * ranges)).max(1).min(stride);
        (ranges, stride, width)
    }

    /// True when deleterange's range deletes removed present item `i`.
    #[inline]
    pub fn is_range_deleted(&self, item: u64) -> bool {
        let (ranges, stride, width) = self.delete_geometry();
        item < ranges * stride && item % stride < width
    }

    /// Item numbers in the order fillrandom puts them (present key `2i`):
    /// a fresh shuffle of all N items with seed 42, made on every call.
    pub fn load_order(&self) -> Result<Vec<u64>, String> {
        shuffle(self.n, LOAD_ORDER_SEED)
    }

    /// The read-order positions the read phases use, `P = min(M, N)`.
    pub fn positions(&self) -> u64 {
        self.read_order.len() as u64
    }

    /// The first `P` items of the read order: the only ones read phases visit.
    pub fn read_order(&self) -> &[u64] {
        &self.read_order
    }

    /// The read-order position of read op `g`: `g mod P`.
    #[inline]
    pub fn read_position(&self, g: u64) -> u64 {
        let p = self.positions();
        // Only op numbers past P wrap: no division on the common path.
        if g < p {
            g
        } else {
            g % p.max(1)
        }
    }

    /// The item at read-order position `position`, if it is one of the `P`.
    #[inline]
    fn read_item(&self, position: u64) -> Option<u64> {
        self.read_order
            .get(usize::try_from(position).ok()?)
            .copied()
    }

    /// Key number read by readrandom op `g`: `2·read_order[g mod P]`.
    #[inline]
    pub fn read_key_index(&self, g: u64) -> Option<u64> {
        Some(2 * self.read_item(self.read_position(g))?)
    }

    /// Key number read by readmissing op `g`: `2·read_order[g mod P] + 1`, absent.
    #[inline]
    pub fn missing_key_index(&self, g: u64) -> Option<u64> {
        Some(self.read_key_index(g)? + 1)
    }

    /// How many read-order positions readhot cycles through: `P/100`, at
    /// least 1, so each hot key is read about 100 times.
    pub fn hot_positions(&self) -> u64 {
        (self.positions() / 100).max(1)
    }

    /// Key number read by readhot op `g`: `2·read_order[g mod (P/100)]`.
    #[inline]
    pub fn hot_key_index(&self, g: u64) -> Option<u64> {
        Some(2 * self.read_item(g % self.hot_positions())?)
    }

    /// Scan `s` of seekrandom: the item it starts at (the present key
    /// `2·read_order[s mod P]`) and how many entries it must return,
    /// `min(10, N - item)`: the start key and the present keys after it.
    #[inline]
    pub fn scan(&self, s: u64) -> Option<(u64, u64)> {
        let item = self.read_item(self.read_position(s))?;
        Some((item, SCAN_LENGTH.min(self.n - item)))
    }

    /// Scan `s` of seekrandom-rev: the item it starts at (the same present
    /// key as seekrandom's scan `s`) and how many entries it must return
    /// going down, `min(10, item + 1)`: the start key and the present keys
    /// before it.
    #[inline]
    pub fn scan_rev(&self, s: u64) -> Option<(u64, u64)> {
        let item = self.read_item(self.read_position(s))?;
        Some((item, SCAN_LENGTH.min(item + 1)))
    }

    /// Scan `s` of seekprefix: the prefix it scans is the first
    /// [`PREFIX_LEN`] bytes of the present key `2·read_order[s mod P]`,
    /// i.e. the key numbers `100·g .. 100·g + 100` for `g = ⌊2i/100⌋`; it
    /// must return the first `min(10, present keys under it)` of them.
    /// Returns the key number whose key gives the prefix, the item of the
    /// first present key under it (`50·g`), and how many entries.
    #[inline]
    pub fn prefix_scan(&self, s: u64) -> Option<(u64, u64, u64)> {
        let item = self.read_item(self.read_position(s))?;
        let j = 2 * item;
        let first_item = j / KEYS_PER_PREFIX * (KEYS_PER_PREFIX / 2);
        let under = (first_item + KEYS_PER_PREFIX / 2).min(self.n) - first_item;
        Some((j, first_item, SCAN_LENGTH.min(under)))
    }

    /// Scan `g` of seekempty: the range `key(2i+1) .. key(2i+2)` (end
    /// excluded) for `i = read_order[g mod P]`, which holds no key.
    /// Returns the range's first key number, `2i + 1`.
    #[inline]
    pub fn empty_range(&self, g: u64) -> Option<u64> {
        self.missing_key_index(g)
    }

    /// The mixed phase's M operations, drawn before any clock starts: item
    /// `i` from YCSB's Zipfian(0.99) over `0..N` with uniform input from
    /// splitmix64 seeded with 99 (one output per op, the first for op 0);
    /// op `o` is a put when `o % 20 == 19`; each put writes the next version
    /// of its key and each get expects the latest.
    pub fn mixed_ops(&self) -> Result<Vec<MixedOp>, String> {
        let zipf = Zipfian::new(self.n, YCSB_ZIPFIAN_CONSTANT);
        let count = usize::try_from(self.ops).map_err(|_| self.cannot_draw())?;
        let mut ops = Vec::new();
        ops.try_reserve_exact(count)
            .map_err(|_| self.cannot_draw())?;
        // Only keys that were put have a version other than 0.
        let mut versions: HashMap<u64, u64> = HashMap::new();
        let mut rng = SplitMix64::new(MIXED_SEED);
        for o in 0..self.ops {
            let item = zipf.sample(rng.next_unit());
            let is_put = o % MIXED_PUT_EVERY == MIXED_PUT_EVERY - 1;
            let version = if is_put {
                let v = versions.entry(item).or_insert(0);
                *v += 1;
                *v
            } else {
                versions.get(&item).copied().unwrap_or(0)
            };
            ops.push(MixedOp {
                key_index: 2 * item,
                version,
                is_put,
            });
        }
        Ok(ops)
    }

    /// The txn phases' key pairs: per transaction two distinct present
    /// keys' numbers `2i`, items drawn Zipfian(0.99) (txn, txn-locking) or
    /// uniformly (txn-uniform) from a seed of their own.
    pub fn txn_pairs(&self, phase: Phase) -> Result<Vec<(u64, u64)>, String> {
        let zipf =
            (phase != Phase::TxnUniform).then(|| Zipfian::new(self.n, YCSB_ZIPFIAN_CONSTANT));
        let count = usize::try_from(self.ops).map_err(|_| self.cannot_draw())?;
        let mut pairs = Vec::new();
        pairs
            .try_reserve_exact(count)
            .map_err(|_| self.cannot_draw())?;
        let mut rng = SplitMix64::new(TXN_SEED);
        let mut draw = || match &zipf {
            Some(zipf) => zipf.sample(rng.next_unit()),
            None => rng.below(self.n),
        };
        for _ in 0..self.ops {
            let a = draw();
            // Two distinct keys (one key alone when N = 1).
            let b = (0..64).map(|_| draw()).find(|&b| b != a).unwrap_or(a);
            pairs.push((2 * a, 2 * b));
        }
        Ok(pairs)
    }

    fn cannot_draw(&self) -> String {
        format!("cannot allocate the mixed phase's {} operations", self.ops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deleterange_deletes_a_tenth_in_a_thousand_ranges() {
        let w = Workload::new(1_000_000).unwrap();
        let ranges = w.delete_ranges();
        assert_eq!(ranges.len(), 1000);
        assert!(ranges.iter().all(|&(a, b)| b - a == 100));
        let deleted = (0..1_000_000).filter(|&i| w.is_range_deleted(i)).count();
        assert_eq!(deleted, 100_000);
        for (a, b) in ranges {
            assert!(w.is_range_deleted(a) && w.is_range_deleted(b - 1) && !w.is_range_deleted(b));
        }
        for n in [1, 9, 10, 999, 12_345] {
            let w = Workload::new(n).unwrap();
            let by_ranges: u64 = w.delete_ranges().iter().map(|(a, b)| b - a).sum();
            let by_rule = (0..n).filter(|&i| w.is_range_deleted(i)).count() as u64;
            assert_eq!(by_ranges, by_rule, "n = {n}");
            assert!(by_rule >= 1 && by_rule < n.max(2), "n = {n}: {by_rule}");
        }
    }

    #[test]
    fn phase_names_round_trip_in_spec_order() {
        let names: Vec<&str> = Phase::ALL.iter().map(|p| p.name()).collect();
        assert_eq!(
            names,
            [
                "fillrandom",
                "readrandom",
                "multigetrandom",
                "readmissing",
                "readhot",
                "seekrandom",
                "seekrandom-rev",
                "seekprefix",
                "seekempty",
                "mixed",
                "deleterange",
                "txn",
                "txn-uniform",
                "txn-locking"
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
    fn phases_must_follow_the_spec_order() {
        assert!(check_phase_order(&Phase::ALL).is_ok());
        assert!(check_phase_order(&[Phase::ReadRandom, Phase::Mixed]).is_ok());
        assert!(check_phase_order(&[]).is_err());
        let err = check_phase_order(&[Phase::Mixed, Phase::ReadRandom]).unwrap_err();
        assert!(err.contains("readrandom comes after mixed"), "{err}");
        assert!(check_phase_order(&[Phase::ReadHot, Phase::ReadHot]).is_err());
    }

    #[test]
    fn op_counts_follow_the_spec() {
        let w = Workload::new(2000).unwrap();
        assert_eq!(w.ops(), 2000);
        assert_eq!(w.phase_ops(Phase::FillRandom), 2000);
        assert_eq!(w.phase_ops(Phase::ReadRandom), 2000);
        assert_eq!(w.phase_ops(Phase::SeekRandom), 200);
        assert_eq!(w.phase_ops(Phase::SeekPrefix), 200);
        assert_eq!(w.phase_ops(Phase::SeekEmpty), 2000);
        assert_eq!(w.phase_ops(Phase::Mixed), 2000);
        assert_eq!(w.phase_reads(Phase::Mixed), 1900);
        assert_eq!(w.phase_reads(Phase::SeekRandom), 200);
        assert_eq!(w.phase_reads(Phase::FillRandom), 0);
        // M/10 rounded up: a tiny run still scans.
        let tiny = Workload::new(9).unwrap();
        assert_eq!(tiny.phase_ops(Phase::SeekRandom), 1);
        assert_eq!(Workload::new(1).unwrap().phase_ops(Phase::SeekRandom), 1);
        assert_eq!(Workload::new(11).unwrap().phase_ops(Phase::SeekRandom), 2);
        // --ops changes the read phases only.
        let w = Workload::with_ops(2000, 300).unwrap();
        assert_eq!(w.phase_ops(Phase::FillRandom), 2000);
        for phase in [
            Phase::ReadRandom,
            Phase::ReadMissing,
            Phase::ReadHot,
            Phase::Mixed,
        ] {
            assert_eq!(w.phase_ops(phase), 300, "{phase}");
        }
        assert_eq!(w.phase_ops(Phase::SeekRandom), 30);
        assert_eq!(w.phase_reads(Phase::Mixed), 285);
        assert!(Phase::ALL
            .iter()
            .all(|p| p.is_read_phase() == (*p != Phase::FillRandom)));
    }

    #[test]
    fn sizes_out_of_range_are_refused() {
        assert!(Workload::new(0).is_err());
        assert!(Workload::new(MAX_N + 1).is_err());
        assert!(Workload::new(1).is_ok());
        assert!(Workload::with_ops(10, 0).is_err());
        assert!(Workload::with_ops(10, MAX_N + 1).is_err());
        // Within MAX_N but beyond any memory: an error, not an abort.
        let err = Workload::new(MAX_N).unwrap_err();
        assert!(err.contains("cannot allocate"), "{err}");
    }

    #[test]
    fn harness_memory_grows_with_n_and_ops_and_saturates() {
        assert!(harness_bytes(1_000_000, 1_000_000) >= 16_000_000);
        assert!(harness_bytes(20_000_000, 200_000) >= 160_000_000);
        assert!(harness_bytes(20_000_000, 200_000) < 200_000_000);
        assert!(harness_bytes(1000, 1_000_000_000) > harness_bytes(1000, 1000));
        assert_eq!(harness_bytes(u64::MAX, u64::MAX), u64::MAX);
    }

    #[test]
    fn key_indices_follow_the_orders() {
        let w = Workload::new(1000).unwrap();
        assert_eq!(w.load_order().unwrap(), shuffle(1000, 42).unwrap());
        assert_eq!(w.read_order(), shuffle(1000, 7).unwrap().as_slice());
        assert_eq!(w.positions(), 1000);
        assert_eq!(w.read_key_index(3), Some(2 * w.read_order()[3]));
        assert_eq!(w.missing_key_index(3), Some(2 * w.read_order()[3] + 1));
        assert_eq!(w.hot_positions(), 10);
        assert_eq!(w.hot_key_index(13), w.read_key_index(3));
        let (item, len) = w.scan(0).unwrap();
        assert_eq!(item, w.read_order()[0]);
        assert_eq!(len, 10.min(1000 - item));
    }

    /// `WORKLOADS.md`, "Operations per read phase": op `g` uses read-order
    /// position `g mod min(M, N)`; readhot cycles through the first
    /// `min(M, N)/100` of those; scans start at position `s mod min(M, N)`.
    #[test]
    fn ops_use_the_documented_read_order_positions() {
        let full = shuffle(1000, 7).unwrap();
        let at = |position: u64| full[usize::try_from(position).unwrap()];
        for (ops, positions) in [(1, 1), (99, 99), (250, 250), (1000, 1000), (2500, 1000)] {
            let w = Workload::with_ops(1000, ops).unwrap();
            assert_eq!(w.positions(), positions, "M = {ops}");
            assert_eq!(w.read_order(), &full[..usize::try_from(positions).unwrap()]);
            for g in 0..ops {
                let item = at(g % positions);
                assert_eq!(w.read_position(g), g % positions);
                assert_eq!(w.read_key_index(g), Some(2 * item), "M = {ops}, g = {g}");
                assert_eq!(w.missing_key_index(g), Some(2 * item + 1));
                let hot = (positions / 100).max(1);
                assert_eq!(w.hot_positions(), hot);
                assert_eq!(w.hot_key_index(g), Some(2 * at(g % hot)));
            }
            for s in 0..w.phase_ops(Phase::SeekRandom) {
                let item = at(s % positions);
                assert_eq!(w.scan(s), Some((item, 10.min(1000 - item))));
            }
        }
        // M = N is the workload without --ops, op for op.
        let a = Workload::new(1000).unwrap();
        let b = Workload::with_ops(1000, 1000).unwrap();
        assert_eq!(a.read_order(), b.read_order());
        assert_eq!(a.mixed_ops().unwrap(), b.mixed_ops().unwrap());
    }

    #[test]
    fn readhot_reads_each_hot_key_about_a_hundred_times() {
        for w in [
            Workload::new(2000).unwrap(),
            Workload::with_ops(1_000_000, 2000).unwrap(),
        ] {
            let mut counts = std::collections::HashMap::new();
            for g in 0..2000 {
                *counts.entry(w.hot_key_index(g).unwrap()).or_insert(0) += 1;
            }
            assert_eq!(counts.len(), 20);
            assert!(counts.values().all(|&c| c == 100));
        }
        assert_eq!(Workload::new(50).unwrap().hot_positions(), 1);
    }

    #[test]
    fn scans_near_the_end_return_what_is_left() {
        let w = Workload::new(2000).unwrap();
        let mut short = 0;
        for s in 0..200 {
            let (item, len) = w.scan(s).unwrap();
            assert_eq!(len, 10.min(2000 - item));
            short += u64::from(len < 10);
        }
        let last = w.read_order().iter().position(|&i| i == 1999).unwrap();
        assert_eq!(w.scan(last as u64), Some((1999, 1)));
        assert!(short <= 9);
        // N = 1: one scan, of the one key.
        let one = Workload::new(1).unwrap();
        assert_eq!(one.scan(0), Some((0, 1)));
    }

    #[test]
    fn prefix_scans_and_empty_ranges_follow_the_read_order() {
        let w = Workload::new(1030).unwrap();
        let mut short = 0;
        for s in 0..w.phase_ops(Phase::SeekPrefix) {
            let item = w.read_order()[usize::try_from(s).unwrap()];
            let (j, first, len) = w.prefix_scan(s).unwrap();
            assert_eq!(j, 2 * item);
            // The prefix of key(j) is that of key(2·first), and the keys
            // under it are the 50 items from `first`, those below N.
            let key = crate::key(j);
            assert_eq!(crate::key(2 * first)[..PREFIX_LEN], key[..PREFIX_LEN]);
            assert!(first == 0 || crate::key(2 * first - 2)[..PREFIX_LEN] != key[..PREFIX_LEN]);
            let under = (first..first + 50).filter(|&i| i < 1030).count() as u64;
            assert_eq!(len, 10.min(under));
            short += u64::from(len < 10);
        }
        // Items 1000..1030: the last prefix holds 30 keys, all full scans.
        assert_eq!(short, 0);
        let tiny = Workload::new(3).unwrap();
        assert_eq!(
            tiny.prefix_scan(0).map(|(_, first, len)| (first, len)),
            Some((0, 3))
        );
        for g in 0..100 {
            let start = w.empty_range(g).unwrap();
            assert_eq!(start, 2 * w.read_order()[usize::try_from(g).unwrap()] + 1);
        }
    }

    #[test]
    fn mixed_ops_put_every_twentieth_and_track_versions() {
        let w = Workload::new(2000).unwrap();
        let ops = w.mixed_ops().unwrap();
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
        assert!(ops.iter().zip(&items).all(|(op, i)| op.key_index == 2 * i));
        assert_eq!(w.mixed_ops().unwrap(), ops);
        // --ops draws M ops over the same N items: a prefix of the same stream.
        let fewer = Workload::with_ops(2000, 500).unwrap().mixed_ops().unwrap();
        assert_eq!(fewer, ops[..500]);
        let more = Workload::with_ops(2000, 5000).unwrap().mixed_ops().unwrap();
        assert_eq!(more.len(), 5000);
        assert_eq!(more[..2000], ops[..]);
        assert_eq!(more.iter().filter(|o| o.is_put).count(), 250);
    }
}
