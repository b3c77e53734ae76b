use axum::{Json, extract::State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::{router::OpenApiRouter, routes};

use super::{ApiError, AppState, error::ErrorBody};
use crate::store::{
    self,
    stats::{QueueCounts, WorkerSeen},
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
    let counts = store::stats::queue_counts(&state.pool).await?;
    let workers = store::stats::workers_seen(&state.pool).await?;
    Ok(Json(QueueReport {
        backlog: counts.backlog(),
        counts,
        workers,
    }))
}
