//! How tables store what they hold: the compression of their data blocks
//! (per level, the bottommost level apart) and the separation of large
//! values into blob files.
//!
//! Owns: the builder methods of `Options` for compression and key-value
//! separation, and the choice of a new table's codec.
//! Must never: validate (that is `Options::validate`, one place for every
//! refusal) or read a file.

use crate::compression::Compression;
use crate::options::Options;

impl Options {
    /// How new tables store their data blocks. Default [`Compression::Lz4`]
    /// (a block that LZ4 does not shrink by an eighth is stored raw, so
    /// incompressible data costs only the attempt). Tables already written
    /// keep their blocks as they are; a table records each block's codec.
    pub fn compression(mut self, compression: Compression) -> Self {
        self.compression = compression;
        self
    }

    /// How tables written to the bottommost level store their data blocks
    /// (a compaction's output level ≥ 1 with no table in any level below
    /// it, and ingested tables); default `None`: [`Options::compression`]
    /// everywhere. The bottom holds most of the data and is rewritten least
    /// often, so a stronger codec there (`Compression::zstd(3)`, with LZ4
    /// above) buys most of zstd's space for little of its write cost; reads
    /// of bottom blocks from the file pay zstd's slower decompression.
    pub fn bottommost_compression(mut self, compression: Compression) -> Self {
        self.bottommost_compression = Some(compression);
        self
    }

    /// A zstd dictionary of up to `bytes` per bottommost table (0: none, the
    /// default; else within [`Compression::MIN_DICTIONARY_BYTES`,
    /// `Compression::MAX_DICTIONARY_BYTES`]
    /// and `bottommost_compression` must be zstd). It is trained from the
    /// table's first data blocks, buffered up to 100 × `bytes` (at most
    /// 8 MiB) before they are written, stored in the table and used for
    /// every block: small blocks of similar records compress much better.
    /// Costs the training per table, that buffer while a table is written,
    /// and the dictionary's memory per open table.
    pub fn bottommost_zstd_dictionary_bytes(mut self, bytes: usize) -> Self {
        self.bottommost_dictionary_bytes = bytes;
        self
    }

    /// How new tables store their data blocks, level by level (RocksDB's
    /// `compression_per_level`): entry `i` for tables written to level `i`
    /// (level 0: flushes), the last entry for every level past the list's
    /// end. It replaces [`Options::compression`]; a
    /// [`Options::bottommost_compression`], when set, still wins for the
    /// bottommost level. The common choice is `[None, None, Lz4, …,
    /// zstd(3)]` or `[None, Lz4, zstd(1), zstd(3)]`: the top levels are
    /// rewritten soon and read from memory, the bottom ones hold the bytes.
    /// `Options::validate` refuses an empty list, one of more than
    /// 16 entries (levels never reach 16) and a zstd level out of range.
    pub fn compression_per_level(mut self, compressions: Vec<Compression>) -> Self {
        self.compression_per_level = Some(compressions);
        self
    }

    /// The compression and dictionary bytes of a new table written to
    /// `level`: the bottommost choice for a bottommost table when one is
    /// set, else the level's entry of `compression_per_level` when that is
    /// set, else `compression`.
    pub(crate) fn compression_for(&self, level: usize, bottommost: bool) -> (Compression, usize) {
        if let Some(compression) = self.bottommost_compression.filter(|_| bottommost) {
            return (compression, self.bottommost_dictionary_bytes);
        }
        let per_level = self
            .compression_per_level
            .as_deref()
            .and_then(|list| list.get(level).or_else(|| list.last()).copied());
        (per_level.unwrap_or(self.compression), 0)
    }

    /// Whether levels `from` and `to` compress alike, the bottommost
    /// setting apart (a table moving down keeps it as before): a table
    /// moves down without a rewrite only then, so a level's tables carry
    /// its entry of `compression_per_level`.
    pub(crate) fn same_level_compression(&self, from: usize, to: usize) -> bool {
        self.compression_for(from, false) == self.compression_for(to, false)
    }

    /// Key-value separation: a flush or compaction writes the value of a
    /// put at least `bytes` long to a blob file beside its table, which
    /// holds a 24-byte pointer instead, so compactions move the pointer and
    /// not the value (WiscKey; RocksDB's `min_blob_size`). Merge operands
    /// stay inline. Reads resolve the pointer after filter, index and
    /// block. Default `None`: every value inline.
    pub fn blob_threshold(mut self, bytes: Option<usize>) -> Self {
        self.blob_threshold = bytes;
        self
    }

    /// Blob garbage collection (RocksDB's age cutoff): a compaction
    /// rewrites the values it meets that lie in the oldest `share` of the
    /// keyspace's blob files into its own new blob file, so an old file's
    /// live values move on and the file goes once no table points into it.
    /// Default 0.25; 0 turns collection off; within [0, 1].
    pub fn blob_gc_age_cutoff(mut self, share: f64) -> Self {
        self.blob_gc_age_cutoff = share;
        self
    }

    /// Blob garbage collection by garbage share: once `ratio` of a blob
    /// file's value bytes are garbage (values no table points to any more:
    /// overwritten, deleted, dropped by a compaction filter, or already
    /// moved on), every compaction that meets its live values rewrites them
    /// into its own new blob file, and when no level is over its budget a
    /// compaction is picked for a table that points into it. The file goes
    /// once no table lists it (and no snapshot or scan still reads a table
    /// that did). Each file's written and garbage bytes are kept in the
    /// manifest (`KeyspaceStats::blob_files`). Works beside
    /// [`Options::blob_gc_age_cutoff`]; a file either selects is
    /// collected. Default `Some(0.5)`; `None` turns it off; within (0, 1].
    pub fn blob_gc_garbage_ratio(mut self, ratio: Option<f64>) -> Self {
        self.blob_gc_garbage_ratio = ratio;
        self
    }
}
