//! The memtable's index: a skiplist whose nodes live in an [`Arena`], linked
//! by atomic pointers, so readers never lock and writers insert with
//! compare-and-swap.
//!
//! Owns: the node layout, the search, the lock-free insert, the estimate of
//! a range's entries from the towers, and [`Entry`]/[`Cursor`], the only
//! ways to reach a node.
//! Must never: publish a node before its key, value and outgoing links are
//! written (the release CAS that links it is the publication), unlink or
//! move a node (nodes live until the arena goes, so a reader holding one
//! never sees it freed), or order two entries other than
//! [`compare_internal_keys`](crate::key::compare_internal_keys) does.
//!
//! # Node layout
//!
//! A node of height `h` is one allocation in the node arena; the node's
//! address is its header, with its links *before* it, so the link followed
//! most (level 0) and the key compared at every step share a cache line:
//!
//! ```text
//! -8h      link[h-1]  (AtomicPtr, newest level first)
//!  …
//! -8       link[0]
//!  0   4   user key length (u32 LE)
//!  4   4   value length (u32 LE)
//!  8   k   user key
//!  8+k 8   tag: seq << 8 | kind (u64 LE) — user key ‖ tag is the internal key
//! 16+k 8   address of the value in the value arena (unaligned; unused for
//!          an empty value)
//! ```
//!
//! Values live in a second arena, apart from the nodes: a search reads
//! only links, lengths and keys, and with 100-byte values inline those were
//! a third of the memory it ran through. Kept apart, the nodes of a full
//! 64 MiB memtable of such entries take about 20 MiB, and a random insert's
//! search misses the CPU's caches far less often; a get or a scan pays one
//! more load for the value it returns.
//!
//! Heights are drawn with probability 1/4 per extra level (as RocksDB's
//! skiplist): the same expected search length as 1/2, half the links.
//!
//! # Concurrency
//!
//! Any number of threads may insert and read at once. An insert finds the
//! predecessors and successors at every level, writes the node, then links
//! it bottom-up, each level with a release compare-and-swap from the
//! predecessor; a CAS that loses to a concurrent insert searches that level
//! again from the same predecessor. A reader that follows a link with an
//! acquire load sees the node whole. A node reachable at level 0 is in the
//! list; upper levels are only shortcuts, so a reader racing the linking of
//! upper levels merely takes a longer path.

#![expect(
    unsafe_code,
    reason = "nodes are raw arena memory linked by atomic pointers; readers follow them without locks"
)]

use std::cell::Cell;
use std::cmp::Ordering;
use std::marker::PhantomData;
use std::ptr::{self, NonNull};
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering as AtomicOrdering};
use std::sync::Arc;

use crate::key::TAG_LEN;
use crate::memtable::arena::Arena;

/// The tallest tower: 4^12 ≈ 16.8 M entries keep the expected search
/// length; a memtable of 64 MiB holds about 2 M of the smallest entries.
pub(crate) const MAX_HEIGHT: usize = 12;
/// Bytes of a node's header (the two lengths).
const HEADER: usize = 8;
/// Bytes of the value's address after the tag.
const VALUE_ADDRESS: usize = std::mem::size_of::<*const u8>();
/// Bytes of one link.
const LINK: usize = std::mem::size_of::<AtomicPtr<u8>>();
/// Bytes of the head node: a full tower and an empty header.
const HEAD_BYTES: usize = LINK * MAX_HEIGHT + HEADER;
/// How many more nodes one level holds than the level above, on average
/// (a tower grows by a level with probability 1/4: see `random_height`).
const BRANCHING: usize = 4;
/// Nodes of a range counted at one level before [`SkipList::estimate_count`]
/// trusts that level's sample: a relative standard error of at most
/// 1/√400 = 5%.
const ESTIMATE_SAMPLES: usize = 400;

/// A search key: a user key and a tag, ordered like the internal key
/// `user_key ‖ tag` (user key ascending, tag descending).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Probe<'a> {
    pub user_key: &'a [u8],
    pub tag: u64,
}

