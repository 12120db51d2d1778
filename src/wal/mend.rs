//! [`mend`]: a log whose only damage is in bytes that hold no write — its
//! file header, every byte of which follows from the file's number, or its
//! close record, every byte of which follows from the records before it —
//! made whole again, so that an open replays it instead of refusing it.
//!
//! Owns: the rule for when such damage is known to be only that.
//! Must never: guess a byte that could belong to a write. Every record must
//! replay whole (each checksum holding) without the damaged part, and the
//! damaged header or close record must differ from the one it stands for
//! in a single byte: one that differed more could be another file's header,
//! or a record, and is left for `replay` to refuse.

use super::format::{encode_close_record, encode_file_header, CLOSE_RECORD_LEN, FILE_HEADER_LEN};
use super::replay::replay;

/// The bytes of a log that [`replay`] refuses as corrupt (`bytes`, log
/// `number` by its file name) with its damaged header or close record put
/// back, and what was mended; `None` when the damage is anywhere else, or
/// more than one byte.
pub fn mend(bytes: &[u8], number: u64) -> Option<(Vec<u8>, String)> {
    mend_header(bytes, number).or_else(|| mend_close_record(bytes))
}

/// How many bytes `found` and `expected` differ in (those of the shorter's
/// length).
fn bytes_differing(found: &[u8], expected: &[u8]) -> usize {
    found.iter().zip(expected).filter(|(a, b)| a != b).count()
}

fn mend_header(bytes: &[u8], number: u64) -> Option<(Vec<u8>, String)> {
    let expected = encode_file_header(number);
    let (header, body) = bytes.split_at_checked(FILE_HEADER_LEN)?;
    if bytes_differing(header, &expected) != 1 {
        return None;
    }
    let at = header.iter().zip(&expected).position(|(a, b)| a != b)?;
    let mut mended = Vec::with_capacity(bytes.len());
    mended.extend_from_slice(&expected);
    mended.extend_from_slice(body);
    replay(&mended, "").ok()?;
    Some((
        mended,
        format!(
            "file header byte {at} was {:#04x}, not {:#04x}: the header follows from the file's \
             number; every record read whole",
            header.get(at).copied().unwrap_or_default(),
            expected.get(at).copied().unwrap_or_default()
        ),
    ))
}

fn mend_close_record(bytes: &[u8]) -> Option<(Vec<u8>, String)> {
    let end = bytes.len().checked_sub(CLOSE_RECORD_LEN)?;
    let (records, close) = bytes.split_at_checked(end)?;
    let log = replay(records, "").ok()?;
    if log.torn_tail.is_some() || log.closed_cleanly || log.log_number.is_none() {
        return None;
    }
    let expected = encode_close_record(log.records.len() as u64, end as u64);
    if expected.len() != close.len() || bytes_differing(close, &expected) != 1 {
        return None;
    }
    let mut mended = Vec::with_capacity(bytes.len());
    mended.extend_from_slice(records);
    mended.extend_from_slice(&expected);
    let whole = replay(&mended, "").ok()?;
    whole.closed_cleanly.then(|| {
        (
            mended,
            format!(
                "close record at offset {end} was one byte off the one its {} records call for; \
                 every record read whole",
                log.records.len()
            ),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wal::testing::{batch_payload, closed_log};

    #[test]
    fn a_flip_in_the_header_or_close_record_is_mended_and_nowhere_else() {
        let payloads = [batch_payload(1, &["a", "b"]), batch_payload(3, &["c"])];
        let payloads: Vec<&[u8]> = payloads.iter().map(Vec::as_slice).collect();
        let log = closed_log(&payloads);
        let number = replay(&log, "").unwrap().log_number.unwrap();
        let close_at = log.len() - CLOSE_RECORD_LEN;
        for at in 0..log.len() {
            let mut bad = log.clone();
            bad[at] ^= 0x10;
            if replay(&bad, "").is_ok() {
                continue;
            }
            let metadata = at < FILE_HEADER_LEN || at >= close_at;
            match mend(&bad, number) {
                Some((mended, _)) => {
                    assert!(metadata, "a record byte at {at} was mended");
                    assert_eq!(mended, log, "at {at}");
                }
                None => assert!(!metadata, "byte {at} not mended"),
            }
            // Another byte off as well: not mended.
            let other = if at == 0 { 1 } else { at - 1 };
            bad[other] ^= 0x01;
            if metadata && (other < FILE_HEADER_LEN) == (at < FILE_HEADER_LEN) {
                assert_eq!(mend(&bad, number), None, "two bytes at {other}, {at}");
            }
        }
        // The header of another log number is not this log's.
        let mut bad = log.clone();
        bad[5] ^= 1;
        assert_eq!(mend(&bad, number + 1), None);
    }
}
