//! The api room: REST under `/api` (webhook endpoints included), WebSocket `/ws` (live events), the
//! operator's console at `/`, `/health`, `/ready`, and the CloudWatch
//! backlog metric on the API's port; `/metrics` on a side port of its own. Owns the wire types
//! (and their OpenAPI schemas) and maps the store's domain types to them.
//! May import `config`, `domain`, `store`, `queue`, `events`, `net`, `ops`;
//! never `scheduler` or `worker`.

mod answer_budget;
mod auth;
mod bulk;
pub mod cloudwatch;
mod console;
mod error;
mod extract;
mod health;
mod items;
mod keywords;
mod live;
mod metrics;
mod observe;
mod queue;
mod results;
mod runs;
mod schema;
mod sites;
mod url_lists;
mod view;
mod webhooks;

use std::{net::SocketAddr, sync::Arc, time::Duration};

use anyhow::Context;
use apalis_redis::ConnectionManager;
use std::sync::LazyLock;

use axum::{
    Json, Router,
    extract::{DefaultBodyLimit, Request, State},
    http::StatusCode,
    middleware::{self, Next},
    response::Response,
};
use serde::Serialize;
use sqlx::PgPool;
use tokio::net::TcpListener;
use tokio::sync::broadcast;
use tokio_util::{sync::CancellationToken, task::TaskTracker};
use tower_http::{timeout::TimeoutLayer, trace::TraceLayer};
use utoipa::OpenApi as _;
use utoipa_axum::{router::OpenApiRouter, routes};

use crate::{
    api::cloudwatch::PublisherSettings,
    config::{ApiConfig, CommonConfig},
    events::{Event, EventPublisher},
    net::{client_ip::TrustedProxies, target_guard::TargetGuard},
};

pub use auth::Tokens;
pub use error::ApiError;
pub use live::{LiveSettings, LiveSlots, MAX_CLIENT_MESSAGE_BYTES};

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    pub pool: PgPool,
    pub redis: ConnectionManager,
    /// Attempts of a run whose site sets none.
    pub default_max_attempts: i32,
    /// `None`: auth disabled explicitly (`AUTH_DISABLED=true`).
    pub tokens: Option<Tokens>,
    /// Announces run changes to every api process's live clients.
    pub events: EventPublisher,
    /// This process's live clients' feed.
    pub live: broadcast::Sender<Event>,
    pub live_settings: LiveSettings,
    /// This process's live clients, so shutdown can wait for their close frames.
    pub live_clients: TaskTracker,
    /// Caps on live clients, in all and per token.
    pub live_slots: LiveSlots,
    pub shutdown: CancellationToken,
    /// Refuses sites whose targets are private or metadata addresses.
    pub guard: TargetGuard,
    /// Seals kept sessions (on the workers) and sites' secrets (here);
    /// `None`: SESSION_KEY is not set, and sites may have neither.
    pub session_key: Option<crate::store::sealing::SessionKey>,
    /// Shortest interval a keyword's schedule may fire at.
    pub min_schedule_interval: chrono::TimeDelta,
    /// How long a site preview waits for a worker's answer.
    pub preview_timeout: Duration,
    /// The fleet's queue: previews go through its lanes.
    pub queue_name: String,
    /// Proxies (the load balancer) whose `X-Forwarded-For` names the client.
    pub trusted_proxies: TrustedProxies,
    /// The bytes a paged listing's answer holds at most (`answer_budget`).
    pub answer_max_bytes: usize,
}

/// Longest a request may take (a site preview's may take longer).
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);

/// Events a slow live client may fall behind by before it is told it lagged.
const LIVE_BUFFER: usize = 1024;

/// How long shutdown waits for live clients to be sent their close frames:
/// the server stops waiting for upgraded connections as soon as it stops.
const CLOSE_FRAMES_GRACE: Duration = Duration::from_secs(2);

