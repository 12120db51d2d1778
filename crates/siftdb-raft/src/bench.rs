//! Replicated write throughput and latency (`siftdb-raft bench`): clients
//! that put in a closed loop against a running cluster, and the write path
//! read back from the nodes' timings.
//!
//! Owns: [`Config`] (clients × puts per command), [`run`], which measures
//! one configuration (puts/s, each command's latency), and the report it
//! prints: the throughput row and where a command's time went (the leader's
//! stages and its followers' fsyncs, from `/api/metrics` before and after).
//! Must never: count a put that was not acknowledged, or report a stage
//! from a node that did not answer before and after the run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::api::NodeStatus;
use crate::client::Client;
use crate::timings::TimingsReport;
use crate::types::{Command, Op, Request};

/// One configuration: concurrent clients, puts per command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    /// Client tasks, each with one command in flight.
    pub clients: u64,
    /// Puts per command (one command is one request, applied atomically).
    pub batch: u64,
}

impl std::str::FromStr for Config {
    type Err = String;

    /// `CxB`: C clients, B puts per command.
    fn from_str(s: &str) -> Result<Config, String> {
        let (c, b) = s
            .split_once('x')
            .ok_or_else(|| format!("expected CLIENTSxBATCH (like 64x1), got {s:?}"))?;
        let num = |v: &str| {
            v.trim()
                .parse::<u64>()
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| format!("{v:?} in {s:?} is not a positive number"))
        };
        Ok(Config {
            clients: num(c)?,
            batch: num(b)?,
        })
    }
}

/// How long a configuration runs.
#[derive(Clone, Copy, Debug)]
pub enum Length {
    /// Until this many puts are acknowledged.
    Puts(u64),
    /// For this long (commands in flight at the end are waited for).
    Time(Duration),
}

/// What one configuration measured.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// The configuration.
    pub config: Config,
    /// Puts acknowledged.
    pub puts: u64,
    /// Wall time.
    pub wall: Duration,
    /// Every command's latency, sorted.
    pub latencies: Vec<Duration>,
    /// Each node's status before the run (`None`: it did not answer).
    pub before: Vec<Option<NodeStatus>>,
    /// Each node's status after the run.
    pub after: Vec<Option<NodeStatus>>,
}

impl Outcome {
    /// Puts per second.
    pub fn puts_per_sec(&self) -> f64 {
        self.puts as f64 / self.wall.as_secs_f64().max(1e-9)
    }

    /// The latency at `per_mille` / 1000 of the commands (500: the median).
    pub fn quantile(&self, per_mille: usize) -> Duration {
        quantile(&self.latencies, per_mille)
    }
}

/// The value at quantile `per_mille` / 1000 of `sorted` (nearest rank),
/// zero when empty.
pub fn quantile(sorted: &[Duration], per_mille: usize) -> Duration {
    let n = sorted.len();
    let rank = n
        .saturating_mul(per_mille.min(1000))
        .div_ceil(1000)
        .clamp(1, n.max(1));
    sorted.get(rank - 1).copied().unwrap_or_default()
}

/// Every node's status; `None` for a node that does not answer.
async fn statuses(client: &Client) -> Vec<Option<NodeStatus>> {
    let mut out = Vec::new();
    for addr in client.nodes() {
        out.push(client.status(addr).await.ok());
    }
    out
}

