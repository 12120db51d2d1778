//! The line every blocked filter is made of, and how a key reaches it: the
//! key hash, the hash's choice of line, and the loop that answers a group of
//! hashes line by line.
//!
//! Owns: [`LINE_BYTES`], [`Line`], [`hash_key`] / [`hash_key_seeded`] (xxh3),
//! [`line_index`] (multiply-shift on the hash's high 32 bits), the set-bit
//! count of a line, and `answer_each` (the prefetch hint it re-exports
//! lives in `crate::hint`).
//! Must never: import another filter module but the constants of
//! [`crate::theory`] — this is the leaf every other filter module
//! builds on (probes, kernels, batches, the filter, its block).

use crate::theory::LINE_BITS;

/// Bytes in one line (512 bits, one x86-64 cache line).
pub const LINE_BYTES: usize = LINE_BITS as usize / 8;

/// One cache line of filter bits, aligned so a probe touches one line of cache.
#[derive(Clone, Copy, PartialEq, Eq)]
#[repr(C, align(64))]
pub struct Line(pub [u8; LINE_BYTES]);

impl Line {
    /// A line with no bit set.
    pub const EMPTY: Line = Line([0; LINE_BYTES]);
}

/// The hash siftdb filters are built from: xxh3-64 of the key with `seed`.
#[inline]
pub fn hash_key_seeded(key: &[u8], seed: u64) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed)
}

/// The hash of `key` for seed 0, the seed every table filter uses; compute
/// it once per lookup and ask every table's filter with `contains_hash`.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// A filter's hash of `key`: [`hash_key_seeded`], which for seed 0 (every
/// table's) is [`hash_key`]. One hash, not a branch on the seed between
/// two: for short keys the seed costs an add and a subtract, and one copy
/// of xxh3 is what lets a caller's loop inline it.
#[inline(always)]
pub(crate) fn filter_hash(key: &[u8], seed: u64) -> u64 {
    hash_key_seeded(key, seed)
}

/// The line a hash maps to, for a filter of `lines` lines (`1 ≤ lines ≤ 2^32`).
///
/// Always below `lines` when `lines ≥ 1`, whatever the hash: for
/// `lines ≤ 2^32` the product is below `2^32 · lines`, and for more lines
/// the result, a 32-bit value, is below `2^32 < lines` (the multiply
/// wraps) — which is what lets the single-key kernels skip the bounds check.
#[inline]
pub fn line_index(hash: u64, lines: u64) -> usize {
    ((hash >> 32).wrapping_mul(lines) >> 32) as usize
}

/// The line of `hash` among `lines`: the index [`line_index`] is in bounds
/// for every hash, so no check follows it.
///
/// # Safety
/// `lines` must not be empty.
#[inline(always)]
#[expect(
    unsafe_code,
    reason = "an index the multiply-shift keeps in bounds; a checked get cost 0.3 ns a query"
)]
unsafe fn line_of<T>(lines: &[T], hash: u64) -> &T {
    let index = line_index(hash, lines.len() as u64);
    debug_assert!(index < lines.len(), "{index} of {}", lines.len());
    // SAFETY: `lines` is not empty (the caller's promise), and then
    // `line_index` is below its length (see its proof).
    unsafe { lines.get_unchecked(index) }
}

/// [`line_of`], to set bits in.
///
/// # Safety
/// As [`line_of`]'s.
#[inline(always)]
#[expect(
    unsafe_code,
    reason = "an index the multiply-shift keeps in bounds; a checked get cost 0.3 ns a query"
)]
unsafe fn line_of_mut<T>(lines: &mut [T], hash: u64) -> &mut T {
    let index = line_index(hash, lines.len() as u64);
    debug_assert!(index < lines.len(), "{index} of {}", lines.len());
    // SAFETY: as in `line_of`.
    unsafe { lines.get_unchecked_mut(index) }
}

/// Set bits in a line.
#[inline]
pub(crate) fn line_ones(line: &[u8; LINE_BYTES]) -> u32 {
    line.as_chunks::<8>()
        .0
        .iter()
        .map(|w| u64::from_le_bytes(*w).count_ones())
        .sum()
}

pub(crate) use crate::hint::prefetch_line;

/// Hashes `add_each` requests the line of ahead of the one it sets:
/// enough loads in flight to cover a memory latency.
pub const INSERT_AHEAD: usize = 16;

/// The loop every batched insert runs, written once: sets each hash's
/// probes in the line it picks with `set`, requesting the line of the hash
/// [`INSERT_AHEAD`] places on first, so the loads of a filter larger than
/// the cache overlap.
#[inline(always)]
pub(crate) fn add_each(
    lines: &mut [Line],
    hashes: &[u64],
    set: impl Fn(&mut [u8; LINE_BYTES], u64),
) {
    let count = lines.len() as u64;
    let base = lines.as_ptr();
    let address = |hash: u64| base.wrapping_add(line_index(hash, count)).cast::<u8>();
    for &hash in hashes.iter().take(INSERT_AHEAD) {
        prefetch_line(address(hash));
    }
    for (i, &hash) in hashes.iter().enumerate() {
        if let Some(&next) = hashes.get(i + INSERT_AHEAD) {
            prefetch_line(address(next));
        }
        if let Some(line) = lines.get_mut(line_index(hash, count)) {
            set(&mut line.0, hash);
        }
    }
}

/// The single-key query every kernel runs, written once: the hash's line
/// and `test`, in the kernel's one call (the line's index and address are
/// worked out inside it, so the caller passes the lines and the hash only).
/// No test of the length here: the kernel's callers guarantee a line
/// (`kernel::LineTest`), so the kernel starts with the line's index and
/// its load (docs/design.md, "The filter's layout and kernels").
///
/// # Safety
/// `lines` must not be empty.
#[inline(always)]
#[expect(
    unsafe_code,
    reason = "the line is indexed unchecked, on the caller's promise of a line"
)]
pub(crate) unsafe fn answer_hash(
    lines: &[[u8; LINE_BYTES]],
    hash: u64,
    test: impl Fn(&[u8; LINE_BYTES], u64) -> bool,
) -> bool {
    // SAFETY: `lines` is not empty (this function's contract).
    test(unsafe { line_of(lines, hash) }, hash)
}

/// The single-key insert every kernel runs, written once (as
/// [`answer_hash`]): the hash's line and `set`.
///
/// # Safety
/// `lines` must not be empty.
#[inline(always)]
#[expect(
    unsafe_code,
    reason = "the line is indexed unchecked, on the caller's promise of a line"
)]
pub(crate) unsafe fn add_hash(
    lines: &mut [Line],
    hash: u64,
    set: impl Fn(&mut [u8; LINE_BYTES], u64),
) {
    // SAFETY: `lines` is not empty (this function's contract).
    set(&mut unsafe { line_of_mut(lines, hash) }.0, hash);
}

/// The loop every group kernel runs, written once; each group kernel is this
/// loop inlined with its own single kernel and target features.
#[inline(always)]
pub(crate) fn answer_each(
    lines: &[[u8; LINE_BYTES]],
    hashes: &[u64],
    found: &mut [bool],
    test: impl Fn(&[u8; LINE_BYTES], u64) -> bool,
) {
    let count = lines.len() as u64;
    for (answer, &hash) in found.iter_mut().zip(hashes) {
        *answer = match lines.get(line_index(hash, count)) {
            Some(line) => test(line, hash),
            // Unreachable for a non-empty filter; failing open keeps it safe.
            None => true,
        };
    }
}
