//! The fixed parts of the table file: block handles, block kinds, the
//! per-block trailer and the footer (layout in `docs/format.md`, "Table file").
//!
//! Owns: how a block is located and checked before its bytes are handed to a
//! decoder — bounds against the file, then the checksum, then the type byte.
//! Must never: hand out a block's bytes whose handle runs past the blocks
//! region, whose trailer checksum failed, or whose type byte is not the one
//! the caller expected.

use bytes::Bytes;
use std::fmt;

use crate::codec::{crc32_of, ByteReader};
use crate::error::{Error, Result};

/// The one table format version this code reads and writes.
pub const FORMAT_VERSION: u32 = 1;
/// The last eight bytes of every table file.
pub const MAGIC: [u8; 8] = *b"SIFTSST1";
/// Bytes of the footer at the end of the file.
pub const FOOTER_LEN: usize = 64;
/// Bytes of the trailer after every block: type byte + crc32.
pub const TRAILER_LEN: usize = 5;
/// File-offset alignment of the filter block, so its 64-byte lines are
/// cache-line aligned in the memory map.
pub const FILTER_ALIGN: u64 = 64;

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
}

impl BlockKind {
    /// Decodes a trailer type byte.
    pub fn from_u8(byte: u8) -> Option<BlockKind> {
        match byte {
            1 => Some(BlockKind::Data),
            2 => Some(BlockKind::Index),
            3 => Some(BlockKind::Filter),
            4 => Some(BlockKind::Properties),
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
        }
    }
}

impl fmt::Display for BlockKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Where a block lives: its offset and its length without the trailer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub struct BlockHandle {
    /// File offset of the block's first byte.
    pub offset: u64,
    /// Length of the block, trailer excluded.
    pub len: u64,
}

/// Bytes of an encoded handle.
pub const HANDLE_LEN: usize = 16;

impl BlockHandle {
    /// Appends `offset ‖ len`, both u64 LE.
    pub fn encode_to(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.len.to_le_bytes());
    }

    /// The 16-byte encoding.
    pub fn encode(&self) -> [u8; HANDLE_LEN] {
        let mut out = [0u8; HANDLE_LEN];
        let (offset, len) = out.split_at_mut(8);
        offset.copy_from_slice(&self.offset.to_le_bytes());
        len.copy_from_slice(&self.len.to_le_bytes());
        out
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

/// The trailer's checksum: crc32 over block ‖ type byte ‖ offset (u64 LE).
/// Mixing in the offset catches a valid block read from the wrong place.
pub fn block_checksum(block: &[u8], type_byte: u8, offset: u64) -> u32 {
    crc32_of(&[block, &[type_byte], &offset.to_le_bytes()])
}

/// The trailer written after a block of `kind` stored at `offset`.
pub fn encode_trailer(block: &[u8], kind: BlockKind, offset: u64) -> [u8; TRAILER_LEN] {
    let crc = block_checksum(block, kind as u8, offset);
    let mut out = [0u8; TRAILER_LEN];
    let (type_byte, crc_bytes) = out.split_at_mut(1);
    type_byte.copy_from_slice(&[kind as u8]);
    crc_bytes.copy_from_slice(&crc.to_le_bytes());
    out
}

/// Whether [`read_block`] recomputes the trailer checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Checksum {
    /// Verify it (the first read of a block).
    Verify,
    /// It was verified before on this immutable, mapped file; check only
    /// bounds and the type byte.
    AlreadyVerified,
}

