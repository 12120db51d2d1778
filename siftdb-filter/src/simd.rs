//! The filter's probe kernels: its one layout
//! ([`crate::probe`]) compiled for each x86-64 instruction set.
//!
//! Owns: [`Isa`], the instruction set this CPU offers (detected once per
//! process), and for each the single-key query and insert of a filter's
//! lines (the line's index, its address and its test in one call) and the
//! group query and insert (the loops of [`crate::line`] with the
//! kernel inlined).
//! Must never: test or set a different bit than the scalar definition
//! ([`crate::probe::sectored_mask`]) — the probe tests compare every
//! kernel with it on every probe count — or read outside the line.
//!
//! The line's eight 64-bit words are eight lanes: one multiply of the
//! broadcast low hash word by eight multipliers, one shift and a word mask
//! give the probe mask. With AVX-512 that is one register (the word mask a
//! mask register and a variable rotate, which needs no clearing of the
//! count); with AVX2 two registers of four words (variable shifts, the word
//! mask shifted into each lane); with neither the definition itself.
//!
//! Single-key calls are one indirect call: a filter chooses its kernels
//! when it is made ([`crate::kernel::LineTest`] keeps them as
//! function pointers) — for the [`Isa`] detected and, when the probes fit
//! one round (`k ≤ 8`, every filter at 12.75 bits per key or below), the
//! one-round kernels, which have no loop or test of the probe count; the
//! caller hashes the key inline (one xxh3, no branch on the seed) and the
//! kernel takes the filter's lines, the probe count
//! ([`crate::probe::Probes`], one register, the first round's word
//! mask one rotate) and the hash, last, so that it arrives in `rcx`, the
//! rotate's count. The line's index needs no bounds check (`line_index` is
//! below any non-empty line count).
//!
//! The AVX-512 one-round kernels are written for the chain after the
//! line's load, since a query spends most of its time waiting for that
//! line and what follows the load decides how soon the query can retire:
//! the probes (`1 << bit` per lane: broadcast, `vpmuludq`, shift,
//! `vprolvq`) and the round's words as a mask register (the probe count's
//! words rotated by the start word, `kmovw`) are worked out while the line
//! is on its way; the query is then one `vptestnmq` with the line as its
//! memory operand, masked to the round's words, `kortestw` and `sete`, and
//! the insert one `vporq` with the line as its memory operand (the probes
//! zeroed outside the round's words) and the store. Both are `asm!`
//! blocks: from intrinsics LLVM moves the mask to a general register
//! (`kmovw`, `test`) and loads the line separately, a chain two steps
//! longer; and the blocks use `zmm16` and `zmm17`, which SSE cannot name,
//! so the kernels end without a `vzeroupper`. The line's offset is worked
//! out first, in the hash's own register, so the load issues before the
//! probes are ready. With them the query takes 0.98–1.00× sbbf-rs-safe's
//! time at n = 1M (a 1.25 MB filter, past the 1 MB L2 of a Zen 4) and
//! 0.85–0.86× at 20M (docs/design.md, "The filter's layout and kernels",
//! with the command). The AVX2 one-round kernels, for CPUs
//! without AVX-512, are `asm!` too (the same offset in `rcx`, the two
//! halves of the line in `ymm0`/`ymm1`): 26 instructions, a `vzeroupper`
//! and a `ret` for the query, where LLVM's code from the intrinsics had 30.

#![expect(
    unsafe_code,
    reason = "x86-64 intrinsics and #[target_feature] kernels are unsafe to call, every \
              single-key kernel indexes its line unchecked, and the AVX-512 one-round kernels \
              are asm! blocks; kernel.rs reaches them only after CPU detection chose them, and \
              with a line"
)]

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;
#[cfg(target_arch = "x86_64")]
use std::sync::atomic::{AtomicU8, Ordering};

#[cfg(target_arch = "x86_64")]
use std::arch::asm;

use crate::line::{add_each, add_hash, answer_each, answer_hash, Line, LINE_BYTES};
use crate::probe::{line_add_mask, line_has_mask, sectored_mask, Probes};
#[cfg(target_arch = "x86_64")]
use crate::probe::{low_half, round_words, sector_start, ROUND_MULTIPLIERS};

