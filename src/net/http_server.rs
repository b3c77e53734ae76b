//! The HTTP server of every process (the api, and the /health and /metrics
//! side port of schedulers and workers): hyper's HTTP/1.1 with the bounds
//! `axum::serve` does not set. A request head must arrive within the header
//! timeout (a kept-alive connection idle that long is closed too), heads are
//! at most 64 KiB, and connections are capped: past the cap a connection is
//! still served, briefly and without keep-alive, for `/health` and `/ready`
//! alone (every other path gets a 503), so probes keep answering while a
//! flood holds every slot; past that, it is closed at once.

use std::{convert::Infallible, net::SocketAddr, sync::Arc, time::Duration};

use axum::{
    Router,
    body::Body,
    extract::ConnectInfo,
    http::{HeaderValue, Request, Response, StatusCode, header},
};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::{net::TcpListener, sync::Semaphore};
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tower::ServiceExt as _;

use crate::ops::metrics::metrics;

/// Largest request head (request line and headers); a bigger one gets 431.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// How long a connection past the cap may take to send its request head.
const OVERFLOW_HEADER_TIMEOUT: Duration = Duration::from_secs(2);
/// How long shutdown waits for requests in flight (the api's own request
/// timeout is 30 s, so none takes longer).
const DRAIN: Duration = Duration::from_secs(30);
/// Paths a connection past the cap is served for.
const PROBES: [&str; 2] = ["/health", "/ready"];

/// Bounds of one server.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// A request head must arrive within this, and a kept-alive connection
    /// idle for this long is closed. Behind a load balancer, set it above the
    /// balancer's idle timeout (the balancer then absorbs slow clients).
    pub header_timeout: Duration,
    /// Connections served at once (WebSocket clients are counted apart, once
    /// upgraded: see `MAX_WS_CLIENTS`).
    pub max_connections: usize,
}

impl Limits {
    /// Connections past the cap served for the probes alone.
    fn overflow(&self) -> usize {
        (self.max_connections / 8).max(16)
    }
}

/// Which service a connection gets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lane {
    Normal,
    /// Past the cap: the probes only, no keep-alive, a short head timeout.
    Overflow,
}

/// Serves `router` on `listener` until `shutdown`, then lets the requests in
/// flight finish (up to 30 s).
pub async fn serve(
    listener: TcpListener,
    router: Router,
    limits: Limits,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    let normal = Arc::new(Semaphore::new(limits.max_connections));
    let overflow = Arc::new(Semaphore::new(limits.overflow()));
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
        let (permit, lane) = match normal.clone().try_acquire_owned() {
            Ok(permit) => (permit, Lane::Normal),
            Err(_) => match overflow.clone().try_acquire_owned() {
                Ok(permit) => {
                    metrics()
                        .http_connections_over_cap
                        .with_label_values(&["probes_only"])
                        .inc();
                    (permit, Lane::Overflow)
                }
                Err(_) => {
                    metrics()
                        .http_connections_over_cap
                        .with_label_values(&["closed"])
                        .inc();
                    drop(stream);
                    continue;
                }
            },
        };
        let _ = stream.set_nodelay(true);
        let (router, shutdown) = (router.clone(), shutdown.clone());
        connections.spawn(async move {
            let _gauge = OpenConnection::new();
            serve_connection(TokioIo::new(stream), peer, router, lane, limits, shutdown).await;
            drop(permit);
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

async fn serve_connection(
    io: TokioIo<tokio::net::TcpStream>,
    peer: SocketAddr,
    router: Router,
    lane: Lane,
    limits: Limits,
    shutdown: CancellationToken,
) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        // The head's size, checked when it is parsed (the buffer bound alone
        // lets one large read through).
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(2 * MAX_HEAD_BYTES)
        .keep_alive(lane == Lane::Normal)
        .header_read_timeout(match lane {
            Lane::Normal => limits.header_timeout,
            Lane::Overflow => OVERFLOW_HEADER_TIMEOUT.min(limits.header_timeout),
        });
    let service = service_fn(move |request: Request<Incoming>| {
        let router = router.clone();
        async move {
            if lane == Lane::Overflow && !PROBES.contains(&request.uri().path()) {
                return Ok::<_, Infallible>(overloaded());
            }
            let mut request = request.map(Body::new);
            request.extensions_mut().insert(ConnectInfo(peer));
            router.oneshot(request).await
        }
    });
    let connection = builder.serve_connection(io, service).with_upgrades();
    tokio::pin!(connection);
    tokio::select! {
        _ = connection.as_mut() => {}
        _ = shutdown.cancelled() => {
            // Idle connections close now; a request in flight is answered first.
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
}

/// What a connection past the cap gets for anything but the probes.
fn overloaded() -> Response<Body> {
    let body = serde_json::json!({"error": {
        "code": "overloaded",
        "message": "the server is at its connection limit; try again shortly",
    }});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = StatusCode::SERVICE_UNAVAILABLE;
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

struct OpenConnection;

impl OpenConnection {
    fn new() -> Self {
        metrics().http_connections_open.inc();
        OpenConnection
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        metrics().http_connections_open.dec();
    }
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
