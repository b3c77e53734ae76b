//! The HTTP server of every process (the api, and the /health and /metrics
//! side port of schedulers and workers): hyper's HTTP/1.1 with the bounds
//! `axum::serve` does not set, so that no client can starve the others.
//!
//! - A request head must arrive within the header timeout and is at most
//!   64 KiB; a kept-alive connection that starts no next request within the
//!   idle timeout is closed (a trusted proxy's excepted: the balancer closes
//!   its own, and one it reuses must still be open).
//! - `MAX_CONNECTIONS` slots, `RESERVED_CONNECTIONS` of them kept for
//!   requests with a valid token, and each client (the connection's address)
//!   holds at most its share. A slot is never kept by a connection serving
//!   nothing when another needs it (`slots`): only connections serving
//!   requests hold on. A connection that finds its client's share or the
//!   open slots all serving gets a reserved slot: requests with a token are
//!   served there, others answered 429 (its client's share) or 503 (the
//!   server's) and the connection closed.
//! - Each client (behind a trusted proxy, the one it forwards) has at most
//!   its share of requests in flight, those with a valid token counted apart
//!   (`requests`); past it, 429.
//! - Past every slot, a connection is still served, briefly and without
//!   keep-alive, for `/health` and `/ready` alone, so probes keep answering
//!   while a flood holds every slot; past that, it is closed at once.

mod activity;
mod connection;
mod refusal;
mod requests;
mod slots;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    http::{HeaderMap, Uri},
};
use tokio::{
    net::TcpListener,
    sync::{OwnedSemaphorePermit, Semaphore},
};
use tokio_util::{sync::CancellationToken, task::TaskTracker};

use self::{
    activity::Activity,
    connection::{Connection, OpenConnection},
    refusal::Refusal,
    requests::ClientRequests,
    slots::{Caps, ConnectionSlots, Slot, SlotKind},
};
use crate::{net::client_ip::TrustedProxies, ops::metrics::metrics};

/// Largest request head (request line and headers); a bigger one gets 431.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long a connection past the open slots may take to send its request head.
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long shutdown waits for requests in flight (the api's own request
/// timeout is 30 s, so none takes longer).
const DRAIN: Duration = Duration::from_secs(30);
/// Paths a connection past the cap is served for.
const PROBES: [&str; 2] = ["/health", "/ready"];

/// Bounds of one server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request head must arrive within this, counted from the end of the
    /// previous response (or the accept). Behind a load balancer, set it
    /// above the balancer's idle timeout (the balancer then absorbs slow
    /// clients).
    pub header_timeout: Duration,
    /// A kept-alive connection that has not started a next request within
    /// this of its last response (or its accept) is closed. Not applied to
    /// trusted proxies' connections.
    pub idle_timeout: Duration,
    /// Connections served at once, the reserved ones included (WebSocket
    /// clients are counted apart, once upgraded: see `MAX_WS_CLIENTS`).
    pub max_connections: usize,
    /// Of `max_connections`, connections kept for requests with a valid token.
    pub reserved_connections: usize,
    /// Connections one client address holds at most (trusted proxies excepted).
    pub max_connections_per_client: usize,
    /// Requests one client has in flight at most (with a token and without
    /// counted apart).
    pub max_requests_per_client: usize,
}

impl Limits {
    /// Connections past the cap served for the probes alone.
    fn overflow(&self) -> usize {
        (self.max_connections / 8).max(16)
    }

    /// The reserved slots, leaving at least one open one.
    fn reserved(&self) -> usize {
        self.reserved_connections
            .min(self.max_connections.saturating_sub(1))
    }
}

/// Tells whether a request carries a valid credential (the api's tokens).
pub type Authenticate = Arc<dyn Fn(&HeaderMap, &Uri) -> bool + Send + Sync>;

/// Who a server's clients are: which peers are proxies forwarding for others,
/// and which requests carry a valid credential. The default: no proxy, and
/// no request has one (the side ports: only the probes pass the reserved slots).
#[derive(Clone, Default)]
pub struct Clients {
    pub trusted_proxies: TrustedProxies,
    pub authenticate: Option<Authenticate>,
}

impl Clients {
    fn authenticated(&self, headers: &HeaderMap, uri: &Uri) -> bool {
        self.authenticate.as_ref().is_some_and(|f| f(headers, uri))
    }
}

/// Which service a connection gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lane {
    /// Everything, with keep-alive.
    Open,
    /// A reserved slot: requests with a valid token, and the probes; others
    /// get `refusal` and the connection closes.
    TokensOnly(Refusal),
    /// Past every slot: the probes only, no keep-alive, a short head timeout.
    Overflow,
}

