//! One attempt of a delivery: the endpoint's URL judged by the SSRF guard
//! (and every address the client connects to, so a name that resolves
//! elsewhere by the time of the connection is refused too), the message
//! signed as Standard Webhooks says, POSTed with no redirect followed and a
//! timeout, and the start of the answer kept.

use std::time::{Duration, Instant};

use chrono::Utc;

use crate::{
    domain::webhook::WebhookSecret,
    net::target_guard::TargetGuard,
    store::webhooks::{Attempted, Leased},
};

/// Bytes of an answer's body kept with the attempt.
const EXCERPT_BYTES: usize = 1024;

/// Sends deliveries: one HTTP client for all (connections are reused).
pub(super) struct Poster {
    client: reqwest::Client,
    guard: TargetGuard,
}

/// An attempt's result: the answer's status, or why there was none.
pub(super) struct Answer {
    pub status: Option<u16>,
    pub attempted: Attempted,
}

impl Answer {
    /// 2xx: delivered.
    pub fn delivered(&self) -> bool {
        self.status.is_some_and(|s| (200..300).contains(&s))
    }

    /// What the attempt came to, as a person reads it.
    pub fn summary(&self) -> String {
        match (&self.status, &self.attempted.error) {
            (Some(status), _) => format!("HTTP {status}"),
            (None, Some(error)) => error.clone(),
            (None, None) => "no answer".into(),
        }
    }
}

impl Poster {
    pub fn new(guard: TargetGuard, timeout: Duration) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .user_agent(concat!("crawlfleet-webhooks/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .timeout(timeout)
            .connect_timeout(timeout.min(Duration::from_secs(10)))
            .no_proxy()
            .dns_resolver(guard.resolver())
            .build()?;
        Ok(Poster { client, guard })
    }

    /// Makes one attempt of `leased`.
    pub async fn attempt(&self, leased: &Leased) -> Answer {
        let attempted_at = Utc::now();
        let start = Instant::now();
        let outcome = match &leased.secret {
            Ok(secret) => self.post(leased, secret).await,
            Err(e) => Err(e.to_string()),
        };
        let latency_ms = start.elapsed().as_millis().min(i32::MAX as u128) as i32;
        let (status, error, response_excerpt) = match outcome {
            Ok((status, excerpt)) => (Some(status), None, Some(excerpt)),
            Err(error) => (None, Some(error), None),
        };
        Answer {
            status,
            attempted: Attempted {
                attempted_at,
                status: status.map(i32::from),
                error,
                latency_ms,
                response_excerpt,
            },
        }
    }

    async fn post(&self, leased: &Leased, secret: &WebhookSecret) -> Result<(u16, String), String> {
        self.guard
            .check(&leased.url)
            .await
            .map_err(|refused| format!("not sent: {refused}"))?;
        // Signed now: receivers refuse a timestamp more than minutes away
        // from their clock, and a retry may come hours after the event.
        let timestamp = Utc::now().timestamp();
        let id = leased.msg_id.as_str();
        let mut response = self
            .client
            .post(leased.url.clone())
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .header("webhook-id", id)
            .header("webhook-timestamp", timestamp.to_string())
            .header(
                "webhook-signature",
                secret.sign(id, timestamp, leased.body.as_bytes()),
            )
            .body(leased.body.clone())
            .send()
            .await
            .map_err(describe)?;
        let status = response.status().as_u16();
        let mut excerpt = Vec::new();
        // The start of the body is enough to show: the rest is not awaited.
        while excerpt.len() < EXCERPT_BYTES {
            match response.chunk().await {
                Ok(Some(chunk)) => excerpt.extend_from_slice(&chunk),
                Ok(None) | Err(_) => break,
            }
        }
        excerpt.truncate(EXCERPT_BYTES);
        // Postgres text holds no NUL.
        let text = String::from_utf8_lossy(&excerpt).replace('\0', "");
        Ok((status, text))
    }
}

/// A request error with its causes (reqwest's own message names only the
/// step), without the URL (the endpoint's is known).
fn describe(e: reqwest::Error) -> String {
    let timed_out = e.is_timeout();
    let e = e.without_url();
    let mut text = e.to_string();
    let mut source = std::error::Error::source(&e);
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    if timed_out {
        format!("timed out: {text}")
    } else {
        text
    }
}
