//! Resources many databases of one process share: a block cache
//! ([`Cache`]), a budget for their memtables ([`WriteBufferManager`]) and a
//! bound on their background writes' bytes per second ([`RateLimiter`]),
//! each given to every database that shares it through
//! [`crate::Options`] (`block_cache`, `write_buffer_manager`,
//! `rate_limiter`).
//!
//! Owns: the three public handles (cloneable, `Send + Sync`, each with an
//! accessor for what it holds or did, so an application can watch its
//! memory), and the seams the database layer plugs into: the block cache's
//! entries, a database's membership of a write budget
//! ([`write_buffer::BufferedMemory`], [`WriteBufferSlot`]) and the rate's
//! reservations.
//! Must never: import the database layer (a database reaches these through
//! a trait it implements), hold a lock of its own while it calls into a
//! database that might wait for another database, or let one database's
//! cached block answer another's read (every block key carries the id of
//! the reader it came from, never reused).

mod cache;
mod rate_limiter;
pub(crate) mod write_buffer;

pub use cache::Cache;
pub(crate) use cache::CachedBlock;
pub(crate) use rate_limiter::IoPriority;
pub use rate_limiter::RateLimiter;
pub use write_buffer::WriteBufferManager;
pub(crate) use write_buffer::WriteBufferSlot;
