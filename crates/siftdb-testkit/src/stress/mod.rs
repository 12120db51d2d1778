//! Crash testing by process kill (`siftdb stress`): a child process writes
//! batches and acknowledges each; the parent kills it with SIGKILL at a
//! random moment, reopens the database and checks that every acknowledged
//! batch is there with its latest values, that the batch in flight is there
//! whole or not at all, that nothing deleted came back, and that the files
//! verify — then starts the next child on the same directory.
//!
//! Owns: the batch plan ([`plan`]), the child loop ([`run_child`]), the
//! parent's rounds ([`run`]), the model ([`Model`]), the options both sides
//! open the database with ([`stress_options`]) and the offline check
//! ([`verify_database`]).
//! Must never: call a round good without comparing every key the database
//! can hold, by `get` and by a full scan.
//!
//! A kill leaves what the process had handed to the operating system, so
//! `sync_writes(false)` must lose nothing here either; only a machine crash
//! separates it from `sync_writes(true)`.

mod child;
mod model;
mod parent;
pub mod plan;
mod verify;

pub use child::run_child;
pub use model::{CheckOutcome, Model};
pub use parent::{run, RoundReport, StressConfig, StressError, StressReport};
pub use verify::verify_database;

use siftdb::Options;

/// The options of a stress database: small memtables, tables and levels, so
/// that a round of a few hundred milliseconds flushes and compacts.
pub fn stress_options(sync: bool) -> Options {
    Options::default()
        .sync_writes(sync)
        .memtable_bytes(32 << 10)
        .block_size(1024)
        .level0_compaction_trigger(3)
        .level1_bytes(64 << 10)
        .level_size_ratio(4)
        .table_target_bytes(32 << 10)
}
