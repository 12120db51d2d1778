//! A keyspace's stored settings: the part of its options that is data (how
//! its tables are built and filtered, its memtable's size), which the
//! manifest records so that a reopened keyspace keeps them.
//!
//! Owns: [`KeyspaceSettings`], its bytes inside a manifest keyspace record
//! (`docs/format.md`, "Manifest") and their check.
//! Must never: store code (a compaction filter, a merge operator, a custom
//! prefix extractor: those are given again at each open), or accept a value
//! [`Options::validate`] would refuse.
//!
//! ```text
//! 1      count c (u8, 0..=11)
//! ...    c settings, tags strictly increasing, each a tag u8 and its value:
//!        1 filter policy (14): rule u8 (0 bits per key, 1 level-aware),
//!          bits per key f64, flags u8 (bit 0 optimize for hits, bit 1
//!          static filters), static filters' first level u32 (0 without)
//!        2 block size u32        3 compression: kind u8 (0 none,
//!          1 LZ4, 2 zstd followed by its level u8, 1..=22)
//!        4 fixed prefix length u32 (0: no fixed extractor)
//!        5 whole-key filtering u8 (0, 1)   6 range filter bits f64
//!        7 memtable bytes u64   8 bottommost compression (as 3)
//!        9 bottommost zstd dictionary bytes u32
//!        10 blob threshold u64 (0: every value inline)
//!        11 compression per level: count n u8 (1..=16), then n
//!          compressions (each as 3)
//! ```

use crate::codec::ByteReader;
use crate::error::{Error, Result};
use crate::options::{Compression, Options};
use crate::prefix::PrefixExtractor;
use siftdb_filter::FilterPolicy;

/// The fewest bytes settings take (a count of 0).
pub const MIN_SETTINGS_LEN: usize = 1;

const TAG_FILTER_POLICY: u8 = 1;
const TAG_BLOCK_SIZE: u8 = 2;
const TAG_COMPRESSION: u8 = 3;
const TAG_PREFIX: u8 = 4;
const TAG_WHOLE_KEY_FILTERING: u8 = 5;
const TAG_RANGE_FILTER_BITS: u8 = 6;
const TAG_MEMTABLE_BYTES: u8 = 7;
const TAG_BOTTOMMOST_COMPRESSION: u8 = 8;
const TAG_BOTTOMMOST_DICTIONARY_BYTES: u8 = 9;
const TAG_BLOB_THRESHOLD: u8 = 10;
const TAG_COMPRESSION_PER_LEVEL: u8 = 11;

/// A keyspace's stored settings; an unset one takes the database's
/// [`Options`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct KeyspaceSettings {
    /// See `Options::filter_policy`.
    pub filter_policy: Option<FilterPolicy>,
    /// See `Options::block_size`.
    pub block_size: Option<u32>,
    /// See `Options::compression`.
    pub compression: Option<Compression>,
    /// `Some(len)`: the fixed prefix extractor of `len` bytes. `Some(0)`: no
    /// fixed one (none, or a custom extractor, which is given at each open;
    /// until then the keyspace has none).
    pub prefix_len: Option<u32>,
    /// See `Options::whole_key_filtering`.
    pub whole_key_filtering: Option<bool>,
    /// See `Options::range_filter_bits_per_key`.
    pub range_filter_bits_per_key: Option<f64>,
    /// See `Options::memtable_bytes`.
    pub memtable_bytes: Option<u64>,
    /// See `Options::bottommost_compression`.
    pub bottommost_compression: Option<Compression>,
    /// See `Options::bottommost_zstd_dictionary_bytes`.
    pub bottommost_dictionary_bytes: Option<u32>,
    /// See `Options::blob_threshold`: `Some(0)` keeps every value of the
    /// keyspace inline whatever the database's threshold.
    pub blob_threshold: Option<u64>,
    /// See `Options::compression_per_level`.
    pub compression_per_level: Option<Vec<Compression>>,
}

