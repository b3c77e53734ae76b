//! The test app: the api, and the roles a test asks for, running in this
//! process on a database, a queue namespace and a fixture site of the test's
//! own; requests to it by method. What a test does with sites and keywords is
//! in `sites`, with crawls and their runs in `runs`.

mod runs;
mod sites;

use crawlfleet::{
    api::{AppState, Application},
    config::{ApiConfig, CommonConfig, Config, Process, SchedulerConfig, WorkerConfig},
    ops::telemetry::LogFormat,
    queue, scheduler, store, worker,
};
use crawlfleet_demo::site::DemoSite;
use reqwest::StatusCode;
use serde_json::Value;
use sqlx::PgPool;
use tokio::{sync::SemaphorePermit, task::JoinSet};
use tokio_util::sync::CancellationToken;

use super::{Backend, TestDb, browser_slots, clear_queue, redis_url, test_queue_name};

pub use sites::{ON_DEMAND, heavy_page_fields};

/// The key sealing kept sessions in tests (64 hex characters).
pub const TEST_SESSION_KEY: &str =
    "5e55105e55105e55105e55105e55105e55105e55105e55105e55105e55105e55";

/// Config for roles under test: short intervals, loopback only.
pub fn test_config(database_url: &str, queue_name: &str) -> Config {
    Config {
        process: Process::All,
        common: CommonConfig {
            database: Default::default(),
            database_url: database_url.to_owned(),
            redis: Default::default(),
            database_max_connections: 10,
            redis_url: redis_url(),
            queue_name: queue_name.to_owned(),
            log_format: LogFormat::Pretty,
            session_key: Some(TEST_SESSION_KEY.parse().expect("a valid key")),
            session_key_previous: None,
            // The fixture site is on loopback.
            allow_private_targets: true,
            allowed_private_targets: vec![],
            http_header_timeout_secs: 10,
            max_connections: 512,
            client_limits: Default::default(),
            stuck_timeout_secs: 30,
            max_attempts: 3,
            cloudwatch_namespace: "CrawlerService".into(),
        },
        api: ApiConfig {
            api_host: "127.0.0.1".into(),
            api_port: 0,
            api_metrics_host: "127.0.0.1".into(),
            api_metrics_port: 0,
            // Tests read the gauges right after what changes them.
            api_metrics_refresh_secs: 0,
            api_tokens: vec![],
            api_read_tokens: vec![],
            auth_disabled: true,
            ws_ping_interval_secs: 30,
            ws_send_timeout_secs: 10,
            max_ws_clients: 256,
            max_ws_clients_per_token: 32,
            trusted_proxies: Vec::new(),
            cloudwatch_enabled: false,
            metric_interval_secs: 10,
            min_schedule_interval_secs: 60,
            preview_timeout_secs: 60,
            api_answer_max_bytes: 4 * 1024 * 1024,
        },
        scheduler: SchedulerConfig {
            scheduler_port: 0,
            dispatch_window: None,
            dispatch_interval_ms: 100,
            dispatch_claim_timeout_secs: 60,
            heartbeat_timeout_secs: 90,
            watchdog_interval_secs: 30,
            retention_days: 30,
            schedule_sync_interval_ms: 300,
            schedule_catch_up_secs: 300,
            webhook_concurrency: 16,
            webhook_endpoint_concurrency: 4,
            webhook_timeout_secs: 5,
            webhook_retry_schedule_secs: vec![1, 1, 2, 2, 3],
            scheduler_heartbeat_enabled: false,
            scheduler_heartbeat_secs: 60,
        },
        worker: WorkerConfig {
            metrics_port: 0,
            worker_concurrency: 2,
            http_concurrency: 8,
            chrome_path: std::env::var("CHROME_PATH").unwrap_or_else(|_| "chromium".into()),
            chrome_user: None,
            chrome_sandbox: crawlfleet::config::SandboxMode::Auto,
            browser_backend: crawlfleet::config::BrowserBackend::Local,
            browser_devtools_url: None,
            browser_devtools_slots: None,
            browser_webdriver_url: None,
            browser_webdriver_slots: None,
            browser_relay_bind: "127.0.0.1".to_owned(),
            drain_timeout_secs: 10,
            ecs_agent_uri: None,
            ecs_protection_minutes: 10,
            ecs_metadata_uri: None,
            heartbeat_interval_secs: 15,
            robots_cache_secs: 3600,
            bounds: Default::default(),
            extract_budget_ms: 2000,
            learn_budget_ms: 3000,
            proxy_first_backoff_secs: 30,
            saved_pages_runs: 3,
            saved_pages_max_bytes: 8 * 1024 * 1024,
        },
        demo: false,
        demo_port: 0,
    }
}

