//! The `siftdb-raft` binary: run a node, start a local cluster, talk to a
//! cluster (init, put, get, delete, delete-range, status, membership changes) and measure replicated write
//! throughput (bench); over https with a client token or certificate when
//! given them.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use siftdb_raft::api::{Consistency, MembershipChange};
use siftdb_raft::bench;
use siftdb_raft::client::Client;
use siftdb_raft::node::{run, NodeConfig};
use siftdb_raft::tls::{write_local_pki, ClientAuth, TlsFiles};
use siftdb_raft::{Command, NodeId};

#[derive(Parser)]
#[command(name = "siftdb-raft", about = "siftdb replicated with openraft")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs one node until SIGINT or SIGTERM.
    Serve(ServeArgs),
    /// Starts NODES local nodes (children of this process) on consecutive
    /// ports, initialises the cluster, and waits for Ctrl-C.
    Cluster {
        /// Parent directory of the node directories (node-1, node-2, ...).
        #[arg(long)]
        dir: PathBuf,
        /// How many nodes.
        #[arg(long, default_value_t = 3)]
        nodes: u64,
        /// Port of node 1; node i listens on BASE_PORT + i - 1.
        #[arg(long, default_value_t = 21001)]
        base_port: u16,
        /// Run the nodes with TLS: write a fresh CA, a certificate per node,
        /// a client certificate and a client token into DIR/tls, and have
        /// the nodes use them (mutual TLS between nodes, the token or the
        /// certificate for clients).
        #[arg(long)]
        tls: bool,
        /// Start the nodes with `serve --no-early-send`.
        #[arg(long)]
        no_early_send: bool,
    },
    /// Initialises a new cluster through one node (every peer a voter).
    Init {
        /// The node's address.
        #[arg(long)]
        node: String,
        #[command(flatten)]
        auth: AuthArgs,
    },
    /// Stores VALUE under KEY.
    Put {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Prints the value of KEY (a linearizable read); exit 1 when absent.
    Get {
        #[command(flatten)]
        cluster: ClusterArg,
        /// linearizable (ReadIndex), lease (the leader's lease: no round
        /// trip, assumes clock rates within 5%), or stale (the leader's
        /// state as it is).
        #[arg(long, default_value = "linearizable")]
        consistency: Consistency,
        /// The key.
        key: String,
    },
    /// Deletes KEY.
    Delete {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The key.
        key: String,
    },
    /// Deletes every key from START up to END (excluded; every key from
    /// START on without END) with one range delete: `delete-range ""`
    /// deletes every key.
    DeleteRange {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The first key deleted.
        start: String,
        /// The first key kept after the range.
        end: Option<String>,
    },
    /// Measures read latency at the leader per consistency: CLIENTS tasks
    /// reading one key in a closed loop, READS reads per mode; prints p50
    /// and p99.
    BenchReads {
        #[command(flatten)]
        cluster: ClusterArg,
        /// Reads per mode.
        #[arg(long, default_value_t = 2000)]
        reads: u64,
        /// Concurrent client tasks.
        #[arg(long, default_value_t = 1)]
        clients: u64,
        /// The modes, one after another.
        #[arg(
            long,
            value_delimiter = ',',
            default_value = "linearizable,lease,stale"
        )]
        consistency: Vec<Consistency>,
    },
    /// Adds node ID at ADDR as a learner and waits until it caught up
    /// (start it first: `serve --id ID --listen ADDR --peer ID=ADDR`).
    AddLearner {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The new node's id.
        #[arg(long)]
        id: NodeId,
        /// Its address, host:port.
        #[arg(long)]
        addr: String,
    },
    /// Makes learner ID a voter.
    Promote {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The learner.
        #[arg(long)]
        id: NodeId,
    },
    /// Removes node ID (voter or learner) from the cluster.
    Remove {
        #[command(flatten)]
        cluster: ClusterArg,
        /// The node.
        #[arg(long)]
        id: NodeId,
    },
    /// Prints the members as each node knows them, JSON lines.
    Members {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Prints every node's status as JSON lines.
    Status {
        #[command(flatten)]
        cluster: ClusterArg,
    },
    /// Measures replicated write throughput and latency: CLIENTS tasks,
    /// each sending commands of BATCH puts, one at a time, until WRITES
    /// puts are acknowledged (or for SECONDS); per configuration the
    /// puts/s, each command's p50/p99 latency and where the time went on
    /// the leader.
    Bench {
        #[command(flatten)]
        cluster: ClusterArg,
        /// Puts in all, per configuration.
        #[arg(long, default_value_t = 200_000)]
        writes: u64,
        /// Run each configuration this many seconds instead of WRITES puts.
        #[arg(long)]
        seconds: Option<f64>,
        /// Puts per command.
        #[arg(long, default_value_t = 100)]
        batch: u64,
        /// Concurrent client tasks.
        #[arg(long, default_value_t = 8)]
        clients: u64,
        /// Configurations run one after another, `CLIENTSxBATCH,...` (like
        /// `1x1,8x1,64x1,64x16`), instead of --clients and --batch.
        #[arg(long, value_delimiter = ',')]
        configs: Vec<bench::Config>,
        /// Also print each node's storage calls (count, time, share of the
        /// wall time).
        #[arg(long)]
        storage: bool,
        /// Bytes per value.
        #[arg(long, default_value_t = 100)]
        value_size: usize,
        /// Send writes without a client session (applied each time they
        /// are committed; no exactly-once), to measure what sessions cost.
        #[arg(long)]
        sessionless: bool,
    },
}