/// Runs `config` for `length` against the cluster `client` knows: values
/// of `value_size` bytes, keys `bench-<n>` from `first_key` on (so runs
/// one after another write new keys); with client sessions unless
/// `sessionless`.
pub async fn run(
    client: &Arc<Client>,
    config: Config,
    length: Length,
    value_size: usize,
    sessionless: bool,
    first_key: u64,
) -> Result<Outcome, String> {
    // One write finds the leader and warms a connection.
    client
        .write(&Command::Put {
            key: b"bench-warmup".to_vec(),
            value: vec![],
        })
        .await
        .map_err(|e| e.to_string())?;
    let before = statuses(client).await;
    let next = Arc::new(AtomicU64::new(first_key));
    let value = vec![b'v'; value_size];
    let start = Instant::now();
    let (limit, until) = match length {
        Length::Puts(n) => (first_key.saturating_add(n), None),
        Length::Time(d) => (u64::MAX, Some(start + d)),
    };
    let mut tasks = Vec::new();
    for _ in 0..config.clients {
        let (c, next, value) = (Arc::clone(client), Arc::clone(&next), value.clone());
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            let mut puts = 0u64;
            loop {
                if until.is_some_and(|u| Instant::now() >= u) {
                    break;
                }
                let first = next.fetch_add(config.batch, Ordering::Relaxed);
                if first >= limit {
                    break;
                }
                let ops: Vec<Op> = (first..first.saturating_add(config.batch).min(limit))
                    .map(|i| Op::Put {
                        key: format!("bench-{i:012}").into_bytes(),
                        value: value.clone(),
                    })
                    .collect();
                let count = ops.len() as u64;
                let cmd = Command::Batch(ops);
                let sent = Instant::now();
                if sessionless {
                    c.write_request(&Request::unsessioned(cmd)).await
                } else {
                    c.write(&cmd).await
                }
                .map_err(|e| e.to_string())?;
                latencies.push(sent.elapsed());
                puts += count;
            }
            Ok::<_, String>((puts, latencies))
        }));
    }
    let mut puts = 0;
    let mut latencies = Vec::new();
    for t in tasks {
        let (p, l) = t.await.map_err(|e| e.to_string())??;
        puts += p;
        latencies.extend(l);
    }
    let wall = start.elapsed();
    latencies.sort_unstable();
    let after = statuses(client).await;
    Ok(Outcome {
        config,
        puts,
        wall,
        latencies,
        before,
        after,
    })
}

/// Read latency at the leader: `clients` tasks reading one key (written
/// first) as `consistency` says until `reads` reads are answered; every
/// read's latency, sorted.
pub async fn run_reads(
    client: &Arc<Client>,
    clients: u64,
    reads: u64,
    consistency: crate::api::Consistency,
) -> Result<Vec<Duration>, String> {
    const KEY: &[u8] = b"bench-read";
    client
        .write(&Command::Put {
            key: KEY.to_vec(),
            value: b"v".to_vec(),
        })
        .await
        .map_err(|e| e.to_string())?;
    // A few reads find the leader and warm the connection.
    for _ in 0..10 {
        client
            .read_with(KEY, consistency)
            .await
            .map_err(|e| e.to_string())?;
    }
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for _ in 0..clients {
        let (c, next) = (Arc::clone(client), Arc::clone(&next));
        tasks.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            while next.fetch_add(1, Ordering::Relaxed) < reads {
                let sent = Instant::now();
                c.read_with(KEY, consistency)
                    .await
                    .map_err(|e| e.to_string())?;
                latencies.push(sent.elapsed());
            }
            Ok::<_, String>(latencies)
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.map_err(|e| e.to_string())??);
    }
    latencies.sort_unstable();
    Ok(latencies)
}

/// The header of [`row`].
pub fn header() -> String {
    format!(
        "{:>7} {:>5} {:>8} {:>7} {:>8} {:>8} {:>8} {:>11}",
        "clients", "batch", "puts", "seconds", "puts/s", "p50 ms", "p99 ms", "cmds/entry"
    )
}

