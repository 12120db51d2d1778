//! Recycled buffers for data blocks read from files.
//!
//! A get that misses the block cache reads a block (about 4 KiB) into a
//! buffer of its own, and the block cache, full, evicts another block of
//! the same size in the same call: with the system allocator each such get
//! paid a large-chunk `malloc` and `free` (about 7% of an in-memory random
//! get's time). Here a block's bytes own their buffer through
//! [`Bytes::from_owner`], and the last reference to go hands it back to a
//! small per-thread pool the next read takes it from.
//!
//! Owns: the pool ([`take`]) and [`into_bytes`], the `Bytes` that give
//! their buffer back.
//! Must never: hand out a buffer another `Bytes` still reads (a buffer
//! returns only when its owner drops, after the last reference), take a
//! lock, keep more than [`POOLED`] buffers per thread, or keep one much
//! larger than the block it is reused for (the block cache charges a
//! block's length, so the slack of a reused buffer is bounded: see
//! [`fits`]).

use std::cell::RefCell;

use bytes::Bytes;

/// Buffers a thread keeps for its next reads: a get evicts about one block
/// per block it reads, so a handful suffice; more would only hold memory.
const POOLED: usize = 16;

/// The largest buffer kept (larger blocks are rare: values of many KiB).
const MAX_POOLED_CAPACITY: usize = 64 << 10;

thread_local! {
    /// This thread's free buffers.
    static FREE: RefCell<Vec<Vec<u8>>> = const { RefCell::new(Vec::new()) };
}

/// True when a buffer of `capacity` bytes may hold a block of `len` bytes
/// without wasting more than about a quarter of it.
fn fits(capacity: usize, len: usize) -> bool {
    capacity >= len && capacity - len <= len / 4 + 256
}

/// An empty buffer with room for `len` bytes: a recycled one when this
/// thread has one that [`fits`], else a new one.
pub(crate) fn take(len: usize) -> Vec<u8> {
    let recycled = FREE
        .try_with(|free| {
            let mut free = free.try_borrow_mut().ok()?;
            let at = free.iter().rposition(|b| fits(b.capacity(), len))?;
            Some(free.swap_remove(at))
        })
        .ok()
        .flatten();
    match recycled {
        Some(mut buffer) => {
            buffer.clear();
            buffer
        }
        None => Vec::with_capacity(len),
    }
}

/// Puts `buffer` in this thread's pool when it has room (else frees it).
fn give_back(buffer: Vec<u8>) {
    if buffer.capacity() > MAX_POOLED_CAPACITY || buffer.capacity() == 0 {
        return;
    }
    // A thread being torn down, or a pool borrowed by this very thread
    // (never today), simply frees the buffer.
    let _ = FREE.try_with(|free| {
        if let Ok(mut free) = free.try_borrow_mut() {
            if free.len() < POOLED {
                free.push(buffer);
            }
        }
    });
}

/// A buffer that returns to the pool of the thread that drops it.
struct Recycled(Vec<u8>);

impl AsRef<[u8]> for Recycled {
    fn as_ref(&self) -> &[u8] {
        &self.0
    }
}

impl Drop for Recycled {
    fn drop(&mut self) {
        give_back(std::mem::take(&mut self.0));
    }
}

/// `buffer`'s bytes as `Bytes` that give the buffer back to a pool when
/// the last reference to them is dropped.
pub(crate) fn into_bytes(buffer: Vec<u8>) -> Bytes {
    Bytes::from_owner(Recycled(buffer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dropped_block_buffer_is_taken_again_and_never_while_shared() {
        // Empty this thread's pool first (tests share threads).
        while FREE.with(|f| f.borrow_mut().pop()).is_some() {}
        let mut buffer = take(4000);
        buffer.extend_from_slice(&[7u8; 4000]);
        let address = buffer.as_ptr();
        let bytes = into_bytes(buffer);
        let slice = bytes.slice(10..20);
        drop(bytes);
        // Still read through `slice`: not back yet.
        let other = take(4000);
        assert_ne!(other.as_ptr(), address);
        assert_eq!(&slice[..], &[7u8; 10]);
        drop(slice);
        let again = take(3900);
        assert_eq!(again.as_ptr(), address);
        assert!(again.is_empty());
        // Too large for a small block: not taken for it.
        give_back(again);
        let small = take(100);
        assert_ne!(small.as_ptr(), address);
    }

    #[test]
    fn the_pool_keeps_a_bounded_number_of_buffers() {
        for _ in 0..POOLED * 3 {
            give_back(Vec::with_capacity(4096));
        }
        assert!(FREE.with(|f| f.borrow().len()) <= POOLED);
        give_back(Vec::with_capacity(MAX_POOLED_CAPACITY + 1));
        assert!(FREE.with(|f| f
            .borrow()
            .iter()
            .all(|b| b.capacity() <= MAX_POOLED_CAPACITY)));
    }
}