#[derive(Args)]
struct ClusterArg {
    /// The cluster's nodes, `host:port,host:port,...`.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "127.0.0.1:21001,127.0.0.1:21002,127.0.0.1:21003"
    )]
    cluster: Vec<String>,
    #[command(flatten)]
    auth: AuthArgs,
}

/// How a client proves itself and checks the nodes.
#[derive(Args)]
struct AuthArgs {
    /// The cluster's CA certificate (PEM): talk https and verify the nodes
    /// against it.
    #[arg(long, env = "SIFTDB_RAFT_CA")]
    ca: Option<PathBuf>,
    /// A file holding the client token, sent with every request.
    #[arg(long, env = "SIFTDB_RAFT_TOKEN_FILE")]
    token_file: Option<PathBuf>,
    /// A client certificate from the cluster's CA (PEM), instead of a
    /// token (needs --client-key and --ca).
    #[arg(long, env = "SIFTDB_RAFT_CLIENT_CERT", requires = "client_key")]
    client_cert: Option<PathBuf>,
    /// The client certificate's key (PEM).
    #[arg(long, env = "SIFTDB_RAFT_CLIENT_KEY", requires = "client_cert")]
    client_key: Option<PathBuf>,
}

impl AuthArgs {
    fn load(&self) -> Result<ClientAuth, String> {
        ClientAuth::load(
            self.ca.as_deref(),
            self.token_file.as_deref(),
            self.client_cert.as_deref().zip(self.client_key.as_deref()),
        )
        .map_err(|e| e.to_string())
    }
}

#[derive(Args, Clone)]
struct ServeArgs {
    /// This node's id.
    #[arg(long)]
    id: NodeId,
    /// This node's directory.
    #[arg(long)]
    dir: PathBuf,
    /// Address to listen on (this node's entry among the peers).
    #[arg(long)]
    listen: SocketAddr,
    /// Every node, `ID=host:port`, repeated (this one included).
    #[arg(long = "peer", value_parser = parse_peer, required = true)]
    peers: Vec<(NodeId, String)>,
    /// `ID=host:port`, repeated: send this node's raft messages for node
    /// ID to this address instead of the node's own (a proxy in the
    /// partition tests); clients and the membership keep the node's own.
    #[arg(long = "route", value_parser = parse_peer)]
    routes: Vec<(NodeId, String)>,
    /// Heartbeat interval in ms (also how long a leader waits for the answer
    /// to an append-entries message).
    #[arg(long, default_value_t = 100)]
    heartbeat_ms: u64,
    /// Smallest election timeout in ms.
    #[arg(long, default_value_t = 1000)]
    election_min_ms: u64,
    /// Largest election timeout in ms.
    #[arg(long, default_value_t = 2000)]
    election_max_ms: u64,
    /// Build a snapshot every this many applied entries.
    #[arg(long, default_value_t = 5000)]
    snapshot_every: u64,
    /// Log entries kept behind a snapshot.
    #[arg(long, default_value_t = 1000)]
    keep_logs: u64,
    /// KiB of snapshot file per message to a follower (1 to 65,536).
    #[arg(long, default_value_t = 3072)]
    snapshot_chunk_kib: u64,
    /// This node's certificate (PEM, its chain after it), valid for the
    /// host name or IP address in its peer address; presented to clients
    /// and, as a client certificate, to peers. With --tls-key and
    /// --tls-ca: every node-to-node and client connection is TLS.
    #[arg(long, requires_all = ["tls_key", "tls_ca"])]
    tls_cert: Option<PathBuf>,
    /// The certificate's private key (PEM).
    #[arg(long, requires_all = ["tls_cert", "tls_ca"])]
    tls_key: Option<PathBuf>,
    /// The cluster's CA certificate (PEM): peers must present a certificate
    /// signed by it, and clients may.
    #[arg(long, requires_all = ["tls_cert", "tls_key"])]
    tls_ca: Option<PathBuf>,
    /// A file holding the token clients send (`Authorization: Bearer`);
    /// without it, and with TLS, clients need a certificate from the CA.
    #[arg(long)]
    client_token_file: Option<PathBuf>,
    /// Serve plain HTTP on an address other than loopback: no encryption,
    /// peers not authenticated. Refused without this.
    #[arg(long)]
    insecure: bool,
    /// Async worker threads (default: one per core). Nodes sharing a
    /// machine do better with fewer: `cluster` divides the cores among its
    /// nodes.
    #[arg(long)]
    workers: Option<usize>,
    /// As leader, send new entries to the followers only once they are on
    /// this node's disk (openraft's own path; the default also sends them
    /// while they are being fsynced). To measure what early sends save.
    #[arg(long)]
    no_early_send: bool,
    /// Test only (unsafe): the leader's lease for lease reads, in ms,
    /// instead of the one derived from the election timeout. Longer than
    /// the election timeout, an isolated leader serves stale reads; the
    /// lease tests set it to show that their checker catches them.
    #[arg(long, hide = true)]
    unsafe_lease_ms: Option<u64>,
}