/// One configuration's throughput and latency, one line.
pub fn row(o: &Outcome) -> String {
    let leader = leader_delta(o);
    let per_entry = leader.map_or(String::from("-"), |d| {
        let (queued, proposals) = (d.write_queued.0, d.proposal.0);
        if proposals == 0 {
            String::from("-")
        } else {
            format!("{:.1}", queued as f64 / proposals as f64)
        }
    });
    format!(
        "{:>7} {:>5} {:>8} {:>7.2} {:>8.0} {:>8.2} {:>8.2} {:>11}",
        o.config.clients,
        o.config.batch,
        o.puts,
        o.wall.as_secs_f64(),
        o.puts_per_sec(),
        ms(o.quantile(500)),
        ms(o.quantile(990)),
        per_entry
    )
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn sub(a: (u64, u64), b: (u64, u64)) -> (u64, u64) {
    (a.0.saturating_sub(b.0), a.1.saturating_sub(b.1))
}

/// `after - before`, counter by counter.
pub fn delta(before: &TimingsReport, after: &TimingsReport) -> TimingsReport {
    TimingsReport {
        log_append: sub(after.log_append, before.log_append),
        log_other: sub(after.log_other, before.log_other),
        committed: sub(after.committed, before.committed),
        log_read: sub(after.log_read, before.log_read),
        apply: sub(after.apply, before.apply),
        snapshot_build: sub(after.snapshot_build, before.snapshot_build),
        snapshot_install: sub(after.snapshot_install, before.snapshot_install),
        write_request: sub(after.write_request, before.write_request),
        write_queued: sub(after.write_queued, before.write_queued),
        proposal: sub(after.proposal, before.proposal),
        replicate: sub(after.replicate, before.replicate),
        raft_in: sub(after.raft_in, before.raft_in),
        flush: sub(after.flush, before.flush),
        to_send: sub(after.to_send, before.to_send),
        first_answer: sub(after.first_answer, before.first_answer),
        to_apply: sub(after.to_apply, before.to_apply),
        answer: sub(after.answer, before.answer),
        follower_in: sub(after.follower_in, before.follower_in),
        follower_out: sub(after.follower_out, before.follower_out),
        early_send: sub(after.early_send, before.early_send),
        early_missed: sub(after.early_missed, before.early_missed),
    }
}

/// The nodes that answered before and after: (status after, timings delta).
fn deltas(o: &Outcome) -> impl Iterator<Item = (&NodeStatus, TimingsReport)> {
    o.before
        .iter()
        .zip(&o.after)
        .filter_map(|(b, a)| match (b, a) {
            (Some(b), Some(a)) => Some((a, delta(&b.timings, &a.timings))),
            _ => None,
        })
}

fn leader_delta(o: &Outcome) -> Option<TimingsReport> {
    deltas(o).find(|(a, _)| a.state == "Leader").map(|(_, d)| d)
}

/// The mean of a counter's calls, in ms (0 without calls).
fn mean_ms(c: (u64, u64)) -> f64 {
    if c.0 == 0 {
        0.0
    } else {
        c.1 as f64 / c.0 as f64 / 1e6
    }
}

/// Where a command's time went, means over the run: the client's latency,
/// the part outside the leader's api (network, HTTP, the client), and
/// inside it the queue wait and the proposal (one raft entry: the leader's
/// fsync alongside the replication round trips, which hold the followers'
/// fsyncs, then commit and apply). Stages overlap (the leader's fsync and
/// the round trips run at once), so they do not add up to the proposal.
pub fn breakdown(o: &Outcome) -> String {
    let Some(leader) = leader_delta(o) else {
        return String::from("  (no leader answered before and after the run)");
    };
    let client = if o.latencies.is_empty() {
        0.0
    } else {
        ms(o.latencies
            .iter()
            .fold(Duration::ZERO, |a, b| a.saturating_add(*b)))
            / o.latencies.len() as f64
    };
    let api = mean_ms(leader.write_request);
    let followers: Vec<String> = deltas(o)
        .filter(|(a, _)| a.state != "Leader")
        .map(|(a, d)| {
            format!(
                "node {} fsync {:.2} ms ({} appends)",
                a.id,
                mean_ms(d.log_append),
                d.log_append.0
            )
        })
        .collect();
    let mut follower = TimingsReport::default();
    for (_, d) in deltas(o).filter(|(a, _)| a.state != "Leader") {
        for (sum, part) in [
            (&mut follower.follower_in, d.follower_in),
            (&mut follower.flush, d.flush),
            (&mut follower.follower_out, d.follower_out),
        ] {
            *sum = (sum.0 + part.0, sum.1 + part.1);
        }
    }
    let steps = [
        mean_ms(leader.raft_in),
        mean_ms(leader.flush),
        mean_ms(leader.to_send),
        mean_ms(leader.first_answer),
        mean_ms(leader.to_apply),
        mean_ms(leader.apply),
        mean_ms(leader.answer),
    ];
    let on_follower =
        mean_ms(follower.follower_in) + mean_ms(follower.flush) + mean_ms(follower.follower_out);
    let follower_part = format!(
        "follower in {:.3} + follower fsync {:.3} + follower out {:.3}",
        mean_ms(follower.follower_in),
        mean_ms(follower.flush),
        mean_ms(follower.follower_out),
    );
    // With early sends the follower appends and fsyncs on the early
    // message; openraft's own (sent after the leader's fsync, the entries
    // left out) waits on the follower only for the rest of that fsync.
    let rounds = if leader.early_send.0 > 0 {
        format!(
            "early send (alongside the leader fsync): round trip {:.3} ms = {follower_part}, network and HTTP {:.3} ms ({} accepted, {} not)\n  \
             first answer: openraft's message, entries left out, answered once the follower's fsync of the early send is done",
            mean_ms(leader.early_send),
            (mean_ms(leader.early_send) - on_follower).max(0.0),
            leader.early_send.0,
            leader.early_missed.0,
        )
    } else {
        format!(
            "first answer: {follower_part}, network and HTTP {:.3} ms",
            (mean_ms(leader.first_answer) - on_follower).max(0.0),
        )
    };
    format!(
        "{}\n  one entry, in order: into raft {:.3} + leader fsync {:.3} + to first send {:.3} + first answer {:.3} + to apply {:.3} + apply {:.3} + answer {:.3} = {:.3} ms\n  {rounds}",
        summary(client, api, &leader, &followers),
        steps[0],
        steps[1],
        steps[2],
        steps[3],
        steps[4],
        steps[5],
        steps[6],
        steps.iter().sum::<f64>(),
    )
}

/// The first lines of [`breakdown`]: the client's latency and the means of
/// the leader's api, proposal and storage stages.
fn summary(client: f64, api: f64, leader: &TimingsReport, followers: &[String]) -> String {
    format!(
        "  mean per command: client {client:.2} ms = network, HTTP and client {:.2} ms + leader api {api:.2} ms\n  \
         leader api: queued {:.2} ms + proposal {:.2} ms (entries {}) + answer\n  \
         proposal: leader fsync {:.2} ms ({} appends) alongside replication round trip {:.2} ms ({} messages); apply {:.2} ms ({} batches)\n  \
         followers: {}",
        (client - api).max(0.0),
        mean_ms(leader.write_queued),
        mean_ms(leader.proposal),
        leader.proposal.0,
        mean_ms(leader.log_append),
        leader.log_append.0,
        mean_ms(leader.replicate),
        leader.replicate.0,
        mean_ms(leader.apply),
        leader.apply.0,
        if followers.is_empty() {
            String::from("none answered")
        } else {
            followers.join(", ")
        }
    )
}

/// Each node's storage calls over the run: calls, seconds, share of the
/// wall time.
pub fn storage(o: &Outcome) -> String {
    let wall = o.wall.as_secs_f64().max(1e-9);
    let mut out = String::new();
    for (status, d) in deltas(o) {
        let role = if status.state == "Leader" {
            "leader"
        } else {
            "follower"
        };
        out.push_str(&format!("  node {} ({role}):\n", status.id));
        let rows = [
            ("log append (synced)", d.log_append),
            ("log vote/purge/truncate", d.log_other),
            ("committed index", d.committed),
            ("log reads", d.log_read),
            ("state machine apply", d.apply),
            ("snapshot build", d.snapshot_build),
            ("snapshot install", d.snapshot_install),
        ];
        let mut total = 0u64;
        for (name, (calls, nanos)) in rows {
            total += nanos;
            let secs = nanos as f64 / 1e9;
            out.push_str(&format!(
                "    {name:<24} {calls:>8} calls {secs:>9.3} s {:>5.1}% of wall\n",
                100.0 * secs / wall
            ));
        }
        let secs = total as f64 / 1e9;
        out.push_str(&format!(
            "    {:<24} {:>8}       {secs:>9.3} s {:>5.1}% of wall\n",
            "siftdb, all",
            "",
            100.0 * secs / wall
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_parse() {
        assert_eq!(
            "64x16".parse::<Config>(),
            Ok(Config {
                clients: 64,
                batch: 16
            })
        );
        assert!("64".parse::<Config>().is_err());
        assert!("0x1".parse::<Config>().is_err());
        assert!("8xq".parse::<Config>().is_err());
    }

    #[test]
    fn quantiles_are_nearest_rank() {
        let ms = |v: u64| Duration::from_millis(v);
        let sorted: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(quantile(&sorted, 500), ms(50));
        assert_eq!(quantile(&sorted, 990), ms(99));
        assert_eq!(quantile(&sorted, 1000), ms(100));
        assert_eq!(quantile(&sorted, 0), ms(1));
        assert_eq!(quantile(&[], 500), Duration::ZERO);
        assert_eq!(quantile(&[ms(7)], 990), ms(7));
    }
}
