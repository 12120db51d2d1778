//! Filters, usable on their own and inside every siftdb table (siftdb
//! re-exports this crate as `siftdb::filter`).
//!
//! Owns: the blocked [`BloomFilter`], its encoded [`FilterView`], the
//! [`CountingBloomFilter`] that can remove, the [`ScalableBloomFilter`]
//! for an unknown number of items, the static binary fuse filter
//! ([`FuseFilter`], its encoded [`FuseView`]) for a set known up front,
//! [`AnyFilterView`], which reads a point-filter block of either kind, the
//! [`FilterPolicy`] that decides which filter each table of a tree gets
//! (and the level-aware [`allocation`] behind it), and the [`RangeFilter`]
//! for range queries.
//! Must never: answer "absent" for a key that was inserted.
//!
//! ```
//! use siftdb_filter::BloomFilter;
//! let mut f = BloomFilter::with_rate(1000, 0.01)?;
//! f.insert(b"apple");
//! assert!(f.contains(b"apple"));
//! let bytes = f.encode();
//! assert_eq!(BloomFilter::decode(&bytes)?, f);
//! # Ok::<(), siftdb_filter::Error>(())
//! ```

mod codec;
mod error;
mod hint;

pub mod aligned;
pub mod allocation;
pub mod any;
pub mod batch;
pub mod block;
pub mod bloom;
pub mod counting;
pub mod fuse;
pub mod fuse_block;
mod kernel;
pub mod line;
mod memory;
pub mod policy;
pub mod probe;
pub mod range;
pub mod scalable;
pub(crate) mod simd;
pub mod theory;
mod wide_hash;

pub use aligned::AlignedBytes;
pub use allocation::FilterChoice;
pub use any::{AnyFilterView, FilterKind, FilterParseError};
pub use block::{FilterHeader, FilterView};
pub use bloom::{hash_key, hash_key_seeded, BloomFilter};
pub use counting::CountingBloomFilter;
pub use error::{Error, Result};
pub use fuse::FingerprintBits;
pub use fuse_block::{FuseFilter, FuseHeader, FuseView};
/// siftdb's statistics gauge (see [`internals`]); no stability promise.
#[doc(hidden)]
pub use memory::spare_mapping_bytes;
pub use policy::{FilterPolicy, LevelTables};
pub use probe::Layout;
pub use range::{RangeFilter, RangeFilterBuilder, RangeFilterView};
pub use scalable::ScalableBloomFilter;

/// What siftdb itself needs of the filter library beyond its public API:
/// the memory hints its own read path shares, and an instruction-set cap for the benchmarks.
///
/// **No stability promise**: anything here may change or vanish in any
/// release, patch releases included. A user of the filters needs none of it.
#[doc(hidden)]
pub mod internals {
    pub use crate::hint::{huge_page_mapping, prefetch_line};
    #[cfg(target_arch = "x86_64")]
    pub use crate::simd::cap_at_avx2;
}
