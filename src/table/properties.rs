//! The properties block: table-wide facts written once by the builder and
//! read at open.
//!
//! ```text
//! offset  size  field
//! 0       4     format version (u32: 8, the footer's)
//! 4       8     entries
//! 12      8     deletions (entries whose kind is delete)
//! 20      8     distinct user keys
//! 28      8     data blocks
//! 36      8     data size (bytes of data blocks and their trailers)
//! 44      8     smallest sequence number
//! 52      8     largest sequence number
//! 60      8     filter bits per key (IEEE-754 f64 bits; 0 = no filter)
//! 68      4     filter probes per key (0 = no filter)
//! 72      4+n   smallest internal key (u32 length, bytes)
//! 76+n    4+m   largest internal key (u32 length, bytes)
//! 80+n+m  ...   tagged fields (tag u16, length u32, bytes),
//!               tags strictly increasing — 1: prefix filter, 2: range
//!               filter, 3: range tombstone block, 4: keyspace (id u32,
//!               name u8 length + bytes; absent for the default keyspace),
//!               5: blob files the table's pointers name (count u32, then
//!               each file number u64, strictly increasing; absent when
//!               the table holds no blob pointer)
//! ```
//!
//! Owns: [`TableProperties`] and its encoding.
//! Must never: accept a properties block whose fields contradict each other
//! (an empty table, smallest above largest, sequences out of range).

use std::cmp::Ordering;

use bytes::Bytes;

use crate::codec::{put_len_prefixed, ByteReader};
use crate::error::{Error, Result};
use crate::key::{compare_internal_keys, parse_internal_key, SeqNo};
use crate::prefix::MAX_NAME_LEN;
use crate::table::format::{BlockHandle, BlockLocation, TableFormat};
use siftdb_filter::range;
use siftdb_filter::theory::{MAX_BITS_PER_KEY, MAX_PROBES, MIN_BITS_PER_KEY};

/// Tag of the prefix filter field.
pub const TAG_PREFIX_FILTER: u16 = 1;
/// Tag of the range filter field.
pub const TAG_RANGE_FILTER: u16 = 2;
/// Tag of the range tombstone field: the block's handle.
pub const TAG_RANGE_TOMBSTONES: u16 = 3;
/// Tag of the keyspace field.
pub const TAG_KEYSPACE: u16 = 4;
/// Tag of the compression dictionary field: the block's handle.
pub const TAG_COMPRESSION_DICTIONARY: u16 = 5;
/// Tag of the blob files field.
pub const TAG_BLOB_FILES: u16 = 6;
/// Tags at or above this may be skipped by a reader that does not know
/// them; an unknown tag below it is `Corruption` (the table needs a newer
/// reader to be read correctly).
pub const FIRST_SKIPPABLE_TAG: u16 = 0x8000;
/// Prefix filter flag: whole keys are in the filter too.
const WHOLE_KEYS: u8 = 1;

/// What a table's point filter holds besides whole keys (properties field
/// 1): the prefix of each key, as an extractor named `extractor` cut them. See `docs/format.md`, "Filter block".
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixFilterInfo {
    /// The extractor's name ([`crate::prefix::PrefixExtractor::name`]).
    pub extractor: String,
    /// Whether every key is in the filter whole as well (else only the keys
    /// without a prefix are).
    pub whole_keys: bool,
    /// Distinct prefixes added to the filter.
    pub prefixes: u64,
}

/// Where a table's range filter is (properties field 2).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RangeFilterInfo {
    /// The range filter block.
    pub handle: BlockHandle,
    /// Bits per key the builder was asked for.
    pub bits_per_key: f64,
}

pub use crate::options::TableKeyspace;

