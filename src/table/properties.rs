//! The properties block: table-wide facts written once by the builder and
//! read at open.
//!
//! ```text
//! offset  size  field
//! 0       4     format version (u32, = 1)
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
//! ```
//!
//! Owns: [`TableProperties`] and its encoding.
//! Must never: accept a properties block whose fields contradict each other
//! (an empty table, smallest above largest, sequences out of range).

use std::cmp::Ordering;

use bytes::Bytes;

use crate::codec::{put_len_prefixed, ByteReader};
use crate::error::Result;
use crate::filter::theory::{MAX_BITS_PER_KEY, MAX_PROBES, MIN_BITS_PER_KEY};
use crate::key::{compare_internal_keys, parse_internal_key, SeqNo};
use crate::table::format::{BlockLocation, TableFormat};

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
        }
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
        let properties = TableProperties {
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
        };
        r.finish()?;
        Ok(properties)
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
        }
    }

    fn loc() -> BlockLocation<'static> {
        BlockLocation::new("t.sst", BlockKind::Properties, 99)
    }

    #[test]
    fn round_trip() {
        let p = sample();
        assert_eq!(TableProperties::decode(&p.encode(), &loc()).unwrap(), p);
    }

    #[test]
    fn contradictions_are_refused() {
        type Mutation = fn(&mut TableProperties);
        let cases: Vec<(Mutation, &str)> = vec![
            (|p| p.format_version = 3, "version"),
            (|p| p.format_version = 0, "version"),
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
        let bytes = sample().encode();
        for len in 0..bytes.len() {
            assert!(TableProperties::decode(&bytes[..len], &loc()).is_err());
        }
        let mut long = bytes.clone();
        long.push(0);
        assert!(TableProperties::decode(&long, &loc()).is_err());
    }
}
