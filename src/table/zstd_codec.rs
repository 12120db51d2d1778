//! zstd for data blocks (the `zstd` crate): the encoder a table builder
//! keeps, the decoder every read uses, the table's dictionary — trained
//! from samples of its data blocks, checked at open and prepared once —
//! and the training itself.
//!
//! A zstd block is stored as `uncompressed length u32 LE ‖ zstd frame`
//! (`docs/format.md`, "Block trailer"): the frame carries no content size,
//! checksum or dictionary id (the length prefix, the trailer's crc and the
//! codec byte say each).
//!
//! Owns: [`ZstdEncoder`], [`ZstdDictionary`], [`decompress_zstd`] and
//! [`train_dictionary`].
//! Must never: allocate from a length it has not checked (the claimed
//! length is bounded by [`MAX_BLOCK_LEN`] and by what zstd can expand the
//! stored bytes to, and the output buffer's capacity is the bound zstd
//! writes within — a frame's own declared size is never read), or accept a
//! frame that decodes to any other length than the one claimed.

use std::cell::RefCell;

use zstd::zstd_safe::{self, CParameter, DCtx, DDict};

use crate::error::{Error, Result};
use crate::table::format::{checked_uncompressed_len, MAX_BLOCK_LEN};

/// What errors name before the table layer locates them.
const WHAT: &str = "zstd block";

/// zstd expands a stored byte to at most this many: its densest form is an
/// RLE block, a 3-byte header and one byte for up to 128 KiB (32 Ki per
/// byte); every other block is larger for what it yields.
pub const MAX_ZSTD_RATIO: usize = 1 << 15;

/// A zstd encoder for one table's data blocks (its context reused from
/// block to block), with the table's dictionary when it has one.
pub struct ZstdEncoder {
    compressor: zstd::bulk::Compressor<'static>,
    /// The frame of the last block (reused).
    frame: Vec<u8>,
}

impl std::fmt::Debug for ZstdEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdEncoder").finish_non_exhaustive()
    }
}

impl ZstdEncoder {
    /// An encoder at `level` (checked by `Compression::validate`), using
    /// `dictionary` (a trained zstd dictionary) when given. `None` when zstd
    /// refuses: the caller stores its blocks raw.
    pub fn new(level: i32, dictionary: Option<&[u8]>) -> Option<ZstdEncoder> {
        let mut compressor =
            zstd::bulk::Compressor::with_dictionary(level, dictionary.unwrap_or_default()).ok()?;
        for flag in [
            CParameter::ContentSizeFlag(false),
            CParameter::ChecksumFlag(false),
            CParameter::DictIdFlag(false),
        ] {
            compressor.set_parameter(flag).ok()?;
        }
        Some(ZstdEncoder {
            compressor,
            frame: Vec::new(),
        })
    }

    /// `raw` as a stored zstd block in `out` (prefix and frame); false (and
    /// `out` unspecified) when it cannot be encoded.
    pub fn compress(&mut self, raw: &[u8], out: &mut Vec<u8>) -> bool {
        let Ok(len) = u32::try_from(raw.len()) else {
            return false;
        };
        if raw.is_empty() || raw.len() > MAX_BLOCK_LEN {
            return false;
        }
        self.frame.clear();
        self.frame.reserve(zstd_safe::compress_bound(raw.len()));
        if self
            .compressor
            .compress_to_buffer(raw, &mut self.frame)
            .is_err()
        {
            return false;
        }
        out.clear();
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&self.frame);
        true
    }
}

/// A table's zstd dictionary, checked and prepared for decoding once, at
/// open.
pub struct ZstdDictionary {
    prepared: DDict<'static>,
    /// Bytes of the dictionary as stored.
    len: usize,
}

impl std::fmt::Debug for ZstdDictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ZstdDictionary")
            .field("len", &self.len)
            .finish_non_exhaustive()
    }
}

