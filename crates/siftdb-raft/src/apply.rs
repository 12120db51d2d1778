//! How one `apply` call's requests become a siftdb batch.
//!
//! Owns: [`Applier`] (the batch being gathered, with the writes and range
//! deletes it holds, so a request's reads see the requests before it),
//! exactly-once client sessions ([`SessionRecord`]: a repeated sequence
//! number answered with the first answer, idle sessions swept by the
//! entries' clock), and the commands' semantics on the state keys.
//! Must never: write to the keyspace itself (the state machine writes the
//! batch, with the applied position it reaches), or answer a read from
//! anything but the keyspace overlaid with the batch so far.

use std::collections::BTreeMap;
use std::ops::Bound;

use siftdb::{Keyspace, WriteBatch};

use crate::codec::{self, data_key, decode, encode, Result};
use crate::types::{Command, OpRef, Request, Response, SESSION_EXPIRY_MS};

/// A client session as the state keeps it: the last sequence number
/// applied, the entry clock when it was, and what it answered.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct SessionRecord {
    pub(crate) seq: u64,
    pub(crate) last_used_ms: u64,
    pub(crate) response: Response,
}

/// Removes the entries of `map` whose keys lie in `range`; their values,
/// in key order.
fn remove_range<V>(map: &mut BTreeMap<Vec<u8>, V>, range: (Bound<&[u8]>, Bound<&[u8]>)) -> Vec<V> {
    let keys: Vec<Vec<u8>> = map
        .range::<[u8], _>(range)
        .map(|(k, _)| k.clone())
        .collect();
    keys.iter().filter_map(|key| map.remove(key)).collect()
}

/// Ranges of state keys deleted by the batch being gathered, merged into
/// disjoint half-open ranges keyed by their start.
#[derive(Default)]
struct DeletedRanges(BTreeMap<Vec<u8>, Vec<u8>>);

impl DeletedRanges {
    /// Adds `[start, end)`, merged with the ranges it meets.
    fn insert(&mut self, mut start: Vec<u8>, mut end: Vec<u8>) {
        if let Some((before, before_end)) = self
            .0
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(start.as_slice())))
            .next_back()
        {
            if *before_end >= start {
                start.clone_from(before);
                end = end.max(before_end.clone());
            }
        }
        let met = remove_range(
            &mut self.0,
            (
                Bound::Included(start.as_slice()),
                Bound::Included(end.as_slice()),
            ),
        );
        for to in met {
            end = end.max(to);
        }
        self.0.insert(start, end);
    }

    /// Whether a range holds `key`.
    fn covers(&self, key: &[u8]) -> bool {
        self.0
            .range::<[u8], _>((Bound::Unbounded, Bound::Included(key)))
            .next_back()
            .is_some_and(|(_, end)| key < end.as_slice())
    }
}

/// Applies the requests of one `apply` call into a siftdb batch; its reads
/// (compare-and-swap, increment, sessions) see the writes of the requests
/// before them, also those not yet written to the keyspace. Applies are
/// serial (openraft calls `apply` one at a time), so a read-then-write is
/// atomic.
pub(crate) struct Applier<'a> {
    state: &'a Keyspace,
    batch: WriteBatch,
    /// State keys written to `batch` (`None`: deleted), for reads; a key
    /// here was written after every range in `deleted` that holds it.
    written: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
    /// What the range deletes in `batch` cover, for reads of the keys not
    /// in `written`.
    deleted: DeletedRanges,
}

impl<'a> Applier<'a> {
    pub(crate) fn new(state: &'a Keyspace) -> Applier<'a> {
        Applier {
            state,
            batch: WriteBatch::new(),
            written: BTreeMap::new(),
            deleted: DeletedRanges::default(),
        }
    }

    /// The batch so far, to be written now (later reads go to the
    /// keyspace).
    pub(crate) fn take_batch(&mut self) -> WriteBatch {
        self.written.clear();
        self.deleted = DeletedRanges::default();
        std::mem::take(&mut self.batch)
    }

    /// The size of the batch so far (the state machine writes it out
    /// past a bound, on an entry boundary).
    pub(crate) fn pending_bytes(&self) -> usize {
        self.batch.approximate_bytes()
    }

    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        if let Some(value) = self.written.get(key) {
            return Ok(value.clone());
        }
        if self.deleted.covers(key) {
            return Ok(None);
        }
        Ok(self.state.get(key)?.map(|v| v.to_vec()))
    }

