//! Data-block compression: LZ4 (the `lz4_flex` crate, its safe decoder),
//! zstd (`zstd_codec.rs`), and the rule that a block is stored raw when
//! compressing it does not pay.
//!
//! A compressed block is stored as `uncompressed length u32 LE ‖ LZ4 block`
//! or `‖ zstd frame` (`docs/format.md`, "Block trailer"); the trailer's
//! codec byte says which form a block has, under the trailer's checksum.
//!
//! Owns: [`compress_block`], [`decompress_block`], [`decompress`] (any
//! codec) and [`CompressionSampler`] (which blocks of a table are worth an
//! attempt, and the table's zstd encoder).
//! Must never: allocate from a length it has not checked — the claimed
//! uncompressed length is bounded by [`MAX_BLOCK_LEN`] and by what LZ4 can
//! expand the stored bytes to before the output buffer exists — or accept a
//! stream that decodes to any other length than the one claimed.

use crate::error::{Error, Result};
use crate::options::Compression;
use crate::table::format::{checked_uncompressed_len, Codec, COMPRESSED_LEN_PREFIX as LEN_PREFIX};
use crate::table::zstd_codec::{decompress_zstd, ZstdDictionary, ZstdEncoder};

/// What decompression errors name before the table layer locates them.
const WHAT: &str = "compressed block";

pub use crate::table::format::MAX_BLOCK_LEN;

/// LZ4 expands at most 255 output bytes per input byte (a match length grows
/// by 255 per extra length byte), so a stored block of `n` bytes cannot
/// honestly claim more than `255 · n`.
const MAX_RATIO: usize = 255;

/// Encodes `raw` for storage as `compression` asks: returns `Codec::Lz4`
/// or `Codec::Zstd` with the stored form in `out` when it saves at least a
/// quarter of the block, else `Codec::Raw` (the caller stores `raw`). zstd
/// here makes an encoder per call; a table's builder keeps one
/// (`CompressionSampler`).
///
/// A quarter, not RocksDB's eighth: every read of a compressed block from
/// the file pays its decompression, and a block whose stored form still
/// needs most of a page gains no page in the operating system's cache (the
/// builder never lets a block that fits in a page straddle two). The
/// benchmark's data (random values behind 16-byte keys) compresses by about
/// 12%: stored raw, it reads one page per block and decompresses nothing.
pub fn compress_block(raw: &[u8], compression: Compression, out: &mut Vec<u8>) -> Codec {
    if let Compression::Zstd { level } = compression {
        let encoded = ZstdEncoder::new(level, None).is_some_and(|mut e| e.compress(raw, out));
        return pays(encoded, raw, out, Codec::Zstd);
    }
    if compression != Compression::Lz4 || raw.len() > MAX_BLOCK_LEN {
        return Codec::Raw;
    }
    let Ok(len) = u32::try_from(raw.len()) else {
        return Codec::Raw;
    };
    out.clear();
    out.resize(
        LEN_PREFIX + lz4_flex::block::get_maximum_output_size(raw.len()),
        0,
    );
    let Some((prefix, body)) = out.split_first_chunk_mut::<LEN_PREFIX>() else {
        return Codec::Raw;
    };
    *prefix = len.to_le_bytes();
    let Ok(written) = lz4_flex::block::compress_into(raw, body) else {
        return Codec::Raw;
    };
    out.truncate(LEN_PREFIX + written);
    pays(true, raw, out, Codec::Lz4)
}

/// `codec` when the block was `encoded` into `out` and saves at least a
/// quarter of `raw`, else `Codec::Raw`.
fn pays(encoded: bool, raw: &[u8], out: &[u8], codec: Codec) -> Codec {
    if encoded && out.len() <= raw.len() - raw.len() / 4 {
        codec
    } else {
        Codec::Raw
    }
}

/// Attempts that found nothing to gain before a table only samples.
const FAILURES_BEFORE_SAMPLING: u32 = 8;
/// While sampling, one block in this many is attempted.
const SAMPLE_EVERY: u32 = 8;