/// The instruction set a filter's kernels are compiled for.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
#[cfg_attr(
    not(target_arch = "x86_64"),
    expect(
        dead_code,
        reason = "only x86-64 detects AVX2 and AVX-512; elsewhere every filter is Scalar"
    )
)]
pub(crate) enum Isa {
    /// The portable build.
    Scalar,
    /// x86-64 with AVX2.
    Avx2,
    /// x86-64 with AVX-512 F and VL.
    Avx512,
}

impl Isa {
    /// The best instruction set of this CPU; examined on the first call and
    /// remembered.
    #[cfg(target_arch = "x86_64")]
    pub(crate) fn detected() -> Isa {
        use std::arch::is_x86_feature_detected as has;
        // Miri runs neither the `asm!` kernels nor most vector intrinsics:
        // there the filters' unsafe code checked is the scalar kernels'.
        if cfg!(miri) {
            return Isa::Scalar;
        }
        match DETECTED.load(Ordering::Relaxed) {
            3 => return Isa::Avx512,
            2 => return Isa::Avx2,
            1 => return Isa::Scalar,
            _ => {}
        }
        let (found, id) = if has!("avx512f") && has!("avx512vl") {
            (Isa::Avx512, 3)
        } else if has!("avx2") {
            (Isa::Avx2, 2)
        } else {
            (Isa::Scalar, 1)
        };
        // Every thread detects the same answer, so a race only repeats the work.
        DETECTED.store(id, Ordering::Relaxed);
        found
    }

    /// The portable build elsewhere.
    #[cfg(not(target_arch = "x86_64"))]
    pub(crate) fn detected() -> Isa {
        Isa::Scalar
    }

    /// Every instruction set this CPU runs, for the tests that hold each
    /// kernel to the definition.
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Isa> {
        #[cfg_attr(
            not(target_arch = "x86_64"),
            expect(unused_mut, reason = "x86-64 adds to it")
        )]
        let mut out = vec![Isa::Scalar];
        #[cfg(target_arch = "x86_64")]
        if !cfg!(miri) {
            use std::arch::is_x86_feature_detected as has;
            if has!("avx2") {
                out.push(Isa::Avx2);
            }
            if has!("avx512f") && has!("avx512vl") {
                out.push(Isa::Avx512);
            }
        }
        out
    }
}

/// The detected instruction set, 0 until the first filter asks.
#[cfg(target_arch = "x86_64")]
static DETECTED: AtomicU8 = AtomicU8::new(0);

/// Makes the filters made from now on use the AVX2 kernels on a CPU that
/// also has AVX-512 (filters already made keep theirs), so a benchmark can
/// measure what a CPU without AVX-512 runs. A CPU without AVX2 is left as
/// it is. For the project's benchmarks ([`crate::internals`]), never called
/// by the library.
#[cfg(target_arch = "x86_64")]
pub fn cap_at_avx2() {
    if Isa::detected() == Isa::Avx512 {
        DETECTED.store(2, Ordering::Relaxed);
    }
}

/// The single-key query of a filter's lines in the portable build. Never
/// inlined into a filter's query: a caller that may also call a vector
/// kernel would carry its registers (saved and restored on every query)
/// for nothing.
/// # Safety
/// `lines` must not be empty (see [`answer_hash`]).
#[inline(never)]
pub(crate) unsafe fn contains_hash_scalar(
    lines: &[[u8; LINE_BYTES]],
    k: Probes,
    hash: u64,
) -> bool {
    let test = |line: &[u8; LINE_BYTES], hash| line_has_mask(line, &sectored_mask(hash, k));
    // SAFETY: `lines` is not empty (this function's contract).
    unsafe { answer_hash(lines, hash, test) }
}

