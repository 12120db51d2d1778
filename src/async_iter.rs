//! Scans for async callers (cargo feature `tokio`).
//!
//! Owns: [`AsyncIter`], a scan (a [`DbIterator`], or a transaction's
//! [`crate::TransactionIter`]) stepped on tokio's blocking pool a chunk of
//! entries at a time, from either end, and the buffers that keep the
//! chunks fetched from each end.
//! Must never: block an async worker thread on disk I/O, yield an entry
//! twice or skip one (also when both ends are used and meet), or go on
//! silently after a cancelled call lost the iterator's position.

use std::collections::VecDeque;

use bytes::Bytes;

#[cfg(doc)]
use crate::db::DbIterator;
use crate::error::{Error, Result};

/// Entries fetched per trip to the blocking pool by [`AsyncIter::next`]
/// and [`AsyncIter::next_back`].
const CHUNK: usize = 256;

/// An entry of a scan.
type Entry = (Bytes, Bytes);

/// A blocking scan an [`AsyncIter`] steps: a database's or a
/// transaction's, either of which can be told how to read its tables.
pub(crate) trait BlockingScan: DoubleEndedIterator<Item = Result<Entry>> + Send {
    /// The scan with [`DbIterator::fill_cache`] applied.
    fn with_fill_cache(self: Box<Self>, fill: bool) -> Scan;
}

/// A boxed [`BlockingScan`].
type Scan = Box<dyn BlockingScan>;

impl BlockingScan for crate::db::DbIterator {
    fn with_fill_cache(self: Box<Self>, fill: bool) -> Scan {
        Box::new(self.fill_cache(fill))
    }
}

impl BlockingScan for crate::db::TransactionIter {
    fn with_fill_cache(self: Box<Self>, fill: bool) -> Scan {
        Box::new(self.fill_cache(fill))
    }
}

/// A scan as of the moment it was made (see [`DbIterator`]), stepped
/// without blocking the async runtime: each call that needs entries takes
/// up to a chunk of them on tokio's blocking pool. Made by
/// [`crate::AsyncDb::range`], `prefix`, `iter` and their
/// [`crate::AsyncKeyspace`] forms, and by [`crate::AsyncTransaction`]'s
/// scans.
///
/// A call that is cancelled (its future dropped) while its chunk is being
/// read loses the iterator's position with it: every later call returns
/// `InvalidArgument` rather than carrying on past entries no one saw.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> siftdb::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let db = siftdb::AsyncDb::open_with(dir.path(), siftdb::Options::default()).await?;
/// for i in 0..10 {
///     db.put(format!("k{i}"), "v").await?;
/// }
/// let mut scan = db.range("k2".."k5");
/// while let Some((key, _value)) = scan.next().await.transpose()? {
///     println!("{key:?}");
/// }
/// assert_eq!(db.prefix("k").next_back().await.transpose()?.map(|e| e.0), Some("k9".into()));
/// # Ok(())
/// # }
/// ```
///
/// `Send` but deliberately not `Sync`, like [`crate::DbIterator`] (checked
/// by `tests/api_traits.rs`): a task owns its scan.
pub struct AsyncIter {
    /// The scan; `None` once a cancelled call took it away.
    iter: Option<Scan>,
    /// Entries taken from the front and not yet returned, in key order.
    front: VecDeque<Entry>,
    /// Entries taken from the back and not yet returned, in key order.
    back: VecDeque<Entry>,
    /// The error that ended the last chunk, returned once the entries
    /// read before it have been.
    failed: Option<Error>,
}

/// Which end of the scan a chunk is taken from.
#[derive(Clone, Copy)]
enum End {
    Front,
    Back,
}

impl AsyncIter {
    pub(crate) fn new(iter: impl BlockingScan + 'static) -> AsyncIter {
        AsyncIter {
            iter: Some(Box::new(iter)),
            front: VecDeque::new(),
            back: VecDeque::new(),
            failed: None,
        }
    }

