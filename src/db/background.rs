//! The background thread: flushes immutable memtables, then compacts.
//!
//! Owns: the one background thread, its wake-ups, and the waits of callers
//! who need its progress (stalled writers, `flush`, `compact`).
//! Must never: hold the writer lock (writers may be waiting on it), or keep
//! going after shutdown was asked.

use std::sync::Arc;
use std::time::Duration;

use crate::db::{compaction, flush, DbInner};
use crate::error::{Error, Result};

#[derive(Default)]
pub(crate) struct BgState {
    shutdown: bool,
    busy: bool,
    /// Units of work finished (flushes and compactions).
    progress: u64,
    error: Option<String>,
    full_requested: u64,
    full_done: u64,
    /// Per level, the largest key of the last table compacted out of it.
    pub compact_pointer: Vec<Vec<u8>>,
}

enum Work {
    Flush,
    Compact,
    Full(u64),
}

pub(crate) fn spawn(inner: Arc<DbInner>) -> Result<std::thread::JoinHandle<()>> {
    std::thread::Builder::new()
        .name("siftdb-bg".into())
        .spawn(move || run(&inner))
        .map_err(Error::from)
}

fn run(inner: &DbInner) {
    loop {
        let work = {
            let mut st = inner.bg.lock();
            loop {
                if st.shutdown {
                    st.busy = false;
                    inner.bg_cv.notify_all();
                    return;
                }
                let sv = inner.current.load();
                let work = if st.error.is_some() {
                    None
                } else if !sv.imm.is_empty() {
                    Some(Work::Flush)
                } else if st.full_requested > st.full_done {
                    Some(Work::Full(st.full_requested))
                } else if compaction::pick(&sv.version, &inner.opts, &st.compact_pointer).is_some()
                {
                    Some(Work::Compact)
                } else {
                    None
                };
                match work {
                    Some(work) => {
                        st.busy = true;
                        break work;
                    }
                    None => {
                        st.busy = false;
                        inner.bg_cv.notify_all();
                        inner.bg_cv.wait(&mut st);
                    }
                }
            }
        };
        let result = match work {
            Work::Flush => flush::flush_oldest(inner).map(|_| ()),
            Work::Compact => compaction::compact_once(inner),
            Work::Full(_) => compaction::compact_all(inner),
        };
        let mut st = inner.bg.lock();
        st.progress += 1;
        match result {
            Ok(()) => {
                if let Work::Full(generation) = work {
                    st.full_done = st.full_done.max(generation);
                }
            }
            Err(e) => st.error = Some(e.to_string()),
        }
        inner.bg_cv.notify_all();
    }
}

/// Wakes the background thread.
pub(crate) fn notify(inner: &DbInner) {
    let _st = inner.bg.lock();
    inner.bg_cv.notify_all();
}

fn failed(st: &BgState) -> Result<()> {
    match &st.error {
        Some(e) => Err(Error::Poisoned(format!("background work failed: {e}"))),
        None if st.shutdown => Err(Error::Poisoned("database is closing".into())),
        None => Ok(()),
    }
}

/// Waits while `blocked()` holds, woken by background progress.
///
/// The condition is checked under the background lock, which the
/// background thread takes to count each unit of work after publishing it:
/// so work finished between the caller's own check and this wait is seen
/// here, rather than waited for again (a wait for "one more unit" would
/// hang when that was the last unit there was to do).
pub(crate) fn wait_while(inner: &DbInner, blocked: impl Fn() -> bool) -> Result<()> {
    let mut st = inner.bg.lock();
    failed(&st)?;
    inner.bg_cv.notify_all();
    while blocked() {
        failed(&st)?;
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
    failed(&st)
}

/// Waits until no immutable memtable is left.
pub(crate) fn wait_for_flushes(inner: &DbInner) -> Result<()> {
    let mut st = inner.bg.lock();
    inner.bg_cv.notify_all();
    while !inner.current.load().imm.is_empty() {
        failed(&st)?;
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
    failed(&st)
}

/// Waits until no flush or automatic compaction is pending.
pub(crate) fn wait_for_idle(inner: &DbInner) -> Result<()> {
    let mut st = inner.bg.lock();
    inner.bg_cv.notify_all();
    loop {
        failed(&st)?;
        let sv = inner.current.load();
        let pending = !sv.imm.is_empty()
            || st.full_requested > st.full_done
            || compaction::pick(&sv.version, &inner.opts, &st.compact_pointer).is_some();
        if !pending && !st.busy {
            return Ok(());
        }
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
}

/// Asks for a full compaction and waits for it.
pub(crate) fn request_full_compaction(inner: &DbInner) -> Result<()> {
    let mut st = inner.bg.lock();
    st.full_requested += 1;
    let generation = st.full_requested;
    inner.bg_cv.notify_all();
    while st.full_done < generation {
        failed(&st)?;
        inner.bg_cv.wait_for(&mut st, Duration::from_millis(50));
    }
    Ok(())
}

/// Tells the background thread to stop after its current unit of work.
pub(crate) fn shutdown(inner: &DbInner) {
    let mut st = inner.bg.lock();
    st.shutdown = true;
    inner.bg_cv.notify_all();
}