/// The single-key insert into a filter's lines in the portable build.
/// # Safety
/// `lines` must not be empty (see [`add_hash`]).
#[inline(never)]
pub(crate) unsafe fn insert_hash_scalar(lines: &mut [Line], k: Probes, hash: u64) {
    let set = |line: &mut [u8; LINE_BYTES], hash| line_add_mask(line, &sectored_mask(hash, k));
    // SAFETY: `lines` is not empty (this function's contract).
    unsafe { add_hash(lines, hash, set) };
}

/// The group query in the portable build.
pub(crate) fn group_scalar(
    lines: &[[u8; LINE_BYTES]],
    hashes: &[u64],
    found: &mut [bool],
    k: Probes,
) {
    answer_each(lines, hashes, found, |line, hash| {
        line_has_mask(line, &sectored_mask(hash, k))
    });
}

/// The group insert in the portable build.
pub(crate) fn add_group_scalar(lines: &mut [Line], hashes: &[u64], k: Probes) {
    add_each(lines, hashes, |line, hash| {
        line_add_mask(line, &sectored_mask(hash, k))
    });
}

/// Defines the single and group kernels of one instruction set around its
/// line query and line insert.
#[cfg(target_arch = "x86_64")]
macro_rules! kernels_for {
    ($features:literal, $contains_hash:ident, $insert_hash:ident,
     $group:ident, $add_group:ident,
     |$line:ident, $hash:ident, $k:ident| $test_body:expr, $add_body:expr) => {
        /// The single-key query of a filter's lines: the hash's line and
        /// its test in this one call (see [`answer_hash`]).
        /// # Safety
        /// The CPU must support the features named in `target_feature`,
        /// and `lines` must not be empty.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $contains_hash(
            lines: &[[u8; LINE_BYTES]],
            $k: Probes,
            $hash: u64,
        ) -> bool {
            let test = |$line: &[u8; LINE_BYTES], $hash| $test_body;
            // SAFETY: `lines` is not empty (this function's contract).
            unsafe { answer_hash(lines, $hash, test) }
        }

        /// The single-key insert into a filter's lines (see [`add_hash`]).
        /// # Safety
        /// As the query's.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $insert_hash(lines: &mut [Line], $k: Probes, $hash: u64) {
            let set = |$line: &mut [u8; LINE_BYTES], $hash| $add_body;
            // SAFETY: `lines` is not empty (this function's contract).
            unsafe { add_hash(lines, $hash, set) };
        }

        /// The group query (see [`answer_each`]).
        /// # Safety
        /// As the query's.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $group(
            lines: &[[u8; LINE_BYTES]],
            hashes: &[u64],
            found: &mut [bool],
            $k: Probes,
        ) {
            answer_each(lines, hashes, found, |$line, $hash| $test_body);
        }

        /// The group insert (see [`add_each`]).
        /// # Safety
        /// As the query's.
        #[target_feature(enable = $features)]
        pub(crate) unsafe fn $add_group(lines: &mut [Line], hashes: &[u64], $k: Probes) {
            add_each(lines, hashes, |$line, $hash| $add_body);
        }
    };
}

#[cfg(target_arch = "x86_64")]
kernels_for!(
    "avx2",
    contains_hash_avx2,
    insert_hash_avx2,
    group_avx2,
    add_group_avx2,
    |line, hash, k| line_has_mask_avx2(line, sectored_mask_avx2(hash, k)),
    line_add_mask_avx2(line, sectored_mask_avx2(hash, k))
);

/// The word each 32-bit lane of an AVX2 round computes: lanes in this
/// order make the unpacking of the low and high halves
/// (`sectored_round_avx2`) give words 0–3 and 4–7 in place.
#[cfg(target_arch = "x86_64")]
const WORD_OF_LANE: [u32; 8] = [0, 1, 4, 5, 2, 3, 6, 7];

/// Layout 4's multipliers as 32-bit lanes in [`WORD_OF_LANE`] order, one
/// row per round, for `vpmulld`.
#[cfg(target_arch = "x86_64")]
#[expect(
    clippy::indexing_slicing,
    reason = "const evaluation: an index out of range fails the build, not a run"
)]
static AVX2_LANES: [[u32; 8]; ROUND_MULTIPLIERS.len()] = {
    let mut rows = [[0u32; 8]; ROUND_MULTIPLIERS.len()];
    let mut r = 0;
    while r < rows.len() {
        let mut j = 0;
        while j < 8 {
            rows[r][j] = ROUND_MULTIPLIERS[r][WORD_OF_LANE[j] as usize];
            j += 1;
        }
        r += 1;
    }
    rows
};

