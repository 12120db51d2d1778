//! Events of the background work an application may watch: what a flush
//! and a compaction did, a failure of background work, a write stall.
//!
//! Owns: the [`EventListener`] trait, the events it is shown, and their
//! delivery — every event goes through a channel to one thread of its own
//! (`siftdb-events`, started at open when a listener was added), which
//! calls the listeners in the order the events happened.
//! Must never: call a listener on a thread doing the database's work or
//! holding one of its locks (a listener may write to the database, or
//! block, and only later events wait for it), or block the sender (the
//! channel is unbounded: events come at the rate of flushes, compactions,
//! failures and stalls, not of writes).

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use crate::error::{Error, Result};

/// One table of a keyspace: what `Db::live_tables` lists, and what a
/// flush or a compaction wrote or replaced (RocksDB's `SstFileMetaData`).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableMetadata {
    /// The keyspace it belongs to.
    pub keyspace: String,
    /// Its file number (its file is `<number>.sst`, six digits at least).
    pub file_number: u64,
    /// Its level: 0 for a flush's output.
    pub level: u32,
    /// The file's size in bytes.
    pub bytes: u64,
    /// Entries: every version, tombstones included.
    pub entries: u64,
    /// Its smallest and largest user keys (a range tombstone's bounds
    /// included).
    pub smallest_key: Vec<u8>,
    /// See `smallest_key`.
    pub largest_key: Vec<u8>,
}

/// A memtable was written to a level-0 table.
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlushEvent {
    /// The keyspace whose memtable it was.
    pub keyspace: String,
    /// The table written; `None` when the memtable held nothing to keep.
    pub table: Option<TableMetadata>,
    /// From the start of the flush to its table's installation.
    pub duration: Duration,
}

/// Why a compaction ran.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompactionReason {
    /// A level over its budget, level 0 over its trigger, or a run of
    /// small adjacent tables merged within its level.
    Automatic,
    /// Asked for: `Db::compact`, `Keyspace::compact`, `compact_range`.
    Requested,
}

/// A compaction replaced tables by others one level down (or at the
/// deepest level a requested compaction reached, or in the same level for
/// a run of small adjacent tables).
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CompactionEvent {
    /// The keyspace whose tables they are.
    pub keyspace: String,
    /// What started it.
    pub reason: CompactionReason,
    /// The level the outputs went to.
    pub output_level: u32,
    /// The tables it replaced (their levels as they were).
    pub inputs: Vec<TableMetadata>,
    /// The tables that replaced them; none when nothing survived.
    pub outputs: Vec<TableMetadata>,
    /// True when a lone table moved down a level as it was (no rewrite;
    /// `outputs` is that table at its new level).
    pub moved: bool,
    /// From the start of the compaction to its outputs' installation.
    pub duration: Duration,
}

/// The background work that failed.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackgroundWork {
    /// Writing a memtable to a table.
    Flush,
    /// A compaction.
    Compaction,
    /// The write-ahead log: an append, a sync or the start of a new log
    /// failed, and writes are refused until recovery succeeds.
    Log,
    /// The retry of a failed flush or log (flushing every memtable, then
    /// starting a new log).
    Recovery,
}

/// Background work failed (see `docs/design.md`, "Failures").
#[non_exhaustive]
#[derive(Debug)]
pub struct BackgroundErrorEvent {
    /// What failed.
    pub work: BackgroundWork,
    /// How.
    pub error: Error,
    /// Consecutive failures of this kind of work, this one included.
    pub attempts: u32,
    /// When it is retried on its own; `None` when only `Db::resume` (or,
    /// for corruption, a repair) retries it.
    pub retry_in: Option<Duration>,
    /// True when the failure stops every write until the database is
    /// repaired and reopened (corruption).
    pub writes_stopped: bool,
}

/// What a stalled write waited for.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StallCause {
    /// Flushes: too many memtables waiting to be written, or the memory
    /// bound on all memtables (`Options::total_memtable_bytes`) reached.
    Flush,
    /// Compaction: level 0 reached `Options::level0_stop_writes` tables.
    Level0,
}

/// A write waited for background work before it could go on.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WriteStallEvent {
    /// What it waited for (when it started waiting).
    pub cause: StallCause,
    /// How long.
    pub waited: Duration,
}

