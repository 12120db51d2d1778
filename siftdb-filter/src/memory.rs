//! The memory a [`crate::BloomFilter`]'s lines live in.
//!
//! Owns: [`LineMemory`] — zeroed, cache-line-aligned lines, never none of
//! them, and for a large filter the choice of memory mapped from the system
//! and backed by transparent huge pages (Linux), and the few mappings of
//! dropped filters kept for the next filters of their size (`SparePool`).
//! Must never: hold no line (the single-key kernels index a filter's lines
//! without a check on that promise), hand out lines that are not zeroed
//! when made, or free them while the filter lives; a refused mapping or
//! huge-page hint is not an error (the heap is used, or 4 KiB pages).
//!
//! Why huge pages: every query of a filter reads one line at a random place
//! in it. With 4 KiB pages a filter of 20M keys at 10 bits per key (25 MB,
//! 6,100 pages) overflows the CPU's second-level TLB (3,072 entries on Zen
//! 4), so most queries also walk the page table — in a virtual machine a
//! nested walk. 2 MiB pages cover it with 13 entries. The memtable's arena
//! does the same for its large blocks (`src/memtable/arena.rs`).
//!
//! Why keep dropped mappings: a fresh mapping costs a page fault per huge
//! page, in which the kernel clears all 2 MiB, and unmapping it a TLB
//! flush. Measured at n = 1M (a 1.25 MB filter in one huge page), the
//! kernel's clearing alone was about 0.2 ms of a 5 ms build, 4%; reusing a
//! dropped filter's mapping costs a `memset` of the lines it used, which
//! also leaves them in the cache for the inserts that follow. A table
//! build, which makes and drops one filter per table, reuses the last
//! one's when the filter is mapped (1 MiB or more). At most [`SPARES`]
//! mappings of at most [`SPARE_LARGEST`] bytes are kept (16 MiB), so what
//! the process holds beyond its live filters is bounded (and shown:
//! `Stats::spare_filter_bytes`).
#![expect(
    unsafe_code,
    reason = "the lines are a slice over memory the owner (a Vec or a mapping) keeps alive"
)]

use std::ptr::NonNull;
use std::sync::Mutex;

use crate::error::{Error, Result};
use crate::line::{Line, LINE_BYTES};

/// A huge page (x86-64's 2 MiB).
const HUGE_PAGE: usize = 2 << 20;
/// Lines of a filter this large or larger are mapped in whole huge pages
/// (the last one partly used: less than one huge page more than the
/// filter, under 8% more for a filter of 25 MB or more, at most twice the
/// filter at 1 MiB — the price of one TLB entry instead of 256).
const MAPPED_FROM: usize = HUGE_PAGE / 2;

/// Dropped filters' mappings kept at once.
const SPARES: usize = 2;
/// The largest mapping kept (a filter of up to ~6.7M keys at 10 bits per key).
const SPARE_LARGEST: usize = 8 << 20;

/// The process's kept mappings.
static SPARE_MAPPINGS: SparePool = SparePool::new();

/// Mappings of dropped filters, each with how many of its leading bytes
/// the filter used (the rest are still as the kernel zeroed them).
struct SparePool(Mutex<Vec<(memmap2::MmapMut, usize)>>);

impl SparePool {
    const fn new() -> SparePool {
        SparePool(Mutex::new(Vec::new()))
    }

    /// A kept mapping of exactly `len` bytes, zeroed again, if there is one.
    fn take(&self, len: usize) -> Option<memmap2::MmapMut> {
        let (mut map, used) = {
            let mut kept = self.0.lock().ok()?;
            let at = kept.iter().position(|(map, _)| map.len() == len)?;
            kept.swap_remove(at)
        };
        map.get_mut(..used)?.fill(0);
        Some(map)
    }

    /// Bytes of the mappings kept now.
    fn bytes(&self) -> usize {
        self.0
            .lock()
            .map_or(0, |kept| kept.iter().map(|(map, _)| map.len()).sum())
    }

    /// Keeps `map`, whose first `used` bytes were written, when there is
    /// room and it is not too large; otherwise it is unmapped here.
    fn keep(&self, map: memmap2::MmapMut, used: usize) {
        if map.len() > SPARE_LARGEST {
            return;
        }
        if let Ok(mut kept) = self.0.lock() {
            if kept.len() < SPARES {
                let used = used.min(map.len());
                kept.push((map, used));
            }
        }
    }
}

/// Bytes of dropped filters' mappings this process keeps for the next
/// filters of their size (at most `SPARES` of at most `SPARE_LARGEST` bytes).
pub fn spare_mapping_bytes() -> usize {
    SPARE_MAPPINGS.bytes()
}