/// Byte-string order, eight bytes at a time: equal to `a.cmp(b)`, without
/// a call into `memcmp` for the short keys a memtable mostly compares.
#[inline]
pub(crate) fn compare_bytes(a: &[u8], b: &[u8]) -> Ordering {
    let mut left = a.chunks_exact(8);
    let mut right = b.chunks_exact(8);
    for (x, y) in left.by_ref().zip(right.by_ref()) {
        let (Ok(x), Ok(y)) = (<[u8; 8]>::try_from(x), <[u8; 8]>::try_from(y)) else {
            break;
        };
        let (x, y) = (u64::from_be_bytes(x), u64::from_be_bytes(y));
        if x != y {
            return x.cmp(&y);
        }
    }
    // Past the last whole word both share: the rest of the shorter decides,
    // then the length.
    let done = a.len().min(b.len()) / 8 * 8;
    let (Some(a_rest), Some(b_rest)) = (a.get(done..), b.get(done..)) else {
        return a.cmp(b);
    };
    a_rest.cmp(b_rest)
}

/// Internal-key order between a stored (user key, tag) and a probe.
#[inline]
fn compare(user_key: &[u8], tag: u64, probe: &Probe<'_>) -> Ordering {
    compare_bytes(user_key, probe.user_key).then_with(|| probe.tag.cmp(&tag))
}

thread_local! {
    /// Per-thread generator state for tower heights (xorshift64*): no
    /// shared cache line is written to draw a height.
    static HEIGHT_RNG: Cell<u64> = const { Cell::new(0) };
}

/// A random height in `1..=MAX_HEIGHT`, each extra level with probability 1/4.
fn random_height() -> usize {
    HEIGHT_RNG.with(|cell| {
        let mut x = cell.get();
        if x == 0 {
            // Seeded from the cell's address, so threads differ; any
            // non-zero seed works.
            x = (ptr::from_ref(cell) as u64) | 1;
        }
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        cell.set(x);
        let r = x.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let levels = (r.trailing_zeros() / 2) as usize;
        (1 + levels).min(MAX_HEIGHT)
    })
}

/// A concurrent ordered map from internal key to value, in an arena.
pub(crate) struct SkipList {
    arena: Arena,
    /// The values, apart from the nodes (see the module docs).
    values: Arena,
    /// The head node: a tower of `MAX_HEIGHT` links, no key.
    head: NonNull<u8>,
    /// The tallest tower linked so far (readers may see it late: harmless).
    height: AtomicUsize,
    len: AtomicUsize,
}

// SAFETY: every node (the head included) lives in the arena, which the list
// owns; nodes are written only before their publication and read-only
// afterwards except for their links, which are atomics. So the list may be
// moved to and shared between threads like the arena itself.
unsafe impl Send for SkipList {}
// SAFETY: as above; all shared mutation goes through atomics (links,
// height, len) or the arena's mutex.
unsafe impl Sync for SkipList {}

impl std::fmt::Debug for SkipList {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SkipList")
            .field("len", &self.len())
            .field("arena", &self.arena)
            .finish_non_exhaustive()
    }
}

impl Default for SkipList {
    fn default() -> Self {
        SkipList::new()
    }
}

/// A raw node address. Only the list makes these, for nodes it linked (or
/// its head), so they are valid while the list lives.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Raw(NonNull<u8>);

impl Raw {
    fn from_link(p: *mut u8) -> Option<Raw> {
        NonNull::new(p).map(Raw)
    }

    /// The link of `level` of this node.
    ///
    /// # Safety
    /// The node must be the head or a node this list allocated with a
    /// height above `level`.
    #[inline]
    unsafe fn link<'a>(self, level: usize) -> &'a AtomicPtr<u8> {
        // SAFETY: the caller vouches that the tower reaches `level`, so
        // the word `8·(level+1)` bytes before the header is this node's
        // link, 8-aligned, initialised (zeroed or stored) and alive as long
        // as the arena.
        unsafe {
            &*self
                .0
                .as_ptr()
                .sub(LINK * (level + 1))
                .cast::<AtomicPtr<u8>>()
        }
    }

    /// The next node at `level`, with acquire ordering.
    ///
    /// # Safety
    /// As [`Raw::link`].
    #[inline]
    unsafe fn next(self, level: usize) -> Option<Raw> {
        // SAFETY: forwarded to the caller.
        Raw::from_link(unsafe { self.link(level) }.load(AtomicOrdering::Acquire))
    }

