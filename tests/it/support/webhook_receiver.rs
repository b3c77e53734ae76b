//! A webhook receiver on 127.0.0.1, as an endpoint's owner would run one: it
//! verifies every message with the `standardwebhooks` crate (the
//! specification's own Rust library, not crawlfleet's signing) and records
//! what came, by `webhook-id`. It answers with the status a test sets, after
//! the delay a test sets; started on a port the test chose, it can be down
//! first (nothing listens) and come up later.

use std::{
    collections::HashMap,
    sync::{
        Arc, Mutex,
        atomic::{AtomicU16, AtomicU64, AtomicUsize, Ordering},
    },
    time::{Duration, Instant},
};

use axum::{
    body::Bytes,
    extract::State,
    http::{HeaderMap, StatusCode},
};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::eventually;

/// One message as it arrived.
#[derive(Debug, Clone)]
pub struct Received {
    /// The `webhook-id` header.
    pub id: String,
    pub payload: Value,
    /// The signature checked by the reference library: `Err` says why not.
    pub verified: Result<(), String>,
    pub arrived_at: Instant,
}

#[derive(Default)]
struct Shared {
    secret: Mutex<Option<String>>,
    status: AtomicU16,
    delay_ms: AtomicU64,
    reply: Mutex<String>,
    received: Mutex<Vec<Received>>,
    in_flight: AtomicUsize,
}

/// The receiver; it stops listening when dropped.
pub struct WebhookReceiver {
    pub port: u16,
    shared: Arc<Shared>,
    stop: CancellationToken,
}

impl WebhookReceiver {
    /// Listens on a port of its own.
    pub async fn start() -> WebhookReceiver {
        Self::start_on(0).await
    }

    /// Listens on `port` (0: any), answering 200 at once.
    pub async fn start_on(port: u16) -> WebhookReceiver {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", port))
            .await
            .expect("the receiver's port is free");
        let port = listener.local_addr().unwrap().port();
        let shared = Arc::new(Shared {
            status: AtomicU16::new(200),
            ..Shared::default()
        });
        let stop = CancellationToken::new();
        let app = axum::Router::new()
            .fallback(receive)
            .with_state(shared.clone());
        let stopped = stop.clone();
        tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(stopped.cancelled_owned())
                .await
                .expect("the receiver serves");
        });
        WebhookReceiver { port, shared, stop }
    }

    /// Where crawlfleet should send.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/hooks/crawlfleet", self.port)
    }

    /// Verifies what comes with `secret` (`whsec_...`) from now on.
    pub fn verify_with(&self, secret: &str) {
        *self.shared.secret.lock().unwrap() = Some(secret.to_owned());
    }

    /// Answers `status` with `body` from now on.
    pub fn answer(&self, status: u16, body: &str) {
        self.shared.status.store(status, Ordering::SeqCst);
        *self.shared.reply.lock().unwrap() = body.to_owned();
    }

    /// Answers only after `delay` from now on.
    pub fn delay(&self, delay: Duration) {
        self.shared
            .delay_ms
            .store(delay.as_millis() as u64, Ordering::SeqCst);
    }

    /// Requests it is answering now.
    pub fn in_flight(&self) -> usize {
        self.shared.in_flight.load(Ordering::SeqCst)
    }

    /// Everything received, in order.
    pub fn received(&self) -> Vec<Received> {
        self.shared.received.lock().unwrap().clone()
    }

    /// How many times each `webhook-id` arrived.
    pub fn arrivals_by_id(&self) -> HashMap<String, usize> {
        let mut counts = HashMap::new();
        for r in self.received() {
            *counts.entry(r.id).or_default() += 1;
        }
        counts
    }

    /// Waits until `n` distinct messages arrived; returns everything received.
    pub async fn wait_for_messages(&self, n: usize, limit: Duration) -> Vec<Received> {
        eventually(limit, &format!("{n} webhook messages"), || async {
            (self.arrivals_by_id().len() >= n).then(|| self.received())
        })
        .await
    }
}

impl Drop for WebhookReceiver {
    fn drop(&mut self) {
        self.stop.cancel();
    }
}

async fn receive(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    body: Bytes,
) -> (StatusCode, String) {
    let arrived_at = Instant::now();
    shared.in_flight.fetch_add(1, Ordering::SeqCst);
    let secret = shared.secret.lock().unwrap().clone();
    let verified = match secret {
        Some(secret) => standardwebhooks::Webhook::new(&secret)
            .map_err(|e| e.to_string())
            .and_then(|hook| hook.verify(&body, &headers).map_err(|e| e.to_string())),
        None => Err("no secret to verify with".into()),
    };
    let id = headers
        .get("webhook-id")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_owned();
    let payload = serde_json::from_slice(&body).unwrap_or(Value::Null);
    shared.received.lock().unwrap().push(Received {
        id,
        payload,
        verified,
        arrived_at,
    });
    let delay = shared.delay_ms.load(Ordering::SeqCst);
    if delay > 0 {
        tokio::time::sleep(Duration::from_millis(delay)).await;
    }
    shared.in_flight.fetch_sub(1, Ordering::SeqCst);
    let status = StatusCode::from_u16(shared.status.load(Ordering::SeqCst)).unwrap();
    (status, shared.reply.lock().unwrap().clone())
}
