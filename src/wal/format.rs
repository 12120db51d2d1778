//! The log's bytes: its constants, the file header, the record framing
//! (a 16-bit length check, a varint length, a record CRC, the payload) and
//! the close record, written and read. Layout in `docs/format.md`
//! ("Write-ahead log") and the module docs of `wal`.
//!
//! Owns: every constant of the format, [`encode_file_header`],
//! [`encode_record_into`], [`encode_close_record`], and the decoding of one
//! file header (`parse_file_header`) and one record (`read_record`), which
//! replay and salvage share.
//! Must never: panic on any bytes, take a length from a header before its
//! check holds, or read a header of another format version as this one's
//! (it is `Error::UnsupportedVersion`).

use std::path::PathBuf;

use crate::codec::{crc32_of, each_varint_byte, varint_len, ByteReader};
use crate::error::{Error, Result};

/// The four bytes every log file starts with.
pub const MAGIC: [u8; 4] = *b"SWAL";
/// The format version this code writes, and the only one it reads
/// (compact record headers: a varint length and a 16-bit length check;
/// batch payloads in varints, each operation naming its keyspace unless
/// it is the default one; range deletes, operation kind 2; a close record
/// after a clean close).
pub const FORMAT_VERSION: u32 = 6;
/// What [`crate::Error::UnsupportedVersion`] calls a log file.
pub const FILE_KIND: &str = "write-ahead log";
/// Bytes of the close record, header included (a 2-byte check, a 1-byte
/// length, a 4-byte CRC, the payload).
pub const CLOSE_RECORD_LEN: usize = 2 + 1 + 4 + CLOSE_PAYLOAD_LEN as usize;

/// Bytes of the close record's payload.
pub(super) const CLOSE_PAYLOAD_LEN: u32 = 20;
/// Hashed before the length in a close record's header crc, so no batch
/// record's header passes for one.
pub(super) const CLOSE_KIND: &[u8] = b"close";
/// The close record's last four bytes.
pub(super) const CLOSE_END: [u8; 4] = *b"SEND";
/// Bytes of the file header.
pub const FILE_HEADER_LEN: usize = 20;
/// The most bytes a record header takes: the check, the longest length
/// varint, the record CRC.
pub(super) const MAX_RECORD_HEADER_LEN: usize = 2 + MAX_LEN_BYTES + 4;
/// The most bytes of a length varint (a u32).
pub(super) const MAX_LEN_BYTES: usize = 5;
/// Where a record header's length check lies.
pub(super) const CHECK_AT: std::ops::Range<usize> = 0..2;
/// Where a record header's length varint lies, at most.
pub(super) const LEN_AT: std::ops::Range<usize> = 2..2 + MAX_LEN_BYTES;
/// The longest payload one record can carry.
pub const MAX_PAYLOAD_LEN: usize = u32::MAX as usize;

/// The 20-byte file header for log `log_number`.
pub fn encode_file_header(log_number: u64) -> [u8; FILE_HEADER_LEN] {
    let mut header = [0u8; FILE_HEADER_LEN];
    let fields = MAGIC
        .into_iter()
        .chain(FORMAT_VERSION.to_le_bytes())
        .chain(log_number.to_le_bytes());
    for (slot, byte) in header.iter_mut().zip(fields) {
        *slot = byte;
    }
    if let Some((body, crc)) = header.split_last_chunk_mut::<4>() {
        *crc = crc32_of(&[body]).to_le_bytes();
    }
    header
}

/// A record header as stored, its fields not yet checked.
pub(super) struct RecordHeader<'a> {
    /// The length field's bytes as stored: both checksums cover them.
    pub(super) len_bytes: &'a [u8],
    /// The payload length they say.
    pub(super) len: usize,
    /// The stored length check.
    pub(super) check: u32,
    /// The stored record CRC-32.
    pub(super) record_crc: u32,
    /// Bytes of the header.
    pub(super) header_len: usize,
}

/// Up to `N` bytes built on the stack: a record header to be written, or
/// the close record replay expects at every record boundary.
pub(super) struct StackBytes<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackBytes<N> {
    pub(super) fn new() -> Self {
        StackBytes {
            bytes: [0; N],
            len: 0,
        }
    }

