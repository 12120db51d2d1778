//! Overlapped block reads: many positioned reads in flight at once, so a
//! batch of lookups (`multi_get`) waits about one device latency for all
//! its data blocks instead of one latency per block.
//!
//! Two paths, chosen per batch: an io_uring ring of the calling thread
//! (Linux, when the kernel and any seccomp filter allow it and every file
//! of the batch is a real file with a descriptor), else a small process-wide
//! pool of threads doing `read_exact_at`. A ring the kernel refuses once is
//! never asked for again in this process; the batch goes to the pool.
//!
//! Owns: the per-thread ring, the read pool, and matching each completion
//! to its request (results come back in request order, whatever order the
//! reads finished in).
//! Must never: hand a read's bytes to another request; let the kernel write
//! into a buffer that was freed (every queued read is waited for before
//! the call returns; a ring that fails mid-batch leaks its buffers rather
//! than free them); hang when a read fails or its file is truncated or
//! removed (a short or failed read is redone with `read_exact_at`, whose
//! error names the file); or know anything about tables (it reads bytes).

use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::fs::RandomAccessFile;

/// One read of a batch: `len` bytes at `offset` of `file`.
pub(crate) struct ReadRequest {
    pub(crate) file: Arc<dyn RandomAccessFile>,
    pub(crate) offset: u64,
    pub(crate) len: usize,
}

impl ReadRequest {
    /// The read done here and now, with the file's own error on failure.
    pub(crate) fn read_here(&self) -> Result<Bytes> {
        let mut buffer = vec![0u8; self.len];
        self.file.read_exact_at(&mut buffer, self.offset)?;
        Ok(Bytes::from(buffer))
    }
}

/// Which path a batch of reads took.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IoPath {
    /// The calling thread's io_uring ring.
    Uring,
    /// Positioned reads on the read pool's threads.
    Pool,
}

/// Reads every request, at most `in_flight` at once (at least 1), through
/// io_uring when `allow_uring` and the kernel allows it, else the pool.
/// The results are in the order of `requests`.
pub(crate) fn read_overlapped(
    requests: &[ReadRequest],
    in_flight: usize,
    allow_uring: bool,
) -> (Vec<Result<Bytes>>, IoPath) {
    #[cfg(target_os = "linux")]
    if allow_uring {
        if let Some(results) = uring::read_all(requests, in_flight) {
            return (results, IoPath::Uring);
        }
    }
    #[cfg(not(target_os = "linux"))]
    let _ = allow_uring;
    (pool::read_all(requests, in_flight), IoPath::Pool)
}

/// True when this thread can use an io_uring ring (creating it if needed);
/// false on a kernel or sandbox that refuses one, or off Linux.
pub fn io_uring_available() -> bool {
    #[cfg(target_os = "linux")]
    {
        uring::available()
    }
    #[cfg(not(target_os = "linux"))]
    {
        false
    }
}

