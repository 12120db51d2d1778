//! YCSB's core workloads (Cooper et al., SoCC 2010): their keys, their
//! stamped records, and the exact operation sequence of every workload.
//!
//! Owns: [`ycsb_key`] (`user` and the FNV-64 hash of the record number,
//! as YCSB's hashed inserts), [`ycsb_value_into`] and
//! [`ycsb_value_matches`] (a record carries its record number and version,
//! so a read can tell a wrong, stale or foreign value from the right
//! one), [`YcsbState`] (records and the latest version of each) and
//! [`draw_ycsb`], which draws a workload's operations over a state and
//! advances it: which record each operation touches and what it must see.
//! Must never: time anything or touch an engine; everything here is
//! computed before a clock starts. The draws are deterministic, so every
//! engine of a run gets the very same operations.

use std::collections::HashMap;

use super::data::SplitMix64;
use super::zipfian::{Zipfian, YCSB_ZIPFIAN_CONSTANT};

/// Bytes of a YCSB record by default: 10 fields of 100 bytes.
pub const YCSB_VALUE_LEN: usize = 1000;

/// Bytes of a YCSB key: `user` and 20 zero-padded decimal digits.
pub const YCSB_KEY_LEN: usize = 24;

/// Bytes at the front of every record: its record number and version,
/// little-endian. A value size below this is refused for YCSB.
pub const YCSB_STAMP_LEN: usize = 16;

/// Longest scan of workload E (YCSB's `maxscanlength`); lengths are
/// uniform over `1..=100`.
pub const YCSB_MAX_SCAN: u64 = 100;

/// YCSB's `ScrambledZipfianGenerator`: a Zipfian over this many items,
/// hashed onto the records.
const SCRAMBLED_ITEMS: u64 = 10_000_000_000;

/// `zeta(10^10, 0.99)`, YCSB's precomputed `ZETAN`.
const SCRAMBLED_ZETAN: f64 = 26.469_028_201_783_02;

/// Seed of workload A's draws; B … F use the next seeds.
const YCSB_SEED: u64 = 0x5943_5342;

/// Draws for a record that exists before giving up and folding the draw
/// onto the records (YCSB redraws until one does).
const MAX_REDRAWS: u32 = 64;

/// YCSB's 64-bit FNV-1a over the eight little-endian bytes of `value`,
/// then `Math.abs` (`Utils.fnvhash64`).
#[inline]
pub fn fnv_hash64(value: u64) -> u64 {
    let mut hash: u64 = 0xCBF2_9CE4_8422_2325;
    let mut rest = value;
    for _ in 0..8 {
        hash ^= rest & 0xff;
        hash = hash.wrapping_mul(0x0100_0000_01B3);
        rest >>= 8;
    }
    i64::from_le_bytes(hash.to_le_bytes()).unsigned_abs()
}

/// The key of record `record`: `user` and the 20-digit zero-padded
/// decimal of `fnv_hash64(record)`, so records sort in hash order, not
/// insert order (YCSB's `insertorder=hashed`; fixed width here, so the
/// key order is the hash's numeric order).
#[inline]
pub fn ycsb_key(record: u64) -> [u8; YCSB_KEY_LEN] {
    let mut out = [b'0'; YCSB_KEY_LEN];
    let (head, digits) = out.split_at_mut(4);
    head.copy_from_slice(b"user");
    let mut rest = fnv_hash64(record);
    for digit in digits.iter_mut().rev() {
        *digit = b'0' + u8::try_from(rest % 10).unwrap_or_default();
        rest /= 10;
    }
    out
}

fn payload_rng(record: u64, version: u64) -> SplitMix64 {
    let mut mix = SplitMix64::new(record);
    SplitMix64::new(mix.next() ^ version.wrapping_mul(0xD6E8_FEB8_6659_FD93))
}

/// The 12 printable bytes one generator output gives: 5 bits each, as
/// YCSB's `RandomByteIterator` makes its fields (`' ' + (bits & 31)`), so
/// records compress as YCSB's do.
#[inline]
fn printable(word: u64) -> [u8; 12] {
    let mut out = [0u8; 12];
    let mut bits = word;
    for byte in &mut out {
        *byte = b' ' + u8::try_from(bits & 31).unwrap_or_default();
        bits >>= 5;
    }
    out
}