    fn put(&mut self, key: Vec<u8>, value: &[u8]) {
        self.batch.put_in(self.state, &key, value);
        self.written.insert(key, Some(value.to_vec()));
    }

    fn delete(&mut self, key: Vec<u8>) {
        self.batch.delete_in(self.state, &key);
        self.written.insert(key, None);
    }

    /// Deletes the user keys in `[start, end)` (`end: None`: from `start`
    /// on) with one range delete over their data keys only.
    fn delete_range(&mut self, start: &[u8], end: Option<&[u8]>) {
        let (start, end) = codec::data_range(start, end);
        self.batch
            .delete_range_in(self.state, start.as_slice()..end.as_slice());
        remove_range(
            &mut self.written,
            (
                Bound::Included(start.as_slice()),
                Bound::Excluded(end.as_slice()),
            ),
        );
        self.deleted.insert(start, end);
    }

    /// Applies `req` of an entry stamped `time_ms`: once per (client, seq).
    pub(crate) fn request(&mut self, req: &Request, time_ms: u64) -> Result<Response> {
        let Some(session) = req.session else {
            return self.command(&req.command);
        };
        if session.seq == 0 {
            return Ok(Response::Rejected {
                reason: "sequence numbers start at 1".into(),
            });
        }
        let key = codec::session_key(session.client);
        let record = match self.get(&key)? {
            Some(v) => Some(decode::<SessionRecord>(&v, "client session")?),
            None => None,
        };
        match record {
            // A repeat: the first answer, nothing applied.
            Some(r) if r.seq == session.seq => return Ok(r.response),
            Some(r) if r.seq > session.seq => return Ok(Response::Stale),
            None if session.seq > 1 => return Ok(Response::SessionExpired),
            _ => {}
        }
        let response = self.command(&req.command)?;
        let record = SessionRecord {
            seq: session.seq,
            last_used_ms: time_ms,
            response: response.clone(),
        };
        self.put(key.to_vec(), &encode(&record, "client session")?);
        Ok(response)
    }

    /// Applies `cmd`, or says why it is rejected (then nothing is written,
    /// on any node).
    fn command(&mut self, cmd: &Command) -> Result<Response> {
        if let Err(reason) = cmd.validate() {
            return Ok(Response::Rejected { reason });
        }
        match cmd {
            Command::CompareAndSwap { key, expected, new } => {
                let key = data_key(key);
                let current = self.get(&key)?;
                if current != *expected {
                    return Ok(Response::CasFailed { current });
                }
                match new {
                    Some(value) => self.put(key, value),
                    None => self.delete(key),
                }
                Ok(Response::Swapped)
            }
            Command::Increment { key, delta } => {
                let key = data_key(key);
                let old = match self.get(&key)? {
                    None => 0,
                    Some(v) => match <[u8; 8]>::try_from(v.as_slice()) {
                        Ok(bytes) => u64::from_be_bytes(bytes),
                        Err(_) => {
                            return Ok(Response::Rejected {
                                reason: format!("the value is {} bytes, not a counter", v.len()),
                            })
                        }
                    },
                };
                let value = old.wrapping_add(*delta);
                self.put(key, &value.to_be_bytes());
                Ok(Response::Counter { value })
            }
            Command::Put { .. }
            | Command::Delete { .. }
            | Command::Batch(_)
            | Command::DeleteRange { .. } => {
                let ops = cmd.ops();
                for op in &ops {
                    match *op {
                        OpRef::Put(key, value) => self.put(data_key(key), value),
                        OpRef::Delete(key) => self.delete(data_key(key)),
                        OpRef::DeleteRange(start, end) => self.delete_range(start, end),
                    }
                }
                Ok(Response::Applied { ops: ops.len() })
            }
        }
    }

    /// Removes the sessions idle for more than [`SESSION_EXPIRY_MS`] at
    /// `time_ms` (by the entries' clock: every node removes the same).
    pub(crate) fn sweep(&mut self, time_ms: u64) -> Result<()> {
        let mut expired = Vec::new();
        for item in self.state.prefix([codec::SESSION_PREFIX]) {
            let (key, value) = item?;
            if self.written.contains_key(key.as_ref()) {
                continue;
            }
            let record = decode::<SessionRecord>(&value, "client session")?;
            if record.last_used_ms.saturating_add(SESSION_EXPIRY_MS) < time_ms {
                expired.push(key.to_vec());
            }
        }
        for key in expired {
            self.delete(key);
        }
        Ok(())
    }
}