/// Which roles a test runs in-process besides the api.
#[derive(Debug, Clone, Copy, Default)]
pub struct Roles {
    pub scheduler: bool,
    pub worker: bool,
}

impl Roles {
    /// Scheduler and worker beside the api: crawls run end to end.
    pub fn fleet() -> Roles {
        Roles {
            scheduler: true,
            worker: true,
        }
    }

    /// Scheduler beside the api; the test brings its own workers (processes).
    pub fn scheduler_only() -> Roles {
        Roles {
            scheduler: true,
            worker: false,
        }
    }
}

/// The api on port 0 and the roles a test asked for, in-process, with the
/// test's database, config and fixture site.
pub struct TestApp {
    pub base: String,
    /// The api's metrics port: `{metrics_base}/metrics`.
    pub metrics_base: String,
    pub http: reqwest::Client,
    pub db: TestDb,
    pub config: Config,
    pub site: DemoSite,
    shutdown: CancellationToken,
    roles: Option<JoinSet<anyhow::Result<()>>>,
    _browsers: Option<SemaphorePermit<'static>>,
}

impl TestApp {
    /// The api alone.
    pub async fn spawn() -> TestApp {
        Self::spawn_with(Roles::default(), |_| {}).await
    }

    /// The api and the chosen roles, with `tune` applied to their config.
    pub async fn spawn_with(roles: Roles, tune: impl FnOnce(&mut Config)) -> TestApp {
        Self::spawn_inner(roles, roles.worker as u32, tune).await
    }

    /// Like [`Self::spawn_with`], its workers (in-process, or processes
    /// started on its config) opening their contexts in `backend`'s browser.
    pub async fn spawn_on(
        backend: &Backend,
        roles: Roles,
        tune: impl FnOnce(&mut Config),
    ) -> TestApp {
        Self::spawn_with(roles, |config| {
            backend.apply(config);
            tune(config);
        })
        .await
    }

    /// Like [`Self::spawn_with`], with a browser slot more for the test's
    /// own Chrome (the console's): taken at once with the worker's, so two
    /// such tests never hold one each and wait for the other's.
    pub async fn spawn_with_console(roles: Roles, tune: impl FnOnce(&mut Config)) -> TestApp {
        Self::spawn_inner(roles, 1 + roles.worker as u32, tune).await
    }

    /// Like [`Self::spawn_with`], for tests whose sites need no browser: they
    /// do not wait for one of the browser slots.
    pub async fn spawn_without_browsers(roles: Roles, tune: impl FnOnce(&mut Config)) -> TestApp {
        Self::spawn_inner(roles, 0, tune).await
    }

