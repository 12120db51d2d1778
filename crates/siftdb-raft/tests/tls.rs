//! TLS and authentication of a cluster: nodes with certificates from one
//! CA (made by `tls::write_local_pki`, as `cluster --tls` does) elect a
//! leader, replicate and serve linearizable reads on every node; the bytes
//! between the nodes, recorded by a relay on every link (`serve --route`),
//! never hold a value written, while on a plain cluster they do (so the
//! check can fail); a client without the token, or with a wrong one, gets
//! 401, a token does not open the peer routes, a client certificate from
//! the CA does open the client routes; a node whose certificate comes from
//! another CA is refused by the others (handshake refused, it never gets
//! an entry); a node listening on an address other than loopback without
//! TLS refuses to start unless `--insecure`.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::indexing_slicing,
    clippy::cast_possible_truncation,
    reason = "test code outside #[test] functions: a failed assumption is a failed test"
)]

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use siftdb_raft::client::{Client, ClientError};
use siftdb_raft::tls::{write_local_pki, ClientAuth, LocalPki, TlsFiles};
use siftdb_raft::Command;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use common::Cluster;

/// A value that appears nowhere but where it was written.
const SECRET: &[u8] = b"wire-secret-5d1f7a93c0e2-do-not-leak";

/// The `serve` options of a node with `files` and the client token.
fn tls_options(files: &TlsFiles, token: &Path) -> Vec<String> {
    let path = |p: &Path| p.display().to_string();
    vec![
        "--tls-cert".into(),
        path(&files.cert),
        "--tls-key".into(),
        path(&files.key),
        "--tls-ca".into(),
        path(&files.ca),
        "--client-token-file".into(),
        path(token),
    ]
}

/// A local CA with certificates for nodes 1 to 3 (valid for 127.0.0.1).
fn pki(dir: &Path) -> LocalPki {
    write_local_pki(&dir.join("tls"), &[1, 2, 3], &["127.0.0.1".to_string()]).unwrap()
}

/// A three-node cluster with TLS (every node with its certificate from
/// `pki` and its token); not started.
fn tls_cluster(dir: &Path, pki: &LocalPki) -> Cluster {
    let mut cluster = Cluster::new(dir, 3, 10_000, 1000);
    for (&id, files) in &pki.nodes {
        cluster.extra.insert(id, tls_options(files, &pki.token));
    }
    cluster
}

/// A client of `cluster` verifying it against `pki`'s CA, with its token.
fn tls_client(cluster: &Cluster, pki: &LocalPki) -> Client {
    client_of(
        cluster.addrs.values().cloned().collect(),
        &pki.ca,
        &pki.token,
    )
}

/// A client of `nodes` verifying them against `ca`, with the token in
/// `token`.
fn client_of(nodes: Vec<String>, ca: &Path, token: &Path) -> Client {
    Client::with_auth(
        nodes,
        Duration::from_secs(30),
        Duration::from_secs(5),
        &ClientAuth::load(Some(ca), Some(token), None).unwrap(),
    )
    .unwrap()
}

/// Puts keys `k-0` to `k-{n-1}`, each acknowledged.
async fn put_keys(client: &Client, n: u64) {
    for i in 0..n {
        client
            .write(&Command::Put {
                key: format!("k-{i}").into_bytes(),
                value: i.to_be_bytes().to_vec(),
            })
            .await
            .unwrap();
    }
}

/// A relay for every directed link between `addrs`, each recording what
/// passes both ways into the returned buffer; with the `--route` options
/// that send each node's peer traffic through them.
async fn recording_relays(
    addrs: &BTreeMap<u64, String>,
) -> (Arc<Mutex<Vec<u8>>>, BTreeMap<u64, Vec<String>>) {
    let captured = Arc::new(Mutex::new(Vec::new()));
    let mut routes = BTreeMap::new();
    for &from in addrs.keys() {
        for (&to, target) in addrs {
            if from == to {
                continue;
            }
            let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
            routes.entry(from).or_insert_with(Vec::new).extend([
                "--route".to_string(),
                format!("{to}={}", listener.local_addr().unwrap()),
            ]);
            tokio::spawn(relay(listener, target.clone(), Arc::clone(&captured)));
        }
    }
    (captured, routes)
}

