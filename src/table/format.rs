//! The fixed parts of the table file: block handles, block kinds, the
//! per-block trailer and the footer (layout in `docs/format.md`, "Table file").
//!
//! Owns: how a block is located and checked before its bytes are handed to a
//! decoder — bounds against the file, then the checksum, then the type byte.
//! Must never: hand out a block's bytes whose handle runs past the blocks
//! region, whose trailer checksum failed, or whose type byte is not the one
//! the caller expected.

use std::fmt;

use crate::codec::{crc32_of, put_varint, ByteReader};
use crate::error::{Error, Result};

/// The table format version this code writes, and the only one it reads:
/// 6-byte block trailers recording each block's codec, data blocks that may
/// be compressed and page-aligned, tagged fields after the properties
/// block's largest key, the range filter block, varint entry headers with
/// each tag stored apart and packed, `varint64(seq << 1 | kind)`, in data
/// and index blocks, index entries' handles as two varints, and block
/// checksums that cover the version, a range tombstone block (from
/// version 8), and, from version 10, zstd blocks with a per-table
/// dictionary and entries of kind 3 whose value is a blob pointer, with the
/// blob files they name in properties field 6. Until the first release a
/// format change replaces the format
/// (see `docs/format.md`).
pub const FORMAT_VERSION: u32 = 10;
/// What [`crate::Error::UnsupportedVersion`] calls a table file.
pub const FILE_KIND: &str = "table";
/// The last eight bytes of every table file.
pub const MAGIC: [u8; 8] = *b"SIFTSST1";
/// The largest uncompressed data block a decoder accepts: 128 MiB, above any
/// block a builder makes (a 16 MiB `Options::block_size` target plus one
/// entry of the largest key and value, 64 KiB + 64 MiB). Larger blocks are
/// stored raw.
pub const MAX_BLOCK_LEN: usize = 128 << 20;

/// Bytes of the little-endian u32 uncompressed length that starts a
/// compressed block (LZ4 and zstd alike).
pub const COMPRESSED_LEN_PREFIX: usize = 4;

/// Splits a compressed block (`stored`, without its trailer) into its
/// checked uncompressed length and its body: `Corruption` (about `what`)
/// when the prefix is missing, or claims 0 bytes, more than
/// [`MAX_BLOCK_LEN`], or more than `max_ratio` times the body. Decoders
/// allocate only the length this returns.
pub fn checked_uncompressed_len<'a>(
    stored: &'a [u8],
    max_ratio: usize,
    what: &'static str,
) -> Result<(usize, &'a [u8])> {
    let corrupt = |detail: String| Error::corruption(what, detail);
    let Some((prefix, body)) = stored.split_first_chunk::<COMPRESSED_LEN_PREFIX>() else {
        return Err(corrupt(format!(
            "{} bytes, too short for the length prefix",
            stored.len()
        )));
    };
    let claimed = u32::from_le_bytes(*prefix) as usize;
    let bound = MAX_BLOCK_LEN.min(body.len().saturating_mul(max_ratio));
    if claimed == 0 || claimed > bound {
        return Err(corrupt(format!(
            "claims {claimed} uncompressed bytes from {} stored bytes (at most {bound})",
            body.len()
        )));
    }
    Ok((claimed, body))
}
/// Bytes of the footer at the end of the file.
pub const FOOTER_LEN: usize = 64;
/// Bytes of the trailer after every block: type byte, codec byte, crc32.
pub const TRAILER_LEN: usize = 6;
/// File-offset alignment of the filter block, so its 64-byte lines are
/// cache-line aligned when read into an aligned buffer or mapped.
pub const FILTER_ALIGN: u64 = 64;
/// The page size data blocks are aligned to when it saves a page per read
/// (see `docs/format.md`).
pub const PAGE: u64 = 4096;

/// What a block holds; stored as the first byte of its trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum BlockKind {
    /// Sorted entries: internal key → value.
    Data = 1,
    /// One entry per data block: separator key → block handle.
    Index = 2,
    /// The table's Bloom filter over user keys.
    Filter = 3,
    /// Table-wide facts: counts, key and sequence ranges, filter geometry.
    Properties = 4,
    /// The fixed-size footer (has no trailer; named in errors only).
    Footer = 5,
    /// The table's range filter over user keys.
    RangeFilter = 6,
    /// The table's range tombstones, fragmented (`range_tombstone.rs`).
    RangeTombstones = 7,
    /// The zstd dictionary the table's dictionary-compressed data blocks
    /// were made with.
    CompressionDictionary = 8,
}

