//! One accepted connection: served by hyper under its lane's rules, closed
//! when idle too long or given up for another, each request checked against
//! its lane and its client's share before the router sees it.

use std::{convert::Infallible, net::SocketAddr, sync::Arc};

use axum::{
    Router,
    body::Body,
    extract::ConnectInfo,
    http::{HeaderValue, Request, header},
};
use hyper::{body::Incoming, server::conn::http1, service::service_fn};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt as _;

use super::{
    Clients, Lane, Limits, MAX_HEAD_BYTES, OVERFLOW_HEADER_TIMEOUT, PROBES,
    activity::{Activity, Holding, Watched},
    refusal::Refusal,
    requests::ClientRequests,
};
use crate::ops::metrics::metrics;

/// One accepted connection and the rules it is served by.
pub(super) struct Connection {
    pub peer: SocketAddr,
    pub lane: Lane,
    pub limits: Limits,
    pub clients: Clients,
    pub requests: Arc<ClientRequests>,
    pub activity: Arc<Activity>,
    /// Closed when idle too long (not a trusted proxy's).
    pub idle_bound: bool,
}

impl Connection {
    pub async fn serve(self, stream: TcpStream, router: Router, shutdown: CancellationToken) {
        let mut builder = http1::Builder::new();
        builder
            .timer(TokioTimer::new())
            // The head's size, checked when it is parsed (the buffer bound
            // alone lets one large read through).
            .max_header_size(MAX_HEAD_BYTES)
            .max_buf_size(2 * MAX_HEAD_BYTES)
            .keep_alive(self.lane != Lane::Overflow)
            .header_read_timeout(match self.lane {
                Lane::Open => self.limits.header_timeout,
                _ => OVERFLOW_HEADER_TIMEOUT.min(self.limits.header_timeout),
            });
        let activity = self.activity.clone();
        let idle = self.idle_bound.then_some(self.limits.idle_timeout);
        let this = Arc::new(self);
        let service = service_fn(move |request: Request<Incoming>| {
            let (this, router) = (this.clone(), router.clone());
            async move { Ok::<_, Infallible>(this.answer(request, router).await) }
        });
        let io = TokioIo::new(Watched::new(stream, activity.clone()));
        let connection = builder.serve_connection(io, service).with_upgrades();
        tokio::pin!(connection);
        let idle_watch = async {
            match idle {
                Some(limit) => activity.idle_for(limit).await,
                None => std::future::pending().await,
            }
        };
        // The connection first: when it was given up before its task first
        // ran, a request head already in the socket is read and served (a
        // client's request must not lose to its own client's flood because
        // the task was late), and only a connection serving nothing closes.
        tokio::select! {
            biased;
            _ = connection.as_mut() => return,
            _ = shutdown.cancelled() => {}
            _ = idle_watch => {
                metrics().http_connections_closed.with_label_values(&["idle"]).inc();
            }
            _ = activity.replaced() => {
                // Its client opened another in its place. Serving nothing:
                // closed now, a half-sent head with it (a graceful close
                // would wait for that head).
                if activity.serves_nothing() {
                    return;
                }
            }
        }
        // Idle connections close now; a request in flight is answered first.
        connection.as_mut().graceful_shutdown();
        let _ = connection.await;
    }

    /// The response to one request on this connection.
    async fn answer(&self, request: Request<Incoming>, router: Router) -> axum::response::Response {
        let serving = self.activity.begin();
        let probe = PROBES.contains(&request.uri().path());
        let authenticated = self.clients.authenticated(request.headers(), request.uri());
        let refused = match self.lane {
            Lane::Overflow if !probe => Some(Refusal::Overloaded),
            Lane::TokensOnly(refusal) if !(authenticated || probe) => Some(refusal),
            _ => None,
        };
        let client = self
            .clients
            .trusted_proxies
            .client(self.peer.ip(), request.headers());
        let mut response = match refused {
            Some(refusal) => Holding::wrap_response(refusal.response(client), serving),
            None => match self.requests.take(client, authenticated) {
                None => Holding::wrap_response(Refusal::TooManyRequests.response(client), serving),
                Some(in_flight) => {
                    let mut request = request.map(Body::new);
                    request.extensions_mut().insert(ConnectInfo(self.peer));
                    let response = router.oneshot(request).await.unwrap_or_else(|e| match e {});
                    Holding::wrap_response(response, (serving, in_flight))
                }
            },
        };
        // A slot past the open ones is not kept for a request without a
        // token: the connection closes after its answer.
        if self.lane != Lane::Open && !authenticated {
            response
                .headers_mut()
                .insert(header::CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}

/// Counts the connection in `crawlfleet_http_connections_open` while it lives.
pub(super) struct OpenConnection;

impl OpenConnection {
    pub fn new() -> Self {
        metrics().http_connections_open.inc();
        OpenConnection
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        metrics().http_connections_open.dec();
    }
}
