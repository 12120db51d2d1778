//! The parent's model of a stress database: what every key must hold after
//! the acknowledged batches, and the check of a reopened database against it.
//!
//! Owns: [`Model`]; [`Model::record_child`], which adds what a child
//! acknowledged; [`Model::check`], which decides whether the batch in flight
//! at the kill was applied (whole) or not at all, then compares every key,
//! by `get` and by a full scan.
//! Must never: accept a value the model cannot explain — a lost acknowledged
//! batch, a batch seen in part, a resurrected key or an older value is a
//! failure with the keys involved in the message.

use std::collections::BTreeMap;

use bytes::Bytes;

use crate::stress::plan::{all_keys, batch_of_value, plan_batch, PlannedBatch};
use siftdb::Db;

/// Mismatches listed in one failure message at most.
const MAX_REPORTED: usize = 8;

/// What every key of the database must hold.
#[derive(Debug, Clone)]
pub struct Model {
    seed: u64,
    expected: BTreeMap<Vec<u8>, Vec<u8>>,
    /// The first batch not known to be in the database.
    next_batch: u64,
}

/// What one check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckOutcome {
    /// Whether the batch in flight at the kill (written, not acknowledged) was there, whole.
    pub in_flight_present: bool,
    /// Keys compared (by `get`; the scan compares all of them again).
    pub keys_checked: u64,
}

impl Model {
    /// The model of an empty database written with batches planned from `seed`.
    pub fn new(seed: u64) -> Model {
        Model {
            seed,
            expected: BTreeMap::new(),
            next_batch: 1,
        }
    }

    /// The first batch not yet known to be in the database: where the next child starts.
    pub fn next_batch(&self) -> u64 {
        self.next_batch
    }

    /// Entries the database must hold.
    pub fn len(&self) -> usize {
        self.expected.len()
    }

    /// True when the database must be empty.
    pub fn is_empty(&self) -> bool {
        self.expected.is_empty()
    }

    fn apply(&mut self, batch: &PlannedBatch) {
        for op in &batch.ops {
            match &op.value {
                Some(value) => self.expected.insert(op.key.clone(), value.clone()),
                None => self.expected.remove(&op.key),
            };
        }
        self.next_batch = batch.number + 1;
    }

    /// Takes in what a child reported: whether the batch the previous child
    /// may have had in flight (the model's next batch) is in the database,
    /// if it got that far, and the batches it acknowledged, in order.
    pub fn record_child(
        &mut self,
        start_present: Option<bool>,
        acks: &[u64],
    ) -> Result<(), String> {
        if start_present == Some(true) {
            let batch = plan_batch(self.seed, self.next_batch);
            self.apply(&batch);
        }
        if start_present.is_none() && !acks.is_empty() {
            return Err("the child acknowledged batches before it reported its start".into());
        }
        for (i, &b) in acks.iter().enumerate() {
            if b != self.next_batch {
                return Err(format!(
                    "acknowledgement {i} is for batch {b}, expected batch {}",
                    self.next_batch
                ));
            }
            let batch = plan_batch(self.seed, b);
            self.apply(&batch);
        }
        Ok(())
    }

    /// Decides about the batch that may be in flight (the model's next
    /// batch: written, its acknowledgement lost with the child) and compares
    /// every key of `db` with the model. On failure the message names the
    /// keys, what they should hold and what they hold (by the batch that
    /// wrote it).
    pub fn check(&mut self, db: &Db) -> Result<CheckOutcome, String> {
        // A child writes one batch at a time, and the next child settles
        // the previous one's before it writes: at most one batch can have
        // reached the log without its acknowledgement reaching us. Its
        // marker decides whether it is in; the comparison below then
        // demands all of it or none of it.
        let in_flight = plan_batch(self.seed, self.next_batch);
        let marker = in_flight.marker().ok_or("a planned batch has no marker")?;
        let found = db
            .get(&marker.key)
            .map_err(|e| format!("get {}: {e}", show(&marker.key)))?;
        let in_flight_present = found.as_deref() == marker.value.as_deref();
        let before = (!in_flight_present).then(|| in_flight.clone());
        if in_flight_present {
            self.apply(&in_flight);
        }

        let mut problems = Vec::new();
        let mut keys_checked = 0u64;
        for key in all_keys() {
            keys_checked += 1;
            let got = db
                .get(&key)
                .map_err(|e| format!("get {}: {e}", show(&key)))?;
            self.compare(&key, got.as_deref(), "get", &mut problems);
        }
        self.compare_scan(db, &mut problems)?;

        if problems.is_empty() {
            return Ok(CheckOutcome {
                in_flight_present,
                keys_checked,
            });
        }
        let total = problems.len();
        problems.truncate(MAX_REPORTED);
        let mut message = format!(
            "{total} mismatches after batch {} (batch {} in flight: {}):\n  {}",
            self.next_batch - 1,
            in_flight.number,
            if in_flight_present {
                "present"
            } else {
                "absent"
            },
            problems.join("\n  ")
        );
        if let Some(batch) = before {
            let partial = batch.ops.iter().any(|op| {
                db.get(&op.key)
                    .ok()
                    .flatten()
                    .is_some_and(|v| batch_of_value(&v) == Some(batch.number))
            });
            if partial {
                message.push_str(&format!(
                    "\n  batch {} is visible in part: its marker is absent but some of its keys are there",
                    batch.number
                ));
            }
        }
        Err(message)
    }