/// One round of probes in two AVX2 registers (words 0–3, 4–7). The eight
/// 32-bit products `x · M` sit in one register (lane order
/// [`WORD_OF_LANE`]); their top six bits `b` say the bit of each word,
/// which lies in the word's low half as bit `b` when `b < 32` and in its
/// high half as bit `b − 32` otherwise: a 32-bit variable shift by `b` and
/// one by `b − 32` give both halves (a count of 32 or more shifts to zero,
/// so each bit lands in one half only). The words the round leaves out
/// shift a 0. Unpacking the halves pairs them into the eight words.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn sectored_round_avx2(spread: __m256i, row: &[u32; 8], words: u8) -> [__m256i; 2] {
    // SAFETY: `row` is 32 bytes of u32s, one unaligned load.
    let multipliers = unsafe { _mm256_loadu_si256(row.as_ptr().cast()) };
    let bits = _mm256_srli_epi32::<26>(_mm256_mullo_epi32(spread, multipliers));
    // SAFETY: eight u32s, one unaligned load.
    let shifts = unsafe { _mm256_loadu_si256(WORD_OF_LANE.as_ptr().cast()) };
    let kept = _mm256_and_si256(
        _mm256_srlv_epi32(_mm256_set1_epi32(i32::from(words)), shifts),
        _mm256_set1_epi32(1),
    );
    let low = _mm256_sllv_epi32(kept, bits);
    let high = _mm256_sllv_epi32(kept, _mm256_sub_epi32(bits, _mm256_set1_epi32(32)));
    [
        _mm256_unpacklo_epi32(low, high),
        _mm256_unpackhi_epi32(low, high),
    ]
}

/// The probe mask ([`sectored_mask`]) in two AVX2 registers.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn sectored_mask_avx2(hash: u64, probes: Probes) -> [__m256i; 2] {
    let (x, k) = (low_half(hash), probes.count());
    let start = sector_start(x);
    // The lanes multiply modulo 2³²: the sign the cast gives is no matter.
    let spread = _mm256_set1_epi32(x as i32);
    let [first, later @ ..] = &AVX2_LANES;
    let mut mask = sectored_round_avx2(spread, first, probes.first_round_words(start));
    if k > 8 {
        for (done, row) in (8u32..).step_by(8).zip(later) {
            if done >= k {
                break;
            }
            let words = round_words((k - done).min(8), start);
            let [low, high] = sectored_round_avx2(spread, row, words);
            mask = [
                _mm256_or_si256(mask[0], low),
                _mm256_or_si256(mask[1], high),
            ];
        }
    }
    mask
}

/// True when every bit of `mask` is set in `line`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn line_has_mask_avx2(line: &[u8; LINE_BYTES], mask: [__m256i; 2]) -> bool {
    let halves = line.as_ptr().cast::<__m256i>();
    // SAFETY: `line` is 64 readable bytes, two unaligned 32-byte loads.
    let (low, high) = unsafe {
        (
            _mm256_loadu_si256(halves),
            _mm256_loadu_si256(halves.add(1)),
        )
    };
    let missing = _mm256_or_si256(
        _mm256_andnot_si256(low, mask[0]),
        _mm256_andnot_si256(high, mask[1]),
    );
    _mm256_testz_si256(missing, missing) == 1
}

/// Sets every bit of `mask` in `line`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[inline]
fn line_add_mask_avx2(line: &mut [u8; LINE_BYTES], mask: [__m256i; 2]) {
    let halves = line.as_mut_ptr().cast::<__m256i>();
    // SAFETY: `line` is 64 bytes, readable and writable, two unaligned
    // 32-byte halves.
    unsafe {
        let high = halves.add(1);
        _mm256_storeu_si256(halves, _mm256_or_si256(_mm256_loadu_si256(halves), mask[0]));
        _mm256_storeu_si256(high, _mm256_or_si256(_mm256_loadu_si256(high), mask[1]));
    }
}

