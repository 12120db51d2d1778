//! Where a key's probes land inside its 512-bit line, for every layout a
//! filter block can name.
//!
//! Owns: [`Layout`], and for each layout the map from a 64-bit key hash and a
//! probe count `k` to `k` bit positions (0..512) inside the key's line; the
//! loops that test and set those bits. The line itself is chosen elsewhere
//! ([`crate::filter::line::line_index`], from the hash's high 32 bits), and
//! the loops are run by the kernel `crate::filter::kernel` picks.
//! Must never: move a bit of a layout that has shipped (encoded filters depend
//! on every position — the tests pin each layout against a reference written
//! from its definition), or let a faster path test other bits than the
//! definition names.
//!
//! A bit `b` of a line lives in byte `b / 8`, bit `b % 8` — equivalently bit
//! `b % 64` of little-endian word `b / 64`, or bit `b % 32` of little-endian
//! 32-bit word `b / 32` — so the bytes on disk are the bytes in memory.
//!
//! - Layout 1 ([`Layout::Remixed`]): probes come seven at a time from 64-bit
//!   words, probe `i` of a group being bits `9i .. 9i + 9` of its word; the
//!   words are successive splitmix64 outputs seeded with the hash
//!   (`remix(hash + g·φ)` for group `g`).
//! - Layout 2 ([`Layout::Multiplied`], written by default): probe `i`
//!   (0-based) is the top nine bits of `lo32(hash) · M_i mod 2³²`, with
//!   `M_i = 0x9e3779b9^(i+1) mod 2³²`. Every probe is one 32-bit multiply of
//!   the same input, independent of the others, so eight of them are one
//!   vector multiply; on x86-64 with AVX2 a query tests eight probes with a
//!   handful of vector instructions (`crate::filter::simd`). Its measured
//!   false-positive rates stay within 1.5% of the blocked theory at 6–20 bits
//!   per key (`tests/filter_quality.rs`).
//! - Layout 3 ([`Layout::Sectored`], written by default): the line is eight
//!   64-bit words (sectors) and a key sets at most one bit per word per
//!   round of eight probes. Probe `j` is in round `r = j / 8`; its word `w`
//!   gets bit `(lo32(hash) · M_(8r+w) mod 2³²) >> 26`. A full round sets a
//!   bit in every word; the last round, of `m = k mod 8 > 0` probes, sets
//!   one in the `m` consecutive words (mod 8) from `s = (lo32(hash) · S mod
//!   2³²) >> 29`, with `S = 0x9e3779b9^33 mod 2³²`. No probe has to find its
//!   word by its bits, so eight of them are one vector multiply, one
//!   variable shift and one mask: inserting is as cheap as querying
//!   (`sectored_mask`). At the probe counts the theory picks, its measured
//!   false-positive rates are within 3.5% of layout 2's at 6–20 bits per
//!   key (`docs/format.md`), for a build 2–3× faster.

pub use crate::filter::line::LINE_BYTES;
use crate::filter::theory::{LINE_BITS, MAX_PROBES};

/// How probes are placed inside a line; stored in every filter block.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Layout 1: nine-bit fields of splitmix64 outputs seeded with the hash.
    Remixed = 1,
    /// Layout 2: the top nine bits of the low hash word times a power of
    /// 0x9e3779b9.
    Multiplied = 2,
    /// Layout 3: one bit per 64-bit word per round of eight probes, the top
    /// six bits of the low hash word times a power of 0x9e3779b9 — the
    /// layout written by default.
    Sectored = 3,
}

impl Layout {
    /// The layout new filters use.
    pub const DEFAULT: Layout = Layout::Sectored;

    /// The id stored in a filter block.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The layout with this id, if this build knows it.
    pub fn from_id(id: u8) -> Option<Layout> {
        match id {
            1 => Some(Layout::Remixed),
            2 => Some(Layout::Multiplied),
            3 => Some(Layout::Sectored),
            _ => None,
        }
    }
}

/// A 64-bit finaliser (splitmix64's): every output bit depends on every input bit.
#[inline]
pub(crate) fn remix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// 9-bit probes taken from one 64-bit word before it is re-mixed (layout 1).
const PROBES_PER_WORD: u32 = 7;