/// The server's slots and what each client holds of them.
struct Slots {
    connections: Arc<ConnectionSlots>,
    overflow: Arc<Semaphore>,
    requests: Arc<ClientRequests>,
}

impl Slots {
    fn new(limits: &Limits) -> Self {
        let reserved = limits.reserved();
        Slots {
            connections: ConnectionSlots::new(Caps {
                open: limits.max_connections.max(1) - reserved,
                reserved,
                per_client: limits.max_connections_per_client,
            }),
            overflow: Arc::new(Semaphore::new(limits.overflow())),
            requests: ClientRequests::new(limits.max_requests_per_client),
        }
    }

    /// The lane of a new connection from `peer` and what it holds, or `None`
    /// when it is to be closed at once.
    fn admit(
        &self,
        peer: SocketAddr,
        clients: &Clients,
        activity: &Arc<Activity>,
    ) -> Option<(Lane, Held)> {
        let ip = peer.ip().to_canonical();
        let proxy = clients.trusted_proxies.trusts(ip);
        let over_cap = |outcome: &str| {
            metrics()
                .http_connections_over_cap
                .with_label_values(&[outcome])
                .inc();
        };
        let held = match self.connections.admit((!proxy).then_some(ip), activity) {
            Some(admitted) => {
                if admitted.replaced > 0 {
                    metrics()
                        .http_connections_closed
                        .with_label_values(&["replaced"])
                        .inc_by(admitted.replaced as u64);
                }
                let lane = match (admitted.kind, admitted.client_over_cap) {
                    (SlotKind::Open, _) => Lane::Open,
                    (SlotKind::Reserved, true) => Lane::TokensOnly(Refusal::TooManyConnections),
                    (SlotKind::Reserved, false) => {
                        over_cap("tokens_only");
                        Lane::TokensOnly(Refusal::Overloaded)
                    }
                };
                (lane, Held::Slot(admitted.slot))
            }
            None => match self.overflow.clone().try_acquire_owned() {
                Ok(permit) => {
                    over_cap("probes_only");
                    (Lane::Overflow, Held::Overflow(permit))
                }
                Err(_) => {
                    over_cap("closed");
                    return None;
                }
            },
        };
        Some(held)
    }
}

/// What a connection holds while it is open, given back when dropped.
#[allow(dead_code)] // held for their Drop, never read
enum Held {
    Slot(Slot),
    Overflow(OwnedSemaphorePermit),
}

/// Serves `router` on `listener` until `shutdown`, then lets the requests in
/// flight finish (up to 30 s).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    clients: Clients,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let slots = Arc::new(Slots::new(&limits));
    let connections = TaskTracker::new();
    loop {
        let (stream, peer) = tokio::select! {
            _ = shutdown.cancelled() => break,
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(e) => {
                    // Out of file descriptors, or the peer gave up before we
                    // took it: wait a moment rather than spin.
                    tracing::debug!(error = %e, "accepting a connection failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let activity = Activity::new();
        let Some((lane, held)) = slots.admit(peer, &clients, &activity) else {
            drop(stream);
            continue;
        };
        let _ = stream.set_nodelay(true);
        let connection = Connection {
            peer,
            lane,
            limits,
            clients: clients.clone(),
            requests: slots.requests.clone(),
            idle_bound: !clients.trusted_proxies.trusts(peer.ip().to_canonical()),
            activity,
        };
        let (router, shutdown) = (router.clone(), shutdown.clone());
        connections.spawn(async move {
            let _gauge = OpenConnection::new();
            connection.serve(stream, router, shutdown).await;
            drop(held);
        });
    }
    connections.close();
    if tokio::time::timeout(DRAIN, connections.wait())
        .await
        .is_err()
    {
        tracing::info!(
            open = connections.len(),
            "requests still in flight after {DRAIN:?}; leaving them"
        );
    }
    Ok(())
}

/// Raises this process's open-file limit to its hard limit (containers often
/// start with a soft 1024) and returns the limit now in force.
pub fn raise_open_files_limit() -> u64 {
    let mut limit = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit with a valid pointer to a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) != 0 {
            return 0;
        }
        if limit.rlim_cur < limit.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: limit.rlim_max,
                rlim_max: limit.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                return raised.rlim_cur;
            }
        }
    }
    limit.rlim_cur
}

#[cfg(test)]
mod tests;