impl KeyspaceSettings {
    /// `base` with these settings applied (not validated).
    pub(crate) fn apply_to(&self, base: &Options) -> Options {
        let mut opts = base.clone();
        if let Some(policy) = self.filter_policy {
            opts.filter_policy = policy;
        }
        if let Some(bytes) = self.block_size {
            opts.block_size = bytes as usize;
        }
        if let Some(compression) = self.compression {
            opts.compression = compression;
        }
        match self.prefix_len {
            Some(0) => opts.prefix_extractor = None,
            Some(len) => {
                // A length `check` refused leaves the base's extractor.
                if let Ok(extractor) = PrefixExtractor::fixed(len as usize) {
                    opts.prefix_extractor = Some(extractor);
                }
            }
            None => {}
        }
        if let Some(whole) = self.whole_key_filtering {
            opts.whole_key_filtering = whole;
        }
        if let Some(bits) = self.range_filter_bits_per_key {
            opts.range_filter_bits_per_key = bits;
        }
        if let Some(bytes) = self.memtable_bytes {
            opts.memtable_bytes = usize::try_from(bytes).unwrap_or(usize::MAX);
        }
        if let Some(compression) = self.bottommost_compression {
            opts.bottommost_compression = Some(compression);
        }
        if let Some(bytes) = self.bottommost_dictionary_bytes {
            opts.bottommost_dictionary_bytes = bytes as usize;
        }
        match self.blob_threshold {
            Some(0) => opts.blob_threshold = None,
            Some(bytes) => opts.blob_threshold = Some(usize::try_from(bytes).unwrap_or(usize::MAX)),
            None => {}
        }
        if let Some(list) = &self.compression_per_level {
            opts.compression_per_level = Some(list.clone());
        }
        opts
    }

    /// An error naming the first setting [`Options::validate`] would
    /// refuse, whatever the database's options.
    pub fn check(&self) -> std::result::Result<(), String> {
        if let Some(len) = self.prefix_len.filter(|&len| len != 0) {
            PrefixExtractor::fixed(len as usize).map_err(|e| e.to_string())?;
        }
        if self
            .memtable_bytes
            .is_some_and(|bytes| usize::try_from(bytes).is_err())
        {
            return Err("memtable bytes do not fit this machine's usize".to_string());
        }
        self.apply_to(&Options::default())
            .validate()
            .map_err(|e| e.to_string())
    }