/// Table-wide facts from the properties block.
#[derive(Debug, Clone, PartialEq)]
pub struct TableProperties {
    /// The table format version.
    pub format_version: u32,
    /// Number of entries (versions), tombstones included.
    pub entries: u64,
    /// Number of tombstones.
    pub deletions: u64,
    /// Number of distinct user keys (the keys the filter was built from).
    pub distinct_user_keys: u64,
    /// Number of data blocks.
    pub data_blocks: u64,
    /// Bytes of the data blocks with their trailers (the file's first bytes).
    pub data_size: u64,
    /// Smallest sequence number of any entry.
    pub min_seq: SeqNo,
    /// Largest sequence number of any entry.
    pub max_seq: SeqNo,
    /// Filter bits per key the table was built with; 0 = no filter.
    pub filter_bits_per_key: f64,
    /// Filter probes per key; 0 = no filter.
    pub filter_probes: u32,
    /// The first internal key.
    pub smallest: Bytes,
    /// The last internal key.
    pub largest: Bytes,
    /// Prefixes in the point filter (field 1).
    pub prefix_filter: Option<PrefixFilterInfo>,
    /// The range filter block (field 2).
    pub range_filter: Option<RangeFilterInfo>,
    /// The range tombstone block (field 3), when the table has range
    /// tombstones. The fields above count point entries only.
    pub range_tombstones: Option<BlockHandle>,
    /// The keyspace (field 4); `None`: the default keyspace.
    pub keyspace: Option<TableKeyspace>,
    /// The zstd dictionary block (field 5), when the table's data blocks
    /// were compressed with one.
    pub compression_dictionary: Option<BlockHandle>,
    /// The blob files the table's blob pointers name (field 6), strictly
    /// increasing; empty when it holds none.
    pub blob_files: Vec<u64>,
}

impl TableProperties {
    /// Empty fields, never valid (a table under construction holds it until
    /// its properties block is decoded).
    pub(crate) fn placeholder() -> TableProperties {
        TableProperties {
            format_version: 0,
            entries: 0,
            deletions: 0,
            distinct_user_keys: 0,
            data_blocks: 0,
            data_size: 0,
            min_seq: SeqNo(0),
            max_seq: SeqNo(0),
            filter_bits_per_key: 0.0,
            filter_probes: 0,
            smallest: Bytes::new(),
            largest: Bytes::new(),
            prefix_filter: None,
            range_filter: None,
            range_tombstones: None,
            keyspace: None,
            compression_dictionary: None,
            blob_files: Vec::new(),
        }
    }

    /// Entries of the point filter: the distinct user keys, plus the
    /// distinct prefixes of a prefix filter; with prefixes only, the
    /// prefixes (a lower bound: the keys without a prefix are in too, and
    /// counted nowhere).
    pub fn point_filter_entries(&self) -> u64 {
        match &self.prefix_filter {
            None => self.distinct_user_keys,
            Some(p) if p.whole_keys => self.distinct_user_keys.saturating_add(p.prefixes),
            Some(p) => p.prefixes,
        }
    }

    /// The most hashes the point filter can have been built from: a hash
    /// per distinct user key (whole, or only when it has no prefix), plus
    /// one per distinct prefix. A binary fuse filter records its key count,
    /// which must not exceed this.
    pub fn point_filter_max_entries(&self) -> u64 {
        let prefixes = self.prefix_filter.as_ref().map_or(0, |p| p.prefixes);
        self.distinct_user_keys.saturating_add(prefixes)
    }

