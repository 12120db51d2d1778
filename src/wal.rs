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
//! 4   4  format version (u32 LE, 4: the only one read; any other is
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

use std::path::{Path, PathBuf};

use crate::batch::{decode_record, DecodedBatch};
use crate::codec::{crc32_of, each_varint_byte, varint_len, ByteReader};
use crate::error::{Error, Result};
use crate::fs::{FileSystem, WritableFile};
use crate::key::SeqNo;

/// The four bytes every log file starts with.
pub const MAGIC: [u8; 4] = *b"SWAL";
/// The format version this code writes, and the only one it reads
/// (compact record headers: a varint length and a 16-bit length check;
/// batch payloads in varints; a close record after a clean close).
pub const FORMAT_VERSION: u32 = 4;
/// What [`crate::Error::UnsupportedVersion`] calls a log file.
pub const FILE_KIND: &str = "write-ahead log";
/// Bytes of the close record, header included (a 2-byte check, a 1-byte
/// length, a 4-byte CRC, the payload).
pub const CLOSE_RECORD_LEN: usize = 2 + 1 + 4 + CLOSE_PAYLOAD_LEN as usize;

/// Bytes of the close record's payload.
const CLOSE_PAYLOAD_LEN: u32 = 20;
/// Hashed before the length in a close record's header crc, so no batch
/// record's header passes for one.
const CLOSE_KIND: &[u8] = b"close";
/// The close record's last four bytes.
const CLOSE_END: [u8; 4] = *b"SEND";
/// Bytes of the file header.
pub const FILE_HEADER_LEN: usize = 20;
/// The most bytes a record header takes: the check, the longest length
/// varint, the record CRC.
const MAX_RECORD_HEADER_LEN: usize = 2 + MAX_LEN_BYTES + 4;
/// The most bytes of a length varint (a u32).
const MAX_LEN_BYTES: usize = 5;
/// Where a record header's length check lies.
const CHECK_AT: std::ops::Range<usize> = 0..2;
/// Where a record header's length varint lies, at most.
const LEN_AT: std::ops::Range<usize> = 2..2 + MAX_LEN_BYTES;
/// The longest payload one record can carry.
pub const MAX_PAYLOAD_LEN: usize = u32::MAX as usize;

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

/// The 20-byte file header for log `log_number`.
pub fn encode_file_header(log_number: u64) -> [u8; FILE_HEADER_LEN] {
    let mut header = [0u8; FILE_HEADER_LEN];
    let mut body = Vec::with_capacity(FILE_HEADER_LEN);
    body.extend_from_slice(&MAGIC);
    body.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    body.extend_from_slice(&log_number.to_le_bytes());
    let crc = crc32_of(&[&body]);
    body.extend_from_slice(&crc.to_le_bytes());
    header.copy_from_slice(&body);
    header
}

/// A record header as stored, its fields not yet checked.
struct RecordHeader<'a> {
    /// The length field's bytes as stored: both checksums cover them.
    len_bytes: &'a [u8],
    /// The payload length they say.
    len: usize,
    /// The stored length check.
    check: u32,
    /// The stored record CRC-32.
    record_crc: u32,
    /// Bytes of the header.
    header_len: usize,
}

/// Up to `N` bytes built on the stack: a record header to be written, or
/// the close record replay expects at every record boundary.
struct StackBytes<const N: usize> {
    bytes: [u8; N],
    len: usize,
}

impl<const N: usize> StackBytes<N> {
    fn new() -> Self {
        StackBytes {
            bytes: [0; N],
            len: 0,
        }
    }

    fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }

    /// Appends `part`; callers size `N` for everything they push.
    fn push(&mut self, part: &[u8]) {
        let end = self.len + part.len();
        if let Some(slot) = self.bytes.get_mut(self.len..end) {
            slot.copy_from_slice(part);
            self.len = end;
        }
    }
}

/// A record header built to be written.
type RecordHeaderBytes = StackBytes<MAX_RECORD_HEADER_LEN>;
/// A close record.
type CloseRecord = StackBytes<CLOSE_RECORD_LEN>;

enum HeaderRead<'a> {
    Header(RecordHeader<'a>),
    /// The bytes end before the header does.
    Short,
    /// A length field no writer produces (a varint of another byte count
    /// than its check says, longer than needed, or above 32 bits): the
    /// reason, and how many bytes the header spans.
    Malformed(String, usize),
}

/// The record header at the start of `rest`.
fn parse_header(rest: &[u8]) -> HeaderRead<'_> {
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
fn length_check(kind: &[u8], len_bytes: &[u8]) -> u32 {
    let crc = crc32_of(&[kind, len_bytes]);
    let count = u32::try_from(len_bytes.len().saturating_sub(1) & 7).unwrap_or(7);
    ((crc & 0x1fff) << 3) | count
}