async fn relay(listener: TcpListener, target: String, captured: Arc<Mutex<Vec<u8>>>) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        let (target, captured) = (target.clone(), Arc::clone(&captured));
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(&target).await else {
                return;
            };
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            tokio::select! {
                () = copy_recorded(in_read, out_write, Arc::clone(&captured)) => {}
                () = copy_recorded(out_read, in_write, captured) => {}
            }
        });
    }
}

async fn copy_recorded(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    captured: Arc<Mutex<Vec<u8>>>,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        captured.lock().unwrap().extend_from_slice(&buf[..n]);
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Starts three nodes (with TLS when `pki` is given) whose peer traffic
/// goes through recording relays, writes [`SECRET`] and reads it back
/// linearizably from every node (followers by read index, through the
/// relays too); the bytes recorded.
async fn replicate_recorded(dir: &Path, pki: Option<&LocalPki>) -> Vec<u8> {
    let mut cluster = match pki {
        Some(pki) => tls_cluster(dir, pki),
        None => Cluster::new(dir, 3, 10_000, 1000),
    };
    let (captured, routes) = recording_relays(&cluster.addrs).await;
    cluster.routes = routes;
    for id in 1..=3 {
        cluster.start(id);
    }
    let client = match pki {
        Some(pki) => tls_client(&cluster, pki),
        None => cluster.client(Duration::from_secs(30), Duration::from_secs(5)),
    };
    client.init(cluster.addr(1)).await.unwrap();
    let leader = common::find_leader(&client, &cluster).await;
    put_keys(&client, 20).await;
    client
        .write(&Command::Put {
            key: b"secret".to_vec(),
            value: SECRET.to_vec(),
        })
        .await
        .unwrap();
    assert_eq!(
        client.read(b"secret").await.unwrap().as_deref(),
        Some(SECRET)
    );
    for id in 1..=3 {
        assert_eq!(
            client
                .read_at(cluster.addr(id), b"secret")
                .await
                .unwrap()
                .as_deref(),
            Some(SECRET),
            "node {id} (leader {leader})"
        );
    }
    let status = client.status(cluster.addr(leader)).await.unwrap();
    assert_eq!(status.state, "Leader");
    let bytes = captured.lock().unwrap().clone();
    assert!(
        bytes.len() > 1000,
        "{} bytes between the nodes",
        bytes.len()
    );
    bytes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_cluster_replicates_and_its_traffic_is_unreadable() {
    common::in_test_dir(Duration::from_secs(120), |dir| async move {
        let pki = pki(&dir);
        let bytes = replicate_recorded(&dir, Some(&pki)).await;
        assert!(!contains(&bytes, SECRET), "the value crossed in the clear");
        assert!(!contains(&bytes, b"POST /raft/"), "HTTP in the clear");
        println!("{} bytes between TLS nodes, no value in them", bytes.len());
    })
    .await;
}

/// The control for the test above: the same recording on a plain cluster
/// finds the value, so the TLS check could fail.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_cluster_traffic_shows_the_value() {
    common::in_test_dir(Duration::from_secs(120), |dir| async move {
        let bytes = replicate_recorded(&dir, None).await;
        assert!(contains(&bytes, SECRET));
        assert!(contains(&bytes, b"POST /raft/append"));
    })
    .await;
}

/// A raw HTTP client verifying the nodes against `ca`, with the token in
/// `token` and the client certificate `identity`, each when given.
fn raw(ca: &Path, token: Option<&Path>, identity: Option<(&Path, &Path)>) -> reqwest::Client {
    ClientAuth::load(Some(ca), token, identity)
        .unwrap()
        .http_client(reqwest::Client::builder().timeout(Duration::from_secs(5)))
        .unwrap()
}

fn write_token(dir: &Path, name: &str, token: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, token).unwrap();
    path
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_without_the_token_are_refused() {
    common::in_test_dir(Duration::from_secs(120), |dir| async move {
        let pki = pki(&dir);
        let mut cluster = tls_cluster(&dir, &pki);
        for id in 1..=3 {
            cluster.start(id);
        }
        let client = tls_client(&cluster, &pki);
        client.init(cluster.addr(1)).await.unwrap();
        let leader = common::find_leader(&client, &cluster).await;
        client
            .write(&Command::Put {
                key: b"k".to_vec(),
                value: b"v".to_vec(),
            })
            .await
            .unwrap();
        let addr = cluster.addr(leader).to_string();
        let url = |path: &str| format!("https://{addr}{path}");
        let wrong = write_token(&dir, "wrong-token", "not-the-token-0123456789");

        for (who, http) in [
            ("no token", raw(&pki.ca, None, None)),
            ("a wrong token", raw(&pki.ca, Some(&wrong), None)),
        ] {
            for req in [
                http.get(url("/api/metrics")),
                http.get(url("/kv/k")),
                http.put(url("/kv/k")).body("overwritten"),
                http.post(url("/api/write")).body(vec![0u8; 4]),
                http.post(url("/raft/vote")).body(vec![0u8; 4]),
            ] {
                let resp = req.send().await.unwrap();
                assert_eq!(resp.status(), reqwest::StatusCode::UNAUTHORIZED, "{who}");
            }
        }
        // The library client stops at the refusal instead of retrying.
        let refused = Client::with_auth(
            vec![addr.clone()],
            Duration::from_secs(30),
            Duration::from_secs(5),
            &ClientAuth::load(Some(&pki.ca), Some(&wrong), None).unwrap(),
        )
        .unwrap();
        let started = std::time::Instant::now();
        let err = refused
            .write(&Command::Put {
                key: b"k".to_vec(),
                value: b"overwritten".to_vec(),
            })
            .await
            .unwrap_err();
        assert!(matches!(err, ClientError::Refused(_)), "{err}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert!(matches!(
            refused.status(&addr).await,
            Err(ClientError::Refused(_))
        ));

        // The token opens the client routes, not the peer routes.
        let tokened = raw(&pki.ca, Some(&pki.token), None);
        let resp = tokened.get(url("/kv/k")).send().await.unwrap();
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
        assert_eq!(resp.bytes().await.unwrap().as_ref(), b"v");
        for path in [
            "/raft/vote",
            "/raft/append",
            "/raft/snapshot",
            "/api/read-index",
            "/api/member",
        ] {
            let resp = tokened.post(url(path)).send().await.unwrap();
            assert_eq!(resp.status(), reqwest::StatusCode::UNAUTHORIZED, "{path}");
        }
        // A client certificate from the CA instead of the token.
        let (cert, key) = &pki.client;
        let certified = raw(&pki.ca, None, Some((cert, key)));
        let resp = certified.get(url("/kv/k")).send().await.unwrap();
        assert_eq!(resp.status(), reqwest::StatusCode::OK);
        // Plain HTTP to a TLS node gets no answer.
        assert!(reqwest::get(format!("http://{addr}/kv/k")).await.is_err());
        // Nothing the refused clients sent was applied.
        assert_eq!(client.read(b"k").await.unwrap().as_deref(), Some(&b"v"[..]));
    })
    .await;
}