impl ZstdDictionary {
    /// The dictionary of `bytes` (a dictionary block, its checksum already
    /// verified): `Corruption` unless it is a zstd dictionary (magic number
    /// and a non-zero id) of an accepted size that zstd loads.
    pub fn parse(bytes: &[u8]) -> Result<ZstdDictionary> {
        let corrupt = |detail: String| Error::corruption("zstd dictionary", detail);
        if !(crate::options::Compression::MIN_DICTIONARY_BYTES
            ..=crate::options::Compression::MAX_DICTIONARY_BYTES)
            .contains(&bytes.len())
        {
            return Err(corrupt(format!(
                "{} bytes, outside the sizes a table may hold",
                bytes.len()
            )));
        }
        if zstd_safe::get_dict_id_from_dict(bytes).is_none() {
            return Err(corrupt("not a zstd dictionary (magic or id)".to_string()));
        }
        let prepared =
            DDict::try_create(bytes).ok_or_else(|| corrupt("zstd does not load it".to_string()))?;
        if prepared.get_dict_id().is_none() {
            return Err(corrupt("zstd loads it without an id".to_string()));
        }
        Ok(ZstdDictionary {
            prepared,
            len: bytes.len(),
        })
    }
}

thread_local! {
    /// Each thread's decompression context (about 100 KiB; creating one per
    /// block would cost more than the block's decoding).
    static DECODER: RefCell<Option<DCtx<'static>>> = const { RefCell::new(None) };
}

/// The uncompressed bytes of a block stored as a zstd codec (`stored`
/// without its trailer), decoded with `dictionary` for the dictionary codec
/// and without one otherwise. `Corruption` when the prefix is missing or
/// claims more than [`MAX_BLOCK_LEN`] or than the stored bytes can expand
/// to, or the frame does not decode to exactly the claimed length.
pub fn decompress_zstd(stored: &[u8], dictionary: Option<&ZstdDictionary>) -> Result<Vec<u8>> {
    let corrupt = |detail: String| Error::corruption(WHAT, detail);
    let (claimed, frame) = checked_uncompressed_len(stored, MAX_ZSTD_RATIO, WHAT)?;
    // The capacity is the checked claim: zstd writes within it and fails a
    // frame that would need more.
    let mut out = Vec::with_capacity(claimed);
    let decoded = DECODER.with(|cell| {
        let Ok(mut slot) = cell.try_borrow_mut() else {
            return Err("decoder context busy".to_string());
        };
        if slot.is_none() {
            *slot = DCtx::try_create();
        }
        let Some(context) = slot.as_mut() else {
            return Err("zstd could not create a decoder context".to_string());
        };
        let result = match dictionary {
            Some(dictionary) => {
                context.decompress_using_ddict(&mut out, frame, &dictionary.prepared)
            }
            None => context.decompress(&mut out, frame),
        };
        result.map_err(|code| zstd_safe::get_error_name(code).to_string())
    });
    match decoded {
        Ok(n) if n == claimed && out.len() == claimed => Ok(out),
        Ok(n) => Err(corrupt(format!(
            "decodes to {n} bytes, the prefix claims {claimed}"
        ))),
        Err(e) => Err(corrupt(format!("zstd: {e}"))),
    }
}

