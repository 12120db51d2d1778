//! The probe kernel a filter runs, chosen once per filter.
//!
//! Owns: [`LineTest`] — for a probe count, the query and insert of one key's
//! hash in a filter's lines and of a group, run with the instruction set detected when the filter
//! was made ([`crate::filter::simd::Isa`]) — and the only calls of the
//! target-feature kernels.
//! Must never: run a kernel this CPU cannot run (the vector kernels are
//! `unsafe` for exactly that reason), or answer differently from the
//! layout's scalar definition.
#![expect(
    unsafe_code,
    reason = "calls the target-feature kernels simd.rs compiled, for the CPU features detected"
)]

use crate::filter::line::{Line, LINE_BYTES};
use crate::filter::probe::Probes;
use crate::filter::simd::{self, Isa};

/// The kernels for one probe count on this CPU. A query matches on the
/// instruction set (one predicted branch) and calls its kernel directly.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LineTest {
    isa: Isa,
    probes: Probes,
}

impl LineTest {
    pub(crate) fn new(probes: u32) -> LineTest {
        LineTest::with_isa(Isa::detected(), probes)
    }

    /// The kernels of `isa`, which must be one [`Isa::detected`] returns or
    /// below it.
    pub(crate) fn with_isa(isa: Isa, probes: u32) -> LineTest {
        LineTest {
            isa,
            probes: Probes::new(probes),
        }
    }

    /// Whether a key of this hash may be in the filter of `lines`: the
    /// line's index, its address and its test in one call of the kernel.
    #[inline(always)]
    pub(crate) fn contains_hash(&self, lines: &[[u8; LINE_BYTES]], hash: u64) -> bool {
        let k = self.probes;
        match self.isa {
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { simd::contains_hash_avx512(lines, hash, k) },
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { simd::contains_hash_avx2(lines, hash, k) },
            _ => simd::contains_hash_scalar(lines, hash, k),
        }
    }

    /// Sets the probes of a hash in its line of `lines`, in one call of
    /// the kernel.
    #[inline(always)]
    pub(crate) fn insert_hash(&self, lines: &mut [Line], hash: u64) {
        let k = self.probes;
        match self.isa {
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx512 => unsafe { simd::insert_hash_avx512(lines, hash, k) },
            // SAFETY: `isa` is this CPU's (or one it also runs).
            #[cfg(target_arch = "x86_64")]
            Isa::Avx2 => unsafe { simd::insert_hash_avx2(lines, hash, k) },
            _ => simd::insert_hash_scalar(lines, hash, k),
        }
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
    /// hash picks its line by [`crate::filter::line::line_index`]).
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
