//! Overlapped block reads: many positioned reads in flight at once, so a
//! batch of lookups (`multi_get`) waits about one device latency for all
//! its data blocks instead of one latency per block.
//!
//! A [`ReadSession`] lives while its caller still finds reads to make: each
//! read is handed to the device as soon as it is submitted (the caller's
//! later work overlaps the device's work on the earlier reads), at most
//! `in_flight` at once (the rest queue and go as earlier ones complete),
//! and completions are handed back whenever the caller polls, while it
//! submits more. Two paths, chosen per read: an io_uring ring of the
//! calling thread (Linux, when the kernel and any seccomp filter allow it
//! and the file is a real file with a descriptor), else a small
//! process-wide pool of threads doing `read_exact_at`. A ring the kernel
//! refuses once is never asked for again in this process.
//!
//! Owns: the per-thread ring, the read pool, and matching each completion
//! to its read (each result is handed on with the ticket `submit` gave,
//! whatever order the reads finished in).
//! Must never: hand a read's bytes to another read; let the kernel write
//! into a buffer that was freed (a session waits for every read it queued
//! before it ends, even when dropped unfinished; a ring that fails leaks
//! its buffers rather than free them); hang when a read fails or its file
//! is truncated or removed (a short or failed read is redone with
//! `read_exact_at`, whose error names the file); or know anything about
//! tables (it reads bytes).

use std::sync::Arc;

use bytes::Bytes;

use crate::error::Result;
use crate::fs::RandomAccessFile;

/// One read of a batch: `len` bytes at `offset` of `file`.
#[derive(Clone)]
pub(crate) struct ReadRequest {
    pub(crate) file: Arc<dyn RandomAccessFile>,
    pub(crate) offset: u64,
    pub(crate) len: usize,
    /// Read past the page cache (`O_DIRECT`): set only for a file that
    /// reads so (`RandomAccessFile::reads_direct`).
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

/// Which path a batch of reads took (the tests' view of a session).
#[cfg(test)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IoPath {
    /// The calling thread's io_uring ring.
    Uring,
    /// Positioned reads on the read pool's threads.
    Pool,
}

/// Reads a session made, by path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct SessionReads {
    /// Through the calling thread's ring.
    pub(crate) uring: u64,
    /// On the read pool (or here, when it has no thread).
    pub(crate) pool: u64,
    /// Of either path, past the page cache.
    pub(crate) direct: u64,
}

/// Reads in flight while their caller goes on working: each
/// [`ReadSession::submit`] starts its read at once (or as soon as fewer
/// than `in_flight` are in flight), [`ReadSession::poll`] hands on the
/// reads completed so far without waiting, [`ReadSession::finish`] waits
/// for the rest. Every submitted read is answered exactly once, with its
/// ticket, by `poll` or `finish`. Dropped unfinished, it still waits for
/// the reads the kernel is writing (their results are dropped).
pub(crate) struct ReadSession {
    #[cfg(target_os = "linux")]
    ring: Option<uring::Session>,
    pool: pool::Session,
    next_ticket: usize,
    reads: SessionReads,
}

impl ReadSession {
    /// A session keeping at most `in_flight` reads (at least 1) in flight
    /// on each path, using this thread's ring when `allow_uring` and the
    /// kernel allows it.
    pub(crate) fn new(in_flight: usize, allow_uring: bool) -> ReadSession {
        #[cfg(not(target_os = "linux"))]
        let _ = allow_uring;
        ReadSession {
            #[cfg(target_os = "linux")]
            ring: allow_uring
                .then(|| uring::Session::begin(in_flight))
                .flatten(),
            pool: pool::Session::new(in_flight),
            next_ticket: 0,
            reads: SessionReads::default(),
        }
    }