/// The header of a record of kind `kind` holding `payload`.
/// `InvalidArgument` when the payload is longer than [`MAX_PAYLOAD_LEN`].
fn record_header(kind: &[u8], payload: &[u8]) -> Result<RecordHeaderBytes> {
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
fn close_record(records: u64, offset: u64) -> CloseRecord {
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
/// `InvalidArgument` when the payload is longer than [`MAX_PAYLOAD_LEN`].
pub fn encode_record_into(out: &mut Vec<u8>, payload: &[u8]) -> Result<()> {
    let header = record_header(&[], payload)?;
    out.reserve(header.len + payload.len());
    out.extend_from_slice(header.as_slice());
    out.extend_from_slice(payload);
    Ok(())
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
    pub fn append(&mut self, payload: &[u8]) -> Result<()> {
        self.append_with(|out| out.extend_from_slice(payload))
    }

    /// Appends one record whose payload `write_payload` appends to the
    /// buffer it is handed, with one write call, as [`WalWriter::append`]:
    /// the payload is built in place behind its header (no copy, and no
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
                let start = MAX_RECORD_HEADER_LEN - header.len();
                let record = self.scratch.get_mut(start..).unwrap_or_default();
                record
                    .get_mut(..header.len())
                    .unwrap_or_default()
                    .copy_from_slice(header);
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

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
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

/// A record that survived replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WalRecord<'a> {
    /// Offset of the record's header in the file.
    pub offset: u64,
    /// The payload, borrowed from the replayed bytes.
    pub payload: &'a [u8],
}

/// The end of a log that a crash cut short: dropped, and reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TornTail {
    /// Where the dropped bytes start (the valid log ends here).
    pub offset: u64,
    /// What was found there, for the report.
    pub reason: String,
}

/// What a log file held.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalReplay<'a> {
    /// The log number in the header; `None` when the header itself was torn
    /// (a crash while the log was being created: it holds no record).
    pub log_number: Option<u64>,
    /// Every intact record, in order.
    pub records: Vec<WalRecord<'a>>,
    /// The torn end, if the file had one.
    pub torn_tail: Option<TornTail>,
    /// The log ends with its close record: it was closed cleanly.
    pub closed_cleanly: bool,
}

impl WalReplay<'_> {
    /// Where the valid part of the log ends.
    pub fn valid_len(&self, file_len: usize) -> u64 {
        match &self.torn_tail {
            Some(torn) => torn.offset,
            None => file_len as u64,
        }
    }
}

fn corrupt(file: &str, detail: impl std::fmt::Display) -> Error {
    Error::corruption(format!("write-ahead log {file}"), detail)
}

fn all_zero(bytes: &[u8]) -> bool {
    bytes.iter().all(|&b| b == 0)
}

/// True when `header` (at most [`FILE_HEADER_LEN`] bytes) could be what a
/// crash left of a header being written: a prefix of a header, possibly
/// followed by zeros. Only magic and version can be compared; a complete
/// header whose checksum fails is not torn unless its last byte is zero.
fn could_be_torn_header(header: &[u8]) -> bool {
    let written = header
        .iter()
        .rposition(|&b| b != 0)
        .map_or(0, |last_non_zero| last_non_zero + 1);
    let kept = header.get(..written).unwrap_or_default();
    let mut fixed_part = [0u8; 8];
    let (magic, version) = fixed_part.split_at_mut(MAGIC.len());
    magic.copy_from_slice(&MAGIC);
    version.copy_from_slice(&FORMAT_VERSION.to_le_bytes());
    let compared = kept.len().min(fixed_part.len());
    written < FILE_HEADER_LEN && kept.get(..compared) == fixed_part.get(..compared)
}

/// True when `rest` is a prefix of `expected` followed only by zeros (and
/// not `expected` itself): what a crash leaves of a write of `expected`.
fn is_torn_write_of(rest: &[u8], expected: &[u8]) -> bool {
    let common = rest
        .iter()
        .zip(expected)
        .take_while(|(a, b)| a == b)
        .count();
    common < expected.len() && all_zero(rest.get(common..).unwrap_or_default())
}

