//! The snapshot file: a state machine's data at one log id, as the bytes a
//! leader streams to a follower.
//!
//! Owns: the format (a checksummed header carrying openraft's snapshot
//! metadata, length-prefixed key/value records, an end record with the
//! record count and a CRC-32 of the body; see `docs/format.md`), a streaming
//! writer and a streaming, checking reader.
//! Must never: hand a record to its consumer from a header that failed its
//! checks, allocate from a length it has not bounded, or call a file good
//! whose end record, count or body checksum does not match — a consumer
//! that loads records as they come must treat everything it loaded as
//! garbage unless [`read`] returns `Ok`.

use std::io::{Read, Write};

use openraft::SnapshotMeta;

use crate::codec::{decode, encode, Error, Result};
use crate::types::NodeId;

const MAGIC: &[u8; 8] = b"SIFTSNAP";
const VERSION: u32 = 2;
/// Bound on the encoded metadata (a membership of many nodes stays far below).
const MAX_META_BYTES: usize = 16 << 20;
const TAG_RECORD: u8 = 0x01;
const TAG_END: u8 = 0xFF;
const WHAT: &str = "snapshot file";

/// The metadata type of a snapshot.
pub type Meta = SnapshotMeta<NodeId, openraft::BasicNode>;

/// Writes a snapshot file: [`Writer::new`] writes the header, each
/// [`Writer::record`] one key/value, [`Writer::finish`] the end record.
pub struct Writer<W: Write> {
    out: W,
    body_crc: crc32fast::Hasher,
    records: u64,
}

impl<W: Write> Writer<W> {
    /// Starts a snapshot file with `meta` in its header.
    pub fn new(mut out: W, meta: &Meta) -> Result<Writer<W>> {
        let meta = encode(meta, "snapshot metadata")?;
        let meta_len = u32::try_from(meta.len())
            .ok()
            .filter(|&l| l as usize <= MAX_META_BYTES)
            .ok_or_else(|| Error::Encode {
                what: "snapshot metadata".into(),
                detail: format!("{} bytes", meta.len()),
            })?;
        let mut header = Vec::with_capacity(16 + meta.len() + 4);
        header.extend_from_slice(MAGIC);
        header.extend_from_slice(&VERSION.to_le_bytes());
        header.extend_from_slice(&meta_len.to_le_bytes());
        header.extend_from_slice(&meta);
        let crc = crc32fast::hash(&header);
        header.extend_from_slice(&crc.to_le_bytes());
        out.write_all(&header).map_err(write_err)?;
        Ok(Writer {
            out,
            body_crc: crc32fast::Hasher::new(),
            records: 0,
        })
    }

    /// Appends one record (a state key — a user key or a client session,
    /// its prefix byte included — and its value).
    pub fn record(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        let too_long = |what: &str, len: usize| Error::Encode {
            what: format!("snapshot record {what}"),
            detail: format!("{len} bytes"),
        };
        let key_len = u32::try_from(key.len()).map_err(|_| too_long("key", key.len()))?;
        let value_len = u32::try_from(value.len()).map_err(|_| too_long("value", value.len()))?;
        let mut head = [0u8; 9];
        for (slot, byte) in head.iter_mut().zip(
            [TAG_RECORD]
                .into_iter()
                .chain(key_len.to_le_bytes())
                .chain(value_len.to_le_bytes()),
        ) {
            *slot = byte;
        }
        for part in [&head[..], key, value] {
            self.body_crc.update(part);
            self.out.write_all(part).map_err(write_err)?;
        }
        self.records += 1;
        Ok(())
    }

    /// Writes the end record and returns the output (not synced).
    pub fn finish(mut self) -> Result<W> {
        let mut end = Vec::with_capacity(13);
        end.push(TAG_END);
        end.extend_from_slice(&self.records.to_le_bytes());
        self.body_crc.update(&end);
        let crc = self.body_crc.finalize();
        end.extend_from_slice(&crc.to_le_bytes());
        self.out.write_all(&end).map_err(write_err)?;
        self.out.flush().map_err(write_err)?;
        Ok(self.out)
    }
}

fn write_err(e: std::io::Error) -> Error {
    Error::io_in(WHAT, e)
}

fn read_exact(input: &mut impl Read, buf: &mut [u8], part: &str) -> Result<()> {
    input.read_exact(buf).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            Error::corruption(WHAT, format!("truncated in {part}"))
        } else {
            Error::io_in(WHAT, e)
        }
    })
}

fn u32_le(bytes: &[u8]) -> Result<u32> {
    Ok(u32::from_le_bytes(
        bytes
            .try_into()
            .map_err(|_| Error::corruption(WHAT, "short field"))?,
    ))
}

/// Reads and checks the header, returning the metadata.
pub fn read_meta(input: &mut impl Read) -> Result<Meta> {
    let mut fixed = [0u8; 16];
    read_exact(input, &mut fixed, "header")?;
    let (magic, rest) = fixed.split_at(8);
    if magic != MAGIC {
        return Err(Error::corruption(WHAT, "bad magic"));
    }
    let (version, meta_len) = rest.split_at(4);
    let version = u32_le(version)?;
    if version != VERSION {
        return Err(Error::corruption(
            WHAT,
            format!("version {version}, expected {VERSION}"),
        ));
    }
    let meta_len = u32_le(meta_len)? as usize;
    if meta_len > MAX_META_BYTES {
        return Err(Error::corruption(
            WHAT,
            format!("metadata length {meta_len} exceeds {MAX_META_BYTES}"),
        ));
    }
    let mut meta = vec![0u8; meta_len + 4];
    read_exact(input, &mut meta, "metadata")?;
    let (meta, crc) = meta
        .split_at_checked(meta_len)
        .ok_or_else(|| Error::corruption(WHAT, "short metadata"))?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&fixed);
    hasher.update(meta);
    if hasher.finalize() != u32_le(crc)? {
        return Err(Error::corruption(WHAT, "header checksum mismatch"));
    }
    decode(meta, "snapshot metadata")
}