/// The contents of the block at `handle`, after checking that it and its
/// trailer end at or before `blocks_end` (the footer's offset), that the
/// checksum matches (unless `AlreadyVerified`), and that the type byte is
/// `location.kind`. The result shares `file`.
pub fn read_block(
    file: &Bytes,
    blocks_end: u64,
    handle: BlockHandle,
    location: &BlockLocation<'_>,
    checksum: Checksum,
) -> Result<Bytes> {
    let end = handle
        .end_with_trailer()
        .filter(|&end| end <= blocks_end && end <= file.len() as u64)
        .ok_or_else(|| {
            location.corruption(format!(
                "handle (offset {}, length {}) runs past the end of the blocks at {blocks_end}",
                handle.offset, handle.len
            ))
        })?;
    // Both fit in usize: they are at most file.len().
    let (start, end) = (
        usize::try_from(handle.offset).unwrap_or(usize::MAX),
        usize::try_from(end).unwrap_or(usize::MAX),
    );
    let trailer_start = end.saturating_sub(TRAILER_LEN);
    let block = file
        .get(start..trailer_start)
        .map(|b| file.slice_ref(b))
        .ok_or_else(|| location.corruption("block out of range"))?;
    let trailer = file
        .get(trailer_start..end)
        .ok_or_else(|| location.corruption("trailer out of range"))?;
    let mut reader = ByteReader::new(trailer, "block trailer");
    let type_byte = reader.u8()?;
    let stored = reader.u32()?;
    if checksum == Checksum::Verify {
        let actual = block_checksum(&block, type_byte, handle.offset);
        if actual != stored {
            return Err(location.corruption(format!(
                "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
    }
    if type_byte != location.kind as u8 {
        return Err(location.corruption(format!(
            "found type byte {type_byte}, expected {} ({} block)",
            location.kind as u8, location.kind
        )));
    }
    Ok(block)
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
}

impl Footer {
    /// The 64-byte encoding: three handles, version, crc, magic.
    pub fn encode(&self) -> [u8; FOOTER_LEN] {
        let mut out = Vec::with_capacity(FOOTER_LEN);
        self.index.encode_to(&mut out);
        self.filter.unwrap_or_default().encode_to(&mut out);
        self.properties.encode_to(&mut out);
        out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
        let crc = crc32_of(&[&out, &MAGIC]);
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(&MAGIC);
        let mut fixed = [0u8; FOOTER_LEN];
        fixed.copy_from_slice(&out);
        fixed
    }

    /// Decodes the footer at the end of `file`: magic, checksum, version,
    /// then every handle checked against the footer's own offset.
    pub fn decode(file: &[u8], file_name: &str) -> Result<Footer> {
        let Some(footer_offset) = file.len().checked_sub(FOOTER_LEN) else {
            let location = BlockLocation::new(file_name, BlockKind::Footer, 0);
            return Err(location.corruption(format!(
                "file of {} bytes is shorter than the {FOOTER_LEN}-byte footer",
                file.len()
            )));
        };
        let location = BlockLocation::new(file_name, BlockKind::Footer, footer_offset as u64);
        let bytes = file.get(footer_offset..).unwrap_or_default();
        let mut reader = ByteReader::new(bytes, "table footer");
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
        let body = bytes.get(..52).unwrap_or_default();
        let actual = crc32_of(&[body, &magic]);
        if stored != actual {
            return Err(location.corruption(format!(
                "checksum mismatch: stored {stored:#010x}, computed {actual:#010x}"
            )));
        }
        if version != FORMAT_VERSION {
            return Err(location.corruption(format!("unknown format version {version}")));
        }
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
                .is_some_and(|end| end <= footer_offset as u64);
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
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name() -> &'static str {
        "t.sst"
    }

    fn sample_file() -> (Vec<u8>, Footer) {
        let mut file = vec![0u8; 100];
        let footer = Footer {
            index: BlockHandle { offset: 0, len: 10 },
            filter: Some(BlockHandle {
                offset: 15,
                len: 20,
            }),
            properties: BlockHandle {
                offset: 40,
                len: 55,
            },
        };
        file.extend_from_slice(&footer.encode());
        (file, footer)
    }

    #[test]
    fn footer_round_trips_and_every_byte_flip_is_caught() {
        let (file, footer) = sample_file();
        assert_eq!(Footer::decode(&file, name()).unwrap(), footer);
        for i in file.len() - FOOTER_LEN..file.len() {
            let mut bad = file.clone();
            bad[i] ^= 0x04;
            let err = Footer::decode(&bad, name()).unwrap_err();
            assert!(err.is_corruption(), "byte {i}");
            assert!(err.to_string().contains("t.sst footer block at offset 100"));
        }
    }

    #[test]
    fn footer_handles_must_end_before_the_footer() {
        let footer = Footer {
            index: BlockHandle { offset: 0, len: 10 },
            filter: None,
            properties: BlockHandle { offset: 10, len: 1 },
        };
        let mut file = vec![0u8; 15];
        file.extend_from_slice(&footer.encode());
        let err = Footer::decode(&file, name()).unwrap_err().to_string();
        assert!(err.contains("properties handle"), "{err}");
        assert!(Footer::decode(&file[1..], name()).is_err());
        assert!(Footer::decode(&[0; 10], name()).is_err());
    }

    #[test]
    fn read_block_checks_bounds_checksum_type_and_offset() {
        let block = b"hello block".to_vec();
        let mut file = vec![7u8; 3];
        file.extend_from_slice(&block);
        file.extend_from_slice(&encode_trailer(&block, BlockKind::Data, 3));
        let file = Bytes::from(file);
        let handle = BlockHandle { offset: 3, len: 11 };
        let loc = |kind| BlockLocation::new(name(), kind, 3);
        let end = file.len() as u64;
        let got = read_block(&file, end, handle, &loc(BlockKind::Data), Checksum::Verify).unwrap();
        assert_eq!(&got[..], b"hello block");

        let err = read_block(&file, end, handle, &loc(BlockKind::Index), Checksum::Verify)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("found type byte 1, expected 2 (index block)"),
            "{err}"
        );
        assert!(read_block(
            &file,
            end - 1,
            handle,
            &loc(BlockKind::Data),
            Checksum::Verify
        )
        .is_err());
        let huge = BlockHandle {
            offset: u64::MAX - 2,
            len: 10,
        };
        assert!(read_block(&file, end, huge, &loc(BlockKind::Data), Checksum::Verify).is_err());

        // The same bytes and trailer at another offset fail: the offset is in the crc.
        let mut moved = vec![7u8; 4];
        moved.extend_from_slice(&file[3..]);
        let moved = Bytes::from(moved);
        let handle = BlockHandle { offset: 4, len: 11 };
        let err = read_block(
            &moved,
            moved.len() as u64,
            handle,
            &loc(BlockKind::Data),
            Checksum::Verify,
        )
        .unwrap_err()
        .to_string();
        assert!(err.contains("checksum mismatch"), "{err}");
    }
}