/// Version `version` of record `record` at `len` bytes into `out` (cleared
/// first; reused, so no operation allocates once it has grown): the record
/// number and the version (8 bytes each, little-endian), then printable
/// bytes from a generator seeded by both.
#[inline]
pub fn ycsb_value_into(record: u64, version: u64, len: usize, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(&record.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.truncate(len);
    let mut rng = payload_rng(record, version);
    while out.len() < len {
        let chunk = printable(rng.next());
        let take = (len - out.len()).min(chunk.len());
        out.extend_from_slice(chunk.get(..take).unwrap_or_default());
    }
}

/// True when `bytes` is exactly version `version` of record `record` at
/// `len` bytes; stops at the first difference.
#[inline]
pub fn ycsb_value_matches(bytes: &[u8], record: u64, version: u64, len: usize) -> bool {
    if bytes.len() != len || ycsb_stamp(bytes) != Some((record, version)) {
        return false;
    }
    let mut rng = payload_rng(record, version);
    bytes
        .get(YCSB_STAMP_LEN..)
        .unwrap_or_default()
        .chunks(12)
        .all(|chunk| printable(rng.next()).get(..chunk.len()) == Some(chunk))
}

/// The record number and version a record's first 16 bytes claim.
#[inline]
pub fn ycsb_stamp(bytes: &[u8]) -> Option<(u64, u64)> {
    let (record, rest) = bytes.split_first_chunk::<8>()?;
    let (version, _) = rest.split_first_chunk::<8>()?;
    Some((u64::from_le_bytes(*record), u64::from_le_bytes(*version)))
}

/// What one YCSB operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum YcsbOpKind {
    /// Read a record; it must be at `version`, the latest written.
    Read,
    /// Write `version` of an existing record (the whole record).
    Update,
    /// Write a new record, version 0: the key space grows by one.
    Insert,
    /// Scan `scan_len` records from the record's key.
    Scan,
    /// Read the record (at `version - 1`), then write `version`.
    ReadModifyWrite,
}

/// One YCSB operation, drawn before the clock starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct YcsbOp {
    /// Read, update, insert, scan or read-modify-write.
    pub kind: YcsbOpKind,
    /// The record it touches (a scan: the record it starts at).
    pub record: u64,
    /// Read: the version it must see; update, insert and read-modify-write:
    /// the version it writes; scan: unused (0).
    pub version: u64,
    /// Scan: the records it asks for (1..=100); 0 for the others.
    pub scan_len: u32,
}

/// The records after some YCSB workloads ran: how many there are (record
/// numbers `0..records`) and the latest version of each (0 unless updated).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct YcsbState {
    /// Records written so far (the load's N plus every insert).
    pub records: u64,
    versions: HashMap<u64, u64>,
}

impl YcsbState {
    /// The state right after ycsb-load put `records` records.
    pub fn loaded(records: u64) -> Self {
        YcsbState {
            records,
            versions: HashMap::new(),
        }
    }

    /// The latest version of `record` (0 when it was never updated).
    #[inline]
    pub fn version(&self, record: u64) -> u64 {
        self.versions.get(&record).copied().unwrap_or(0)
    }

    fn bump(&mut self, record: u64) -> u64 {
        let version = self.versions.entry(record).or_insert(0);
        *version += 1;
        *version
    }
}

/// One core workload's operation mix (YCSB's `workloads/workloada` …
/// `workloadf`): proportions of reads, updates, inserts, scans and
/// read-modify-writes, and whether reads pick the latest records.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct YcsbMix {
    /// The workload's letter, `a` … `f`.
    pub letter: char,
    /// Share of reads.
    pub read: f64,
    /// Share of updates.
    pub update: f64,
    /// Share of inserts.
    pub insert: f64,
    /// Share of scans.
    pub scan: f64,
    /// Share of read-modify-writes.
    pub read_modify_write: f64,
    /// Records drawn from YCSB's latest distribution (D) rather than the
    /// scrambled Zipfian.
    pub latest: bool,
}

impl YcsbMix {
    /// The mix of workload `letter` (`a` … `f`), if it is one.
    pub fn of(letter: char) -> Option<YcsbMix> {
        let mix = |read, update, insert, scan, read_modify_write, latest| YcsbMix {
            letter,
            read,
            update,
            insert,
            scan,
            read_modify_write,
            latest,
        };
        Some(match letter {
            'a' => mix(0.5, 0.5, 0.0, 0.0, 0.0, false),
            'b' => mix(0.95, 0.05, 0.0, 0.0, 0.0, false),
            'c' => mix(1.0, 0.0, 0.0, 0.0, 0.0, false),
            'd' => mix(0.95, 0.0, 0.05, 0.0, 0.0, true),
            'e' => mix(0.0, 0.0, 0.05, 0.95, 0.0, false),
            'f' => mix(0.5, 0.0, 0.0, 0.0, 0.5, false),
            _ => return None,
        })
    }

