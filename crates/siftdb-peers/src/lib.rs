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

use siftdb_bench::{Engine, MemoryEngine, SiftdbEngine};

/// Engines this crate can open, in the order a run measures them.
pub const ENGINES: [&str; 4] = ["siftdb", "rocksdb", "fjall", "memory"];

/// Opens engine `name` in the fresh directory `dir`, every table carrying a
/// Bloom filter of `bits_per_key` (`memory` has no tables and ignores it).
pub fn open_engine(name: &str, dir: &Path, bits_per_key: f64) -> Result<Box<dyn Engine>, String> {
    match name {
        "siftdb" => Ok(Box::new(SiftdbEngine::open(dir, bits_per_key, None)?)),
        "rocksdb" => Ok(Box::new(rocks::RocksEngine::open(dir, bits_per_key)?)),
        "fjall" => Ok(Box::new(fjall_engine::FjallEngine::open(
            dir,
            bits_per_key,
        )?)),
        "memory" => Ok(Box::new(MemoryEngine::new())),
        other => Err(format!(
            "unknown engine {other:?} (known: {})",
            ENGINES.join(", ")
        )),
    }
}
