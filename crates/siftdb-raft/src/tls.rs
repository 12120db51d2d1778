//! TLS and authentication: who may talk to a node, and how a node and a
//! client prove who they are.
//!
//! Owns: loading certificates, keys and the cluster's CA from PEM files
//! into rustls configurations (the ring provider) — for a node
//! ([`NodeTls`]: its listener, which asks every party for a certificate
//! signed by the CA and lets one without a certificate through the
//! handshake only so that a client token can authenticate it, and its
//! outgoing side, which presents the node's certificate to peers and
//! verifies theirs) and for a client ([`ClientAuth`]); the client token
//! ([`Token`]) and its constant-time check; the TLS accept loop ([`serve`]:
//! handshake, then HTTP/1.1 into axum's router with what the handshake
//! proved attached to each request); the rule of who may call which route
//! ([`Gate`], applied by [`authorize`]); and a CA with node certificates
//! for trying TLS on one machine ([`write_local_pki`]).
//! Must never: let a request reach a peer route (raft messages, read
//! index, retire) without a certificate verified against the CA when TLS is
//! on; compare a token in a time that depends on where it differs; put a
//! token in a log line or an error.

use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::types::NodeId;

/// Errors loading or making TLS material.
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A PEM file could not be read or held nothing usable.
    #[error("{path}: {what}")]
    File {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        what: String,
    },
    /// rustls refused the certificates or key.
    #[error("TLS configuration: {0}")]
    Rustls(#[from] rustls::Error),
    /// The CA could not verify client certificates.
    #[error("TLS client verifier: {0}")]
    Verifier(#[from] rustls::server::VerifierBuilderError),
    /// The HTTP client could not be built.
    #[error("HTTP client: {0}")]
    Http(#[from] reqwest::Error),
    /// Certificate generation failed.
    #[error("certificate generation: {0}")]
    Generate(#[from] rcgen::Error),
    /// A setting is wrong.
    #[error("{0}")]
    Config(String),
}

fn file_error(path: &Path, what: impl std::fmt::Display) -> TlsError {
    TlsError::File {
        path: path.to_path_buf(),
        what: what.to_string(),
    }
}

/// The PEM files of a node's TLS.
#[derive(Clone, Debug)]
pub struct TlsFiles {
    /// This node's certificate (its chain after it), valid for the name or
    /// IP address peers and clients reach it by, for server and client
    /// authentication (the node presents it both ways).
    pub cert: PathBuf,
    /// The certificate's private key.
    pub key: PathBuf,
    /// The cluster's CA: peers' and client certificates must chain to it.
    pub ca: PathBuf,
}

/// The one crypto provider (ring: builds in seconds, no C toolchain beyond
/// cc).
fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// reqwest builds a rustls configuration for every client it builds, even a
/// plain one, and panics without a process-wide provider when none is
/// compiled in: installs ring as that default (once; a provider already
/// installed by the application stays).
pub fn install_default_provider() {
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_error(path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_error(path, e))?;
    if certs.is_empty() {
        return Err(file_error(path, "no CERTIFICATE block in it"));
    }
    Ok(certs)
}

fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, TlsError> {
    PrivateKeyDer::from_pem_file(path).map_err(|e| file_error(path, e))
}

fn read_roots(path: &Path) -> Result<Arc<RootCertStore>, TlsError> {
    let mut roots = RootCertStore::empty();
    for cert in read_certs(path)? {
        roots.add(cert).map_err(|e| file_error(path, e))?;
    }
    Ok(Arc::new(roots))
}

fn client_config(
    roots: Arc<RootCertStore>,
    identity: Option<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)>,
) -> Result<ClientConfig, TlsError> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots);
    Ok(match identity {
        Some((certs, key)) => builder.with_client_auth_cert(certs, key)?,
        None => builder.with_no_client_auth(),
    })
}