/// Reads a log file's bytes: every intact record, and the torn tail if any.
/// `file` names the log in errors. See the module docs for the rules.
///
/// A sound header of another format version than [`FORMAT_VERSION`] is
/// [`Error::UnsupportedVersion`] whose path is `file` (a caller that knows
/// the directory puts the whole path in).
pub fn replay<'a>(bytes: &'a [u8], file: &str) -> Result<WalReplay<'a>> {
    let Some((header, body)) = bytes.split_at_checked(FILE_HEADER_LEN) else {
        if could_be_torn_header(bytes) {
            return Ok(WalReplay {
                log_number: None,
                records: Vec::new(),
                torn_tail: Some(TornTail {
                    offset: 0,
                    reason: format!(
                        "file header torn: {} of {FILE_HEADER_LEN} bytes",
                        bytes.len()
                    ),
                }),
                closed_cleanly: false,
            });
        }
        return Err(corrupt(
            file,
            format!("{}-byte file is not a log header", bytes.len()),
        ));
    };
    let log_number = match parse_file_header(header) {
        Ok(log_number) => log_number,
        Err(HeaderFault::Version(found)) => return Err(unsupported(file, found)),
        Err(HeaderFault::Damaged(reason)) => {
            if could_be_torn_header(header) && all_zero(body) {
                return Ok(WalReplay {
                    log_number: None,
                    records: Vec::new(),
                    torn_tail: Some(TornTail {
                        offset: 0,
                        reason: format!("file header torn: {reason}"),
                    }),
                    closed_cleanly: false,
                });
            }
            return Err(corrupt(file, format!("file header: {reason}")));
        }
    };
    let mut records = Vec::new();
    let mut pos = FILE_HEADER_LEN;
    let mut closed_cleanly = false;
    let torn_tail = loop {
        let Some(rest) = bytes.get(pos..) else {
            break None;
        };
        if rest.is_empty() {
            break None;
        }
        let close_record = close_record(records.len() as u64, pos as u64);
        let close_record = close_record.as_slice();
        if rest == close_record {
            closed_cleanly = true;
            break None;
        }
        if is_torn_write_of(rest, close_record) && !all_zero(rest) {
            break Some(TornTail {
                offset: pos as u64,
                reason: format!(
                    "close record cut short ({} of {} bytes): the process stopped while \
                     closing; no record is lost",
                    rest.iter().rposition(|&b| b != 0).map_or(0, |i| i + 1),
                    close_record.len()
                ),
            });
        }
        match read_record(rest) {
            RecordRead::Record { payload, len } => {
                records.push(WalRecord {
                    offset: pos as u64,
                    payload,
                });
                pos += len;
            }
            RecordRead::Close => {
                return Err(corrupt(
                    file,
                    format!(
                        "close record at offset {pos} does not end the log after its {} records \
                         (expected {})",
                        records.len(),
                        to_hex(close_record)
                    ),
                ))
            }
            RecordRead::Torn(reason) => {
                break Some(TornTail {
                    offset: pos as u64,
                    reason,
                })
            }
            RecordRead::Corrupt(reason) => {
                return Err(corrupt(file, format!("record at offset {pos}: {reason}")))
            }
        }
    };
    Ok(WalReplay {
        log_number: Some(log_number),
        records,
        torn_tail,
        closed_cleanly,
    })
}

fn to_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Why a file header was not taken.
enum HeaderFault {
    /// Its bytes are damaged (or not a log header): the reason.
    Damaged(String),
    /// A sound header of a format version this code does not read.
    Version(u32),
}

/// The log number of a sound file header of [`FORMAT_VERSION`].
fn parse_file_header(header: &[u8]) -> std::result::Result<u64, HeaderFault> {
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

/// The error for a sound header of format version `found` in log `file`.
fn unsupported(file: &str, found: u32) -> Error {
    Error::UnsupportedVersion {
        path: PathBuf::from(file),
        kind: FILE_KIND,
        found: u64::from(found),
        supported: u64::from(FORMAT_VERSION),
    }
}

enum RecordRead<'a> {
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
fn read_record(rest: &[u8]) -> RecordRead<'_> {
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

/// A log's records decoded as write batches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReplayedBatches<'a> {
    /// The log number in the header (`None` when the header was torn).
    pub log_number: Option<u64>,
    /// Each batch with the file offset of its record, in log order.
    pub batches: Vec<(u64, DecodedBatch<'a>)>,
    /// The largest sequence number in the log, if it holds any operation.
    pub last_seq: Option<SeqNo>,
    /// The torn end, if the file had one.
    pub torn_tail: Option<TornTail>,
    /// The log ends with its close record: it was closed cleanly.
    pub closed_cleanly: bool,
}

/// [`replay`], then decodes every record as a write batch.
///
/// A record that passed its checksum but is not a valid batch, or whose
/// sequence numbers do not increase strictly from the previous batch's, is
/// `Corruption` naming the file and the record's offset.
pub fn replay_batches<'a>(bytes: &'a [u8], file: &str) -> Result<ReplayedBatches<'a>> {
    let log = replay(bytes, file)?;
    let mut batches = Vec::with_capacity(log.records.len());
    let mut last_seq: Option<SeqNo> = None;
    for record in &log.records {
        let batch = decode_record(record.payload)
            .map_err(|e| corrupt(file, format!("record at offset {}: {e}", record.offset)))?;
        if let Some(batch_last) = batch.last_seq() {
            if let Some(previous) = last_seq.filter(|&previous| batch.first_seq <= previous) {
                return Err(corrupt(
                    file,
                    format!(
                        "record at offset {}: sequence {} does not follow {}",
                        record.offset, batch.first_seq.0, previous.0
                    ),
                ));
            }
            last_seq = Some(batch_last);
        }
        batches.push((record.offset, batch));
    }
    Ok(ReplayedBatches {
        log_number: log.log_number,
        batches,
        last_seq,
        torn_tail: log.torn_tail,
        closed_cleanly: log.closed_cleanly,
    })
}

/// A stretch of a damaged log that [`salvage`] gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostRecord {
    /// Where the lost bytes start.
    pub offset: u64,
    /// How many bytes were given up (one record when its length was
    /// readable, else everything up to the next record that could be
    /// trusted, or to the end).
    pub len: u64,
    /// What was wrong there.
    pub reason: String,
}

/// What [`salvage`] read of a log, damaged or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalSalvage<'a> {
    /// The log number in the header; `None` when the header is damaged.
    pub log_number: Option<u64>,
    /// Every record that passed both checksums and decodes as a write batch
    /// whose sequence numbers follow the previous one's, with its offset.
    pub batches: Vec<(u64, DecodedBatch<'a>)>,
    /// What was given up, in file order.
    pub lost: Vec<LostRecord>,
    /// The torn end a crash left (not counted as lost: no acknowledged
    /// record can be in it unless the log was closed cleanly — then it is
    /// in `lost`).
    pub torn_tail: Option<TornTail>,
    /// The log ends with a close record.
    pub closed_cleanly: bool,
}

