//! The `metrics` feature: a database's counters, gauges and histograms
//! published through the `metrics` crate's facade, to whichever recorder
//! (Prometheus, OpenTelemetry, StatsD…) the application installed.
//!
//! Owns: [`MetricsPublisher`] — the metric names (`siftdb_` and the
//! field's name; latencies in seconds), the labels, and the histogram
//! counts already published (each publication hands the recorder only
//! the values recorded since the last).
//! Must never: publish from the read or write paths (publication is a
//! call the application makes, at its own interval), or hold a lock of
//! the database while it calls the recorder.

use metrics::{counter, gauge, histogram, Label};
use parking_lot::Mutex;

use super::latency::Histograms;
use super::stats::Stats;
use crate::db::handle::Db;
use crate::histogram::Histogram;

/// Publishes one database's figures through the `metrics` facade: call
/// [`MetricsPublisher::publish`] at the interval the exporter scrapes at
/// (a second or so), from any thread.
///
/// Names: `siftdb_` and the [`Stats`](crate::Stats) field's name — each of
/// [`Stats::counters`](crate::Stats::counters) a counter, each of
/// [`Stats::gauges`](crate::Stats::gauges) a gauge, `siftdb_level_tables`
/// and `siftdb_level_bytes` gauges per `level`, `siftdb_keyspace_*` per
/// `keyspace` — and each histogram of [`Histograms`] by its name, latencies
/// as `siftdb_get_seconds` and so on (in seconds). Every metric carries the
/// publisher's labels (a `db` label tells databases of one process apart).
///
/// A histogram hands the recorder each value recorded since the last
/// publication, as the middle of its bucket (within
/// [`RELATIVE_ERROR`](crate::histogram::RELATIVE_ERROR)), with
/// `record_many`; after [`Db::reset_histograms`](crate::Db::reset_histograms)
/// the counts start again.
#[derive(Debug, Default)]
pub struct MetricsPublisher {
    labels: Vec<Label>,
    published: Mutex<Option<Histograms>>,
}

impl MetricsPublisher {
    /// A publisher whose metrics carry no label.
    pub fn new() -> MetricsPublisher {
        MetricsPublisher::default()
    }

    /// Adds the label `key`=`value` to every metric published.
    pub fn with_label(mut self, key: &str, value: &str) -> MetricsPublisher {
        self.labels
            .push(Label::new(key.to_string(), value.to_string()));
        self
    }

    /// Publishes `db`'s figures as of now.
    pub fn publish(&self, db: &Db) {
        self.publish_figures(&db.stats(), db.histograms());
    }

    /// Publishes `stats` and `histograms`, a database's figures.
    fn publish_figures(&self, stats: &Stats, histograms: Histograms) {
        let labels = &self.labels;
        for (name, value) in stats.counters() {
            counter!(format!("siftdb_{name}"), labels.iter()).absolute(value);
        }
        for (name, value) in stats.gauges() {
            gauge!(format!("siftdb_{name}"), labels.iter()).set(value as f64);
        }
        for (level, (tables, bytes)) in stats
            .level_tables
            .iter()
            .zip(&stats.level_bytes)
            .enumerate()
        {
            let labels = self.with(&[("level", level.to_string())]);
            gauge!("siftdb_level_tables", labels.iter()).set(*tables as f64);
            gauge!("siftdb_level_bytes", labels.iter()).set(*bytes as f64);
        }
        for ks in &stats.keyspaces {
            let labels = self.with(&[("keyspace", ks.name.clone())]);
            let tables = u64::try_from(ks.table_count).unwrap_or(u64::MAX);
            gauge!("siftdb_keyspace_tables", labels.iter()).set(tables as f64);
            let bytes: u64 = ks.level_bytes.iter().sum();
            gauge!("siftdb_keyspace_bytes", labels.iter()).set(bytes as f64);
            let memtables = ks
                .memtable_bytes
                .saturating_add(ks.immutable_memtable_bytes);
            gauge!("siftdb_keyspace_memtable_bytes", labels.iter()).set(memtables as f64);
            counter!("siftdb_keyspace_gets", labels.iter()).absolute(ks.gets);
            counter!("siftdb_keyspace_multi_get_keys", labels.iter()).absolute(ks.multi_get_keys);
            counter!("siftdb_keyspace_scans", labels.iter()).absolute(ks.scans);
        }
        self.publish_histograms(histograms);
    }

    /// Hands the recorder what each histogram recorded since the last call.
    fn publish_histograms(&self, now: Histograms) {
        let mut published = self.published.lock();
        let empty = Histograms::default();
        let before = published.as_ref().unwrap_or(&empty);
        for ((name, histogram), (_, earlier)) in now.named().into_iter().zip(before.named()) {
            // A reset since: the counts started again from zero.
            let new = if now.resets() == before.resets() {
                histogram.since(earlier)
            } else {
                histogram.clone()
            };
            self.record(name, &new);
        }
        *published = Some(now);
    }

    /// Records each value of `new` into the facade's histogram for `name`.
    fn record(&self, name: &str, new: &Histogram) {
        let (metric, scale) = match name.strip_suffix("_nanos") {
            Some(stem) => (format!("siftdb_{stem}_seconds"), 1e-9),
            None => (format!("siftdb_{name}"), 1.0),
        };
        let handle = histogram!(metric, self.labels.iter());
        for (low, high, count) in new.buckets() {
            let middle = low + (high - low) / 2;
            handle.record_many(
                middle as f64 * scale,
                usize::try_from(count).unwrap_or(usize::MAX),
            );
        }
    }

    /// The publisher's labels and `extra`.
    fn with(&self, extra: &[(&'static str, String)]) -> Vec<Label> {
        let mut labels = self.labels.clone();
        labels.extend(extra.iter().map(|(k, v)| Label::new(*k, v.clone())));
        labels
    }
}
