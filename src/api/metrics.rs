//! The api's `/metrics` and `/health` on a side port of their own
//! (API_METRICS_PORT, loopback by default), as a scheduler's and a worker's:
//! the API's port never serves them, so no API client, load balancer rule or
//! security group is needed to keep them private. The gauges read from
//! Postgres (queue counts, site health) are read at most once per
//! API_METRICS_REFRESH_SECS however many scrapers come, so scraping cannot
//! load the database.

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use axum::{Json, Router, extract::State, response::IntoResponse, routing::get};
use serde_json::json;
use sqlx::PgPool;
use tokio::sync::Mutex;

use super::ApiError;
use crate::ops::metrics::{metrics, render_metrics};

/// The gauges `/metrics` reads from Postgres, read again only when older
/// than `max_age`.
pub(super) struct DbGauges {
    pool: PgPool,
    max_age: Duration,
    /// When they were last read. Held while reading: scrapes that come
    /// meanwhile wait for that one read rather than start their own.
    read_at: Mutex<Option<Instant>>,
}

impl DbGauges {
    pub(super) fn new(pool: PgPool, max_age: Duration) -> Self {
        DbGauges {
            pool,
            max_age,
            read_at: Mutex::new(None),
        }
    }

    /// Reads the gauges from Postgres unless they were read within `max_age`.
    /// A read that fails or times out counts as one too: a struggling
    /// database is not asked again sooner.
    async fn refresh(&self) {
        let mut read_at = self.read_at.lock().await;
        if read_at.is_some_and(|at| at.elapsed() < self.max_age) {
            return;
        }
        metrics().metrics_gauge_refreshes.inc();
        super::queue::refresh_gauges(&self.pool).await;
        super::sites::refresh_health_gauge(&self.pool).await;
        *read_at = Some(Instant::now());
    }
}

/// The side port's routes: `/metrics` (Prometheus text) and `/health`.
pub(super) fn router(gauges: Arc<DbGauges>) -> Router {
    Router::new()
        .route("/metrics", get(scrape))
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .with_state(gauges)
}

async fn scrape(State(gauges): State<Arc<DbGauges>>) -> impl IntoResponse {
    gauges.refresh().await;
    render_metrics().await
}

/// `/metrics` on the API's port: not here, and says where.
pub(super) async fn not_on_the_api_port() -> ApiError {
    ApiError::NotFound(
        "no such route: the api serves /metrics on its metrics port (API_METRICS_PORT, \
         loopback by default), not on the API's"
            .into(),
    )
}