    /// The node's (user key, tag, value).
    ///
    /// # Safety
    /// The node must be a published node of a live list (not the head).
    #[inline]
    unsafe fn parts<'a>(self) -> (&'a [u8], u64, &'a [u8]) {
        let p = self.0.as_ptr();
        // SAFETY: a published node's header and body, and its value in the
        // value arena, were written before the release CAS that the
        // caller's acquire load observed, and never change afterwards; the
        // header, key, tag and value address lie within the node's
        // allocation, a non-empty value's `value_len` bytes within the one
        // the address names (both arenas live as long as the list).
        unsafe {
            let key_len = ptr::read(p.cast::<[u8; 4]>());
            let value_len = ptr::read(p.add(4).cast::<[u8; 4]>());
            let key_len = u32::from_le_bytes(key_len) as usize;
            let value_len = u32::from_le_bytes(value_len) as usize;
            let user_key = std::slice::from_raw_parts(p.add(HEADER), key_len);
            let tag = ptr::read_unaligned(p.add(HEADER + key_len).cast::<[u8; TAG_LEN]>());
            let value = if value_len == 0 {
                &[]
            } else {
                let at = ptr::read_unaligned(p.add(HEADER + key_len + TAG_LEN).cast::<*const u8>());
                std::slice::from_raw_parts(at, value_len)
            };
            (user_key, u64::from_le_bytes(tag), value)
        }
    }

    /// The node's internal key (user key ‖ tag).
    ///
    /// # Safety
    /// As [`Raw::parts`].
    #[inline]
    unsafe fn internal_key<'a>(self) -> &'a [u8] {
        let p = self.0.as_ptr();
        // SAFETY: as in `parts`: the header and key are written before
        // publication and lie within the node.
        unsafe {
            let key_len = u32::from_le_bytes(ptr::read(p.cast::<[u8; 4]>())) as usize;
            std::slice::from_raw_parts(p.add(HEADER), key_len + TAG_LEN)
        }
    }

    #[inline]
    fn prefetch(self) {
        #[cfg(target_arch = "x86_64")]
        {
            use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
            // SAFETY: SSE is part of x86-64; a prefetch is a hint that
            // never faults and reads nothing, whatever the address.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(self.0.as_ptr().cast::<i8>()) };
        }
    }
}

/// Why an insert did not happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum InsertError {
    /// The list already holds this (user key, tag).
    Duplicate,
    /// The user key or the value is longer than a u32 length can say.
    TooLong,
}

impl SkipList {
    /// An empty list.
    pub(crate) fn new() -> SkipList {
        let arena = Arena::new();
        let base = arena.alloc(HEAD_BYTES);
        // SAFETY: the allocation is `HEAD_BYTES` bytes, so
        // the header lies inside it with every link of the head before it;
        // the arena zeroed them all (null links, empty key).
        let head = unsafe { base.add(LINK * MAX_HEIGHT) };
        SkipList {
            arena,
            values: Arena::new(),
            head,
            height: AtomicUsize::new(1),
            len: AtomicUsize::new(0),
        }
    }

    /// Entries inserted.
    pub(crate) fn len(&self) -> usize {
        self.len.load(AtomicOrdering::Relaxed)
    }

    /// Bytes of arena memory the entries take, nodes and values (the
    /// head's not counted).
    pub(crate) fn bytes(&self) -> usize {
        (self.arena.used() + self.values.used()).saturating_sub(HEAD_BYTES)
    }

    /// Bytes of memory the arenas hold (their blocks, used or not).
    pub(crate) fn reserved_bytes(&self) -> usize {
        self.arena.reserved() + self.values.reserved()
    }

    fn head(&self) -> Raw {
        Raw(self.head)
    }

    /// Compares node `x` (published, not the head) with the probe.
    #[inline]
    fn cmp_node(x: Raw, probe: &Probe<'_>) -> Ordering {
        // SAFETY: callers pass nodes reached through this list's links,
        // which are published nodes while the list lives.
        let (user_key, tag, _) = unsafe { x.parts() };
        compare(user_key, tag, probe)
    }

    /// The last node before `probe` and the first at or after it at
    /// `level`, starting from `from` (the head or a node before `probe`
    /// whose tower reaches `level`).
    #[inline]
    fn find_at_level(&self, probe: &Probe<'_>, mut from: Raw, level: usize) -> (Raw, Option<Raw>) {
        loop {
            // SAFETY: `from` is the head or a node whose tower reaches
            // `level` (the caller's start, or a node met at this level).
            let next = unsafe { from.next(level) };
            match next {
                Some(n) if Self::cmp_node(n, probe) == Ordering::Less => {
                    // The search goes on from `n` either along this level
                    // or one level down: both next nodes are fetched while
                    // `n`'s successor is compared (two misses in flight
                    // instead of one).
                    // SAFETY: `n` was reached at `level`, so its tower
                    // reaches it and every level below.
                    unsafe {
                        if let Some(after) = n.next(level) {
                            after.prefetch();
                        }
                        if let Some(below) = level.checked_sub(1).and_then(|l| n.next(l)) {
                            below.prefetch();
                        }
                    }
                    from = n;
                }
                _ => return (from, next),
            }
        }
    }