/// Watches the database's background work: add one with
/// [`crate::Options::add_event_listener`]. Every method has a default that
/// does nothing, so a listener implements the ones it needs.
///
/// The methods are called on one thread of their own, one event at a time,
/// in the order the events happened, never on a thread doing the
/// database's work: a listener may block or write to the database, and
/// only the events after it wait. Events come from work after
/// [`crate::Db::open_with`] returns, until [`crate::Db::close`], which
/// returns once every event was delivered. A listener that panics is
/// called no more, and `close` returns [`Error::Panicked`]. A listener
/// that holds the [`crate::Db`] it watches keeps it open.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// use std::sync::{atomic::{AtomicU64, Ordering}, Arc};
/// use siftdb::{Db, EventListener, FlushEvent, Options};
///
/// #[derive(Default)]
/// struct Flushed(AtomicU64);
/// impl EventListener for Flushed {
///     fn on_flush(&self, event: &FlushEvent) {
///         let bytes = event.table.as_ref().map_or(0, |t| t.bytes);
///         self.0.fetch_add(bytes, Ordering::Relaxed);
///     }
/// }
///
/// let flushed = Arc::new(Flushed::default());
/// let db = Db::open_with(dir.path(), Options::default().add_event_listener(flushed.clone()))?;
/// db.put("k", "v")?;
/// db.flush()?;
/// db.close()?; // every event delivered
/// assert!(flushed.0.load(Ordering::Relaxed) > 0);
/// # Ok::<(), siftdb::Error>(())
/// ```
pub trait EventListener: Send + Sync {
    /// A memtable was written to a table.
    fn on_flush(&self, event: &FlushEvent) {
        let _ = event;
    }

    /// A compaction finished.
    fn on_compaction(&self, event: &CompactionEvent) {
        let _ = event;
    }

    /// Background work (or the log) failed.
    fn on_background_error(&self, event: &BackgroundErrorEvent) {
        let _ = event;
    }

    /// A write waited for background work.
    fn on_write_stall(&self, event: &WriteStallEvent) {
        let _ = event;
    }
}

/// One event on its way to the listeners.
pub(crate) enum Event {
    Flush(FlushEvent),
    Compaction(CompactionEvent),
    BackgroundError(BackgroundErrorEvent),
    WriteStall(WriteStallEvent),
    /// The database closes: the thread returns after the events before it.
    Stop,
}

/// The sending side, kept by the database: empty until the thread started
/// (and for good when no listener was added).
#[derive(Default)]
pub(crate) struct EventQueue {
    sender: OnceLock<Sender<Event>>,
}

impl EventQueue {
    /// Sends the event `make` builds, when anyone listens. Never blocks;
    /// an event after the thread stopped is dropped.
    pub(crate) fn emit(&self, make: impl FnOnce() -> Event) {
        if let Some(sender) = self.sender.get() {
            let _ = sender.send(make());
        }
    }

    /// Starts the thread that calls `listeners` (none: no thread, and
    /// [`EventQueue::emit`] builds nothing).
    pub(crate) fn start(
        &self,
        listeners: &[Arc<dyn EventListener>],
    ) -> Result<Option<std::thread::JoinHandle<()>>> {
        if listeners.is_empty() {
            return Ok(None);
        }
        let (sender, receiver) = channel();
        let listeners = listeners.to_vec();
        let thread = std::thread::Builder::new()
            .name("siftdb-events".into())
            .spawn(move || deliver(&listeners, &receiver))
            .map_err(Error::from)?;
        // Set once, by the open that made this queue.
        let _ = self.sender.set(sender);
        Ok(Some(thread))
    }

    /// Asks the thread to return once the events sent so far are
    /// delivered.
    pub(crate) fn stop(&self) {
        self.emit(|| Event::Stop);
    }
}

fn deliver(listeners: &[Arc<dyn EventListener>], receiver: &Receiver<Event>) {
    for event in receiver {
        for listener in listeners {
            match &event {
                Event::Flush(e) => listener.on_flush(e),
                Event::Compaction(e) => listener.on_compaction(e),
                Event::BackgroundError(e) => listener.on_background_error(e),
                Event::WriteStall(e) => listener.on_write_stall(e),
                Event::Stop => return,
            }
        }
        if matches!(event, Event::Stop) {
            return;
        }
    }
}