    fn compare(&self, key: &[u8], got: Option<&[u8]>, how: &str, problems: &mut Vec<String>) {
        let want = self.expected.get(key).map(Vec::as_slice);
        if want != got {
            problems.push(format!(
                "{how} {}: expected {}, found {}",
                show(key),
                describe(want),
                describe(got)
            ));
        }
    }

    fn compare_scan(&self, db: &Db, problems: &mut Vec<String>) -> Result<(), String> {
        let mut scanned: BTreeMap<Vec<u8>, Bytes> = BTreeMap::new();
        let mut previous: Option<Bytes> = None;
        for item in db.iter() {
            let (key, value) = item.map_err(|e| format!("scan: {e}"))?;
            if previous.as_ref().is_some_and(|p| p >= &key) {
                problems.push(format!("scan: {} out of order", show(&key)));
            }
            previous = Some(key.clone());
            scanned.insert(key.to_vec(), value);
        }
        for key in self.expected.keys() {
            if !scanned.contains_key(key) {
                self.compare(key, None, "scan", problems);
            }
        }
        for (key, value) in &scanned {
            self.compare(key, Some(value), "scan", problems);
        }
        Ok(())
    }
}

fn show(key: &[u8]) -> String {
    String::from_utf8_lossy(key).into_owned()
}

fn describe(value: Option<&[u8]>) -> String {
    match value {
        None => "absent".to_string(),
        Some(v) => match batch_of_value(v) {
            Some(b) => format!("batch {b}'s value ({} bytes)", v.len()),
            None => format!("a value no batch wrote ({} bytes)", v.len()),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use siftdb::Options;

    fn open(dir: &std::path::Path) -> Db {
        Db::open_with(dir, Options::default().memtable_bytes(8192)).unwrap()
    }

    #[test]
    fn accepts_acknowledged_and_whole_in_flight_batches() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        let mut model = Model::new(3);
        for b in 1..=5 {
            db.write(plan_batch(3, b).to_write_batch()).unwrap();
        }
        model.record_child(Some(false), &[1, 2, 3]).unwrap();
        assert_eq!(model.next_batch(), 4);
        // Batch 4 was settled by a child that then acknowledged nothing.
        model.record_child(Some(true), &[]).unwrap();
        let outcome = model.check(&db).unwrap();
        assert!(outcome.in_flight_present);
        assert_eq!(model.next_batch(), 6);
        let outcome = model.check(&db).unwrap();
        assert!(!outcome.in_flight_present);
    }

    #[test]
    fn refuses_a_lost_batch_a_partial_batch_and_a_gap() {
        let dir = tempfile::tempdir().unwrap();
        let db = open(dir.path());
        db.write(plan_batch(3, 1).to_write_batch()).unwrap();
        // Batch 2 acknowledged but missing.
        let mut model = Model::new(3);
        model.record_child(Some(false), &[1, 2]).unwrap();
        let err = model.check(&db).unwrap_err();
        assert!(err.contains("mismatches"), "{err}");
        // A gap in the acknowledgements.
        let err = Model::new(3).record_child(Some(false), &[2]).unwrap_err();
        assert!(err.contains("expected batch 1"), "{err}");
        // Batch 2 in part: one data key without its marker.
        let planned = plan_batch(3, 2);
        let op = planned.ops[1..]
            .iter()
            .find(|op| op.value.is_some())
            .expect("batch 2 of seed 3 puts a data key");
        db.put(&op.key, op.value.as_ref().unwrap()).unwrap();
        let mut model = Model::new(3);
        model.record_child(Some(false), &[1]).unwrap();
        let err = model.check(&db).unwrap_err();
        assert!(err.contains("visible in part"), "{err}");
    }
}