    /// Starts `request` (or queues it behind the reads in flight) and
    /// returns its ticket: 0 for the session's first read, then 1, 2, ...
    pub(crate) fn submit(&mut self, request: ReadRequest) -> usize {
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.reads.direct += u64::from(request.direct);
        #[cfg(target_os = "linux")]
        if let Some(ring) = self.ring.as_mut() {
            if request.file.raw_fd().is_some() {
                self.reads.uring += 1;
                ring.submit(ticket, request);
                return ticket;
            }
        }
        self.reads.pool += 1;
        self.pool.submit(ticket, request);
        ticket
    }

    /// Hands each read completed so far to `done` (ticket, bytes or
    /// error), starting queued reads in their place; never waits.
    pub(crate) fn poll(&mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) {
        #[cfg(target_os = "linux")]
        if let Some(ring) = self.ring.as_mut() {
            ring.poll(done);
        }
        self.pool.poll(done);
    }

    /// Waits for every read still unanswered, handing each to `done` as
    /// it completes; returns how many reads the session made, by path.
    pub(crate) fn finish(mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) -> SessionReads {
        #[cfg(target_os = "linux")]
        if let Some(ring) = self.ring.as_mut() {
            ring.finish(done);
        }
        self.pool.finish(done);
        self.reads
    }
}

