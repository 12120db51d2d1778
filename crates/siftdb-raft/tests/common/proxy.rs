//! A fault proxy between cluster nodes: one TCP listener per directed link
//! (node `from` → node `to`), which node `from` is told to use for its raft
//! messages to `to` (`serve --route`). Each link forwards bytes to the
//! node's own address unless its rules say otherwise: cut (new connections
//! closed at once, open ones closed now), delayed (each chunk waits), or
//! lossy (each chunk may end its connection, so the message in it and its
//! answer are lost). A link carries `from`'s requests and `to`'s answers;
//! cutting `from` → `to` alone is one-way loss at the message level.
//!
//! Clients do not go through the proxy: they talk to nodes directly, so a
//! client can reach a leader cut off from its followers (the case the
//! linearizability check is about).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

/// What a link does to its traffic.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Rules {
    /// Nothing passes; open connections are closed.
    pub cut: bool,
    /// Each chunk waits this long before it is forwarded.
    pub delay_ms: u64,
    /// Each chunk ends its connection with this chance, in percent.
    pub drop_percent: u64,
}

/// The proxy of a cluster; dropping it stops nothing (its tasks end with
/// the test's runtime).
pub struct Proxy {
    /// (from, to) → the link's rules and listening address.
    links: BTreeMap<(u64, u64), (watch::Sender<Rules>, String)>,
}

impl Proxy {
    /// Starts a link for every ordered pair of `nodes` (id → address).
    pub async fn start(nodes: &BTreeMap<u64, String>) -> Proxy {
        let mut links = BTreeMap::new();
        let seed = Arc::new(AtomicU64::new(0x2545_F491_4F6C_DD1D));
        for &from in nodes.keys() {
            for (&to, target) in nodes {
                if from == to {
                    continue;
                }
                let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
                let addr = listener.local_addr().unwrap().to_string();
                let (tx, rx) = watch::channel(Rules::default());
                tokio::spawn(accept(listener, target.clone(), rx, Arc::clone(&seed)));
                links.insert((from, to), (tx, addr));
            }
        }
        Proxy { links }
    }

    /// The `serve` options that send node `from`'s raft messages through
    /// the proxy.
    pub fn routes(&self, from: u64) -> Vec<String> {
        self.links
            .iter()
            .filter(|((f, _), _)| *f == from)
            .flat_map(|((_, to), (_, addr))| ["--route".to_string(), format!("{to}={addr}")])
            .collect()
    }

    /// Sets the rules of link `from` → `to`.
    pub fn set(&self, from: u64, to: u64, rules: Rules) {
        if let Some((tx, _)) = self.links.get(&(from, to)) {
            tx.send_replace(rules);
        }
    }

    /// Every link back to plain forwarding.
    pub fn heal(&self) {
        for (tx, _) in self.links.values() {
            tx.send_replace(Rules::default());
        }
    }

    /// Every link with `rules`.
    pub fn all(&self, rules: Rules) {
        for (tx, _) in self.links.values() {
            tx.send_replace(rules);
        }
    }

    /// Cuts both directions between `a` and `b`.
    pub fn cut_between(&self, a: u64, b: u64) {
        let cut = Rules {
            cut: true,
            ..Rules::default()
        };
        self.set(a, b, cut);
        self.set(b, a, cut);
    }

    /// Cuts every link between a node of `side` and one outside it.
    pub fn partition(&self, side: &[u64]) {
        let pairs: Vec<(u64, u64)> = self.links.keys().copied().collect();
        for (from, to) in pairs {
            if side.contains(&from) != side.contains(&to) {
                self.set(
                    from,
                    to,
                    Rules {
                        cut: true,
                        ..Rules::default()
                    },
                );
            }
        }
    }
}

async fn accept(
    listener: TcpListener,
    target: String,
    rules: watch::Receiver<Rules>,
    seed: Arc<AtomicU64>,
) {
    loop {
        let Ok((inbound, _)) = listener.accept().await else {
            continue;
        };
        if rules.borrow().cut {
            drop(inbound);
            continue;
        }
        let target = target.clone();
        let rules = rules.clone();
        let seed = seed.fetch_add(0x9E37_79B9_7F4A_7C15, Ordering::Relaxed) | 1;
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(&target).await else {
                return;
            };
            let _ = inbound.set_nodelay(true);
            let _ = outbound.set_nodelay(true);
            let (in_read, in_write) = inbound.into_split();
            let (out_read, out_write) = outbound.into_split();
            // Either direction ending (or a cut) closes both.
            tokio::select! {
                () = pump(in_read, out_write, rules.clone(), seed) => {}
                () = pump(out_read, in_write, rules, seed.rotate_left(17)) => {}
            }
        });
    }
}

/// Forwards `from` to `to` under `rules` until either side closes, a cut,
/// or a drop.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut rules: watch::Receiver<Rules>,
    mut state: u64,
) {
    let mut buf = vec![0u8; 64 << 10];
    loop {
        let n = tokio::select! {
            read = from.read(&mut buf) => match read {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            },
            changed = rules.changed() => {
                if changed.is_err() || rules.borrow().cut {
                    return;
                }
                continue;
            }
        };
        let now = *rules.borrow();
        if now.cut {
            return;
        }
        if now.delay_ms > 0 {
            tokio::time::sleep(Duration::from_millis(now.delay_ms)).await;
        }
        if now.drop_percent > 0 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            if state % 100 < now.drop_percent {
                return;
            }
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}
