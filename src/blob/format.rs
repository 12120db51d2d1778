//! The blob file format: header, records, footer, and the pointer a table
//! entry holds to a value kept in a blob file.
//!
//! ```text
//! header  : magic "SIFTBLOB" (8) ‖ version u32 ‖ file number u64        = 20 bytes
//! record  : key_len u32 ‖ value_len u32 ‖ key ‖ value ‖ crc32 u32
//!           (crc32 over key_len ‖ value_len ‖ key ‖ value)
//! footer  : record count u64 ‖ value bytes u64 ‖ crc32 u32 ‖ magic "BLOBEND!" (8) = 28 bytes
//!           (crc32 over the header and the two counts)
//! pointer : file number u64 ‖ value offset u64 ‖ value length u32 ‖ crc32 of the value u32 = 24 bytes
//! ```
//! All integers little-endian; the layout is in `docs/format.md`, "Blob file".
//!
//! Owns: the constants and the fixed encodings (header, record head,
//! footer, [`BlobPointer`]) and their checked decoding.
//! Must never: panic on any input, or accept a length it has not checked
//! against the bytes that hold it (nothing is allocated from a length read
//! from disk before that check).

use crate::codec::{crc32_of, ByteReader};
use crate::error::{Error, Result};
use crate::key::{MAX_KEY_LEN, MAX_VALUE_LEN};

/// The first eight bytes of every blob file.
pub const BLOB_MAGIC: [u8; 8] = *b"SIFTBLOB";
/// The last eight bytes of every complete blob file.
pub const BLOB_FOOTER_MAGIC: [u8; 8] = *b"BLOBEND!";
/// The one blob file version this build writes and reads.
pub const BLOB_FORMAT_VERSION: u32 = 1;
/// Bytes of the header.
pub const BLOB_HEADER_LEN: usize = 20;
/// Bytes of a record before its key: key length and value length.
pub const RECORD_HEAD_LEN: usize = 8;
/// Bytes of a record's trailing checksum.
pub const RECORD_CRC_LEN: usize = 4;
/// Bytes of the footer.
pub const BLOB_FOOTER_LEN: usize = 28;
/// Bytes of an encoded [`BlobPointer`].
pub const BLOB_POINTER_LEN: usize = 24;

/// Where a separated value lies: the blob file, the offset and length of
/// the value's bytes in it, and the CRC-32 of those bytes (checked on every
/// read, so a damaged or misplaced value is an error, never a wrong value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BlobPointer {
    /// The blob file's number (its name is `NNNNNN.blob`).
    pub file_number: u64,
    /// Offset of the value's first byte in the file.
    pub offset: u64,
    /// Length of the value.
    pub length: u32,
    /// CRC-32 (IEEE) of the value's bytes.
    pub checksum: u32,
}

impl BlobPointer {
    /// The fixed 24-byte encoding.
    pub fn encode(&self) -> [u8; BLOB_POINTER_LEN] {
        let mut out = [0u8; BLOB_POINTER_LEN];
        let fields = [
            &self.file_number.to_le_bytes()[..],
            &self.offset.to_le_bytes()[..],
            &self.length.to_le_bytes()[..],
            &self.checksum.to_le_bytes()[..],
        ];
        let mut at = 0;
        for field in fields {
            if let Some(slot) = out.get_mut(at..at + field.len()) {
                slot.copy_from_slice(field);
            }
            at += field.len();
        }
        out
    }

    /// Decodes a pointer: exactly [`BLOB_POINTER_LEN`] bytes, a length no
    /// larger than the largest value, an offset past the header.
    pub fn decode(bytes: &[u8]) -> Result<BlobPointer> {
        if bytes.len() != BLOB_POINTER_LEN {
            return Err(Error::corruption(
                "blob pointer",
                format!("{} bytes, not {BLOB_POINTER_LEN}", bytes.len()),
            ));
        }
        let mut reader = ByteReader::new(bytes, "blob pointer");
        let pointer = BlobPointer {
            file_number: reader.u64()?,
            offset: reader.u64()?,
            length: reader.u32()?,
            checksum: reader.u32()?,
        };
        if pointer.length as usize > MAX_VALUE_LEN {
            return Err(Error::corruption(
                "blob pointer",
                format!("value length {} above the largest value", pointer.length),
            ));
        }
        if pointer.offset < (BLOB_HEADER_LEN + RECORD_HEAD_LEN) as u64 {
            return Err(Error::corruption(
                "blob pointer",
                format!("offset {} inside the file's header", pointer.offset),
            ));
        }
        Ok(pointer)
    }

    /// The offset one past the value's last byte (no overflow: both parts
    /// are below 2^64 − 2^32 once checked against a file's length).
    pub fn end(&self) -> u64 {
        self.offset.saturating_add(u64::from(self.length))
    }
}

