//! [`WalWriter`]: appends records to one log file, syncs them, and ends a
//! cleanly closed log with its close record.
//!
//! Owns: the order of writes to a log file — the header synced before any
//! record, each record in one `write` call, nothing after the close record.
//! Must never: append after a failed append or sync (the tail is then
//! uncertain, and a record after it would turn a torn tail into corruption
//! in the middle of the log), or after the close record.

use std::path::{Path, PathBuf};

use super::format::{
    encode_close_record, encode_file_header, record_header, FILE_HEADER_LEN, MAX_RECORD_HEADER_LEN,
};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};

/// Scratch buffers above this size are released after use rather than kept.
const KEEP_SCRATCH_BYTES: usize = 1 << 20;

/// Appends records to one log file.
pub struct WalWriter {
    file: Box<dyn WritableFile>,
    path: PathBuf,
    log_number: u64,
    bytes_written: u64,
    scratch: Vec<u8>,
    /// Set after a failed append or sync: the file may end in a partial
    /// record, and a record appended after it would turn a torn tail into
    /// corruption in the middle of the log.
    failed: bool,
    /// Records appended so far.
    records: u64,
    /// Set once the close record is written: nothing may follow it.
    closed: bool,
}

impl std::fmt::Debug for WalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WalWriter")
            .field("path", &self.path)
            .field("log_number", &self.log_number)
            .field("bytes_written", &self.bytes_written)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl WalWriter {
    /// Creates (truncating) the log file at `path`, writes its header and
    /// syncs it. The caller syncs the directory so the file's name is durable.
    pub fn create(fs: &dyn FileSystem, path: &Path, log_number: u64) -> Result<WalWriter> {
        let mut file = fs.create(path)?;
        file.append(&encode_file_header(log_number))?;
        file.sync()?;
        Ok(WalWriter {
            file,
            path: path.to_path_buf(),
            log_number,
            bytes_written: FILE_HEADER_LEN as u64,
            scratch: Vec::new(),
            failed: false,
            records: 0,
            closed: false,
        })
    }

    /// A writer with no file that refuses every append, sync and close
    /// (`ReadOnly`): the log of a database opened read-only, which writes
    /// nothing. Creates nothing.
    pub(crate) fn refusing(path: &Path, log_number: u64) -> WalWriter {
        WalWriter {
            file: Box::new(NoFile),
            path: path.to_path_buf(),
            log_number,
            bytes_written: 0,
            scratch: Vec::new(),
            failed: true,
            records: 0,
            closed: false,
        }
    }

    /// Appends one record with one write call, so the operating system holds
    /// all of it or a prefix of it. Not durable until [`WalWriter::sync`].
    /// The tests' short form of [`WalWriter::append_with`].
    #[cfg(test)]
    pub fn append(&mut self, payload: &[u8]) -> Result<()> {
        self.append_with(|out| out.extend_from_slice(payload))
    }

    /// Appends one record whose payload `write_payload` appends to the
    /// buffer it is handed, with one write call, so the operating system
    /// holds all of it or a prefix of it. Not durable until
    /// [`WalWriter::sync`]. The payload is built in place behind its header (no copy, and no
    /// allocation once the buffer has grown to the usual record size).
    ///
    /// `InvalidArgument` (the log unchanged) when the payload is longer
    /// than [`MAX_PAYLOAD_LEN`].
    pub fn append_with(&mut self, write_payload: impl FnOnce(&mut Vec<u8>)) -> Result<()> {
        self.check_usable()?;
        // The payload is built after room for the longest header; the
        // header, once its length is known, goes right before the payload
        // and the record is written from there.
        self.scratch.clear();
        self.scratch.resize(MAX_RECORD_HEADER_LEN, 0);
        write_payload(&mut self.scratch);
        let payload = self
            .scratch
            .get(MAX_RECORD_HEADER_LEN..)
            .unwrap_or_default();
        let result = record_header(&[], payload).and_then(|header| {
            let header = header.as_slice();
            // The header is at most MAX_RECORD_HEADER_LEN bytes, the room
            // left before the payload; the log is unchanged if it were not.
            let record = MAX_RECORD_HEADER_LEN
                .checked_sub(header.len())
                .and_then(|start| self.scratch.get_mut(start..))
                .ok_or_else(|| Error::invalid("a log record header outgrew its room"))?;
            let (slot, _) = record
                .split_at_mut_checked(header.len())
                .ok_or_else(|| Error::invalid("a log record header outgrew its room"))?;
            slot.copy_from_slice(header);
            self.file.append(record)?;
            Ok(record.len())
        });
        if self.scratch.capacity() > KEEP_SCRATCH_BYTES {
            self.scratch = Vec::new();
        }
        match result {
            Ok(record_len) => {
                self.bytes_written += record_len as u64;
                self.records += 1;
                Ok(())
            }
            Err(e @ Error::InvalidArgument(_)) => Err(e),
            Err(e) => {
                self.failed = true;
                Err(e)
            }
        }
    }

    /// Makes every appended record durable (fdatasync).
    pub fn sync(&mut self) -> Result<()> {
        self.check_usable()?;
        // After a failed fsync the kernel may have dropped the dirty pages
        // and cleared the error; a later "successful" sync would lie.
        self.file.sync().inspect_err(|_| self.failed = true)
    }

    /// Ends the log after a clean close: appends the close record and syncs.
    /// Nothing can be appended after it; a failed close leaves the log as a
    /// crash would (replay then allows a torn tail).
    pub fn close(&mut self) -> Result<()> {
        self.check_usable()?;
        self.closed = true;
        let record = encode_close_record(self.records, self.bytes_written);
        let written = self.file.append(&record).and_then(|()| self.file.sync());
        if written.is_err() {
            self.failed = true;
        }
        written
    }

    /// Bytes in the file so far, header included.
    pub fn bytes_written(&self) -> u64 {
        self.bytes_written
    }

    /// The log number written in the header.
    pub fn log_number(&self) -> u64 {
        self.log_number
    }

    fn check_usable(&self) -> Result<()> {
        if self.closed {
            return Err(Error::Closed);
        }
        if self.failed {
            return Err(Error::ReadOnly {
                cause: Box::new(Error::io(
                    &self.path,
                    std::io::Error::other("an earlier write failed; the log's tail is uncertain"),
                )),
            });
        }
        Ok(())
    }
}