/// Reads every request, at most `in_flight` at once (at least 1), through
/// io_uring when `allow_uring` and the kernel allows it, else the pool,
/// handing each result to `done` with its index in `requests` as soon as
/// it completes (while later reads are still in flight). Every request is
/// answered exactly once. Returns the path of the first request.
#[cfg(test)]
pub(crate) fn read_overlapped(
    requests: &[ReadRequest],
    in_flight: usize,
    allow_uring: bool,
    done: &mut dyn FnMut(usize, Result<Bytes>),
) -> IoPath {
    let mut session = ReadSession::new(in_flight, allow_uring);
    for request in requests {
        session.submit(request.clone());
    }
    if session.finish(done).uring > 0 {
        IoPath::Uring
    } else {
        IoPath::Pool
    }
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
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;
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
        /// The calling thread's ring, made on its first session and lent
        /// to one session at a time.
        static RING: RefCell<Option<IoUring>> = const { RefCell::new(None) };
        /// A session of this thread holds the ring now: a second one (none
        /// is made while another lives) takes the pool.
        static LENT: Cell<bool> = const { Cell::new(false) };
    }

    /// With fewer reads than this in the kernel's hands, each read is told
    /// to it as soon as it is pushed (one `io_uring_enter` a read): the
    /// device would idle otherwise.
    const EAGER_BELOW: usize = 8;

    /// Reads pushed before the kernel is told of them once [`EAGER_BELOW`]
    /// are in its hands: an enter costs a system call and a kick of the
    /// virtio queue (a VM exit), which a group shares, but it prepares its
    /// reads (page cache, bio) before the first reaches the device, so a
    /// larger group holds its first reads back. Measured in
    /// docs/design.md, "The concurrent read path".
    const SUBMIT_EVERY: usize = 4;

    pub(super) fn available() -> bool {
        if LENT.with(Cell::get) {
            return true;
        }
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

    /// Where one read of a session stands.
    #[derive(Clone, Copy, PartialEq, Eq)]
    enum State {
        /// Queued behind `limit` reads in flight: not pushed yet.
        Queued,
        /// Pushed to the ring: the kernel may be writing its buffer.
        Flying,
        /// Answered (or given up with a leaked buffer).
        Answered,
    }

    /// One read of a session and the memory it reads into.
    struct Slot {
        ticket: usize,
        request: ReadRequest,
        /// Uninitialised: the kernel fills it, and only a read that filled
        /// it whole hands it on (see `filled`, `copied`).
        buffer: Vec<u8>,
        /// A direct read reads its aligned span into an aligned place of a
        /// larger buffer (`pad` bytes in), through the direct descriptor.
        span: Option<(DirectSpan, usize)>,
        state: State,
    }

    /// A session's hold on the thread's ring (see [`super::ReadSession`]).
    pub(super) struct Session {
        /// `None` once the ring failed: its reads are then made here.
        ring: Option<IoUring>,
        limit: usize,
        /// Every read of the session; a read's `user_data` is its index.
        /// The vector may move its slots, never their buffers' memory.
        slots: Vec<Slot>,
        queued: VecDeque<usize>,
        /// Pushed and not yet completed.
        flying: usize,
        /// Pushed but not yet told to the kernel.
        unsubmitted: usize,
        /// Answered without the ring (a read too large for one entry).
        ready: Vec<(usize, Result<Bytes>)>,
    }

    impl Session {
        /// The thread's ring, lent to a new session; `None` when the kernel
        /// refuses rings or another session of this thread holds it.
        pub(super) fn begin(in_flight: usize) -> Option<Session> {
            if LENT.with(Cell::get) {
                return None;
            }
            let ring = RING.with(|cell| {
                let mut slot = cell.try_borrow_mut().ok()?;
                ring_of(&mut slot)?;
                slot.take()
            })?;
            LENT.with(|lent| lent.set(true));
            Some(Session {
                ring: Some(ring),
                limit: in_flight.clamp(1, RING_ENTRIES as usize),
                slots: Vec::new(),
                queued: VecDeque::new(),
                flying: 0,
                unsubmitted: 0,
                ready: Vec::new(),
            })
        }

        pub(super) fn submit(&mut self, ticket: usize, request: ReadRequest) {
            let direct = request
                .direct
                .then(|| DirectSpan::of(request.len, request.offset))
                .flatten();
            let (buffer, span) = match direct.and_then(|d| Some((d, d.buffer()?))) {
                Some((direct, (buffer, pad))) => (buffer, Some((direct, pad))),
                None => (Vec::with_capacity(request.len), None),
            };
            self.queued.push_back(self.slots.len());
            self.slots.push(Slot {
                ticket,
                request,
                buffer,
                span,
                state: State::Queued,
            });
            self.push_queued();
        }

        pub(super) fn poll(&mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) {
            self.reap(done);
            self.push_queued();
            for (ticket, read) in self.ready.drain(..) {
                done(ticket, read);
            }
        }

        /// Waits for every read; a ring that fails on the way is dropped
        /// and the reads it had not answered are made here, one at a time.
        pub(super) fn finish(&mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) {
            loop {
                self.push_queued();
                for (ticket, read) in self.ready.drain(..) {
                    done(ticket, read);
                }
                if (self.flying == 0 && self.queued.is_empty()) || !self.wait_reaping(done) {
                    break;
                }
            }
            for slot in &mut self.slots {
                if slot.state != State::Answered {
                    slot.state = State::Answered;
                    done(slot.ticket, slot.request.read_here());
                }
            }
        }

        /// Pushes queued reads while fewer than `limit` fly, and tells the
        /// kernel of them at once while fewer than [`EAGER_BELOW`] are in
        /// its hands, else once [`SUBMIT_EVERY`] are pushed.
        #[expect(
            unsafe_code,
            reason = "io_uring reads into caller memory; see the SAFETY comment"
        )]
        fn push_queued(&mut self) {
            let Some(ring) = self.ring.as_mut() else {
                return;
            };
            while self.flying < self.limit {
                let Some(&index) = self.queued.front() else {
                    break;
                };
                let Some(slot) = self.slots.get_mut(index) else {
                    self.queued.pop_front();
                    continue;
                };
                let target = match slot.span {
                    Some((direct, pad)) => slot.request.file.direct_fd().and_then(|fd| {
                        let place = slot.buffer.spare_capacity_mut().get_mut(pad..)?;
                        Some((
                            fd,
                            place.as_mut_ptr().cast::<u8>(),
                            direct.span,
                            direct.start,
                        ))
                    }),
                    None => slot.request.file.raw_fd().map(|fd| {
                        (
                            fd,
                            slot.buffer.as_mut_ptr(),
                            slot.request.len,
                            slot.request.offset,
                        )
                    }),
                };
                let Some((fd, place, len, offset)) = target.and_then(|(fd, place, len, offset)| {
                    Some((fd, place, u32::try_from(len).ok()?, offset))
                }) else {
                    // Too large for one entry (no data block is): read here.
                    self.queued.pop_front();
                    slot.state = State::Answered;
                    self.ready.push((slot.ticket, slot.request.read_here()));
                    continue;
                };
                let entry = opcode::Read::new(types::Fd(fd.as_raw_fd()), place, len)
                    .offset(offset)
                    .build()
                    .user_data(index as u64);
                // SAFETY: the kernel writes at most `len` bytes at `place`
                // in `slot.buffer`'s heap allocation (its capacity is `len`,
                // or a direct span's `pad + span` and more) and reads
                // through `fd` until the completion of this entry. The
                // buffer is not freed, resized or taken before that
                // completion: only `reap` takes it, on the completion; a
                // failed ring leaks it (`break_ring`); and the session's
                // drop waits for every pushed read. Moving the slot (the
                // vector of slots grows) does not move the allocation. `fd`
                // belongs to `slot.request.file`, which the slot holds for
                // the whole session (the kernel also holds its own reference
                // to the file while the read is in flight).
                let pushed = unsafe { ring.submission().push(&entry) };
                if pushed.is_err() {
                    break;
                }
                self.queued.pop_front();
                slot.state = State::Flying;
                self.flying += 1;
                self.unsubmitted += 1;
            }
            let told = self.flying - self.unsubmitted;
            if self.unsubmitted > 0 && (told < EAGER_BELOW || self.unsubmitted >= SUBMIT_EVERY) {
                match ring.submit() {
                    Ok(_) => self.unsubmitted = 0,
                    // Told at the next chance (poll, finish).
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(_) => self.break_ring(),
                }
            }
        }

        /// Hands on every completion the ring holds now, without waiting.
        fn reap(&mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) {
            let Some(ring) = self.ring.as_mut() else {
                return;
            };
            // Taken out of the queue first: `done` may take a while, and
            // the ring's later completions wait for the next round.
            let reaped: Vec<(u64, i32)> = ring
                .completion()
                .map(|c| (c.user_data(), c.result()))
                .collect();
            for (user_data, result) in reaped {
                let Some(slot) = usize::try_from(user_data)
                    .ok()
                    .and_then(|index| self.slots.get_mut(index))
                else {
                    continue;
                };
                if slot.state != State::Flying {
                    continue;
                }
                slot.state = State::Answered;
                self.flying = self.flying.saturating_sub(1);
                let read = usize::try_from(result).ok();
                let len = slot.request.len;
                let whole = match slot.span {
                    // A direct span is whole when it holds the wanted bytes
                    // (it ends short at the file's end).
                    Some((direct, pad)) => read
                        .filter(|&n| n >= direct.skip + len)
                        .and_then(|_| copied(&slot.buffer, pad + direct.skip, len)),
                    None => read
                        .filter(|&n| n == len)
                        .and_then(|_| filled(std::mem::take(&mut slot.buffer), len)),
                };
                done(
                    slot.ticket,
                    match whole {
                        Some(bytes) => Ok(Bytes::from(bytes)),
                        // Short (the file was truncated) or failed: the same
                        // read once more, for the file's own error (or bytes
                        // a retry got after an interruption).
                        None => slot.request.read_here(),
                    },
                );
            }
        }

        /// Waits for at least one completion (an interrupted wait returns
        /// at once) and hands on every completion the ring holds; false
        /// when there is no ring any more (it failed now or before).
        fn wait_reaping(&mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) -> bool {
            let Some(ring) = self.ring.as_mut() else {
                return false;
            };
            match ring.submit_and_wait(1) {
                Ok(_) => self.unsubmitted = 0,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => {
                    self.break_ring();
                    return false;
                }
            }
            self.reap(done);
            true
        }

        /// The ring failed: reads may still be in flight into the buffers
        /// of flying slots, which are leaked; the ring is dropped (the
        /// thread makes a new one for its next session), and what was not
        /// answered is read here by `finish`.
        fn break_ring(&mut self) {
            for slot in &mut self.slots {
                if slot.state == State::Flying {
                    std::mem::forget(std::mem::take(&mut slot.buffer));
                    slot.state = State::Queued;
                }
            }
            self.queued.clear();
            self.flying = 0;
            self.ring = None;
        }
    }

    impl Drop for Session {
        /// Waits for the reads still flying (their results are dropped),
        /// then gives the ring back to the thread.
        fn drop(&mut self) {
            self.queued.clear();
            while self.flying > 0 && self.wait_reaping(&mut |_, _| {}) {}
            let ring = self.ring.take();
            RING.with(|cell| {
                if let Ok(mut slot) = cell.try_borrow_mut() {
                    *slot = ring;
                }
            });
            LENT.with(|lent| lent.set(false));
        }
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

    /// The two helpers' unsafe code without a ring (so Miri, which has no
    /// io_uring, runs them): the spare capacity written as a read would,
    /// then handed on or copied out.
    #[cfg(test)]
    mod buffer_tests {
        use super::{copied, filled};

        /// A buffer of capacity 64 whose first `len` bytes of spare
        /// capacity were written (as a completed read writes them).
        fn written(len: usize) -> Vec<u8> {
            let mut buffer = Vec::with_capacity(64);
            for (i, byte) in buffer.spare_capacity_mut().iter_mut().take(len).enumerate() {
                byte.write(u8::try_from(i).unwrap());
            }
            buffer
        }

        #[test]
        fn only_written_bytes_are_handed_on_or_copied() {
            let expected: Vec<u8> = (0..40).collect();
            assert_eq!(filled(written(40), 40), Some(expected.clone()));
            assert_eq!(filled(written(0), 0), Some(Vec::new()));
            assert_eq!(filled(Vec::new(), 1), None);
            let buffer = written(40);
            assert_eq!(copied(&buffer, 8, 32).as_deref(), Some(&expected[8..40]));
            assert_eq!(copied(&buffer, 0, 0).as_deref(), Some(&[][..]));
            assert_eq!(copied(&buffer, 60, 8), None);
        }
    }
}