    /// Appends the settings' bytes (see the module docs) to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        let mut fields = Vec::with_capacity(64);
        let mut count = 0u8;
        let mut field = |fields: &mut Vec<u8>, tag: u8, value: &[u8]| {
            fields.push(tag);
            fields.extend_from_slice(value);
            count += 1;
        };
        if let Some(policy) = self.filter_policy {
            let mut value = Vec::with_capacity(14);
            value.push(u8::from(policy.is_level_aware()));
            value.extend_from_slice(&policy.average_bits_per_key().to_bits().to_le_bytes());
            let level = policy.static_filters_level();
            value.push(u8::from(policy.optimizes_for_hits()) | (u8::from(level.is_some()) << 1));
            value.extend_from_slice(&level.unwrap_or(0).to_le_bytes());
            field(&mut fields, TAG_FILTER_POLICY, &value);
        }
        if let Some(bytes) = self.block_size {
            field(&mut fields, TAG_BLOCK_SIZE, &bytes.to_le_bytes());
        }
        if let Some(compression) = self.compression {
            field(
                &mut fields,
                TAG_COMPRESSION,
                &compression_bytes(compression),
            );
        }
        if let Some(len) = self.prefix_len {
            field(&mut fields, TAG_PREFIX, &len.to_le_bytes());
        }
        if let Some(whole) = self.whole_key_filtering {
            field(&mut fields, TAG_WHOLE_KEY_FILTERING, &[u8::from(whole)]);
        }
        if let Some(bits) = self.range_filter_bits_per_key {
            field(
                &mut fields,
                TAG_RANGE_FILTER_BITS,
                &bits.to_bits().to_le_bytes(),
            );
        }
        if let Some(bytes) = self.memtable_bytes {
            field(&mut fields, TAG_MEMTABLE_BYTES, &bytes.to_le_bytes());
        }
        if let Some(compression) = self.bottommost_compression {
            let value = compression_bytes(compression);
            field(&mut fields, TAG_BOTTOMMOST_COMPRESSION, &value);
        }
        if let Some(bytes) = self.bottommost_dictionary_bytes {
            let value = bytes.to_le_bytes();
            field(&mut fields, TAG_BOTTOMMOST_DICTIONARY_BYTES, &value);
        }
        if let Some(bytes) = self.blob_threshold {
            field(&mut fields, TAG_BLOB_THRESHOLD, &bytes.to_le_bytes());
        }
        if let Some(list) = &self.compression_per_level {
            let value = compression_list_bytes(list);
            field(&mut fields, TAG_COMPRESSION_PER_LEVEL, &value);
        }
        out.push(count);
        out.extend_from_slice(&fields);
    }

    /// Reads settings written by [`KeyspaceSettings::encode_into`]:
    /// `Corruption` for an unknown or repeated tag, tags out of order, a
    /// flag or enum byte out of range, or a value [`KeyspaceSettings::check`]
    /// refuses.
    pub fn decode(reader: &mut ByteReader<'_>) -> Result<KeyspaceSettings> {
        let bad =
            |detail: String| Error::corruption("manifest", format!("keyspace settings: {detail}"));
        let count = reader.u8()?;
        let mut settings = KeyspaceSettings::default();
        let mut last_tag = 0u8;
        for _ in 0..count {
            let tag = reader.u8()?;
            if tag <= last_tag {
                return Err(bad(format!("tag {tag} after tag {last_tag}")));
            }
            last_tag = tag;
            match tag {
                TAG_FILTER_POLICY => {
                    let rule = reader.u8()?;
                    let bits = f64::from_bits(reader.u64()?);
                    let flags = reader.u8()?;
                    let level = reader.u32()?;
                    let policy = match rule {
                        0 => FilterPolicy::bits_per_key(bits),
                        1 => FilterPolicy::level_aware(bits),
                        other => return Err(bad(format!("filter rule {other}"))),
                    };
                    if flags & !0b11 != 0 || (flags & 0b10 == 0 && level != 0) {
                        return Err(bad(format!(
                            "filter flags {flags:#04x} with static level {level}"
                        )));
                    }
                    let policy = policy.optimize_for_hits(flags & 1 != 0);
                    settings.filter_policy = Some(if flags & 0b10 != 0 {
                        policy.static_filters_from_level(level)
                    } else {
                        policy.without_static_filters()
                    });
                }
                TAG_BLOCK_SIZE => settings.block_size = Some(reader.u32()?),
                TAG_COMPRESSION => settings.compression = Some(read_compression(reader)?),
                TAG_PREFIX => settings.prefix_len = Some(reader.u32()?),
                TAG_WHOLE_KEY_FILTERING => {
                    settings.whole_key_filtering = Some(match reader.u8()? {
                        0 => false,
                        1 => true,
                        other => return Err(bad(format!("whole-key filtering {other}"))),
                    })
                }
                TAG_RANGE_FILTER_BITS => {
                    settings.range_filter_bits_per_key = Some(f64::from_bits(reader.u64()?));
                }
                TAG_MEMTABLE_BYTES => settings.memtable_bytes = Some(reader.u64()?),
                TAG_BOTTOMMOST_COMPRESSION => {
                    settings.bottommost_compression = Some(read_compression(reader)?);
                }
                TAG_BOTTOMMOST_DICTIONARY_BYTES => {
                    settings.bottommost_dictionary_bytes = Some(reader.u32()?);
                }
                TAG_BLOB_THRESHOLD => settings.blob_threshold = Some(reader.u64()?),
                TAG_COMPRESSION_PER_LEVEL => {
                    settings.compression_per_level = Some(read_compression_list(reader)?);
                }
                other => return Err(bad(format!("unknown tag {other}"))),
            }
        }
        settings.check().map_err(bad)?;
        Ok(settings)
    }
}

/// The settings recorded, as `name=value` pairs (`-` when none is).
impl std::fmt::Display for KeyspaceSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut parts = Vec::new();
        if let Some(policy) = self.filter_policy {
            parts.push(format!("filter=\"{policy}\""));
        }
        if let Some(bytes) = self.block_size {
            parts.push(format!("block_size={bytes}"));
        }
        if let Some(compression) = self.compression {
            parts.push(format!("compression={compression:?}"));
        }
        match self.prefix_len {
            Some(0) => parts.push("prefix=none-stored".to_string()),
            Some(len) => parts.push(format!("prefix=fixed:{len}")),
            None => {}
        }
        if let Some(whole) = self.whole_key_filtering {
            parts.push(format!("whole_key_filtering={whole}"));
        }
        if let Some(bits) = self.range_filter_bits_per_key {
            parts.push(format!("range_filter_bits={bits}"));
        }
        if let Some(bytes) = self.memtable_bytes {
            parts.push(format!("memtable_bytes={bytes}"));
        }
        if let Some(compression) = self.bottommost_compression {
            parts.push(format!("bottommost_compression={compression:?}"));
        }
        if let Some(bytes) = self.bottommost_dictionary_bytes {
            parts.push(format!("bottommost_dictionary_bytes={bytes}"));
        }
        match self.blob_threshold {
            Some(0) => parts.push("blob_threshold=none".to_string()),
            Some(bytes) => parts.push(format!("blob_threshold={bytes}")),
            None => {}
        }
        if let Some(list) = &self.compression_per_level {
            parts.push(format!("compression_per_level={list:?}"));
        }
        if parts.is_empty() {
            f.write_str("-")
        } else {
            f.write_str(&parts.join(" "))
        }
    }
}

