//! The live API: bearer tokens (`auth`), WebSocket events across processes
//! (`websocket`), queue stats (`queue`), and Prometheus metrics that move as
//! the fleet works (`metrics`).

mod api_metrics;
mod auth;
mod metrics;
mod queue;
mod websocket;

use std::time::{Duration, Instant};

use crawlfleet::{domain::run::RunState, events::Event};
use futures::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::{connect_async, tungstenite::Message};

use crate::support::RoleProcess;

const WRITER: &str = "writer-secret-token";
const READER: &str = "reader-secret-token";

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

fn with_tokens(c: &mut crawlfleet::config::Config) {
    c.api.auth_disabled = false;
    c.api.api_tokens = vec![WRITER.into()];
    c.api.api_read_tokens = vec![READER.into()];
}

/// `/ws` of an api at `base` (`http://host:port`).
fn ws_url(base: &str) -> String {
    format!("{}/ws", base.replace("http://", "ws://"))
}

/// A live connection, the token given as browsers give it.
async fn socket(base: &str, token: &str) -> Socket {
    connect_async(format!("{}?token={token}", ws_url(base)))
        .await
        .expect("websocket accepted")
        .0
}

/// What reading a socket gave.
#[derive(Debug)]
enum Read {
    Json(Value),
    /// The server closed the connection: a close frame (its code), end of
    /// stream or a reset.
    Ended(String),
    TimedOut,
}

/// The next JSON text frame, or how the connection ended (pings are
/// answered by the client library while it reads). Callers mostly allow 10 s
/// or more for a frame the api sends within milliseconds: a reply, or an event
/// relayed through Redis.
async fn next_read(ws: &mut Socket, limit: Duration) -> Read {
    let deadline = Instant::now() + limit;
    loop {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else {
            return Read::TimedOut;
        };
        match tokio::time::timeout(left, ws.next()).await {
            Err(_) => return Read::TimedOut,
            Ok(None) => return Read::Ended("end of stream".into()),
            Ok(Some(Err(e))) => return Read::Ended(format!("error: {e}")),
            Ok(Some(Ok(Message::Close(frame)))) => {
                return Read::Ended(format!(
                    "close {:?}",
                    frame.map(|f| (u16::from(f.code), f.reason.to_string()))
                ));
            }
            Ok(Some(Ok(Message::Text(text)))) => {
                return Read::Json(serde_json::from_str(&text).expect("JSON text frames"));
            }
            Ok(Some(Ok(_))) => {}
        }
    }
}

/// The next JSON text frame; `None` when the connection ended or `limit` passed.
async fn next_json(ws: &mut Socket, limit: Duration) -> Option<Value> {
    match next_read(ws, limit).await {
        Read::Json(frame) => Some(frame),
        Read::Ended(_) | Read::TimedOut => None,
    }
}

/// The next frame of type `kind`, skipping the others.
async fn next_of_type(ws: &mut Socket, kind: &str, limit: Duration) -> Value {
    let deadline = Instant::now() + limit;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match next_read(ws, left).await {
            Read::Json(frame) if frame["type"] == kind => return frame,
            Read::Json(_) => {}
            other => panic!("no {kind} frame within {limit:?}: {other:?}"),
        }
    }
}

/// A `run.updated` event as a worker would publish it (names are the api's job).
fn run_event(id: i64, keyword_id: i64, site_id: i64, error: Option<String>) -> Event {
    Event::RunUpdated {
        id,
        keyword_id: Some(keyword_id),
        url_list_id: None,
        keyword: None,
        site_id,
        site: None,
        state: RunState::Running,
        attempt: 1,
        max_attempts: Some(3),
        pages: 0,
        items: 0,
        error,
        error_kind: None,
        health: None,
        health_reason: None,
        items_new: 0,
        items_changed: 0,
        items_removed: 0,
        changes: None,
    }
}

async fn send_text(ws: &mut Socket, text: String) {
    ws.send(Message::Text(text.into())).await.unwrap();
}

async fn subscribe(ws: &mut Socket, filter: Value) {
    send_text(ws, json!({"subscribe": filter}).to_string()).await;
    let frame = next_of_type(ws, "subscribed", Duration::from_secs(10)).await;
    assert_eq!(frame["filter"], filter);
}

/// A `/metrics` scrape, parsed by a Prometheus text-format parser.
pub struct Scrape(prometheus_parse::Scrape);

impl Scrape {
    pub async fn of(url: &str) -> Scrape {
        let resp = reqwest::get(url).await.expect("metrics answer");
        assert_eq!(resp.status(), 200, "{url}");
        let text = resp.text().await.unwrap();
        let parsed = prometheus_parse::Scrape::parse(text.lines().map(|l| Ok(l.to_owned())))
            .expect("Prometheus text format");
        // Every sample line was understood: the parser silently skips the
        // lines it cannot read. (A histogram's buckets are one sample; its
        // _sum and _count are samples of their own.)
        let lines = text
            .lines()
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .count();
        let understood = parsed
            .samples
            .iter()
            .map(|s| match &s.value {
                prometheus_parse::Value::Histogram(buckets) => buckets.len(),
                _ => 1,
            })
            .sum::<usize>();
        assert_eq!(understood, lines, "lines the parser skipped in {text}");
        Scrape(parsed)
    }

    /// The value of the sample `name` whose labels include `labels` (a
    /// histogram's count).
    fn value(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        self.0
            .samples
            .iter()
            .find(|s| s.metric == name && labels.iter().all(|(k, v)| s.labels.get(k) == Some(*v)))
            .map(|s| match &s.value {
                prometheus_parse::Value::Counter(v)
                | prometheus_parse::Value::Gauge(v)
                | prometheus_parse::Value::Untyped(v) => *v,
                prometheus_parse::Value::Histogram(buckets) => {
                    buckets.last().map(|b| b.count).unwrap_or(0.0)
                }
                _ => f64::NAN,
            })
    }

    /// Like [`Self::value`], 0 when the labelled sample was never exported.
    pub fn count(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.value(name, labels).unwrap_or(0.0)
    }
}

/// The api as its own OS process (the real binary), with its own metrics
/// registry and log.
struct ApiProcess {
    process: RoleProcess,
    base: String,
    /// Its metrics port: `{metrics_base}/metrics`.
    metrics_base: String,
}

impl ApiProcess {
    async fn spawn(config: &crawlfleet::config::Config, extra_env: &[(&str, String)]) -> Self {
        let process = RoleProcess::spawn("api", config, extra_env);
        let addr = process.listening_on("api listening").await;
        let metrics = process.listening_on("api metrics listening").await;
        ApiProcess {
            process,
            base: format!("http://{addr}"),
            metrics_base: format!("http://{metrics}"),
        }
    }
}
