//! The `metrics` feature: `MetricsPublisher` hands every counter, gauge
//! and histogram of a database to the `metrics` facade. A test recorder
//! (installed for this thread only) keeps what it is handed. What must
//! hold: every `Stats::counters` and `Stats::gauges` figure published
//! under `siftdb_` with its value and the publisher's label; per-keyspace
//! and per-level figures labelled; each histogram's values handed over
//! once (a second publication adds only what was recorded in between),
//! latencies in seconds; after a reset, the new values only.
#![cfg(feature = "metrics")]
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use metrics::{
    Counter, CounterFn, Gauge, GaugeFn, Histogram, HistogramFn, Key, KeyName, Metadata, Recorder,
    SharedString, Unit,
};
use siftdb::{Db, MetricsPublisher};

/// What the recorder was handed: the last value of each counter and
/// gauge, and every histogram value, by name and labels.
#[derive(Default)]
struct Seen {
    values: BTreeMap<String, f64>,
    histograms: BTreeMap<String, Vec<f64>>,
}

#[derive(Clone, Default)]
struct TestRecorder(Arc<Mutex<Seen>>);

/// One metric of the test recorder: its name with labels, and the store.
struct Handle {
    name: String,
    seen: Arc<Mutex<Seen>>,
}

fn name_of(key: &Key) -> String {
    let mut labels: Vec<String> = key
        .labels()
        .map(|l| format!("{}={}", l.key(), l.value()))
        .collect();
    labels.sort();
    format!("{}{{{}}}", key.name(), labels.join(","))
}

impl CounterFn for Handle {
    fn increment(&self, value: u64) {
        *self
            .seen
            .lock()
            .unwrap()
            .values
            .entry(self.name.clone())
            .or_default() += value as f64;
    }
    fn absolute(&self, value: u64) {
        self.seen
            .lock()
            .unwrap()
            .values
            .insert(self.name.clone(), value as f64);
    }
}

impl GaugeFn for Handle {
    fn increment(&self, value: f64) {
        *self
            .seen
            .lock()
            .unwrap()
            .values
            .entry(self.name.clone())
            .or_default() += value;
    }
    fn decrement(&self, value: f64) {
        *self
            .seen
            .lock()
            .unwrap()
            .values
            .entry(self.name.clone())
            .or_default() -= value;
    }
    fn set(&self, value: f64) {
        self.seen
            .lock()
            .unwrap()
            .values
            .insert(self.name.clone(), value);
    }
}

impl HistogramFn for Handle {
    fn record(&self, value: f64) {
        self.record_many(value, 1);
    }
    fn record_many(&self, value: f64, count: usize) {
        let mut seen = self.seen.lock().unwrap();
        let values = seen.histograms.entry(self.name.clone()).or_default();
        values.extend(std::iter::repeat_n(value, count));
    }
}

impl TestRecorder {
    fn handle(&self, key: &Key) -> Arc<Handle> {
        Arc::new(Handle {
            name: name_of(key),
            seen: Arc::clone(&self.0),
        })
    }
}

impl Recorder for TestRecorder {
    fn describe_counter(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_gauge(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn describe_histogram(&self, _: KeyName, _: Option<Unit>, _: SharedString) {}
    fn register_counter(&self, key: &Key, _: &Metadata<'_>) -> Counter {
        Counter::from_arc(self.handle(key))
    }
    fn register_gauge(&self, key: &Key, _: &Metadata<'_>) -> Gauge {
        Gauge::from_arc(self.handle(key))
    }
    fn register_histogram(&self, key: &Key, _: &Metadata<'_>) -> Histogram {
        Histogram::from_arc(self.handle(key))
    }
}

#[test]
fn every_counter_gauge_and_histogram_is_published() {
    let recorder = TestRecorder::default();
    let seen = Arc::clone(&recorder.0);
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path()).unwrap();
    let users = db.keyspace("users").unwrap();
    for i in 0..300 {
        db.put(format!("k{i:04}"), "value").unwrap();
        users.put(format!("u{i:04}"), "user").unwrap();
    }
    db.flush().unwrap();
    for i in 0..100 {
        db.get(format!("k{i:04}")).unwrap();
    }
    users.get("u0001").unwrap();
    let publisher = MetricsPublisher::new().with_label("db", "test");
    metrics::with_local_recorder(&recorder, || publisher.publish(&db));

    let stats = db.stats();
    {
        let seen = seen.lock().unwrap();
        for (name, value) in stats.counters().into_iter().chain(stats.gauges()) {
            let metric = format!("siftdb_{name}{{db=test}}");
            let published = seen.values.get(&metric);
            // Gauges of memory may move between the two readings.
            if !name.ends_with("_bytes") {
                assert_eq!(published, Some(&(value as f64)), "{metric}");
            } else {
                assert!(published.is_some(), "{metric} not published");
            }
        }
        assert_eq!(seen.values["siftdb_gets{db=test}"], 101.0);
        assert_eq!(
            seen.values["siftdb_keyspace_gets{db=test,keyspace=users}"],
            1.0
        );
        assert_eq!(
            seen.values["siftdb_keyspace_gets{db=test,keyspace=default}"],
            100.0
        );
        assert!(seen
            .values
            .contains_key("siftdb_level_tables{db=test,level=0}"));
        assert!(seen
            .values
            .contains_key("siftdb_keyspace_bytes{db=test,keyspace=users}"));
        // Each histogram by its name, latencies in seconds.
        for (name, histogram) in db.histograms().named() {
            let metric = match name.strip_suffix("_nanos") {
                Some(stem) => format!("siftdb_{stem}_seconds{{db=test}}"),
                None => format!("siftdb_{name}{{db=test}}"),
            };
            let values = seen.histograms.get(&metric).map_or(0, Vec::len);
            assert_eq!(values as u64, histogram.samples(), "{metric}");
        }
        let gets = &seen.histograms["siftdb_get_seconds{db=test}"];
        assert!(gets.iter().all(|&s| s > 0.0 && s < 10.0), "{gets:?}");
        let batches = &seen.histograms["siftdb_write_batch_bytes{db=test}"];
        assert_eq!(batches.len(), 600);
    }

    // A second publication hands over only what was recorded since.
    let flushes_before = seen.lock().unwrap().histograms["siftdb_flush_seconds{db=test}"].len();
    for i in 0..16 {
        db.get(format!("k{i:04}")).unwrap();
    }
    let timed_before = seen.lock().unwrap().histograms["siftdb_get_seconds{db=test}"].len() as u64;
    metrics::with_local_recorder(&recorder, || publisher.publish(&db));
    {
        let seen = seen.lock().unwrap();
        assert_eq!(
            seen.histograms["siftdb_get_seconds{db=test}"].len() as u64,
            db.histograms().get_nanos.samples()
        );
        assert!(db.histograms().get_nanos.samples() > timed_before);
        assert_eq!(
            seen.histograms["siftdb_flush_seconds{db=test}"].len(),
            flushes_before
        );
        assert_eq!(seen.values["siftdb_gets{db=test}"], 117.0);
    }

    // After a reset, the new values only.
    db.reset_histograms();
    db.put("after", "reset").unwrap();
    let writes_before = seen.lock().unwrap().histograms["siftdb_write_batch_bytes{db=test}"].len();
    metrics::with_local_recorder(&recorder, || publisher.publish(&db));
    let seen = seen.lock().unwrap();
    assert_eq!(
        seen.histograms["siftdb_write_batch_bytes{db=test}"].len(),
        writes_before + 1
    );
}
