//! What the cluster tests share: node processes of the `siftdb-raft`
//! binary on loopback ([`Cluster`]), free ports, finding the leader, and a
//! test directory kept when a test fails.
#![allow(
    dead_code,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test support: a failed assumption is a failed test; each test uses part of it"
)]

use std::collections::BTreeMap;
use std::fs::File;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command as Process, Stdio};
use std::time::{Duration, Instant};

use siftdb_raft::client::Client;

/// The node processes; killed when dropped (a failing test leaves none).
pub struct Cluster {
    pub dir: PathBuf,
    pub addrs: BTreeMap<u64, String>,
    pub children: BTreeMap<u64, Child>,
    starts: u64,
    /// `serve` options beyond id, directory, listen address and peers.
    options: Vec<String>,
    /// Per node, `--route` options (its peer traffic through a proxy).
    pub routes: BTreeMap<u64, Vec<String>>,
    /// Per node, more `serve` options (its TLS files, a client token).
    pub extra: BTreeMap<u64, Vec<String>>,
    /// Each node started knowing only itself (`init` through node 1 makes
    /// a one-node cluster; the others join by membership changes).
    pub solo: bool,
}

impl Cluster {
    /// `nodes` nodes in `dir` with fast elections, a snapshot every
    /// `snapshot_every` entries with `keep_logs` kept behind it, small
    /// snapshot chunks.
    pub fn new(dir: &Path, nodes: u64, snapshot_every: u64, keep_logs: u64) -> Cluster {
        let ports = free_ports(nodes as usize);
        let addrs = (1..=nodes)
            .zip(ports)
            .map(|(id, port)| (id, format!("127.0.0.1:{port}")))
            .collect();
        Cluster {
            dir: dir.to_path_buf(),
            addrs,
            children: BTreeMap::new(),
            starts: 0,
            options: Cluster::fast_options(snapshot_every, keep_logs),
            routes: BTreeMap::new(),
            extra: BTreeMap::new(),
            solo: false,
        }
    }

