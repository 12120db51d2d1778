//! The memtable's arena: memory handed out by bumping a cursor through large
//! blocks, and given back all at once when the memtable goes.
//!
//! Owns: [`Arena`] — the blocks, the bump cursor, and the count of bytes
//! handed out (the memtable's size for rotation).
//! Must never: hand out memory twice, move or free a block while the arena
//! lives (entries point into blocks and are read without a lock), or hand
//! out memory that is not zeroed and 8-byte aligned.
//!
//! One allocation per block instead of one (or two) per entry: an insert
//! costs a short, uncontended lock and a pointer bump, and the whole
//! memtable is freed with a few `dealloc` calls after its flush. Blocks grow
//! from [`FIRST_BLOCK`] to [`MAX_BLOCK`] by doubling, so a small memtable
//! (tests use 4 KiB ones) stays small and a 64 MiB one is a few dozen
//! blocks; an entry larger than a quarter of the block size gets a block of
//! its own, so the waste at the end of a block stays under a quarter.

#![expect(
    unsafe_code,
    reason = "the arena allocates raw blocks (std::alloc) that entries point into for its whole life"
)]

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

/// Alignment of every block (a cache line) and granule of every allocation.
const BLOCK_ALIGN: usize = 64;
/// Alignment of every allocation.
pub(crate) const ALIGN: usize = 8;
/// The first block's size.
const FIRST_BLOCK: usize = 4 << 10;
/// The largest regular block (an oversized entry gets a block of its own).
const MAX_BLOCK: usize = 4 << 20;

/// Blocks at least this large are mapped from the system directly and
/// asked to be backed by transparent huge pages (Linux): a skiplist search
/// touches nodes all over the memtable, and with 4 KiB pages nearly every
/// step would also miss the TLB.
const MAPPED_BLOCK: usize = 2 << 20;

/// One block, as allocated.
enum Block {
    Heap { start: NonNull<u8>, layout: Layout },
    // Held for its drop, which unmaps the block.
    Mapped(#[expect(dead_code, reason = "held only to be dropped")] memmap2::MmapMut),
}

/// The bump state: where the current block's free space starts and how much is left.
struct State {
    cursor: NonNull<u8>,
    left: usize,
    next_block: usize,
    blocks: Vec<Block>,
}

// SAFETY: the raw pointers in `State` name blocks the arena owns alone; no
// thread-bound state is behind them, and `State` is only reached through
// the arena's mutex.
unsafe impl Send for State {}

/// Bump allocation in large zeroed blocks, freed together on drop.
pub(crate) struct Arena {
    state: Mutex<State>,
    /// Bytes handed out (rounded allocations), for the memtable's size.
    used: AtomicUsize,
    /// Bytes of the blocks allocated: the memory the arena holds.
    reserved: AtomicUsize,
}

impl std::fmt::Debug for Arena {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Arena")
            .field("used", &self.used())
            .finish_non_exhaustive()
    }
}

impl Default for Arena {
    fn default() -> Self {
        Arena::new()
    }
}

impl Arena {
    /// An empty arena; the first block is allocated by the first call.
    pub(crate) fn new() -> Arena {
        Arena {
            state: Mutex::new(State {
                cursor: NonNull::dangling(),
                left: 0,
                next_block: FIRST_BLOCK,
                blocks: Vec::new(),
            }),
            used: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
        }
    }

    /// `size` bytes (rounded up to 8), zeroed, 8-byte aligned, valid and
    /// unmoved until the arena is dropped, and handed out to nobody else.
    /// Aborts like `Vec` when the system has no memory left.
    pub(crate) fn alloc(&self, size: usize) -> NonNull<u8> {
        let size = size.max(1).next_multiple_of(ALIGN);
        let mut st = self.state.lock();
        if size > st.left {
            if size > st.next_block / 4 {
                // Oversized: its own block; the current one keeps its space.
                let start = new_block(&mut st.blocks, size);
                self.used.fetch_add(size, Ordering::Relaxed);
                self.reserved.fetch_add(size, Ordering::Relaxed);
                return start;
            }
            let block_size = st.next_block;
            st.next_block = (block_size * 2).min(MAX_BLOCK);
            st.cursor = new_block(&mut st.blocks, block_size);
            st.left = block_size;
            self.reserved.fetch_add(block_size, Ordering::Relaxed);
        }
        let at = st.cursor;
        // SAFETY: `size <= left`, so `at + size` stays inside (or one past
        // the end of) the current block, which is one allocation.
        st.cursor = unsafe { at.add(size) };
        st.left -= size;
        drop(st);
        self.used.fetch_add(size, Ordering::Relaxed);
        at
    }