/// The length of the record at the start of `rest` when its length check
/// vouches for it and the record fits: then a damaged payload can be
/// skipped exactly.
fn vouched_len(rest: &[u8]) -> Option<usize> {
    let HeaderRead::Header(header) = parse_header(rest) else {
        return None;
    };
    let len = header.header_len.checked_add(header.len)?;
    (header.check == length_check(&[], header.len_bytes) && len <= rest.len())
        .then_some(len)
}

/// One step of [`salvage`]'s walk.
enum Step<'a> {
    /// A record kept: its batch and length.
    Batch(DecodedBatch<'a>, usize),
    /// The log ends here: cleanly (`true`), or with a torn tail.
    End(bool, Option<String>),
    /// Damage: its reason, and the length to skip when it is known.
    Damage(String, Option<usize>),
}

fn step(rest: &[u8], after: Option<SeqNo>) -> Step<'_> {
    if rest.is_empty() {
        return Step::End(false, None);
    }
    match read_record(rest) {
        RecordRead::Record { payload, len } => {
            match decode_record(payload) {
                Ok(batch) if after.is_none_or(|a| batch.first_seq > a) => Step::Batch(batch, len),
                Ok(batch) => Step::Damage(
                    format!("sequence {} does not follow {:?}", batch.first_seq.0, after),
                    Some(len),
                ),
                Err(e) => Step::Damage(format!("not a write batch: {e}"), Some(len)),
            }
        }
        RecordRead::Close if rest.len() == CLOSE_RECORD_LEN => Step::End(true, None),
        RecordRead::Close => Step::Damage("close record before the end".to_string(), None),
        RecordRead::Torn(reason) => Step::End(false, Some(reason)),
        RecordRead::Corrupt(reason) => Step::Damage(reason, vouched_len(rest)),
    }
}

/// The record at the start of `rest` whose length check failed, found
/// whole after all when only its header was hit: either the stored length
/// is right (the length check itself was damaged), or one byte of the
/// length was (the length check then names the right length among those
/// one byte away) — in both cases the record checksum, which covers the
/// length and the payload, must hold. Returns the batch and the record's
/// length.
fn header_repaired(rest: &[u8], after: Option<SeqNo>) -> Option<(DecodedBatch<'_>, usize)> {
    let stored = rest.get(..MAX_RECORD_HEADER_LEN.min(rest.len()))?;
    let len_at = LEN_AT;
    let one_byte_off = CHECK_AT
        .chain(len_at.clone())
        .flat_map(|at| (0..=u8::MAX).map(move |byte| Some((at, byte))));
    std::iter::once(None)
        .chain(one_byte_off)
        .find_map(|change| {
            let mut bytes = [0u8; MAX_RECORD_HEADER_LEN];
            let head = bytes.get_mut(..stored.len())?;
            head.copy_from_slice(stored);
            if let Some((at, byte)) = change {
                let slot = head.get_mut(at)?;
                if *slot == byte {
                    return None;
                }
                *slot = byte;
            }
            let HeaderRead::Header(header) = parse_header(head) else {
                return None;
            };
            // A changed length byte must be the one the stored check names;
            // a changed check byte (or none) leaves the check unheeded.
            // (Only a byte of the length as parsed: a change past it would be
            // one of the record checksum's.)
            let len_span = len_at.start..len_at.start + header.len_bytes.len();
            if let Some((at, _)) = change.filter(|(at, _)| len_at.contains(at)) {
                if !len_span.contains(&at)
                    || header.check != length_check(&[], header.len_bytes)
                {
                    return None;
                }
            }
            let payload = rest.get(header.header_len..)?.get(..header.len)?;
            if crc32_of(&[header.len_bytes, payload]) != header.record_crc {
                return None;
            }
            let batch = decode_record(payload).ok()?;
            after
                .is_none_or(|a| batch.first_seq > a)
                .then_some((batch, header.header_len + header.len))
        })
}