/// Reads a whole snapshot file, handing every record to `on_record` as it
/// is read; `Ok(meta)` only when the header, every record, the count, the
/// body checksum and the end of input all check.
pub fn read(
    input: &mut impl Read,
    mut on_record: impl FnMut(&[u8], &[u8]) -> Result<()>,
) -> Result<Meta> {
    let meta = read_meta(input)?;
    let mut body_crc = crc32fast::Hasher::new();
    let mut records = 0u64;
    let mut key = Vec::new();
    let mut value = Vec::new();
    loop {
        let mut tag = [0u8; 1];
        read_exact(input, &mut tag, "record tag")?;
        body_crc.update(&tag);
        match tag {
            [TAG_RECORD] => {
                let mut lens = [0u8; 8];
                read_exact(input, &mut lens, "record lengths")?;
                body_crc.update(&lens);
                let (k, v) = lens.split_at(4);
                let (k, v) = (u32_le(k)? as usize, u32_le(v)? as usize);
                if k > siftdb::MAX_KEY_LEN || v > siftdb::MAX_VALUE_LEN {
                    return Err(Error::corruption(
                        WHAT,
                        format!("record {records}: key {k} or value {v} bytes over the limit"),
                    ));
                }
                key.resize(k, 0);
                value.resize(v, 0);
                read_exact(input, &mut key, "record key")?;
                read_exact(input, &mut value, "record value")?;
                body_crc.update(&key);
                body_crc.update(&value);
                on_record(&key, &value)?;
                records += 1;
            }
            [TAG_END] => {
                let mut end = [0u8; 12];
                read_exact(input, &mut end, "end record")?;
                let (count, crc) = end.split_at(8);
                body_crc.update(count);
                let count = u64::from_le_bytes(
                    count
                        .try_into()
                        .map_err(|_| Error::corruption(WHAT, "short count"))?,
                );
                if count != records {
                    return Err(Error::corruption(
                        WHAT,
                        format!("end record counts {count} records, read {records}"),
                    ));
                }
                if body_crc.finalize() != u32_le(crc)? {
                    return Err(Error::corruption(WHAT, "body checksum mismatch"));
                }
                let mut extra = [0u8; 1];
                let n = input.read(&mut extra).map_err(|e| Error::io_in(WHAT, e))?;
                if n != 0 {
                    return Err(Error::corruption(WHAT, "bytes after the end record"));
                }
                return Ok(meta);
            }
            [other] => {
                return Err(Error::corruption(
                    WHAT,
                    format!("unknown record tag {other:#04x} after {records} records"),
                ));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use openraft::{CommittedLeaderId, LogId, Membership, StoredMembership};

    use super::*;

    fn meta() -> Meta {
        let log_id = LogId::new(CommittedLeaderId::new(3, 1), 42);
        Meta {
            last_log_id: Some(log_id),
            last_membership: StoredMembership::new(
                Some(log_id),
                Membership::new(vec![BTreeSet::from([1, 2, 3])], None),
            ),
            snapshot_id: "3-1-42-7".into(),
        }
    }

    fn file(records: &[(&[u8], &[u8])]) -> Vec<u8> {
        let mut w = Writer::new(Vec::new(), &meta()).unwrap();
        for (k, v) in records {
            w.record(k, v).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trip() {
        let recs: Vec<(&[u8], &[u8])> = vec![(b"a", b"1"), (b"bb", b""), (b"c", &[7; 300])];
        let bytes = file(&recs);
        let mut got = Vec::new();
        let m = read(&mut &bytes[..], |k, v| {
            got.push((k.to_vec(), v.to_vec()));
            Ok(())
        })
        .unwrap();
        assert_eq!(m, meta());
        assert_eq!(read_meta(&mut &bytes[..]).unwrap(), meta());
        let want: Vec<_> = recs.iter().map(|(k, v)| (k.to_vec(), v.to_vec())).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn every_flipped_bit_and_every_truncation_is_caught() {
        let bytes = file(&[(b"key", b"value"), (b"k2", b"v2")]);
        for bit in 0..bytes.len() * 8 {
            let mut b = bytes.clone();
            b[bit / 8] ^= 1 << (bit % 8);
            assert!(read(&mut &b[..], |_, _| Ok(())).is_err(), "bit {bit}");
        }
        for len in 0..bytes.len() {
            assert!(
                read(&mut &bytes[..len], |_, _| Ok(())).is_err(),
                "len {len}"
            );
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(read(&mut &longer[..], |_, _| Ok(())).is_err());
    }

    #[test]
    fn huge_lengths_are_refused_before_allocating() {
        let mut bytes = file(&[]);
        let header_len = bytes.len() - 13;
        bytes.truncate(header_len);
        bytes.push(TAG_RECORD);
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        bytes.extend_from_slice(&u32::MAX.to_le_bytes());
        let err = read(&mut &bytes[..], |_, _| Ok(())).unwrap_err();
        assert!(err.to_string().contains("over the limit"), "{err}");
    }
}
