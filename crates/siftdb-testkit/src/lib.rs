//! # siftdb-testkit
//!
//! The tools siftdb is tested with, kept out of the library an application
//! embeds: [`FaultFs`], an in-memory file system that simulates power loss,
//! process kills and I/O errors behind siftdb's `FileSystem` seam (under
//! POSIX's or Windows' durability rules: [`Durability`]); the
//! process-kill crash test ([`stress`]) behind `siftdb stress`; the logic of
//! every fuzz target ([`fuzzing`]), shared by `fuzz/` and the corpus replay
//! tests; [`SplitMix64`], the one random generator of the tests and the
//! benchmark workloads; [`elle`], the list-append history checker of the
//! transaction tests; [`numbered_key`], the filter tests' keys; and
//! [`files`], real files in tests (snapshots, damage, unwritable
//! directories, unprivileged child processes); [`linearizability`], a
//! checker of concurrent histories (Porcupine's algorithm) with a
//! register / compare-and-swap model, for the replication tests; and
//! [`busy_tree_options`], options that make a few writes flush and compact;
//! and [`wine`], how a test steps aside where Wine cannot host it.
//!
//! Owns: everything above.
//! Must never: be a dependency of the `siftdb` library itself (only a
//! dev-dependency), or reach into it past its public API.

pub mod elle;
mod fault;
pub mod files;
pub mod fuzzing;
mod keys;
pub mod kill_rounds;
pub mod linearizability;
mod options;
mod rng;
pub mod stress;
pub mod tables;
pub mod wine;

pub use fault::{Durability, FaultFs, FaultMode, PowerLoss};
pub use keys::numbered_key;
pub use options::busy_tree_options;
pub use rng::{SplitMix64, GOLDEN_GAMMA};
