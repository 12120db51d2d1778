//! The query kernel a filter runs, chosen once per filter.
//!
//! Owns: [`LineTest`] — for a layout and probe count, the single and group
//! kernels: layout 2's vector kernels from [`crate::filter::simd`] where the
//! CPU has them, the scalar definitions of [`crate::filter::probe`]
//! otherwise — and the only calls through those kernel pointers.
//! Must never: pick a kernel this CPU cannot run (the vector kernels are
//! `unsafe` for exactly that reason), or answer differently from the
//! layout's scalar definition.
#![expect(
    unsafe_code,
    reason = "calls the target-feature kernels simd.rs chose for this CPU"
)]

use crate::filter::line::{add_each, answer_each, Line, LINE_BYTES};
use crate::filter::probe::{line_add_probes, scalar_has_probes, Layout};
use crate::filter::simd::{multiplied_kernels, sectored_kernels, AddKernel, GroupKernel, Kernel};

/// The query loop for one layout and probe count, chosen once per filter:
/// layout 2 runs as eight-lane vector code where the CPU has it (detected
/// once per process). Filters keep one and call it through a pointer, so a
/// query pays no feature check.
#[derive(Clone, Copy)]
pub(crate) struct LineTest {
    kernel: Kernel,
    group: GroupKernel,
    add: AddKernel,
    probes: u32,
}

impl LineTest {
    pub(crate) fn new(layout: Layout, probes: u32) -> LineTest {
        let (kernel, group, add): (Kernel, GroupKernel, AddKernel) = match layout {
            Layout::Multiplied => {
                let (kernel, group) = multiplied_kernels(probes);
                (kernel, group, add_multiplied)
            }
            Layout::Remixed => (scalar_remixed, group_scalar_remixed, add_remixed),
            Layout::Sectored => sectored_kernels(probes),
        };
        LineTest {
            kernel,
            group,
            add,
            probes,
        }
    }

    /// Sets the probes of every hash of `hashes` in the line it picks among
    /// `lines` (the whole filter), requesting lines ahead.
    #[inline]
    pub(crate) fn add_group(&self, lines: &mut [Line], hashes: &[u64]) {
        // SAFETY: `new` picks a vector kernel only on a CPU with its features.
        unsafe { (self.add)(lines, hashes, self.probes) }
    }

    /// True when every bit `hash` probes is set in `line`.
    #[inline]
    pub(crate) fn test(&self, line: &[u8; LINE_BYTES], hash: u64) -> bool {
        // SAFETY: `new` picks a vector kernel only on a CPU with its features.
        unsafe { (self.kernel)(line, hash, self.probes) }
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
        // SAFETY: as in `test`.
        unsafe { (self.group)(lines, hashes, found, self.probes) }
    }
}

impl std::fmt::Debug for LineTest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LineTest")
            .field("probes", &self.probes)
            .finish_non_exhaustive()
    }
}

fn scalar_remixed(line: &[u8; LINE_BYTES], hash: u64, k: u32) -> bool {
    scalar_has_probes(Layout::Remixed, line, hash, k)
}

fn group_scalar_remixed(lines: &[[u8; LINE_BYTES]], hashes: &[u64], found: &mut [bool], k: u32) {
    answer_each(lines, hashes, found, |line, hash| {
        scalar_remixed(line, hash, k)
    });
}

fn add_remixed(lines: &mut [Line], hashes: &[u64], k: u32) {
    add_each(lines, hashes, |line, hash| {
        line_add_probes(Layout::Remixed, line, hash, k)
    });
}

fn add_multiplied(lines: &mut [Line], hashes: &[u64], k: u32) {
    add_each(lines, hashes, |line, hash| {
        line_add_probes(Layout::Multiplied, line, hash, k)
    });
}
