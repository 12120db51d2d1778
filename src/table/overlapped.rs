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
    /// Read past the page cache (`O_DIRECT`): set only for a file that has
    /// a direct descriptor (`RandomAccessFile::direct_fd`).
    pub(crate) direct: bool,
}

impl ReadRequest {
    /// The read done here and now, with the file's own error on failure.
    pub(crate) fn read_here(&self) -> Result<Bytes> {
        if self.direct {
            if let Some(read) = self.file.read_direct_at(self.len, self.offset) {
                return read.map(Bytes::from);
            }
        }
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
/// io_uring when `allow_uring` and the kernel allows it, else the pool,
/// handing each result to `done` with its index in `requests` as soon as
/// it completes (while later reads are still in flight), so the caller's
/// work on one block overlaps the device's work on the others. Every
/// request is answered exactly once.
pub(crate) fn read_overlapped(
    requests: &[ReadRequest],
    in_flight: usize,
    allow_uring: bool,
    done: &mut dyn FnMut(usize, Result<Bytes>),
) -> IoPath {
    #[cfg(target_os = "linux")]
    if allow_uring && uring::read_all(requests, in_flight, done) {
        return IoPath::Uring;
    }
    #[cfg(not(target_os = "linux"))]
    let _ = allow_uring;
    pool::read_all(requests, in_flight, done);
    IoPath::Pool
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
    use crate::fs::DirectSpan;

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

    /// Reads pushed before the ring is told of them: the first reads reach
    /// the device while the kernel still prepares the later ones (one
    /// `io_uring_enter` for a whole batch holds every read back until the
    /// last is prepared).
    const SUBMIT_EVERY: usize = 8;

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

    /// The batch through this thread's ring, each result to `done` as it
    /// completes; false, with nothing read, when there is no ring or a file
    /// has no descriptor (the caller then reads the batch on the pool). A
    /// ring that breaks mid-batch is dropped and the reads it had not
    /// answered are made here, one at a time.
    pub(super) fn read_all(
        requests: &[ReadRequest],
        in_flight: usize,
        done: &mut dyn FnMut(usize, Result<Bytes>),
    ) -> bool {
        if requests.iter().any(|r| r.file.raw_fd().is_none()) {
            return false;
        }
        RING.with(|cell| {
            // Borrowed already only if a read re-entered this thread's
            // batch (none does): that batch goes to the pool.
            let Ok(mut slot) = cell.try_borrow_mut() else {
                return false;
            };
            let Some(ring) = ring_of(&mut slot) else {
                return false;
            };
            let mut answered = vec![false; requests.len()];
            let mut answer = |index: usize, read: Result<Bytes>| {
                if let Some(flag) = answered.get_mut(index) {
                    *flag = true;
                }
                done(index, read);
            };
            if drive(ring, requests, in_flight, &mut answer).is_err() {
                *slot = None;
            }
            for (index, request) in requests.iter().enumerate() {
                if !answered.get(index).copied().unwrap_or(true) {
                    done(index, request.read_here());
                }
            }
            true
        })
    }

    /// Queues the reads (at most `in_flight` at once, told to the kernel
    /// every [`SUBMIT_EVERY`]), hands each completion to `done` by its index
    /// in `user_data` as it is reaped, and returns once every queued read
    /// has completed.
    #[expect(
        unsafe_code,
        reason = "io_uring reads into caller memory; see the SAFETY comments"
    )]
    fn drive(
        ring: &mut IoUring,
        requests: &[ReadRequest],
        in_flight: usize,
        done: &mut dyn FnMut(usize, Result<Bytes>),
    ) -> std::result::Result<(), Broken> {
        let limit = in_flight.clamp(1, RING_ENTRIES as usize);
        // A direct read reads its aligned span into an aligned place of a
        // larger buffer (`pad` bytes in), through the direct descriptor.
        let mut spans: Vec<Option<(DirectSpan, usize)>> = requests.iter().map(|_| None).collect();
        // Uninitialised: the kernel fills them, and only a read that filled
        // its buffer whole hands it on (see `filled`, `copied`).
        let mut buffers: Vec<Vec<u8>> = requests
            .iter()
            .zip(&mut spans)
            .map(|(r, span)| {
                let direct = r.direct.then(|| DirectSpan::of(r.len, r.offset)).flatten();
                match direct.and_then(|d| Some((d, d.buffer()?))) {
                    Some((direct, (buffer, pad))) => {
                        *span = Some((direct, pad));
                        buffer
                    }
                    None => Vec::with_capacity(r.len),
                }
            })
            .collect();
        let (mut next, mut flying, mut unsubmitted) = (0usize, 0usize, 0usize);
        loop {
            while flying < limit {
                let (Some(request), Some(buffer)) = (requests.get(next), buffers.get_mut(next))
                else {
                    break;
                };
                let span = spans.get(next).copied().flatten();
                let target = match span {
                    Some((direct, pad)) => request.file.direct_fd().and_then(|fd| {
                        let place = buffer.spare_capacity_mut().get_mut(pad..)?;
                        Some((
                            fd,
                            place.as_mut_ptr().cast::<u8>(),
                            direct.span,
                            direct.start,
                        ))
                    }),
                    None => request
                        .file
                        .raw_fd()
                        .map(|fd| (fd, buffer.as_mut_ptr(), request.len, request.offset)),
                };
                let Some((fd, place, len, offset)) = target.and_then(|(fd, place, len, offset)| {
                    Some((fd, place, u32::try_from(len).ok()?, offset))
                }) else {
                    // Too large for one entry (no data block is): read here.
                    done(next, request.read_here());
                    next += 1;
                    continue;
                };
                let entry = opcode::Read::new(types::Fd(fd.as_raw_fd()), place, len)
                    .offset(offset)
                    .build()
                    .user_data(next as u64);
                // SAFETY: the kernel writes at most `len` bytes at `place`
                // in `buffer`'s heap allocation (its capacity is `len`, or
                // a direct span's `pad + span` and more) and
                // reads through `fd` until the completion of this entry.
                // `buffer` is not freed, resized or moved from before that
                // completion (the loop below takes it only after its
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
                unsubmitted += 1;
                if unsubmitted >= SUBMIT_EVERY && next < requests.len() && flying < limit {
                    match ring.submit() {
                        Ok(_) => unsubmitted = 0,
                        Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                        Err(_) => {
                            std::mem::forget(buffers);
                            return Err(Broken);
                        }
                    }
                }
            }
            if flying == 0 {
                if next >= requests.len() {
                    break;
                }
                continue;
            }
            match ring.submit_and_wait(1) {
                Ok(_) => unsubmitted = 0,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(_) => {
                    // Reads may still be in flight into these buffers.
                    std::mem::forget(buffers);
                    return Err(Broken);
                }
            }
            // Taken out of the queue first: `done` may take a while, and
            // the ring's later completions wait for the next round.
            let reaped: Vec<(u64, i32)> = ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (user_data, result) in reaped {
                let Ok(index) = usize::try_from(user_data) else {
                    continue;
                };
                let (Some(request), Some(buffer)) = (requests.get(index), buffers.get_mut(index))
                else {
                    continue;
                };
                flying = flying.saturating_sub(1);
                let read = usize::try_from(result).ok();
                let whole = match spans.get(index).copied().flatten() {
                    // A direct span is whole when it holds the wanted bytes
                    // (it ends short at the file's end).
                    Some((direct, pad)) => read
                        .filter(|&n| n >= direct.skip + request.len)
                        .and_then(|_| copied(buffer, pad + direct.skip, request.len)),
                    None => read
                        .filter(|&n| n == request.len)
                        .and_then(|_| filled(std::mem::take(buffer), request.len)),
                };
                done(
                    index,
                    match whole {
                        Some(bytes) => Ok(Bytes::from(bytes)),
                        // Short (the file was truncated) or failed: the same
                        // read once more, for the file's own error (or bytes
                        // a retry got after an interruption).
                        None => request.read_here(),
                    },
                );
            }
        }
        Ok(())
    }

