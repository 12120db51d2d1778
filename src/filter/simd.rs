//! Vector versions of the query loops in [`crate::filter::probe`], and of
//! layout 3's insert.
//!
//! Owns: the x86-64 AVX-512 and AVX2 tests of layout 2's probes, the choice
//! among them for this CPU, and their group versions for batched queries;
//! layout 3's query and insert kernels, its definition compiled for each
//! instruction set.
//! Must never: test a different bit than the scalar definition
//! ([`crate::filter::probe::scalar_has_probes`]) — the probe tests compare
//! every kernel with it on every probe count — or read outside the line.
//!
//! Eight probes per round, one per 32-bit lane: multiply the low hash word by
//! eight multipliers; the product's top four bits pick one of the line's
//! sixteen 32-bit words (AVX2: a permute within each half of the line, the
//! sign bit choosing the half; AVX-512 VL: one two-source permute), the next
//! five bits pick the bit in it (AVX-512: a variable rotate, which needs no
//! clearing of the count). For `k ≤ 8` — 11.5 bits per key and below — a
//! kernel compiled for that `k` runs one round with probe 0 repeated in the
//! spare lanes, so one `vptest` answers; larger `k` loops over rounds with
//! the lanes past `k` masked out. A filter picks its kernels once
//! ([`multiplied_kernels`]) and calls them through pointers.

#![cfg_attr(
    target_arch = "x86_64",
    expect(
        unsafe_code,
        reason = "x86-64 intrinsics and #[target_feature] kernels are unsafe to call; \
                  kernel.rs reaches them only after CPU detection chose them"
    )
)]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;
#[cfg(target_arch = "x86_64")]
use std::sync::atomic::{AtomicU8, Ordering};

use crate::filter::line::{add_each, answer_each, Line, LINE_BYTES};
#[cfg(target_arch = "x86_64")]
use crate::filter::probe::MULTIPLIERS;
use crate::filter::probe::{
    line_add_mask, line_has_mask, scalar_has_probes, sectored_mask, Layout,
};
#[cfg(target_arch = "x86_64")]
use crate::filter::probe::{low_half, round_words, sector_start, ROUND_MULTIPLIERS};

/// A query kernel: `(line, hash, k) → every probed bit set`. Unsafe because
/// a vector kernel may only run on a CPU with its features.
pub(crate) type Kernel = unsafe fn(&[u8; LINE_BYTES], u64, u32) -> bool;

/// A group kernel: answers `found[i]` for `hashes[i]` against `lines` (the
/// whole filter) — the same answers as one [`Kernel`] call per hash, with
/// the kernel inlined into the loop. Unsafe as [`Kernel`] is.
pub(crate) type GroupKernel = unsafe fn(&[[u8; LINE_BYTES]], &[u64], &mut [bool], u32);

/// The fastest kernels (single, group) for layout 2 with `k` probes on this
/// CPU; the CPU is examined on the first call and remembered.
pub(crate) fn multiplied_kernels(k: u32) -> (Kernel, GroupKernel) {
    #[cfg(target_arch = "x86_64")]
    match detected() {
        Detected::Avx512 if k <= 8 => return one_round_avx512_for(k),
        Detected::Avx512 => return (multiplied_has_probes_avx512, group_avx512),
        Detected::Avx2 if k <= 8 => return one_round_avx2_for(k),
        Detected::Avx2 => return (multiplied_has_probes_avx2, group_avx2),
        Detected::Scalar => {}
    }
    let _ = k;
    (scalar_multiplied, group_scalar_multiplied)
}

/// An insert kernel: sets the probes of every hash of `hashes` in the line
/// it picks among `lines` (the whole filter), requesting lines ahead
/// ([`add_each`]). Unsafe as [`Kernel`] is.
pub(crate) type AddKernel = unsafe fn(&mut [Line], &[u64], u32);

/// Layout 3's kernels (single, group, insert) for `k` probes on this CPU.
/// The line's eight words are eight lanes — one multiply, one shift, one
/// word mask: with AVX-512 written with intrinsics (the word mask is a mask
/// register), with AVX2 or none its definition ([`sectored_mask`]) compiled
/// for the instruction set.
pub(crate) fn sectored_kernels(k: u32) -> (Kernel, GroupKernel, AddKernel) {
    #[cfg(target_arch = "x86_64")]
    match detected() {
        Detected::Avx512 => return sectored_avx512_for(k),
        Detected::Avx2 => return (sectored_avx2, group_sectored_avx2, add_sectored_avx2),
        Detected::Scalar => {}
    }
    let _ = k;
    (sectored_scalar, group_sectored_scalar, add_sectored_scalar)
}

