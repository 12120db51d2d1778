//! The checks a write or a read makes of its arguments and of the
//! database before it starts: key and value sizes, a database opened
//! read-only, a merge into a keyspace without a merge operator.
//!
//! Owns: the typed errors those refusals return. Must never: refuse what
//! the public limits allow (`MAX_KEY_LEN`, `MAX_VALUE_LEN`), or let a
//! refused write reach the log.

use crate::db::inner::DbInner;
use crate::error::{Error, Result};

/// Why writes to a read-only database are refused.
pub(crate) fn read_only_refusal() -> Error {
    Error::ReadOnly {
        cause: Box::new(Error::invalid(
            "the database was opened read-only (Options::read_only, or as a secondary \
             instance): writes, flush, compact and resume are refused",
        )),
    }
}

pub(crate) fn check_key(key: &[u8]) -> Result<()> {
    if key.len() > crate::key::MAX_KEY_LEN {
        return Err(Error::invalid(format!(
            "key of {} bytes exceeds the maximum of {}",
            key.len(),
            crate::key::MAX_KEY_LEN
        )));
    }
    Ok(())
}

/// `ReadOnly` when the database was opened read-only.
pub(crate) fn check_writable(inner: &DbInner) -> Result<()> {
    if inner.opts.read_only {
        return Err(read_only_refusal());
    }
    Ok(())
}

/// `InvalidArgument` unless keyspace `id` has a merge operator: a merge
/// operand it could never merge is refused before it is written.
pub(crate) fn check_merge_operator(inner: &DbInner, id: u32) -> Result<()> {
    let tree = inner
        .tree_by_id(id)
        .ok_or_else(|| Error::invalid(format!("no keyspace with id {id}")))?;
    if tree.opts.load().merge_operator.is_none() {
        return Err(Error::invalid(format!(
            "a merge into keyspace {:?}, which has no merge operator (Options::merge_operator)",
            tree.name
        )));
    }
    Ok(())
}

pub(crate) fn check_value(value: &[u8]) -> Result<()> {
    if value.len() > crate::key::MAX_VALUE_LEN {
        return Err(Error::invalid(format!(
            "value of {} bytes exceeds the maximum of {}",
            value.len(),
            crate::key::MAX_VALUE_LEN
        )));
    }
    Ok(())
}
