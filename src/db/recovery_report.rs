//! What an open found while recovering: the public [`RecoveryReport`]
//! (`Db::recovery_report`) and how a damaged manifest was recovered.
//!
//! Owns: the report's fields and what each promises. Must never: hold
//! anything but plain values (it is kept in `DbInner` and cloned out).

/// What recovery found, for callers who want to know.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RecoveryReport {
    /// Log records replayed into the memtable.
    pub records_replayed: u64,
    /// A torn record dropped at the end of the newest log: (file, offset, reason).
    pub torn_tail: Option<(String, u64, String)>,
    /// The newest log ended with its close record: the last session ended
    /// with a clean close, not a crash (so no torn tail was allowed in it).
    pub closed_cleanly: bool,
    /// A log the manifest records as closed cleanly that no longer holds
    /// what the close left — cut short, its close record gone, or missing:
    /// (file, offset, what). Not a crash's torn tail but a loss:
    /// acknowledged writes after the offset (where its intact records end)
    /// may be gone. The database opened with the records before it
    /// (`Options::paranoid_checks` refuses the open instead).
    pub log_cut_short: Option<(String, u64, String)>,
    /// Tables the manifest names that could not be opened: (file, reason).
    /// The database opened without them (see `Options::paranoid_checks`):
    /// reads that need one fail with `Corruption` naming it.
    pub damaged_tables: Vec<(String, String)>,
    /// `MANIFEST` was damaged or missing, and the state was read from its
    /// second copy (`MANIFEST.copy`, whole and checksummed): which file,
    /// what was wrong with it, where the state came from. Only when every
    /// table the copy names opened and no log it covers was cut short —
    /// else the open is refused as for a damaged manifest. A read-write
    /// open then wrote a fresh `MANIFEST`.
    pub manifest_recovered: Option<ManifestRecovery>,
    /// Logs whose only damage was one byte of their file header (every
    /// byte of which follows from the file's number) or of their close
    /// record (every byte of which follows from the records before it),
    /// read with every record whole and that byte put back: (file, what).
    /// No write was lost.
    pub logs_mended: Vec<(String, String)>,
}

/// How an open recovered from a damaged or missing manifest (see
/// [`RecoveryReport::manifest_recovered`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ManifestRecovery {
    /// The file that could not be read (`MANIFEST`).
    pub damaged: String,
    /// What was wrong with it ("missing", or the checksum or check that
    /// failed).
    pub problem: String,
    /// The file the state was read from instead (`MANIFEST.copy`), whole
    /// and checksummed.
    pub recovered_from: String,
}
