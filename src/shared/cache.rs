//! [`Cache`]: a block cache that one database or many share.
//!
//! A sharded cache (`quick_cache`) weighted by bytes, holding data blocks
//! as tables parsed them. Each reader of tables (one per database) takes an
//! id of its own from the cache ([`Cache::new_owner`]) and keys its blocks
//! by (that id, table id, block number): table ids are unique only within
//! one database, so without the owner two databases' blocks would collide.
//! A database that closes leaves its blocks to be evicted as others' blocks
//! come in (no id is given twice, so none of them is read again).
//!
//! Owns: the cache, its capacity and the owner ids it gave.
//! Must never: grow past its capacity, or give an owner id twice.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bytes::Bytes;

/// Memory a cached block costs beyond its bytes (cache entry, `Bytes`
/// header, allocator), counted against the cache's capacity.
const BLOCK_OVERHEAD: u64 = 96;

/// Ghosts (keys of evicted blocks) the cache remembers, as a fraction of
/// the blocks it holds: see [`Cache::new`].
const GHOST_ALLOCATION: f64 = 1.0;

/// (owner, table id, data block number): an owner is one database's table
/// reader, a table's blocks never change, and the number is known before
/// the block's handle is loaded.
pub(crate) type CacheKey = (u64, u64, usize);

/// A data block as a table parsed it: its bytes and where its entries and
/// restart points lie (what `table::Block` is made of).
#[derive(Clone)]
pub(crate) struct CachedBlock {
    pub data: Bytes,
    pub entries_end: usize,
    pub restart_count: usize,
}

#[derive(Clone)]
struct BlockWeighter;

impl quick_cache::Weighter<CacheKey, CachedBlock> for BlockWeighter {
    fn weight(&self, _key: &CacheKey, block: &CachedBlock) -> u64 {
        block.data.len() as u64 + BLOCK_OVERHEAD
    }
}

type Blocks = quick_cache::sync::Cache<CacheKey, CachedBlock, BlockWeighter>;

struct CacheInner {
    /// `None` for a capacity of 0: nothing is cached.
    blocks: Option<Blocks>,
    capacity: usize,
    next_owner: AtomicU64,
}

/// A block cache of a given capacity in bytes, for one database or shared
/// by many (RocksDB's `Cache`): give the same `Cache` to each database's
/// [`crate::Options::block_cache`], and the process holds at most its
/// capacity of data blocks however many databases it opens. Cloning it
/// clones the handle, not the cache. A database given none builds its own
/// of [`crate::Options::block_cache_bytes`].
///
/// ```
/// use siftdb::{Cache, Db, Options};
/// # let dir = tempfile::tempdir().unwrap();
/// let cache = Cache::new(64 << 20);
/// let a = Db::open_with(dir.path().join("a"), Options::default().block_cache(cache.clone()))?;
/// let b = Db::open_with(dir.path().join("b"), Options::default().block_cache(cache.clone()))?;
/// # a.put("k", "v")?; b.put("k", "v")?;
/// assert!(cache.usage() <= cache.capacity());
/// # Ok::<(), siftdb::Error>(())
/// ```
#[derive(Clone)]
pub struct Cache {
    inner: Arc<CacheInner>,
}

impl std::fmt::Debug for Cache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cache")
            .field("capacity", &self.capacity())
            .field("usage", &self.usage())
            .finish_non_exhaustive()
    }
}