    pub(super) fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    /// Appends `part`; callers size `N` for everything they push.
    pub(super) fn push(&mut self, part: &[u8]) {
        let end = self.len + part.len();
        if let Some(slot) = self.bytes.get_mut(self.len..end) {
            slot.copy_from_slice(part);
            self.len = end;
        }
    }
}

/// A record header built to be written.
pub(super) type RecordHeaderBytes = StackBytes<MAX_RECORD_HEADER_LEN>;
/// A close record.
pub(super) type CloseRecord = StackBytes<CLOSE_RECORD_LEN>;

pub(super) enum HeaderRead<'a> {
    Header(RecordHeader<'a>),
    /// The bytes end before the header does.
    Short,
    /// A length field no writer produces (a varint of another byte count
    /// than its check says, longer than needed, or above 32 bits): the
    /// reason, and how many bytes the header spans.
    Malformed(String, usize),
}

/// The record header at the start of `rest`.
pub(super) fn parse_header(rest: &[u8]) -> HeaderRead<'_> {
    let mut reader = ByteReader::new(rest, "log record header");
    let Ok(check) = reader.u16() else {
        return HeaderRead::Short;
    };
    let len_len = usize::from(check & 7) + 1;
    let header_len = 2 + len_len + 4;
    if len_len > MAX_LEN_BYTES {
        return HeaderRead::Malformed(
            format!("record length of {len_len} bytes (at most {MAX_LEN_BYTES})"),
            header_len,
        );
    }
    let Ok(len_bytes) = reader.take(len_len) else {
        return HeaderRead::Short;
    };
    let mut varint = ByteReader::new(len_bytes, "log record length");
    let len = match varint.varint(u64::from(u32::MAX)) {
        Ok(len) if varint.remaining() == 0 => len,
        Ok(_) => {
            return HeaderRead::Malformed(
                format!("record length shorter than the {len_len} bytes its check says"),
                header_len,
            )
        }
        Err(e) => return HeaderRead::Malformed(e.to_string(), header_len),
    };
    let (Ok(record_crc), Ok(len)) = (reader.u32(), usize::try_from(len)) else {
        return HeaderRead::Short;
    };
    HeaderRead::Header(RecordHeader {
        len_bytes,
        len,
        check: u32::from(check),
        record_crc,
        header_len,
    })
}

/// The length check of `len_bytes`, hashed after `kind` (empty for a
/// batch record, [`CLOSE_KIND`] for a close record): the varint's byte
/// count minus one in bits 0..3, the low 13 bits of the CRC-32 above.
pub(super) fn length_check(kind: &[u8], len_bytes: &[u8]) -> u32 {
    let crc = crc32_of(&[kind, len_bytes]);
    let count = u32::try_from(len_bytes.len().saturating_sub(1) & 7).unwrap_or(7);
    ((crc & 0x1fff) << 3) | count
}

/// The header of a record of kind `kind` holding `payload`.
/// `InvalidArgument` when the payload is longer than `MAX_PAYLOAD_LEN`.
pub(super) fn record_header(kind: &[u8], payload: &[u8]) -> Result<RecordHeaderBytes> {
    let len = u32::try_from(payload.len()).map_err(|_| {
        Error::invalid(format!(
            "log record of {} bytes exceeds the {MAX_PAYLOAD_LEN}-byte limit",
            payload.len()
        ))
    })?;
    let mut out = RecordHeaderBytes::new();
    let mut varint = StackBytes::<MAX_LEN_BYTES>::new();
    each_varint_byte(u64::from(len), |byte| varint.push(&[byte]));
    let len_bytes = varint.as_slice();
    let [check_low, check_high, ..] = length_check(kind, len_bytes).to_le_bytes();
    out.push(&[check_low, check_high]);
    out.push(len_bytes);
    out.push(&crc32_of(&[len_bytes, payload]).to_le_bytes());
    Ok(out)
}

