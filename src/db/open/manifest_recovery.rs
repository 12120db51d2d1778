//! The state an open starts from: `MANIFEST`, or — when it is damaged or
//! missing — its second copy, `MANIFEST.copy`.
//!
//! Owns: the choice between the two files, what the open reports when it
//! read the copy (`ManifestRecovery`, in `recovery_report.rs`), and the checks that the copy's
//! state holds everything: every table it names opens, and no log it
//! covers was cut short.
//! Must never: open from the copy when either check fails, or when the
//! copy is damaged or missing too — the open is then refused, as for a
//! damaged manifest without a copy, naming the file and `siftdb repair`.
//! The copy is never older than `MANIFEST` (`write_manifest` replaces it
//! first), so its state is the durable one or, after a crash or an error
//! between the two replacements, the next one: its tables were durable
//! before it took effect, and nothing it names was removed.

use std::path::Path;

use crate::error::{Error, Result};
use crate::filename::{MANIFEST_COPY_FILE, MANIFEST_FILE};
use crate::fs::FileSystem;
use crate::manifest::{read_manifest, read_manifest_copy, ManifestState};

use super::repair_hint;
use crate::db::recovery_report::{ManifestRecovery, RecoveryReport};

/// True when `dir` holds a manifest or its copy: a database, whole or
/// recoverable.
pub(crate) fn manifest_exists(fs: &dyn FileSystem, dir: &Path) -> bool {
    fs.exists(&dir.join(MANIFEST_FILE)) || fs.exists(&dir.join(MANIFEST_COPY_FILE))
}

/// The state to open `dir` from, and how it was recovered when `MANIFEST`
/// could not be read; `None` when there is neither file. A damaged
/// manifest without a readable copy is `Corruption` naming both and
/// `siftdb repair`.
pub(crate) fn read_state(
    fs: &dyn FileSystem,
    dir: &Path,
) -> Result<Option<(ManifestState, Option<ManifestRecovery>)>> {
    let (damaged, problem) = match read_manifest(fs, dir) {
        Ok(Some(state)) => return Ok(Some((state, None))),
        Ok(None) => (None, "missing".to_string()),
        Err(e) if e.is_corruption() => {
            let problem = match &e {
                Error::Corruption { detail, .. } => detail.clone(),
                other => other.to_string(),
            };
            (Some(e), problem)
        }
        Err(e) => return Err(e),
    };
    let copy_problem = match read_manifest_copy(fs, dir) {
        Ok(Some(state)) => {
            return Ok(Some((
                state,
                Some(ManifestRecovery {
                    damaged: MANIFEST_FILE.to_string(),
                    problem,
                    recovered_from: MANIFEST_COPY_FILE.to_string(),
                }),
            )))
        }
        Ok(None) => match damaged {
            // No copy (a database last written by a build without copies):
            // the manifest's own error, as before copies existed.
            Some(e) => return Err(repair_hint(e, dir)),
            None => return Ok(None),
        },
        Err(e) if e.is_corruption() => e.to_string(),
        Err(e) => return Err(e),
    };
    Err(repair_hint(
        Error::corruption(
            format!("manifest {}", dir.join(MANIFEST_FILE).display()),
            format!("{problem}; its copy cannot be read either: {copy_problem}"),
        ),
        dir,
    ))
}

/// After the tables of a state read from the copy were opened and the logs
/// replayed into `report`: `Corruption` (the open refused) unless every
/// table the copy names opened and no log it covers was cut short — only
/// then is the copy known to hold everything. The report then records the
/// recovery.
pub(crate) fn check_recovered(
    recovery: Option<ManifestRecovery>,
    report: &mut RecoveryReport,
    dir: &Path,
) -> Result<()> {
    let Some(recovery) = recovery else {
        return Ok(());
    };
    let doubt = if let Some((name, reason)) = report.damaged_tables.first() {
        Some(format!(
            "its copy {MANIFEST_COPY_FILE} names table {name}, which cannot be opened \
             ({reason})"
        ))
    } else {
        report.log_cut_short.as_ref().map(|(name, _, what)| {
            format!("with its copy {MANIFEST_COPY_FILE}, log {name} reads cut short: {what}")
        })
    };
    if let Some(doubt) = doubt {
        return Err(repair_hint(
            Error::corruption(
                format!("manifest {}", dir.join(MANIFEST_FILE).display()),
                format!(
                    "{}; {doubt}: the copy cannot be trusted to hold everything",
                    recovery.problem
                ),
            ),
            dir,
        ));
    }
    report.manifest_recovered = Some(recovery);
    Ok(())
}