impl BlockKind {
    /// Decodes a trailer type byte.
    pub fn from_u8(byte: u8) -> Option<BlockKind> {
        match byte {
            1 => Some(BlockKind::Data),
            2 => Some(BlockKind::Index),
            3 => Some(BlockKind::Filter),
            4 => Some(BlockKind::Properties),
            6 => Some(BlockKind::RangeFilter),
            7 => Some(BlockKind::RangeTombstones),
            8 => Some(BlockKind::CompressionDictionary),
            _ => None,
        }
    }

    /// Lower-case name used in messages.
    pub fn name(self) -> &'static str {
        match self {
            BlockKind::Data => "data",
            BlockKind::Index => "index",
            BlockKind::Filter => "filter",
            BlockKind::Properties => "properties",
            BlockKind::Footer => "footer",
            BlockKind::RangeFilter => "range filter",
            BlockKind::RangeTombstones => "range tombstone",
            BlockKind::CompressionDictionary => "compression dictionary",
        }
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a block's bytes are stored; the second byte of a trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Codec {
    /// The block itself.
    Raw = 0,
    /// `uncompressed length u32 LE ‖ LZ4 block` (data blocks only).
    Lz4 = 1,
    /// `uncompressed length u32 LE ‖ zstd frame` (data blocks only).
    Zstd = 2,
    /// `uncompressed length u32 LE ‖ zstd frame` made with the table's
    /// dictionary (data blocks of a table that has one only).
    ZstdDictionary = 3,
}

impl Codec {
    /// Decodes a trailer codec byte.
    pub fn from_u8(byte: u8) -> Option<Codec> {
        match byte {
            0 => Some(Codec::Raw),
            1 => Some(Codec::Lz4),
            2 => Some(Codec::Zstd),
            3 => Some(Codec::ZstdDictionary),
            _ => None,
        }
    }
}

/// Where a block lives: its offset and its length without the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BlockHandle {
    /// File offset of the block's first byte.
    pub offset: u64,
    /// Length of the block as stored (compressed when its codec says so),
    /// trailer excluded.
    pub len: u64,
}

impl BlockHandle {
    /// Appends `offset ‖ len`, both u64 LE.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    /// Appends the compact form of index entries' handles: the gap
    /// between `previous_end` (where the previous data block's trailer
    /// ends; 0 before the first block) and this block's offset — its page
    /// padding, usually under 128 bytes — then the length, as varints.
    /// `previous_end` must not lie past the offset.
    pub fn encode_compact(&self, previous_end: u64, out: &mut Vec<u8>) {
        put_varint(out, self.offset.saturating_sub(previous_end));
        put_varint(out, self.len);
    }

    /// Reads [`BlockHandle::encode_compact`]'s form after `previous_end`.
    /// `Corruption` when a varint is malformed or the offset overflows.
    pub fn decode_compact(reader: &mut ByteReader<'_>, previous_end: u64) -> Result<BlockHandle> {
        let gap = reader.varint(u64::MAX)?;
        let len = reader.varint(u64::MAX)?;
        let offset = previous_end.checked_add(gap).ok_or_else(|| {
            Error::corruption(
                "block handle",
                format!("a gap of {gap} bytes after offset {previous_end} overflows"),
            )
        })?;
        Ok(BlockHandle { offset, len })
    }

    /// Reads `offset ‖ len`.
    pub fn decode(reader: &mut ByteReader<'_>) -> Result<BlockHandle> {
        Ok(BlockHandle {
            offset: reader.u64()?,
            len: reader.u64()?,
        })
    }

    /// File offset just past the block's trailer, or `None` on overflow.
    pub fn end_with_trailer(&self) -> Option<u64> {
        self.offset
            .checked_add(self.len)?
            .checked_add(TRAILER_LEN as u64)
    }

    /// Bytes of the block with its trailer, or `None` when they do not fit
    /// in memory's address space.
    pub fn stored_len(&self) -> Option<usize> {
        usize::try_from(self.len.checked_add(TRAILER_LEN as u64)?).ok()
    }
}

/// The format version of a table: `FORMAT_VERSION` (10), the only one this
/// code reads (a footer of another is [`crate::Error::UnsupportedVersion`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct TableFormat(u32);

impl TableFormat {
    /// The version written and read by this code.
    pub const CURRENT: TableFormat = TableFormat(FORMAT_VERSION);

    /// The format of a footer's version field, if this code reads it.
    pub fn from_version(version: u32) -> Option<TableFormat> {
        (version == FORMAT_VERSION).then_some(TableFormat(version))
    }