    /// A copy of the `len` bytes at `at` in `buffer`'s allocation, once a
    /// completed direct read wrote them (the block cache keeps no padding);
    /// `None` if the allocation cannot hold them (never so).
    #[expect(
        unsafe_code,
        reason = "bytes the kernel wrote into a buffer's spare capacity are copied out"
    )]
    fn copied(buffer: &Vec<u8>, at: usize, len: usize) -> Option<Vec<u8>> {
        if at.checked_add(len)? > buffer.capacity() {
            return None;
        }
        // SAFETY: `at + len` is within the allocation (checked above), and
        // the completion reported the kernel wrote through at least
        // `at + len` bytes from the read's start, so they are initialised;
        // no read is in flight into this buffer any more.
        let bytes = unsafe { std::slice::from_raw_parts(buffer.as_ptr().add(at), len) };
        Some(bytes.to_vec())
    }

    /// `buffer` (empty, capacity at least `len`) once a completed read wrote
    /// `len` bytes into it; `None` if it cannot hold them (never so).
    #[expect(
        unsafe_code,
        reason = "a buffer the kernel filled is handed on without zeroing it first"
    )]
    fn filled(mut buffer: Vec<u8>, len: usize) -> Option<Vec<u8>> {
        if buffer.capacity() < len {
            return None;
        }
        // SAFETY: the kernel reported `len` bytes read into this buffer's
        // allocation (the read's completion result), so its first `len`
        // bytes are initialised; the capacity holds them (checked above).
        unsafe { buffer.set_len(len) };
        Some(buffer)
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

    /// A pool job's answer: its request's index and the read, `None` when
    /// the job was dropped unrun (a panicking read took its thread).
    type Answer = (usize, Option<Result<Bytes>>);

    /// Sends a job's answer exactly once: the read when the job ran, else
    /// `None` from its drop, so the batch never waits for a lost job.
    struct Reply {
        index: usize,
        sender: Option<mpsc::Sender<Answer>>,
    }

    impl Reply {
        fn send(mut self, read: Result<Bytes>) {
            if let Some(sender) = self.sender.take() {
                let _ = sender.send((self.index, Some(read)));
            }
        }
    }

    impl Drop for Reply {
        fn drop(&mut self) {
            if let Some(sender) = self.sender.take() {
                let _ = sender.send((self.index, None));
            }
        }
    }

    /// Reads the batch on the pool, at most `in_flight` at once, handing
    /// each result to `done` as it arrives (a read whose job was lost is
    /// redone here).
    pub(super) fn read_all(
        requests: &[ReadRequest],
        in_flight: usize,
        done: &mut dyn FnMut(usize, Result<Bytes>),
    ) {
        let Some(queue) = queue() else {
            for (index, request) in requests.iter().enumerate() {
                done(index, request.read_here());
            }
            return;
        };
        let limit = in_flight.clamp(1, THREADS);
        let (sender, answers) = mpsc::channel::<Answer>();
        let mut answer = |(index, read): Answer| {
            if let Some(request) = requests.get(index) {
                done(index, read.unwrap_or_else(|| request.read_here()));
            }
        };
        let mut flying = 0usize;
        for (index, request) in requests.iter().enumerate() {
            if flying >= limit {
                // Every job sends once (its `Reply`), and `sender` keeps
                // the channel open: this receives.
                if let Ok(reply) = answers.recv() {
                    flying -= 1;
                    answer(reply);
                }
            }
            let (file, offset, len, direct) = (
                Arc::clone(&request.file),
                request.offset,
                request.len,
                request.direct,
            );
            let reply = Reply {
                index,
                sender: Some(sender.clone()),
            };
            let job: Job = Box::new(move || {
                reply.send(
                    ReadRequest {
                        file,
                        offset,
                        len,
                        direct,
                    }
                    .read_here(),
                );
            });
            flying += 1;
            if let Err(mpsc::SendError(job)) = queue.send(job) {
                // Every pool thread is gone: the read runs here.
                job();
            }
        }
        drop(sender);
        for reply in answers.iter().take(flying) {
            answer(reply);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::OsFileSystem;

    /// Every result in request order; each request answered exactly once.
    fn read_collected(
        requests: &[ReadRequest],
        in_flight: usize,
        uring: bool,
    ) -> (Vec<Result<Bytes>>, IoPath) {
        let mut slots: Vec<Option<Result<Bytes>>> = requests.iter().map(|_| None).collect();
        let path = read_overlapped(requests, in_flight, uring, &mut |index, read| {
            let slot = &mut slots[index];
            assert!(slot.is_none(), "request {index} answered twice");
            *slot = Some(read);
        });
        let results = slots
            .into_iter()
            .map(|s| s.expect("every request answered"))
            .collect();
        (results, path)
    }

    fn requests_over(path: &std::path::Path, count: usize) -> Vec<ReadRequest> {
        let file = OsFileSystem::shared().open_read(path).unwrap();
        // Every other request past the page cache, where the file system
        // allows it (tmpfs does not: those read through it).
        let direct = file.direct_fd().is_some();
        (0..count)
            .map(|i| ReadRequest {
                file: Arc::clone(&file),
                offset: ((i * 7919) % 1000) as u64 * 16,
                len: 16 + i % 5,
                direct: direct && i % 2 == 0,
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
            let (results, path_taken) = read_collected(&requests, in_flight, uring);
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
            let (results, _) = read_collected(&requests, 8, uring);
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