/// The close record for a log of `records` records that ends at `offset`
/// (built on the stack: replay builds the one expected at every record
/// boundary).
pub(super) fn close_record(records: u64, offset: u64) -> CloseRecord {
    let mut payload = [0u8; CLOSE_PAYLOAD_LEN as usize];
    for (slot, byte) in payload.iter_mut().zip(
        records
            .to_le_bytes()
            .into_iter()
            .chain(offset.to_le_bytes())
            .chain(CLOSE_END),
    ) {
        *slot = byte;
    }
    let mut record = CloseRecord::new();
    // 20 bytes always fit the length field.
    if let Ok(header) = record_header(CLOSE_KIND, &payload) {
        record.push(header.as_slice());
        record.push(&payload);
    }
    record
}

/// The close record for a log of `records` records that ends at `offset`.
pub fn encode_close_record(records: u64, offset: u64) -> Vec<u8> {
    close_record(records, offset).as_slice().to_vec()
}

/// Bytes of the header of a record holding `payload_len` bytes.
pub fn record_header_len(payload_len: usize) -> usize {
    varint_len(payload_len as u64) + 6
}

/// Appends one record (header and payload) to `out`.
///
/// `InvalidArgument` when the payload is longer than `MAX_PAYLOAD_LEN`.
pub fn encode_record_into(out: &mut Vec<u8>, payload: &[u8]) -> Result<()> {
    let header = record_header(&[], payload)?;
    out.reserve(header.len + payload.len());
    out.extend_from_slice(header.as_slice());
    out.extend_from_slice(payload);
    Ok(())
}

pub(super) fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

/// Why a file header was not taken.
pub(super) enum HeaderFault {
    /// Its bytes are damaged (or not a log header): the reason.
    Damaged(String),
    /// A sound header of a format version this code does not read.
    Version(u32),
}

/// The log number of a sound file header of [`FORMAT_VERSION`].
pub(super) fn parse_file_header(header: &[u8]) -> std::result::Result<u64, HeaderFault> {
    let damaged = |e: Error| HeaderFault::Damaged(e.to_string());
    let mut reader = ByteReader::new(header, "log file header");
    let magic: [u8; 4] = reader.array().map_err(damaged)?;
    let version = reader.u32().map_err(damaged)?;
    let log_number = reader.u64().map_err(damaged)?;
    let stored = reader.u32().map_err(damaged)?;
    let covered = header.get(..16).unwrap_or_default();
    let actual = crc32_of(&[covered]);
    if stored != actual {
        return Err(HeaderFault::Damaged(format!(
            "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
        )));
    }
    if magic != MAGIC {
        return Err(HeaderFault::Damaged(format!("bad magic {magic:02x?}")));
    }
    if version != FORMAT_VERSION {
        return Err(HeaderFault::Version(version));
    }
    Ok(log_number)
}

/// The format version a checksum-sound log file header names, this
/// build's or another; `None` for a damaged header (`siftdb inspect`).
pub fn header_version(header: &[u8]) -> Option<u32> {
    match parse_file_header(header) {
        Ok(_) => Some(FORMAT_VERSION),
        Err(HeaderFault::Version(found)) => Some(found),
        Err(HeaderFault::Damaged(_)) => None,
    }
}

/// The error for a sound header of format version `found` in log `file`.
pub(super) fn unsupported(file: &str, found: u32) -> Error {
    Error::UnsupportedVersion {
        path: PathBuf::from(file),
        kind: FILE_KIND,
        found: u64::from(found),
        supported: u64::from(FORMAT_VERSION),
    }
}

pub(super) enum RecordRead<'a> {
    Record {
        payload: &'a [u8],
        len: usize,
    },
    /// An intact close record (not the one expected at this place).
    Close,
    Torn(String),
    Corrupt(String),
}