/// A node's TLS: its listener's configuration and the one its calls to
/// peers use.
#[derive(Clone)]
pub struct NodeTls {
    server: Arc<ServerConfig>,
    client: Arc<ClientConfig>,
}

impl std::fmt::Debug for NodeTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NodeTls")
    }
}

impl NodeTls {
    /// Loads `files`.
    pub fn load(files: &TlsFiles) -> Result<NodeTls, TlsError> {
        let roots = read_roots(&files.ca)?;
        let certs = read_certs(&files.cert)?;
        let key = read_key(&files.key)?;
        // A certificate, when one is presented, must chain to the CA (else
        // the handshake fails); a party without one gets through the
        // handshake and must then show the client token (`Gate`).
        let verifier = WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), provider())
            .allow_unauthenticated()
            .build()?;
        let mut server = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_single_cert(certs.clone(), key.clone_key())?;
        server.alpn_protocols = vec![b"http/1.1".to_vec()];
        let client = client_config(roots, Some((certs, key)))?;
        Ok(NodeTls {
            server: Arc::new(server),
            client: Arc::new(client),
        })
    }

    /// How this node calls its peers: https, presenting its certificate.
    pub fn peer_auth(&self) -> ClientAuth {
        ClientAuth {
            tls: Some(Arc::clone(&self.client)),
            token: None,
        }
    }
}

/// The shared secret a client shows in `Authorization: Bearer TOKEN`.
#[derive(Clone)]
pub struct Token(Arc<[u8]>);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

impl Token {
    /// The token in `path` (surrounding whitespace ignored): at least 16
    /// visible ASCII characters.
    pub fn from_file(path: &Path) -> Result<Token, TlsError> {
        let text = std::fs::read(path).map_err(|e| file_error(path, e))?;
        Token::new(text.trim_ascii()).map_err(|what| file_error(path, what))
    }

    /// `bytes` as a token, or why it cannot be one.
    pub fn new(bytes: &[u8]) -> Result<Token, &'static str> {
        if bytes.len() < 16 {
            return Err("a client token needs at least 16 characters");
        }
        if !bytes.iter().all(|b| b.is_ascii_graphic()) {
            return Err("a client token is visible ASCII characters only (no spaces)");
        }
        Ok(Token(bytes.into()))
    }

    /// Whether `offered` is this token, in a time that depends on the
    /// lengths only, not on where the two differ.
    pub fn matches(&self, offered: &[u8]) -> bool {
        if offered.len() != self.0.len() {
            return false;
        }
        let diff = self
            .0
            .iter()
            .zip(offered)
            .fold(0u8, |acc, (a, b)| acc | (a ^ b));
        std::hint::black_box(diff) == 0
    }

    fn header(&self) -> Result<header::HeaderValue, TlsError> {
        let mut value = b"Bearer ".to_vec();
        value.extend_from_slice(&self.0);
        let mut value = header::HeaderValue::from_bytes(&value)
            .map_err(|_| TlsError::Config("a client token must be visible ASCII".into()))?;
        value.set_sensitive(true);
        Ok(value)
    }
}

/// How a client reaches the nodes: plain HTTP, or https verifying the
/// nodes against a CA (presenting a client certificate when given one);
/// with or without a token.
#[derive(Clone, Default)]
pub struct ClientAuth {
    tls: Option<Arc<ClientConfig>>,
    token: Option<Token>,
}

impl ClientAuth {
    /// https to nodes whose certificates chain to the CA in `ca`, with the
    /// token in `token` and the client certificate and key in `identity`,
    /// each when given. Plain HTTP without `ca`.
    pub fn load(
        ca: Option<&Path>,
        token: Option<&Path>,
        identity: Option<(&Path, &Path)>,
    ) -> Result<ClientAuth, TlsError> {
        let tls = match (ca, identity) {
            (Some(ca), identity) => {
                let identity = match identity {
                    Some((cert, key)) => Some((read_certs(cert)?, read_key(key)?)),
                    None => None,
                };
                Some(Arc::new(client_config(read_roots(ca)?, identity)?))
            }
            (None, Some(_)) => {
                return Err(TlsError::Config(
                    "a client certificate needs the CA (--ca) to verify the nodes".into(),
                ))
            }
            (None, None) => None,
        };
        Ok(ClientAuth {
            tls,
            token: token.map(Token::from_file).transpose()?,
        })
    }