    fn seed(self) -> u64 {
        YCSB_SEED + u64::from(self.letter) - u64::from('a')
    }

    /// The kind for uniform input `u`, shares taken in YCSB's order.
    fn kind(self, u: f64) -> YcsbOpKind {
        let mut bound = self.read;
        if u < bound {
            return YcsbOpKind::Read;
        }
        bound += self.update;
        if u < bound {
            return YcsbOpKind::Update;
        }
        bound += self.insert;
        if u < bound {
            return YcsbOpKind::Insert;
        }
        bound += self.scan;
        if u < bound {
            return YcsbOpKind::Scan;
        }
        if self.read_modify_write > 0.0 {
            YcsbOpKind::ReadModifyWrite
        } else {
            // Rounding at u → 1: the last kind the mix has.
            [
                (self.scan, YcsbOpKind::Scan),
                (self.insert, YcsbOpKind::Insert),
                (self.update, YcsbOpKind::Update),
            ]
            .into_iter()
            .find(|(share, _)| *share > 0.0)
            .map_or(YcsbOpKind::Read, |(_, kind)| kind)
        }
    }
}

/// Draws `ops` operations of `mix` over `state` and advances it (inserts
/// add records, updates and read-modify-writes bump versions), the way
/// YCSB's `CoreWorkload` chooses them: the kind by the mix's shares; the
/// record from a Zipfian(0.99) over 10^10 items hashed onto the records
/// that may exist by the end (`records + 2·ops·insert share`, redrawn
/// until it names a record already written), or for D from the latest
/// distribution (the newest record hottest); inserts take the next record
/// number; scan lengths uniform over `1..=100`. Every uniform input comes
/// from splitmix64 with the workload's own seed.
pub fn draw_ycsb(mix: YcsbMix, state: &mut YcsbState, ops: u64) -> Result<Vec<YcsbOp>, String> {
    let count = usize::try_from(ops).map_err(|_| cannot_draw(ops))?;
    let mut out = Vec::new();
    out.try_reserve_exact(count).map_err(|_| cannot_draw(ops))?;
    let mut rng = SplitMix64::new(mix.seed());
    let scrambled = Zipfian::with_zetan(SCRAMBLED_ITEMS, YCSB_ZIPFIAN_CONSTANT, SCRAMBLED_ZETAN);
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a non-negative share of a u64 count, rounded; casts saturate"
    )]
    let expected_new = (ops as f64 * mix.insert * 2.0).round() as u64;
    let key_space = state.records.saturating_add(expected_new).max(1);
    let mut latest = mix
        .latest
        .then(|| Zipfian::new(state.records, YCSB_ZIPFIAN_CONSTANT));
    for _ in 0..ops {
        let kind = mix.kind(rng.next_unit());
        let records = state.records.max(1);
        let record = if kind == YcsbOpKind::Insert {
            state.records
        } else if let Some(latest) = latest.as_mut() {
            latest.grow_to(records);
            records - 1 - latest.sample(rng.next_unit()).min(records - 1)
        } else {
            let mut pick = fnv_hash64(scrambled.sample(rng.next_unit())) % key_space;
            for _ in 0..MAX_REDRAWS {
                if pick < records {
                    break;
                }
                pick = fnv_hash64(scrambled.sample(rng.next_unit())) % key_space;
            }
            pick % records
        };
        let (version, scan_len) = match kind {
            YcsbOpKind::Read => (state.version(record), 0),
            YcsbOpKind::Update | YcsbOpKind::ReadModifyWrite => (state.bump(record), 0),
            YcsbOpKind::Insert => {
                state.records += 1;
                (0, 0)
            }
            YcsbOpKind::Scan => {
                let len = 1 + rng.below(YCSB_MAX_SCAN);
                (0, u32::try_from(len).unwrap_or(1))
            }
        };
        out.push(YcsbOp {
            kind,
            record,
            version,
            scan_len,
        });
    }
    Ok(out)
}