/// Reads what can be read of a log: like [`replay`], but past damage. A
/// record whose payload fails its checksum (its length vouched for by the
/// header checksum) is skipped exactly, and the walk goes on after it; a
/// record whose header checksum fails is kept when its header can be
/// repaired (see `header_repaired`: the record checksum then proves it
/// whole). Otherwise where the next record starts is unknown, and the rest
/// of the log is given up rather than searched for something that looks
/// like a record (a log record stored inside a value would). What is
/// skipped is reported in `lost`. Never fails: a file with no readable
/// record gives none.
pub fn salvage(bytes: &[u8]) -> WalSalvage<'_> {
    let mut out = WalSalvage {
        log_number: None,
        batches: Vec::new(),
        lost: Vec::new(),
        torn_tail: None,
        closed_cleanly: false,
    };
    let (header, _) = bytes
        .split_at_checked(FILE_HEADER_LEN)
        .unwrap_or((bytes, &[]));
    match parse_file_header(header) {
        Ok(log_number) => out.log_number = Some(log_number),
        Err(_) if header.len() < FILE_HEADER_LEN || all_zero(bytes) => {
            out.torn_tail = Some(TornTail {
                offset: 0,
                reason: "file header torn".to_string(),
            });
            return out;
        }
        Err(fault) => {
            let reason = match fault {
                HeaderFault::Damaged(reason) => reason,
                HeaderFault::Version(found) => format!(
                    "format version {found} (this build reads version {FORMAT_VERSION} only)"
                ),
            };
            out.lost.push(LostRecord {
                offset: 0,
                len: FILE_HEADER_LEN as u64,
                reason: format!("file header: {reason}"),
            });
        }
    }
    let mut pos = FILE_HEADER_LEN;
    let mut last_seq: Option<SeqNo> = None;
    loop {
        let rest = bytes.get(pos..).unwrap_or_default();
        match step(rest, last_seq) {
            Step::Batch(batch, len) => {
                last_seq = batch.last_seq().or(last_seq);
                out.batches.push((pos as u64, batch));
                pos += len;
            }
            Step::End(clean, torn) => {
                out.closed_cleanly = clean;
                out.torn_tail = torn.map(|reason| TornTail {
                    offset: pos as u64,
                    reason,
                });
                break;
            }
            Step::Damage(reason, Some(len)) => {
                out.lost.push(LostRecord {
                    offset: pos as u64,
                    len: len as u64,
                    reason,
                });
                pos += len;
            }
            Step::Damage(reason, None) => {
                match header_repaired(rest, last_seq) {
                    Some((batch, len)) => {
                        last_seq = batch.last_seq().or(last_seq);
                        out.batches.push((pos as u64, batch));
                        pos += len;
                    }
                    None => {
                        // Where the next record starts is unknown: guessing
                        // could take bytes inside a value for a record.
                        out.lost.push(LostRecord {
                            offset: pos as u64,
                            len: rest.len() as u64,
                            reason: format!(
                                "{reason}; the records from here on cannot be delimited"
                            ),
                        });
                        break;
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::WriteBatch;
    use crate::fs::OsFileSystem;

    fn log_bytes(log_number: u64, payloads: &[&[u8]]) -> Vec<u8> {
        let mut out = encode_file_header(log_number).to_vec();
        for p in payloads {
            encode_record_into(&mut out, p).unwrap();
        }
        out
    }

    fn payloads<'a>(replay: &WalReplay<'a>) -> Vec<&'a [u8]> {
        replay.records.iter().map(|r| r.payload).collect()
    }

    const SAMPLE: [&[u8]; 3] = [b"first record", b"", b"third, the last record"];

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

    /// The documented length check, written out: bits 0..3 the varint's
    /// byte count minus one, bits 3..16 the low 13 bits of the CRC-32 of
    /// (`kind` ‖) its bytes.
    fn documented_check(kind: &[u8], varint: &[u8]) -> [u8; 2] {
        let crc = crc32_of(&[kind, varint]);
        let count = u32::try_from(varint.len() - 1).unwrap();
        let check = u16::try_from(((crc & 0x1fff) << 3) | count).unwrap();
        check.to_le_bytes()
    }

    #[test]
    fn record_layout_is_as_documented() {
        let long = [7u8; 200];
        let log = log_bytes(0x0102, &[b"xy", &long]);
        assert_eq!(&log[..4], b"SWAL");
        assert_eq!(&log[4..8], &[4, 0, 0, 0]);
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

    #[test]
    fn every_single_byte_flip_is_caught_or_a_torn_last_record() {
        let log = log_bytes(3, &SAMPLE);
        let last_start =
            log.len() - record_header_len(SAMPLE[2].len()) - SAMPLE[2].len();
        for i in 0..log.len() {
            for mask in [0x01u8, 0x80, 0xff, 0x5a] {
                let mut bad = log.clone();
                bad[i] ^= mask;
                match replay(&bad, "x.wal") {
                    Err(e) => {
                        assert!(e.is_corruption(), "{e}");
                        assert!(e.to_string().contains("x.wal"), "{e}");
                    }
                    Ok(r) => {
                        assert!(i >= last_start, "flip at {i} accepted: {r:?}");
                        assert_eq!(payloads(&r), &SAMPLE[..2], "flip at {i}");
                        assert_eq!(r.torn_tail.unwrap().offset, last_start as u64);
                    }
                }
            }
        }
    }

    #[test]
    fn every_truncation_gives_a_prefix_and_a_torn_tail() {
        let log = log_bytes(3, &SAMPLE);
        let mut boundaries = vec![FILE_HEADER_LEN];
        for p in SAMPLE {
            boundaries.push(
                boundaries.last().unwrap() + record_header_len(p.len()) + p.len(),
            );
        }
        for len in 0..=log.len() {
            let r = replay(&log[..len], "x.wal").unwrap();
            let complete = boundaries.iter().filter(|&&b| b <= len).count();
            let records = complete.saturating_sub(1);
            assert_eq!(payloads(&r), &SAMPLE[..records], "len {len}");
            if boundaries.contains(&len) {
                assert_eq!(r.torn_tail, None, "len {len}");
                assert_eq!(r.log_number, Some(3));
            } else {
                let torn = r.torn_tail.unwrap();
                let expected = if len < FILE_HEADER_LEN {
                    0
                } else {
                    boundaries[records]
                };
                assert_eq!(torn.offset, expected as u64, "len {len}");
            }
        }
    }

    #[test]
    fn zero_tail_is_torn_and_zeros_in_the_middle_are_corruption() {
        let mut log = log_bytes(3, &SAMPLE);
        let intact = log.len();
        log.extend_from_slice(&[0u8; 4096]);
        let r = replay(&log, "x.wal").unwrap();
        assert_eq!(payloads(&r), SAMPLE);
        assert_eq!(r.torn_tail.unwrap().offset, intact as u64);

        // The last record half written, then zeros.
        let mut log = log_bytes(3, &SAMPLE);
        let n = log.len();
        log[n - 5..].fill(0);
        log.extend_from_slice(&[0u8; 100]);
        let r = replay(&log, "x.wal").unwrap();
        assert_eq!(payloads(&r), &SAMPLE[..2]);

        // Zeroed bytes inside the second record, intact record after: corruption.
        let mut log = log_bytes(3, &[b"aaaa", b"bbbbbbbb", b"cccc"]);
        let second = FILE_HEADER_LEN + 7 + 4;
        log[second + 7..second + 11].fill(0);
        assert!(replay(&log, "x.wal").unwrap_err().is_corruption());
        // Zeroed record header in the middle: corruption too.
        let mut log = log_bytes(3, &[b"aaaa", b"bbbbbbbb", b"cccc"]);
        log[second..second + 7].fill(0);
        assert!(replay(&log, "x.wal").unwrap_err().is_corruption());
    }

    #[test]
    fn a_flipped_length_in_the_middle_is_corruption_not_a_torn_tail() {
        let log = log_bytes(3, &SAMPLE);
        for bit in 0..32 {
            let mut bad = log.clone();
            bad[FILE_HEADER_LEN + bit / 8] ^= 1 << (bit % 8);
            let err = replay(&bad, "x.wal").unwrap_err();
            assert!(err.to_string().contains("offset 20"), "{err}");
        }
    }

    #[test]
    fn headers_short_torn_and_bad() {
        let header = encode_file_header(9);
        // Empty, short and zero-filled files hold no record: torn.
        for bytes in [&[][..], &header[..7], &header[..19], &[0u8; 20], &[0u8; 64]] {
            let r = replay(bytes, "x.wal").unwrap();
            assert_eq!(r.log_number, None);
            assert!(r.records.is_empty());
            assert_eq!(r.torn_tail.unwrap().offset, 0);
        }
        for written in 0..FILE_HEADER_LEN {
            let mut partly_zero = header;
            partly_zero[written..].fill(0);
            let r = replay(&partly_zero, "x.wal").unwrap();
            assert!(r.torn_tail.is_some() && r.records.is_empty());
            // Garbage after a torn header cannot be: the header is synced first.
            let mut with_garbage = partly_zero.to_vec();
            with_garbage.push(1);
            assert!(replay(&with_garbage, "x.wal").unwrap_err().is_corruption());
        }
        // Not a log at all.
        assert!(replay(b"hello", "x.wal").unwrap_err().is_corruption());
        assert!(replay(b"hello world, this is no log", "x.wal")
            .unwrap_err()
            .is_corruption());
        // A header-only log is a valid empty log.
        let r = replay(&header, "x.wal").unwrap();
        assert_eq!(
            (r.log_number, r.records.len(), r.torn_tail),
            (Some(9), 0, None)
        );
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

    fn closed_log(payloads: &[&[u8]]) -> Vec<u8> {
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

    #[test]
    fn after_a_clean_close_every_damaged_record_is_corruption() {
        let log = closed_log(&SAMPLE);
        let close_at = log.len() - CLOSE_RECORD_LEN;
        let mut torn_close = 0;
        for i in 0..log.len() {
            for mask in [0x01u8, 0x80, 0xff, 0x5a] {
                let mut bad = log.clone();
                bad[i] ^= mask;
                match replay(&bad, "x.wal") {
                    Err(e) => assert!(e.is_corruption() && e.to_string().contains("x.wal"), "{e}"),
                    Ok(r) => {
                        // Only a flip that turns the close record into
                        // what a crash while closing leaves (its end
                        // zeroed) reads as torn: every record is kept.
                        assert!(
                            i >= close_at,
                            "flip at {i} (mask {mask:#x}) accepted: {r:?}"
                        );
                        assert_eq!(payloads(&r), SAMPLE, "flip at {i}");
                        assert_eq!(r.torn_tail.unwrap().offset, close_at as u64);
                        assert!(bad[i..].iter().all(|&b| b == 0), "flip at {i}");
                        torn_close += 1;
                    }
                }
            }
        }
        assert!(torn_close <= 1, "{torn_close}");
        // The last record damaged 3 bytes before its end: corruption now,
        // a torn tail without the close record.
        let mut bad = log.clone();
        bad[close_at - 3] ^= 0x10;
        assert!(replay(&bad, "x.wal").unwrap_err().is_corruption());
        let mut open_bad = log[..close_at].to_vec();
        open_bad[close_at - 3] ^= 0x10;
        assert!(replay(&open_bad, "x.wal").unwrap().torn_tail.is_some());
    }

    #[test]
    fn a_close_record_cut_short_is_a_torn_tail_that_loses_nothing() {
        let log = closed_log(&SAMPLE);
        let close_at = log.len() - CLOSE_RECORD_LEN;
        for len in close_at + 1..log.len() {
            for zeros in [0, 7, 64] {
                let mut cut = log[..len].to_vec();
                cut.resize(len + zeros, 0);
                let r = replay(&cut, "x.wal").unwrap();
                assert_eq!(payloads(&r), SAMPLE, "len {len}");
                assert!(!r.closed_cleanly);
                let torn = r.torn_tail.unwrap();
                assert_eq!(torn.offset, close_at as u64, "len {len}");
            }
        }
        // Bytes after a close record, or a close record in the middle.
        let mut extra = log.clone();
        extra.push(0);
        assert!(replay(&extra, "x.wal").unwrap_err().is_corruption());
        let mut middle = log.clone();
        encode_record_into(&mut middle, b"later").unwrap();
        assert!(replay(&middle, "x.wal").unwrap_err().is_corruption());
    }

    /// A sound header of `version` for log 5.
    fn header_of_version(version: u32) -> Vec<u8> {
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&version.to_le_bytes());
        body.extend_from_slice(&5u64.to_le_bytes());
        let crc = crc32_of(&[&body]);
        body.extend_from_slice(&crc.to_le_bytes());
        body
    }

    /// A log of an older format (1 to 3: the wide record headers) or of
    /// an unknown later one is refused, naming the file and both versions;
    /// salvage gives its header up rather than guess.
    #[test]
    fn an_older_or_unknown_version_is_refused_naming_it() {
        for found in [0, 1, 2, 3, 5, u32::MAX] {
            let mut log = header_of_version(found);
            encode_record_into(&mut log, &batch_payload(1, &["a"])).unwrap();
            for err in [
                replay(&log, "000005.log").unwrap_err(),
                replay_batches(&log, "000005.log").unwrap_err(),
                // The header alone, too.
                replay(&log[..FILE_HEADER_LEN], "000005.log").unwrap_err(),
            ] {
                let Error::UnsupportedVersion {
                    path,
                    kind,
                    found: named,
                    supported,
                } = &err
                else {
                    panic!("version {found}: {err}");
                };
                assert_eq!(
                    (path.to_str(), *kind, *named, *supported),
                    (Some("000005.log"), "write-ahead log", u64::from(found), 4)
                );
                let text = err.to_string();
                assert!(
                    text.contains(&format!("format version {found};")),
                    "{text}"
                );
            }
            let salvaged = salvage(&log);
            assert_eq!(salvaged.log_number, None);
            assert_eq!(salvaged.lost[0].offset, 0, "version {found}");
            assert!(
                salvaged.lost[0].reason.contains(&format!("version {found}")),
                "{:?}",
                salvaged.lost
            );
        }
        // A torn header of another version is not taken for a torn one of
        // this version: it is a header, damaged.
        let mut torn = header_of_version(3);
        torn[10..].fill(0);
        assert!(replay(&torn, "x.wal").unwrap_err().is_corruption());
    }

    fn batch_payload(first: u64, keys: &[&str]) -> Vec<u8> {
        let mut b = WriteBatch::new();
        for k in keys {
            b.put(k, "v");
        }
        b.encode_record(SeqNo(first))
    }

    #[test]
    fn replay_batches_decodes_and_checks_sequence_order() {
        let p1 = batch_payload(1, &["a", "b"]);
        let p2 = batch_payload(3, &["c"]);
        let log = log_bytes(4, &[&p1, &p2]);
        let r = replay_batches(&log, "x.wal").unwrap();
        assert_eq!(r.batches.len(), 2);
        assert_eq!(r.last_seq, Some(SeqNo(3)));
        assert_eq!(r.batches[1].1.ops[0].key, b"c");

        let stale = batch_payload(2, &["c"]);
        let log = log_bytes(4, &[&p1, &stale]);
        let err = replay_batches(&log, "x.wal").unwrap_err().to_string();
        assert!(err.contains("does not follow"), "{err}");

        let log = log_bytes(4, &[&p1, b"not a batch"]);
        let err = replay_batches(&log, "x.wal").unwrap_err();
        assert!(
            err.is_corruption() && err.to_string().contains("x.wal"),
            "{err}"
        );
    }

    #[test]
    fn a_flipped_sequence_number_byte_is_detected() {
        let p1 = batch_payload(10, &["k"]);
        let p2 = batch_payload(11, &["k"]);
        let log = log_bytes(1, &[&p1, &p2]);
        let seq_at = FILE_HEADER_LEN + record_header_len(p1.len());
        for byte in 0..8 {
            let mut bad = log.clone();
            bad[seq_at + byte] ^= 0x01;
            assert!(replay_batches(&bad, "x.wal").unwrap_err().is_corruption());
        }
    }

    /// A log of batches: one put each of `key{i}` at sequence 10·(i+1),
    /// the given values; returns the bytes and each record's offset.
    fn batch_log(values: &[&[u8]]) -> (Vec<u8>, Vec<usize>) {
        let mut out = encode_file_header(3).to_vec();
        let mut offsets = Vec::new();
        for (i, value) in values.iter().enumerate() {
            let mut batch = WriteBatch::new();
            batch.put(format!("key{i}"), value);
            offsets.push(out.len());
            let payload = batch.encode_record(SeqNo(10 * (i as u64 + 1)));
            encode_record_into(&mut out, &payload).unwrap();
        }
        out.extend_from_slice(&encode_close_record(values.len() as u64, out.len() as u64));
        (out, offsets)
    }

    fn salvaged_keys(log: &WalSalvage<'_>) -> Vec<Vec<u8>> {
        log.batches
            .iter()
            .flat_map(|(_, b)| b.ops.iter().map(|op| op.key.to_vec()))
            .collect()
    }

    fn keys(indexes: &[usize]) -> Vec<Vec<u8>> {
        indexes
            .iter()
            .map(|i| format!("key{i}").into_bytes())
            .collect()
    }

    #[test]
    fn salvage_reads_an_intact_log_as_replay_does() {
        let (log, _) = batch_log(&[b"a", b"b", b"c"]);
        let s = salvage(&log);
        assert_eq!(s.log_number, Some(3));
        assert_eq!(salvaged_keys(&s), keys(&[0, 1, 2]));
        assert!(s.lost.is_empty() && s.closed_cleanly && s.torn_tail.is_none());
    }

    #[test]
    fn salvage_skips_a_record_whose_payload_or_record_checksum_is_damaged() {
        let (log, offsets) = batch_log(&[b"a", b"bbbbbbbb", b"c"]);
        // A payload byte, and a byte of the record checksum (bytes 3..7
        // of a header whose length takes one byte).
        for at in [offsets[1] + 7 + 3, offsets[1] + 4] {
            let mut damaged = log.clone();
            damaged[at] ^= 0x10;
            let s = salvage(&damaged);
            assert_eq!(salvaged_keys(&s), keys(&[0, 2]), "flip at {at}");
            assert_eq!(s.lost.len(), 1);
            assert_eq!(s.lost[0].offset, offsets[1] as u64);
            assert_eq!(s.lost[0].len, (offsets[2] - offsets[1]) as u64);
            assert!(s.closed_cleanly);
        }
    }

    #[test]
    fn salvage_repairs_a_record_header_hit_in_one_byte() {
        let (log, offsets) = batch_log(&[b"a", b"bbbbbbbb", b"c"]);
        // Each byte of the length check and of the length, its
        // continuation bit included.
        for at in offsets[1]..offsets[1] + 3 {
            for mask in [0x44, 0x80, 0x07, 0xff] {
                let mut damaged = log.clone();
                damaged[at] ^= mask;
                let s = salvage(&damaged);
                assert_eq!(salvaged_keys(&s), keys(&[0, 1, 2]), "flip at {at}");
                assert!(s.lost.is_empty(), "flip at {at}: {:?}", s.lost);
            }
        }
        // The check and the length both: the rest cannot be delimited.
        let mut damaged = log.clone();
        damaged[offsets[1]] ^= 0x44;
        damaged[offsets[1] + 2] ^= 0x44;
        let s = salvage(&damaged);
        assert_eq!(salvaged_keys(&s), keys(&[0]));
        assert_eq!(s.lost.len(), 1);
        assert_eq!(s.lost[0].len, (log.len() - offsets[1]) as u64);
    }

    #[test]
    fn salvage_never_takes_a_record_stored_in_a_value_for_one() {
        // The second batch's value is itself a valid log record, of a batch
        // with the sequence number the damaged record would have had.
        let mut inner = WriteBatch::new();
        inner.put("invented", "value");
        let mut fake = Vec::new();
        encode_record_into(&mut fake, &inner.encode_record(SeqNo(20))).unwrap();
        let (log, offsets) = batch_log(&[b"a", &fake, b"c"]);
        let mut damaged = log.clone();
        damaged[offsets[1]] ^= 0x44;
        damaged[offsets[1] + 2] ^= 0x44;
        let s = salvage(&damaged);
        let found = salvaged_keys(&s);
        assert!(!found.contains(&b"invented".to_vec()), "{found:?}");
        assert_eq!(found, keys(&[0]));
    }

    #[test]
    fn salvage_reads_past_a_damaged_file_header_and_survives_garbage() {
        let (log, _) = batch_log(&[b"a", b"b"]);
        let mut damaged = log.clone();
        damaged[9] ^= 1;
        let s = salvage(&damaged);
        assert_eq!(s.log_number, None);
        assert_eq!(salvaged_keys(&s), keys(&[0, 1]));
        assert_eq!(s.lost[0].offset, 0);
        for garbage in [
            Vec::new(),
            vec![0u8; 7],
            vec![0xab; 100],
            log[..30].to_vec(),
        ] {
            let s = salvage(&garbage);
            assert!(s.batches.is_empty());
        }
        // Cut short after a crash: the torn tail is not a loss.
        let s = salvage(&log[..log.len() - CLOSE_RECORD_LEN - 3]);
        assert_eq!(salvaged_keys(&s), keys(&[0]));
        assert!(s.lost.is_empty() && s.torn_tail.is_some());
    }
}
