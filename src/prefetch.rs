//! Cache hints: asking the CPU to start loading memory a lookup is about to
//! read, so that loads whose addresses are known early overlap instead of
//! following one another (a filter line per candidate table, the entries of
//! a data block a seek will scan).
//!
//! Also the other memory hint: anonymous memory advised to be backed by
//! transparent huge pages, for structures read at random places (a large
//! filter, the memtable arena's large blocks).
//!
//! Owns: [`prefetch_bytes`]; the prefetch intrinsic (and its one `unsafe`
//! block) and [`huge_page_mapping`] are the filter crate's, re-exported here.
//! Must never: read memory architecturally or change a value: a hint that
//! is wrong only costs time; a refused huge-page hint is not an error.

/// Bytes in one x86-64 cache line, the unit a prefetch loads.
const CACHE_LINE_BYTES: usize = 64;

/// Most lines [`prefetch_bytes`] requests: past this the hardware's own
/// sequential prefetcher has caught up and more hints only cost issue slots.
const MAX_PREFETCHED_LINES: usize = 32;

/// The prefetch hint and the huge-page mapping live with the filters, the
/// layer below, whose lines they were made for.
pub(crate) use siftdb_filter::internals::{huge_page_mapping, prefetch_line};

/// Requests every cache line `bytes` spans (at most
/// [`MAX_PREFETCHED_LINES`] of them, from its start): for a scan whose next
/// address depends on the bytes just loaded, which the CPU would otherwise
/// load one line after another.
#[inline]
pub(crate) fn prefetch_bytes(bytes: &[u8]) {
    let start = bytes.as_ptr();
    let lines = (start as usize % CACHE_LINE_BYTES + bytes.len()).div_ceil(CACHE_LINE_BYTES);
    for line in 0..lines.min(MAX_PREFETCHED_LINES) {
        prefetch_line(start.wrapping_add(line * CACHE_LINE_BYTES));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hints_change_nothing() {
        let bytes: Vec<u8> = (0..=255).collect();
        prefetch_bytes(&bytes);
        prefetch_bytes(&bytes[3..3]);
        prefetch_line(std::ptr::null());
        assert_eq!(bytes.iter().map(|&b| u32::from(b)).sum::<u32>(), 255 * 128);
    }
}
