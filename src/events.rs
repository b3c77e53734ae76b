//! Live events: workers, scheduler and api publish them on a Redis pub/sub
//! channel; every api process fans them out to its WebSocket clients, naming
//! the keyword and site of each run as it does.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use anyhow::Context;
use apalis_redis::ConnectionManager;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use sqlx::PgPool;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;

use crate::{
    domain::{
        failure::FailureKind,
        run::{CrawlRun, RunState},
    },
    store::{self, stats::QueueCounts},
};

/// One live event, as WebSocket clients receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// A run changed state (or counts).
    #[serde(rename = "run.updated")]
    RunUpdated {
        id: i64,
        keyword_id: i64,
        /// The keyword's text. Publishers send ids; the api that fans the
        /// event out fills in the names (`null` if deleted meanwhile).
        #[serde(default)]
        keyword: Option<String>,
        site_id: i64,
        /// The site's name.
        #[serde(default)]
        site: Option<String>,
        state: RunState,
        attempt: i32,
        pages: i32,
        items: i32,
        error: Option<String>,
        /// Why the last attempt failed, as a program matches on it.
        #[serde(default)]
        error_kind: Option<FailureKind>,
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
            keyword: None,
            site_id: run.site_id,
            site: None,
            state: run.state,
            attempt: run.attempt,
            pages: run.pages_crawled,
            items: run.items_found,
            error: run.error.clone(),
            error_kind: run.error_kind,
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

/// How long a looked-up name is trusted: a renamed keyword or site shows
/// under its new name within this time.
const NAMES_TTL: Duration = Duration::from_secs(60);
/// After a failed lookup, events go out with ids only for this long, rather
/// than each waiting for a Postgres that does not answer.
const NAMES_RETRY: Duration = Duration::from_secs(5);
const NAMES_LOOKUP_TIMEOUT: Duration = Duration::from_secs(1);
/// Pairs remembered at most; past it the memory starts afresh.
const NAMES_KEPT: usize = 10_000;

/// The keyword texts and site names of recent runs, so the many events of one
/// crawl cost one lookup.
pub struct Names {
    pool: PgPool,
    known: HashMap<(i64, i64), KnownNames>,
}

struct KnownNames {
    until: Instant,
    keyword: Option<String>,
    site: Option<String>,
}

impl Names {
    pub fn new(pool: PgPool) -> Self {
        Self {
            pool,
            known: HashMap::new(),
        }
    }

    /// Fills in the keyword and site names of a `run.updated` event that
    /// lacks them.
    pub async fn fill(&mut self, event: &mut Event) {
        let Event::RunUpdated {
            keyword_id,
            keyword,
            site_id,
            site,
            ..
        } = event
        else {
            return;
        };
        if keyword.is_some() && site.is_some() {
            return;
        }
        let key = (*keyword_id, *site_id);
        let now = Instant::now();
        if let Some(known) = self.known.get(&key).filter(|k| k.until > now) {
            keyword.clone_from(&known.keyword);
            site.clone_from(&known.site);
            return;
        }
        let looked_up = tokio::time::timeout(
            NAMES_LOOKUP_TIMEOUT,
            store::names::keyword_and_site(&self.pool, key.0, key.1),
        )
        .await;
        let known = match looked_up {
            Ok(Ok((keyword, site))) => KnownNames {
                until: now + NAMES_TTL,
                keyword,
                site,
            },
            failed => {
                tracing::debug!(?failed, "names of an event not looked up");
                KnownNames {
                    until: now + NAMES_RETRY,
                    keyword: None,
                    site: None,
                }
            }
        };
        keyword.clone_from(&known.keyword);
        site.clone_from(&known.site);
        if self.known.len() >= NAMES_KEPT {
            self.known.clear();
        }
        self.known.insert(key, known);
    }
}

/// Forwards the fleet's events from Redis to `local`, with names filled in,
/// until `shutdown`, resubscribing after a Redis restart.
pub async fn relay(
    redis_url: String,
    queue_name: String,
    mut names: Names,
    local: broadcast::Sender<Event>,
    shutdown: CancellationToken,
) {
    let channel = channel(&queue_name);
    while !shutdown.is_cancelled() {
        match subscribe_and_forward(&redis_url, &channel, &mut names, &local, &shutdown).await {
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
    names: &mut Names,
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
                    // Nobody watching: no names to look up, nobody to tell.
                    Ok(_) if local.receiver_count() == 0 => {}
                    Ok(mut event) => {
                        names.fill(&mut event).await;
                        let _ = local.send(event);
                    }
                    Err(e) => tracing::warn!(error = %e, "unreadable event dropped"),
                }
            }
        }
    }
}