mod pool {
    use std::collections::VecDeque;
    use std::sync::{mpsc, Arc, OnceLock};

    use bytes::Bytes;

    use super::ReadRequest;
    use crate::error::Result;

    /// Threads of the read pool: enough reads in flight to keep a disk's
    /// queue busy (its throughput grows to about 32 in flight), few enough
    /// to cost little while they wait.
    const THREADS: usize = 16;

    type Job = Box<dyn FnOnce() + Send>;

    /// Where sessions queue their reads; `None` when no thread could start.
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

    /// A pool job's answer: its read's ticket and the read, `None` when
    /// the job was dropped unrun (a panicking read took its thread).
    type Answer = (usize, Option<Result<Bytes>>);

    /// Sends a job's answer exactly once: the read when the job ran, else
    /// `None` from its drop, so the session never waits for a lost job.
    struct Reply {
        ticket: usize,
        sender: Option<mpsc::Sender<Answer>>,
    }

    impl Reply {
        fn send(mut self, read: Result<Bytes>) {
            if let Some(sender) = self.sender.take() {
                let _ = sender.send((self.ticket, Some(read)));
            }
        }
    }

    impl Drop for Reply {
        fn drop(&mut self) {
            if let Some(sender) = self.sender.take() {
                let _ = sender.send((self.ticket, None));
            }
        }
    }