    /// The encoded block (without trailer).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(80 + self.smallest.len() + self.largest.len());
        out.extend_from_slice(&self.format_version.to_le_bytes());
        for field in [
            self.entries,
            self.deletions,
            self.distinct_user_keys,
            self.data_blocks,
            self.data_size,
            self.min_seq.0,
            self.max_seq.0,
            self.filter_bits_per_key.to_bits(),
        ] {
            out.extend_from_slice(&field.to_le_bytes());
        }
        out.extend_from_slice(&self.filter_probes.to_le_bytes());
        put_len_prefixed(&mut out, &self.smallest);
        put_len_prefixed(&mut out, &self.largest);
        if let Some(prefix) = &self.prefix_filter {
            let mut field = vec![u8::from(prefix.whole_keys) * WHOLE_KEYS];
            field.extend_from_slice(&prefix.prefixes.to_le_bytes());
            // Names are at most 255 bytes (checked when the extractor is made).
            let name = prefix.extractor.as_bytes();
            let name = name.get(..MAX_NAME_LEN).unwrap_or(name);
            field.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
            field.extend_from_slice(name);
            put_field(&mut out, TAG_PREFIX_FILTER, &field);
        }
        if let Some(range) = &self.range_filter {
            let mut field = Vec::with_capacity(24);
            range.handle.encode_to(&mut field);
            field.extend_from_slice(&range.bits_per_key.to_bits().to_le_bytes());
            put_field(&mut out, TAG_RANGE_FILTER, &field);
        }
        if let Some(handle) = &self.range_tombstones {
            let mut field = Vec::with_capacity(16);
            handle.encode_to(&mut field);
            put_field(&mut out, TAG_RANGE_TOMBSTONES, &field);
        }
        if let Some(keyspace) = &self.keyspace {
            let name = keyspace.name.as_bytes();
            let name = name.get(..usize::from(u8::MAX)).unwrap_or(name);
            let mut field = Vec::with_capacity(5 + name.len());
            field.extend_from_slice(&keyspace.id.to_le_bytes());
            field.push(u8::try_from(name.len()).unwrap_or(u8::MAX));
            field.extend_from_slice(name);
            put_field(&mut out, TAG_KEYSPACE, &field);
        }
        if let Some(handle) = &self.compression_dictionary {
            let mut field = Vec::with_capacity(16);
            handle.encode_to(&mut field);
            put_field(&mut out, TAG_COMPRESSION_DICTIONARY, &field);
        }
        if !self.blob_files.is_empty() {
            let mut field = Vec::with_capacity(4 + 8 * self.blob_files.len());
            let count = u32::try_from(self.blob_files.len()).unwrap_or(u32::MAX);
            field.extend_from_slice(&count.to_le_bytes());
            for number in &self.blob_files {
                field.extend_from_slice(&number.to_le_bytes());
            }
            put_field(&mut out, TAG_BLOB_FILES, &field);
        }
        out
    }

    /// Decodes and cross-checks a properties block whose trailer was verified.
    pub fn decode(block: &[u8], location: &BlockLocation<'_>) -> Result<TableProperties> {
        let properties = Self::decode_fields(block).map_err(|e| location.relocate(e))?;
        properties
            .check()
            .map_err(|detail| location.corruption(detail))?;
        Ok(properties)
    }

    fn decode_fields(block: &[u8]) -> Result<TableProperties> {
        let mut r = ByteReader::new(block, "properties");
        let mut properties = TableProperties {
            format_version: r.u32()?,
            entries: r.u64()?,
            deletions: r.u64()?,
            distinct_user_keys: r.u64()?,
            data_blocks: r.u64()?,
            data_size: r.u64()?,
            min_seq: SeqNo(r.u64()?),
            max_seq: SeqNo(r.u64()?),
            filter_bits_per_key: f64::from_bits(r.u64()?),
            filter_probes: r.u32()?,
            smallest: Bytes::copy_from_slice(r.len_prefixed()?),
            largest: Bytes::copy_from_slice(r.len_prefixed()?),
            prefix_filter: None,
            range_filter: None,
            range_tombstones: None,
            keyspace: None,
            compression_dictionary: None,
            blob_files: Vec::new(),
        };
        properties.decode_tagged(&mut r)?;
        r.finish()?;
        Ok(properties)
    }

    /// Reads the tagged fields up to the end of the block.
    fn decode_tagged(&mut self, r: &mut ByteReader<'_>) -> Result<()> {
        let mut last_tag: Option<u16> = None;
        while r.remaining() > 0 {
            let tag = r.u16()?;
            let len = usize::try_from(r.u32()?).unwrap_or(usize::MAX);
            let field = r.take(len)?;
            if last_tag.is_some_and(|last| tag <= last) {
                return Err(field_error(format!(
                    "field tag {tag} does not follow tag {} in increasing order",
                    last_tag.unwrap_or_default()
                )));
            }
            last_tag = Some(tag);
            let mut f = ByteReader::new(field, "properties field");
            match tag {
                TAG_PREFIX_FILTER => {
                    let flags = f.u8()?;
                    if flags & !WHOLE_KEYS != 0 {
                        return Err(field_error(format!(
                            "unknown prefix filter flags {flags:#x}"
                        )));
                    }
                    let prefixes = f.u64()?;
                    let name_len = usize::from(f.u8()?);
                    let name = std::str::from_utf8(f.take(name_len)?)
                        .map_err(|_| field_error("prefix extractor name is not UTF-8"))?;
                    self.prefix_filter = Some(PrefixFilterInfo {
                        extractor: name.to_string(),
                        whole_keys: flags & WHOLE_KEYS != 0,
                        prefixes,
                    });
                }
                TAG_RANGE_FILTER => {
                    let handle = BlockHandle::decode(&mut f)?;
                    let bits_per_key = f64::from_bits(f.u64()?);
                    self.range_filter = Some(RangeFilterInfo {
                        handle,
                        bits_per_key,
                    });
                }
                TAG_RANGE_TOMBSTONES => {
                    self.range_tombstones = Some(BlockHandle::decode(&mut f)?);
                }
                TAG_KEYSPACE => {
                    let id = f.u32()?;
                    let name_len = usize::from(f.u8()?);
                    let name = std::str::from_utf8(f.take(name_len)?)
                        .map_err(|_| field_error("keyspace name is not UTF-8"))?;
                    if id == 0 {
                        return Err(field_error("keyspace field of the default keyspace"));
                    }
                    self.keyspace = Some(TableKeyspace {
                        id,
                        name: name.to_string(),
                    });
                }
                TAG_COMPRESSION_DICTIONARY => {
                    self.compression_dictionary = Some(BlockHandle::decode(&mut f)?);
                }
                TAG_BLOB_FILES => {
                    let count = f.u32()? as usize;
                    if f.remaining() != count.saturating_mul(8) || count == 0 {
                        return Err(field_error(format!(
                            "blob files field of {count} files in {} bytes",
                            f.remaining()
                        )));
                    }
                    let mut numbers = Vec::with_capacity(count);
                    for _ in 0..count {
                        let number = f.u64()?;
                        if numbers.last().is_some_and(|&last| number <= last) {
                            return Err(field_error("blob file numbers not strictly increasing"));
                        }
                        numbers.push(number);
                    }
                    self.blob_files = numbers;
                }
                tag if tag >= FIRST_SKIPPABLE_TAG => continue,
                tag => return Err(field_error(format!("unknown field tag {tag}"))),
            }
            f.finish()?;
        }
        Ok(())
    }

    fn check(&self) -> std::result::Result<(), String> {
        if TableFormat::from_version(self.format_version).is_none() {
            return Err(format!("unknown format version {}", self.format_version));
        }
        if self.entries == 0 || self.data_blocks == 0 || self.distinct_user_keys == 0 {
            return Err("a table holds at least one entry in one block".into());
        }
        if self.deletions > self.entries || self.distinct_user_keys > self.entries {
            return Err(format!(
                "{} deletions and {} distinct keys cannot come from {} entries",
                self.deletions, self.distinct_user_keys, self.entries
            ));
        }
        if self.min_seq > self.max_seq || self.max_seq > SeqNo::MAX {
            return Err(format!(
                "impossible sequence range {}..={}",
                self.min_seq.0, self.max_seq.0
            ));
        }
        let bits = self.filter_bits_per_key;
        let no_filter = bits == 0.0 && self.filter_probes == 0;
        let filter = bits.is_finite()
            && (MIN_BITS_PER_KEY..=MAX_BITS_PER_KEY).contains(&bits)
            && (1..=MAX_PROBES).contains(&self.filter_probes);
        if !(no_filter || filter) {
            return Err(format!(
                "impossible filter geometry: {bits} bits per key, {} probes",
                self.filter_probes
            ));
        }
        self.check_fields(filter)?;
        let smallest =
            parse_internal_key(&self.smallest).map_err(|e| format!("smallest key: {e}"))?;
        let largest = parse_internal_key(&self.largest).map_err(|e| format!("largest key: {e}"))?;
        if compare_internal_keys(&self.smallest, &self.largest) == Ordering::Greater {
            return Err("smallest key sorts after largest key".into());
        }
        for seq in [smallest.seq, largest.seq] {
            if seq < self.min_seq || seq > self.max_seq {
                return Err(format!(
                    "key sequence {} outside the range {}..={}",
                    seq.0, self.min_seq.0, self.max_seq.0
                ));
            }
        }
        Ok(())
    }

    /// The tagged fields against the rest: a prefix filter needs a point
    /// filter, a name, and no more prefixes than keys; a range filter's bits
    /// lie within its builder's limits.
    fn check_fields(&self, point_filter: bool) -> std::result::Result<(), String> {
        if let Some(prefix) = &self.prefix_filter {
            if !point_filter {
                return Err("prefix filter without a filter".into());
            }
            if prefix.extractor.is_empty() {
                return Err("prefix filter without an extractor name".into());
            }
            if prefix.prefixes > self.distinct_user_keys {
                return Err(format!(
                    "{} prefixes cannot come from {} distinct keys",
                    prefix.prefixes, self.distinct_user_keys
                ));
            }
        }
        if let Some(range) = &self.range_filter {
            let bits = range.bits_per_key;
            if !(bits.is_finite()
                && (range::MIN_BITS_PER_KEY..=range::MAX_BITS_PER_KEY).contains(&bits))
            {
                return Err(format!("range filter of {bits} bits per key"));
            }
        }
        Ok(())
    }
}