/// Defines layout 3's single, group and insert kernels for one set of
/// target features (none: the portable build).
macro_rules! sectored_kernels_for {
    ($single:ident, $group:ident, $add:ident $(, $features:literal)?) => {
        /// Layout 3's query of one line.
        /// # Safety
        /// The CPU must support the features named in `target_feature`.
        $(#[target_feature(enable = $features)])?
        unsafe fn $single(line: &[u8; LINE_BYTES], hash: u64, k: u32) -> bool {
            line_has_mask(line, &sectored_mask(hash, k))
        }

        /// Layout 3's query over a group (see [`GroupKernel`]).
        /// # Safety
        /// As the single kernel's.
        $(#[target_feature(enable = $features)])?
        unsafe fn $group(lines: &[[u8; LINE_BYTES]], hashes: &[u64], found: &mut [bool], k: u32) {
            answer_each(lines, hashes, found, |line, hash| {
                line_has_mask(line, &sectored_mask(hash, k))
            });
        }

        /// Layout 3's insert of a group (see [`AddKernel`]).
        /// # Safety
        /// As the single kernel's.
        $(#[target_feature(enable = $features)])?
        unsafe fn $add(lines: &mut [Line], hashes: &[u64], k: u32) {
            add_each(lines, hashes, |line, hash| {
                line_add_mask(line, &sectored_mask(hash, k))
            });
        }
    };
}

sectored_kernels_for!(sectored_scalar, group_sectored_scalar, add_sectored_scalar);
#[cfg(target_arch = "x86_64")]
sectored_kernels_for!(
    sectored_avx2,
    group_sectored_avx2,
    add_sectored_avx2,
    "avx2"
);

/// Layout 3's multipliers as 64-bit lanes, one row of eight per round, for
/// `vpmuludq` (which multiplies each lane's low 32 bits).
#[cfg(target_arch = "x86_64")]
#[expect(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build, not a run"
)]
static SECTOR_LANES: [[u64; 8]; ROUND_MULTIPLIERS.len()] = {
    let mut rows = [[0u64; 8]; ROUND_MULTIPLIERS.len()];
    let mut r = 0;
    while r < rows.len() {
        let mut w = 0;
        while w < 8 {
            rows[r][w] = ROUND_MULTIPLIERS[r][w] as u64;
            w += 1;
        }
        r += 1;
    }
    rows
};

/// One round of layout 3's probes in an AVX-512 register: the eight lanes'
/// products of `x` (broadcast in `spread`) and the round's multipliers, the
/// top six bits of each product's low half, and 1 shifted by each in the
/// words `words` names.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn sectored_round_avx512(spread: __m512i, row: &[u64; 8], words: u8) -> __m512i {
    // SAFETY: `row` is 64 bytes of u64s; the load has no alignment need.
    let multipliers = unsafe { _mm512_loadu_si512(row.as_ptr().cast()) };
    // Bits 26.. of each 64-bit product: the wanted six in the low bits,
    // higher product bits above them, which a rotate ignores (it counts
    // mod 64), so 1 rotated by them is 1 << the six bits.
    let bits = _mm512_srli_epi64::<26>(_mm512_mul_epu32(spread, multipliers));
    _mm512_maskz_rolv_epi64(words, _mm512_set1_epi64(1), bits)
}

/// Layout 3's probe mask ([`sectored_mask`]) in one AVX-512 register, for
/// any `k`: one [`sectored_round_avx512`] per round.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn sectored_mask_avx512(hash: u64, k: u32) -> __m512i {
    let x = low_half(hash);
    let start = sector_start(x);
    let spread = _mm512_set1_epi64(i64::from(x));
    let mut mask = _mm512_setzero_si512();
    for (done, row) in (0u32..).step_by(8).zip(&SECTOR_LANES) {
        if done >= k {
            break;
        }
        let words = round_words((k - done).min(8), start);
        mask = _mm512_or_si512(mask, sectored_round_avx512(spread, row, words));
    }
    mask
}