    /// A session's reads on the pool (see [`super::ReadSession`]); jobs own
    /// what they read, so a session dropped unfinished leaves nothing the
    /// pool could write into.
    pub(super) struct Session {
        limit: usize,
        queued: VecDeque<(usize, ReadRequest)>,
        /// Reads on the pool, by ticket (redone here if their job is lost).
        flying: Vec<(usize, ReadRequest)>,
        sender: mpsc::Sender<Answer>,
        answers: mpsc::Receiver<Answer>,
    }

    impl Session {
        pub(super) fn new(in_flight: usize) -> Session {
            let (sender, answers) = mpsc::channel::<Answer>();
            Session {
                limit: in_flight.clamp(1, THREADS),
                queued: VecDeque::new(),
                flying: Vec::new(),
                sender,
                answers,
            }
        }

        pub(super) fn submit(&mut self, ticket: usize, request: ReadRequest) {
            self.queued.push_back((ticket, request));
            self.start_queued();
        }

        pub(super) fn poll(&mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) {
            while let Ok(answer) = self.answers.try_recv() {
                self.answer(answer, done);
            }
            self.start_queued();
        }

        pub(super) fn finish(&mut self, done: &mut dyn FnMut(usize, Result<Bytes>)) {
            loop {
                self.start_queued();
                if self.flying.is_empty() {
                    break;
                }
                // Every job sends once (its `Reply`), and `self.sender`
                // keeps the channel open: this receives.
                match self.answers.recv() {
                    Ok(answer) => self.answer(answer, done),
                    Err(_) => break,
                }
            }
            // Without a pool thread the reads were answered as they came
            // (see `start_queued`); nothing is left here.
            for (ticket, request) in self.flying.drain(..) {
                done(ticket, request.read_here());
            }
        }