    async fn spawn_inner(roles: Roles, browsers: u32, tune: impl FnOnce(&mut Config)) -> TestApp {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(std::env::var("TEST_LOG").unwrap_or_else(|_| "warn".into()))
            .with_test_writer()
            .try_init();
        let browsers = match browsers {
            0 => None,
            n => Some(browser_slots(n).await),
        };
        let db = TestDb::new().await;
        let mut config = test_config(&db.url, &test_queue_name());
        tune(&mut config);
        let site = DemoSite::start(0).await.expect("fixture site starts");
        let redis = queue::connect(&config.common.redis_url)
            .await
            .expect("Redis reachable");
        let shutdown = CancellationToken::new();
        let mut set = JoinSet::new();
        // Roles reach Postgres through the config's URL (a test may route it
        // through a proxy); the test itself keeps a direct pool.
        let roles_pool = if config.common.database_url == db.url {
            db.pool.clone()
        } else {
            store::connect(&config.common.database_url, 10)
                .await
                .expect("roles reach Postgres")
        };
        let state = AppState::from_config(
            &config.common,
            &config.api,
            roles_pool.clone(),
            redis.clone(),
            shutdown.clone(),
        )
        .expect("api settings are valid");
        let app = Application::build(&config.common, &config.api, 0, state)
            .await
            .expect("api binds");
        let base = format!("http://{}", app.local_addr());
        let metrics_base = format!("http://{}", app.metrics_addr());
        set.spawn(app.run_until_stopped());
        if roles.scheduler {
            set.spawn(scheduler::run(
                config.common.clone(),
                config.scheduler.clone(),
                roles_pool.clone(),
                redis.clone(),
                shutdown.clone(),
            ));
        }
        if roles.worker {
            set.spawn(worker::run(
                config.common.clone(),
                config.worker.clone(),
                roles_pool.clone(),
                redis.clone(),
                shutdown.clone(),
            ));
        }
        TestApp {
            base,
            metrics_base,
            http: reqwest::Client::new(),
            db,
            config,
            site,
            shutdown,
            roles: Some(set),
            _browsers: browsers,
        }
    }

    /// The test's own pool on its database (not the one the roles use).
    pub fn pool(&self) -> &PgPool {
        &self.db.pool
    }

    /// The token the test's own requests carry: the first write token when
    /// the config turns auth on.
    pub fn token(&self) -> Option<&str> {
        (!self.config.api.auth_disabled)
            .then(|| self.config.api.api_tokens.first().map(String::as_str))
            .flatten()
    }

    /// A request to the api, with the test's token if auth is on; the body
    /// as JSON, or as a string when it is not JSON, `null` when empty.
    pub async fn request(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut req = self.http.request(method, format!("{}{path}", self.base));
        if let Some(token) = self.token() {
            req = req.bearer_auth(token);
        }
        if let Some(body) = body {
            req = req.json(&body);
        }
        let resp = req.send().await.expect("api answers");
        let status = resp.status();
        let text = resp.text().await.expect("body");
        let value = if text.is_empty() {
            Value::Null
        } else {
            serde_json::from_str(&text).unwrap_or(Value::String(text))
        };
        (status, value)
    }

    pub async fn get(&self, path: &str) -> (StatusCode, Value) {
        self.request(reqwest::Method::GET, path, None).await
    }

    /// A GET of `path` with `token` (whatever the test's own is); the JSON body.
    pub async fn get_as(&self, path: &str, token: &str) -> Value {
        self.http
            .get(format!("{}{path}", self.base))
            .bearer_auth(token)
            .send()
            .await
            .expect("api answers")
            .json()
            .await
            .expect("a JSON body")
    }

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(reqwest::Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.request(reqwest::Method::DELETE, path, None).await
    }

    /// Stops the roles and drops what the test made (see [`Self::finish`]).
    pub async fn stop(mut self) {
        self.stop_roles().await;
        self.finish().await;
    }

    /// Stops the api and the in-process roles (the database stays for checks).
    pub async fn stop_roles(&mut self) {
        self.shutdown.cancel();
        if let Some(mut roles) = self.roles.take() {
            while let Some(ended) = roles.join_next().await {
                ended
                    .expect("role did not panic")
                    .expect("role stopped cleanly");
            }
        }
    }

    /// Drops what the test made: fixture site, queue keys, database.
    pub async fn finish(mut self) {
        self.stop_roles().await;
        self.site.stop().await;
        clear_queue(&self.config.common.queue_name).await;
        self.db.drop().await;
    }
}
