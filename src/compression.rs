//! What an application chooses for how tables store their data blocks:
//! [`Compression`] and its check.
//!
//! Owns: the codecs an application can name and the range of each one's
//! level.
//! Must never: accept a level the encoder would refuse or silently clamp
//! (`Compression::zstd` and `validate` turn it into `InvalidArgument`).

use crate::error::{Error, Result};

/// How data blocks are stored (`Options::compression`,
/// `Options::bottommost_compression`). Index, filter and properties blocks
/// are always stored raw. A block is stored raw whenever compressing it
/// does not save at least a quarter of it, whatever the choice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Compression {
    /// Every data block stored as it is.
    None,
    /// LZ4 per data block. Decompressing costs about a microsecond per
    /// 4 KiB block read from the file; cache hits pay nothing.
    #[default]
    Lz4,
    /// zstd per data block at `level` (made with [`Compression::zstd`]):
    /// smaller blocks than LZ4 on text-like data, at several times LZ4's
    /// cost to write and two to three times its cost to read a block from
    /// the file. The usual place for it is the bottommost level
    /// (`Options::bottommost_compression`), which holds most of the data
    /// and is rewritten least often.
    #[non_exhaustive]
    Zstd {
        /// The zstd level, within [`Compression::MIN_ZSTD_LEVEL`,
        /// `Compression::MAX_ZSTD_LEVEL`].
        level: i32,
    },
}

impl Compression {
    /// The fastest zstd level accepted.
    pub const MIN_ZSTD_LEVEL: i32 = 1;
    /// The strongest zstd level accepted (zstd's own maximum).
    pub const MAX_ZSTD_LEVEL: i32 = 22;
    /// zstd's default level, a common choice for the bottommost level.
    pub const DEFAULT_ZSTD_LEVEL: i32 = 3;
    /// The smallest zstd dictionary
    /// `Options::bottommost_zstd_dictionary_bytes` accepts.
    pub const MIN_DICTIONARY_BYTES: usize = 256;
    /// The largest zstd dictionary accepted: 1 MiB.
    pub const MAX_DICTIONARY_BYTES: usize = 1 << 20;

    /// zstd at `level` (1 fastest … 22 smallest; 3 is zstd's default).
    /// `InvalidArgument` for a level outside that range.
    pub fn zstd(level: i32) -> Result<Compression> {
        let compression = Compression::Zstd { level };
        compression.validate()?;
        Ok(compression)
    }

    /// `InvalidArgument` when this is a zstd level out of range.
    pub(crate) fn validate(self) -> Result<()> {
        match self {
            Compression::Zstd { level }
                if !(Compression::MIN_ZSTD_LEVEL..=Compression::MAX_ZSTD_LEVEL)
                    .contains(&level) =>
            {
                Err(Error::invalid(format!(
                    "zstd level must be within [{}, {}], got {level}",
                    Compression::MIN_ZSTD_LEVEL,
                    Compression::MAX_ZSTD_LEVEL
                )))
            }
            _ => Ok(()),
        }
    }

    /// Whether this is zstd (at any level).
    pub(crate) fn is_zstd(self) -> bool {
        matches!(self, Compression::Zstd { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zstd_levels_are_checked() {
        for level in [1, 3, 22] {
            assert_eq!(
                Compression::zstd(level).unwrap(),
                Compression::Zstd { level }
            );
        }
        for level in [0, -1, 23, i32::MIN, i32::MAX] {
            let err = Compression::zstd(level).unwrap_err();
            assert!(err.to_string().contains("zstd level"), "{err}");
        }
        assert!(Compression::Lz4.validate().is_ok());
        assert!(Compression::None.validate().is_ok());
    }
}