        fn answer(&mut self, (ticket, read): Answer, done: &mut dyn FnMut(usize, Result<Bytes>)) {
            let Some(at) = self.flying.iter().position(|&(t, _)| t == ticket) else {
                return;
            };
            let (_, request) = self.flying.swap_remove(at);
            done(ticket, read.unwrap_or_else(|| request.read_here()));
        }

        fn start_queued(&mut self) {
            while self.flying.len() < self.limit {
                let Some((ticket, request)) = self.queued.pop_front() else {
                    break;
                };
                let (file, offset, len, direct) = (
                    Arc::clone(&request.file),
                    request.offset,
                    request.len,
                    request.direct,
                );
                let reply = Reply {
                    ticket,
                    sender: Some(self.sender.clone()),
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
                self.flying.push((ticket, request));
                match queue() {
                    Some(queue) => {
                        if let Err(mpsc::SendError(job)) = queue.send(job) {
                            // Every pool thread is gone: the read runs here.
                            job();
                        }
                    }
                    // No pool thread could start: the read runs here.
                    None => job(),
                }
            }
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
        let direct = file.reads_direct();
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

    #[test]
    fn a_session_dropped_with_reads_in_flight_waits_and_lends_the_ring_again() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..20_000u32).map(|i| (i * 13 % 241) as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        for _ in 0..3 {
            let mut session = ReadSession::new(8, true);
            for request in requests_over(&path, 50) {
                session.submit(request);
            }
            drop(session);
        }
        // The ring went back to the thread: the next session takes it.
        let (results, path_taken) = read_collected(&requests_over(&path, 20), 4, true);
        if io_uring_available() {
            assert_eq!(path_taken, IoPath::Uring);
        }
        assert!(results.into_iter().all(|r| r.is_ok()));
    }

    #[test]
    fn a_session_made_while_another_lives_reads_on_the_pool() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, vec![5u8; 20_000]).unwrap();
        let mut outer = ReadSession::new(8, true);
        let first = outer.submit(requests_over(&path, 1).remove(0));
        let (results, path_taken) = read_collected(&requests_over(&path, 10), 4, true);
        assert_eq!(path_taken, IoPath::Pool);
        assert!(results.into_iter().all(|r| r.is_ok()));
        let mut answered = Vec::new();
        outer.poll(&mut |ticket, read| answered.push((ticket, read.is_ok())));
        let reads = outer.finish(&mut |ticket, read| answered.push((ticket, read.is_ok())));
        assert_eq!(answered, vec![(first, true)]);
        assert_eq!(reads.uring + reads.pool, 1);
    }
}
