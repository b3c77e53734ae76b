use axum::{Json, Router, extract::State, routing::get};
use serde::Serialize;

use super::{ApiError, AppState};
use crate::store::{
    self,
    stats::{QueueCounts, WorkerSeen},
};

pub fn router() -> Router<AppState> {
    Router::new().route("/jobs/queue", get(show))
}

/// The queue as the fleet sees it.
#[derive(Debug, Serialize)]
pub struct QueueReport {
    #[serde(flatten)]
    pub counts: QueueCounts,
    /// Queued plus active runs: the backlog the fleet scales on.
    pub backlog: i64,
    /// Workers seen in the last minute.
    pub workers: Vec<WorkerSeen>,
}

/// Counts by state, the oldest queued run's age, and the live workers.
async fn show(State(state): State<AppState>) -> Result<Json<QueueReport>, ApiError> {
    let counts = store::stats::queue_counts(&state.pool).await?;
    let workers = store::stats::workers_seen(&state.pool).await?;
    Ok(Json(QueueReport {
        backlog: counts.backlog(),
        counts,
        workers,
    }))
}