impl Cache {
    /// A cache holding at most `capacity` bytes of data blocks (each
    /// block's bytes and about a hundred bytes of bookkeeping); 0 caches
    /// nothing.
    pub fn new(capacity: usize) -> Cache {
        let blocks = (capacity > 0).then(|| {
            // A guess for the hash table's size: blocks of about 4 KiB.
            let items = (capacity / 4096).max(16);
            // Remembered evicted keys (ghosts) as many as the cache holds
            // blocks, not quick_cache's default half: a block evicted from
            // the small cold ring is admitted hot only when asked again
            // while remembered, and a working set just over the capacity
            // recurs after about `items` other blocks. With half, readhot
            // after readrandom (N = 1M, 32 MiB) read 0.49 blocks per get
            // from files; with as many, 0.08 (its CPU 2.98 -> 2.26 s).
            let options = quick_cache::OptionsBuilder::new()
                .estimated_items_capacity(items)
                .weight_capacity(capacity as u64)
                .ghost_allocation(GHOST_ALLOCATION)
                .build();
            match options {
                Ok(options) => Blocks::with_options(
                    options,
                    BlockWeighter,
                    quick_cache::DefaultHashBuilder::default(),
                    quick_cache::sync::DefaultLifecycle::default(),
                ),
                Err(_) => Blocks::with_weighter(items, capacity as u64, BlockWeighter),
            }
        });
        Cache {
            inner: Arc::new(CacheInner {
                blocks,
                capacity,
                next_owner: AtomicU64::new(1),
            }),
        }
    }

    /// The capacity in bytes.
    pub fn capacity(&self) -> usize {
        self.inner.capacity
    }

    /// Bytes the cache holds now, over every database that shares it
    /// (never more than [`Cache::capacity`]).
    pub fn usage(&self) -> usize {
        self.inner
            .blocks
            .as_ref()
            .map_or(0, |c| usize::try_from(c.weight()).unwrap_or(usize::MAX))
    }

    /// Blocks the cache holds now.
    pub fn len(&self) -> usize {
        self.inner.blocks.as_ref().map_or(0, Blocks::len)
    }

    /// True when the cache holds no block.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// True when `other` is a handle of this same cache.
    pub fn same_as(&self, other: &Cache) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// An owner id no other reader of this cache has: the first part of
    /// every key the new reader uses.
    pub(crate) fn new_owner(&self) -> u64 {
        self.inner.next_owner.fetch_add(1, Ordering::Relaxed)
    }

    pub(crate) fn get(&self, key: &CacheKey) -> Option<CachedBlock> {
        self.inner.blocks.as_ref()?.get(key)
    }

    pub(crate) fn insert(&self, key: CacheKey, block: CachedBlock) {
        if let Some(blocks) = &self.inner.blocks {
            blocks.insert(key, block);
        }
    }

    pub(crate) fn remove(&self, key: &CacheKey) {
        if let Some(blocks) = &self.inner.blocks {
            blocks.remove(key);
        }
    }

    pub(crate) fn contains(&self, key: &CacheKey) -> bool {
        self.inner
            .blocks
            .as_ref()
            .is_some_and(|blocks| blocks.contains_key(key))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(bytes: usize) -> CachedBlock {
        CachedBlock {
            data: Bytes::from(vec![7u8; bytes]),
            entries_end: bytes,
            restart_count: 1,
        }
    }

    /// Two owners' blocks under the same table id and number stay apart,
    /// and the clones of a cache hold one set of blocks within one capacity.
    #[test]
    fn owners_do_not_collide_and_clones_share_one_capacity() {
        let cache = Cache::new(1 << 20);
        let other = cache.clone();
        let (a, b) = (cache.new_owner(), other.new_owner());
        assert_ne!(a, b);
        cache.insert((a, 1, 0), block(100));
        other.insert((b, 1, 0), block(200));
        assert_eq!(cache.get(&(a, 1, 0)).map(|c| c.data.len()), Some(100));
        assert_eq!(cache.get(&(b, 1, 0)).map(|c| c.data.len()), Some(200));
        assert_eq!(other.len(), 2);
        assert!(cache.same_as(&other));
        for n in 0..1000 {
            other.insert((b, 2, n), block(4096));
        }
        assert!(cache.usage() <= cache.capacity(), "{}", cache.usage());
        assert!(cache.usage() > cache.capacity() / 2, "{}", cache.usage());
        let none = Cache::new(0);
        none.insert((none.new_owner(), 1, 0), block(10));
        assert!(none.is_empty());
        assert_eq!(none.usage(), 0);
    }
}
