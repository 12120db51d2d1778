//! The benchmark workloads of `WORKLOADS.md`, runnable against any engine.
//!
//! Owns: the data (keys, values, orders, Zipfian draws), the phases and
//! their exact operation sequences, the [`Engine`] seam, the timed and
//! checked runner ([`run_phase`]) and its [`PhaseReport`]. `siftdb bench`
//! runs siftdb through it; the peers crate (crates/siftdb-peers/) runs RocksDB
//! and fjall through the very same code, so the work is identical.
//! Must never: depend on siftdb's storage engine — every engine, siftdb's
//! own adapter ([`SiftdbEngine`]) included, is plugged in only through
//! [`Engine`] — or let harness work (allocation, formatting,
//! clock reads) weigh on the measured operations.
//!
//! ```
//! use siftdb_bench::{run_phase, MemoryEngine, NoProgress, Phase, RunOptions, Workload};
//! let engine = MemoryEngine::new();
//! let workload = Workload::new(1000)?;
//! for phase in Phase::ALL {
//!     let report = run_phase(&engine, &workload, phase, &RunOptions::default(), &NoProgress);
//!     assert!(report.passed(), "{}", report.to_human());
//! }
//! # Ok::<(), String>(())
//! ```

mod data;
mod engine;
mod latency;
mod memory;
mod phase;
mod report;
mod run;
mod siftdb_engine;
mod zipfian;

pub use data::{
    is_versioned_value, key, shuffle, value, versioned_value, SplitMix64, GOLDEN_GAMMA, KEY_LEN,
    MAX_KEY_INDEX, OUTPUTS_PER_VALUE, VALUE_LEN,
};
pub use engine::{Counters, Engine, ScanBuffer};
pub use latency::{nearest_rank, Latency, Sampler, SAMPLE_EVERY};
pub use memory::MemoryEngine;
pub use phase::{
    MixedOp, Phase, Workload, LOAD_ORDER_SEED, MAX_N, MIXED_PUT_EVERY, READ_ORDER_SEED,
    SCAN_ENTRIES, SCAN_LENGTH,
};
pub use report::{
    counter_changes, fmt_rate, group_digits, summary_table, CounterChange, ErrorLog, PhaseReport,
    MAX_ERROR_SAMPLES,
};
pub use run::{run_phase, NoProgress, Progress, RunOptions};
pub use siftdb_engine::SiftdbEngine;
pub use zipfian::{zeta, Zipfian, MIXED_SEED, YCSB_ZIPFIAN_CONSTANT};