    fn fast_options(snapshot_every: u64, keep_logs: u64) -> Vec<String> {
        [
            "--heartbeat-ms",
            "50",
            "--election-min-ms",
            "300",
            "--election-max-ms",
            "600",
            "--snapshot-every",
            &snapshot_every.to_string(),
            "--keep-logs",
            &keep_logs.to_string(),
            // Snapshots of a test's state (under 1 MB) go in dozens of
            // chunks, so the multi-chunk receive path runs.
            "--snapshot-chunk-kib",
            "16",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect()
    }

    pub fn start(&mut self, id: u64) {
        self.starts += 1;
        let log = File::create(self.dir.join(format!("node-{id}.{}.log", self.starts))).unwrap();
        let mut cmd = Process::new(env!("CARGO_BIN_EXE_siftdb-raft"));
        cmd.arg("serve")
            .args(["--id", &id.to_string()])
            .arg("--dir")
            .arg(self.dir.join(format!("node-{id}")))
            .args(["--listen", &self.addrs[&id]])
            .args(&self.options)
            .args(self.routes.get(&id).into_iter().flatten())
            .args(self.extra.get(&id).into_iter().flatten())
            .env(
                "RUST_LOG",
                std::env::var("SIFTDB_TEST_LOG").unwrap_or_else(|_| "warn".into()),
            )
            .stdout(Stdio::null())
            .stderr(log);
        for (peer, addr) in &self.addrs {
            if !self.solo || *peer == id {
                cmd.arg("--peer").arg(format!("{peer}={addr}"));
            }
        }
        let child = cmd.spawn().unwrap();
        assert!(self.children.insert(id, child).is_none());
    }

    /// SIGKILL (std's `Child::kill` on Unix), then reap.
    pub fn kill(&mut self, id: u64) {
        let mut child = self.children.remove(&id).unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A client of every node of the cluster.
    pub fn client(&self, deadline: Duration, request_timeout: Duration) -> Client {
        Client::new(
            self.addrs.values().cloned().collect(),
            deadline,
            request_timeout,
        )
        .unwrap()
    }

    pub fn addr(&self, id: u64) -> &str {
        &self.addrs[&id]
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for child in self.children.values_mut() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Ports below the ephemeral range (so no outgoing connection takes a dead
/// node's port before it restarts), bindable now.
pub fn free_ports(n: usize) -> Vec<u16> {
    // Ports handed out in this process: the tests of one binary run in
    // parallel and each binds its ports only once its nodes start, so a
    // port free when drawn must still not be drawn twice.
    static TAKEN: std::sync::Mutex<Vec<u16>> = std::sync::Mutex::new(Vec::new());
    let mut taken = TAKEN
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let clock = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let seed = u64::from(std::process::id()) ^ clock ^ (taken.len() as u64) << 32;
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut ports = Vec::new();
    while ports.len() < n {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let port = 20_000 + (state % 12_000) as u16;
        if !taken.contains(&port) && TcpListener::bind(("127.0.0.1", port)).is_ok() {
            taken.push(port);
            ports.push(port);
        }
    }
    ports
}

/// The leader, as the alive node that says it leads in the highest term.
pub async fn find_leader(client: &Client, cluster: &Cluster) -> u64 {
    loop {
        let mut best: Option<(u64, u64)> = None;
        for &id in cluster.children.keys() {
            if let Ok(s) = client.status(cluster.addr(id)).await {
                if s.state == "Leader" && best.is_none_or(|(term, _)| s.term > term) {
                    best = Some((s.term, id));
                }
            }
        }
        if let Some((_, id)) = best {
            return id;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `test` on a fresh directory (kept if it fails), failing it after
/// `limit`.
pub async fn in_test_dir<F, Fut>(limit: Duration, test: F)
where
    F: FnOnce(PathBuf) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let dir = KeptIfFailed(Some(tempfile::tempdir().unwrap()));
    let path = dir.0.as_ref().unwrap().path().to_path_buf();
    if tokio::time::timeout(limit, test(path)).await.is_err() {
        panic!("the test did not finish in {limit:?}");
    }
}

/// The test's directory, removed after a pass but kept after a failure:
/// the node logs in it are what explains the failure.
pub struct KeptIfFailed(pub Option<tempfile::TempDir>);

impl Drop for KeptIfFailed {
    fn drop(&mut self) {
        if std::thread::panicking() {
            if let Some(dir) = self.0.take() {
                eprintln!(
                    "test failed: node directories and logs kept in {}",
                    dir.keep().display()
                );
            }
        }
    }
}
pub mod proxy;

/// `len` bytes that do not compress, a function of `seed` (tests whose
/// state must take its full size on disk and on the wire).
pub fn incompressible(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Waits until each node of `cluster` has applied `index`; their statuses.
pub async fn wait_applied(
    client: &Client,
    cluster: &Cluster,
    index: u64,
    limit: Duration,
) -> BTreeMap<u64, siftdb_raft::api::NodeStatus> {
    let started = Instant::now();
    let mut statuses = BTreeMap::new();
    for &id in cluster.addrs.keys() {
        loop {
            if let Ok(s) = client.status(cluster.addr(id)).await {
                if s.last_applied.is_some_and(|a| a >= index) {
                    statuses.insert(id, s);
                    break;
                }
            }
            assert!(started.elapsed() < limit, "node {id} did not apply {index}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    statuses
}

/// Writes a last put through `client`, waits until every node of `cluster`
/// applied it and checks that `follower` caught up by a snapshot install;
/// the put's log index and the nodes' statuses.
pub async fn caught_up_by_snapshot(
    client: &Client,
    cluster: &Cluster,
    follower: u64,
    limit: Duration,
) -> (u64, BTreeMap<u64, siftdb_raft::api::NodeStatus>) {
    let last = client
        .write(&siftdb_raft::Command::Put {
            key: b"last".to_vec(),
            value: b"1".to_vec(),
        })
        .await
        .unwrap();
    let statuses = wait_applied(client, cluster, last.index, limit).await;
    assert!(
        statuses[&follower].sm.snapshots_installed >= 1,
        "node {follower} caught up without a snapshot install: {:?}",
        statuses[&follower]
    );
    (last.index, statuses)
}

/// Each node's keys under `prefix`, checked by `check(node, dump)`; the
/// nodes' dumps must be equal.
pub async fn dumps_agree(
    client: &Client,
    cluster: &Cluster,
    prefix: &[u8],
    check: impl Fn(u64, &BTreeMap<Vec<u8>, Vec<u8>>),
) {
    let mut dumps = Vec::new();
    for &id in cluster.addrs.keys() {
        let dump: BTreeMap<Vec<u8>, Vec<u8>> = client
            .dump(cluster.addr(id), prefix)
            .await
            .unwrap()
            .into_iter()
            .collect();
        check(id, &dump);
        dumps.push(dump);
    }
    assert!(
        dumps.windows(2).all(|d| d[0] == d[1]),
        "the nodes' states differ"
    );
}

/// Adds node `id` (already started) as a learner, caught up, and promotes
/// it to voter when `voter`; the members after.
pub async fn add_node(
    admin: &Client,
    cluster: &Cluster,
    id: u64,
    voter: bool,
) -> siftdb_raft::api::Members {
    use siftdb_raft::api::MembershipChange;
    let added = admin
        .change_membership(&MembershipChange::AddLearner {
            id,
            addr: cluster.addr(id).to_string(),
        })
        .await
        .unwrap();
    if !voter {
        return added;
    }
    admin
        .change_membership(&MembershipChange::Promote { id })
        .await
        .unwrap()
}
