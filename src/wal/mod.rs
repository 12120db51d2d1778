//! The write-ahead log: every acknowledged write is a record here before it
//! is in the memtable, and [`replay`] gives those records back after a crash.
//!
//! Owns: the log file layout documented in `docs/format.md` ("Write-ahead
//! log"), [`WalWriter`], [`replay`] and [`replay_batches`].
//! Must never: join pieces of different records, accept a record whose
//! checksum fails, or call damage before the tail a torn tail — a corrupt
//! record with intact data after it is `Corruption`, never silently dropped.
//!
//! ```text
//! file header (20 bytes)
//! 0   4  magic "SWAL"
//! 4   4  format version (u32 LE, 5: the only one read; any other is
//!        `Error::UnsupportedVersion`)
//! 8   8  log number (u64 LE; the number in the file name)
//! 16  4  crc32 of bytes 0..16
//! then records, back to back (7-11-byte header + payload)
//! 0   2  length check (u16 LE): bits 0..3 the length's byte count m - 1,
//!        bits 3..16 the low 13 bits of crc32 of the length's bytes
//! 2   m  payload length n (varint, shortest form, at most 32 bits)
//! 2+m 4  record crc: crc32 of (the length's bytes ‖ payload)
//! 6+m n  payload (a write batch: see `batch.rs`)
//! and, after a clean close, one close record: a record with a 20-byte
//! payload (27 bytes in all) whose length check is taken over ("close" ‖
//! the length's bytes)
//!     8  records before it (u64 LE)
//!     8  its own offset (u64 LE)
//!     4  "SEND"
//! ```
//!
//! # The close record
//!
//! [`WalWriter::close`] appends it and syncs when the database closes
//! cleanly; nothing follows it. It tells replay that no crash cut the log
//! short, so every damaged record in it — the last included — is
//! corruption, never a torn tail. Without it (after a crash) the rules
//! below apply. Only a close record cut short (a
//! prefix of the one expected there, then zeros) is itself a torn tail: the
//! process died while closing, and it holds no data.
//!
//! The length has a check of its own so that a flipped length bit in the
//! middle of the log is recognised as corruption, not mistaken for a record
//! torn at the end of the file (which would silently drop every later record).
//! It holds the length's byte count beside 13 bits of its CRC-32, so every
//! change of one byte of the length is caught.
//!
//! # What counts as a torn tail
//!
//! The writer puts each record down with one `write` call, so a crash leaves
//! a prefix of the bytes it appended, possibly followed by zeros (blocks the
//! file system allocated but never wrote). Replay therefore drops and reports
//! as a [`TornTail`], and only then:
//! - a file shorter than its header whose bytes agree with a header as far as
//!   they go (or are all zero), or a header that fails its checksum while it
//!   and everything after it are a header prefix followed by zeros: the
//!   creator syncs the header before any record is appended, so no
//!   acknowledged record can be lost with it;
//! - fewer bytes left than a record header takes, or only zero bytes left,
//!   where a record would start;
//! - a record whose (checksummed) length runs past the end of the file;
//! - a record whose length check or payload checksum fails (or whose length
//!   is malformed) while every byte after the part that failed is zero (in
//!   particular, a record ending exactly at the end of the file).
//!
//! Anything else that fails is `Error::Corruption` naming the file and offset.
//!
//! The log is laid out like `src/table/`: `format.rs` (constants, the file
//! header, record framing and the close record), `writer.rs`
//! ([`WalWriter`]), `replay.rs` ([`replay`], [`replay_batches`]) and
//! `salvage.rs` ([`salvage`], for `siftdb repair`), `follow.rs` (reading a
//! log another process is appending to, for secondary instances); this module re-exports
//! what other code uses, so its paths are `crate::wal::...`.

mod closed;
mod follow;
mod format;
mod mend;
mod replay;
mod salvage;
mod writer;

pub(crate) use closed::{closed_log_missing, cut_short};
pub(crate) use follow::{LogCursor, LogStop};
pub(crate) use format::header_version;
pub use format::{
    encode_close_record, encode_file_header, encode_record_into, record_header_len,
    CLOSE_RECORD_LEN, FILE_HEADER_LEN, FORMAT_VERSION, MAGIC,
};
pub use mend::mend;
pub use replay::{replay, replay_batches};
pub use salvage::{salvage, LostRecord};
pub use writer::WalWriter;

/// Helpers the unit tests of every part share.
#[cfg(test)]
mod testing {
    use super::replay::WalReplay;
    use super::*;
    use crate::batch::{RawBatch, WriteBatch};
    use crate::codec::crc32_of;
    use crate::error::Error;
    use crate::fs::{FileSystem, OsFileSystem};
    use crate::key::SeqNo;

    pub(crate) fn log_bytes(log_number: u64, payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = encode_file_header(log_number).to_vec();
        for p in payloads {
            encode_record_into(&mut out, p).unwrap();
        }
        out
    }

    pub(crate) fn payloads<'a>(replay: &WalReplay<'a>) -> Vec<&'a [u8]> {
        replay.records.iter().map(|r| r.payload).collect()
    }

    pub(crate) const SAMPLE: [&[u8]; 3] = [b"first record", b"", b"third, the last record"];

    pub(crate) fn closed_log(payloads: &[&[u8]]) -> Vec<u8> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000003.wal");
        let fs = OsFileSystem;
        let mut w = WalWriter::create(&fs, &path, 3).unwrap();
        for p in payloads {
            w.append(p).unwrap();
        }
        w.close().unwrap();
        assert!(matches!(w.append(b"after"), Err(Error::Closed)));
        fs.read_all(&path).unwrap().to_vec()
    }

    pub(crate) fn batch_payload(first: u64, keys: &[&str]) -> Vec<u8> {
        let mut b = WriteBatch::new();
        for k in keys {
            b.put(k, "v");
        }
        b.encode_record(SeqNo(first))
    }

    /// The documented length check, written out: bits 0..3 the varint's
    /// byte count minus one, bits 3..16 the low 13 bits of the CRC-32 of
    /// (`kind` ‖) its bytes.
    pub(crate) fn documented_check(kind: &[u8], varint: &[u8]) -> [u8; 2] {
        let crc = crc32_of(&[kind, varint]);
        let count = u32::try_from(varint.len() - 1).unwrap();
        let check = u16::try_from(((crc & 0x1fff) << 3) | count).unwrap();
        check.to_le_bytes()
    }
}
