use std::time::Duration;

use axum::{Json, extract::State, http::StatusCode};
use serde_json::{Value, json};
use utoipa_axum::{router::OpenApiRouter, routes};

use super::AppState;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(health))
        .routes(routes!(ready))
}

/// The process is alive (no dependency is checked).
#[utoipa::path(get, path = "/health", tag = "operations", responses((status = 200, body = Object)))]
async fn health() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// Ready when Postgres and Redis both answer within 2 s; 503 otherwise, with
/// what failed.
#[utoipa::path(get, path = "/ready", tag = "operations",
    responses((status = 200, body = Object), (status = 503, description = "A dependency is unreachable", body = Object)))]
async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let limit = Duration::from_secs(2);
    let postgres =
        match tokio::time::timeout(limit, sqlx::query("SELECT 1").execute(&state.pool)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".to_owned()),
        };
    let mut redis = state.redis.clone();
    let redis =
        match tokio::time::timeout(limit, redis::cmd("PING").query_async::<String>(&mut redis))
            .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(e.to_string()),
            Err(_) => Err("timed out".to_owned()),
        };
    let ok = postgres.is_ok() && redis.is_ok();
    let show = |r: &Result<(), String>| match r {
        Ok(()) => json!("ok"),
        Err(e) => json!(e),
    };
    let body = json!({
        "status": if ok { "ready" } else { "unavailable" },
        "checks": {"postgres": show(&postgres), "redis": show(&redis)},
    });
    let status = if ok {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}
