use std::time::Duration;

use axum::{Json, extract::State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, AppState, error::ErrorBody};
use crate::{
    ops::metrics::metrics,
    store::{
        self,
        stats::{QueueCounts, WorkerSeen},
    },
};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(show))
}

/// The queue as the fleet sees it.
#[derive(Debug, Serialize, ToSchema)]
pub struct QueueReport {
    #[serde(flatten)]
    pub counts: QueueCounts,
    /// Queued plus active runs: the backlog the fleet scales on.
    pub backlog: i64,
    /// Workers seen in the last minute.
    pub workers: Vec<WorkerSeen>,
}

/// Counts by state, the oldest queued run's age, and the live workers.
#[utoipa::path(get, path = "/jobs/queue", tag = "queue", security(("bearer" = [])),
    responses((status = 200, body = QueueReport), (status = 401, description = "No valid token", body = ErrorBody), (status = 403, description = "Read-only token", body = ErrorBody)))]
async fn show(State(state): State<AppState>) -> Result<Json<QueueReport>, ApiError> {
    Ok(Json(QueueReport::read(&state.pool).await?))
}

impl QueueReport {
    async fn read(pool: &sqlx::PgPool) -> sqlx::Result<QueueReport> {
        let counts = store::stats::queue_counts(pool).await?;
        let workers = store::stats::workers_seen(pool).await?;
        Ok(QueueReport {
            backlog: counts.backlog(),
            counts,
            workers,
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