fn parse_peer(s: &str) -> Result<(NodeId, String), String> {
    let (id, addr) = s
        .split_once('=')
        .ok_or_else(|| format!("expected ID=host:port, got {s:?}"))?;
    let id = id.parse().map_err(|e| format!("node id {id:?}: {e}"))?;
    Ok((id, addr.to_string()))
}

async fn shutdown_signal() {
    let term = async {
        #[cfg(unix)]
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
        // No SIGTERM on Windows: Ctrl-C (or Ctrl-Break) only.
        #[cfg(not(unix))]
        std::future::pending::<()>().await;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        () = term => {}
    }
}

async fn serve(args: ServeArgs) -> Result<(), String> {
    let cfg = NodeConfig {
        id: args.id,
        dir: args.dir,
        listen: args.listen,
        peers: args.peers.into_iter().collect(),
        routes: args.routes.into_iter().collect(),
        heartbeat_ms: args.heartbeat_ms,
        election_ms: (args.election_min_ms, args.election_max_ms),
        snapshot_every: args.snapshot_every,
        keep_logs: args.keep_logs,
        // Far below the receiver's body limit (network::MAX_RPC_BODY).
        snapshot_chunk_bytes: args.snapshot_chunk_kib.clamp(1, 64 << 10) * 1024,
        tls: match (args.tls_cert, args.tls_key, args.tls_ca) {
            (Some(cert), Some(key), Some(ca)) => Some(TlsFiles { cert, key, ca }),
            _ => None,
        },
        client_token_file: args.client_token_file,
        insecure: args.insecure,
        early_send: !args.no_early_send,
        unsafe_lease: args.unsafe_lease_ms.map(Duration::from_millis),
    };
    run(cfg, shutdown_signal()).await.map_err(|e| e.to_string())
}