    /// The version number.
    pub fn version(self) -> u32 {
        self.0
    }
}

/// Names a block in errors: "table 000012.sst data block at offset 8192".
/// Borrowed, so building one on the read path costs nothing.
#[derive(Debug, Clone, Copy)]
pub struct BlockLocation<'a> {
    /// The table's file name.
    pub file: &'a str,
    /// What the block was expected to be.
    pub kind: BlockKind,
    /// File offset of the block.
    pub offset: u64,
}

impl<'a> BlockLocation<'a> {
    /// A location in table `file`.
    pub fn new(file: &'a str, kind: BlockKind, offset: u64) -> BlockLocation<'a> {
        BlockLocation { file, kind, offset }
    }

    /// `Error::Corruption` naming this block.
    pub fn corruption(&self, detail: impl fmt::Display) -> Error {
        Error::corruption(self, detail)
    }

    /// Re-labels a decoder's `Corruption` ("block entry: 3 bytes short") with
    /// this block's location; other errors pass through.
    pub fn relocate(&self, err: Error) -> Error {
        match err {
            Error::Corruption { what, detail } => self.corruption(format!("{what}: {detail}")),
            other => other,
        }
    }
}

impl fmt::Display for BlockLocation<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "table {} {} block at offset {}",
            self.file, self.kind, self.offset
        )
    }
}

/// A trailer's checksum: crc32 over stored block ‖ type byte ‖ codec byte
/// ‖ offset (u64 LE) ‖ format version (u32 LE). The codec is vouched for
/// with the bytes it decodes, the offset catches a valid block at the wrong
/// place, and the version a block decoded under a format it was not written
/// in (only the checksum tells them apart when a damaged table's footer is
/// gone).
pub fn block_checksum(block: &[u8], type_byte: u8, codec_byte: u8, offset: u64) -> u32 {
    crc32_of(&[
        block,
        &[type_byte, codec_byte],
        &offset.to_le_bytes(),
        &FORMAT_VERSION.to_le_bytes(),
    ])
}

/// The trailer written after a block of `kind`, stored
/// with `codec`, at `offset`.
pub fn encode_trailer(
    block: &[u8],
    kind: BlockKind,
    codec: Codec,
    offset: u64,
) -> [u8; TRAILER_LEN] {
    let [c0, c1, c2, c3] = block_checksum(block, kind as u8, codec as u8, offset).to_le_bytes();
    [kind as u8, codec as u8, c0, c1, c2, c3]
}

/// Checks a block read with its trailer (`stored` = block ‖ trailer, read
/// from `location.offset`): the length, the checksum, then the type byte
/// (it must be `location.kind`) and the codec byte (known; `Raw` for every
/// block but data blocks). Returns the block's bytes without the trailer and
/// its codec.
pub fn check_block<'s>(
    stored: &'s [u8],
    location: &BlockLocation<'_>,
) -> Result<(&'s [u8], Codec)> {
    let Some((block, &[type_byte, codec_byte, c0, c1, c2, c3])) =
        stored.split_last_chunk::<TRAILER_LEN>()
    else {
        return Err(location.corruption("shorter than its trailer"));
    };
    let actual = block_checksum(block, type_byte, codec_byte, location.offset);
    let stored_crc = u32::from_le_bytes([c0, c1, c2, c3]);
    if actual != stored_crc {
        return Err(location.corruption(format!(
            "checksum mismatch: stored {stored_crc:#010x}, computed {actual:#010x}"
        )));
    }
    if type_byte != location.kind as u8 {
        return Err(location.corruption(format!(
            "found type byte {type_byte}, expected {} ({} block)",
            location.kind as u8, location.kind
        )));
    }
    let codec = Codec::from_u8(codec_byte)
        .filter(|&c| c == Codec::Raw || location.kind == BlockKind::Data)
        .ok_or_else(|| location.corruption(format!("codec {codec_byte} is not allowed here")))?;
    Ok((block, codec))
}

/// The footer: where the index, filter and properties blocks are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Footer {
    /// The index block.
    pub index: BlockHandle,
    /// The filter block, absent when the table was built without one.
    pub filter: Option<BlockHandle>,
    /// The properties block.
    pub properties: BlockHandle,
    /// The table's format version.
    pub format: TableFormat,
}