    /// This with `token` shown on every request.
    pub fn with_token(mut self, token: Token) -> ClientAuth {
        self.token = Some(token);
        self
    }

    /// `https` with TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() {
            "https"
        } else {
            "http"
        }
    }

    /// `builder` with this TLS configuration and token, built.
    pub fn http_client(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest::Client, TlsError> {
        install_default_provider();
        let mut builder = builder;
        if let Some(tls) = &self.tls {
            builder = builder.tls_backend_preconfigured(ClientConfig::clone(tls));
        }
        if let Some(token) = &self.token {
            let mut headers = HeaderMap::new();
            headers.insert(header::AUTHORIZATION, token.header()?);
            builder = builder.default_headers(headers);
        }
        Ok(builder.build()?)
    }
}

/// What the TLS handshake of a request's connection proved, attached to
/// each request by [`serve`].
#[derive(Clone, Copy, Debug, Default)]
pub struct Handshake {
    /// The party presented a certificate that chains to the CA.
    pub certified: bool,
}

/// Who may call which route.
#[derive(Clone, Debug)]
pub struct Gate {
    tls: bool,
    token: Option<Token>,
    peer_paths: Arc<[&'static str]>,
}

impl Gate {
    /// The rule of a node with TLS on or off, a client token or none, whose
    /// routes for peers only are `peer_paths`.
    pub fn new(tls: bool, token: Option<Token>, peer_paths: &[&'static str]) -> Gate {
        Gate {
            tls,
            token,
            peer_paths: peer_paths.into(),
        }
    }

    /// `Ok` if a request to `path` may pass: a party with a certificate
    /// from the CA may call anything; without TLS, peer routes are open
    /// (loopback or `--insecure`); a client route wants the token when the
    /// node has one, and with TLS and no token, a certificate.
    fn admit(
        &self,
        certified: bool,
        path: &str,
        bearer: Option<&[u8]>,
    ) -> Result<(), &'static str> {
        if certified {
            return Ok(());
        }
        if self.peer_paths.contains(&path) {
            return if self.tls {
                Err("a peer route: a certificate signed by the cluster's CA is required\n")
            } else {
                Ok(())
            };
        }
        match (&self.token, bearer) {
            (Some(token), Some(offered)) if token.matches(offered) => Ok(()),
            (Some(_), Some(_)) => Err("wrong client token\n"),
            (Some(_), None) => Err("a client token is required (Authorization: Bearer TOKEN)\n"),
            (None, _) if self.tls => {
                Err("a client certificate signed by the cluster's CA is required\n")
            }
            (None, _) => Ok(()),
        }
    }
}

fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let value = headers.get(header::AUTHORIZATION)?.as_bytes();
    Some(value.strip_prefix(b"Bearer ").unwrap_or(value))
}

/// Middleware: a request that [`Gate`] refuses gets a 401.
pub async fn authorize(State(gate): State<Gate>, req: Request, next: Next) -> Response {
    let certified = req
        .extensions()
        .get::<Handshake>()
        .is_some_and(|h| h.certified);
    match gate.admit(certified, req.uri().path(), bearer(req.headers())) {
        Ok(()) => next.run(req).await,
        Err(why) => (
            StatusCode::UNAUTHORIZED,
            [(header::WWW_AUTHENTICATE, "Bearer")],
            why,
        )
            .into_response(),
    }
}

/// How long a connection may take to finish its TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How long a stopping node waits for requests in flight.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(10);

