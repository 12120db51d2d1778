//! Where a key's probes land inside its 512-bit line, for every layout a
//! filter block can name.
//!
//! Owns: [`Layout`], and for each layout the map from a 64-bit key hash and a
//! probe count `k` to `k` bit positions (0..512) inside the key's line; the
//! loops that test and set those bits. The line itself is chosen elsewhere
//! ([`crate::line::line_index`], from the hash's high 32 bits), and
//! the loops are run by the kernel `crate::kernel` picks.
//! Must never: move a bit of a layout that has shipped (encoded filters depend
//! on every position — the tests pin each layout against a reference written
//! from its definition), or let a faster path test other bits than the
//! definition names.
//!
//! A bit `b` of a line lives in byte `b / 8`, bit `b % 8` — equivalently bit
//! `b % 64` of little-endian word `b / 64`, or bit `b % 32` of little-endian
//! 32-bit word `b / 32` — so the bytes on disk are the bytes in memory.
//!
//! The one layout, [`Layout::Sectored`] (id 4; ids 1 to 3 named layouts
//! that were replaced before the first release and are no longer read): the
//! line is eight 64-bit words (sectors) and a key sets at most one bit per
//! word per round of eight probes. Probe `j` is in round `r = j / 8`; its
//! word `w` gets bit `(lo32(hash) · M_(8r+w) mod 2³²) >> 26`, with
//! `M_i = 0x9e3779b9^(i+1) mod 2³²`. A full round sets a bit in every word;
//! the last round, of `m = k mod 8 > 0` probes, sets one in the `m`
//! consecutive words (mod 8) from `s = lo32(hash) mod 8`. No probe has to
//! find its word by its bits, so eight of them are one vector multiply, one
//! variable shift and one mask: inserting is as cheap as querying
//! (`sectored_mask`). Why this layout and not another: `docs/design.md`,
//! "The filter's layout".

pub use crate::line::LINE_BYTES;
use crate::theory::MAX_PROBES;

/// How probes are placed inside a line; stored in every filter block.
/// There is one layout: the enum names it so a block says which it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Layout {
    /// Layout 4: one bit per 64-bit word per round of eight probes, the top
    /// six bits of the low hash word times a power of 0x9e3779b9; a partial
    /// round starts at the word the hash's three low bits name.
    Sectored = 4,
}

impl Layout {
    /// The layout new filters use (the only one).
    pub const DEFAULT: Layout = Layout::Sectored;

    /// The id stored in a filter block.
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The layout with this id, if this build knows it (only 4).
    pub fn from_id(id: u8) -> Option<Layout> {
        match id {
            4 => Some(Layout::Sectored),
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

/// The multipliers of the probes: `MULTIPLIERS[i] = 0x9e3779b9^(i+1) mod 2³²`.
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

/// Words (sectors) in a line, one probe each per round in layout 4.
pub(crate) const SECTORS: usize = 8;
/// Probes in a full round of layout 4: one per word.
const ROUND: u32 = 8;

/// Layout 4's probes of one round as a mask over the line's eight words:
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

/// The hash's low 32 bits, which every probe is drawn from (the high half
/// chose the line).
#[inline(always)]
#[expect(
    clippy::cast_possible_truncation,
    reason = "the probes are defined on the hash's low 32 bits"
)]
pub(crate) const fn low_half(hash: u64) -> u32 {
    hash as u32
}

/// A probe count with what a query needs of it worked out once, when the
/// filter is made: the words of its first round before the rotate to the
/// hash's start word. A query then pays one rotate for its word mask
/// instead of a minimum, a shift and a mask per call.
///
/// Both are packed in one `u64` — the first round's words from word 0
/// (`round_words(min(count, 8), 0)`) in every byte of the low half, the
/// count in the high half — so a single-key kernel receives them in one
/// register, and with the hash after them as its last argument the hash
/// arrives in `rcx`, where the one-round kernels' rotate wants its count:
/// the caller sets up three registers, not four, and the kernel moves
/// nothing into `rcx` (docs/design.md, "The filter's layout and kernels").
/// The words are in every byte so that the kernels rotate the low half left
/// by the hash's low half itself (a 32-bit rotate counts mod 32, and the
/// pattern repeats every 8 bits, so the low byte is the words rotated by the start word) and move it to a
/// mask register (AVX-512) or broadcast it (AVX2) with no widening first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Probes {
    /// `count << 32 | first_words`.
    packed: u64,
}

impl Probes {
    /// `count` probes per key (`1 ≤ count ≤ 32`).
    pub(crate) const fn new(count: u32) -> Probes {
        let first = if count < ROUND { count } else { ROUND };
        let first_words = round_words(first, 0) as u32 * 0x0101_0101;
        Probes {
            packed: (count as u64) << 32 | first_words as u64,
        }
    }

    /// Probes per key.
    #[inline(always)]
    pub(crate) const fn count(self) -> u32 {
        low_half(self.packed >> 32)
    }

    /// Whether every probe is in the first round (`count ≤ 8`, every
    /// filter at 12.75 bits per key or below): each word then gets at most
    /// one bit, and a kernel needs no loop over rounds.
    #[inline(always)]
    pub(crate) const fn one_round(self) -> bool {
        self.count() <= ROUND
    }