/// The four instructions that replace the hash in `rcx` with the byte
/// offset of its line among `len` lines (`len` the register named),
/// `⌊hi · len / 2³²⌋ · 64` (see [`line_and_words`]).
#[cfg(target_arch = "x86_64")]
macro_rules! line_offset_in_rcx {
    ($len:literal) => {
        concat!(
            "shr rcx, 32\n",
            "imul rcx, ",
            $len,
            "\n",
            "shr rcx, 26\n",
            "and rcx, -64\n",
        )
    };
}

/// The constants of the AVX2 one-round kernels, 32 bytes each, in the
/// order [`avx2_one_round_bits`] reads them: the first round's multipliers
/// in [`WORD_OF_LANE`] order, [`WORD_OF_LANE`] itself (the shift that
/// brings each lane's word to bit 0 of the word mask), eight 1s and eight
/// 32s.
#[cfg(target_arch = "x86_64")]
static AVX2_ONE_ROUND: [[u32; 8]; 4] = {
    let [first, ..] = AVX2_LANES;
    [first, WORD_OF_LANE, [1; 8], [32; 8]]
};

/// The instructions of the AVX2 one-round kernels that leave the probes of
/// the hash in `rcx` in `ymm0` (words 0–3 of the line) and `ymm1` (words
/// 4–7), and the byte offset of its line among `rsi` lines in `rcx`, as
/// [`sectored_round_avx2`] and [`line_and_words`] work them out: the hash's
/// low half broadcast and multiplied (`vpmulld`, lanes in [`WORD_OF_LANE`]
/// order), its top six bits `b` the bit of each lane's word; the word mask
/// (`edx`, rotated by the hash as the AVX-512 kernels rotate it) broadcast
/// and shifted so each lane holds its word's bit of it, 1 or 0; that
/// shifted left by `b` (the word's low half: a count of 32 or more gives 0)
/// and by `b ^ 32` (its high half: `b − 32` when `b ≥ 32`, 32 or more
/// otherwise), and the halves unpacked into words. `ymm2` is free after it.
/// The registers are named, not allocated: the kernels end with a
/// `vzeroupper` (they write the upper halves of `ymm0`–`ymm2`), which
/// changes every vector register, so they declare the C ABI's clobbers, and
/// with those Rust wants every operand in a named register.
#[cfg(target_arch = "x86_64")]
macro_rules! avx2_one_round_bits {
    () => {
        concat!(
            "vmovd xmm0, ecx\n",
            "rol edx, cl\n",
            line_offset_in_rcx!("rsi"),
            "vpbroadcastd ymm0, xmm0\n",
            "vpmulld ymm0, ymm0, ymmword ptr [rip + {consts}]\n",
            "vpsrld ymm0, ymm0, 26\n",
            "vmovd xmm1, edx\n",
            "vpbroadcastd ymm1, xmm1\n",
            "vpsrlvd ymm1, ymm1, ymmword ptr [rip + {consts} + 32]\n",
            "vpand ymm1, ymm1, ymmword ptr [rip + {consts} + 64]\n",
            "vpsllvd ymm2, ymm1, ymm0\n",
            "vpxor ymm0, ymm0, ymmword ptr [rip + {consts} + 96]\n",
            "vpsllvd ymm1, ymm1, ymm0\n",
            "vpunpckldq ymm0, ymm2, ymm1\n",
            "vpunpckhdq ymm1, ymm2, ymm1\n",
        )
    };
}