#[cfg(target_os = "linux")]
mod uring {
    use std::cell::RefCell;
    use std::os::fd::AsRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};

    use bytes::Bytes;
    use io_uring::{opcode, types, IoUring};

    use super::ReadRequest;
    use crate::error::Result;

    /// Submission entries of a thread's ring: the most reads it keeps in
    /// flight, whatever the caller allows.
    const RING_ENTRIES: u32 = 64;

    /// Set when the kernel refused a ring once: no thread asks again.
    static REFUSED: AtomicBool = AtomicBool::new(false);

    thread_local! {
        /// The calling thread's ring, made on its first batch.
        static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
    }

    /// The ring failed mid-batch; its buffers were leaked.
    struct Broken;

    pub(super) fn available() -> bool {
        RING.with(|cell| {
            cell.try_borrow_mut()
                .is_ok_and(|mut slot| ring_of(&mut slot).is_some())
        })
    }

    /// The thread's ring, made now when it has none; `None` when the kernel
    /// refuses it (remembered for every thread).
    fn ring_of(slot: &mut Option<IoUring>) -> Option<&mut IoUring> {
        if slot.is_none() && !REFUSED.load(Ordering::Relaxed) {
            match IoUring::new(RING_ENTRIES) {
                Ok(ring) => *slot = Some(ring),
                Err(_) => REFUSED.store(true, Ordering::Relaxed),
            }
        }
        slot.as_mut()
    }

    /// The batch through this thread's ring; `None` when there is no ring,
    /// a file has no descriptor, or the ring broke (the caller then reads
    /// the batch on the pool: reads are idempotent).
    pub(super) fn read_all(
        requests: &[ReadRequest],
        in_flight: usize,
    ) -> Option<Vec<Result<Bytes>>> {
        if requests.iter().any(|r| r.file.raw_fd().is_none()) {
            return None;
        }
        RING.with(|cell| {
            // Borrowed already only if a read re-entered this thread's
            // batch (none does): that batch goes to the pool.
            let mut slot = cell.try_borrow_mut().ok()?;
            let ring = ring_of(&mut slot)?;
            match drive(ring, requests, in_flight) {
                Ok(results) => Some(results),
                Err(Broken) => {
                    *slot = None;
                    None
                }
            }
        })
    }

    /// Queues the reads (at most `in_flight` at once), matches each
    /// completion to its request by its index in `user_data`, and returns
    /// once every queued read has completed.
    #[expect(
        unsafe_code,
        reason = "io_uring reads into caller memory; see the SAFETY comment"
    )]
    fn drive(
        ring: &mut IoUring,
        requests: &[ReadRequest],
        in_flight: usize,
    ) -> std::result::Result<Vec<Result<Bytes>>, Broken> {
        let limit = in_flight.clamp(1, RING_ENTRIES as usize);
        let mut buffers: Vec<Vec<u8>> = requests.iter().map(|r| vec![0u8; r.len]).collect();
        let mut results: Vec<Option<Result<Bytes>>> = requests.iter().map(|_| None).collect();
        let (mut next, mut flying) = (0usize, 0usize);
        loop {
            while flying < limit {
                let (Some(request), Some(buffer)) = (requests.get(next), buffers.get_mut(next))
                else {
                    break;
                };
                let (Some(fd), Ok(len)) = (request.file.raw_fd(), u32::try_from(buffer.len()))
                else {
                    // Too large for one entry (no data block is): read here.
                    if let Some(slot) = results.get_mut(next) {
                        *slot = Some(request.read_here());
                    }
                    next += 1;
                    continue;
                };
                let entry = opcode::Read::new(types::Fd(fd.as_raw_fd()), buffer.as_mut_ptr(), len)
                    .offset(request.offset)
                    .build()
                    .user_data(next as u64);
                // SAFETY: the kernel writes `len` bytes into `buffer`'s heap
                // memory and reads through `fd` until the completion of this
                // entry. `buffer` is not freed, resized or moved from before
                // that completion (the loop below takes it only after its
                // completion; on a ring failure every buffer is leaked), and
                // `fd` belongs to `request.file`, which `requests` holds for
                // the whole call (the kernel also holds its own reference to
                // the file while the read is in flight).
                let pushed = unsafe { ring.submission().push(&entry) };
                if pushed.is_err() {
                    break;
                }
                next += 1;
                flying += 1;
            }
            if flying == 0 {
                if next >= requests.len() {
                    break;
                }
                continue;
            }
            match ring.submit_and_wait(1) {
                Ok(_) => {}
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Reads may still be in flight into these buffers.
                    std::mem::forget(buffers);
                    return Err(Broken);
                }
            }
            for completion in ring.completion() {
                let Ok(index) = usize::try_from(completion.user_data()) else {
                    continue;
                };
                let (Some(request), Some(buffer), Some(slot)) = (
                    requests.get(index),
                    buffers.get_mut(index),
                    results.get_mut(index),
                ) else {
                    continue;
                };
                flying = flying.saturating_sub(1);
                let complete = usize::try_from(completion.result()).is_ok_and(|n| n == request.len);
                *slot = Some(if complete {
                    Ok(Bytes::from(std::mem::take(buffer)))
                } else {
                    // Short (the file was truncated) or failed: the same
                    // read once more, for the file's own error (or bytes
                    // a retry got after an interruption).
                    request.read_here()
                });
            }
        }
        Ok(results
            .into_iter()
            .zip(requests)
            .map(|(result, request)| result.unwrap_or_else(|| request.read_here()))
            .collect())
    }
}

mod pool {
    use std::sync::{mpsc, Arc, OnceLock};

    use bytes::Bytes;

    use super::ReadRequest;
    use crate::error::Result;

    /// Threads of the read pool: enough reads in flight to keep a disk's
    /// queue busy (its throughput grows to about 32 in flight), few enough
    /// to cost little while they wait.
    const THREADS: usize = 16;