/// [`sectored_mask_avx512`] for `K ≤ 8` probes: one round, the word mask
/// a constant rotated by the start word.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn sectored_one_round_avx512<const K: u32>(hash: u64) -> __m512i {
    let x = low_half(hash);
    let words = const { round_words(K, 0) }.rotate_left(sector_start(x));
    let [row, ..] = &SECTOR_LANES;
    sectored_round_avx512(_mm512_set1_epi64(i64::from(x)), row, words)
}

/// True when every bit of `mask` is set in `line`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn line_has_mask_avx512(line: &[u8; LINE_BYTES], mask: __m512i) -> bool {
    // SAFETY: `line` is 64 readable bytes; the load has no alignment need.
    let words = unsafe { _mm512_loadu_si512(line.as_ptr().cast()) };
    // No wanted bit may be missing from the line.
    _mm512_test_epi64_mask(mask, _mm512_andnot_si512(words, mask)) == 0
}

/// Sets every bit of `mask` in `line`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn line_add_mask_avx512(line: &mut [u8; LINE_BYTES], mask: __m512i) {
    let place = line.as_mut_ptr().cast::<__m512i>();
    // SAFETY: `line` is 64 bytes, readable and writable; neither access
    // needs alignment.
    unsafe { _mm512_storeu_si512(place, _mm512_or_si512(_mm512_loadu_si512(place), mask)) };
}

/// Defines layout 3's AVX-512 single, group and insert kernels around one
/// way of computing the mask.
#[cfg(target_arch = "x86_64")]
macro_rules! sectored_avx512_kernels {
    ($single:ident, $group:ident, $add:ident $(<const $k:ident: u32>)?, |$hash:ident, $count:ident| $mask:expr) => {
        /// Layout 3's query of one line with AVX-512.
        /// # Safety
        /// The CPU must support AVX-512 F and VL.
        #[target_feature(enable = "avx512f,avx512vl")]
        unsafe fn $single$(<const $k: u32>)?(line: &[u8; LINE_BYTES], $hash: u64, $count: u32) -> bool {
            line_has_mask_avx512(line, $mask)
        }

        /// Layout 3's query over a group with AVX-512 (see [`GroupKernel`]).
        /// # Safety
        /// As the single kernel's.
        #[target_feature(enable = "avx512f,avx512vl")]
        unsafe fn $group$(<const $k: u32>)?(
            lines: &[[u8; LINE_BYTES]],
            hashes: &[u64],
            found: &mut [bool],
            $count: u32,
        ) {
            answer_each(lines, hashes, found, |line, $hash| line_has_mask_avx512(line, $mask));
        }

        /// Layout 3's insert of a group with AVX-512 (see [`AddKernel`]).
        /// # Safety
        /// As the single kernel's.
        #[target_feature(enable = "avx512f,avx512vl")]
        unsafe fn $add$(<const $k: u32>)?(lines: &mut [Line], hashes: &[u64], $count: u32) {
            add_each(lines, hashes, |line, $hash| line_add_mask_avx512(line, $mask));
        }
    };
}

#[cfg(target_arch = "x86_64")]
sectored_avx512_kernels!(
    sectored_avx512,
    group_sectored_avx512,
    add_sectored_avx512,
    |hash, k| sectored_mask_avx512(hash, k)
);
#[cfg(target_arch = "x86_64")]
sectored_avx512_kernels!(
    sectored_avx512_one_round,
    group_sectored_avx512_one_round,
    add_sectored_avx512_one_round<const K: u32>,
    |hash, _k| sectored_one_round_avx512::<K>(hash)
);

/// Layout 3's AVX-512 kernels for `k` probes: compiled for `k` when it is
/// at most 8 (one round), else the loop over rounds.
#[cfg(target_arch = "x86_64")]
fn sectored_avx512_for(k: u32) -> (Kernel, GroupKernel, AddKernel) {
    macro_rules! one_round {
        ($($k:literal)*) => {
            match k {
                $($k => (
                    sectored_avx512_one_round::<$k>,
                    group_sectored_avx512_one_round::<$k>,
                    add_sectored_avx512_one_round::<$k>,
                ),)*
                _ => (sectored_avx512, group_sectored_avx512, add_sectored_avx512),
            }
        };
    }
    one_round!(1 2 3 4 5 6 7 8)
}