/// What keeps the lines' memory alive.
enum Owner {
    /// Smaller filters: one heap allocation.
    Heap(#[expect(dead_code, reason = "held only to be dropped")] Vec<Line>),
    /// Filters of [`MAPPED_FROM`] or more: anonymous memory, advised to be
    /// backed by huge pages, kept for the next filter or unmapped on drop.
    Mapped(memmap2::MmapMut),
}

/// A filter's lines: `len` zeroed, 64-byte-aligned lines in memory that
/// lives as long as this value; `len ≥ 1` always, which is what lets
/// `kernel::LineTest::contains_in` call a kernel with no test first.
pub(crate) struct LineMemory {
    start: NonNull<Line>,
    len: usize,
    owner: Owner,
}

// SAFETY: the lines are plain bytes owned by this value alone (the owner is
// a Vec or a mapping no one else holds); `&self` gives shared access only
// and `&mut self` unique access, as for a `Vec<Line>`.
unsafe impl Send for LineMemory {}
// SAFETY: as for `Send`: shared references only read.
unsafe impl Sync for LineMemory {}

impl LineMemory {
    /// `count` empty lines, or `InvalidArgument` when memory is refused or
    /// `count` is zero (a filter has a line).
    pub(crate) fn zeroed(count: u64) -> Result<LineMemory> {
        if count == 0 {
            return Err(Error::invalid("a filter needs at least one line"));
        }
        let bytes = count.saturating_mul(LINE_BYTES as u64);
        let refused = || Error::invalid(format!("cannot allocate {bytes} bytes for a filter"));
        let len = usize::try_from(count).map_err(|_| refused())?;
        let size = len.checked_mul(LINE_BYTES).ok_or_else(refused)?;
        if size >= MAPPED_FROM {
            if let Some(mapped) = LineMemory::mapped(len, size) {
                return Ok(mapped);
            }
        }
        let mut lines = Vec::new();
        lines.try_reserve_exact(len).map_err(|_| refused())?;
        lines.resize(len, Line::EMPTY);
        Ok(LineMemory::from(lines))
    }

    /// `len` lines (`size` bytes) in anonymous memory rounded up to whole
    /// huge pages (Linux places such a mapping on a huge-page boundary),
    /// advised to use them before any page is touched; `None` when the
    /// system refuses the mapping.
    fn mapped(len: usize, size: usize) -> Option<LineMemory> {
        let whole = size.checked_next_multiple_of(HUGE_PAGE)?;
        let mut map = match SPARE_MAPPINGS.take(whole) {
            Some(kept) => kept,
            None => crate::hint::huge_page_mapping(whole)?,
        };
        // A mapping starts on a page boundary, so on a line's; it is zeroed
        // and at least `size` bytes long.
        let start = NonNull::new(map.as_mut_ptr().cast::<Line>())?;
        Some(LineMemory {
            start,
            len,
            owner: Owner::Mapped(map),
        })
    }

    /// The lines.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[Line] {
        // SAFETY: `start` is `len` initialised, aligned lines that the owner
        // keeps alive while `self` is borrowed (any bytes are a valid `Line`).
        unsafe { std::slice::from_raw_parts(self.start.as_ptr(), self.len) }
    }

    /// The lines as plain byte arrays, as a filter block holds them (never
    /// empty).
    #[inline]
    pub(crate) fn as_arrays(&self) -> &[[u8; LINE_BYTES]] {
        // SAFETY: `Line` is `repr(C)` around one `[u8; LINE_BYTES]`: same
        // size, stricter alignment, every bit pattern valid; the memory is
        // as in `as_slice`.
        unsafe { std::slice::from_raw_parts(self.start.as_ptr().cast(), self.len) }
    }

    /// The lines, to set bits in.
    #[inline]
    pub(crate) fn as_mut_slice(&mut self) -> &mut [Line] {
        // SAFETY: as in `as_slice`, and `&mut self` makes the access unique.
        unsafe { std::slice::from_raw_parts_mut(self.start.as_ptr(), self.len) }
    }

    /// Whether the lines are in huge-page-advised mapped memory.
    #[cfg(test)]
    fn is_mapped(&self) -> bool {
        matches!(self.owner, Owner::Mapped(_))
    }
}

impl Drop for LineMemory {
    fn drop(&mut self) {
        let owner = std::mem::replace(&mut self.owner, Owner::Heap(Vec::new()));
        if let Owner::Mapped(map) = owner {
            SPARE_MAPPINGS.keep(map, self.len.saturating_mul(LINE_BYTES));
        }
    }
}

impl From<Vec<Line>> for LineMemory {
    /// The lines of `lines`; an empty vector becomes one empty line (no
    /// filter makes one, and a `LineMemory` always holds a line).
    fn from(mut lines: Vec<Line>) -> LineMemory {
        if lines.is_empty() {
            lines.push(Line::EMPTY);
        }
        let (start, len) = (
            NonNull::from(lines.as_mut_slice()).cast::<Line>(),
            lines.len(),
        );
        LineMemory {
            start,
            len,
            owner: Owner::Heap(lines),
        }
    }
}