/// A compression setting's bytes: its kind, and a zstd level after it.
fn compression_bytes(compression: Compression) -> Vec<u8> {
    match compression {
        Compression::None => vec![0],
        Compression::Lz4 => vec![1],
        // Levels are within 1..=22 (`Compression::validate`).
        Compression::Zstd { level } => vec![2, u8::try_from(level).unwrap_or(0)],
    }
}

/// A compression-per-level setting's bytes: the count (levels never reach
/// 16, so `Options::validate` refuses longer lists and the count fits a
/// u8), then each compression.
fn compression_list_bytes(list: &[Compression]) -> Vec<u8> {
    let mut out = vec![u8::try_from(list.len()).unwrap_or(u8::MAX)];
    for &compression in list {
        out.extend_from_slice(&compression_bytes(compression));
    }
    out
}

/// A compression-per-level setting read back (at most 255 entries, so
/// nothing is allocated from an unchecked length); its count and levels
/// are checked with the rest of the settings.
fn read_compression_list(reader: &mut ByteReader<'_>) -> Result<Vec<Compression>> {
    let count = reader.u8()?;
    let mut list = Vec::with_capacity(usize::from(count));
    for _ in 0..count {
        list.push(read_compression(reader)?);
    }
    Ok(list)
}

/// A compression setting read back; its level is checked with the rest of
/// the settings.
fn read_compression(reader: &mut ByteReader<'_>) -> Result<Compression> {
    match reader.u8()? {
        0 => Ok(Compression::None),
        1 => Ok(Compression::Lz4),
        2 => Ok(Compression::Zstd {
            level: i32::from(reader.u8()?),
        }),
        other => Err(Error::corruption(
            "manifest",
            format!("keyspace settings: compression {other}"),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round_trip(settings: &KeyspaceSettings) -> Vec<u8> {
        let mut bytes = Vec::new();
        settings.encode_into(&mut bytes);
        let mut reader = ByteReader::new(&bytes, "test");
        let back = KeyspaceSettings::decode(&mut reader).unwrap();
        reader.finish().unwrap();
        assert_eq!(&back, settings);
        bytes
    }

    fn every_setting() -> KeyspaceSettings {
        KeyspaceSettings {
            filter_policy: Some(
                FilterPolicy::level_aware(12.5)
                    .optimize_for_hits(true)
                    .static_filters_from_level(2),
            ),
            block_size: Some(16 << 10),
            compression: Some(Compression::None),
            prefix_len: Some(6),
            whole_key_filtering: Some(false),
            range_filter_bits_per_key: Some(14.0),
            memtable_bytes: Some(1 << 20),
            bottommost_compression: Some(Compression::Zstd { level: 19 }),
            bottommost_dictionary_bytes: Some(16 << 10),
            blob_threshold: Some(4096),
            compression_per_level: Some(vec![
                Compression::None,
                Compression::Lz4,
                Compression::Zstd { level: 1 },
            ]),
        }
    }

    #[test]
    fn none_is_one_byte_and_every_setting_round_trips() {
        assert_eq!(round_trip(&KeyspaceSettings::default()), [0]);
        assert_eq!(KeyspaceSettings::default().to_string(), "-");
        assert_eq!(
            every_setting().to_string(),
            "filter=\"level-aware 12.5 bits/key, static filters from level 2, no filter on the last level\" \
             block_size=16384 compression=None prefix=fixed:6 whole_key_filtering=false \
             range_filter_bits=14 memtable_bytes=1048576 \
             bottommost_compression=Zstd { level: 19 } bottommost_dictionary_bytes=16384 \
             blob_threshold=4096 \
             compression_per_level=[None, Lz4, Zstd { level: 1 }]"
        );
        let bytes = round_trip(&every_setting());
        assert_eq!(
            bytes.len(),
            1 + (1 + 14) + (1 + 4) + 2 + (1 + 4) + 2 + 9 + 9 + 3 + 5 + 9 + (2 + 1 + 1 + 2)
        );
        assert_eq!(bytes[0], 11);
        for policy in [
            FilterPolicy::bits_per_key(10.0),
            FilterPolicy::bits_per_key(0.0),
            FilterPolicy::level_aware(8.0).static_filters_from_level(0),
        ] {
            round_trip(&KeyspaceSettings {
                filter_policy: Some(policy),
                prefix_len: Some(0),
                blob_threshold: Some(0),
                ..KeyspaceSettings::default()
            });
        }
    }

    #[test]
    fn applied_settings_override_the_base_and_unset_ones_keep_it() {
        let base = Options::default().prefix_extractor(PrefixExtractor::fixed(3).unwrap());
        let opts = every_setting().apply_to(&base);
        assert_eq!(opts.block_size, 16 << 10);
        assert_eq!(opts.compression, Compression::None);
        assert_eq!(opts.compression_for(1, false), (Compression::Lz4, 0));
        assert_eq!(
            opts.compression_for(5, false).0,
            Compression::Zstd { level: 1 }
        );
        assert_eq!(
            opts.compression_for(5, true).0,
            Compression::Zstd { level: 19 }
        );
        assert_eq!(
            opts.prefix_extractor.as_ref().map(|p| p.name().to_string()),
            Some("siftdb.fixed:6".to_string())
        );
        assert!(!opts.whole_key_filtering);
        assert_eq!(opts.memtable_bytes, 1 << 20);
        assert_eq!(opts.blob_threshold, Some(4096));
        let inline = KeyspaceSettings {
            blob_threshold: Some(0),
            ..KeyspaceSettings::default()
        };
        assert_eq!(
            inline
                .apply_to(&base.clone().blob_threshold(Some(64)))
                .blob_threshold,
            None
        );
        let unset = KeyspaceSettings::default().apply_to(&base);
        assert_eq!(unset.block_size, base.block_size);
        assert!(unset.prefix_extractor.is_some());
        let cleared = KeyspaceSettings {
            prefix_len: Some(0),
            ..KeyspaceSettings::default()
        }
        .apply_to(&base);
        assert!(cleared.prefix_extractor.is_none());
    }

    #[test]
    fn refuses_what_validate_refuses_and_malformed_bytes() {
        let mut bytes = Vec::new();
        every_setting().encode_into(&mut bytes);
        let decode = |bytes: &[u8]| {
            let mut reader = ByteReader::new(bytes, "test");
            KeyspaceSettings::decode(&mut reader).and_then(|s| reader.finish().map(|()| s))
        };
        assert!(decode(&bytes).is_ok());
        // Every truncation fails; a changed byte either fails or reads as
        // other valid settings, never panics.
        for len in 0..bytes.len() {
            assert!(decode(&bytes[..len]).is_err(), "cut at {len}");
        }
        for at in 0..bytes.len() {
            for bit in 0..8 {
                let mut flipped = bytes.clone();
                flipped[at] ^= 1 << bit;
                if let Ok(settings) = decode(&flipped) {
                    assert!(settings.check().is_ok());
                }
            }
        }
        for bad in [
            KeyspaceSettings {
                block_size: Some(100),
                ..KeyspaceSettings::default()
            },
            KeyspaceSettings {
                memtable_bytes: Some(10),
                ..KeyspaceSettings::default()
            },
            KeyspaceSettings {
                range_filter_bits_per_key: Some(f64::NAN),
                ..KeyspaceSettings::default()
            },
            KeyspaceSettings {
                filter_policy: Some(FilterPolicy::bits_per_key(1000.0)),
                ..KeyspaceSettings::default()
            },
            KeyspaceSettings {
                prefix_len: Some(u32::MAX),
                ..KeyspaceSettings::default()
            },
            KeyspaceSettings {
                compression_per_level: Some(Vec::new()),
                ..KeyspaceSettings::default()
            },
            KeyspaceSettings {
                compression_per_level: Some(vec![Compression::Lz4; 17]),
                ..KeyspaceSettings::default()
            },
            KeyspaceSettings {
                compression_per_level: Some(vec![Compression::Zstd { level: 23 }]),
                ..KeyspaceSettings::default()
            },
        ] {
            assert!(bad.check().is_err(), "{bad:?}");
            let mut bytes = Vec::new();
            bad.encode_into(&mut bytes);
            assert!(decode(&bytes).is_err(), "{bad:?}");
        }
        // Tags out of order, repeated, unknown; enum bytes out of range.
        for bytes in [
            &[2, 3, 0, 2, 0, 16, 0, 0][..],
            &[2, 3, 0, 3, 1][..],
            &[1, 12, 0][..],
            &[1, 10, 0, 0, 0, 0][..],
            &[1, 11, 2, 1][..],
            &[1, 11, 1, 3][..],
            &[1, 8, 2, 23][..],
            &[1, 9, 0, 1, 0, 0][..],
            &[1, 3, 2][..],
            &[1, 5, 2][..],
            &[1, 1, 0, 0, 0, 0, 0, 0, 0x24, 0x40, 0, 1, 0, 0, 0][..],
        ] {
            assert!(decode(bytes).is_err(), "{bytes:?}");
        }
    }
}