impl AppState {
    /// The api's state from its settings; refuses to run an API nobody locked
    /// unless `AUTH_DISABLED=true` says so explicitly.
    pub fn from_config(
        common: &CommonConfig,
        config: &ApiConfig,
        pool: PgPool,
        redis: ConnectionManager,
        shutdown: CancellationToken,
    ) -> anyhow::Result<Self> {
        let tokens = Tokens::new(&config.api_tokens, &config.api_read_tokens);
        let tokens = match (config.auth_disabled, tokens.is_empty()) {
            (true, _) => {
                tracing::warn!("AUTH_DISABLED=true: the API accepts requests without a token");
                None
            }
            (false, true) => anyhow::bail!(
                "no API token configured: set API_TOKENS (and optionally API_READ_TOKENS), \
                 or AUTH_DISABLED=true to serve the API without tokens"
            ),
            (false, false) => Some(tokens),
        };
        Ok(Self {
            events: EventPublisher::new(redis.clone(), &common.queue_name),
            pool,
            redis,
            default_max_attempts: common.max_attempts as i32,
            tokens,
            live: broadcast::channel(LIVE_BUFFER).0,
            live_settings: LiveSettings {
                ping_every: Duration::from_secs(config.ws_ping_interval_secs.max(1)),
                send_timeout: Duration::from_secs(config.ws_send_timeout_secs.max(1)),
            },
            live_clients: TaskTracker::new(),
            live_slots: LiveSlots::new(config.max_ws_clients, config.max_ws_clients_per_token),
            shutdown,
            guard: common.target_guard(),
            session_key: common.session_key.clone(),
            min_schedule_interval: chrono::TimeDelta::seconds(
                config.min_schedule_interval_secs.into(),
            ),
            preview_timeout: Duration::from_secs(config.preview_timeout_secs.max(1).into()),
            queue_name: common.queue_name.clone(),
            trusted_proxies: TrustedProxies::new(config.trusted_proxies.clone()),
            answer_max_bytes: config.api_answer_max_bytes.max(1),
        })
    }
}

/// A list response; `next_cursor` is set when there may be more. A paged
/// listing (results, runs, an item's history, deliveries) is written within
/// `API_ANSWER_MAX_BYTES` (see `answer_budget`).
#[derive(Debug, Serialize, utoipa::ToSchema)]
pub struct Page<T> {
    pub items: Vec<T>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Set when the answer stopped taking rows at this many bytes: fewer
    /// than `limit` rows, and `next_cursor` goes on from the last one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut_at_bytes: Option<usize>,
}

/// Default and largest page size of paged listings (the largest the
/// store's listings read).
const DEFAULT_LIMIT: i64 = 100;
const MAX_LIMIT: i64 = crate::store::listing::MAX_LIMIT;

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

/// A page's `cursor`, as this API returned it: a 400 naming `cursor` for
/// anything else.
fn parse_cursor<T: std::str::FromStr>(cursor: Option<&str>) -> Result<Option<T>, ApiError> {
    cursor
        .map(|c| {
            c.parse().map_err(|_| ApiError::BadRequest {
                message: "cursor is not one this API returned".into(),
                field: Some("cursor".into()),
            })
        })
        .transpose()
}

/// The OpenAPI description: the security scheme and the error schema; the
/// paths come from the handlers' annotations as the router is built.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(title = "crawlfleet", description = "Keyword crawls of many sites on a schedule, in headless Chrome."),
    modifiers(&BearerAuth),
    components(schemas(error::ErrorBody, error::ErrorDetail))
)]
struct ApiDoc;

struct BearerAuth;

impl utoipa::Modify for BearerAuth {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        openapi
            .components
            .get_or_insert_with(Default::default)
            .add_security_scheme(
                "bearer",
                SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
            );
    }
}

/// The routes, grouped by who may call them: `/api` and `/ws` behind tokens,
/// the operations endpoints open.
struct Routes {
    api: OpenApiRouter<AppState>,
    live: OpenApiRouter<AppState>,
    open: OpenApiRouter<AppState>,
}

fn routes() -> Routes {
    Routes {
        api: OpenApiRouter::new()
            .merge(sites::router())
            .merge(keywords::router())
            .merge(url_lists::router())
            .merge(runs::router())
            .merge(results::router())
            .merge(items::router())
            .merge(queue::router())
            .merge(webhooks::router())
            .merge(auth::router())
            .routes(routes!(openapi_json)),
        live: live::router(),
        open: health::router(),
    }
}