/// The header's bytes for blob file `number`.
pub fn encode_header(number: u64) -> [u8; BLOB_HEADER_LEN] {
    let mut out = [0u8; BLOB_HEADER_LEN];
    let (magic, rest) = out.split_at_mut(8);
    magic.copy_from_slice(&BLOB_MAGIC);
    let (version, file_number) = rest.split_at_mut(4);
    version.copy_from_slice(&BLOB_FORMAT_VERSION.to_le_bytes());
    file_number.copy_from_slice(&number.to_le_bytes());
    out
}

/// A decoded header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobHeader {
    /// The format version (always [`BLOB_FORMAT_VERSION`] once decoded).
    pub version: u32,
    /// The file number the file was written as.
    pub file_number: u64,
}

/// Decodes a header: the magic, then the version (another one is
/// `Error::UnsupportedVersion`, reported by the caller that knows the path,
/// through `Err(found)`).
pub fn decode_header(bytes: &[u8]) -> Result<std::result::Result<BlobHeader, u32>> {
    let mut reader = ByteReader::new(bytes, "blob file header");
    let magic: [u8; 8] = reader.array()?;
    if magic != BLOB_MAGIC {
        return Err(Error::corruption(
            "blob file header",
            format!("bad magic {magic:02x?}"),
        ));
    }
    let version = reader.u32()?;
    let file_number = reader.u64()?;
    if version != BLOB_FORMAT_VERSION {
        return Ok(Err(version));
    }
    Ok(Ok(BlobHeader {
        version,
        file_number,
    }))
}

/// The counts a footer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct BlobCounts {
    /// Records in the file.
    pub records: u64,
    /// Sum of the records' value lengths.
    pub value_bytes: u64,
}

/// The footer's bytes for a file with `header` and `counts`.
pub fn encode_footer(header: &[u8; BLOB_HEADER_LEN], counts: BlobCounts) -> [u8; BLOB_FOOTER_LEN] {
    let records = counts.records.to_le_bytes();
    let bytes = counts.value_bytes.to_le_bytes();
    let crc = crc32_of(&[header, &records, &bytes]).to_le_bytes();
    let mut out = [0u8; BLOB_FOOTER_LEN];
    let mut at = 0;
    for field in [&records[..], &bytes[..], &crc[..], &BLOB_FOOTER_MAGIC[..]] {
        if let Some(slot) = out.get_mut(at..at + field.len()) {
            slot.copy_from_slice(field);
        }
        at += field.len();
    }
    out
}

/// Decodes a footer, checking its magic and its checksum against `header`
/// (the file's first [`BLOB_HEADER_LEN`] bytes).
pub fn decode_footer(header: &[u8], footer: &[u8]) -> Result<BlobCounts> {
    let mut reader = ByteReader::new(footer, "blob file footer");
    let records = reader.u64()?;
    let value_bytes = reader.u64()?;
    let stored = reader.u32()?;
    let magic: [u8; 8] = reader.array()?;
    reader.finish()?;
    if magic != BLOB_FOOTER_MAGIC {
        return Err(Error::corruption(
            "blob file footer",
            format!("bad magic {magic:02x?} (a file cut short?)"),
        ));
    }
    let computed = crc32_of(&[header, &records.to_le_bytes(), &value_bytes.to_le_bytes()]);
    if computed != stored {
        return Err(Error::corruption(
            "blob file footer",
            format!("checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"),
        ));
    }
    Ok(BlobCounts {
        records,
        value_bytes,
    })
}

/// One record read from a blob file's bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlobRecord<'a> {
    /// The user key the value was written under (kept for garbage
    /// collection and verification).
    pub key: &'a [u8],
    /// The value.
    pub value: &'a [u8],
    /// Offset of the value's first byte in the file.
    pub value_offset: u64,
}

impl BlobRecord<'_> {
    /// The pointer a table entry holds to this record's value in file `file_number`.
    pub fn pointer(&self, file_number: u64) -> BlobPointer {
        BlobPointer {
            file_number,
            offset: self.value_offset,
            length: u32::try_from(self.value.len()).unwrap_or(u32::MAX),
            checksum: crc32_of(&[self.value]),
        }
    }
}

