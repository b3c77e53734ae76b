//! Live events: workers, scheduler and api publish them on a Redis pub/sub
//! channel; every api process fans them out to its WebSocket clients, naming
//! the keyword and site of each run as it does (`api::live::relay`).
//! Imports `domain` and the store's queue counts; every room may publish.

use std::time::Duration;

use apalis_redis::ConnectionManager;
use serde::{Deserialize, Serialize};

use crate::{
    domain::{
        change::ChangeSummary,
        failure::FailureKind,
        run::{CrawlRun, RunState},
    },
    store::{
        self,
        stats::{QueueCounts, WorkerSeen},
    },
};

/// One live event, as WebSocket clients receive it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
pub enum Event {
    /// A run changed state (or counts).
    #[serde(rename = "run.updated")]
    RunUpdated {
        id: i64,
        /// `null` for a URL list's run.
        keyword_id: Option<i64>,
        /// The URL list a list run reads (`null` for a keyword's run).
        #[serde(default)]
        url_list_id: Option<i64>,
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
        /// How many attempts the run has in all (`null` from a publisher
        /// older than this field).
        #[serde(default)]
        max_attempts: Option<i32>,
        pages: i32,
        items: i32,
        error: Option<String>,
        /// Why the last attempt failed, as a program matches on it.
        #[serde(default)]
        error_kind: Option<FailureKind>,
        /// Once completed: `healthy` or `degraded`.
        #[serde(default)]
        health: Option<String>,
        /// Why a degraded run is degraded.
        #[serde(default)]
        health_reason: Option<String>,
        /// Items new to the keyword/site, changed and removed (so far).
        #[serde(default)]
        items_new: i32,
        #[serde(default)]
        items_changed: i32,
        #[serde(default)]
        items_removed: i32,
        /// Only on the event of its completion: what it found changed,
        /// with the first new, changed and removed items and their diffs.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        changes: Option<ChangeSummary>,
    },
    /// A page's results were stored.
    #[serde(rename = "result.stored")]
    ResultStored {
        run_id: i64,
        keyword_id: Option<i64>,
        #[serde(default)]
        url_list_id: Option<i64>,
        site_id: i64,
        page: i32,
        count: usize,
    },
    /// A verified repair of a site's selectors was stored after run
    /// `run_id` went bad; `applied`: the site's `auto` policy applied it.
    #[serde(rename = "repair.proposed")]
    RepairProposed {
        id: i64,
        site_id: i64,
        run_id: i64,
        keyword_id: Option<i64>,
        applied: bool,
    },
    /// The queue's counts and the workers seen (every 5 s, from each api
    /// process to its own clients).
    #[serde(rename = "queue.stats")]
    QueueStats(QueueStats),
}

/// What the live overview shows of the fleet: the runs by state, the backlog
/// the fleet scales on, and each worker with the crawls it holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct QueueStats {
    #[serde(flatten)]
    pub counts: QueueCounts,
    pub backlog: i64,
    #[serde(default)]
    pub workers: Vec<WorkerSeen>,
}

impl QueueStats {
    /// As of now, from Postgres: what `/api/jobs/queue` answers and the live
    /// feed sends every 5 s.
    pub async fn read(pool: &sqlx::PgPool) -> sqlx::Result<QueueStats> {
        let counts = store::stats::queue_counts(pool).await?;
        let workers = store::stats::workers_seen(pool).await?;
        Ok(QueueStats {
            backlog: counts.backlog(),
            counts,
            workers,
        })
    }
}

impl Event {
    pub fn run_updated(run: &CrawlRun) -> Self {
        Event::RunUpdated {
            id: run.id,
            keyword_id: run.keyword_id,
            url_list_id: run.url_list_id,
            keyword: None,
            site_id: run.site_id,
            site: None,
            state: run.state,
            attempt: run.attempt,
            max_attempts: Some(run.max_attempts),
            pages: run.pages_crawled,
            items: run.items_found,
            error: run.error.clone(),
            error_kind: run.error_kind,
            health: run.health.as_ref().map(|h| h.as_str().to_owned()),
            health_reason: run
                .health
                .as_ref()
                .and_then(|h| h.reason())
                .map(str::to_owned),
            items_new: run.items_new,
            items_changed: run.items_changed,
            items_removed: run.items_removed,
            changes: None,
        }
    }

    /// The `run.updated` of a run's completion, with what it found changed.
    pub fn run_completed(run: &CrawlRun, changes: &ChangeSummary) -> Self {
        let mut event = Event::run_updated(run);
        if let Event::RunUpdated { changes: slot, .. } = &mut event {
            *slot = Some(changes.clone());
        }
        event
    }

    /// (run, keyword, site) the event is about, for subscription filters
    /// (no keyword: a URL list's run).
    pub fn subject(&self) -> Option<(i64, Option<i64>, i64)> {
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
            Event::RepairProposed {
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

    /// Publishes `events` in order, in one round trip (a pipeline).
    pub async fn publish_all(&self, events: &[Event]) {
        let mut pipe = redis::pipe();
        for event in events {
            let payload = serde_json::to_string(event).expect("events serialize");
            pipe.cmd("PUBLISH").arg(&self.channel).arg(payload).ignore();
        }
        let mut conn = self.conn.clone();
        let sent =
            tokio::time::timeout(Duration::from_secs(2), pipe.query_async::<()>(&mut conn)).await;
        if !matches!(sent, Ok(Ok(_))) {
            tracing::debug!(?sent, "events not published");
        }
    }

    pub async fn run_updated(&self, run: &CrawlRun) {
        self.publish(&Event::run_updated(run)).await;
    }

    /// Announces a run's completion and what it found changed.
    pub async fn run_completed(&self, run: &CrawlRun, changes: &ChangeSummary) {
        self.publish(&Event::run_completed(run, changes)).await;
    }
}