    /// The last node before `probe` (the head when none is) and the first
    /// at or after it, searched from the top level down.
    fn search(&self, probe: &Probe<'_>) -> (Raw, Option<Raw>) {
        let height = self
            .height
            .load(AtomicOrdering::Relaxed)
            .clamp(1, MAX_HEIGHT);
        let mut from = self.head();
        let mut found = None;
        for level in (0..height).rev() {
            (from, found) = self.find_at_level(probe, from, level);
        }
        (from, found)
    }

    /// The first node at or after `probe`.
    fn lower_bound_raw(&self, probe: &Probe<'_>) -> Option<Raw> {
        self.search(probe).1
    }

    /// The last node before `probe` (`None` when none is): a skip list has
    /// no back links, so this is a search from the head, as a forward
    /// search is — a backward step costs what a seek costs.
    fn last_before_raw(&self, probe: &Probe<'_>) -> Option<Raw> {
        let (before, _) = self.search(probe);
        (before != self.head()).then_some(before)
    }

    /// The last node: the farthest node along each level, top down.
    fn last_raw(&self) -> Option<Raw> {
        let height = self
            .height
            .load(AtomicOrdering::Relaxed)
            .clamp(1, MAX_HEIGHT);
        let mut from = self.head();
        for level in (0..height).rev() {
            // SAFETY: `from` is the head or a node reached at `level` (or
            // above), whose tower reaches `level`.
            while let Some(next) = unsafe { from.next(level) } {
                from = next;
            }
        }
        (from != self.head()).then_some(from)
    }

    /// The last node at or before `probe`.
    fn upper_bound_raw(&self, probe: &Probe<'_>) -> Option<Raw> {
        match self.search(probe) {
            (_, Some(at)) if Self::cmp_node(at, probe) == Ordering::Equal => Some(at),
            (before, _) => (before != self.head()).then_some(before),
        }
    }

    /// About how many entries lie at or after `start` and before `end`
    /// (`None`: unbounded) in internal-key order, from the towers, without
    /// walking the range (RocksDB's `InlineSkipList::ApproximateNumEntries`
    /// works the same way).
    ///
    /// A node reaches level `l` with probability `4^-l`, independently of
    /// its key, so the nodes of the range seen at level `l` are a sample of
    /// its entries at that rate: `c` of them estimate `c·4^l` entries with a
    /// relative standard error of about `1/√c`. The walk goes down from the
    /// top, counting the range's nodes at each level, and stops at the
    /// first level where it counts [`ESTIMATE_SAMPLES`] or more (relative
    /// standard error ≤ 1/√400 = 5%); each level below that only scales the
    /// count by 4. A range of fewer than [`ESTIMATE_SAMPLES`] entries is
    /// never sampled enough, so it is counted at level 0: exactly. The walk
    /// passes on average fewer than about `4·ESTIMATE_SAMPLES` nodes of the
    /// range at the level it stops at and `ESTIMATE_SAMPLES` at the levels
    /// above together, whatever the size of the list or the range, besides
    /// the few a search passes per level. Inserts racing the walk may or
    /// may not be counted.
    pub(crate) fn estimate_count(
        &self,
        start: Option<&Probe<'_>>,
        end: Option<&Probe<'_>>,
    ) -> usize {
        let height = self
            .height
            .load(AtomicOrdering::Relaxed)
            .clamp(1, MAX_HEIGHT);
        // `before`: the last node met before `start` (the head at first);
        // `past`: the first node met at or after `end`. A node met at one
        // level is linked at every level below (links go bottom-up), so
        // both stay valid bounds for the walk down.
        let mut before = self.head();
        let mut past: Option<Raw> = None;
        let mut count = 0usize;
        for level in (0..height).rev() {
            if count >= ESTIMATE_SAMPLES {
                count = count.saturating_mul(BRANCHING);
                continue;
            }
            count = 0;
            // SAFETY: `before` is the head or a node met at this level or
            // above, so its tower reaches `level`; so do the nodes met
            // along this level.
            let mut next = unsafe { before.next(level) };
            while let Some(n) = next.filter(|&n| Some(n) != past) {
                if start.is_none_or(|s| Self::cmp_node(n, s) != Ordering::Less) {
                    break;
                }
                before = n;
                // SAFETY: as above.
                next = unsafe { n.next(level) };
            }
            while let Some(n) = next.filter(|&n| Some(n) != past) {
                if end.is_some_and(|e| Self::cmp_node(n, e) != Ordering::Less) {
                    past = Some(n);
                    break;
                }
                count += 1;
                // SAFETY: as above.
                next = unsafe { n.next(level) };
            }
        }
        count
    }

