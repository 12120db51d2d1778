//! Which state generation and which snapshot file of a node are live: one
//! value under `live` in the `raft.meta` keyspace.
//!
//! Owns: [`Pointer`], its read and its synced write.
//! Must never: be written before what it names is durable — the state
//! keyspace it names is in the same write-ahead log, earlier, so the synced
//! write of the pointer makes it durable too (a log is synced in order and
//! whole: a record survives a crash only with every record before it); the
//! snapshot file it names is fsynced and renamed, its directory fsynced,
//! before.
//!
//! Why a key and not a file of its own (the `CURRENT` file of earlier
//! versions): the new generation's data and the pointer to it share one
//! log, so one synced batch is the commit point of an install, and a crash
//! leaves the old pointer (and a half-built keyspace that open drops) or
//! the new one. A pointer file would need the new keyspace flushed or the
//! log synced first, then a file written, fsynced, renamed and its
//! directory fsynced: more steps and more fsyncs for the same guarantee.

use siftdb::{Db, Keyspace, WriteBatch, WriteOptions};

use crate::codec::{self, decode, encode, Result};
pub use crate::fs_util::sync_dir;

/// Which state keyspace (`state.<generation>`) and which snapshot file
/// (`snap-<snapshot>.snap`, none when 0) are live.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Pointer {
    /// The live state keyspace's generation.
    pub generation: u64,
    /// The live snapshot file's number; 0 when there is none.
    pub snapshot: u64,
}

impl Pointer {
    /// The pointer stored in `meta`, or `None` when the node has none yet.
    pub fn read(meta: &Keyspace) -> Result<Option<Pointer>> {
        match meta.get(codec::KEY_LIVE)? {
            Some(v) => decode(&v, "live state pointer").map(Some),
            None => Ok(None),
        }
    }

    /// Makes this the live pointer, synced: on disk, and with it every
    /// write logged before it, when this returns.
    pub fn store(&self, db: &Db, meta: &Keyspace) -> Result<()> {
        let mut batch = WriteBatch::new();
        batch.put_in(meta, codec::KEY_LIVE, encode(self, "live state pointer")?);
        db.write_with(batch, WriteOptions::new().sync(true))?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_replaces_and_survives_reopen() {
        let dir = tempfile::tempdir().unwrap();
        let a = Pointer {
            generation: 1,
            snapshot: 0,
        };
        let b = Pointer {
            generation: 2,
            snapshot: 5,
        };
        {
            let db = Db::open(dir.path()).unwrap();
            let meta = db.keyspace(codec::KEYSPACE_META).unwrap();
            assert_eq!(Pointer::read(&meta).unwrap(), None);
            a.store(&db, &meta).unwrap();
            assert_eq!(Pointer::read(&meta).unwrap(), Some(a));
            b.store(&db, &meta).unwrap();
        }
        let db = Db::open(dir.path()).unwrap();
        let meta = db.keyspace(codec::KEYSPACE_META).unwrap();
        assert_eq!(Pointer::read(&meta).unwrap(), Some(b));
    }

    #[test]
    fn encoding_is_pinned() {
        let p = Pointer {
            generation: 3,
            snapshot: 300,
        };
        assert_eq!(encode(&p, "t").unwrap(), [2, 3, 0xac, 0x02]);
    }
}
