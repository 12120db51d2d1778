//! The benchmark workloads of `WORKLOADS.md`, runnable against any engine.
//!
//! Owns: the data (keys, values, orders, Zipfian draws), the phases and
//! their exact operation sequences (with `--ops`, [`Workload::with_ops`]),
//! the [`Engine`] seam, the timed and checked runner ([`run_phase`]) and
//! its [`PhaseReport`], the page-cache drop of cold runs ([`ColdCache`]),
//! the process's peak memory and the bytes it wrote, the size checks made before a run
//! ([`check_fits`]), the SVG pictures of a run and of the filter's
//! false-positive curve ([`plot`]), and the siftdb-only bulk-load
//! comparison ([`run_bulkload`]). `siftdb bench`
//! runs siftdb through it; the peers crate (crates/siftdb-peers/) runs RocksDB
//! and fjall through the very same code, so the work is identical.
//! Must never: depend on siftdb's storage engine — every engine, siftdb's
//! own adapter ([`SiftdbEngine`]) included, is plugged in only through
//! [`Engine`] (the bulk-load comparison, siftdb's own API, aside) — or let harness work (allocation, formatting,
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

mod amplification;
pub mod benchmarks_doc;
mod bulkload;
mod cold;
pub mod cpu;
mod data;
mod device;
mod engine;
mod fp_curve;
mod latency;
mod memory;
mod phase;
pub mod plot;
mod report;
pub mod resident;
mod run;
mod siftdb_engine;
mod size;
mod storage_choice;
mod workers;
pub mod written;
mod ycsb;
mod ycsb_run;
mod zipfian;

pub use amplification::{dir_bytes, ycsb_amplification, Amplification};
pub use bulkload::{run_bulkload, BulkloadReport};
pub use cold::{write_back_dirty_pages, ColdCache, DROP_CACHES};
pub use data::{
    is_sized_value, is_versioned_value, key, shuffle, sized_value_into, value, versioned_value,
    SplitMix64, GOLDEN_GAMMA, KEY_LEN, MAX_KEY_INDEX, OUTPUTS_PER_VALUE, VALUE_LEN,
};
pub use device::{
    device_fraction_line, fraction_of_device, measure_device, DeviceBaseline, DEFAULT_DEPTHS,
    READ_BYTES,
};
pub use engine::{
    changed_value, Counters, Engine, LockRetries, ScanBuffer, BLOCKS_READ_FROM_FILE,
    WRITE_STALL_MICROS,
};
pub use fp_curve::{measure_fp, queries_for, TARGET_FALSE_POSITIVES};
pub use latency::{nearest_rank, Latency, Sampler, SAMPLE_EVERY};
pub use memory::MemoryEngine;
pub use phase::{
    check_phase_order, harness_bytes, MixedOp, Phase, Workload, KEYS_PER_PREFIX, LOAD_ORDER_SEED,
    MAX_N, MAX_VALUE_LEN, MIXED_PUT_EVERY, PREFIX_LEN, READ_ORDER_SEED, SCAN_ENTRIES, SCAN_LENGTH,
};
pub use report::{
    counter_changes, describe_run, fmt_mib, fmt_rate, group_digits, summary_table, CounterChange,
    ErrorLog, PhaseReport, MAX_ERROR_SAMPLES, TXN_DEADLOCKS, TXN_LOCK_TIMEOUTS,
};
pub use run::{run_phase, RunOptions};
pub use siftdb_engine::{SiftdbConfig, SiftdbEngine};
pub use size::{check_before_run, check_fits, parse_count, raw_data_bytes, Fit};
pub use storage_choice::{siftdb_storage_options, CompressionChoice};
pub use workers::{NoProgress, Progress};
pub use ycsb::{
    draw_ycsb, fnv_hash64, ycsb_key, ycsb_stamp, ycsb_value_into, ycsb_value_matches, YcsbMix,
    YcsbOp, YcsbOpKind, YcsbState, YCSB_KEY_LEN, YCSB_MAX_SCAN, YCSB_STAMP_LEN, YCSB_VALUE_LEN,
};
pub use ycsb_run::ycsb_record_bytes;
pub use zipfian::{zeta, Zipfian, MIXED_SEED, YCSB_ZIPFIAN_CONSTANT};