/// Which data blocks of one table are worth a compression attempt: every
/// block, until `FAILURES_BEFORE_SAMPLING` attempts in a row stored raw;
/// then one block in `SAMPLE_EVERY` until an attempt pays again. Data
/// that does not compress (the benchmark's random values, already
/// compressed payloads) then costs one LZ4 pass per eight blocks instead of
/// one per block; data that starts compressing again is noticed within
/// eight blocks. Which codec a block gets changes, never what it holds.
#[derive(Debug, Default)]
pub struct CompressionSampler {
    /// Attempts in a row that stored the block raw.
    failures: u32,
    /// Blocks passed over since the last attempt.
    skipped: u32,
    /// The table's zstd encoder (made at its first zstd block; `None`
    /// inside when zstd refused, and the blocks are stored raw), and
    /// whether it holds the table's dictionary.
    zstd: Option<(Option<ZstdEncoder>, bool)>,
}

impl CompressionSampler {
    /// From here on, zstd blocks use `dictionary` (the one the table
    /// stores), with the `ZstdDictionary` codec.
    pub fn use_dictionary(&mut self, level: i32, dictionary: &[u8]) {
        self.zstd = Some((ZstdEncoder::new(level, Some(dictionary)), true));
    }

    /// The encoding of one block by `compression`, an attempt made.
    fn attempt(&mut self, raw: &[u8], compression: Compression, out: &mut Vec<u8>) -> Codec {
        let Compression::Zstd { level } = compression else {
            return compress_block(raw, compression, out);
        };
        let (encoder, with_dictionary) = self
            .zstd
            .get_or_insert_with(|| (ZstdEncoder::new(level, None), false));
        let codec = if *with_dictionary {
            Codec::ZstdDictionary
        } else {
            Codec::Zstd
        };
        let encoded = encoder.as_mut().is_some_and(|e| e.compress(raw, out));
        pays(encoded, raw, out, codec)
    }

    /// [`compress_block`] for the table's next block, or `Codec::Raw`
    /// without an attempt when the table is being sampled.
    pub fn compress(&mut self, raw: &[u8], compression: Compression, out: &mut Vec<u8>) -> Codec {
        if compression == Compression::None {
            return Codec::Raw;
        }
        if self.failures >= FAILURES_BEFORE_SAMPLING && self.skipped + 1 < SAMPLE_EVERY {
            self.skipped += 1;
            return Codec::Raw;
        }
        self.skipped = 0;
        let codec = self.attempt(raw, compression, out);
        self.failures = match codec {
            Codec::Raw => self.failures.saturating_add(1),
            _ => 0,
        };
        codec
    }
}

/// The uncompressed bytes of a block stored as `Codec::Lz4` (`stored`
/// without its trailer). `Corruption` when the prefix is missing, claims
/// more than [`MAX_BLOCK_LEN`] or more than the stored bytes can expand to,
/// or the stream does not decode to exactly the claimed length.
pub fn decompress_block(stored: &[u8]) -> Result<Vec<u8>> {
    let corrupt = |detail: String| Error::corruption(WHAT, detail);
    let (claimed, body) = checked_uncompressed_len(stored, MAX_RATIO, WHAT)?;
    let mut out = vec![0u8; claimed];
    match lz4_flex::block::decompress_into(body, &mut out) {
        Ok(n) if n == claimed => Ok(out),
        Ok(n) => Err(corrupt(format!(
            "decodes to {n} bytes, the prefix claims {claimed}"
        ))),
        Err(e) => Err(corrupt(format!("lz4: {e}"))),
    }
}