/// A CA of its own, and a certificate for 127.0.0.1 signed by it: what a
/// node that does not belong to the cluster would have.
fn foreign_certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    std::fs::create_dir_all(dir).unwrap();
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "another CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params
        .distinguished_name
        .push(DnType::CommonName, "siftdb-raft node 3");
    params.extended_key_usages = vec![
        ExtendedKeyUsagePurpose::ServerAuth,
        ExtendedKeyUsagePurpose::ClientAuth,
    ];
    let key = KeyPair::generate().unwrap();
    let cert = params.signed_by(&key, &ca).unwrap();
    let paths = (
        dir.join("node-3.pem"),
        dir.join("node-3-key.pem"),
        dir.join("ca.pem"),
    );
    std::fs::write(&paths.0, cert.pem()).unwrap();
    std::fs::write(&paths.1, key.serialize_pem()).unwrap();
    std::fs::write(&paths.2, ca.pem()).unwrap();
    paths
}

/// Every log line of node `id`'s runs.
fn node_logs(dir: &Path, id: u64) -> String {
    let mut text = String::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("node-{id}.")) && name.ends_with(".log") {
            text.push_str(&std::fs::read_to_string(dir.join(&name)).unwrap());
        }
    }
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_with_a_certificate_from_another_ca_is_refused() {
    common::in_test_dir(Duration::from_secs(120), |dir| async move {
        let pki = pki(&dir);
        let mut cluster = tls_cluster(&dir, &pki);
        // Node 3 trusts the cluster's CA, but its own certificate comes
        // from another one.
        let (cert, key, foreign_ca) = foreign_certificate(&dir.join("foreign"));
        let node3 = TlsFiles {
            cert,
            key,
            ca: pki.ca.clone(),
        };
        cluster.extra.insert(3, tls_options(&node3, &pki.token));
        for id in 1..=3 {
            cluster.start(id);
        }
        let client = tls_client(&cluster, &pki);
        client.init(cluster.addr(1)).await.unwrap();
        // Node 3 reached by a client that trusts its CA; initialised too,
        // so that it stands for election and calls the others itself.
        let foreign = client_of(vec![cluster.addr(3).to_string()], &foreign_ca, &pki.token);
        foreign.init(cluster.addr(3)).await.unwrap();
        let leader = common::find_leader(&client, &cluster).await;
        assert_ne!(leader, 3);
        put_keys(&client, 20).await;
        let leader_status = client.status(cluster.addr(leader)).await.unwrap();
        // Several election timeouts: node 3 stands again and again, and
        // the leader keeps trying to reach it.
        tokio::time::sleep(Duration::from_secs(3)).await;
        assert_eq!(leader_status.state, "Leader");
        assert!(leader_status.last_applied >= Some(21));
        let status3 = foreign.status(cluster.addr(3)).await.unwrap();
        // Its own initial membership entry (index 0), nothing from the
        // leader.
        assert_eq!(status3.leader, None, "{status3:?}");
        assert!(status3.last_log_index <= Some(0), "{status3:?}");
        assert_eq!(status3.last_applied, None, "{status3:?}");
        assert_ne!(status3.state, "Leader", "{status3:?}");
        // The cluster's client cannot even reach node 3.
        assert!(client.status(cluster.addr(3)).await.is_err());
        // Nodes 1 and 2 refused its handshakes (its vote requests), could
        // not verify it when they called it, and its elections never
        // reached them: the leader's term did not move.
        for id in [1, 2] {
            let log = node_logs(&dir, id);
            assert!(
                log.contains("TLS handshake from") && log.contains("refused"),
                "no refused handshake in node {id}'s log"
            );
        }
        assert!(node_logs(&dir, leader).contains("invalid peer certificate: UnknownIssuer"));
        let again = client.status(cluster.addr(leader)).await.unwrap();
        assert_eq!(again.term, leader_status.term);
        assert_eq!(again.state, "Leader");
    })
    .await;
}

#[test]
fn plain_http_on_an_address_other_than_loopback_needs_insecure() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_ports(1)[0];
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_siftdb-raft"))
        .arg("serve")
        .args(["--id", "1"])
        .arg("--dir")
        .arg(dir.path().join("node-1"))
        .args(["--listen", &format!("0.0.0.0:{port}")])
        .args(["--peer", &format!("1=127.0.0.1:{port}")])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(stderr.contains("--insecure"), "{stderr}");
    assert!(stderr.contains("--tls-cert"), "{stderr}");
}