/// Reads the record at the start of `rest` (non-empty).
pub(super) fn read_record(rest: &[u8]) -> RecordRead<'_> {
    if all_zero(rest) {
        return RecordRead::Torn(format!("{} zero bytes", rest.len()));
    }
    let header = match parse_header(rest) {
        HeaderRead::Header(header) => header,
        HeaderRead::Short => {
            return RecordRead::Torn(format!("{} bytes, too few for a record header", rest.len()))
        }
        HeaderRead::Malformed(reason, header_len) => {
            return if all_zero(rest.get(header_len..).unwrap_or_default()) {
                RecordRead::Torn(reason)
            } else {
                RecordRead::Corrupt(reason)
            };
        }
    };
    let after_header = rest.get(header.header_len..).unwrap_or_default();
    let actual_check = length_check(&[], header.len_bytes);
    let is_close = header.check == length_check(CLOSE_KIND, header.len_bytes);
    if header.check != actual_check && !is_close {
        let reason = format!(
            "length checksum mismatch: stored {:#010x}, computed {actual_check:#010x}",
            header.check
        );
        return if all_zero(after_header) {
            RecordRead::Torn(reason)
        } else {
            RecordRead::Corrupt(reason)
        };
    }
    let len = header.len;
    let Some((payload, after_record)) = after_header.split_at_checked(len) else {
        return RecordRead::Torn(format!(
            "record declares {len} payload bytes, {} remain",
            after_header.len()
        ));
    };
    let record_crc = header.record_crc;
    let actual = crc32_of(&[header.len_bytes, payload]);
    if is_close {
        // Not a prefix of the expected close record (replay checked that
        // first), so not a crash while closing: damage.
        return if record_crc == actual {
            RecordRead::Close
        } else {
            RecordRead::Corrupt(format!(
                "damaged close record: checksum stored {record_crc:#010x}, computed {actual:#010x}"
            ))
        };
    }
    if record_crc != actual {
        let reason =
            format!("record checksum mismatch: stored {record_crc:#010x}, computed {actual:#010x}");
        return if all_zero(after_record) {
            RecordRead::Torn(reason)
        } else {
            RecordRead::Corrupt(reason)
        };
    }
    RecordRead::Record {
        payload,
        len: header.header_len + len,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::testing::*;

    #[test]
    fn record_layout_is_as_documented() {
        let long = [7u8; 200];
        let log = log_bytes(0x0102, &[b"xy", &long]);
        assert_eq!(&log[..4], b"SWAL");
        assert_eq!(&log[4..8], &[6, 0, 0, 0]);
        assert_eq!(&log[8..16], &[2, 1, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&log[16..20], &crc32_of(&[&log[..16]]).to_le_bytes());
        let rec = &log[20..29];
        assert_eq!(&rec[..2], &documented_check(b"", &[2]));
        assert_eq!(rec[2], 2);
        assert_eq!(&rec[3..7], &crc32_of(&[&[2], b"xy"]).to_le_bytes());
        assert_eq!(&rec[7..], b"xy");
        // 200 = 0xc8: the varint c8 01, two bytes (count bits 1).
        let rec = &log[29..];
        assert_eq!(&rec[..2], &documented_check(b"", &[0xc8, 0x01]));
        assert_eq!(rec[0] & 7, 1);
        assert_eq!(&rec[2..4], &[0xc8, 0x01]);
        assert_eq!(&rec[4..8], &crc32_of(&[&[0xc8, 0x01], &long]).to_le_bytes());
        assert_eq!(&rec[8..], &long);
        assert_eq!(record_header_len(200), 8);
    }

    /// The check catches every change of one byte of a length (1 to 5
    /// bytes) that keeps the byte's continuation bit; a change of that bit
    /// changes the varint's byte count, which the check also holds.
    #[test]
    fn every_one_byte_change_of_a_length_changes_its_check() {
        for n in 1..=MAX_LEN_BYTES {
            let varint: Vec<u8> = (0..n)
                .map(|i| {
                    if i + 1 < n {
                        0x80 | u8::try_from(i * 37).unwrap()
                    } else {
                        0x15
                    }
                })
                .collect();
            let stored = length_check(&[], &varint);
            for at in 0..n {
                for mask in 1..0x80u8 {
                    let mut changed = varint.clone();
                    changed[at] ^= mask;
                    let check = length_check(&[], &changed);
                    assert_ne!(check, stored, "n {n}, byte {at}, mask {mask:#x}");
                }
            }
        }
    }
}