/// The single-key query for `k ≤ 8` with AVX2: the probes and the line's
/// offset ([`avx2_one_round_bits`]), then the bits of each half missing
/// from the line (`vpandn`), ORed and tested (`vptest`). In `asm!`, as
/// the AVX-512 kernels are: LLVM's code from intrinsics (30 instructions,
/// a `vzeroupper` and a `ret`) copied the hash and the word mask first and
/// added a redundant mask of the low half's shift.
/// # Safety
/// The CPU must support AVX2; `lines` must not be empty; `k` must be one
/// round ([`Probes::one_round`]), or the probes past the first are not
/// tested.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
#[expect(
    clippy::transmute_int_to_bool,
    reason = "the answer is `sete`'s 0 or 1: `found != 0` costs a test and a set more"
)]
pub(crate) unsafe fn contains_hash_avx2_one_round(
    lines: &[[u8; LINE_BYTES]],
    k: Probes,
    hash: u64,
) -> bool {
    let found: u8;
    // SAFETY: `lines` is not empty (this function's contract), so the 64
    // bytes at `lines + rcx` are one of its lines (`line_offset_in_rcx`),
    // which the block only reads (no alignment needed), as it reads its
    // constants (a static); it writes its own registers and the flags, and
    // touches no stack.
    unsafe {
        asm!(
            avx2_one_round_bits!(),
            "vmovdqu ymm2, ymmword ptr [rdi + rcx]",
            "vpandn ymm0, ymm2, ymm0",
            "vmovdqu ymm2, ymmword ptr [rdi + rcx + 32]",
            "vpandn ymm1, ymm2, ymm1",
            "vpor ymm0, ymm0, ymm1",
            "vptest ymm0, ymm0",
            "sete al",
            "vzeroupper",
            in("rdi") lines.as_ptr(),
            in("rsi") lines.len(),
            inout("rdx") k.first_words() => _,
            inout("rcx") hash => _,
            consts = sym AVX2_ONE_ROUND,
            out("al") found,
            clobber_abi("C"),
            options(pure, readonly, nostack),
        );
    }
    // SAFETY: `sete` wrote 0 or 1, the two values of a bool.
    unsafe { std::mem::transmute::<u8, bool>(found) }
}

/// The single-key insert for `k ≤ 8` with AVX2: the probes
/// ([`avx2_one_round_bits`]) ORed with each half of the line in memory and
/// stored.
/// # Safety
/// As [`contains_hash_avx2_one_round`]'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
pub(crate) unsafe fn insert_hash_avx2_one_round(lines: &mut [Line], k: Probes, hash: u64) {
    // SAFETY: `lines` is not empty (this function's contract), so the 64
    // bytes at `lines + rcx` are one of its lines (`line_offset_in_rcx`),
    // which the block reads and writes (no alignment needed); it reads its
    // constants (a static), writes its own registers and the flags
    // otherwise, and touches no stack.
    unsafe {
        asm!(
            avx2_one_round_bits!(),
            "vpor ymm0, ymm0, ymmword ptr [rdi + rcx]",
            "vmovdqu ymmword ptr [rdi + rcx], ymm0",
            "vpor ymm1, ymm1, ymmword ptr [rdi + rcx + 32]",
            "vmovdqu ymmword ptr [rdi + rcx + 32], ymm1",
            "vzeroupper",
            in("rdi") lines.as_mut_ptr(),
            in("rsi") lines.len(),
            inout("rdx") k.first_words() => _,
            inout("rcx") hash => _,
            consts = sym AVX2_ONE_ROUND,
            clobber_abi("C"),
            options(nostack),
        );
    }
}

#[cfg(target_arch = "x86_64")]
kernels_for!(
    "avx512f,avx512vl",
    contains_hash_avx512,
    insert_hash_avx512,
    group_avx512,
    add_group_avx512,
    |line, hash, k| line_has_mask_avx512(line, sectored_mask_avx512(hash, k)),
    line_add_mask_avx512(line, sectored_mask_avx512(hash, k))
);

/// Layout 4's multipliers as 64-bit lanes, one row of eight per round, for
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

/// One round of probes in an AVX-512 register: the eight lanes' products
/// of `x` (broadcast in `spread`) and the round's multipliers, the top six
/// bits of each product's low half, and 1 shifted by each in the words
/// `words` names.
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

