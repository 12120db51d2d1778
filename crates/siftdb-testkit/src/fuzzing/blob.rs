//! Fuzz target for blob files and blob pointers.
//!
//! Owns: `blob_decode` — arbitrary bytes through the blob file decoder
//! (as they are, and with the footer's checksum made right so the records
//! behind it are reached) and through the blob pointer decoder.
//! Must never: panic unless a decoder broke a promise — it panics, refuses
//! with anything but `Corruption`, or accepts a file that is not its own
//! encoding, whose pointers do not land on their values, or a pointer that
//! does not encode back to its bytes.
#![expect(
    clippy::panic,
    reason = "a fuzz target reports a broken invariant by panicking, which libFuzzer and the replay tests catch"
)]

use siftdb::internals::blob::{
    decode_file, decode_header, encode_footer, encode_header, encode_record, BlobCounts,
    BlobPointer, BLOB_FOOTER_LEN, BLOB_FORMAT_VERSION, BLOB_HEADER_LEN, BLOB_POINTER_LEN,
};

/// Arbitrary bytes as a blob file (also with its footer made right) and
/// as blob pointers.
pub fn blob_decode(data: &[u8]) {
    check_file(data);
    if let Some(fixed) = with_footer_fixed(data) {
        check_file(&fixed);
    }
    check_pointer(data);
    if let Some(head) = data.get(..BLOB_POINTER_LEN) {
        check_pointer(head);
    }
}

/// `data` with the footer's checksum recomputed over its header and counts.
fn with_footer_fixed(data: &[u8]) -> Option<Vec<u8>> {
    let footer_at = data.len().checked_sub(BLOB_FOOTER_LEN)?;
    if footer_at < BLOB_HEADER_LEN {
        return None;
    }
    let header: [u8; BLOB_HEADER_LEN] = data.get(..BLOB_HEADER_LEN)?.try_into().ok()?;
    let footer = data.get(footer_at..)?;
    let counts = BlobCounts {
        records: u64::from_le_bytes(footer.get(..8)?.try_into().ok()?),
        value_bytes: u64::from_le_bytes(footer.get(8..16)?.try_into().ok()?),
    };
    let mut fixed = data.get(..footer_at)?.to_vec();
    fixed.extend_from_slice(&encode_footer(&header, counts));
    Some(fixed)
}

fn check_file(data: &[u8]) {
    let records = match decode_file(data) {
        Ok(Ok(records)) => records,
        Ok(Err(version)) => {
            assert_ne!(version, BLOB_FORMAT_VERSION, "its own version refused");
            return;
        }
        Err(e) => {
            assert!(e.is_corruption(), "decode refused with {e}");
            return;
        }
    };
    let number = match data.get(..BLOB_HEADER_LEN).map(decode_header) {
        Some(Ok(Ok(header))) => header.file_number,
        _ => panic!("an accepted file whose header does not decode"),
    };
    // An accepted file is its own encoding.
    let header = encode_header(number);
    let mut again = header.to_vec();
    let mut counts = BlobCounts::default();
    for record in &records {
        encode_record(&mut again, record.key, record.value);
        counts.records += 1;
        counts.value_bytes += record.value.len() as u64;
    }
    again.extend_from_slice(&encode_footer(&header, counts));
    assert_eq!(again, data, "an accepted file is its own encoding");
    // Every record's pointer lands on its value and decodes back.
    for record in &records {
        let pointer = record.pointer(number);
        let start = usize::try_from(pointer.offset).unwrap_or(usize::MAX);
        let end = start.saturating_add(pointer.length as usize);
        assert_eq!(
            data.get(start..end),
            Some(record.value),
            "a pointer misses its value"
        );
        assert_eq!(BlobPointer::decode(&pointer.encode()).ok(), Some(pointer));
    }
}

fn check_pointer(data: &[u8]) {
    match BlobPointer::decode(data) {
        Ok(pointer) => assert_eq!(&pointer.encode()[..], data, "a pointer is its own encoding"),
        Err(e) => assert!(e.is_corruption(), "pointer decode refused with {e}"),
    }
}
