//! How tables store what they hold: the compression of their data blocks
//! (per level: the bottommost level apart) and the separation of large
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

    /// The compression and dictionary bytes of a new table: the bottommost
    /// choice for a bottommost table when one is set.
    pub(crate) fn compression_for(&self, bottommost: bool) -> (Compression, usize) {
        match self.bottommost_compression.filter(|_| bottommost) {
            Some(compression) => (compression, self.bottommost_dictionary_bytes),
            None => (self.compression, 0),
        }
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
