use std::time::Duration;

use chrono::{DateTime, Utc};

use axum::{Json, extract::State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, AppState, error::ErrorBody};
use crate::{
    api::view::view,
    events::QueueStats,
    ops::metrics::metrics,
    store::{
        self,
        stats::{MinuteCounts, QueueCounts, WorkerSeen},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(show))
        .routes(routes!(history))
}

/// The queue as the fleet sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueReport {
    #[serde(flatten)]
    pub counts: QueueCountsView,
    /// Queued plus active runs: the backlog the fleet scales on.
    pub backlog: i64,
    /// Workers seen in the last minute.
    pub workers: Vec<WorkerSeenView>,
}

/// Counts by state, the oldest queued run's age, and the live workers.
#[utoipa::path(get, path = "/jobs/queue", tag = "queue", security(("bearer" = [])),
    responses((status = 200, body = QueueReport), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(State(state): State<AppState>) -> Result<Json<QueueReport>, ApiError> {
    Ok(Json(QueueReport::read(&state.pool).await?))
}

/// Minutes of history the overview charts.
const HISTORY_MINUTES: i32 = 60;

view! {
    /// Runs that ended in one minute.
    #[derive(Debug, Serialize, ToSchema)]
    #[schema(as = MinuteCounts)]
    pub struct MinuteCountsView from (m: MinuteCounts) {} {
        /// The minute's start.
        minute: DateTime<Utc> = m.minute,
        completed: i64 = m.completed,
        failed: i64 = m.failed,
    }
}

/// Runs completed and failed in each of the last 60 minutes, oldest first,
/// the current minute last (minutes without any are there with zeros).
#[utoipa::path(get, path = "/jobs/history", tag = "queue", security(("bearer" = [])),
    responses((status = 200, body = Vec<MinuteCountsView>), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn history(State(state): State<AppState>) -> Result<Json<Vec<MinuteCountsView>>, ApiError> {
    let minutes = store::stats::finished_per_minute(&state.pool, HISTORY_MINUTES).await?;
    Ok(Json(
        minutes.into_iter().map(MinuteCountsView::from).collect(),
    ))
}

impl QueueReport {
    async fn read(pool: &sqlx::PgPool) -> sqlx::Result<QueueReport> {
        let stats = QueueStats::read(pool).await?;
        Ok(QueueReport {
            backlog: stats.backlog,
            counts: stats.counts.into(),
            workers: stats
                .workers
                .into_iter()
                .map(WorkerSeenView::from)
                .collect(),
        })
    }
}

/// Bound on reading the queue for a scrape: a slow Postgres must not make
/// the scraper time out on every other metric.
const GAUGES_TIMEOUT: Duration = Duration::from_secs(2);

/// Sets the `crawlfleet_queue_*` gauges from Postgres, as `/api/jobs/queue`
/// reports them: called on every scrape, so the two agree. When Postgres does
/// not answer in time the gauges keep their last values.
pub(super) async fn refresh_gauges(pool: &sqlx::PgPool) {
    let QueueReport {
        counts, workers, ..
    } = match tokio::time::timeout(GAUGES_TIMEOUT, QueueReport::read(pool)).await {
        Ok(Ok(report)) => report,
        failed => {
            tracing::warn!(?failed, "queue gauges not refreshed");
            return;
        }
    };
    let m = metrics();
    for (state, value) in [
        ("queued", counts.queued),
        ("dispatched", counts.dispatched),
        ("delayed", counts.delayed),
        ("running", counts.running),
        ("url_call", counts.url_call),
        ("call_done", counts.call_done),
        ("completed_last_hour", counts.completed_last_hour),
        ("failed_last_hour", counts.failed_last_hour),
    ] {
        m.queue_runs.with_label_values(&[state]).set(value);
    }
    m.queue_oldest_queued_age.set(counts.oldest_queued_age_secs);
    m.queue_workers.set(workers.len() as i64);
}

view! {
    /// Runs by state, as the queue endpoint shows them.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = QueueCounts)]
    pub struct QueueCountsView from (from: QueueCounts) {} {
        queued: i64 = from.queued,
        /// Of `queued`: job message in Redis, not yet claimed.
        dispatched: i64 = from.dispatched,
        /// Of `queued`: waiting out a retry backoff.
        delayed: i64 = from.delayed,
        running: i64 = from.running,
        url_call: i64 = from.url_call,
        call_done: i64 = from.call_done,
        completed_last_hour: i64 = from.completed_last_hour,
        failed_last_hour: i64 = from.failed_last_hour,
        /// Age of the oldest queued run, in seconds (0 when none).
        oldest_queued_age_secs: i64 = from.oldest_queued_age_secs,
    }
}

view! {
    /// A worker seen in the last minute, with what it holds.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = WorkerSeen)]
    pub struct WorkerSeenView from (from: WorkerSeen) {} {
        id: String = from.id,
        host: String = from.host,
        /// Browser crawls at once.
        concurrency: i32 = from.concurrency,
        /// Plain HTTP and JSON crawls at once.
        http_concurrency: i32 = from.http_concurrency,
        in_flight: i64 = from.in_flight,
        started_at: DateTime<Utc> = from.started_at,
        last_seen_at: DateTime<Utc> = from.last_seen_at,
    }
}
