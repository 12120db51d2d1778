//! Finding a table's blocks in its raw bytes, without footer or index:
//! where a block of the kinds looked for ends, by its trailer's checksum
//! (which covers the block's offset, so a block verifies only where it
//! was written).
//!
//! Owns: that search, shared by the salvage's scan and its dictionary walk.
//! Must never: decode a block (callers judge what it holds), or read past
//! `bytes`.

use crate::table::format::{BlockKind, Codec, FORMAT_VERSION, TRAILER_LEN};

fn le_u32(bytes: &[u8], at: usize) -> Option<u32> {
    bytes
        .get(at..)?
        .first_chunk()
        .map(|word| u32::from_le_bytes(*word))
}

/// The first block of one of `kinds` that starts at `start` in `bytes`:
/// the end of its stored bytes (where its trailer starts), its type and
/// codec. Found where the trailer's checksum holds, with one running
/// checksum over the block's bytes.
pub(super) fn find_block(
    bytes: &[u8],
    start: usize,
    kinds: &[BlockKind],
    mut accept: impl FnMut(usize, Codec) -> bool,
) -> Option<usize> {
    let last_end = bytes.len().checked_sub(TRAILER_LEN)?;
    let mut hasher = crc32fast::Hasher::new();
    let mut hashed = start;
    let offset = (start as u64).to_le_bytes();
    for end in start.checked_add(1)?..=last_end {
        let Some(&type_byte) = bytes.get(end) else {
            break;
        };
        if !kinds.iter().any(|&k| k as u8 == type_byte) {
            continue;
        }
        let codec_byte = bytes.get(end + 1).copied().unwrap_or(u8::MAX);
        let crc_at = end + 2;
        let Some(codec) = Codec::from_u8(codec_byte) else {
            continue;
        };
        let Some(stored_crc) = le_u32(bytes, crc_at) else {
            continue;
        };
        hasher.update(bytes.get(hashed..end).unwrap_or_default());
        hashed = end;
        let mut trial = hasher.clone();
        trial.update(&[type_byte, codec_byte]);
        trial.update(&offset);
        trial.update(&FORMAT_VERSION.to_le_bytes());
        if trial.finalize() == stored_crc && accept(end, codec) {
            return Some(end);
        }
    }
    None
}

/// `offset` rounded up to a multiple of `to`.
pub(super) fn align_up(offset: u64, to: u64) -> u64 {
    offset.div_ceil(to).saturating_mul(to)
}