impl Footer {
    /// The 64-byte encoding: three handles, version, crc, magic.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.index.encode_to(&mut out);
        self.filter.unwrap_or_default().encode_to(&mut out);
        self.properties.encode_to(&mut out);
        out.extend_from_slice(&self.format.version().to_le_bytes());
        let crc = crc32_of(&[&out, &MAGIC]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&MAGIC);
        // 3 × 16 + 4 + 4 + 8 bytes: the whole footer.
        let mut fixed = [0u8; FOOTER_LEN];
        for (slot, byte) in fixed.iter_mut().zip(out) {
            *slot = byte;
        }
        fixed
    }

    /// Decodes the footer of a file of `file_len` bytes from its last
    /// bytes (`tail`: the last [`FOOTER_LEN`] bytes, or the whole file when
    /// shorter): magic, checksum, version, then every handle checked
    /// against the footer's own offset. A sound footer of a version this
    /// code does not read is [`Error::UnsupportedVersion`] whose path is
    /// `file_name` (the caller that opened the file puts the whole path in).
    pub fn decode(tail: &[u8], file_len: u64, file_name: &str) -> Result<Footer> {
        let Some(footer_offset) = file_len.checked_sub(FOOTER_LEN as u64) else {
            let location = BlockLocation::new(file_name, BlockKind::Footer, 0);
            return Err(location.corruption(format!(
                "file of {file_len} bytes is shorter than the {FOOTER_LEN}-byte footer"
            )));
        };
        let location = BlockLocation::new(file_name, BlockKind::Footer, footer_offset);
        let mut reader = ByteReader::new(tail, "table footer");
        let index = BlockHandle::decode(&mut reader)?;
        let filter = BlockHandle::decode(&mut reader)?;
        let properties = BlockHandle::decode(&mut reader)?;
        let version = reader.u32()?;
        let stored = reader.u32()?;
        let magic: [u8; 8] = reader.array()?;
        reader.finish()?;
        if magic != MAGIC {
            return Err(location.corruption(format!("bad magic {magic:02x?}: not a siftdb table")));
        }
        let body = tail.get(..52).unwrap_or_default();
        let actual = crc32_of(&[body, &magic]);
        if stored != actual {
            return Err(location.corruption(format!(
                "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        let Some(format) = TableFormat::from_version(version) else {
            return Err(Error::UnsupportedVersion {
                path: file_name.into(),
                kind: FILE_KIND,
                found: u64::from(version),
                supported: u64::from(FORMAT_VERSION),
            });
        };
        let filter = (filter != BlockHandle::default()).then_some(filter);
        let handles = [
            (BlockKind::Index, Some(index)),
            (BlockKind::Filter, filter),
            (BlockKind::Properties, Some(properties)),
        ];
        for (kind, handle) in handles {
            let Some(handle) = handle else { continue };
            let fits = handle
                .end_with_trailer()
                .is_some_and(|end| end <= footer_offset);
            if !fits {
                return Err(location.corruption(format!(
                    "{kind} handle (offset {}, length {}) runs past the footer at {footer_offset}",
                    handle.offset, handle.len
                )));
            }
        }
        Ok(Footer {
            index,
            filter,
            properties,
            format,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> &'static str {
        "t.sst"
    }

    fn decode(file: &[u8]) -> Result<Footer> {
        let tail = &file[file.len().saturating_sub(FOOTER_LEN)..];
        Footer::decode(tail, file.len() as u64, name())
    }

    #[test]
    fn compact_handles_count_from_the_previous_end() {
        let handle = BlockHandle {
            offset: 8192,
            len: 4090,
        };
        let mut out = Vec::new();
        handle.encode_compact(8100, &mut out);
        // A gap of 92 and a length of 4090: one varint byte and two.
        assert_eq!(out, [92, 0xfa, 0x1f]);
        let mut reader = ByteReader::new(&out, "index entry");
        assert_eq!(
            BlockHandle::decode_compact(&mut reader, 8100).unwrap(),
            handle
        );
        assert!(reader.finish().is_ok());
        // An offset past 2^64 is refused, as is a cut varint.
        let mut huge = Vec::new();
        put_varint(&mut huge, u64::MAX);
        put_varint(&mut huge, 1);
        let mut reader = ByteReader::new(&huge, "index entry");
        assert!(BlockHandle::decode_compact(&mut reader, 1)
            .unwrap_err()
            .is_corruption());
        let mut reader = ByteReader::new(&out[..2], "index entry");
        assert!(BlockHandle::decode_compact(&mut reader, 8100).is_err());
    }

    fn sample_file(format: TableFormat) -> (Vec<u8>, Footer) {
        let mut file = vec![0u8; 100];
        let footer = Footer {
            index: BlockHandle { offset: 0, len: 9 },
            filter: Some(BlockHandle {
                offset: 15,
                len: 19,
            }),
            properties: BlockHandle {
                offset: 40,
                len: 54,
            },
            format,
        };
        file.extend_from_slice(&footer.encode());
        (file, footer)
    }

    #[test]
    fn footer_round_trips_and_every_byte_flip_is_caught() {
        let (file, footer) = sample_file(TableFormat::CURRENT);
        assert_eq!(decode(&file).unwrap(), footer);
        for i in file.len() - FOOTER_LEN..file.len() {
            let mut bad = file.clone();
            bad[i] ^= 0x04;
            let err = decode(&bad).unwrap_err();
            assert!(err.is_corruption(), "byte {i}");
            assert!(err.to_string().contains("t.sst footer block at offset 100"));
        }
    }

    /// A sound footer of an older version (9: the last before this one,
    /// 1: the first) or of an unknown later one is refused, naming the
    /// file and both versions.
    #[test]
    fn an_older_or_unknown_version_is_refused_naming_it() {
        for found in [0, 1, 8, 9, 11, u32::MAX] {
            let (mut file, _) = sample_file(TableFormat::CURRENT);
            let at = file.len() - FOOTER_LEN + 48;
            file[at..at + 4].copy_from_slice(&found.to_le_bytes());
            let crc = crc32_of(&[&file[file.len() - 64..file.len() - 12], &MAGIC]);
            let crc_at = file.len() - 12;
            file[crc_at..crc_at + 4].copy_from_slice(&crc.to_le_bytes());
            let err = decode(&file).unwrap_err();
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
                (Some("t.sst"), "table", u64::from(found), 10)
            );
            assert_eq!(
                err.to_string(),
                format!("table t.sst has format version {found}; this build reads version 10 only")
            );
        }
    }

    #[test]
    fn footer_handles_must_end_before_the_footer() {
        let footer = Footer {
            index: BlockHandle { offset: 0, len: 9 },
            filter: None,
            properties: BlockHandle { offset: 9, len: 1 },
            format: TableFormat::CURRENT,
        };
        let mut file = vec![0u8; 15];
        file.extend_from_slice(&footer.encode());
        let err = decode(&file).unwrap_err().to_string();
        assert!(err.contains("properties handle"), "{err}");
        assert!(decode(&file[1..]).is_err());
        assert!(decode(&[0; 10]).is_err());
    }

    #[test]
    fn check_block_checks_length_checksum_type_codec_and_offset() {
        let block = b"hello block".to_vec();
        let loc = |kind, offset| BlockLocation::new(name(), kind, offset);
        for codec in [Codec::Raw, Codec::Lz4] {
            let mut stored = block.clone();
            stored.extend_from_slice(&encode_trailer(&block, BlockKind::Data, codec, 3));
            let (got, got_codec) = check_block(&stored, &loc(BlockKind::Data, 3)).unwrap();
            assert_eq!((got, got_codec), (&block[..], codec));
            // The same bytes at another offset fail: the offset is in the crc.
            let err = check_block(&stored, &loc(BlockKind::Data, 4))
                .unwrap_err()
                .to_string();
            assert!(err.contains("checksum mismatch"), "{err}");
            for i in 0..stored.len() {
                let mut bad = stored.clone();
                bad[i] ^= 0x10;
                assert!(check_block(&bad, &loc(BlockKind::Data, 3)).is_err());
            }
        }
        let mut stored = block.clone();
        stored.extend_from_slice(&encode_trailer(&block, BlockKind::Data, Codec::Raw, 3));
        let err = check_block(&stored, &loc(BlockKind::Index, 3))
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("found type byte 1, expected 2 (index block)"),
            "{err}"
        );
        // Only data blocks may be compressed; unknown codecs are refused.
        for (kind, codec_byte) in [(BlockKind::Index, 1u8), (BlockKind::Data, 9)] {
            let mut stored = block.clone();
            let crc = block_checksum(&block, kind as u8, codec_byte, 3);
            stored.extend_from_slice(&[kind as u8, codec_byte]);
            stored.extend_from_slice(&crc.to_le_bytes());
            let err = check_block(&stored, &loc(kind, 3)).unwrap_err().to_string();
            assert!(
                err.contains(&format!("codec {codec_byte} is not allowed")),
                "{err}"
            );
        }
        assert!(check_block(b"abc", &loc(BlockKind::Data, 3)).is_err());
    }
}
