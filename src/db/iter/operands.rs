//! Merge operands: gathering a key's operands down to the version they
//! apply to, applying a merge operator to them, and whether a range
//! tombstone deletes a version. Shared by scans and compaction.
//!
//! Owns: the rule that the newest version decides, unless a range
//! tombstone the snapshot sees deletes it, and that operands merge down
//! to a put, a delete or a deleted version. Must never: step past the
//! key whose operands it gathers (beyond the one entry that ends the
//! gathering), or invent a value when there is no operator (that is
//! `MergeFailed`).

use bytes::Bytes;

use super::merging::MergingIter;
use super::sources::InternalIterator;
use crate::error::{Error, Result};
use crate::key::{parse_internal_key, SeqNo, ValueKind};
use crate::options::MergeOperator;
use crate::range_tombstone::FragmentedTombstones;

/// The value of `key` from its `versions` the snapshot sees (oldest
/// first), as a backward scan reads them: the newest decides — unless a
/// range tombstone of `visible` deletes it — and a merge operand is merged
/// with the versions under it, down to a put, a delete or a deleted one.
pub(super) fn newest_version(
    visible: Option<&FragmentedTombstones>,
    operator: Option<&dyn MergeOperator>,
    key: &[u8],
    versions: &[(ValueKind, SeqNo, Bytes)],
) -> Result<Option<Bytes>> {
    let mut operands: Vec<Bytes> = Vec::new();
    let mut existing = None;
    for (kind, seq, value) in versions.iter().rev() {
        if deleted_by(visible, key, *seq) {
            break;
        }
        match kind {
            ValueKind::Put if operands.is_empty() => return Ok(Some(value.clone())),
            ValueKind::Put => {
                existing = Some(value.clone());
                break;
            }
            ValueKind::Delete => break,
            ValueKind::Merge => operands.push(value.clone()),
            // Scans read tables with their pointers resolved.
            ValueKind::Blob => return Err(unresolved_pointer(key)),
        }
    }
    if operands.is_empty() {
        return Ok(None);
    }
    operands.reverse();
    apply_merge(operator, key, existing.as_deref(), &operands).map(Some)
}

/// What lies under a key's newest merge operand (where `merged` stands),
/// as [`gather_operands`] finds it.
pub(crate) struct Gathered {
    /// The operands as (internal key, operand), newest first: the one the
    /// merge stood on, then each older one.
    pub operands: Vec<(Vec<u8>, Bytes)>,
    /// The value they apply to, when a put ended the gathering.
    pub existing: Option<Bytes>,
    /// Whether the gathering met what the operands apply to — a put, a
    /// delete, or a version `deleted` removes — rather than the key's end.
    pub reached: bool,
}

/// Gathers the merge operands of `key` from `merged`, which stands on its
/// newest visible version (an operand), down to the version they apply to;
/// versions newer than `snapshot` are passed over, and `deleted(seq)` says
/// whether a range tombstone removes the version at `seq`. Leaves `merged`
/// on the version that ended the gathering, or past the key. Shared by
/// scans (a key's value) and compaction (merged, or the operands kept).
pub(crate) fn gather_operands(
    merged: &mut MergingIter,
    key: &[u8],
    snapshot: SeqNo,
    deleted: impl Fn(SeqNo) -> bool,
) -> Result<Gathered> {
    let mut gathered = Gathered {
        operands: vec![(merged.key().to_vec(), merged.value())],
        existing: None,
        reached: false,
    };
    loop {
        merged.next();
        merged.status()?;
        if !merged.valid() {
            return Ok(gathered);
        }
        let parsed = parse_internal_key(merged.key())?;
        if parsed.user_key != key {
            return Ok(gathered);
        }
        if parsed.seq > snapshot {
            continue;
        }
        if deleted(parsed.seq) {
            gathered.reached = true;
            return Ok(gathered);
        }
        match parsed.kind {
            ValueKind::Merge => gathered
                .operands
                .push((merged.key().to_vec(), merged.value())),
            ValueKind::Put => {
                gathered.existing = Some(merged.value());
                gathered.reached = true;
                return Ok(gathered);
            }
            // Only a compaction without a merge operator reads pointers
            // unresolved (`compaction_blobs`): the operands are then kept
            // unmerged over the pointer, and the pointer is no value.
            ValueKind::Blob => {
                gathered.reached = true;
                return Ok(gathered);
            }
            ValueKind::Delete => {
                gathered.reached = true;
                return Ok(gathered);
            }
        }
    }
}

/// The error for a blob pointer met where a value was due.
fn unresolved_pointer(key: &[u8]) -> Error {
    Error::corruption(
        "merge",
        format!("an unresolved blob pointer under the operands of key {key:?}"),
    )
}

/// `operands` (oldest first) merged into `existing` by `operator`:
/// `MergeFailed` when there is no operator or it refuses them.
pub(crate) fn apply_merge(
    operator: Option<&dyn MergeOperator>,
    key: &[u8],
    existing: Option<&[u8]>,
    operands: &[Bytes],
) -> Result<Bytes> {
    let failed = |reason: &str| Error::MergeFailed {
        key: key.to_vec(),
        reason: reason.to_string(),
    };
    let operator = operator.ok_or_else(|| {
        failed("the key holds merge operands and its keyspace has no merge operator")
    })?;
    let operands: Vec<&[u8]> = operands.iter().map(|o| o.as_ref()).collect();
    operator
        .merge(key, existing, &operands)
        .map(Bytes::from)
        .ok_or_else(|| failed("the merge operator refused the operands"))
}

/// True when `visible` (range tombstones seen at a scan's snapshot)
/// deletes the version of `user_key` at `seq`.
#[inline]
pub(crate) fn deleted_by(
    visible: Option<&FragmentedTombstones>,
    user_key: &[u8],
    seq: SeqNo,
) -> bool {
    visible.is_some_and(|list| {
        list.covering_seq(user_key, SeqNo::MAX)
            .is_some_and(|deleted_at| deleted_at > seq)
    })
}
