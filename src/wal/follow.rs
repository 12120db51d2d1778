//! [`LogCursor`]: reading a log another process is still appending to, a
//! piece at a time (a secondary instance following its primary's log).
//!
//! Owns: where a follower stands in one log (offset, records read, closed),
//! and the verdict on the bytes after it: whole records, a record not
//! whole yet, the close record, or damage.
//! Must never: hand out a record before all of its bytes are there and its
//! checksum holds, or step past one that is not whole — the writer may
//! still be appending it (the rules of `wal`'s "What counts as a torn
//! tail": what is torn after a crash is what a live writer's reader sees
//! mid-write, and waits on); never call damage a record in progress.

use super::format::{
    close_record, parse_file_header, read_record, unsupported, HeaderFault, RecordRead,
    FILE_HEADER_LEN,
};
use crate::error::{Error, Result};

/// Where a follower stands in one log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct LogCursor {
    number: u64,
    /// Bytes read and taken: the header, then whole records.
    offset: u64,
    /// Records taken (what the close record counts).
    records: u64,
    /// The close record was read: the log will not grow again.
    closed: bool,
}

/// Why [`LogCursor::read`] stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LogStop {
    /// At the end of the bytes, between records.
    End,
    /// Before bytes that are not a whole record (or header) yet: a write in
    /// progress, or a crash's torn tail. Read again from the same offset.
    Partial(String),
    /// At the log's close record: nothing follows it.
    Closed,
}

impl LogCursor {
    /// The start of log `number`, nothing read.
    pub(crate) fn new(number: u64) -> LogCursor {
        LogCursor {
            number,
            offset: 0,
            records: 0,
            closed: false,
        }
    }

    /// Where the next read starts: bytes from here on are new.
    pub(crate) fn offset(&self) -> u64 {
        self.offset
    }

    /// Reads `bytes` (the file's bytes from [`LogCursor::offset`] on): each
    /// whole record's payload goes to `take`, in order, and the cursor
    /// moves past it once `take` returned `Ok` (an `Err` of `take` stops
    /// the read there and is returned: the record is read again next
    /// time). `file` names the log in errors. A damaged header or record
    /// with data after it is `Corruption`; a header of another format
    /// version is `UnsupportedVersion`.
    pub(crate) fn read(
        &mut self,
        bytes: &[u8],
        file: &str,
        mut take: impl FnMut(&[u8]) -> Result<()>,
    ) -> Result<LogStop> {
        if self.closed {
            return Ok(LogStop::Closed);
        }
        let mut rest = bytes;
        if self.offset == 0 {
            let Some((header, after)) = rest.split_at_checked(FILE_HEADER_LEN) else {
                return Ok(LogStop::Partial(format!(
                    "file header: {} of {FILE_HEADER_LEN} bytes",
                    rest.len()
                )));
            };
            match parse_file_header(header) {
                Ok(number) if number == self.number => {}
                Ok(number) => {
                    return Err(corrupt(file, format!("header names log {number}")));
                }
                Err(HeaderFault::Version(found)) => return Err(unsupported(file, found)),
                Err(HeaderFault::Damaged(reason)) => {
                    return Err(corrupt(file, format!("file header: {reason}")));
                }
            }
            self.offset = FILE_HEADER_LEN as u64;
            rest = after;
        }
        loop {
            if rest.is_empty() {
                return Ok(LogStop::End);
            }
            let expected_close = close_record(self.records, self.offset);
            if rest == expected_close.as_slice() {
                self.closed = true;
                self.offset += rest.len() as u64;
                return Ok(LogStop::Closed);
            }
            match read_record(rest) {
                RecordRead::Record { payload, len } => {
                    take(payload)?;
                    self.offset += len as u64;
                    self.records += 1;
                    rest = rest.get(len..).unwrap_or_default();
                }
                RecordRead::Torn(reason) => return Ok(LogStop::Partial(reason)),
                RecordRead::Close => {
                    return Err(corrupt(
                        file,
                        format!(
                            "close record at offset {} does not end the log after its {} records",
                            self.offset, self.records
                        ),
                    ))
                }
                RecordRead::Corrupt(reason) => {
                    return Err(corrupt(
                        file,
                        format!("record at offset {}: {reason}", self.offset),
                    ))
                }
            }
        }
    }
}

fn corrupt(file: &str, detail: impl std::fmt::Display) -> Error {
    Error::corruption(format!("write-ahead log {file}"), detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::testing::*;
    use crate::wal::{encode_close_record, encode_file_header, encode_record_into};

    /// Every payload taken from a log fed to a cursor `step` bytes at a
    /// time, as a follower sees a log being appended.
    fn follow_in_steps(log: &[u8], step: usize) -> (Vec<Vec<u8>>, LogStop) {
        let mut cursor = LogCursor::new(3);
        let mut taken = Vec::new();
        let mut visible = 0;
        loop {
            visible = (visible + step).min(log.len());
            let from = usize::try_from(cursor.offset()).unwrap();
            let stop = cursor
                .read(&log[from..visible], "000003.wal", |p| {
                    taken.push(p.to_vec());
                    Ok(())
                })
                .unwrap();
            if visible == log.len() {
                return (taken, stop);
            }
        }
    }

    #[test]
    fn a_log_read_while_it_grows_gives_each_record_once_and_whole() {
        let mut log = log_bytes(3, &SAMPLE);
        let records = SAMPLE.len() as u64;
        log.extend(encode_close_record(records, log.len() as u64));
        for step in [1, 2, 5, 7, 13, 64, log.len()] {
            let (taken, stop) = follow_in_steps(&log, step);
            let expected: Vec<Vec<u8>> = SAMPLE.iter().map(|p| p.to_vec()).collect();
            assert_eq!(taken, expected, "step {step}");
            assert_eq!(stop, LogStop::Closed, "step {step}");
        }
    }

    #[test]
    fn a_record_not_whole_yet_is_waited_on_not_taken() {
        let mut log = encode_file_header(3).to_vec();
        encode_record_into(&mut log, b"whole").unwrap();
        let whole = log.len();
        encode_record_into(&mut log, b"being written").unwrap();
        let mut cursor = LogCursor::new(3);
        let mut taken = Vec::new();
        let stop = cursor
            .read(&log[..log.len() - 3], "000003.wal", |p| {
                taken.push(p.to_vec());
                Ok(())
            })
            .unwrap();
        assert!(matches!(stop, LogStop::Partial(_)), "{stop:?}");
        assert_eq!(taken, vec![b"whole".to_vec()]);
        assert_eq!(cursor.offset(), whole as u64);
    }

    #[test]
    fn damage_with_data_after_it_is_corruption_and_a_failed_take_is_read_again() {
        let mut log = log_bytes(3, &SAMPLE);
        let mut cursor = LogCursor::new(3);
        let refused = cursor.read(&log, "000003.wal", |_| Err(Error::invalid("no")));
        assert!(refused.is_err());
        assert_eq!(cursor.offset(), FILE_HEADER_LEN as u64);
        // A payload byte of the first record flipped: intact records follow.
        log[FILE_HEADER_LEN + 8] ^= 1;
        let from = FILE_HEADER_LEN;
        let e = cursor
            .read(&log[from..], "000003.wal", |_| Ok(()))
            .unwrap_err();
        assert!(e.is_corruption(), "{e}");
        let other = LogCursor::new(4).read(&log, "000004.wal", |_| Ok(()));
        assert!(other.unwrap_err().is_corruption());
    }
}