/// Appends one tagged field.
fn put_field(out: &mut Vec<u8>, tag: u16, field: &[u8]) {
    out.extend_from_slice(&tag.to_le_bytes());
    // Fields are a few dozen bytes.
    out.extend_from_slice(&u32::try_from(field.len()).unwrap_or(u32::MAX).to_le_bytes());
    out.extend_from_slice(field);
}

fn field_error(detail: impl std::fmt::Display) -> Error {
    Error::corruption("properties field", detail)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::key::{internal_key, ValueKind};
    use crate::table::format::BlockKind;

    fn sample() -> TableProperties {
        TableProperties {
            format_version: crate::table::format::FORMAT_VERSION,
            entries: 10,
            deletions: 2,
            distinct_user_keys: 8,
            data_blocks: 3,
            data_size: 12345,
            min_seq: SeqNo(4),
            max_seq: SeqNo(40),
            filter_bits_per_key: 10.0,
            filter_probes: 6,
            smallest: internal_key(b"a", SeqNo(5), ValueKind::Put).into(),
            largest: internal_key(b"z", SeqNo(40), ValueKind::Delete).into(),
            prefix_filter: None,
            range_filter: None,
            range_tombstones: None,
            keyspace: None,
            compression_dictionary: None,
            blob_files: Vec::new(),
        }
    }

    /// A sample with both fields.
    fn sample_with_fields() -> TableProperties {
        TableProperties {
            format_version: crate::table::format::FORMAT_VERSION,
            prefix_filter: Some(PrefixFilterInfo {
                extractor: "siftdb.fixed:4".into(),
                whole_keys: false,
                prefixes: 3,
            }),
            range_filter: Some(RangeFilterInfo {
                handle: BlockHandle {
                    offset: 4096,
                    len: 77,
                },
                bits_per_key: 16.0,
            }),
            range_tombstones: Some(BlockHandle {
                offset: 4180,
                len: 12,
            }),
            compression_dictionary: Some(BlockHandle {
                offset: 4200,
                len: 1024,
            }),
            ..sample()
        }
    }

    fn loc() -> BlockLocation<'static> {
        BlockLocation::new("t.sst", BlockKind::Properties, 99)
    }

    #[test]
    fn round_trip() {
        let p = sample();
        assert_eq!(TableProperties::decode(&p.encode(), &loc()).unwrap(), p);
        let with_blobs = TableProperties {
            blob_files: vec![3, 9, 40],
            ..sample()
        };
        assert_eq!(
            TableProperties::decode(&with_blobs.encode(), &loc()).unwrap(),
            with_blobs
        );
        let unordered = TableProperties {
            blob_files: vec![9, 3],
            ..sample()
        };
        assert!(TableProperties::decode(&unordered.encode(), &loc()).is_err());
        let p = sample_with_fields();
        assert_eq!(TableProperties::decode(&p.encode(), &loc()).unwrap(), p);
        for only_one in [
            TableProperties {
                prefix_filter: None,
                ..sample_with_fields()
            },
            TableProperties {
                range_filter: None,
                ..sample_with_fields()
            },
        ] {
            let decoded = TableProperties::decode(&only_one.encode(), &loc()).unwrap();
            assert_eq!(decoded, only_one);
        }
    }

    #[test]
    fn fields_are_checked() {
        type Mutation = fn(&mut TableProperties);
        let cases: Vec<(Mutation, &str)> = vec![
            (
                |p| {
                    p.filter_bits_per_key = 0.0;
                    p.filter_probes = 0;
                },
                "without a filter",
            ),
            (
                |p| p.prefix_filter.as_mut().unwrap().extractor.clear(),
                "extractor name",
            ),
            (
                |p| p.prefix_filter.as_mut().unwrap().prefixes = 9,
                "prefixes cannot",
            ),
            (
                |p| p.range_filter.as_mut().unwrap().bits_per_key = 1.0,
                "range filter of",
            ),
        ];
        for (mutate, reason) in cases {
            let mut p = sample_with_fields();
            mutate(&mut p);
            let err = TableProperties::decode(&p.encode(), &loc())
                .unwrap_err()
                .to_string();
            assert!(err.contains(reason), "{reason}: {err}");
        }
        // Tags: an unknown required tag is refused, a skippable one skipped,
        // tags out of order refused, a field longer than its content refused.
        let base = sample().encode();
        let with = |tag: u16, field: &[u8]| {
            let mut p = sample();
            p.format_version = crate::table::format::FORMAT_VERSION;
            let mut bytes = p.encode();
            put_field(&mut bytes, tag, field);
            (p, bytes)
        };
        let (_, unknown) = with(7, b"x");
        let err = TableProperties::decode(&unknown, &loc()).unwrap_err();
        assert!(err.to_string().contains("unknown field tag 7"), "{err}");
        let (p, skippable) = with(FIRST_SKIPPABLE_TAG + 1, b"later");
        assert_eq!(TableProperties::decode(&skippable, &loc()).unwrap(), p);
        let mut twice = sample_with_fields().encode();
        put_field(&mut twice, TAG_PREFIX_FILTER, &[0; 10]);
        assert!(TableProperties::decode(&twice, &loc()).is_err());
        let mut with_fields = sample_with_fields();
        with_fields.range_filter = None;
        let mut long_field = with_fields.encode();
        put_field(&mut long_field, TAG_RANGE_FILTER, &[0; 25]);
        assert!(TableProperties::decode(&long_field, &loc()).is_err());
        let (_, flags) = with(TAG_PREFIX_FILTER, &[2, 0, 0, 0, 0, 0, 0, 0, 0, 1, b'x']);
        let err = TableProperties::decode(&flags, &loc()).unwrap_err();
        assert!(err.to_string().contains("flags"), "{err}");
        assert!(base.len() < sample_with_fields().encode().len());
    }

    #[test]
    fn contradictions_are_refused() {
        type Mutation = fn(&mut TableProperties);
        let cases: Vec<(Mutation, &str)> = vec![
            (|p| p.format_version = 11, "version"),
            (|p| p.format_version = 0, "version"),
            (|p| p.format_version = 9, "version"),
            (|p| p.entries = 0, "at least one"),
            (|p| p.deletions = 11, "deletions"),
            (|p| p.min_seq = SeqNo(41), "sequence range"),
            (|p| p.filter_probes = 0, "filter geometry"),
            (|p| p.filter_bits_per_key = f64::NAN, "filter geometry"),
            (|p| p.smallest = Bytes::from_static(b"x"), "smallest key"),
            (
                |p| std::mem::swap(&mut p.smallest, &mut p.largest),
                "sorts after",
            ),
            (|p| p.max_seq = SeqNo(39), "outside the range"),
        ];
        for (mutate, reason) in cases {
            let mut p = sample();
            mutate(&mut p);
            let err = TableProperties::decode(&p.encode(), &loc())
                .unwrap_err()
                .to_string();
            assert!(
                err.contains(reason) && err.contains("offset 99"),
                "{reason}: {err}"
            );
        }
    }

    #[test]
    fn truncation_and_trailing_bytes_are_refused() {
        // Cut at a field boundary it decodes with fewer fields (the
        // block's checksum is what catches that); never as the whole.
        let v3 = sample_with_fields();
        let bytes = v3.encode();
        for len in 0..bytes.len() {
            if let Ok(p) = TableProperties::decode(&bytes[..len], &loc()) {
                assert_ne!(p, v3);
            }
        }
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            assert!(TableProperties::decode(&bytes[..len], &loc()).is_err());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(TableProperties::decode(&long, &loc()).is_err());
    }
}
