//! [`salvage`]: what `siftdb repair` reads of a damaged log — every record
//! that can be delimited and checked, past damage, and what was lost.
//!
//! Owns: skipping a record whose length is vouched for, repairing a record
//! header hit in one byte, and giving up the rest of a log whose next
//! record cannot be delimited.
//! Must never: take bytes inside a value for a record (it never searches
//! for something that looks like one), keep a record whose checksum fails,
//! or keep batches whose sequence numbers do not increase.

use super::format::{
    all_zero, length_check, parse_file_header, parse_header, read_record, HeaderFault, HeaderRead,
    RecordRead, CHECK_AT, CLOSE_RECORD_LEN, FILE_HEADER_LEN, FORMAT_VERSION, LEN_AT,
    MAX_RECORD_HEADER_LEN,
};
use super::replay::TornTail;
use crate::batch::{decode_record, DecodedBatch};
use crate::codec::crc32_of;
use crate::key::SeqNo;

/// A stretch of a damaged log that salvage (`siftdb repair`) gave up on.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
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
    (header.check == length_check(&[], header.len_bytes) && len <= rest.len()).then_some(len)
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
        RecordRead::Record { payload, len } => match decode_record(payload) {
            Ok(batch) if after.is_none_or(|a| batch.first_seq > a) => Step::Batch(batch, len),
            Ok(batch) => Step::Damage(
                format!("sequence {} does not follow {:?}", batch.first_seq.0, after),
                Some(len),
            ),
            Err(e) => Step::Damage(format!("not a write batch: {e}"), Some(len)),
        },
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
                if !len_span.contains(&at) || header.check != length_check(&[], header.len_bytes) {
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

/// Reads what can be read of a log: like `replay`, but past damage. A
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
    use crate::batch::{RawBatch, WriteBatch};
    use crate::wal::*;

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