fn cannot_draw(ops: u64) -> String {
    format!("cannot allocate a YCSB workload's {ops} operations")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv_matches_ycsb() {
        // FNV-1a over eight bytes then abs, computed by an independent
        // implementation (Python) of YCSB's Utils.fnvhash64.
        assert_eq!(fnv_hash64(0), 0x5738_07cd_d7e5_c63b);
        assert_eq!(fnv_hash64(1), 0x7632_ced6_e2d5_105c);
        assert_eq!(&ycsb_key(7), b"user05465015992139406178");
        let key = ycsb_key(7);
        assert!(key.starts_with(b"user"));
        assert_eq!(
            std::str::from_utf8(&key[4..])
                .unwrap()
                .parse::<u64>()
                .unwrap(),
            fnv_hash64(7)
        );
    }

    #[test]
    fn records_carry_their_stamp_and_nothing_else_matches() {
        let mut v = Vec::new();
        for len in [16, 17, 100, 256, 1000, 16384] {
            ycsb_value_into(42, 3, len, &mut v);
            assert_eq!(v.len(), len);
            assert_eq!(ycsb_stamp(&v), Some((42, 3)));
            assert!(ycsb_value_matches(&v, 42, 3, len));
            assert!(!ycsb_value_matches(&v, 42, 2, len));
            assert!(!ycsb_value_matches(&v, 43, 3, len));
            if len > 16 {
                assert!(v[16..].iter().all(|b| (b' '..=b'?').contains(b)));
                let mut flipped = v.clone();
                flipped[len - 1] ^= 1;
                assert!(!ycsb_value_matches(&flipped, 42, 3, len));
            }
        }
        assert_eq!(ycsb_stamp(&[0; 15]), None);
    }

    #[test]
    fn draws_follow_the_mix_and_advance_the_state() {
        for letter in ['a', 'b', 'c', 'd', 'e', 'f'] {
            let mix = YcsbMix::of(letter).unwrap();
            let mut state = YcsbState::loaded(5000);
            let ops = draw_ycsb(mix, &mut state, 20_000).unwrap();
            let share =
                |kind| ops.iter().filter(|o| o.kind == kind).count() as f64 / ops.len() as f64;
            for (kind, want) in [
                (YcsbOpKind::Read, mix.read),
                (YcsbOpKind::Update, mix.update),
                (YcsbOpKind::Insert, mix.insert),
                (YcsbOpKind::Scan, mix.scan),
                (YcsbOpKind::ReadModifyWrite, mix.read_modify_write),
            ] {
                assert!((share(kind) - want).abs() < 0.02, "{letter} {kind:?}");
            }
            let inserts = ops.iter().filter(|o| o.kind == YcsbOpKind::Insert).count() as u64;
            assert_eq!(state.records, 5000 + inserts);
            // Replaying the ops gives the versions they carry.
            let mut replay = YcsbState::loaded(5000);
            for op in &ops {
                assert!(op.record < replay.records || op.kind == YcsbOpKind::Insert);
                match op.kind {
                    YcsbOpKind::Read => assert_eq!(op.version, replay.version(op.record)),
                    YcsbOpKind::Update | YcsbOpKind::ReadModifyWrite => {
                        assert_eq!(op.version, replay.bump(op.record));
                    }
                    YcsbOpKind::Insert => {
                        assert_eq!(op.record, replay.records);
                        replay.records += 1;
                    }
                    YcsbOpKind::Scan => assert!((1..=100).contains(&op.scan_len)),
                }
            }
            assert_eq!(replay, state);
            assert_eq!(
                draw_ycsb(mix, &mut YcsbState::loaded(5000), 20_000).unwrap(),
                ops
            );
        }
        assert!(YcsbMix::of('g').is_none());
    }

    #[test]
    fn zipfian_requests_are_skewed_and_scattered() {
        let mut state = YcsbState::loaded(100_000);
        let ops = draw_ycsb(YcsbMix::of('c').unwrap(), &mut state, 100_000).unwrap();
        let mut counts: HashMap<u64, u64> = HashMap::new();
        for op in &ops {
            *counts.entry(op.record).or_default() += 1;
        }
        let mut by_count: Vec<(u64, u64)> = counts.into_iter().map(|(r, c)| (c, r)).collect();
        by_count.sort_unstable_by(|a, b| b.cmp(a));
        // The hottest record takes a few percent of the requests, and the
        // hottest records are not the first ones loaded (scrambled).
        assert!(by_count[0].0 > 1000, "{:?}", &by_count[..3]);
        assert!(by_count.iter().take(10).any(|&(_, r)| r > 1000));
        // D: the newest records are the hottest.
        let mut state = YcsbState::loaded(100_000);
        let ops = draw_ycsb(YcsbMix::of('d').unwrap(), &mut state, 20_000).unwrap();
        let reads: Vec<&YcsbOp> = ops.iter().filter(|o| o.kind == YcsbOpKind::Read).collect();
        let recent = reads.iter().filter(|o| o.record + 1000 >= 100_000).count();
        assert!(recent * 2 > reads.len(), "{recent} of {}", reads.len());
    }
}