/// The whole API as an OpenAPI 3 document, generated from the same handlers
/// the router serves, so the two cannot drift.
pub fn openapi() -> &'static utoipa::openapi::OpenApi {
    static DOC: LazyLock<utoipa::openapi::OpenApi> = LazyLock::new(|| {
        let Routes { api, live, open } = routes();
        OpenApiRouter::with_openapi(ApiDoc::openapi())
            .nest("/api", api)
            .merge(live)
            .merge(open)
            .into_openapi()
    });
    &DOC
}

/// This document.
#[utoipa::path(get, path = "/openapi.json", tag = "operations", security(("bearer" = [])), responses((status = 200, body = Object)))]
async fn openapi_json() -> Json<&'static utoipa::openapi::OpenApi> {
    Json(openapi())
}

pub fn router(state: AppState) -> Router {
    let guarded = middleware::from_fn_with_state(state.clone(), auth::require_token);
    let Routes { api, live, open } = routes();
    let (router, _) = OpenApiRouter::new()
        .nest("/api", api.route_layer(guarded.clone()))
        .merge(live.route_layer(guarded))
        .merge(open)
        .split_for_parts();
    router
        .merge(console::router())
        .route("/metrics", axum::routing::get(metrics::not_on_the_api_port))
        .fallback(|| async { ApiError::NotFound("no such route".into()) })
        .method_not_allowed_fallback(|| async {
            (
                StatusCode::METHOD_NOT_ALLOWED,
                Json(serde_json::json!({
                    "error": {"code": "method_not_allowed", "message": "method not allowed on this route"}
                })),
            )
        })
        .layer(DefaultBodyLimit::max(extract::MAX_BODY_BYTES))
        // Before the body is awaited: a declared size over the limit is a 413
        // at once, not a wait for bytes that will be refused anyway.
        .layer(middleware::from_fn(extract::refuse_oversized_declared_body))
        // Long enough for a site preview to answer its 503 itself.
        .layer(TimeoutLayer::with_status_code(
            StatusCode::REQUEST_TIMEOUT,
            REQUEST_TIMEOUT.max(state.preview_timeout + Duration::from_secs(5)),
        ))
        .layer(TraceLayer::new_for_http().make_span_with(observe::request_span))
        // Outermost: the request's span and every handler know the client.
        .layer(middleware::from_fn_with_state(state.clone(), mark_client))
        // A route layer: it sees the matched route pattern (bounded labels).
        .route_layer(middleware::from_fn(observe::track))
        .with_state(state)
}

async fn mark_client(State(state): State<AppState>, mut req: Request, next: Next) -> Response {
    state.trusted_proxies.mark(&mut req);
    next.run(req).await
}

/// The api server, bound to its port (0 picks a free one: tests).
pub struct Application {
    listener: TcpListener,
    router: Router,
    /// `/metrics` and `/health` on API_METRICS_PORT.
    metrics_listener: TcpListener,
    metrics_router: Router,
    state: AppState,
    redis: redis::Client,
    queue_name: String,
    database_url: String,
    /// `None`: CloudWatch publishing is off (`CLOUDWATCH_ENABLED` not set).
    publisher: Option<PublisherSettings>,
    limits: crate::net::http_server::Limits,
}