/// A way to pick layout 3's kernels for a probe count.
#[cfg(test)]
pub(crate) type SectoredChoice = fn(u32) -> (Kernel, GroupKernel, AddKernel);

/// Every layout-3 kernel set this CPU can run, for the tests that hold each
/// to the definition.
#[cfg(test)]
pub(crate) fn available_sectored_kernels() -> Vec<(&'static str, SectoredChoice)> {
    let mut kernels: Vec<(&'static str, SectoredChoice)> = vec![("scalar", |_| {
        (sectored_scalar, group_sectored_scalar, add_sectored_scalar)
    })];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") {
            kernels.push(("avx2", |_| {
                (sectored_avx2, group_sectored_avx2, add_sectored_avx2)
            }));
        }
        if has!("avx512f") && has!("avx512vl") {
            kernels.push(("avx512", |_| {
                (sectored_avx512, group_sectored_avx512, add_sectored_avx512)
            }));
            kernels.push(("avx512_one_round", sectored_avx512_for));
        }
    }
    kernels
}

fn scalar_multiplied(line: &[u8; LINE_BYTES], hash: u64, k: u32) -> bool {
    scalar_has_probes(Layout::Multiplied, line, hash, k)
}

fn group_scalar_multiplied(lines: &[[u8; LINE_BYTES]], hashes: &[u64], found: &mut [bool], k: u32) {
    answer_each(lines, hashes, found, |line, hash| {
        scalar_multiplied(line, hash, k)
    });
}

/// Defines a group kernel running `answer_each` with a vector single kernel.
#[cfg(target_arch = "x86_64")]
macro_rules! group_kernel {
    ($(#[$doc:meta])* $name:ident $(<const $k:ident: u32>)?, $single:expr, $features:literal) => {
        $(#[$doc])*
        /// # Safety
        /// The CPU must support the features named in `target_feature`.
        #[target_feature(enable = $features)]
        unsafe fn $name$(<const $k: u32>)?(
            lines: &[[u8; LINE_BYTES]],
            hashes: &[u64],
            found: &mut [bool],
            k: u32,
        ) {
            // SAFETY: this function runs only where its features exist,
            // which are the single kernel's.
            answer_each(lines, hashes, found, |line, hash| unsafe { $single(line, hash, k) });
        }
    };
}

#[cfg(target_arch = "x86_64")]
group_kernel!(
    /// [`multiplied_has_probes_avx2`] over a group.
    group_avx2,
    multiplied_has_probes_avx2,
    "avx2"
);
#[cfg(target_arch = "x86_64")]
group_kernel!(
    /// [`multiplied_has_probes_avx512`] over a group.
    group_avx512,
    multiplied_has_probes_avx512,
    "avx512f,avx512vl"
);
#[cfg(target_arch = "x86_64")]
group_kernel!(
    /// [`multiplied_has_probes_avx2_one_round`] over a group.
    group_avx2_one_round<const K: u32>,
    multiplied_has_probes_avx2_one_round::<K>,
    "avx2"
);
#[cfg(target_arch = "x86_64")]
group_kernel!(
    /// [`multiplied_has_probes_avx512_one_round`] over a group.
    group_avx512_one_round<const K: u32>,
    multiplied_has_probes_avx512_one_round::<K>,
    "avx512f,avx512vl"
);

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Detected {
    Scalar = 1,
    Avx2 = 2,
    Avx512 = 3,
}

/// The detected instruction set, 0 until the first filter asks.
#[cfg(target_arch = "x86_64")]
static DETECTED: AtomicU8 = AtomicU8::new(0);

#[cfg(target_arch = "x86_64")]
fn detected() -> Detected {
    use std::arch::is_x86_feature_detected as has;
    match DETECTED.load(Ordering::Relaxed) {
        3 => return Detected::Avx512,
        2 => return Detected::Avx2,
        1 => return Detected::Scalar,
        _ => {}
    }
    let found = if has!("avx512f") && has!("avx512vl") {
        Detected::Avx512
    } else if has!("avx2") {
        Detected::Avx2
    } else {
        Detected::Scalar
    };
    // Every thread detects the same answer, so a race only repeats the work.
    DETECTED.store(found as u8, Ordering::Relaxed);
    found
}

/// The line as two 256-bit halves (words 0..8 and 8..16).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
#[inline]
fn line_halves(line: &[u8; LINE_BYTES]) -> (__m256i, __m256i) {
    let halves = line.as_ptr().cast::<__m256i>();
    // SAFETY: `line` is 64 readable bytes, two unaligned 32-byte loads.
    unsafe {
        (
            _mm256_loadu_si256(halves),
            _mm256_loadu_si256(halves.add(1)),
        )
    }
}

/// The low hash word times eight multipliers, one per lane.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn products(hash: u64, multipliers: &[u32; 8]) -> __m256i {
    // SAFETY: eight u32s, one unaligned 32-byte load.
    let m = unsafe { _mm256_loadu_si256(multipliers.as_ptr().cast::<__m256i>()) };
    #[expect(
        clippy::cast_possible_truncation,
        reason = "layout 2 defines its probes on the hash's low 32 bits"
    )]
    let low = hash as u32 as i32;
    _mm256_mullo_epi32(_mm256_set1_epi32(low), m)
}