/// The file behind [`WalWriter::refusing`]: never written (the writer's
/// `failed` flag refuses first); refuses anyway.
struct NoFile;

impl WritableFile for NoFile {
    fn append(&mut self, _data: &[u8]) -> Result<()> {
        Err(Error::invalid("a read-only database has no log to write"))
    }

    fn sync(&mut self) -> Result<()> {
        Err(Error::invalid("a read-only database has no log to write"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::crc32_of;
    use crate::fs::OsFileSystem;
    use crate::wal::testing::*;
    use crate::wal::*;

    #[test]
    fn writer_output_replays() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("000007.wal");
        let fs = OsFileSystem;
        let mut w = WalWriter::create(&fs, &path, 7).unwrap();
        // Both ways of appending write the same record.
        w.append(SAMPLE[0]).unwrap();
        w.append_with(|out| out.extend_from_slice(SAMPLE[1]))
            .unwrap();
        w.append_with(|out| {
            let (a, b) = SAMPLE[2].split_at(5);
            out.extend_from_slice(a);
            out.extend_from_slice(b);
        })
        .unwrap();
        w.sync().unwrap();
        assert_eq!(w.log_number(), 7);
        let expected = log_bytes(7, &SAMPLE);
        assert_eq!(w.bytes_written(), expected.len() as u64);
        drop(w);
        let bytes = fs.read_all(&path).unwrap();
        assert_eq!(&bytes[..], &expected[..]);
        let r = replay(&bytes, "000007.wal").unwrap();
        assert_eq!(r.log_number, Some(7));
        assert_eq!(payloads(&r), SAMPLE);
        assert_eq!(r.torn_tail, None);
        let first_len = record_header_len(SAMPLE[0].len()) + SAMPLE[0].len();
        assert_eq!(first_len, 7 + 12);
        assert_eq!(r.records[1].offset, (FILE_HEADER_LEN + first_len) as u64);
        assert_eq!(r.valid_len(bytes.len()), bytes.len() as u64);
    }

    #[test]
    fn writer_refuses_to_continue_after_a_failed_append() {
        struct FailingFile(u32);
        impl WritableFile for FailingFile {
            fn append(&mut self, _: &[u8]) -> Result<()> {
                self.0 += 1;
                if self.0 == 3 {
                    Err(std::io::Error::other("disk full").into())
                } else {
                    Ok(())
                }
            }
            fn sync(&mut self) -> Result<()> {
                Ok(())
            }
        }
        let mut w = WalWriter {
            file: Box::new(FailingFile(0)),
            path: PathBuf::from("x.wal"),
            log_number: 1,
            bytes_written: 20,
            scratch: Vec::new(),
            failed: false,
            records: 0,
            closed: false,
        };
        w.append(b"a").unwrap();
        w.append(b"b").unwrap();
        assert!(matches!(w.append(b"c"), Err(Error::Io { .. })));
        assert!(matches!(w.append(b"d"), Err(Error::ReadOnly { .. })));
        assert!(matches!(w.sync(), Err(Error::ReadOnly { .. })));
    }

    #[test]
    fn a_closed_log_replays_as_closed_and_its_close_record_is_as_documented() {
        let log = closed_log(&SAMPLE);
        let open_part = log_bytes(3, &SAMPLE);
        assert_eq!(log.len(), open_part.len() + CLOSE_RECORD_LEN);
        let close = &log[open_part.len()..];
        assert_eq!(close.len(), 27);
        assert_eq!(&close[..2], &documented_check(b"close", &[20]));
        assert_eq!(close[2], 20);
        assert_eq!(&close[3..7], &crc32_of(&[&[20], &close[7..]]).to_le_bytes());
        assert_eq!(&close[7..15], &3u64.to_le_bytes());
        assert_eq!(&close[15..23], &(open_part.len() as u64).to_le_bytes());
        assert_eq!(&close[23..], b"SEND");
        let r = replay(&log, "x.wal").unwrap();
        assert_eq!(payloads(&r), SAMPLE);
        assert!(r.closed_cleanly && r.torn_tail.is_none());
        // An empty log closes too.
        let empty = closed_log(&[]);
        let r = replay(&empty, "x.wal").unwrap();
        assert!(r.closed_cleanly && r.records.is_empty());
        // An open log is not closed.
        assert!(!replay(&open_part, "x.wal").unwrap().closed_cleanly);
    }
}
