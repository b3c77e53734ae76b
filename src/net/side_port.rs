//! `/health` and `/metrics` of a scheduler or worker process, on its own port
//! (SCHEDULER_PORT, METRICS_PORT): keep it private to the host and scraper.

use anyhow::Context;
use axum::{Json, Router, routing::get};
use serde_json::json;
use tokio_util::sync::CancellationToken;

pub async fn serve(
    host: &str,
    port: u16,
    limits: crate::net::http_server::Limits,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind((host, port))
        .await
        .with_context(|| format!("binding /health and /metrics to {host}:{port}"))?;
    tracing::info!(addr = %listener.local_addr()?, "health and metrics listening");
    let router = Router::new()
        .route("/health", get(|| async { Json(json!({"status": "ok"})) }))
        .route("/metrics", get(crate::ops::metrics::render_metrics));
    // No tokens here: the reserved slots serve the probes only.
    let clients = crate::net::http_server::Clients::default();
    crate::net::http_server::serve(listener, router, limits, clients, shutdown)
        .await
        .context("serving /health and /metrics")
}