/// Layout 2's multipliers: `MULTIPLIERS[i] = 0x9e3779b9^(i+1) mod 2³²`.
#[expect(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build, not a run"
)]
pub(crate) const MULTIPLIERS: [u32; MAX_PROBES as usize] = {
    let mut out = [0u32; MAX_PROBES as usize];
    let mut power = 1u32;
    let mut i = 0;
    while i < out.len() {
        power = power.wrapping_mul(0x9e37_79b9);
        out[i] = power;
        i += 1;
    }
    out
};

/// Layout 3's multiplier for the first word of a partial round:
/// `0x9e3779b9^33 mod 2³²`, the power after the last of [`MULTIPLIERS`].
/// (The exponent is written out: the layout must not move if the probe
/// limit ever does.)
pub(crate) const SECTOR_START_MULTIPLIER: u32 = {
    let mut power = 1u32;
    let mut i = 0;
    while i < 33 {
        power = power.wrapping_mul(0x9e37_79b9);
        i += 1;
    }
    power
};

/// Words (sectors) in a line, one probe each per round in layout 3.
pub(crate) const SECTORS: usize = 8;
/// Probes in a full round of layout 3: one per word.
const ROUND: u32 = 8;

/// Layout 3's probes of one round as a mask over the line's eight words:
/// word `w` gets bit `(x · multipliers[w]) >> 26` when bit `w` of `keep`
/// ([`round_words`]) is set. Written lane by lane without branches so that,
/// compiled for AVX2, the eight words are vector lanes.
#[inline(always)]
fn sectored_round(x: u32, multipliers: &[u32; SECTORS], keep: u8) -> [u64; SECTORS] {
    let keep = u64::from(keep);
    let mut mask = [0u64; SECTORS];
    for (w, (out, &multiplier)) in mask.iter_mut().zip(multipliers).enumerate() {
        let bit = x.wrapping_mul(multiplier) >> 26;
        *out = ((keep >> w) & 1) << bit;
    }
    mask
}

/// The words a round of `m` probes (`m ≤ 8`) sets, as eight bits: the
/// `m` consecutive words (mod 8) from `start`; all eight in a full round.
#[inline(always)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "m ≤ 8, so (1 << m) − 1 fits in nine bits and its low eight are the words"
)]
pub(crate) const fn round_words(m: u32, start: u32) -> u8 {
    (((1u32 << m) - 1) as u8).rotate_left(start)
}

/// The hash's low 32 bits, which layouts 2 and 3 draw every probe from (the
/// high half chose the line).
#[inline(always)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "the probes are defined on the hash's low 32 bits"
)]
pub(crate) const fn low_half(hash: u64) -> u32 {
    hash as u32
}

/// The first word of layout 3's partial round for the hash's low half `x`.
#[inline(always)]
pub(crate) fn sector_start(x: u32) -> u32 {
    x.wrapping_mul(SECTOR_START_MULTIPLIER) >> 29
}

/// Layout 3's multipliers by round: row `r` holds `M_(8r) .. M_(8r+8)`.
#[expect(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build, not a run"
)]
pub(crate) const ROUND_MULTIPLIERS: [[u32; SECTORS]; MAX_PROBES as usize / SECTORS] = {
    let mut rows = [[0u32; SECTORS]; MAX_PROBES as usize / SECTORS];
    let mut i = 0;
    while i < MAX_PROBES as usize {
        rows[i / SECTORS][i % SECTORS] = MULTIPLIERS[i];
        i += 1;
    }
    rows
};

/// Layout 3's `k` probes (`1 ≤ k ≤ 32`) as a mask over the line's eight
/// little-endian words: the bits an insert sets and a query tests.
#[inline(always)]
pub(crate) fn sectored_mask(hash: u64, k: u32) -> [u64; SECTORS] {
    let x = low_half(hash);
    let start = sector_start(x);
    let [first, later @ ..] = &ROUND_MULTIPLIERS;
    let mut mask = sectored_round(x, first, round_words(k.min(ROUND), start));
    // Above eight probes (above about 12 bits per key), more rounds.
    for (done, row) in (ROUND..).step_by(SECTORS).zip(later) {
        if done >= k {
            break;
        }
        let bits = sectored_round(x, row, round_words((k - done).min(ROUND), start));
        for (word, add) in mask.iter_mut().zip(bits) {
            *word |= add;
        }
    }
    mask
}