impl Clone for LineMemory {
    fn clone(&self) -> LineMemory {
        let mut copy = match LineMemory::zeroed(self.len as u64) {
            Ok(copy) => copy,
            // Only when memory is refused, where `Vec::clone` aborts too.
            Err(_) => std::alloc::handle_alloc_error(std::alloc::Layout::new::<Line>()),
        };
        copy.as_mut_slice().copy_from_slice(self.as_slice());
        copy
    }
}

impl PartialEq for LineMemory {
    fn eq(&self, other: &LineMemory) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl Eq for LineMemory {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_and_large_are_zeroed_aligned_and_writable() {
        for count in [1usize, 3, 1000, MAPPED_FROM / LINE_BYTES + 5] {
            let mut lines = LineMemory::zeroed(count as u64).unwrap();
            assert_eq!(lines.as_slice().len(), count);
            assert_eq!(lines.as_slice().as_ptr() as usize % LINE_BYTES, 0);
            assert!(lines.as_slice().iter().all(|l| *l == Line::EMPTY));
            if let Some(last) = lines.as_mut_slice().last_mut() {
                last.0[63] = 7;
            }
            let copy = lines.clone();
            assert!(copy == lines);
            assert_eq!(copy.as_slice().last().unwrap().0[63], 7);
            assert_eq!(lines.is_mapped(), count * LINE_BYTES >= MAPPED_FROM);
        }
    }

    #[test]
    fn an_impossible_size_is_refused() {
        assert!(LineMemory::zeroed(u64::MAX).is_err());
        assert!(LineMemory::zeroed(0).is_err());
    }

    /// A kept mapping comes back zeroed, is kept only up to the limits, and
    /// only a mapping of the asked size is handed out.
    #[test]
    fn spare_mappings_come_back_zeroed_within_limits() {
        let pool = SparePool::new();
        let mut map = crate::hint::huge_page_mapping(HUGE_PAGE).unwrap();
        map.fill(0xa5);
        let at = map.as_ptr();
        pool.keep(map, HUGE_PAGE / 2 + 3);
        assert!(pool.take(2 * HUGE_PAGE).is_none(), "another size");
        let again = pool.take(HUGE_PAGE).unwrap();
        assert_eq!(again.as_ptr(), at, "the same mapping");
        let (cleared, rest) = again.split_at(HUGE_PAGE / 2 + 3);
        // Under Miri, about a thousand times slower, a sample of the bytes.
        let step = if cfg!(miri) { 257 } else { 1 };
        assert!(cleared
            .iter()
            .step_by(step)
            .chain(cleared.last())
            .all(|&b| b == 0));
        // Beyond what the filter used the bytes are left alone: still the
        // kernel's zeros in real use (here the test's own 0xa5).
        assert!(rest.iter().step_by(step).all(|&b| b == 0xa5));
        assert!(pool.take(HUGE_PAGE).is_none(), "handed out once");
        for _ in 0..SPARES + 1 {
            pool.keep(crate::hint::huge_page_mapping(HUGE_PAGE).unwrap(), 0);
        }
        assert_eq!(pool.0.lock().unwrap().len(), SPARES);
        assert_eq!(pool.bytes(), SPARES * HUGE_PAGE);
        let large = crate::hint::huge_page_mapping(SPARE_LARGEST + HUGE_PAGE).unwrap();
        let pool = SparePool::new();
        pool.keep(large, 1);
        assert!(pool.0.lock().unwrap().is_empty(), "too large to keep");
    }

    /// Filters made and dropped in turn (the global pool at work): every
    /// new one is all zeros however the last was written.
    #[test]
    fn a_filter_after_a_dropped_one_is_zeroed() {
        let count = (MAPPED_FROM / LINE_BYTES + 5) as u64;
        for round in 0..if cfg!(miri) { 2 } else { 4u8 } {
            let mut lines = LineMemory::zeroed(count).unwrap();
            assert!(
                lines.as_slice().iter().all(|l| *l == Line::EMPTY),
                "round {round}"
            );
            for line in lines.as_mut_slice() {
                line.0 = [round + 1; LINE_BYTES];
            }
        }
    }

    /// The kernels rely on it: no way to a `LineMemory` without a line.
    #[test]
    fn there_is_always_a_line() {
        let from_empty = LineMemory::from(Vec::new());
        assert_eq!(from_empty.as_slice().len(), 1);
        assert_eq!(from_empty.as_arrays(), &[[0u8; LINE_BYTES]]);
        assert_eq!(from_empty.clone().as_slice().len(), 1);
    }
}
