//! The probe kernel a filter runs, chosen once per filter.
//!
//! Owns: [`LineTest`] — for a probe count, the query and insert of one key's
//! hash in a filter's lines (kernels chosen when the filter is made and
//! kept as function pointers) and of a group, run with the instruction set
//! detected when the filter was made ([`crate::simd::Isa`]) — and
//! the only calls of the target-feature kernels.
//! Must never: run a kernel this CPU cannot run (the vector kernels are
//! `unsafe` for exactly that reason), or answer differently from the
//! layout's scalar definition.
#![expect(
    unsafe_code,
    reason = "calls the target-feature kernels simd.rs compiled, for the CPU features detected"
)]

use crate::line::{Line, LINE_BYTES};
use crate::memory::LineMemory;
use crate::probe::Probes;
use crate::simd::{self, Isa};

/// A single-key query kernel: whether a hash may be in a filter's lines.
/// `unsafe` because the vector kernels run only on a CPU with their
/// features — [`LineTest`] stores only kernels of the detected set — and
/// because every kernel indexes its line without a check: the lines must
/// not be empty ([`LineTest`] tests a slice, and a [`LineMemory`] always
/// holds a line).
type ContainsKernel = unsafe fn(&[[u8; LINE_BYTES]], Probes, u64) -> bool;
/// A single-key insert kernel: sets a hash's probes in a filter's lines.
type InsertKernel = unsafe fn(&mut [Line], Probes, u64);

/// The kernels for one probe count on this CPU. The single-key kernels are
/// chosen once, when the filter is made — for the instruction set and for
/// whether the probes fit one round — and stored as function pointers, so
/// a query is one indirect call (predicted: a filter always calls the same
/// one) and no branch on the instruction set or the probe count; the group
/// kernels, called once per many keys, match on the instruction set.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineTest {
    isa: Isa,
    probes: Probes,
    contains: ContainsKernel,
    insert: InsertKernel,
}

impl LineTest {
    pub(crate) fn new(probes: u32) -> LineTest {
        LineTest::with_isa(Isa::detected(), probes)
    }

    /// The kernels of `isa`, which must be one [`Isa::detected`] returns or
    /// below it.
    pub(crate) fn with_isa(isa: Isa, probes: u32) -> LineTest {
        let probes = Probes::new(probes);
        let (contains, insert): (ContainsKernel, InsertKernel) = match (isa, probes.one_round()) {
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, true) => (
                simd::contains_hash_avx512_one_round,
                simd::insert_hash_avx512_one_round,
            ),
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx512, false) => (simd::contains_hash_avx512, simd::insert_hash_avx512),
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx2, true) => (
                simd::contains_hash_avx2_one_round,
                simd::insert_hash_avx2_one_round,
            ),
            #[cfg(target_arch = "x86_64")]
            (Isa::Avx2, false) => (simd::contains_hash_avx2, simd::insert_hash_avx2),
            _ => (simd::contains_hash_scalar, simd::insert_hash_scalar),
        };
        LineTest {
            isa,
            probes,
            contains,
            insert,
        }
    }

    /// Whether a key of this hash may be in the filter of `lines`: the
    /// line's index, its address and its test in one call of the kernel.
    /// No line: fails open (no filter is empty; a caller's empty slice
    /// stays safe).
    #[inline(always)]
    pub(crate) fn contains_hash(&self, lines: &[[u8; LINE_BYTES]], hash: u64) -> bool {
        if lines.is_empty() {
            return true;
        }
        // SAFETY: `with_isa` stored a kernel of `isa`, this CPU's (or one it
        // also runs), for `probes`' number of rounds; `lines` is not empty.
        unsafe { (self.contains)(lines, self.probes, hash) }
    }

    /// [`LineTest::contains_hash`] in a filter's own lines, which always
    /// hold one: the kernel's call and nothing before it.
    #[inline(always)]
    pub(crate) fn contains_in(&self, lines: &LineMemory, hash: u64) -> bool {
        // SAFETY: as in `contains_hash`; a `LineMemory` is never empty.
        unsafe { (self.contains)(lines.as_arrays(), self.probes, hash) }
    }

    /// Sets the probes of a hash in its line of `lines`, in one call of
    /// the kernel; sets nothing when there is no line (the tests' entry;
    /// a filter calls [`LineTest::insert_in`]).
    #[cfg(test)]
    pub(crate) fn insert_hash(&self, lines: &mut [Line], hash: u64) {
        if lines.is_empty() {
            return;
        }
        // SAFETY: as in `contains_hash`.
        unsafe { (self.insert)(lines, self.probes, hash) }
    }

    /// [`LineTest::insert_hash`] into a filter's own lines, which always
    /// hold one.
    #[inline(always)]
    pub(crate) fn insert_in(&self, lines: &mut LineMemory, hash: u64) {
        // SAFETY: as in `contains_in`.
        unsafe { (self.insert)(lines.as_mut_slice(), self.probes, hash) }
    }

    /// Sets the probes of every hash of `hashes` in the line it picks among
    /// `lines` (the whole filter), requesting lines ahead.
    #[inline]
    pub(crate) fn add_group(&self, lines: &mut [Line], hashes: &[u64]) {
        let k = self.probes;
        match self.isa {
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { simd::add_group_avx512(lines, hashes, k) },
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { simd::add_group_avx2(lines, hashes, k) },
            _ => simd::add_group_scalar(lines, hashes, k),
        }
    }

    /// `found[i]` = whether `hashes[i]` may be in the filter of `lines` (each
    /// hash picks its line by [`crate::line::line_index`]).
    #[inline]
    pub(crate) fn test_group(
        &self,
        lines: &[[u8; LINE_BYTES]],
        hashes: &[u64],
        found: &mut [bool],
    ) {
        let k = self.probes;
        match self.isa {
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { simd::group_avx512(lines, hashes, found, k) },
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { simd::group_avx2(lines, hashes, found, k) },
            _ => simd::group_scalar(lines, hashes, found, k),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// No line: a query fails open and an insert sets nothing, on every
    /// instruction set and both kinds of kernel (one round, more).
    #[test]
    fn no_lines_fail_open_on_every_kernel() {
        for isa in Isa::available() {
            for k in [1, 7, 8, 9, 32] {
                let test = LineTest::with_isa(isa, k);
                assert!(test.contains_hash(&[], 0x1234_5678_9abc_def0));
                test.insert_hash(&mut [], 0x1234_5678_9abc_def0);
            }
        }
    }
}