/// Serves `app` on `listener` until `shutdown` completes: plain HTTP
/// without `tls`; with it, each connection's handshake first (a failed one
/// is logged and the connection closed), then HTTP/1.1 with the
/// [`Handshake`] attached to each request.
pub async fn serve(
    listener: tokio::net::TcpListener,
    app: Router,
    tls: Option<&NodeTls>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let Some(tls) = tls else {
        return axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await;
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::clone(&tls.server));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut shutdown = std::pin::pin!(shutdown);
    loop {
        let (tcp, remote) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of descriptors, or a connection reset before it
                    // was accepted: the listener itself is fine.
                    tracing::warn!("accept: {e}");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            () = &mut shutdown => break,
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = acceptor.clone();
        let app = app.clone();
        let watcher = graceful.watcher();
        tokio::spawn(async move {
            let stream = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(stream)) => stream,
                Ok(Err(e)) => {
                    tracing::warn!("TLS handshake from {remote} refused: {e}");
                    return;
                }
                Err(_) => {
                    tracing::warn!("TLS handshake from {remote} timed out");
                    return;
                }
            };
            let handshake = Handshake {
                certified: stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .is_some_and(|certs| !certs.is_empty()),
            };
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(handshake);
                    tower::ServiceExt::oneshot(app.clone(), req)
                },
            );
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service);
            if let Err(e) = watcher.watch(conn).await {
                tracing::debug!("connection from {remote}: {e}");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open {DRAIN_TIMEOUT:?} after shutdown; closing them");
    }
    Ok(())
}

/// The files [`write_local_pki`] wrote.
#[derive(Clone, Debug)]
pub struct LocalPki {
    /// The CA certificate (give it to clients: `--ca`).
    pub ca: PathBuf,
    /// Each node's certificate, key and the CA.
    pub nodes: BTreeMap<NodeId, TlsFiles>,
    /// A client certificate and key from the CA (mutual TLS for clients).
    pub client: (PathBuf, PathBuf),
    /// A random client token (`--client-token-file`, `--token-file`).
    pub token: PathBuf,
}

/// Writes a fresh CA into `dir` (created when missing) and, signed by it, a
/// certificate for each of `nodes` valid for `hosts` (names or IP
/// addresses), a client certificate, and a random client token: enough to
/// run a cluster on one machine with TLS. Keys and the token are written
/// readable by their owner only. The CA's key is not kept: more
/// certificates need a new CA (or a real one).
pub fn write_local_pki(
    dir: &Path,
    nodes: &[NodeId],
    hosts: &[String],
) -> Result<LocalPki, TlsError> {
    use rcgen::{
        BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };
    std::fs::create_dir_all(dir).map_err(|e| file_error(dir, e))?;
    let mut ca_params = CertificateParams::default();
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "siftdb-raft local CA");
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;
    let ca_path = dir.join("ca.pem");
    write_file(&ca_path, ca.pem().as_bytes(), false)?;
    let issue = |name: &str, sans: &[String], stem: &str| -> Result<(PathBuf, PathBuf), TlsError> {
        let mut params = CertificateParams::new(sans.to_vec())?;
        params.distinguished_name.push(DnType::CommonName, name);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &ca)?;
        let (cert_path, key_path) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}-key.pem")),
        );
        write_file(&cert_path, cert.pem().as_bytes(), false)?;
        write_file(&key_path, key.serialize_pem().as_bytes(), true)?;
        Ok((cert_path, key_path))
    };
    let mut node_files = BTreeMap::new();
    for &id in nodes {
        let (cert, key) = issue(
            &format!("siftdb-raft node {id}"),
            hosts,
            &format!("node-{id}"),
        )?;
        node_files.insert(
            id,
            TlsFiles {
                cert,
                key,
                ca: ca_path.clone(),
            },
        );
    }
    let client = issue("siftdb-raft client", &[], "client")?;
    let token_path = dir.join("token");
    write_file(
        &token_path,
        format!("{}\n", random_token()?).as_bytes(),
        true,
    )?;
    Ok(LocalPki {
        ca: ca_path,
        nodes: node_files,
        client,
        token: token_path,
    })
}