    /// [`DbIterator::fill_cache`] for this scan: with `false`, its tables'
    /// data blocks are read straight from the files in spans, neither
    /// taken from the block cache nor put into it. Give it before the
    /// first step; a side already started keeps reading as it began.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> siftdb::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = siftdb::AsyncDb::open_with(dir.path(), siftdb::Options::default()).await?;
    /// db.put("k", "v").await?;
    /// db.flush().await?;
    /// let entries = db.iter().fill_cache(false).next_chunk(10).await?;
    /// assert_eq!(entries.len(), 1);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fill_cache(mut self, fill: bool) -> AsyncIter {
        self.iter = self.iter.take().map(|scan| scan.with_fill_cache(fill));
        self
    }

    /// The next entry in key order, `None` at the end.
    pub async fn next(&mut self) -> Option<Result<Entry>> {
        if self.front.is_empty() {
            match self.fetch(End::Front, CHUNK).await {
                Ok(chunk) => self.front = chunk.into(),
                Err(e) => return Some(Err(e)),
            }
        }
        // The front has met the back: what the back took comes next.
        self.front
            .pop_front()
            .or_else(|| self.back.pop_front())
            .map(Ok)
    }

    /// The next entry from the end, in descending key order; `None` when
    /// the two ends have met.
    pub async fn next_back(&mut self) -> Option<Result<Entry>> {
        if self.back.is_empty() {
            match self.fetch(End::Back, CHUNK).await {
                Ok(chunk) => self.back = chunk.into_iter().rev().collect(),
                Err(e) => return Some(Err(e)),
            }
        }
        self.back
            .pop_back()
            .or_else(|| self.front.pop_back())
            .map(Ok)
    }

    /// Up to `max` next entries in key order, in one trip to the blocking
    /// pool (after any already fetched); empty at the end.
    pub async fn next_chunk(&mut self, max: usize) -> Result<Vec<Entry>> {
        let mut out: Vec<Entry> = Vec::with_capacity(max.min(CHUNK));
        while out.len() < max {
            match self.front.pop_front() {
                Some(entry) => out.push(entry),
                None => break,
            }
        }
        if out.len() < max {
            out.extend(self.fetch(End::Front, max - out.len()).await?);
        }
        while out.len() < max {
            match self.back.pop_front() {
                Some(entry) => out.push(entry),
                None => break,
            }
        }
        Ok(out)
    }

    /// Takes up to `max` entries from `end` of the scan on the blocking
    /// pool (in the order that end yields them).
    async fn fetch(&mut self, end: End, max: usize) -> Result<Vec<Entry>> {
        if let Some(e) = self.failed.take() {
            return Err(e);
        }
        let mut iter = self
            .iter
            .take()
            .ok_or_else(|| Error::invalid("the scan's position was lost with a cancelled call"))?;
        let task = tokio::task::spawn_blocking(move || {
            let mut chunk = Vec::with_capacity(max.min(CHUNK));
            let mut failed = None;
            while chunk.len() < max {
                let entry = match end {
                    End::Front => iter.next(),
                    End::Back => iter.next_back(),
                };
                match entry {
                    Some(Ok(entry)) => chunk.push(entry),
                    Some(Err(e)) => {
                        failed = Some(e);
                        break;
                    }
                    None => break,
                }
            }
            (iter, chunk, failed)
        });
        let (iter, chunk, failed) = task
            .await
            .map_err(|e| Error::Panicked(format!("blocking task failed: {e}")))?;
        self.iter = Some(iter);
        match failed {
            Some(e) if chunk.is_empty() => Err(e),
            // The entries read before the error come first, as from a
            // `DbIterator`; the error with the next fetch.
            failed => {
                self.failed = failed;
                Ok(chunk)
            }
        }
    }
}

impl std::fmt::Debug for AsyncIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AsyncIter")
            .field("lost", &self.iter.is_none())
            .field("front_buffered", &self.front.len())
            .field("back_buffered", &self.back.len())
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}