/// Per lane: the line word a product's probe falls in, and that probe's bit.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn avx2_probe(low: __m256i, high: __m256i, product: __m256i) -> (__m256i, __m256i) {
    let word_index = _mm256_srli_epi32::<28>(product);
    // Word indices 8..16 (the product's sign bit set) live in the high half.
    let word = _mm256_castps_si256(_mm256_blendv_ps(
        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(low, word_index)),
        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(high, word_index)),
        _mm256_castsi256_ps(product),
    ));
    let shift = _mm256_and_si256(_mm256_srli_epi32::<23>(product), _mm256_set1_epi32(31));
    (word, _mm256_sllv_epi32(_mm256_set1_epi32(1), shift))
}

/// [`avx2_probe`] with AVX-512: the permute reads the low four bits of each
/// index (the word, 0..16), the rotate the low five of each count (the bit).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn avx512_probe(low: __m256i, high: __m256i, product: __m256i) -> (__m256i, __m256i) {
    let word = _mm256_permutex2var_epi32(low, _mm256_srli_epi32::<28>(product), high);
    let wanted = _mm256_rolv_epi32(_mm256_set1_epi32(1), _mm256_srli_epi32::<23>(product));
    (word, wanted)
}

/// True when every bit layout 2 probes for `hash` is set in `line`.
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
pub(crate) unsafe fn multiplied_has_probes_avx2(
    line: &[u8; LINE_BYTES],
    hash: u64,
    k: u32,
) -> bool {
    let (low, high) = line_halves(line);
    let lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    let (rounds, _) = MULTIPLIERS.as_chunks::<8>();
    for (round, multipliers) in (0u32..).zip(rounds) {
        let left = k.saturating_sub(8 * round);
        if left == 0 {
            break;
        }
        let (word, wanted) = avx2_probe(low, high, products(hash, multipliers));
        // `left` ≤ 32: the cast keeps its value.
        let active = _mm256_cmpgt_epi32(_mm256_set1_epi32(left as i32), lane);
        // testc: 1 when every wanted bit is set in `word`.
        if _mm256_testc_si256(word, _mm256_and_si256(wanted, active)) == 0 {
            return false;
        }
    }
    true
}

/// [`multiplied_has_probes_avx2`] with AVX-512 instructions.
///
/// # Safety
/// The CPU must support AVX-512 F and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
pub(crate) unsafe fn multiplied_has_probes_avx512(
    line: &[u8; LINE_BYTES],
    hash: u64,
    k: u32,
) -> bool {
    let (low, high) = line_halves(line);
    let (rounds, _) = MULTIPLIERS.as_chunks::<8>();
    for (round, multipliers) in (0u32..).zip(rounds) {
        let left = k.saturating_sub(8 * round);
        if left == 0 {
            break;
        }
        let active = u8::MAX >> 8u32.saturating_sub(left);
        let (word, wanted) = avx512_probe(low, high, products(hash, multipliers));
        if _mm256_mask_test_epi32_mask(active, word, wanted) != active {
            return false;
        }
    }
    true
}