impl Application {
    pub async fn build(
        common: &CommonConfig,
        config: &ApiConfig,
        port: u16,
        state: AppState,
    ) -> anyhow::Result<Self> {
        let host = config.api_host.as_str();
        let listener = TcpListener::bind((host, port))
            .await
            .with_context(|| format!("binding the api to {host}:{port}"))?;
        let metrics_host = config.api_metrics_host.as_str();
        let metrics_port = config.api_metrics_port;
        let metrics_listener = TcpListener::bind((metrics_host, metrics_port))
            .await
            .with_context(|| {
                format!("binding the api's /metrics to {metrics_host}:{metrics_port}")
            })?;
        let gauges = metrics::DbGauges::new(
            state.pool.clone(),
            Duration::from_secs(config.api_metrics_refresh_secs),
        );
        let limits = common.http_limits();
        let open_files = crate::net::http_server::raise_open_files_limit();
        let wanted = (limits.max_connections + config.max_ws_clients) as u64 * 9 / 8 + 256;
        if open_files < wanted {
            tracing::warn!(
                open_files,
                wanted,
                "the open-file limit is below what MAX_CONNECTIONS and MAX_WS_CLIENTS may use; \
                 raise it (ulimit -n) or lower them"
            );
        }
        Ok(Self {
            limits,
            listener,
            router: router(state.clone()),
            metrics_listener,
            metrics_router: metrics::router(Arc::new(gauges)),
            state,
            redis: crate::queue::client_with_root_cert(
                &common.redis_url,
                common.redis.root_cert()?,
            )?,
            queue_name: common.queue_name.clone(),
            database_url: common.database_url.clone(),
            publisher: config
                .cloudwatch_enabled
                .then(|| PublisherSettings::from_config(common, config)),
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Where `/metrics` (and `/health`) are served: API_METRICS_PORT.
    pub fn metrics_addr(&self) -> SocketAddr {
        self.metrics_listener
            .local_addr()
            .expect("a bound listener has an address")
    }

    /// Serves until the state's shutdown token fires, with the live feed
    /// (events relayed from Redis, queue stats every 5 s) and, when enabled,
    /// the CloudWatch publisher: each its own task, so neither can slow a request.
    pub async fn run_until_stopped(self) -> anyhow::Result<()> {
        tracing::info!(addr = %self.local_addr(), "api listening");
        tracing::info!(addr = %self.metrics_addr(), "api metrics listening");
        let shutdown = self.state.shutdown.clone();
        let metrics_port = tokio::spawn(crate::net::http_server::serve(
            self.metrics_listener,
            self.metrics_router,
            self.limits,
            // No tokens on the metrics port: its reserved slots serve the probes.
            crate::net::http_server::Clients::default(),
            shutdown.clone(),
        ));
        let relay = tokio::spawn(live::relay::relay(
            self.redis,
            self.queue_name,
            live::relay::Names::new(self.state.pool.clone()),
            self.state.live.clone(),
            shutdown.clone(),
        ));
        let stats = tokio::spawn(live::publish_queue_stats(self.state.clone()));
        let publisher = match self.publisher {
            Some(settings) => {
                let (database_url, pool, redis, token) = (
                    self.database_url,
                    self.state.pool.clone(),
                    self.state.redis.clone(),
                    shutdown.clone(),
                );
                tokio::spawn(async move {
                    let client = cloudwatch::client_from_env().await;
                    cloudwatch::run(database_url, pool, redis, client, settings, token).await
                })
            }
            None => {
                tracing::info!(
                    "CloudWatch publishing is off (set CLOUDWATCH_ENABLED=true to publish QueueWaitingJobs)"
                );
                tokio::spawn(async { Ok(()) })
            }
        };
        let clients = crate::net::http_server::Clients {
            trusted_proxies: self.state.trusted_proxies.clone(),
            authenticate: Some(auth::authenticator(self.state.tokens.clone())),
        };
        let served = crate::net::http_server::serve(
            self.listener,
            self.router,
            self.limits,
            clients,
            shutdown.clone(),
        )
        .await
        .context("serving the api");
        // The server does not wait for upgraded connections: without this the
        // process could exit before its WebSocket clients get their close frame.
        let clients = &self.state.live_clients;
        clients.close();
        if tokio::time::timeout(CLOSE_FRAMES_GRACE, clients.wait())
            .await
            .is_err()
        {
            tracing::info!(
                clients = clients.len(),
                "live clients not closed within {CLOSE_FRAMES_GRACE:?}; leaving them"
            );
        }
        let (_, _, published, metrics_served) = tokio::join!(relay, stats, publisher, metrics_port);
        if let Ok(Err(e)) = published {
            tracing::warn!(error = ?e, "CloudWatch publisher stopped with an error");
        }
        if let Ok(Err(e)) = metrics_served {
            tracing::warn!(error = %e, "the api's metrics port stopped with an error");
        }
        served
    }
}