/// Makes `change` through the cluster's leader; prints the members after.
async fn change(cluster: ClusterArg, change: MembershipChange) -> Result<ExitCode, String> {
    let members = client(cluster)?
        .change_membership(&change)
        .await
        .map_err(|e| e.to_string())?;
    println!(
        "{}",
        serde_json::to_string(&members).map_err(|e| e.to_string())?
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `cmd` through the cluster's leader; prints the log index it
/// was committed at.
async fn write(cluster: ClusterArg, cmd: &Command) -> Result<ExitCode, String> {
    let ack = client(cluster)?
        .write(cmd)
        .await
        .map_err(|e| e.to_string())?;
    println!("ok, log index {}", ack.index);
    Ok(ExitCode::SUCCESS)
}

fn client(cluster: ClusterArg) -> Result<Client, String> {
    Client::with_auth(
        cluster.cluster,
        Duration::from_secs(30),
        Duration::from_secs(10),
        &cluster.auth.load()?,
    )
    .map_err(|e| e.to_string())
}

async fn cluster(
    dir: PathBuf,
    nodes: u64,
    base_port: u16,
    tls: bool,
    early_send: bool,
) -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let addrs: BTreeMap<NodeId, String> = (1..=nodes)
        .map(|i| {
            let port = u64::from(base_port) + i - 1;
            (i, format!("127.0.0.1:{port}"))
        })
        .collect();
    let pki = if tls {
        let ids: Vec<NodeId> = addrs.keys().copied().collect();
        let hosts = ["127.0.0.1".to_string(), "localhost".to_string()];
        Some(write_local_pki(&dir.join("tls"), &ids, &hosts).map_err(|e| e.to_string())?)
    } else {
        None
    };
    let scheme = if tls { "https" } else { "http" };
    // Nodes on one machine share its cores: a node with a worker per core
    // each would hand its tasks between more threads than there are cores
    // (on 2 cores, 3 nodes of 1 worker put 1.4-1.9x more than 3 of 2).
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    let workers = (cores / usize::try_from(nodes).unwrap_or(usize::MAX).max(1)).max(1);
    let mut children = Vec::new();
    for (id, addr) in &addrs {
        let mut cmd = tokio::process::Command::new(&exe);
        cmd.arg("serve")
            .arg("--id")
            .arg(id.to_string())
            .arg("--dir")
            .arg(dir.join(format!("node-{id}")))
            .arg("--listen")
            .arg(addr)
            .arg("--workers")
            .arg(workers.to_string())
            .kill_on_drop(true);
        if !early_send {
            cmd.arg("--no-early-send");
        }
        for (pid, paddr) in &addrs {
            cmd.arg("--peer").arg(format!("{pid}={paddr}"));
        }
        if let Some((pki, files)) = pki.as_ref().and_then(|p| Some((p, p.nodes.get(id)?))) {
            cmd.arg("--tls-cert")
                .arg(&files.cert)
                .arg("--tls-key")
                .arg(&files.key)
                .arg("--tls-ca")
                .arg(&files.ca)
                .arg("--client-token-file")
                .arg(&pki.token);
        }
        children.push(
            cmd.spawn()
                .map_err(|e| format!("starting node {id}: {e}"))?,
        );
        println!(
            "node {id}: {scheme}://{addr} (directory {})",
            dir.join(format!("node-{id}")).display()
        );
    }
    let first = addrs.values().next().cloned().unwrap_or_default();
    let auth = match &pki {
        Some(pki) => {
            println!(
                "TLS: CA {}, client token in {} (client certificate {}, key {}); for example:\n  siftdb-raft status --ca {} --token-file {}",
                pki.ca.display(),
                pki.token.display(),
                pki.client.0.display(),
                pki.client.1.display(),
                pki.ca.display(),
                pki.token.display()
            );
            ClientAuth::load(Some(&pki.ca), Some(&pki.token), None).map_err(|e| e.to_string())?
        }
        None => ClientAuth::default(),
    };
    let c = Client::with_auth(
        addrs.values().cloned().collect(),
        Duration::from_secs(30),
        Duration::from_secs(5),
        &auth,
    )
    .map_err(|e| e.to_string())?;
    print!("{}", c.init(&first).await.map_err(|e| e.to_string())?);
    println!("Ctrl-C stops the cluster");
    shutdown_signal().await;
    for child in &mut children {
        // SIGTERM: each node shuts raft down and closes its database.
        #[cfg(unix)]
        if let Some(pid) = child
            .id()
            .and_then(|id| rustix::process::Pid::from_raw(id.cast_signed()))
        {
            let _ = rustix::process::kill_process(pid, rustix::process::Signal::TERM);
        }
        // Windows has no SIGTERM to send: the node is terminated, and its
        // database recovers from its log at the next open.
        #[cfg(not(unix))]
        let _ = child.start_kill();
    }
    for child in &mut children {
        let _ = child.wait().await;
    }
    Ok(())
}

/// What `bench` was asked for.
struct BenchArgs {
    configs: Vec<bench::Config>,
    length: bench::Length,
    value_size: usize,
    sessionless: bool,
    storage: bool,
}

async fn run_bench(cluster: ClusterArg, args: BenchArgs) -> Result<(), String> {
    let c = Arc::new(client(cluster)?);
    println!(
        "{}-byte values, {}; p50/p99: each command's latency at the client",
        args.value_size,
        if args.sessionless {
            "no client sessions"
        } else {
            "client sessions (exactly-once)"
        }
    );
    let mut first_key = 0u64;
    for config in args.configs {
        let outcome = bench::run(
            &c,
            config,
            args.length,
            args.value_size,
            args.sessionless,
            first_key,
        )
        .await?;
        // Past every key this configuration may have taken.
        first_key = first_key
            .saturating_add(outcome.puts)
            .saturating_add(config.batch.saturating_mul(config.clients));
        println!("{}", bench::header());
        println!("{}", bench::row(&outcome));
        println!("{}", bench::breakdown(&outcome));
        if args.storage {
            print!("{}", bench::storage(&outcome));
        }
    }
    Ok(())
}

async fn main_async(cli: Cli) -> Result<ExitCode, String> {
    match cli.command {
        Cmd::Serve(args) => serve(args).await.map(|()| ExitCode::SUCCESS),
        Cmd::Cluster {
            dir,
            nodes,
            base_port,
            tls,
            no_early_send,
        } => cluster(dir, nodes, base_port, tls, !no_early_send)
            .await
            .map(|()| ExitCode::SUCCESS),
        Cmd::Init { node, auth } => {
            let c = Client::with_auth(
                vec![node.clone()],
                Duration::from_secs(30),
                Duration::from_secs(10),
                &auth.load()?,
            )
            .map_err(|e| e.to_string())?;
            print!("{}", c.init(&node).await.map_err(|e| e.to_string())?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Put {
            cluster,
            key,
            value,
        } => {
            let put = Command::Put {
                key: key.into_bytes(),
                value: value.into_bytes(),
            };
            write(cluster, &put).await
        }
        Cmd::Delete { cluster, key } => {
            let delete = Command::Delete {
                key: key.into_bytes(),
            };
            write(cluster, &delete).await
        }
        Cmd::DeleteRange {
            cluster,
            start,
            end,
        } => {
            let range = Command::DeleteRange {
                start: start.into_bytes(),
                end: end.map(String::into_bytes),
            };
            write(cluster, &range).await
        }
        Cmd::BenchReads {
            cluster,
            reads,
            clients,
            consistency,
        } => {
            let c = Arc::new(client(cluster)?);
            println!(
                "{:>13} {:>8} {:>8} {:>8}",
                "consistency", "reads", "p50 ms", "p99 ms"
            );
            for mode in consistency {
                let l = bench::run_reads(&c, clients, reads, mode).await?;
                let ms = |d: Duration| d.as_secs_f64() * 1e3;
                println!(
                    "{:>13} {:>8} {:>8.3} {:>8.3}",
                    mode.name(),
                    l.len(),
                    ms(bench::quantile(&l, 500)),
                    ms(bench::quantile(&l, 990))
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Get {
            cluster,
            consistency,
            key,
        } => match client(cluster)?
            .read_with(key.as_bytes(), consistency)
            .await
            .map_err(|e| e.to_string())?
        {
            Some(v) => {
                println!("{}", String::from_utf8_lossy(&v));
                Ok(ExitCode::SUCCESS)
            }
            None => Ok(ExitCode::FAILURE),
        },
        Cmd::AddLearner { cluster, id, addr } => {
            change(cluster, MembershipChange::AddLearner { id, addr }).await
        }
        Cmd::Promote { cluster, id } => change(cluster, MembershipChange::Promote { id }).await,
        Cmd::Remove { cluster, id } => change(cluster, MembershipChange::Remove { id }).await,
        Cmd::Members { cluster } => {
            let c = client(cluster)?;
            for addr in c.nodes() {
                match c.members(addr).await {
                    Ok(m) => println!(
                        "{{\"addr\":{addr:?},\"members\":{}}}",
                        serde_json::to_string(&m).map_err(|e| e.to_string())?
                    ),
                    Err(e) => println!("{{\"addr\":{addr:?},\"error\":{:?}}}", e.to_string()),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Status { cluster } => {
            let c = client(cluster)?;
            for addr in c.nodes() {
                match c.status(addr).await {
                    Ok(s) => println!("{}", serde_json::to_string(&s).map_err(|e| e.to_string())?),
                    Err(e) => println!("{{\"addr\":{addr:?},\"error\":{:?}}}", e.to_string()),
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Bench {
            cluster,
            writes,
            seconds,
            batch,
            clients,
            configs,
            storage,
            value_size,
            sessionless,
        } => {
            let configs = if configs.is_empty() {
                vec![bench::Config {
                    clients: clients.max(1),
                    batch: batch.max(1),
                }]
            } else {
                configs
            };
            let length = match seconds {
                Some(s) => bench::Length::Time(
                    Duration::try_from_secs_f64(s).map_err(|e| format!("--seconds {s}: {e}"))?,
                ),
                None => bench::Length::Puts(writes),
            };
            let args = BenchArgs {
                configs,
                length,
                value_size,
                sessionless,
                storage,
            };
            run_bench(cluster, args).await.map(|()| ExitCode::SUCCESS)
        }
    }
}

fn main() -> ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if let Cmd::Serve(ServeArgs {
        workers: Some(n), ..
    }) = &cli.command
    {
        builder.worker_threads((*n).max(1));
    }
    let runtime = match builder.enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("siftdb-raft: error: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(main_async(cli)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("siftdb-raft: error: {e}");
            ExitCode::from(2)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn command_line_is_consistent() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
