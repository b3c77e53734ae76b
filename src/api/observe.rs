//! `/metrics` and the HTTP metrics of every request.

use std::time::Instant;

use axum::{
    extract::{MatchedPath, Request},
    http::header,
    middleware::Next,
    response::{IntoResponse, Response},
};

use crate::metrics::metrics;

/// Prometheus text exposition of this process's metrics. Open, like
/// `/health`: expose the port only to the scraper (private port or security group).
pub async fn render_metrics() -> impl IntoResponse {
    (
        [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
        metrics().render(),
    )
}

/// Counts requests by method, route (the pattern, not the path: bounded
/// labels) and status, and observes their latency.
pub async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_owned())
        .unwrap_or_else(|| "unmatched".to_owned());
    let method = req.method().as_str().to_owned();
    let started = Instant::now();
    let response = next.run(req).await;
    let m = metrics();
    m.http_requests
        .with_label_values(&[&method, &route, response.status().as_str()])
        .inc();
    m.http_request_duration
        .with_label_values(&[&method, &route])
        .observe(started.elapsed().as_secs_f64());
    response
}