/// The probe mask ([`sectored_mask`]) in one AVX-512 register: one round
/// for `k ≤ 8` (every filter at 12.75 bits per key or below), one
/// [`sectored_round_avx512`] per round beyond.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[inline]
fn sectored_mask_avx512(hash: u64, probes: Probes) -> __m512i {
    let (x, k) = (low_half(hash), probes.count());
    let start = sector_start(x);
    let spread = _mm512_set1_epi64(i64::from(x));
    let [first, later @ ..] = &SECTOR_LANES;
    let mut mask = sectored_round_avx512(spread, first, probes.first_round_words(start));
    if k > 8 {
        for (done, row) in (8u32..).step_by(8).zip(later) {
            if done >= k {
                break;
            }
            let words = round_words((k - done).min(8), start);
            mask = _mm512_or_si512(mask, sectored_round_avx512(spread, row, words));
        }
    }
    mask
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

/// The 1 every lane's probe bit is rotated from, broadcast by the
/// one-round kernels from memory (a load folded into the broadcast, where
/// a constant would take a general register and a move).
#[cfg(target_arch = "x86_64")]
static ONE_BIT: u64 = 1;

/// The instructions that read the hash in `rcx` twice and then replace it
/// with the byte offset of its line among `{len}` lines, so the hash is
/// never copied:
/// - the hash is broadcast to the eight lanes of `zmm16` (for
///   [`one_round_bits`]);
/// - the first round's words go to mask register `{lanes}` (one bit per
///   word, as [`Probes::first_round_words`]): the probe count's words from
///   word 0 (`{words}`, a `u32` with them in every byte) rotated left by the
///   hash's low half — the rotate counts `cl` mod 32 and the pattern repeats
///   every 8 bits, so the low byte is the words rotated by the start word,
///   `x mod 8` ([`sector_start`]), with no instruction to work it out;
/// - `rcx` becomes `⌊hi · len / 2³²⌋ · 64` ([`crate::line::line_index`]
///   times [`LINE_BYTES`]; the shift by 26 and the `and` are the shift by 32 and
///   the times 64). For `len ≥ 1` the product is below `2³² · len`, so the
///   offset is below `len · 64` whatever the hash: the line at
///   `[{lines} + rcx]` needs no bounds check.
///
/// The offset's four steps come first so the line's load can start before
/// the probes are ready.
#[cfg(target_arch = "x86_64")]
macro_rules! line_and_words {
    () => {
        concat!(
            "vpbroadcastq zmm16, rcx\n",
            "rol {words:e}, cl\n",
            line_offset_in_rcx!("{len}"),
            "kmovw {lanes}, {words:e}\n",
        )
    };
}

/// The instructions that turn the hash broadcast in `zmm16`
/// ([`line_and_words`]) into one round's probe bit numbers, and put 1 in
/// every lane of `zmm17` (from `{one}`, [`ONE_BIT`]): the lanes multiplied
/// by the first round's multipliers (`vpmuludq` multiplies each lane's low
/// 32 bits) and shifted right by 26, so the top six bits of each product's
/// low half are the low six of the lane. The kernel then rotates `zmm17`
/// left by `zmm16` — a rotate counts mod 64, so the product's higher bits
/// need no clearing — and applies the round's words as a mask register
/// (the query masks its test, the insert zeroes the other lanes). `zmm16` and
/// `zmm17` are registers SSE cannot name: writing them leaves no upper
/// half of `ymm0`–`ymm15` dirty, so the kernels need no `vzeroupper` on
/// their way out (LLVM puts one at the end of any function that writes
/// those halves; `vzeroupper` itself leaves `zmm16`–`zmm31` alone).
#[cfg(target_arch = "x86_64")]
macro_rules! one_round_bits {
    () => {
        concat!(
            "vpmuludq zmm16, zmm16, zmmword ptr [rip + {mult}]\n",
            "vpsrlq zmm16, zmm16, 26\n",
            "vpbroadcastq zmm17, qword ptr [rip + {one}]\n",
        )
    };
}

/// The single-key query for `k ≤ 8` with AVX-512: the hash's line tested in
/// one instruction, `vptestnmq` of the probes ([`one_round_bits`], the
/// rotate after it) against the line in memory, masked to the round's
/// words (a lane is set when its probe's bit is missing), then `kortestw`
/// of that mask: found when no lane is set. The probes and the word mask
/// are worked out while the line is on its way, so after the load only the
/// test, `kortestw` and `sete` remain — the shortest chain from the load to
/// the answer (docs/design.md, "The filter's layout and kernels"). No test
/// of the length, no bounds check of the index ([`line_and_words`]), no
/// `vzeroupper` ([`one_round_bits`]). All in `asm!`: from intrinsics LLVM
/// turns the masked test into a test of a general register (`kmovw`,
/// `test`: one more step after the load), loads the line separately, and
/// allocates `zmm0` and up, which cost the `vzeroupper`.
/// # Safety
/// The CPU must support AVX-512 F and VL; `lines` must not be empty; `k`
/// must be one round ([`Probes::one_round`]), or the probes past the first
/// are not tested.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
#[expect(
    clippy::transmute_int_to_bool,
    reason = "the answer is `sete`'s 0 or 1: `found != 0` costs a test and a set more"
)]
pub(crate) unsafe fn contains_hash_avx512_one_round(
    lines: &[[u8; LINE_BYTES]],
    k: Probes,
    hash: u64,
) -> bool {
    let found: u8;
    // SAFETY: `lines` is not empty (this function's contract), so the 64
    // bytes at `lines + rcx` are one of its lines (`line_and_words`), which
    // the block only reads (no alignment needed), as it reads the multipliers
    // and `ONE_BIT` (statics); it writes its own registers and the flags,
    // and touches no stack.
    unsafe {
        asm!(
            line_and_words!(),
            one_round_bits!(),
            "vprolvq zmm16, zmm17, zmm16",
            "vptestnmq {missing}{{{lanes}}}, zmm16, zmmword ptr [{lines} + rcx]",
            "kortestw {missing}, {missing}",
            "sete {found}",
            words = inout(reg) k.first_words() => _,
            inout("rcx") hash => _,
            len = in(reg) lines.len(),
            mult = sym SECTOR_LANES,
            one = sym ONE_BIT,
            out("zmm16") _,
            out("zmm17") _,
            lanes = out(kreg) _,
            missing = out(kreg) _,
            lines = in(reg) lines.as_ptr(),
            found = out(reg_byte) found,
            options(pure, readonly, nostack),
        );
    }
    // SAFETY: `sete` wrote 0 or 1, the two values of a bool.
    unsafe { std::mem::transmute::<u8, bool>(found) }
}