    /// Bytes handed out so far (each allocation rounded up to 8).
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// Bytes of the blocks allocated so far (what was handed out and the
    /// current block's rest): the memory the arena holds.
    pub(crate) fn reserved(&self) -> usize {
        self.reserved.load(Ordering::Relaxed)
    }
}

/// Allocates a zeroed block of `size` bytes and records it in `blocks`.
fn new_block(blocks: &mut Vec<Block>, size: usize) -> NonNull<u8> {
    if size >= MAPPED_BLOCK {
        if let Some(mut map) = crate::prefetch::huge_page_mapping(size) {
            if let Some(start) = NonNull::new(map.as_mut_ptr()) {
                blocks.push(Block::Mapped(map));
                return start;
            }
        }
    }
    let layout = match Layout::from_size_align(size.next_multiple_of(BLOCK_ALIGN), BLOCK_ALIGN) {
        Ok(layout) => layout,
        // Only a size near usize::MAX fails here; no memory could hold it.
        Err(_) => handle_alloc_error(Layout::new::<u8>()),
    };
    // SAFETY: `layout` has a non-zero size (`size >= 8`).
    let raw = unsafe { alloc_zeroed(layout) };
    let Some(start) = NonNull::new(raw) else {
        handle_alloc_error(layout)
    };
    blocks.push(Block::Heap { start, layout });
    start
}

impl Drop for Arena {
    fn drop(&mut self) {
        for block in self.state.get_mut().blocks.drain(..) {
            if let Block::Heap { start, layout } = block {
                // SAFETY: each heap block was allocated by `new_block` with
                // exactly this layout and is freed once, here; nothing can
                // point into it any more, since every reference to arena
                // memory borrows the arena (or owns the structure that owns
                // it). Mapped blocks are unmapped as they drop.
                unsafe { dealloc(start.as_ptr(), layout) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn allocations_are_aligned_zeroed_disjoint_and_counted() {
        let arena = Arena::new();
        let mut spans = Vec::new();
        for size in [1usize, 7, 8, 9, 100, 1000, 3000, 5000, 70_000, 16, 2 << 20] {
            let p = arena.alloc(size);
            assert_eq!(p.as_ptr() as usize % ALIGN, 0);
            // SAFETY: (test) the arena handed out `size` bytes at `p`.
            let bytes = unsafe { std::slice::from_raw_parts_mut(p.as_ptr(), size) };
            // Under Miri, about a thousand times slower, a sample of the
            // bytes (the whole 2 MiB block byte by byte takes minutes).
            let step = if cfg!(miri) { 257 } else { 1 };
            assert!(bytes
                .iter()
                .step_by(step)
                .chain(bytes.last())
                .all(|&b| b == 0));
            bytes.fill(0xAB);
            spans.push((p.as_ptr() as usize, size));
        }
        spans.sort_unstable();
        for pair in spans.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0, "{pair:?} overlap");
        }
        let expected: usize = [8usize, 8, 8, 16, 104, 1000, 3000, 5000, 70_000, 16, 2 << 20]
            .iter()
            .sum();
        assert_eq!(arena.used(), expected);
    }

    #[test]
    fn threads_allocate_without_overlap() {
        let threads = 4u8;
        let arena = Arena::new();
        let spans = std::sync::Mutex::new(Vec::new());
        // Every thread checks its own spans once all have written theirs;
        // the spans keep their pointers (no address turned back into a
        // pointer, which would blind Miri to the provenance it checks).
        let all_written = std::sync::Barrier::new(usize::from(threads));
        std::thread::scope(|s| {
            for t in 0..threads {
                let (arena, spans, all_written) = (&arena, &spans, &all_written);
                s.spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..if cfg!(miri) { 40 } else { 2000usize } {
                        let size = 8 + (i * 13 + usize::from(t)) % 200;
                        let p = arena.alloc(size);
                        // SAFETY: (test) the arena handed out `size` bytes at `p`.
                        unsafe { std::ptr::write_bytes(p.as_ptr(), t + 1, size) };
                        mine.push((p, size));
                    }
                    all_written.wait();
                    for &(p, size) in &mine {
                        // SAFETY: (test) every span is still owned by the
                        // arena, and no thread writes any more.
                        let bytes = unsafe { std::slice::from_raw_parts(p.as_ptr(), size) };
                        assert!(bytes.iter().all(|&b| b == t + 1));
                    }
                    let mut spans = spans.lock().unwrap();
                    spans.extend(mine.iter().map(|(p, size)| (p.as_ptr() as usize, *size)));
                });
            }
        });
        let mut spans = spans.into_inner().unwrap();
        spans.sort_unstable();
        for pair in spans.windows(2) {
            assert!(pair[0].0 + pair[0].1 <= pair[1].0);
        }
    }
}
