//! Live events: workers, scheduler and api publish them on a Redis pub/sub
//! channel; every api process fans them out to its WebSocket clients.

use std::time::Duration;

use anyhow::Context;
use apalis_redis::ConnectionManager;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::store::{runs::CrawlRun, stats::QueueCounts};

/// One live event, as WebSocket clients receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// A run changed state (or counts).
    #[serde(rename = "run.updated")]
    RunUpdated {
        id: i64,
        keyword_id: i64,
        site_id: i64,
        state: String,
        attempt: i32,
        pages: i32,
        items: i32,
        error: Option<String>,
    },
    /// A page's results were stored.
    #[serde(rename = "result.stored")]
    ResultStored {
        run_id: i64,
        keyword_id: i64,
        site_id: i64,
        page: i32,
        count: usize,
    },
    /// The queue's counts (every 5 s, from each api process).
    #[serde(rename = "queue.stats")]
    QueueStats(QueueCounts),
}

impl Event {
    pub fn run_updated(run: &CrawlRun) -> Self {
        Event::RunUpdated {
            id: run.id,
            keyword_id: run.keyword_id,
            site_id: run.site_id,
            state: run.state.clone(),
            attempt: run.attempt,
            pages: run.pages_crawled,
            items: run.items_found,
            error: run.error.clone(),
        }
    }

    /// (run, keyword, site) the event is about, for subscription filters.
    pub fn subject(&self) -> Option<(i64, i64, i64)> {
        match self {
            Event::RunUpdated {
                id,
                keyword_id,
                site_id,
                ..
            } => Some((*id, *keyword_id, *site_id)),
            Event::ResultStored {
                run_id,
                keyword_id,
                site_id,
                ..
            } => Some((*run_id, *keyword_id, *site_id)),
            Event::QueueStats(_) => None,
        }
    }
}

/// The pub/sub channel of a queue's fleet.
pub fn channel(queue_name: &str) -> String {
    format!("{queue_name}:events")
}

/// Publishes events; cheap to clone. Publishing never fails a caller: an
/// event lost to a Redis hiccup is logged, the state is in Postgres.
#[derive(Clone)]
pub struct EventPublisher {
    conn: ConnectionManager,
    channel: String,
}

impl EventPublisher {
    pub fn new(conn: ConnectionManager, queue_name: &str) -> Self {
        Self {
            conn,
            channel: channel(queue_name),
        }
    }

    pub async fn publish(&self, event: &Event) {
        let payload = serde_json::to_string(event).expect("events serialize");
        let mut conn = self.conn.clone();
        let sent = tokio::time::timeout(
            Duration::from_secs(2),
            redis::cmd("PUBLISH")
                .arg(&self.channel)
                .arg(payload)
                .query_async::<i64>(&mut conn),
        )
        .await;
        if !matches!(sent, Ok(Ok(_))) {
            tracing::debug!(?sent, "event not published");
        }
    }

    pub async fn run_updated(&self, run: &CrawlRun) {
        self.publish(&Event::run_updated(run)).await;
    }
}

/// Forwards the fleet's events from Redis to `local` until `shutdown`,
/// resubscribing after a Redis restart.
pub async fn relay(
    redis_url: String,
    queue_name: String,
    local: broadcast::Sender<Event>,
    shutdown: CancellationToken,
) {
    let channel = channel(&queue_name);
    while !shutdown.is_cancelled() {
        match subscribe_and_forward(&redis_url, &channel, &local, &shutdown).await {
            Ok(()) => return,
            Err(e) => {
                tracing::warn!(error = ?e, "event subscription lost; resubscribing");
                tokio::select! {
                    _ = shutdown.cancelled() => return,
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                }
            }
        }
    }
}

async fn subscribe_and_forward(
    redis_url: &str,
    channel: &str,
    local: &broadcast::Sender<Event>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let client = redis::Client::open(redis_url).context("parsing REDIS_URL")?;
    let mut pubsub = client
        .get_async_pubsub()
        .await
        .context("connecting for events")?;
    pubsub
        .subscribe(channel)
        .await
        .context("subscribing to events")?;
    let mut messages = pubsub.on_message();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            message = messages.next() => {
                let Some(message) = message else {
                    anyhow::bail!("the event stream ended");
                };
                let payload: String = message.get_payload().context("event payload")?;
                match serde_json::from_str::<Event>(&payload) {
                    // No receivers is fine: nobody is watching.
                    Ok(event) => { let _ = local.send(event); }
                    Err(e) => tracing::warn!(error = %e, "unreadable event dropped"),
                }
            }
        }
    }
}