/// 32 random bytes from the kernel, as hex.
fn random_token() -> Result<String, TlsError> {
    let mut bytes = [0u8; 32];
    #[cfg(unix)]
    {
        use std::io::Read;
        let path = Path::new("/dev/urandom");
        std::fs::File::open(path)
            .and_then(|mut f| f.read_exact(&mut bytes))
            .map_err(|e| file_error(path, e))?;
    }
    // No /dev/urandom: the system's generator, through ring.
    #[cfg(not(unix))]
    rustls::crypto::ring::default_provider()
        .secure_random
        .fill(&mut bytes)
        .map_err(|_| TlsError::Config("the system's random generator failed".to_string()))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

fn write_file(path: &Path, contents: &[u8], secret: bool) -> Result<(), TlsError> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    // Owner-only on unix; on Windows a secret inherits its directory's ACL.
    #[cfg(unix)]
    if secret {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    #[cfg(not(unix))]
    let _ = secret;
    options
        .open(path)
        .and_then(|mut f| f.write_all(contents))
        .map_err(|e| file_error(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PEER: &[&str] = &["/raft/vote"];

    fn token() -> Token {
        Token::new(b"0123456789abcdef").unwrap()
    }

    #[test]
    fn tokens_compare_whole() {
        let t = token();
        assert!(t.matches(b"0123456789abcdef"));
        assert!(!t.matches(b"0123456789abcdeF"));
        assert!(!t.matches(b"0123456789abcde"));
        assert!(!t.matches(b""));
        assert!(Token::new(b"short").is_err());
        assert!(Token::new(b"0123456789 abcdef").is_err());
    }

    #[test]
    fn gate_with_tls_and_token() {
        let gate = Gate::new(true, Some(token()), PEER);
        // Peer routes: a certificate, never the token.
        assert!(gate.admit(true, "/raft/vote", None).is_ok());
        assert!(gate
            .admit(false, "/raft/vote", Some(b"0123456789abcdef"))
            .is_err());
        // Client routes: the token or a certificate.
        assert!(gate.admit(true, "/api/write", None).is_ok());
        assert!(gate
            .admit(false, "/api/write", Some(b"0123456789abcdef"))
            .is_ok());
        assert!(gate.admit(false, "/api/write", Some(b"wrong")).is_err());
        assert!(gate.admit(false, "/api/write", None).is_err());
    }

    #[test]
    fn gate_with_tls_and_no_token_wants_certificates() {
        let gate = Gate::new(true, None, PEER);
        assert!(gate.admit(false, "/api/write", None).is_err());
        assert!(gate.admit(false, "/api/write", Some(b"anything")).is_err());
        assert!(gate.admit(true, "/api/write", None).is_ok());
    }

    #[test]
    fn gate_without_tls() {
        let open = Gate::new(false, None, PEER);
        assert!(open.admit(false, "/raft/vote", None).is_ok());
        assert!(open.admit(false, "/api/write", None).is_ok());
        let tokened = Gate::new(false, Some(token()), PEER);
        assert!(tokened.admit(false, "/raft/vote", None).is_ok());
        assert!(tokened.admit(false, "/api/write", None).is_err());
        assert!(tokened
            .admit(false, "/api/write", Some(b"0123456789abcdef"))
            .is_ok());
    }

    #[test]
    fn local_pki_loads() {
        let dir = tempfile::tempdir().unwrap();
        let pki = write_local_pki(dir.path(), &[1, 2], &["127.0.0.1".into()]).unwrap();
        for files in pki.nodes.values() {
            NodeTls::load(files).unwrap();
        }
        let (cert, key) = &pki.client;
        let auth = ClientAuth::load(Some(&pki.ca), Some(&pki.token), Some((cert, key))).unwrap();
        assert_eq!(auth.scheme(), "https");
        auth.http_client(reqwest::Client::builder()).unwrap();
    }
}