/// True when every bit of `mask` is set in `line`, without branches.
#[inline(always)]
pub(crate) fn line_has_mask(line: &[u8; LINE_BYTES], mask: &[u64; SECTORS]) -> bool {
    let (words, _) = line.as_chunks::<8>();
    let mut missing = 0u64;
    for (word, want) in words.iter().zip(mask) {
        missing |= want & !u64::from_le_bytes(*word);
    }
    missing == 0
}

/// Sets every bit of `mask` in `line`.
#[inline(always)]
pub(crate) fn line_add_mask(line: &mut [u8; LINE_BYTES], mask: &[u64; SECTORS]) {
    let (words, _) = line.as_chunks_mut::<8>();
    for (word, add) in words.iter_mut().zip(mask) {
        *word = (u64::from_le_bytes(*word) | add).to_le_bytes();
    }
}

/// Layout 2's probe for multiplier `m`: the product's top nine bits.
#[inline]
pub(crate) fn multiplied_probe(hash: u64, m: u32) -> u32 {
    low_half(hash).wrapping_mul(m) >> (32 - 9)
}

/// Calls `visit` with each of the `k` bit positions (0..512) a hash probes.
#[inline]
pub fn for_each_probe(layout: Layout, hash: u64, k: u32, visit: impl FnMut(u32)) {
    match layout {
        Layout::Remixed => for_each_remixed_probe(hash, k, visit),
        Layout::Multiplied => MULTIPLIERS
            .iter()
            .take(k as usize)
            .map(|&m| multiplied_probe(hash, m))
            .for_each(visit),
        Layout::Sectored => for_each_sectored_probe(hash, k, visit),
    }
}

/// Layout 3's probes in order: round by round, each round's words from its
/// first (word 0 in a full round, the start word in the partial one).
#[inline]
fn for_each_sectored_probe(hash: u64, k: u32, mut visit: impl FnMut(u32)) {
    let x = low_half(hash);
    let start = sector_start(x);
    for (done, multipliers) in (0..k).step_by(SECTORS).zip(&ROUND_MULTIPLIERS) {
        let m = (k - done).min(ROUND);
        let first = if m == ROUND { 0 } else { start };
        for i in 0..m {
            let word = (first + i) & 7;
            let multiplier = multipliers.get(word as usize).copied().unwrap_or(0);
            visit(64 * word + (x.wrapping_mul(multiplier) >> 26));
        }
    }
}

/// Layout 1's probes, written as groups so the seven shifts of a group do
/// not form one serial chain.
#[inline]
fn for_each_remixed_probe(hash: u64, k: u32, mut visit: impl FnMut(u32)) {
    let mut state = hash;
    let mut word = remix(state);
    let mut left = k;
    loop {
        let group = left.min(PROBES_PER_WORD);
        for i in 0..group {
            #[expect(clippy::cast_possible_truncation, reason = "masked to nine bits")]
            visit(((word >> (9 * i)) & (LINE_BITS as u64 - 1)) as u32);
        }
        left -= group;
        if left == 0 {
            return;
        }
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        word = remix(state);
    }
}

/// The probe positions of a hash as a 512-bit mask (eight little-endian words).
#[inline]
pub fn probe_mask(layout: Layout, hash: u64, k: u32) -> [u64; 8] {
    let mut mask = [0u64; 8];
    for_each_probe(layout, hash, k, |bit| {
        if let Some(word) = mask.get_mut((bit >> 6) as usize) {
            *word |= 1 << (bit & 63);
        }
    });
    mask
}

/// The query without vector instructions: the definition every
/// faster path is tested against. It reads each probed word straight from
/// the line and folds the answers without a branch, because for an absent
/// key which probe fails first is a coin toss.
#[inline]
pub fn scalar_has_probes(layout: Layout, line: &[u8; LINE_BYTES], hash: u64, k: u32) -> bool {
    if layout == Layout::Sectored {
        return line_has_mask(line, &sectored_mask(hash, k));
    }
    let (words, _) = line.as_chunks::<8>();
    let mut found = 1u64;
    for_each_probe(layout, hash, k, |bit| {
        // `bit < 512`, so the word always exists; `get` keeps it panic-free.
        let word = words
            .get((bit >> 6) as usize)
            .map_or(0, |w| u64::from_le_bytes(*w));
        found &= word >> (bit & 63);
    });
    found & 1 == 1
}

