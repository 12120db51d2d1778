//! [`replay`] and [`replay_batches`]: every intact record of a log file,
//! and its torn tail if a crash left one (the rules in the module docs of
//! `wal`, "What counts as a torn tail").
//!
//! Owns: the verdict torn tail or corruption, and the check that batches'
//! sequence numbers increase.
//! Must never: join pieces of different records, accept a record whose
//! checksum fails, or call damage before the tail a torn tail — a corrupt
//! record with intact data after it is `Corruption`, never silently dropped.

use super::format::{
    all_zero, close_record, parse_file_header, read_record, unsupported, HeaderFault, RecordRead,
    FILE_HEADER_LEN, FORMAT_VERSION, MAGIC,
};
use crate::batch::{decode_record, DecodedBatch};
use crate::error::{Error, Result};
use crate::key::SeqNo;

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
    for (slot, byte) in fixed_part
        .iter_mut()
        .zip(MAGIC.into_iter().chain(FORMAT_VERSION.to_le_bytes()))
    {
        *slot = byte;
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::codec::crc32_of;
    use crate::wal::testing::*;
    use crate::wal::*;

    #[test]
    fn every_single_byte_flip_is_caught_or_a_torn_last_record() {
        let log = log_bytes(3, &SAMPLE);
        let last_start = log.len() - record_header_len(SAMPLE[2].len()) - SAMPLE[2].len();
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
            boundaries.push(boundaries.last().unwrap() + record_header_len(p.len()) + p.len());
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
        for found in [0, 1, 2, 3, 4, 5, 7, u32::MAX] {
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
                    (Some("000005.log"), "write-ahead log", u64::from(found), 6)
                );
                let text = err.to_string();
                assert!(text.contains(&format!("format version {found};")), "{text}");
            }
            let salvaged = salvage(&log);
            assert_eq!(salvaged.log_number, None);
            assert_eq!(salvaged.lost[0].offset, 0, "version {found}");
            assert!(
                salvaged.lost[0]
                    .reason
                    .contains(&format!("version {found}")),
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
}