/// Appends the record for `key` → `value` to `out`.
pub fn encode_record(out: &mut Vec<u8>, key: &[u8], value: &[u8]) {
    let start = out.len();
    out.extend_from_slice(&u32::try_from(key.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(&u32::try_from(value.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(key);
    out.extend_from_slice(value);
    let crc = crc32_of(&[out.get(start..).unwrap_or_default()]);
    out.extend_from_slice(&crc.to_le_bytes());
}

/// Decodes the record at the front of `bytes` (which starts at file offset
/// `at`), checking its lengths against the bytes present and its checksum;
/// returns it and its encoded length.
pub fn decode_record(bytes: &[u8], at: u64) -> Result<(BlobRecord<'_>, usize)> {
    let mut reader = ByteReader::new(bytes, "blob record");
    let key_len = reader.u32()? as usize;
    let value_len = reader.u32()? as usize;
    if key_len > MAX_KEY_LEN || value_len > MAX_VALUE_LEN {
        return Err(Error::corruption(
            "blob record",
            format!(
                "at offset {at}: key length {key_len} or value length {value_len} out of range"
            ),
        ));
    }
    let key = reader.take(key_len)?;
    let value = reader.take(value_len)?;
    let stored = reader.u32()?;
    let len = RECORD_HEAD_LEN + key_len + value_len + RECORD_CRC_LEN;
    let body = bytes.get(..len - RECORD_CRC_LEN).unwrap_or_default();
    let computed = crc32_of(&[body]);
    if stored != computed {
        return Err(Error::corruption(
            "blob record",
            format!("at offset {at}: checksum mismatch: stored {stored:#010x}, computed {computed:#010x}"),
        ));
    }
    let value_offset = at + (RECORD_HEAD_LEN + key_len) as u64;
    Ok((
        BlobRecord {
            key,
            value,
            value_offset,
        },
        len,
    ))
}

/// Checks `value` (read at `pointer`) against the pointer's checksum.
pub fn check_value(pointer: &BlobPointer, value: &[u8], file: &str) -> Result<()> {
    let computed = crc32_of(&[value]);
    if computed != pointer.checksum {
        return Err(Error::corruption(
            format!("blob value in {file}"),
            format!(
                "at offset {} ({} bytes): checksum mismatch: pointer says {:#010x}, computed {computed:#010x}",
                pointer.offset, pointer.length, pointer.checksum
            ),
        ));
    }
    Ok(())
}

/// Every record of a whole blob file's bytes, checked: the header, each
/// record in turn up to the footer, and the footer's counts against the
/// records found. `Ok(Err(version))` for a file of another version.
pub fn decode_file(bytes: &[u8]) -> Result<std::result::Result<Vec<BlobRecord<'_>>, u32>> {
    let header_bytes = bytes.get(..BLOB_HEADER_LEN).ok_or_else(|| {
        Error::corruption(
            "blob file",
            format!("{} bytes, shorter than its header", bytes.len()),
        )
    })?;
    if let Err(version) = decode_header(header_bytes)? {
        return Ok(Err(version));
    }
    let Some(footer_at) = bytes
        .len()
        .checked_sub(BLOB_FOOTER_LEN)
        .filter(|&at| at >= BLOB_HEADER_LEN)
    else {
        return Err(Error::corruption(
            "blob file",
            format!("{} bytes, too short for a header and a footer", bytes.len()),
        ));
    };
    let (body, footer) = bytes.split_at(footer_at);
    let counts = decode_footer(header_bytes, footer)?;
    let mut records = Vec::new();
    let mut at = BLOB_HEADER_LEN;
    let mut value_bytes = 0u64;
    while at < body.len() {
        let (record, len) = decode_record(body.get(at..).unwrap_or_default(), at as u64)?;
        value_bytes += record.value.len() as u64;
        records.push(record);
        at += len;
    }
    if records.len() as u64 != counts.records || value_bytes != counts.value_bytes {
        return Err(Error::corruption(
            "blob file",
            format!(
                "footer counts {} records of {} value bytes, the file holds {} of {value_bytes}",
                counts.records,
                counts.value_bytes,
                records.len()
            ),
        ));
    }
    Ok(Ok(records))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(entries: &[(&[u8], &[u8])]) -> Vec<u8> {
        let header = encode_header(7);
        let mut out = header.to_vec();
        let mut counts = BlobCounts::default();
        for (k, v) in entries {
            encode_record(&mut out, k, v);
            counts.records += 1;
            counts.value_bytes += v.len() as u64;
        }
        out.extend_from_slice(&encode_footer(&header, counts));
        out
    }

    #[test]
    fn pointers_round_trip_and_refuse_bad_lengths() {
        let p = BlobPointer {
            file_number: 9,
            offset: 100,
            length: 5,
            checksum: 0xdead_beef,
        };
        assert_eq!(BlobPointer::decode(&p.encode()).unwrap(), p);
        assert!(BlobPointer::decode(&p.encode()[..23]).is_err());
        let huge = BlobPointer {
            length: u32::MAX,
            ..p
        };
        assert!(BlobPointer::decode(&huge.encode()).is_err());
    }

    #[test]
    fn files_round_trip_and_every_flipped_byte_is_caught() {
        let bytes = file(&[(b"a", b"one"), (b"bb", b"two two")]);
        let records = decode_file(&bytes).unwrap().unwrap();
        assert_eq!(records.len(), 2);
        assert_eq!(records[1].value, b"two two");
        let pointer = records[1].pointer(7);
        let at = usize::try_from(pointer.offset).unwrap();
        assert_eq!(&bytes[at..at + pointer.length as usize], b"two two");
        for i in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[i] ^= 0x10;
            let decoded = decode_file(&damaged);
            assert!(
                !matches!(decoded, Ok(Ok(ref r)) if r == &records),
                "flip at {i} went unnoticed"
            );
        }
        for cut in 0..bytes.len() {
            assert!(decode_file(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }
}