/// Picks the instantiation for `k` (1..=8) of a one-round kernel pair, or
/// the general pair beyond.
#[cfg(target_arch = "x86_64")]
macro_rules! one_round_for {
    ($k:expr, $single:ident, $group:ident, $general:expr) => {
        match $k {
            1 => ($single::<1> as Kernel, $group::<1> as GroupKernel),
            2 => ($single::<2>, $group::<2>),
            3 => ($single::<3>, $group::<3>),
            4 => ($single::<4>, $group::<4>),
            5 => ($single::<5>, $group::<5>),
            6 => ($single::<6>, $group::<6>),
            7 => ($single::<7>, $group::<7>),
            8 => ($single::<8>, $group::<8>),
            _ => $general,
        }
    };
}

/// The one-round AVX-512 kernels compiled for exactly `k` probes (1..=8).
#[cfg(target_arch = "x86_64")]
fn one_round_avx512_for(k: u32) -> (Kernel, GroupKernel) {
    one_round_for!(
        k,
        multiplied_has_probes_avx512_one_round,
        group_avx512_one_round,
        (multiplied_has_probes_avx512, group_avx512)
    )
}

/// The one-round AVX2 kernels compiled for exactly `k` probes (1..=8).
#[cfg(target_arch = "x86_64")]
fn one_round_avx2_for(k: u32) -> (Kernel, GroupKernel) {
    one_round_for!(
        k,
        multiplied_has_probes_avx2_one_round,
        group_avx2_one_round,
        (multiplied_has_probes_avx2, group_avx2)
    )
}

/// [`multiplied_has_probes_avx2`] for `K ≤ 8` probes: one round, no loop,
/// no lane mask (see [`lanes_for`]). The `k` argument is ignored (it is `K`).
///
/// # Safety
/// The CPU must support AVX2.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn multiplied_has_probes_avx2_one_round<const K: u32>(
    line: &[u8; LINE_BYTES],
    hash: u64,
    _k: u32,
) -> bool {
    let (low, high) = line_halves(line);
    let (word, wanted) = avx2_probe(low, high, products(hash, &const { lanes_for(K) }));
    _mm256_testc_si256(word, wanted) == 1
}

/// [`multiplied_has_probes_avx512`] for `K ≤ 8` probes: one round, no loop,
/// no lane mask (see [`lanes_for`]). The `k` argument is ignored (it is `K`).
///
/// # Safety
/// The CPU must support AVX-512 F and VL.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
pub(crate) unsafe fn multiplied_has_probes_avx512_one_round<const K: u32>(
    line: &[u8; LINE_BYTES],
    hash: u64,
    _k: u32,
) -> bool {
    let (low, high) = line_halves(line);
    let (word, wanted) = avx512_probe(low, high, products(hash, &const { lanes_for(K) }));
    // testc: 1 when every wanted bit is set in `word`.
    _mm256_testc_si256(word, wanted) == 1
}

/// The eight lane multipliers of a one-round kernel for `k ≤ 8` probes:
/// probes 0..k, then probe 0 again in the lanes past `k` — a repeated probe
/// tests a bit already tested, so no lane needs masking out.
#[cfg(target_arch = "x86_64")]
#[expect(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build, not a run"
)]
const fn lanes_for(k: u32) -> [u32; 8] {
    let mut lanes = [MULTIPLIERS[0]; 8];
    let mut i = 0;
    while i < 8 && i < k as usize {
        lanes[i] = MULTIPLIERS[i];
        i += 1;
    }
    lanes
}

/// A way to pick kernels for a probe count.
#[cfg(test)]
pub(crate) type KernelChoice = fn(u32) -> (Kernel, GroupKernel);

/// Every kernel pair this CPU can run, by name, scalar included: the tests
/// hold each one to the scalar definition, whichever one a filter would pick.
#[cfg(test)]
pub(crate) fn available_kernels() -> Vec<(&'static str, KernelChoice)> {
    let mut kernels: Vec<(&'static str, KernelChoice)> =
        vec![("scalar", |_| (scalar_multiplied, group_scalar_multiplied))];
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::is_x86_feature_detected as has;
        if has!("avx2") {
            kernels.push(("avx2", |_| (multiplied_has_probes_avx2, group_avx2)));
            kernels.push(("avx2_one_round", one_round_avx2_for));
        }
        if has!("avx512f") && has!("avx512vl") {
            kernels.push(("avx512", |_| (multiplied_has_probes_avx512, group_avx512)));
            kernels.push(("avx512_one_round", one_round_avx512_for));
        }
    }
    kernels
}