    /// The first entry at or after `probe` in internal-key order.
    pub(crate) fn lower_bound<'a>(&'a self, probe: &Probe<'_>) -> Option<Entry<'a>> {
        self.lower_bound_raw(probe).map(Entry::new)
    }

    /// The first entry.
    pub(crate) fn first(&self) -> Option<Entry<'_>> {
        // SAFETY: the head's tower has every level.
        unsafe { self.head().next(0) }.map(Entry::new)
    }

    /// Inserts `user_key ‖ tag → value`. Safe from many threads at once.
    pub(crate) fn insert(
        &self,
        user_key: &[u8],
        tag: u64,
        value: &[u8],
    ) -> Result<(), InsertError> {
        let (Ok(key_len), Ok(value_len)) =
            (u32::try_from(user_key.len()), u32::try_from(value.len()))
        else {
            return Err(InsertError::TooLong);
        };
        let probe = Probe { user_key, tag };
        let height = random_height();

        // Predecessor and successor at every level, top down.
        let list_height = self
            .height
            .load(AtomicOrdering::Relaxed)
            .clamp(1, MAX_HEIGHT);
        let mut prev = [self.head(); MAX_HEIGHT];
        let mut succ: [Option<Raw>; MAX_HEIGHT] = [None; MAX_HEIGHT];
        let mut from = self.head();
        for level in (0..list_height.max(height)).rev() {
            let (p, s) = self.find_at_level(&probe, from, level);
            if let (Some(slot_p), Some(slot_s)) = (prev.get_mut(level), succ.get_mut(level)) {
                *slot_p = p;
                *slot_s = s;
            }
            from = p;
        }
        if succ[0].is_some_and(|s| Self::cmp_node(s, &probe) == Ordering::Equal) {
            return Err(InsertError::Duplicate);
        }

        // Write the value and the node whole before anyone can reach them.
        let value_at = if value.is_empty() {
            ptr::null()
        } else {
            let at = self.values.alloc(value.len());
            // SAFETY: a fresh allocation of `value.len()` bytes, seen by no
            // other thread until the node naming it is linked below.
            unsafe { ptr::copy_nonoverlapping(value.as_ptr(), at.as_ptr(), value.len()) };
            at.as_ptr().cast_const()
        };
        let links = LINK * height;
        let size = links + HEADER + user_key.len() + TAG_LEN + VALUE_ADDRESS;
        let base = self.arena.alloc(size);
        // SAFETY: the allocation holds `links` bytes of tower, then the
        // header, key, tag and value address (`size` bytes in all); it is
        // fresh, so no other thread can see it until it is linked below.
        let node = unsafe {
            let node = base.add(links);
            let p = node.as_ptr();
            ptr::copy_nonoverlapping(key_len.to_le_bytes().as_ptr(), p, 4);
            ptr::copy_nonoverlapping(value_len.to_le_bytes().as_ptr(), p.add(4), 4);
            ptr::copy_nonoverlapping(user_key.as_ptr(), p.add(HEADER), user_key.len());
            let tag_at = p.add(HEADER + user_key.len());
            ptr::copy_nonoverlapping(tag.to_le_bytes().as_ptr(), tag_at, TAG_LEN);
            ptr::write_unaligned(tag_at.add(TAG_LEN).cast::<*const u8>(), value_at);
            Raw(node)
        };

        // Raise the list's height first, so a reader that finds this node
        // at a new level also starts its searches there.
        let mut current = self.height.load(AtomicOrdering::Relaxed);
        while height > current {
            match self.height.compare_exchange_weak(
                current,
                height,
                AtomicOrdering::Relaxed,
                AtomicOrdering::Relaxed,
            ) {
                Ok(_) => break,
                Err(seen) => current = seen,
            }
        }

        for level in 0..height {
            let (Some(&p0), Some(&s0)) = (prev.get(level), succ.get(level)) else {
                break;
            };
            let (mut p, mut s) = (p0, s0);
            loop {
                let s_ptr = s.map_or(ptr::null_mut(), |n| n.0.as_ptr());
                // SAFETY: `node` was allocated with `height > level` links.
                unsafe { node.link(level) }.store(s_ptr, AtomicOrdering::Relaxed);
                // SAFETY: `p` is the head or a node met at `level`, so its
                // tower reaches `level`.
                let cas = unsafe { p.link(level) }.compare_exchange(
                    s_ptr,
                    node.0.as_ptr(),
                    AtomicOrdering::Release,
                    AtomicOrdering::Relaxed,
                );
                if cas.is_ok() {
                    break;
                }
                // Another insert got between `p` and `s`: search again from `p`.
                (p, s) = self.find_at_level(&probe, p, level);
                if level == 0 && s.is_some_and(|n| Self::cmp_node(n, &probe) == Ordering::Equal) {
                    // A concurrent insert of the same key won; this node
                    // stays unlinked (its arena bytes, node and value, are wasted).
                    return Err(InsertError::Duplicate);
                }
            }
        }
        self.len.fetch_add(1, AtomicOrdering::Relaxed);
        Ok(())
    }
}