/// A dictionary of at most `max_bytes` trained from `samples` (data blocks,
/// uncompressed); `None` when zstd finds too little to train on (the table
/// is then written without one).
pub fn train_dictionary<S: AsRef<[u8]>>(samples: &[S], max_bytes: usize) -> Option<Vec<u8>> {
    // zstd refuses to train on fewer than a handful of samples.
    if samples.len() < 8 {
        return None;
    }
    let dictionary = zstd::dict::from_samples(samples, max_bytes).ok()?;
    ZstdDictionary::parse(&dictionary).ok()?;
    Some(dictionary)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Records like a table's: a key, then a value of words from a small
    /// vocabulary (compressible, and more so with a dictionary).
    pub(crate) fn records(seed: u64, n: usize) -> Vec<u8> {
        const WORDS: [&str; 12] = [
            "alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india",
            "juliet", "kilo", "lima",
        ];
        let mut state = seed;
        let mut out = Vec::new();
        while out.len() < n {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            out.extend_from_slice(format!("user{:012}:", state >> 40).as_bytes());
            for i in 0..6 {
                let word = WORDS[((state >> (i * 5)) % 12) as usize];
                out.extend_from_slice(word.as_bytes());
                out.push(b' ');
            }
        }
        out.truncate(n);
        out
    }

    #[test]
    fn round_trips_without_and_with_a_dictionary() {
        let raw = records(1, 4000);
        let mut plain = ZstdEncoder::new(3, None).unwrap();
        let mut out = Vec::new();
        assert!(plain.compress(&raw, &mut out));
        assert!(out.len() < raw.len() / 2, "{}", out.len());
        assert_eq!(decompress_zstd(&out, None).unwrap(), raw);
        let plain_len = out.len();

        let samples: Vec<Vec<u8>> = (0..64).map(|i| records(100 + i, 4000)).collect();
        let dictionary = train_dictionary(&samples, 8 << 10).unwrap();
        let prepared = ZstdDictionary::parse(&dictionary).unwrap();
        let mut with = ZstdEncoder::new(3, Some(&dictionary)).unwrap();
        assert!(with.compress(&raw, &mut out));
        assert!(out.len() < plain_len, "{} vs {plain_len}", out.len());
        assert_eq!(decompress_zstd(&out, Some(&prepared)).unwrap(), raw);
        // Without its dictionary the frame is an error, never other bytes.
        if let Ok(decoded) = decompress_zstd(&out, None) {
            assert_eq!(decoded, raw);
        }
        // Every level from the fastest to the strongest.
        for level in [1, 19] {
            let mut encoder = ZstdEncoder::new(level, None).unwrap();
            assert!(encoder.compress(&raw, &mut out));
            assert_eq!(decompress_zstd(&out, None).unwrap(), raw);
        }
        // Too few samples: no dictionary.
        assert!(train_dictionary(&samples[..2], 8 << 10).is_none());
    }

    #[test]
    fn hostile_blocks_and_dictionaries_are_corruption() {
        let raw = records(2, 4000);
        let mut encoder = ZstdEncoder::new(3, None).unwrap();
        let mut out = Vec::new();
        assert!(encoder.compress(&raw, &mut out));
        let err = |bytes: &[u8]| decompress_zstd(bytes, None).unwrap_err();
        assert!(err(&out[..3]).is_corruption());
        let most = u32::try_from((out.len() - 4) * MAX_ZSTD_RATIO).unwrap();
        for claim in [u32::MAX, most + 1, 0] {
            let mut bad = out.clone();
            bad[..4].copy_from_slice(&claim.to_le_bytes());
            assert!(err(&bad).to_string().contains("claims"), "{claim}");
        }
        for claim in [raw.len() - 1, raw.len() + 1] {
            let mut bad = out.clone();
            bad[..4].copy_from_slice(&u32::try_from(claim).unwrap().to_le_bytes());
            assert!(err(&bad).is_corruption(), "{claim}");
        }
        for cut in 0..out.len() {
            let _ = decompress_zstd(&out[..cut], None);
        }
        for i in 4..out.len() {
            let mut bad = out.clone();
            bad[i] ^= 0x41;
            if let Ok(decoded) = decompress_zstd(&bad, None) {
                assert_eq!(decoded.len(), raw.len());
            }
        }

        let samples: Vec<Vec<u8>> = (0..64).map(|i| records(200 + i, 4000)).collect();
        let dictionary = train_dictionary(&samples, 4 << 10).unwrap();
        for bad in [
            &dictionary[..100],
            &[0u8; 4096][..],
            &vec![7u8; 2 << 20][..],
        ] {
            assert!(ZstdDictionary::parse(bad).unwrap_err().is_corruption());
        }
        let mut wrong_magic = dictionary.clone();
        wrong_magic[0] ^= 1;
        assert!(ZstdDictionary::parse(&wrong_magic)
            .unwrap_err()
            .is_corruption());
        // A damaged dictionary body either fails to load or decodes blocks
        // to the claimed length (the trailer's crc is what catches it in a
        // table), never a panic.
        let mut with = ZstdEncoder::new(3, Some(&dictionary)).unwrap();
        assert!(with.compress(&raw, &mut out));
        for i in (8..dictionary.len()).step_by(97) {
            let mut bad = dictionary.clone();
            bad[i] ^= 0x5a;
            if let Ok(prepared) = ZstdDictionary::parse(&bad) {
                if let Ok(decoded) = decompress_zstd(&out, Some(&prepared)) {
                    assert_eq!(decoded.len(), raw.len());
                }
            }
        }
    }
}
