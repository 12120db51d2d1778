//! The storage choices a run makes alike for every engine: compression
//! and key-value separation.
//!
//! Owns: [`CompressionChoice`], the one parser of `--compression` for
//! `siftdb bench` and siftdb-peers, and the mapping of both choices onto
//! siftdb's options ([`siftdb_storage_options`]); the peers crate maps
//! them onto RocksDB's and fjall's.
//! Must never: accept a choice siftdb cannot honour — a refused choice is
//! a clear error before any work, never a silently different setting.

use siftdb::{Compression, Options};

/// `--compression`: how every engine compresses its tables.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, clap::ValueEnum)]
pub enum CompressionChoice {
    /// LZ4 on every level: siftdb's and RocksDB's default (fjall: its
    /// default, none on levels 0 and 1, LZ4 below).
    #[default]
    Lz4,
    /// zstd on the bottommost level, LZ4 above (RocksDB's
    /// `bottommost_compression`).
    ZstdBottom,
}

impl CompressionChoice {
    /// The choice as the flag spells it.
    pub fn name(self) -> &'static str {
        match self {
            CompressionChoice::Lz4 => "lz4",
            CompressionChoice::ZstdBottom => "zstd-bottom",
        }
    }
}

/// siftdb's `options` with `compression` and, when given, key-value
/// separation from `blob_threshold` bytes, and the settings that differ
/// from siftdb's defaults (none for LZ4 without separation). Refuses what
/// this siftdb cannot do yet: zstd and key-value separation.
pub fn siftdb_storage_options(
    options: Options,
    compression: CompressionChoice,
    blob_threshold: Option<u64>,
) -> Result<(Options, Vec<(String, String)>), String> {
    let options = match compression {
        CompressionChoice::Lz4 => options.compression(Compression::Lz4),
        CompressionChoice::ZstdBottom => return Err(
            "--compression zstd-bottom: this siftdb has no zstd compression (Compression::Zstd); \
                 leave siftdb out of --engines or use lz4"
                .to_string(),
        ),
    };
    if let Some(bytes) = blob_threshold {
        return Err(format!(
            "--blob-threshold {bytes}: this siftdb has no key-value separation \
             (Options::blob_threshold); leave siftdb out of --engines or drop the flag"
        ));
    }
    Ok((options, Vec::new()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz4_is_the_default_and_the_rest_is_refused_clearly() {
        let (_, settings) =
            siftdb_storage_options(Options::default(), CompressionChoice::Lz4, None).unwrap();
        assert!(settings.is_empty());
        let err = siftdb_storage_options(Options::default(), CompressionChoice::ZstdBottom, None)
            .err()
            .unwrap();
        assert!(err.contains("zstd"), "{err}");
        let err = siftdb_storage_options(Options::default(), CompressionChoice::Lz4, Some(4096))
            .err()
            .unwrap();
        assert!(err.contains("blob-threshold 4096"), "{err}");
        assert_eq!(CompressionChoice::default().name(), "lz4");
    }
}