/// One entry of a [`SkipList`], borrowed from it.
#[derive(Clone, Copy)]
pub(crate) struct Entry<'a> {
    node: Raw,
    _list: PhantomData<&'a SkipList>,
}

impl<'a> Entry<'a> {
    fn new(node: Raw) -> Entry<'a> {
        Entry {
            node,
            _list: PhantomData,
        }
    }

    /// (user key, tag, value).
    #[inline]
    pub(crate) fn parts(&self) -> (&'a [u8], u64, &'a [u8]) {
        // SAFETY: an `Entry` is only made for a published node of a list
        // it borrows for `'a`.
        unsafe { self.node.parts() }
    }

    /// The internal key (user key ‖ tag).
    #[inline]
    pub(crate) fn internal_key(&self) -> &'a [u8] {
        // SAFETY: as in `parts`.
        unsafe { self.node.internal_key() }
    }

    /// The value.
    #[inline]
    pub(crate) fn value(&self) -> &'a [u8] {
        self.parts().2
    }

    /// The next entry in order.
    #[inline]
    pub(crate) fn next(&self) -> Option<Entry<'a>> {
        // SAFETY: every linked node has a level-0 link.
        unsafe { self.node.next(0) }.map(Entry::new)
    }
}

/// A position in a list that owns its list (through an `Arc`), so it can
/// outlive any borrow — for cursors kept in long-lived iterators.
pub(crate) struct Cursor {
    list: Arc<SkipList>,
    at: Option<Raw>,
}

// SAFETY: `at` points into the arena of `list`, which the cursor keeps
// alive; the list is `Send + Sync`, and a node is read-only but for its
// atomic links.
unsafe impl Send for Cursor {}
// SAFETY: as above; `&Cursor` only reads.
unsafe impl Sync for Cursor {}

impl Cursor {
    /// A cursor over `list`, positioned nowhere.
    pub(crate) fn new(list: Arc<SkipList>) -> Cursor {
        Cursor { list, at: None }
    }

    /// The entry at the cursor, borrowed from the cursor (which keeps the list alive).
    pub(crate) fn entry(&self) -> Option<Entry<'_>> {
        self.at.map(Entry::new)
    }

    /// Moves to the first entry.
    pub(crate) fn seek_to_first(&mut self) {
        self.at = self.list.first().map(|e| e.node);
    }

    /// Moves to the first entry at or after `probe`.
    pub(crate) fn seek(&mut self, probe: &Probe<'_>) {
        self.at = self.list.lower_bound_raw(probe);
    }

    /// Moves to the next entry (nowhere stays nowhere).
    pub(crate) fn next(&mut self) {
        self.at = self.entry().and_then(|e| e.next()).map(|e| e.node);
    }

    /// Moves to the last entry.
    pub(crate) fn seek_to_last(&mut self) {
        self.at = self.list.last_raw();
    }

    /// Moves to the last entry at or before `probe`.
    pub(crate) fn seek_for_prev(&mut self, probe: &Probe<'_>) {
        self.at = self.list.upper_bound_raw(probe);
    }

    /// Moves to the previous entry (nowhere stays nowhere; before the
    /// first is nowhere).
    pub(crate) fn prev(&mut self) {
        let Some(entry) = self.entry() else {
            return;
        };
        let (user_key, tag, _) = entry.parts();
        self.at = self.list.last_before_raw(&Probe { user_key, tag });
    }
}

