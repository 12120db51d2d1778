//! Memory hints: asking the CPU to start loading a filter line a lookup is
//! about to read, so that the loads of a batch overlap instead of following
//! one another; and anonymous memory advised to be backed by transparent
//! huge pages, for a large filter read at random places.
//!
//! siftdb's own read path (its index and data blocks, the memtable arena)
//! uses the same two hints, through `internals`.
//!
//! Owns: the prefetch intrinsic and its one `unsafe` block, and
//! [`huge_page_mapping`].
//! Must never: read memory architecturally or change a value: a hint that
//! is wrong only costs time; a refused huge-page hint is not an error.

/// Asks the CPU to start loading the line at `line` into cache; a hint only
/// (it never faults and changes no value), so it is safe for any address.
#[inline(always)]
#[cfg_attr(
    target_arch = "x86_64",
    expect(
        unsafe_code,
        reason = "the prefetch intrinsic is an unsafe fn, though it cannot fault"
    )
)]
pub fn prefetch_line(line: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: prefetching reads nothing architecturally and cannot fault,
    // whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(line.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
}

/// `size` bytes of zeroed anonymous memory, advised (Linux) to be backed by
/// huge pages before any page is touched; `None` when the system refuses
/// the mapping. The hint is only a hint: without huge pages the memory
/// works the same.
pub fn huge_page_mapping(size: usize) -> Option<memmap2::MmapMut> {
    let map = memmap2::MmapMut::map_anon(size).ok()?;
    // Miri has anonymous mappings but no `madvise`.
    #[cfg(all(target_os = "linux", not(miri)))]
    {
        let _ = map.advise(memmap2::Advice::HugePage);
    }
    Some(map)
}
