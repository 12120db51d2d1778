//! siftdb against its peers: the shared workloads (`siftdb_bench`,
//! `WORKLOADS.md`) run against siftdb, RocksDB and fjall in one process,
//! and the ratios siftdb/peer per phase.
//!
//! Owns: the RocksDB and fjall adapters to [`siftdb_bench::Engine`],
//! how each engine is opened ([`open_engine`]), what "flush and wait"
//! means per engine, and the ratio table.
//! Must never: measure or check anything itself — timing, latency sampling
//! and the check of every answer belong to `siftdb_bench::run_phase`,
//! so every engine is measured by the very same code — or tune one engine
//! and not the others.

#![warn(missing_docs)]

pub mod compare;
pub mod fjall_engine;
pub mod quiesce;
pub mod rocks;

use std::path::Path;

use siftdb::FilterPolicy;
use siftdb_bench::{CompressionChoice, Engine, MemoryEngine, SiftdbConfig, SiftdbEngine};

/// The RocksDB version the `rocksdb` crate's bundled source is (from
/// librocksdb-sys's version in Cargo.lock, checked at build to be 10 or
/// later). The library is compiled from that source, never a system copy:
/// [`rocks::RocksEngine`] names the version the opened library writes in
/// its info log, and the smoke test checks the two agree.
pub const ROCKSDB_VERSION: &str = env!("PEERS_ROCKSDB_VERSION");

/// The peer crates this binary was built with, for a run's header:
/// RocksDB's version, the rust-rocksdb and librocksdb-sys crates that
/// bundle it, and fjall's.
#[must_use]
pub fn peer_versions() -> String {
    format!(
        "rocksdb {ROCKSDB_VERSION} (bundled source, rust-rocksdb {}, librocksdb-sys {}), fjall {}",
        env!("PEERS_RUST_ROCKSDB_VERSION"),
        env!("PEERS_LIBROCKSDB_SYS_VERSION"),
        env!("PEERS_FJALL_VERSION")
    )
}

/// Engines this crate can open, in the order a run measures them.
pub const ENGINES: [&str; 4] = ["siftdb", "rocksdb", "fjall", "memory"];

/// What every engine of a run is opened with.
#[derive(Clone, Debug, PartialEq)]
pub struct PeerConfig {
    /// Bloom filter bits per key on every table.
    pub bits_per_key: f64,
    /// siftdb's filter policy at that average; `None`: uniform
    /// `bits_per_key`, as the peers have.
    pub siftdb_policy: Option<FilterPolicy>,
    /// A fixed-length prefix extractor of this many bytes, for the engines
    /// that have one (siftdb, RocksDB; fjall 3 has none).
    pub prefix_len: Option<usize>,
    /// Range filter bits per key (siftdb only: no peer has range filters).
    pub range_bits: Option<f64>,
    /// Open the peers' transactional database types (RocksDB's
    /// `OptimisticTransactionDB`, fjall's `OptimisticTxDatabase`), which
    /// the txn phases need; siftdb has transactions on every `Db`.
    pub transactions: bool,
    /// Open RocksDB as its locking `TransactionDB`, which the txn-locking
    /// phase needs (fjall has no locking transactions); siftdb has them on
    /// every `Db`.
    pub locking: bool,
    /// siftdb reads data blocks past the page cache
    /// (`Options::direct_reads`); the peers read through it.
    pub direct_reads: bool,
    /// How every engine compresses its tables (`--compression`): LZ4, or
    /// zstd on the bottommost level (RocksDB's `bottommost_compression`;
    /// fjall 3 has no zstd and keeps its default; siftdb zstd(3) at the
    /// bottom).
    pub compression: CompressionChoice,
    /// Key-value separation from this many bytes (`--blob-threshold`):
    /// RocksDB's blob files (`enable_blob_files`, `min_blob_size`), fjall's
    /// KV separation (`separation_threshold`); siftdb refuses it until it
    /// has `Options::blob_threshold`.
    pub blob_threshold: Option<u64>,
}

/// The block cache both peers run with by default (RocksDB 11's 32 MiB
/// `LRUCache` of `BlockBasedTableOptions`, fjall 3's 32 MiB `cache_size`):
/// siftdb is given the same, so no engine caches blocks in more memory than
/// another (siftdb's own default is 64 MiB). Filters and indexes sit outside
/// this budget in siftdb and RocksDB alike (RocksDB's default
/// `cache_index_and_filter_blocks = false`).
pub const PEER_BLOCK_CACHE_BYTES: usize = 32 << 20;

/// Opens engine `name` in the fresh directory `dir`, every table carrying a
/// Bloom filter of `config.bits_per_key` (`memory` has no tables and
/// ignores it), and the prefix extractor and range filter where the engine
/// has them.
pub fn open_engine(name: &str, dir: &Path, config: &PeerConfig) -> Result<Box<dyn Engine>, String> {
    match name {
        "siftdb" => Ok(Box::new(SiftdbEngine::open_with(
            dir,
            &SiftdbConfig {
                filter_policy: config
                    .siftdb_policy
                    .unwrap_or_else(|| FilterPolicy::bits_per_key(config.bits_per_key)),
                prefix_len: config.prefix_len,
                range_bits_per_key: config.range_bits,
                block_cache_bytes: Some(PEER_BLOCK_CACHE_BYTES),
                direct_reads: config.direct_reads,
                compression: config.compression,
                blob_threshold: config.blob_threshold,
                ..SiftdbConfig::default()
            },
        )?)),
        "rocksdb" => Ok(Box::new(rocks::RocksEngine::open(
            dir,
            config.bits_per_key,
            config.prefix_len,
            (config.transactions, config.locking),
            config.compression,
            config.blob_threshold,
        )?)),
        "fjall" => Ok(Box::new(fjall_engine::FjallEngine::open(
            dir,
            config.bits_per_key,
            config.transactions,
            config.compression,
            config.blob_threshold,
        )?)),
        "memory" => Ok(Box::new(MemoryEngine::new())),
        other => Err(format!(
            "unknown engine {other:?} (known: {})",
            ENGINES.join(", ")
        )),
    }
}