#[cfg(test)]
mod concurrent_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compare_bytes_is_byte_order() {
        let samples: Vec<Vec<u8>> = vec![
            vec![],
            vec![0],
            vec![0, 0],
            b"a".to_vec(),
            b"a\0".to_vec(),
            b"abcdefgh".to_vec(),
            b"abcdefgh\0".to_vec(),
            b"abcdefgi".to_vec(),
            b"abcdefghabcdefgh".to_vec(),
            b"abcdefghabcdefgz".to_vec(),
            b"abcdefghabcdefghz".to_vec(),
            vec![0xff; 9],
            vec![0x7f; 17],
        ];
        for a in &samples {
            for b in &samples {
                assert_eq!(compare_bytes(a, b), a.cmp(b), "{a:?} vs {b:?}");
            }
        }
    }

    /// A list of `keys` user keys `k000000`…, `versions` versions of each
    /// (sequence numbers descending within a key, as the list orders them).
    fn list_of(keys: usize, versions: u64) -> SkipList {
        let list = SkipList::new();
        for i in 0..keys {
            for v in 0..versions {
                list.insert(format!("k{i:06}").as_bytes(), (v + 1) << 8 | 1, b"value")
                    .unwrap();
            }
        }
        list
    }

    /// The probe before every version of `key`.
    fn key_probe(key: &[u8]) -> Probe<'_> {
        Probe {
            user_key: key,
            tag: u64::MAX,
        }
    }

    fn key_of(i: usize) -> Vec<u8> {
        format!("k{i:06}").into_bytes()
    }

    /// The exact number of entries in `[start, end)`, by walking them.
    fn walked(list: &SkipList, start: Option<&Probe<'_>>, end: Option<&Probe<'_>>) -> usize {
        let first = match start {
            Some(p) => list.lower_bound(p),
            None => list.first(),
        };
        std::iter::successors(first, Entry::next)
            .take_while(|e| {
                let (user_key, tag, _) = e.parts();
                end.is_none_or(|p| compare(user_key, tag, p) == Ordering::Less)
            })
            .count()
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "6,000 inserts take minutes under Miri; the concurrent tests walk the same links"
    )]
    fn estimate_is_exact_below_the_sample_size() {
        let empty = SkipList::new();
        assert_eq!(empty.estimate_count(None, None), 0);
        // Three versions per key: a range of fewer than ESTIMATE_SAMPLES
        // entries is counted at level 0, every version.
        let list = list_of(2000, 3);
        for (a, b) in [
            (0, 1),
            (0, 133),
            (500, 600),
            (1000, 1133),
            (1867, 2000),
            (1999, 2000),
        ] {
            let (ka, kb) = (key_of(a), key_of(b));
            let (pa, pb) = (key_probe(&ka), key_probe(&kb));
            let exact = walked(&list, Some(&pa), Some(&pb));
            assert_eq!(exact, 3 * (b - a));
            assert!(exact < ESTIMATE_SAMPLES);
            assert_eq!(list.estimate_count(Some(&pa), Some(&pb)), exact, "{a}..{b}");
        }
        let small = list_of(100, 3);
        assert_eq!(small.estimate_count(None, None), 300);
        let k50 = key_of(50);
        assert_eq!(small.estimate_count(None, Some(&key_probe(&k50))), 150);
        assert_eq!(small.estimate_count(Some(&key_probe(&k50)), None), 150);
        // A probe inside a key's versions splits them where the order does.
        let middle = Probe {
            user_key: &k50,
            tag: 2 << 8 | 1,
        };
        assert_eq!(
            small.estimate_count(Some(&middle), Some(&key_probe(&key_of(51)))),
            2
        );
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "20,000 inserts take minutes under Miri; the concurrent tests walk the same links"
    )]
    fn estimate_of_an_empty_or_reversed_range_is_zero() {
        let list = list_of(20_000, 1);
        let (k1, k2, k9) = (key_of(1000), key_of(2000), key_of(9000));
        let (p1, p2, p9) = (key_probe(&k1), key_probe(&k2), key_probe(&k9));
        assert_eq!(list.estimate_count(Some(&p2), Some(&p2)), 0);
        assert_eq!(list.estimate_count(Some(&p9), Some(&p1)), 0);
        assert_eq!(list.estimate_count(Some(&p9), Some(&p2)), 0);
        // Between two adjacent keys, and past the last.
        let between = b"k001000\0".to_vec();
        assert!(list.estimate_count(Some(&key_probe(&between)), Some(&p2)) > 0);
        let after = key_of(1001);
        assert_eq!(
            list.estimate_count(Some(&key_probe(&between)), Some(&key_probe(&after))),
            0
        );
        assert_eq!(list.estimate_count(Some(&key_probe(b"z")), None), 0);
        assert_eq!(list.estimate_count(None, Some(&key_probe(b"a"))), 0);
    }

    #[test]
    #[cfg_attr(
        miri,
        ignore = "100,000 inserts: hours under Miri; a statistical test, it cannot be smaller"
    )]
    fn estimate_of_large_ranges_is_within_a_quarter() {
        // 100,000 entries; ranges of 2,000 to 100,000 of them. Counted from
        // at least ESTIMATE_SAMPLES nodes, an estimate's relative standard
        // error is at most 5%, so 25% is five of them: about one estimate
        // in 1.7 million strays that far, whatever heights the towers drew.
        let n = 100_000;
        let list = list_of(n, 1);
        assert_eq!(list.len(), n);
        let whole = list.estimate_count(None, None);
        assert!(whole.abs_diff(n) * 4 <= n, "{whole} for {n}");
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = |bound: usize| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            usize::try_from(state % bound as u64).unwrap()
        };
        for _ in 0..200 {
            let len = 2000 + next(n - 2000);
            let a = next(n - len + 1);
            let (ka, kb) = (key_of(a), key_of(a + len));
            let (pa, pb) = (key_probe(&ka), key_probe(&kb));
            let estimate = list.estimate_count(Some(&pa), Some(&pb));
            assert!(
                estimate.abs_diff(len) * 4 <= len,
                "{estimate} for {len} entries from {a}"
            );
        }
        // A half and a tenth, counted by walking them.
        let (k0, k50, k10) = (key_of(0), key_of(n / 2), key_of(n / 10));
        for (end, want) in [(&k50, n / 2), (&k10, n / 10)] {
            let (pa, pb) = (key_probe(&k0), key_probe(end));
            assert_eq!(walked(&list, Some(&pa), Some(&pb)), want);
            let estimate = list.estimate_count(Some(&pa), Some(&pb));
            assert!(estimate.abs_diff(want) * 4 <= want, "{estimate} for {want}");
        }
    }

    #[test]
    fn estimates_are_right_while_writers_insert() {
        // Two writers insert their own keys in order and publish how far
        // they got (release); a reader counts the last 300 published keys
        // of each: fewer than ESTIMATE_SAMPLES, so exactly 300 whatever
        // the other writer and the unpublished inserts do meanwhile.
        use std::sync::atomic::AtomicUsize;
        let list = SkipList::new();
        // Under Miri fewer keys and a window of 20 (exact too: below
        // ESTIMATE_SAMPLES).
        let (per_writer, window) = if cfg!(miri) { (40, 20) } else { (20_000, 300) };
        let published = [AtomicUsize::new(0), AtomicUsize::new(0)];
        let name = |w: usize, i: usize| format!("{}{i:06}", ["a", "b"][w]).into_bytes();
        std::thread::scope(|s| {
            for w in 0..2 {
                let (list, published) = (&list, &published);
                s.spawn(move || {
                    for i in 0..per_writer {
                        list.insert(&name(w, i), 1 << 8 | 1, b"v").unwrap();
                        published[w].store(i + 1, AtomicOrdering::Release);
                    }
                });
            }
            let (list, published) = (&list, &published);
            s.spawn(move || {
                let mut checks = 0;
                loop {
                    let done = [0, 1].map(|w| published[w].load(AtomicOrdering::Acquire));
                    for (w, &n) in done.iter().enumerate().filter(|(_, &n)| n >= window) {
                        let (from, to) = (name(w, n - window), name(w, n));
                        let estimate =
                            list.estimate_count(Some(&key_probe(&from)), Some(&key_probe(&to)));
                        assert_eq!(estimate, window, "writer {w} at {n}");
                        checks += 1;
                    }
                    if done == [per_writer; 2] {
                        break;
                    }
                }
                assert!(checks > 0);
            });
        });
        let whole = list.estimate_count(None, None);
        assert!(
            whole.abs_diff(2 * per_writer) * 4 <= 2 * per_writer,
            "{whole}"
        );
    }

    #[test]
    #[cfg_attr(miri, ignore = "400,000 draws, and no unsafe code")]
    fn heights_follow_a_quarter_per_level() {
        let draws = 400_000;
        let mut counts = [0usize; MAX_HEIGHT + 1];
        for _ in 0..draws {
            counts[random_height()] += 1;
        }
        assert_eq!(counts[0], 0);
        let share = |h: usize| counts[h] as f64 / draws as f64;
        assert!((share(1) - 0.75).abs() < 0.01, "{counts:?}");
        assert!((share(2) - 0.1875).abs() < 0.01, "{counts:?}");
    }
}