    type Job = Box<dyn FnOnce() + Send>;

    /// Where batches queue their reads; `None` when no thread could start.
    static QUEUE: OnceLock<Option<mpsc::Sender<Job>>> = OnceLock::new();

    fn queue() -> Option<&'static mpsc::Sender<Job>> {
        QUEUE
            .get_or_init(|| {
                let (sender, receiver) = mpsc::channel::<Job>();
                let receiver = Arc::new(parking_lot::Mutex::new(receiver));
                let started = (0..THREADS)
                    .filter(|i| {
                        let receiver = Arc::clone(&receiver);
                        std::thread::Builder::new()
                            .name(format!("siftdb-read-{i}"))
                            .spawn(move || loop {
                                let job = receiver.lock().recv();
                                match job {
                                    Ok(job) => job(),
                                    Err(_) => return,
                                }
                            })
                            .is_ok()
                    })
                    .count();
                (started > 0).then_some(sender)
            })
            .as_ref()
    }

    /// Reads the batch in waves of at most `in_flight` reads on the pool.
    /// Each wave has its own answer channel whose sender only the wave's
    /// jobs hold, so a job lost to a panicking read ends the wait instead
    /// of hanging it (that read is then redone here).
    pub(super) fn read_all(requests: &[ReadRequest], in_flight: usize) -> Vec<Result<Bytes>> {
        let mut results: Vec<Option<Result<Bytes>>> = requests.iter().map(|_| None).collect();
        let Some(queue) = queue() else {
            return requests.iter().map(ReadRequest::read_here).collect();
        };
        let wave = in_flight.clamp(1, THREADS);
        for (start, chunk) in (0..).step_by(wave).zip(requests.chunks(wave)) {
            let (done, answers) = mpsc::channel::<(usize, Result<Bytes>)>();
            for (index, request) in (start..).zip(chunk) {
                let (file, offset, len) = (Arc::clone(&request.file), request.offset, request.len);
                let done = done.clone();
                let job: Job = Box::new(move || {
                    let read = ReadRequest { file, offset, len }.read_here();
                    let _ = done.send((index, read));
                });
                if let Err(mpsc::SendError(job)) = queue.send(job) {
                    // Every pool thread is gone: the read runs here.
                    job();
                }
            }
            drop(done);
            for (index, read) in answers.iter() {
                if let Some(slot) = results.get_mut(index) {
                    *slot = Some(read);
                }
            }
        }
        results
            .into_iter()
            .zip(requests)
            .map(|(result, request)| result.unwrap_or_else(|| request.read_here()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;

    fn requests_over(path: &std::path::Path, count: usize) -> Vec<ReadRequest> {
        let file = OsFileSystem::shared().open_read(path).unwrap();
        (0..count)
            .map(|i| ReadRequest {
                file: Arc::clone(&file),
                offset: ((i * 7919) % 1000) as u64 * 16,
                len: 16 + i % 5,
            })
            .collect()
    }

    #[test]
    fn both_paths_answer_every_request_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 251) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let requests = requests_over(&path, 300);
        for (in_flight, uring) in [(1, true), (4, true), (200, true), (3, false), (64, false)] {
            let (results, path_taken) = read_overlapped(&requests, in_flight, uring);
            if !uring {
                assert_eq!(path_taken, IoPath::Pool);
            } else if io_uring_available() {
                assert_eq!(path_taken, IoPath::Uring);
            }
            for (request, result) in requests.iter().zip(results) {
                let at = usize::try_from(request.offset).unwrap();
                assert_eq!(&result.unwrap()[..], &bytes[at..at + request.len]);
            }
        }
    }

    #[test]
    fn a_read_past_the_end_fails_alone_on_both_paths() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![7u8; 20_000]).unwrap();
        let mut requests = requests_over(&path, 40);
        // The file shrinks under the open handle.
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(8_000)
            .unwrap();
        requests.truncate(40);
        for uring in [true, false] {
            let (results, _) = read_overlapped(&requests, 8, uring);
            for (request, result) in requests.iter().zip(results) {
                if usize::try_from(request.offset).unwrap() + request.len <= 8_000 {
                    assert_eq!(&result.unwrap()[..], &vec![7u8; request.len][..]);
                } else {
                    let err = result.unwrap_err().to_string();
                    assert!(err.contains("f"), "{err}");
                }
            }
        }
    }
}
