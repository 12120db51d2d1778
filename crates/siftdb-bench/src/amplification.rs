//! Write and space amplification of a YCSB run, per engine.
//!
//! Owns: [`dir_bytes`] (the bytes of every file under an engine's
//! directory), [`Amplification`] and [`ycsb_amplification`], which turn a
//! run's YCSB phase reports and its directory into the two ratios: bytes
//! the process wrote ÷ bytes of keys and values put
//! ([`crate::written`]'s `wchar`, the same measure for every engine), and
//! bytes on disk ÷ bytes of the live records.
//! Must never: run inside a timed section, or count a phase twice.

use std::path::Path;

use serde_json::{json, Value};

use super::engine::Engine;
use super::phase::Workload;
use super::report::{fmt_mib, PhaseReport};
use super::written;
use super::ycsb_run::ycsb_record_bytes;

/// Bytes of every regular file under `dir` (symbolic links not followed):
/// what the engine keeps on disk — the blocks allocated to each file on
/// Unix (a journal sized ahead as a sparse file counts what it holds, a
/// preallocated log what it reserved), the file's length elsewhere.
pub fn dir_bytes(dir: &Path) -> Result<u64, String> {
    let mut total = 0u64;
    let mut pending = vec![dir.to_path_buf()];
    while let Some(at) = pending.pop() {
        let entries =
            std::fs::read_dir(&at).map_err(|e| format!("cannot read {}: {e}", at.display()))?;
        for entry in entries {
            let entry = entry.map_err(|e| format!("cannot read {}: {e}", at.display()))?;
            let kind = entry
                .file_type()
                .map_err(|e| format!("cannot stat {}: {e}", entry.path().display()))?;
            if kind.is_dir() {
                pending.push(entry.path());
            } else if kind.is_file() {
                // A file removed meanwhile (a compaction's input) no longer counts.
                total += entry.metadata().map_or(0, |m| allocated(&m));
            }
        }
    }
    Ok(total)
}

#[cfg(unix)]
fn allocated(metadata: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    metadata.blocks().saturating_mul(512)
}

#[cfg(not(unix))]
fn allocated(metadata: &std::fs::Metadata) -> u64 {
    metadata.len()
}

/// One engine's amplification at one moment of a YCSB run.
#[derive(Clone, Debug, PartialEq)]
pub struct Amplification {
    /// The engine's name.
    pub engine: String,
    /// When: `after ycsb-load`, `at the end`.
    pub at: String,
    /// Bytes of keys and values the phases so far put.
    pub user_bytes_put: u64,
    /// Bytes the process wrote over those phases (and the final flush);
    /// `None` where the kernel does not tell.
    pub bytes_written: Option<u64>,
    /// Bytes of keys and values of the live records (each record once, at
    /// its latest version).
    pub live_user_bytes: u64,
    /// Bytes of the engine's files.
    pub disk_bytes: u64,
}

impl Amplification {
    /// Bytes written ÷ bytes put.
    pub fn write_amplification(&self) -> Option<f64> {
        Some(self.bytes_written? as f64 / self.user_bytes_put.max(1) as f64)
    }

    /// Bytes on disk ÷ live bytes.
    pub fn space_amplification(&self) -> f64 {
        self.disk_bytes as f64 / self.live_user_bytes.max(1) as f64
    }

    /// One line for a person.
    pub fn to_line(&self) -> String {
        let write = match (self.write_amplification(), self.bytes_written) {
            (Some(amp), Some(written)) => format!(
                "write amplification {amp:.2} ({} written for {} put)",
                fmt_mib(written),
                fmt_mib(self.user_bytes_put)
            ),
            _ => "write amplification - (the kernel does not count writes here)".to_string(),
        };
        format!(
            "{} {}: {write}; space amplification {:.2} ({} on disk for {} live)",
            self.engine,
            self.at,
            self.space_amplification(),
            fmt_mib(self.disk_bytes),
            fmt_mib(self.live_user_bytes)
        )
    }

    /// One JSON object, `"kind": "amplification"`.
    pub fn to_json(&self) -> Value {
        json!({
            "kind": "amplification",
            "engine": self.engine,
            "at": self.at,
            "user_bytes_put": self.user_bytes_put,
            "bytes_written": self.bytes_written,
            "write_amplification": self.write_amplification(),
            "live_user_bytes": self.live_user_bytes,
            "disk_bytes": self.disk_bytes,
            "space_amplification": self.space_amplification(),
        })
    }
}

/// The amplification of `engine`, whose files are under `dir`, after the
/// YCSB phases of `reports` (this engine's, in the order they ran; other
/// phases are skipped). With `flush`, the engine first flushes and waits
/// for its background work, and the bytes that writes count too: the
/// memtable is then on disk like everything else.
pub fn ycsb_amplification<E: Engine + ?Sized>(
    engine: &E,
    dir: &Path,
    workload: &Workload,
    reports: &[PhaseReport],
    at: &str,
    flush: bool,
) -> Result<Amplification, String> {
    let ycsb: Vec<&PhaseReport> = reports.iter().filter(|r| r.phase.is_ycsb()).collect();
    let Some(last) = ycsb.last() else {
        return Err("no YCSB phase ran".to_string());
    };
    let mut bytes_written = ycsb.iter().map(|r| r.bytes_written).sum::<Option<u64>>();
    if flush {
        let before = written::bytes_written();
        engine.flush_and_wait()?;
        let flushed = before
            .zip(written::bytes_written())
            .map(|(b, a)| a.saturating_sub(b));
        bytes_written = bytes_written.zip(flushed).map(|(a, b)| a + b);
    }
    let records = workload.ycsb_state_after(last.phase)?.records;
    Ok(Amplification {
        engine: engine.name(),
        at: at.to_string(),
        user_bytes_put: ycsb.iter().filter_map(|r| r.user_bytes_put).sum(),
        bytes_written,
        live_user_bytes: records.saturating_mul(ycsb_record_bytes(workload.ycsb_value_len())),
        disk_bytes: dir_bytes(dir)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_bytes_adds_up_nested_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), [1u8; 10_000]).unwrap();
        std::fs::create_dir(dir.path().join("sub")).unwrap();
        std::fs::write(dir.path().join("sub/b"), [1u8; 5000]).unwrap();
        let written = dir_bytes(dir.path()).unwrap();
        assert!(
            (15_000..15_000 + 3 * 65_536).contains(&written),
            "{written}"
        );
        // A sparse file counts the blocks it holds, not its length.
        let sparse = std::fs::File::create(dir.path().join("sparse")).unwrap();
        sparse.set_len(64 << 20).unwrap();
        assert!(dir_bytes(dir.path()).unwrap() < 1 << 20);
        assert!(dir_bytes(&dir.path().join("missing")).is_err());
    }

    #[test]
    fn ratios_divide_what_they_say() {
        let a = Amplification {
            engine: "e".into(),
            at: "at the end".into(),
            user_bytes_put: 1000,
            bytes_written: Some(2500),
            live_user_bytes: 400,
            disk_bytes: 600,
        };
        assert_eq!(a.write_amplification(), Some(2.5));
        assert_eq!(a.space_amplification(), 1.5);
        assert!(a.to_line().contains("write amplification 2.50"));
        assert_eq!(a.to_json()["space_amplification"], 1.5);
    }
}