/// The uncompressed bytes of a data block stored with `codec` (not
/// `Codec::Raw`), `dictionary` being the table's: `Corruption` as the
/// codec's decoder says, and for a dictionary block in a table without one.
pub fn decompress(
    stored: &[u8],
    codec: Codec,
    dictionary: Option<&ZstdDictionary>,
) -> Result<Vec<u8>> {
    match codec {
        Codec::Raw => Ok(stored.to_vec()),
        Codec::Lz4 => decompress_block(stored),
        Codec::Zstd => decompress_zstd(stored, None),
        Codec::ZstdDictionary => match dictionary {
            Some(dictionary) => decompress_zstd(stored, Some(dictionary)),
            None => Err(Error::corruption(
                WHAT,
                "a dictionary-compressed block in a table without a dictionary",
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compressible(n: usize) -> Vec<u8> {
        (0..n)
            .map(|i| b"abcdefgh"[i % 8] ^ u8::try_from(i / 512).unwrap())
            .collect()
    }

    fn noise(n: usize, seed: u64) -> Vec<u8> {
        let mut state = seed;
        (0..n)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                (state >> 56).to_le_bytes()[0]
            })
            .collect()
    }

    #[test]
    fn incompressible_tables_are_sampled_until_a_block_pays() {
        let mut sampler = CompressionSampler::default();
        let mut out = Vec::new();
        let mut attempted = Vec::new();
        for i in 0..40u64 {
            out.clear();
            assert_eq!(
                sampler.compress(&noise(4000, i), Compression::Lz4, &mut out),
                Codec::Raw
            );
            // An attempt leaves its output in `out`.
            attempted.push(!out.is_empty());
        }
        let expected: Vec<bool> = (0..40).map(|i| i < 8 || (i - 8) % 8 == 7).collect();
        assert_eq!(attempted, expected);
        // Compressible data from here: found at the next sample, then every
        // block is tried again.
        let mut codecs = Vec::new();
        for _ in 0..10 {
            codecs.push(sampler.compress(&compressible(4000), Compression::Lz4, &mut out));
        }
        let first = codecs.iter().position(|&c| c == Codec::Lz4).unwrap();
        assert!(first < 8, "{codecs:?}");
        assert!(
            codecs[first..].iter().all(|&c| c == Codec::Lz4),
            "{codecs:?}"
        );
        assert_eq!(
            sampler.compress(&compressible(4000), Compression::None, &mut out),
            Codec::Raw
        );
    }

    #[test]
    fn round_trips_and_stores_raw_when_it_does_not_pay() {
        let mut out = Vec::new();
        let raw = compressible(4000);
        assert_eq!(compress_block(&raw, Compression::Lz4, &mut out), Codec::Lz4);
        assert!(out.len() < 1000, "{}", out.len());
        assert_eq!(decompress_block(&out).unwrap(), raw);

        assert_eq!(
            compress_block(&raw, Compression::None, &mut out),
            Codec::Raw
        );
        let mut state = 7u64;
        let noise: Vec<u8> = (0..4000)
            .map(|_| {
                state = state.wrapping_mul(6364136223846793005).wrapping_add(1);
                (state >> 56).to_le_bytes()[0]
            })
            .collect();
        assert_eq!(
            compress_block(&noise, Compression::Lz4, &mut out),
            Codec::Raw
        );
        for tiny in [&b""[..], b"a", b"abcabcabcabc"] {
            assert_eq!(compress_block(tiny, Compression::Lz4, &mut out), Codec::Raw);
        }
    }

    #[test]
    fn hostile_prefixes_and_streams_are_corruption() {
        let mut out = Vec::new();
        let raw = compressible(4000);
        compress_block(&raw, Compression::Lz4, &mut out);
        let err = |bytes: &[u8]| decompress_block(bytes).unwrap_err();
        assert!(err(&out[..3]).is_corruption());
        // A claimed length beyond what the stream can expand to, or beyond
        // the cap, is refused before any allocation.
        let most = u32::try_from(out.len() - 4).unwrap() * 255;
        for claim in [u32::MAX, most + 1, 0] {
            let mut bad = out.clone();
            bad[..4].copy_from_slice(&claim.to_le_bytes());
            assert!(err(&bad).to_string().contains("claims"), "{claim}");
        }
        // A claim one off either way.
        for claim in [raw.len() - 1, raw.len() + 1] {
            let mut bad = out.clone();
            bad[..4].copy_from_slice(&u32::try_from(claim).unwrap().to_le_bytes());
            assert!(err(&bad).is_corruption(), "{claim}");
        }
        // Every truncation and every byte flip: an error or a block of the
        // claimed length, never a panic.
        for cut in 0..out.len() {
            let _ = decompress_block(&out[..cut]);
        }
        for i in 4..out.len() {
            let mut bad = out.clone();
            bad[i] ^= 0x41;
            if let Ok(decoded) = decompress_block(&bad) {
                assert_eq!(decoded.len(), raw.len());
            }
        }
    }
}
