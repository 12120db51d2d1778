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

/// The zstd level of `--compression zstd-bottom`: RocksDB's default for
/// zstd (its `kDefaultCompressionLevel` resolves to zstd's default, 3).
pub const ZSTD_BOTTOM_LEVEL: i32 = 3;

/// siftdb's `options` with `compression` and, when given, key-value
/// separation from `blob_threshold` bytes, and the settings that differ
/// from siftdb's defaults (none for LZ4 without separation).
pub fn siftdb_storage_options(
    options: Options,
    compression: CompressionChoice,
    blob_threshold: Option<u64>,
) -> Result<(Options, Vec<(String, String)>), String> {
    let mut settings = Vec::new();
    let options = match compression {
        CompressionChoice::Lz4 => options.compression(Compression::Lz4),
        CompressionChoice::ZstdBottom => {
            let zstd = Compression::zstd(ZSTD_BOTTOM_LEVEL).map_err(|e| e.to_string())?;
            settings.push((
                "bottommost_compression".to_string(),
                format!("zstd({ZSTD_BOTTOM_LEVEL})"),
            ));
            options
                .compression(Compression::Lz4)
                .bottommost_compression(zstd)
        }
    };
    let options = match blob_threshold {
        Some(bytes) => {
            let bytes = usize::try_from(bytes)
                .map_err(|_| format!("--blob-threshold {bytes}: too large for this machine"))?;
            settings.push(("blob_threshold".to_string(), bytes.to_string()));
            options.blob_threshold(Some(bytes))
        }
        None => options,
    };
    Ok((options, settings))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lz4_is_the_default_and_the_other_choices_reach_the_options() {
        let (_, settings) =
            siftdb_storage_options(Options::default(), CompressionChoice::Lz4, None).unwrap();
        assert!(settings.is_empty());
        let (options, settings) = siftdb_storage_options(
            Options::default(),
            CompressionChoice::ZstdBottom,
            Some(4096),
        )
        .unwrap();
        let shown = format!("{settings:?}");
        assert!(
            shown.contains("zstd(3)") && shown.contains("4096"),
            "{shown}"
        );
        let debug = format!("{options:?}");
        assert!(debug.contains("4096"), "{debug}");
        assert_eq!(CompressionChoice::default().name(), "lz4");
    }
}
