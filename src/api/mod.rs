//! The api room: REST under `/api`, `/health` and `/ready`.

mod error;
mod extract;
mod health;
mod keywords;
mod results;
mod runs;
mod sites;

use std::{net::SocketAddr, time::Duration};

use anyhow::Context;
use apalis_redis::ConnectionManager;
use axum::{Router, extract::DefaultBodyLimit, http::StatusCode};
use serde::Serialize;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::{timeout::TimeoutLayer, trace::TraceLayer};

pub use error::ApiError;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub redis: ConnectionManager,
    /// Attempts of a run whose site sets none.
    pub default_max_attempts: i32,
}

/// A list response; `next_cursor` is set when there may be more.
#[derive(Debug, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
}

/// Default and largest page size of paged listings.
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = 1000;

fn page_limit(limit: Option<i64>) -> Result<i64, ApiError> {
    match limit {
        None => Ok(DEFAULT_LIMIT),
        Some(n) if (1..=MAX_LIMIT).contains(&n) => Ok(n),
        Some(_) => Err(ApiError::BadRequest {
            message: format!("limit must be between 1 and {MAX_LIMIT}"),
            field: Some("limit".into()),
        }),
    }
}

fn parse_cursor(cursor: Option<&str>) -> Result<Option<i64>, ApiError> {
    cursor
        .map(|c| {
            c.parse().map_err(|_| ApiError::BadRequest {
                message: "cursor is not one this API returned".into(),
                field: Some("cursor".into()),
            })
        })
        .transpose()
}

pub fn router(state: AppState) -> Router {
    let api = Router::new()
        .merge(sites::router())
        .merge(keywords::router())
        .merge(runs::router())
        .merge(results::router());
    Router::new()
        .nest("/api", api)
        .merge(health::router())
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                axum::Json(serde_json::json!({
                    "error": {"code": "method_not_allowed", "message": "method not allowed on this route"}
                })),
            )
        })
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES))
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            Duration::from_secs(30),
        ))
        .layer(TraceLayer::new_for_http())
        .with_state(state)
}

/// The api server, bound to its port (0 picks a free one: tests).
pub struct Application {
    listener: TcpListener,
    router: Router,
}

impl Application {
    pub async fn build(host: &str, port: u16, state: AppState) -> anyhow::Result<Self> {
        let listener = TcpListener::bind((host, port))
            .await
            .with_context(|| format!("binding the api to {host}:{port}"))?;
        Ok(Self {
            listener,
            router: router(state),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    pub async fn run_until_stopped(self, shutdown: CancellationToken) -> anyhow::Result<()> {
        tracing::info!(addr = %self.local_addr(), "api listening");
        axum::serve(self.listener, self.router)
            .with_graceful_shutdown(shutdown.cancelled_owned())
            .await
            .context("serving the api")
    }
}