/// Sets every bit `hash` probes in `line` (the same bits as
/// setting every bit of [`probe_mask`], without the mask in memory).
#[inline]
pub fn line_add_probes(layout: Layout, line: &mut [u8; LINE_BYTES], hash: u64, k: u32) {
    if layout == Layout::Sectored {
        return line_add_mask(line, &sectored_mask(hash, k));
    }
    let (words, _) = line.as_chunks_mut::<8>();
    for_each_probe(layout, hash, k, |bit| {
        if let Some(word) = words.get_mut((bit >> 6) as usize) {
            *word = (u64::from_le_bytes(*word) | 1 << (bit & 63)).to_le_bytes();
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::bloom::hash_key;
    use crate::filter::kernel::LineTest;

    const LAYOUTS: [Layout; 3] = [Layout::Remixed, Layout::Multiplied, Layout::Sectored];

    /// True when every bit of `mask` is set in `line`: the mask-based oracle.
    fn line_matches(line: &[u8; LINE_BYTES], mask: &[u64; 8]) -> bool {
        let (words, _) = line.as_chunks::<8>();
        words
            .iter()
            .zip(mask)
            .all(|(word, want)| want & !u64::from_le_bytes(*word) == 0)
    }

    /// Sets every bit of `mask` in `line`.
    fn line_set(line: &mut [u8; LINE_BYTES], mask: &[u64; 8]) {
        let (words, _) = line.as_chunks_mut::<8>();
        for (word, add) in words.iter_mut().zip(mask) {
            *word = (u64::from_le_bytes(*word) | add).to_le_bytes();
        }
    }

    /// The answer through the kernel a filter would choose.
    fn line_has_probes(layout: Layout, line: &[u8; LINE_BYTES], hash: u64, k: u32) -> bool {
        LineTest::new(layout, k).test(line, hash)
    }

    /// Each layout's probe positions exactly as its definition states them,
    /// written independently of the code above, so a faster loop can never
    /// move a bit.
    fn reference_probes(layout: Layout, hash: u64, k: u32) -> Vec<u32> {
        let mut out = Vec::new();
        match layout {
            Layout::Remixed => {
                let mut state = hash;
                let mut word = remix(state);
                let mut left = 7;
                for _ in 0..k {
                    if left == 0 {
                        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
                        word = remix(state);
                        left = 7;
                    }
                    out.push((word & 511) as u32);
                    word >>= 9;
                    left -= 1;
                }
            }
            Layout::Multiplied => {
                let low = hash & 0xffff_ffff;
                let mut power = 1u64;
                for _ in 0..k {
                    power = power * 0x9e37_79b9 % (1 << 32);
                    out.push(((low * power % (1 << 32)) >> 23) as u32);
                }
            }
            Layout::Sectored => {
                // M_j = 0x9e3779b9^(j+1), S = 0x9e3779b9^33, all mod 2^32.
                let low = hash & 0xffff_ffff;
                let power = |e: u64| (0..e).fold(1u64, |p, _| p * 0x9e37_79b9 % (1 << 32));
                let top = |m: u64, bits: u32| (low * m % (1 << 32)) >> (32 - bits);
                let start = top(power(33), 3);
                let (mut placed, mut round) = (0u64, 0u64);
                while placed < k as u64 {
                    let m = (k as u64 - placed).min(8);
                    let first = if m == 8 { 0 } else { start };
                    for i in 0..m {
                        let word = (first + i) % 8;
                        let bit = top(power(8 * round + word + 1), 6);
                        out.push(u32::try_from(64 * word + bit).unwrap());
                    }
                    placed += m;
                    round += 1;
                }
            }
        }
        out
    }

    /// Layout 3's kernels — every instruction set this CPU runs — answer and
    /// insert exactly as its definition: queries against the mask of the
    /// reference probes, inserts against one `line_add_probes` per hash.
    #[test]
    #[expect(
        unsafe_code,
        reason = "calls each kernel this CPU runs directly, to hold it to the definition"
    )]
    fn sectored_kernels_agree_with_the_definition() {
        let kernels = crate::filter::simd::available_sectored_kernels();
        println!(
            "layout 3 kernels on this CPU: {:?}",
            kernels.iter().map(|k| k.0).collect::<Vec<_>>()
        );
        let hashes: Vec<u64> = (0..3_000u64).map(|j| remix(j ^ 0x5ec7)).collect();
        for k in 1..=MAX_PROBES {
            let mut reference = vec![crate::filter::line::Line::EMPTY; 37];
            for &hash in &hashes {
                let line = &mut reference[crate::filter::bloom::line_index(hash, 37)];
                let mut mask = [0u64; 8];
                for bit in reference_probes(Layout::Sectored, hash, k) {
                    mask[(bit / 64) as usize] |= 1 << (bit % 64);
                }
                line_set(&mut line.0, &mask);
            }
            let arrays: Vec<[u8; LINE_BYTES]> = reference.iter().map(|l| l.0).collect();
            for (name, choose) in &kernels {
                let (single, group, add) = choose(k);
                let mut lines = vec![crate::filter::line::Line::EMPTY; 37];
                // SAFETY: the list holds only kernels this CPU runs.
                unsafe { add(&mut lines, &hashes, k) };
                assert!(lines == reference, "{name} k {k}: inserts differ");
                let mut found = vec![false; hashes.len()];
                // SAFETY: as above.
                unsafe { group(&arrays, &hashes, &mut found, k) };
                assert!(found.iter().all(|&f| f), "{name} k {k}: a false negative");
                for (i, &hash) in hashes.iter().enumerate().take(300) {
                    let line = &arrays[crate::filter::bloom::line_index(hash, 37)];
                    let probes = reference_probes(Layout::Sectored, hash, k);
                    // SAFETY: as above.
                    assert!(unsafe { single(line, hash, k) });
                    // Each probe cleared in turn: absent.
                    let bit = probes[i % probes.len()] as usize;
                    let mut missing = *line;
                    missing[bit / 8] &= !(1 << (bit % 8));
                    // SAFETY: as above.
                    assert!(!unsafe { single(&missing, hash, k) }, "{name} k {k}");
                    let absent = remix(hash ^ 0xdead);
                    let mut one = [false];
                    // SAFETY: as above.
                    unsafe { group(&arrays, &[absent], &mut one, k) };
                    let expected = scalar_has_probes(
                        Layout::Sectored,
                        &arrays[crate::filter::bloom::line_index(absent, 37)],
                        absent,
                        k,
                    );
                    assert_eq!(one[0], expected, "{name} k {k}");
                }
            }
        }
    }

    #[test]
    fn probe_positions_are_each_layouts_definition() {
        for layout in LAYOUTS {
            for j in 0..2_000u64 {
                let hash = hash_key(&j.to_le_bytes());
                for k in 0..=MAX_PROBES {
                    let mut got = Vec::new();
                    for_each_probe(layout, hash, k, |bit| got.push(bit));
                    assert_eq!(got, reference_probes(layout, hash, k), "{layout:?} k {k}");
                }
            }
        }
    }

    #[test]
    fn layout_ids_round_trip_and_unknown_ids_are_refused() {
        for layout in LAYOUTS {
            assert_eq!(Layout::from_id(layout.id()), Some(layout));
        }
        assert!(
            (0..=255u8)
                .filter(|&id| Layout::from_id(id).is_some())
                .count()
                == LAYOUTS.len()
        );
    }

    #[test]
    fn probes_stay_inside_the_line_and_differ_between_keys() {
        for layout in LAYOUTS {
            let a = probe_mask(layout, hash_key(b"a"), 7);
            let b = probe_mask(layout, hash_key(b"b"), 7);
            assert_ne!(a, b);
            for k in [1, 7, 8, 14, 15, 32] {
                let m = probe_mask(layout, hash_key(b"x"), k);
                let ones: u32 = m.iter().map(|w| w.count_ones()).sum();
                assert!(ones >= 1 && ones <= k, "{layout:?} k={k} ones={ones}");
            }
        }
    }

    /// Lines from empty to nearly full, with the answers of every path.
    #[test]
    #[expect(
        unsafe_code,
        reason = "calls each kernel this CPU runs directly, to hold it to the definition"
    )]
    fn every_query_path_agrees_with_the_mask() {
        let kernels = crate::filter::simd::available_kernels();
        println!(
            "vector kernels on this CPU: {:?}",
            kernels.iter().map(|k| k.0).collect::<Vec<_>>()
        );
        let mut state = 5u64;
        for layout in LAYOUTS {
            for round in 0..4_000u32 {
                let mut line = [0u8; LINE_BYTES];
                for _ in 0..round % 700 {
                    state = remix(state.wrapping_add(1));
                    line_add_probes(layout, &mut line, state, 1);
                }
                let hash = remix(state ^ 0xabcd);
                let k = round % MAX_PROBES + 1;
                let mask = probe_mask(layout, hash, k);
                let expected = line_matches(&line, &mask);
                assert_eq!(scalar_has_probes(layout, &line, hash, k), expected);
                assert_eq!(line_has_probes(layout, &line, hash, k), expected);
                if layout == Layout::Multiplied {
                    for (name, choose) in &kernels {
                        // SAFETY: the list holds only kernels this CPU runs.
                        let answer = unsafe { choose(k).0(&line, hash, k) };
                        assert_eq!(answer, expected, "{name} k {k}");
                    }
                }
                let (mut by_mask, mut direct) = (line, line);
                line_set(&mut by_mask, &mask);
                line_add_probes(layout, &mut direct, hash, k);
                assert_eq!(by_mask, direct);
                assert!(line_has_probes(layout, &direct, hash, k));
                // One probed bit cleared: every path must now say absent.
                let mut missing = direct;
                let bit = reference_probes(layout, hash, k)[(round % k) as usize] as usize;
                missing[bit / 8] &= !(1 << (bit % 8));
                assert!(!line_has_probes(layout, &missing, hash, k));
                assert!(!scalar_has_probes(layout, &missing, hash, k));
                if layout == Layout::Multiplied {
                    for (name, choose) in &kernels {
                        let single = choose(k).0;
                        // SAFETY: the list holds only kernels this CPU runs.
                        unsafe {
                            assert!(single(&direct, hash, k), "{name} k {k}");
                            assert!(!single(&missing, hash, k), "{name} k {k}");
                        }
                    }
                }
            }
        }
    }

    /// Group kernels give, hash by hash, the single kernel's answer on the
    /// line the hash picks — for every probe count, both layouts, every
    /// kernel this CPU runs.
    #[test]
    #[expect(
        unsafe_code,
        reason = "calls each kernel this CPU runs directly, to hold it to the definition"
    )]
    fn group_answers_are_single_answers() {
        let mut state = 11u64;
        let lines: Vec<[u8; LINE_BYTES]> = (0..7)
            .map(|_| {
                let mut line = [0u8; LINE_BYTES];
                for byte in line.iter_mut() {
                    state = remix(state.wrapping_add(1));
                    // About 90% of bits set, so both answers occur.
                    *byte = (state | (state >> 8) | (state >> 16) | (state >> 24)).to_le_bytes()[0];
                }
                line
            })
            .collect();
        let hashes: Vec<u64> = (0..200u64).map(|j| remix(j ^ 0x77)).collect();
        let line_of = |hash: u64| &lines[crate::filter::bloom::line_index(hash, 7)];
        for k in 1..=MAX_PROBES {
            let mut groups: Vec<(&str, Vec<bool>)> = Vec::new();
            for layout in LAYOUTS {
                let test = LineTest::new(layout, k);
                let mut found = vec![false; hashes.len()];
                test.test_group(&lines, &hashes, &mut found);
                let singles: Vec<bool> = hashes
                    .iter()
                    .map(|&h| scalar_has_probes(layout, line_of(h), h, k))
                    .collect();
                assert_eq!(found, singles, "{layout:?} k {k}");
                assert!(found.contains(&true) && found.contains(&false) || k > 20);
                if layout == Layout::Multiplied {
                    groups.push(("chosen", found));
                }
            }
            for (name, choose) in crate::filter::simd::available_kernels() {
                let mut found = vec![false; hashes.len()];
                // SAFETY: the list holds only kernels this CPU runs.
                unsafe { choose(k).1(&lines, &hashes, &mut found, k) };
                assert_eq!(found, groups[0].1, "{name} k {k}");
            }
        }
    }
}
