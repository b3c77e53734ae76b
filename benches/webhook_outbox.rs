//! What the webhook outbox sustains, for each sender concurrency, delivering
//! signed messages to a receiver on loopback that verifies each with the
//! Standard Webhooks reference library:
//!
//! - live: `EVENTS` events recorded as a run's ending records its own (one
//!   transaction each, several writers at once) while the sender delivers
//!   them: events recorded and delivered per second (first commit to last
//!   arrival), and the time from an event's commit to its arrival (p50, p99);
//! - backlog: `EVENTS` events committed at once (one transaction): how fast
//!   the sender alone drains them.
//!
//! Needs Postgres and Redis.
//!
//!   cargo bench --bench webhook_outbox            (or scripts/bench)
//!
//! Exits non-zero if a message is lost, arrives unsigned, or if the sender
//! at its default concurrency delivers fewer than MIN_PER_SEC a second.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use crawlfleet::{
    domain::webhook::{WebhookEvent, WebhookEventType},
    store,
};
use serde_json::json;
use support::{Roles, TestApp, WebhookReceiver};

const EVENTS: usize = 2000;
/// Transactions recording events at once (runs ending on many workers).
const WRITERS: usize = 8;
/// Sender concurrencies tried (in all and per endpoint: one endpoint here).
const LEVELS: [usize; 4] = [1, 4, 16, 64];
/// The default WEBHOOK_CONCURRENCY.
const DEFAULT_LEVEL: usize = 16;
const MIN_PER_SEC: f64 = 100.0;

struct Figures {
    concurrency: usize,
    recorded_per_sec: f64,
    delivered_per_sec: f64,
    p50: Duration,
    p99: Duration,
    drained_per_sec: f64,
}

#[tokio::main]
async fn main() {
    println!(
        "{EVENTS} webhook events, {WRITERS} writers, one endpoint on loopback (debug or release: see the build)"
    );
    println!(
        "{:>11} | live: {:>10} {:>11} {:>8} {:>8} | backlog: {:>9}",
        "concurrency", "recorded/s", "delivered/s", "p50 ms", "p99 ms", "drained/s"
    );
    let mut at_default = 0.0;
    for level in LEVELS {
        let f = measure(level).await;
        println!(
            "{:>11} | live: {:>10.0} {:>11.0} {:>8.1} {:>8.1} | backlog: {:>9.0}",
            f.concurrency,
            f.recorded_per_sec,
            f.delivered_per_sec,
            f.p50.as_secs_f64() * 1000.0,
            f.p99.as_secs_f64() * 1000.0,
            f.drained_per_sec
        );
        if level == DEFAULT_LEVEL {
            at_default = f.delivered_per_sec;
        }
    }
    if at_default < MIN_PER_SEC {
        eprintln!(
            "at concurrency {DEFAULT_LEVEL} the outbox delivered {at_default:.0}/s, under {MIN_PER_SEC}/s"
        );
        std::process::exit(1);
    }
}

async fn measure(concurrency: usize) -> Figures {
    let app = TestApp::spawn_without_browsers(Roles::scheduler_only(), |c| {
        c.scheduler.webhook_concurrency = concurrency;
        c.scheduler.webhook_endpoint_concurrency = concurrency;
    })
    .await;
    let receiver = WebhookReceiver::start().await;
    let (status, webhook) = app
        .post(
            "/api/webhooks",
            json!({"url": receiver.url(), "events": ["run.completed"]}),
        )
        .await;
    assert_eq!(status, 201, "{webhook}");
    receiver.verify_with(webhook["secret"].as_str().unwrap());

    // Live: writers and the sender at once.
    let start = Instant::now();
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let pool = app.pool().clone();
            tokio::spawn(async move {
                let mut committed = Vec::new();
                for i in (writer..EVENTS).step_by(WRITERS) {
                    let mut tx = pool.begin().await.unwrap();
                    let id = record(&mut tx, i).await;
                    tx.commit().await.unwrap();
                    committed.push((id, Instant::now()));
                }
                committed
            })
        })
        .collect();
    let mut committed: HashMap<String, Instant> = HashMap::new();
    for writer in writers {
        committed.extend(writer.await.unwrap());
    }
    let recorded_secs = start.elapsed().as_secs_f64();
    let arrivals = arrivals_of(&receiver, EVENTS).await;
    let last = committed.keys().map(|id| arrivals[id]).max().unwrap();
    let mut latencies: Vec<Duration> = committed
        .iter()
        .map(|(id, at)| arrivals[id].saturating_duration_since(*at))
        .collect();
    latencies.sort();

    // Backlog: all committed at once, the sender alone.
    let mut tx = app.pool().begin().await.unwrap();
    let mut backlog = Vec::new();
    for i in EVENTS..2 * EVENTS {
        backlog.push(record(&mut tx, i).await);
    }
    tx.commit().await.unwrap();
    let committed_at = Instant::now();
    let arrivals = arrivals_of(&receiver, 2 * EVENTS).await;
    let drained = backlog.iter().map(|id| arrivals[id]).max().unwrap();

    let figures = Figures {
        concurrency,
        recorded_per_sec: EVENTS as f64 / recorded_secs,
        delivered_per_sec: EVENTS as f64 / last.duration_since(start).as_secs_f64(),
        p50: latencies[latencies.len() / 2],
        p99: latencies[latencies.len() * 99 / 100],
        drained_per_sec: EVENTS as f64 / drained.duration_since(committed_at).as_secs_f64(),
    };
    drop(receiver);
    app.stop().await;
    figures
}

/// Records event `i` in `tx`, as a run's ending does; its message id.
async fn record(tx: &mut sqlx::PgConnection, i: usize) -> String {
    let event = WebhookEvent {
        event_type: WebhookEventType::RunCompleted,
        site_id: None,
        keyword_id: None,
        data: json!({"run_id": i}),
    };
    let id = store::webhooks::record(tx, &event).await.unwrap();
    id.expect("the endpoint wants it").0
}

/// When each message first arrived, once `n` have; each verified.
async fn arrivals_of(receiver: &WebhookReceiver, n: usize) -> HashMap<String, Instant> {
    let received = receiver
        .wait_for_messages(n, Duration::from_secs(600))
        .await;
    let mut arrivals = HashMap::new();
    for message in received {
        assert_eq!(message.verified, Ok(()), "every message is signed");
        arrivals.entry(message.id).or_insert(message.arrived_at);
    }
    assert_eq!(arrivals.len(), n, "every message arrives");
    arrivals
}
