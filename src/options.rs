//! Tuning knobs for a database, set with builder methods.
//!
//! Owns: `Options` and its defaults.
//! Must never: accept a value that would make the engine misbehave silently —
//! `validate` turns nonsense into `InvalidArgument` before anything opens.

use std::fmt;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::fs::{OsFileSystem, SharedFs};

/// Database options. Start from `Options::default()` and chain builder methods.
#[derive(Clone)]
pub struct Options {
    pub(crate) bloom_bits_per_key: f64,
    pub(crate) memtable_bytes: usize,
    pub(crate) sync_writes: bool,
    pub(crate) block_size: usize,
    pub(crate) level0_compaction_trigger: usize,
    pub(crate) level0_stop_writes: usize,
    pub(crate) level1_bytes: u64,
    pub(crate) level_size_ratio: u64,
    pub(crate) table_target_bytes: u64,
    pub(crate) retry_interval: Duration,
    pub(crate) fs: SharedFs,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            bloom_bits_per_key: 10.0,
            memtable_bytes: 64 << 20,
            sync_writes: false,
            block_size: 4096,
            level0_compaction_trigger: 4,
            level0_stop_writes: 12,
            level1_bytes: 64 << 20,
            level_size_ratio: 10,
            table_target_bytes: 32 << 20,
            retry_interval: Duration::from_secs(1),
            fs: OsFileSystem::shared(),
        }
    }
}

impl fmt::Debug for Options {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Options")
            .field("bloom_bits_per_key", &self.bloom_bits_per_key)
            .field("memtable_bytes", &self.memtable_bytes)
            .field("sync_writes", &self.sync_writes)
            .field("block_size", &self.block_size)
            .field("level0_compaction_trigger", &self.level0_compaction_trigger)
            .field("level0_stop_writes", &self.level0_stop_writes)
            .field("level1_bytes", &self.level1_bytes)
            .field("level_size_ratio", &self.level_size_ratio)
            .field("table_target_bytes", &self.table_target_bytes)
            .field("retry_interval", &self.retry_interval)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Bloom filter bits per key for every table; 0 disables filters. Default 10.
    pub fn bloom_bits_per_key(mut self, bits: f64) -> Self {
        self.bloom_bits_per_key = bits;
        self
    }

    /// Memtable size at which it is flushed to a table. Default 64 MiB (as
    /// RocksDB's write buffer and fjall's memtable): fewer, larger flushes
    /// and less rewriting by compaction; a crash replays up to that much log.
    pub fn memtable_bytes(mut self, bytes: usize) -> Self {
        self.memtable_bytes = bytes;
        self
    }

    /// When true, every write fsyncs the log before returning. Default false.
    pub fn sync_writes(mut self, sync: bool) -> Self {
        self.sync_writes = sync;
        self
    }

    /// Target size of a table's data blocks. Default 4 KiB.
    pub fn block_size(mut self, bytes: usize) -> Self {
        self.block_size = bytes;
        self
    }

    /// Number of level-0 tables that triggers a compaction. Default 4.
    pub fn level0_compaction_trigger(mut self, tables: usize) -> Self {
        self.level0_compaction_trigger = tables;
        self
    }

    /// Number of level-0 tables at which writers wait for compaction. Default 12.
    pub fn level0_stop_writes(mut self, tables: usize) -> Self {
        self.level0_stop_writes = tables;
        self
    }

    /// Size budget of level 1; level n+1 gets `level_size_ratio` times level n. Default 64 MiB.
    pub fn level1_bytes(mut self, bytes: u64) -> Self {
        self.level1_bytes = bytes;
        self
    }

    /// Growth factor between levels. Default 10.
    pub fn level_size_ratio(mut self, ratio: u64) -> Self {
        self.level_size_ratio = ratio;
        self
    }

    /// Size at which compaction starts a new output table. Default 32 MiB.
    pub fn table_target_bytes(mut self, bytes: u64) -> Self {
        self.table_target_bytes = bytes;
        self
    }

    /// How long after a retryable failure (no space, EIO, EINTR) of
    /// background work or of the log it is first retried by itself; the wait
    /// doubles after each failed retry, up to 64 times this. Default 1 s
    /// (as RocksDB's `bgerror_resume_retry_interval`).
    pub fn retry_interval(mut self, interval: Duration) -> Self {
        self.retry_interval = interval;
        self
    }

    /// The file system the engine performs all I/O through (tests inject faults here).
    pub fn file_system(mut self, fs: SharedFs) -> Self {
        self.fs = fs;
        self
    }

    /// Checks every option; `InvalidArgument` names the first bad one.
    pub fn validate(&self) -> Result<()> {
        let b = self.bloom_bits_per_key;
        if !(b.is_finite() && (b == 0.0 || (0.5..=64.0).contains(&b))) {
            return Err(Error::invalid(format!(
                "bloom_bits_per_key must be 0 or within [0.5, 64], got {b}"
            )));
        }
        if self.memtable_bytes < 4096 {
            return Err(Error::invalid("memtable_bytes must be at least 4096"));
        }
        if !(256..=(1 << 24)).contains(&self.block_size) {
            return Err(Error::invalid("block_size must be within [256, 16 MiB]"));
        }
        if self.level0_compaction_trigger < 2 {
            return Err(Error::invalid(
                "level0_compaction_trigger must be at least 2",
            ));
        }
        if self.level0_stop_writes < self.level0_compaction_trigger {
            return Err(Error::invalid(
                "level0_stop_writes must be at least level0_compaction_trigger",
            ));
        }
        if self.level_size_ratio < 2 {
            return Err(Error::invalid("level_size_ratio must be at least 2"));
        }
        if self.retry_interval.is_zero() {
            return Err(Error::invalid("retry_interval must not be zero"));
        }
        if self.level1_bytes < 4096 || self.table_target_bytes < 4096 {
            return Err(Error::invalid(
                "level1_bytes and table_target_bytes must be at least 4096",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid_and_nonsense_is_refused() {
        Options::default().validate().unwrap();
        Options::default()
            .bloom_bits_per_key(0.0)
            .validate()
            .unwrap();
        for bad in [f64::NAN, -1.0, f64::INFINITY, 0.1, 100.0] {
            assert!(Options::default()
                .bloom_bits_per_key(bad)
                .validate()
                .is_err());
        }
        assert!(Options::default().memtable_bytes(10).validate().is_err());
        assert!(Options::default().block_size(1).validate().is_err());
    }
}