/// The single-key insert for `k ≤ 8` with AVX-512: the probes
/// ([`one_round_bits`], rotated with the lanes outside the round's words
/// zeroed), ORed with the line in memory (`vporq` with the load folded in)
/// and stored — one instruction between the load and the store, and one
/// instruction fewer than a separate load. In `asm!` as the query is: LLVM
/// turns the zeroing and the OR back into a masked OR of a separately
/// loaded line.
/// # Safety
/// As [`contains_hash_avx512_one_round`]'s.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f,avx512vl")]
pub(crate) unsafe fn insert_hash_avx512_one_round(lines: &mut [Line], k: Probes, hash: u64) {
    // SAFETY: `lines` is not empty (this function's contract), so the 64
    // bytes at `lines + rcx` are one of its lines (`line_and_words`), which
    // the block reads and writes (no alignment needed); it reads the
    // multipliers and `ONE_BIT` (statics), writes its own registers and
    // the flags otherwise, and touches no stack.
    unsafe {
        asm!(
            line_and_words!(),
            one_round_bits!(),
            "vprolvq zmm16{{{lanes}}}{{z}}, zmm17, zmm16",
            "vporq zmm16, zmm16, zmmword ptr [{lines} + rcx]",
            "vmovdqu64 zmmword ptr [{lines} + rcx], zmm16",
            words = inout(reg) k.first_words() => _,
            inout("rcx") hash => _,
            len = in(reg) lines.len(),
            mult = sym SECTOR_LANES,
            one = sym ONE_BIT,
            out("zmm16") _,
            out("zmm17") _,
            lanes = out(kreg) _,
            lines = in(reg) lines.as_mut_ptr(),
            options(nostack),
        );
    }
}