    /// The words the first round sets for a hash whose start word is
    /// `start` (`round_words(min(count, 8), start)`).
    #[inline(always)]
    pub(crate) const fn first_round_words(self, start: u32) -> u8 {
        let [words, ..] = self.first_words().to_le_bytes();
        words.rotate_left(start)
    }

    /// The first round's words from word 0 (`first_round_words(0)`) in each
    /// byte of a `u32`.
    #[inline(always)]
    pub(crate) const fn first_words(self) -> u32 {
        low_half(self.packed)
    }
}

/// The first word of layout 4's partial round for the hash's low half `x`:
/// its three low bits. (A start word from the top three bits of `x` times a
/// constant costs a multiply and a shift beside the line's load, about 3%
/// of the single-key query: docs/design.md, "The filter's layout and
/// kernels"; the low bits need none, as a rotate counts them itself, and
/// the probes, drawn from the top bits of `x` times odd multipliers, stay
/// independent of them.)
#[inline(always)]
pub(crate) fn sector_start(x: u32) -> u32 {
    x & 7
}

/// Layout 4's multipliers by round: row `r` holds `M_(8r) .. M_(8r+8)`.
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

/// Layout 4's `k` probes (`1 ≤ k ≤ 32`) as a mask over the line's eight
/// little-endian words: the bits an insert sets and a query tests.
#[inline(always)]
pub(crate) fn sectored_mask(hash: u64, probes: Probes) -> [u64; SECTORS] {
    let (x, k) = (low_half(hash), probes.count());
    let start = sector_start(x);
    let [first, later @ ..] = &ROUND_MULTIPLIERS;
    let mut mask = sectored_round(x, first, probes.first_round_words(start));
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

/// Calls `visit` with each of the `k` bit positions (0..512) a hash probes.
#[inline]
pub fn for_each_probe(layout: Layout, hash: u64, k: u32, visit: impl FnMut(u32)) {
    match layout {
        Layout::Sectored => for_each_sectored_probe(hash, k, visit),
    }
}

/// Layout 4's probes in order: round by round, each round's words from its
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

/// The probe positions of a hash as a 512-bit mask (eight little-endian words).
#[inline]
pub fn probe_mask(layout: Layout, hash: u64, k: u32) -> [u64; 8] {
    match layout {
        Layout::Sectored => sectored_mask(hash, Probes::new(k)),
    }
}

/// The query without vector instructions: the definition every faster
/// path is tested against, without a branch on which probe fails first
/// (for an absent key a coin toss).
#[inline]
pub fn scalar_has_probes(layout: Layout, line: &[u8; LINE_BYTES], hash: u64, k: u32) -> bool {
    line_has_mask(line, &probe_mask(layout, hash, k))
}

/// Sets every bit `hash` probes in `line` (the bits of [`probe_mask`]).
#[inline]
pub fn line_add_probes(layout: Layout, line: &mut [u8; LINE_BYTES], hash: u64, k: u32) {
    line_add_mask(line, &probe_mask(layout, hash, k));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bloom::{hash_key, line_index};
    use crate::kernel::LineTest;
    use crate::line::Line;
    use crate::simd::Isa;

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

    /// The probe positions exactly as the definition states them, written
    /// independently of the code above, so a faster loop can never move a
    /// bit.
    fn reference_probes(hash: u64, k: u32) -> Vec<u32> {
        let mut out = Vec::new();
        // M_j = 0x9e3779b9^(j+1) mod 2^32; the partial round from low mod 8.
        let low = hash & 0xffff_ffff;
        let power = |e: u64| (0..e).fold(1u64, |p, _| p * 0x9e37_79b9 % (1 << 32));
        let top = |m: u64, bits: u32| (low * m % (1 << 32)) >> (32 - bits);
        let start = low % 8;
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
        out
    }

    fn reference_mask(hash: u64, k: u32) -> [u64; 8] {
        let mut mask = [0u64; 8];
        for bit in reference_probes(hash, k) {
            mask[(bit / 64) as usize] |= 1 << (bit % 64);
        }
        mask
    }

    /// Every kernel — every instruction set this CPU runs, single and group
    /// — answers and inserts exactly as the definition: queries against
    /// the mask of the reference probes, inserts against the reference
    /// bits, on every probe count.
    #[test]
    fn every_kernel_agrees_with_the_definition() {
        let isas = Isa::available();
        println!("instruction sets on this CPU: {isas:?}");
        // Under Miri fewer hashes and probe counts: one and more rounds,
        // the first round full and not.
        let (count, queried) = if cfg!(miri) { (24, 6) } else { (3_000, 300) };
        let probe_counts: Vec<u32> = if cfg!(miri) {
            vec![1, 8, 9, MAX_PROBES]
        } else {
            (1..=MAX_PROBES).collect()
        };
        let hashes: Vec<u64> = (0..count).map(|j| remix(j ^ 0x5ec7)).collect();
        for k in probe_counts {
            let mut reference = vec![Line::EMPTY; 37];
            for &hash in &hashes {
                line_set(
                    &mut reference[line_index(hash, 37)].0,
                    &reference_mask(hash, k),
                );
            }
            let arrays: Vec<[u8; LINE_BYTES]> = reference.iter().map(|l| l.0).collect();
            for &isa in &isas {
                let test = LineTest::with_isa(isa, k);
                let mut grouped = vec![Line::EMPTY; 37];
                test.add_group(&mut grouped, &hashes);
                assert!(grouped == reference, "{isa:?} k {k}: group inserts differ");
                let mut single = vec![Line::EMPTY; 37];
                for &hash in &hashes {
                    test.insert_hash(&mut single, hash);
                }
                assert!(single == reference, "{isa:?} k {k}: inserts differ");
                let mut found = vec![false; hashes.len()];
                test.test_group(&arrays, &hashes, &mut found);
                assert!(found.iter().all(|&f| f), "{isa:?} k {k}: a false negative");
                for (i, &hash) in hashes.iter().enumerate().take(queried) {
                    let line = &arrays[line_index(hash, 37)];
                    assert!(test.contains_hash(std::slice::from_ref(line), hash));
                    // Each probe cleared in turn: absent.
                    let probes = reference_probes(hash, k);
                    let bit = probes[i % probes.len()] as usize;
                    let mut missing = *line;
                    missing[bit / 8] &= !(1 << (bit % 8));
                    assert!(!test.contains_hash(&[missing], hash), "{isa:?} k {k}");
                    let absent = remix(hash ^ 0xdead);
                    let expected =
                        line_matches(&arrays[line_index(absent, 37)], &reference_mask(absent, k));
                    let mut one = [false];
                    test.test_group(&arrays, &[absent], &mut one);
                    assert_eq!(one[0], expected, "{isa:?} k {k}");
                    assert_eq!(
                        test.contains_hash(&arrays, absent),
                        expected,
                        "{isa:?} k {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn probe_positions_are_the_definition() {
        for j in 0..2_000u64 {
            let hash = hash_key(&j.to_le_bytes());
            for k in 0..=MAX_PROBES {
                let mut got = Vec::new();
                for_each_probe(Layout::Sectored, hash, k, |bit| got.push(bit));
                assert_eq!(got, reference_probes(hash, k), "k {k}");
                assert_eq!(
                    probe_mask(Layout::Sectored, hash, k),
                    reference_mask(hash, k)
                );
            }
        }
    }

    #[test]
    fn the_layout_id_round_trips_and_other_ids_are_refused() {
        assert_eq!(Layout::from_id(Layout::DEFAULT.id()), Some(Layout::DEFAULT));
        assert_eq!(Layout::DEFAULT.id(), 4);
        assert_eq!(
            (0..=255u8)
                .filter(|&id| Layout::from_id(id).is_some())
                .count(),
            1
        );
    }

    #[test]
    fn probes_stay_inside_the_line_and_differ_between_keys() {
        let layout = Layout::DEFAULT;
        let a = probe_mask(layout, hash_key(b"a"), 7);
        let b = probe_mask(layout, hash_key(b"b"), 7);
        assert_ne!(a, b);
        for k in [1, 7, 8, 14, 15, 32] {
            let m = probe_mask(layout, hash_key(b"x"), k);
            let ones: u32 = m.iter().map(|w| w.count_ones()).sum();
            assert!(ones >= 1 && ones <= k, "k={k} ones={ones}");
        }
    }

    /// Lines from empty to nearly full, with the answers of every path.
    #[test]
    fn every_query_path_agrees_with_the_mask() {
        let mut state = 5u64;
        let layout = Layout::DEFAULT;
        let rounds = if cfg!(miri) { 24 } else { 4_000u32 };
        for round in 0..rounds {
            let mut line = [0u8; LINE_BYTES];
            for _ in 0..round % 700 {
                state = remix(state.wrapping_add(1));
                line_add_probes(layout, &mut line, state, 1);
            }
            let hash = remix(state ^ 0xabcd);
            let k = round % MAX_PROBES + 1;
            let mask = reference_mask(hash, k);
            let expected = line_matches(&line, &mask);
            assert_eq!(scalar_has_probes(layout, &line, hash, k), expected);
            for isa in Isa::available() {
                assert_eq!(
                    LineTest::with_isa(isa, k).contains_hash(&[line], hash),
                    expected
                );
            }
            let (mut by_mask, mut direct) = (line, line);
            line_set(&mut by_mask, &mask);
            line_add_probes(layout, &mut direct, hash, k);
            assert_eq!(by_mask, direct);
            // One probed bit cleared: every path must now say absent.
            let mut missing = direct;
            let bit = reference_probes(hash, k)[(round % k) as usize] as usize;
            missing[bit / 8] &= !(1 << (bit % 8));
            assert!(!scalar_has_probes(layout, &missing, hash, k));
            for isa in Isa::available() {
                let test = LineTest::with_isa(isa, k);
                assert!(test.contains_hash(&[direct], hash), "{isa:?} k {k}");
                assert!(!test.contains_hash(&[missing], hash), "{isa:?} k {k}");
            }
        }
    }
}
