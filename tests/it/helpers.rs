//! One fresh database, one Redis queue namespace and one fixture site per test,
//! and the crawlfleet roles started in-process (or as real processes).

use std::{
    path::PathBuf,
    process::Stdio,
    time::{Duration, Instant},
};

use crawlfleet::{
    api::{AppState, Application},
    config::{Config, Process},
    demo::site::DemoSite,
    ops::telemetry::LogFormat,
    queue, scheduler, store, worker,
};
use reqwest::StatusCode;
use serde_json::{Value, json};
use sqlx::{Connection, PgConnection, PgPool};
use tokio::{
    sync::{Semaphore, SemaphorePermit},
    task::JoinSet,
};
use tokio_util::sync::CancellationToken;
use uuid::Uuid;

/// The key sealing kept sessions in tests (64 hex characters).
pub const TEST_SESSION_KEY: &str =
    "5e55105e55105e55105e55105e55105e55105e55105e55105e55105e55105e55";

/// Browser tests running at once (2 cores: more only adds latency and flakes).
static BROWSER_SLOTS: Semaphore = Semaphore::const_new(2);

pub fn database_server() -> url::Url {
    let mut url: url::Url = std::env::var("DATABASE_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".into())
        .parse()
        .expect("DATABASE_URL is a URL");
    url.set_path("/postgres");
    url
}

pub fn redis_url() -> String {
    std::env::var("REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379".into())
}

/// A database of its own, migrated, dropped by [`TestDb::drop`].
pub struct TestDb {
    pub name: String,
    pub url: String,
    pub pool: PgPool,
}

impl TestDb {
    pub async fn new() -> TestDb {
        let server = database_server();
        let name = format!("cf_test_{}", Uuid::new_v4().simple());
        let mut admin = PgConnection::connect(server.as_str())
            .await
            .expect("Postgres reachable");
        sqlx::query(&format!("CREATE DATABASE {name}"))
            .execute(&mut admin)
            .await
            .expect("create test database");
        admin.close().await.ok();
        let mut url = server.clone();
        url.set_path(&format!("/{name}"));
        let pool = store::connect(url.as_str(), 10)
            .await
            .expect("connect test database");
        store::migrate(&pool).await.expect("migrate test database");
        TestDb {
            name,
            url: url.to_string(),
            pool,
        }
    }

    pub async fn drop(self) {
        self.pool.close().await;
        let mut admin = PgConnection::connect(database_server().as_str())
            .await
            .expect("Postgres reachable");
        sqlx::query(&format!(
            "DROP DATABASE IF EXISTS {} WITH (FORCE)",
            self.name
        ))
        .execute(&mut admin)
        .await
        .expect("drop test database");
    }
}

/// Config for roles under test: short intervals, loopback only.
pub fn test_config(database_url: &str, queue_name: &str) -> Config {
    Config {
        process: Process::All,
        database_url: database_url.to_owned(),
        database_max_connections: 10,
        redis_url: redis_url(),
        queue_name: queue_name.to_owned(),
        api_host: "127.0.0.1".into(),
        api_port: 0,
        scheduler_port: 0,
        metrics_port: 0,
        api_tokens: vec![],
        api_read_tokens: vec![],
        auth_disabled: true,
        cloudwatch_enabled: false,
        cloudwatch_namespace: "CrawlerService".into(),
        metric_interval_secs: 60,
        ws_ping_interval_secs: 30,
        ws_send_timeout_secs: 10,
        http_header_timeout_secs: 10,
        max_connections: 512,
        max_ws_clients: 256,
        max_ws_clients_per_token: 32,
        log_format: LogFormat::Pretty,
        worker_concurrency: 2,
        http_concurrency: 8,
        // The fixture site is on loopback.
        allow_private_targets: true,
        allowed_private_targets: vec![],
        session_key: Some(TEST_SESSION_KEY.parse().expect("a valid key")),
        chromedriver_path: std::env::var("CHROMEDRIVER_PATH")
            .unwrap_or_else(|_| "chromedriver".into()),
        webdriver_url: None,
        chrome_path: None,
        drain_timeout_secs: 10,
        ecs_agent_uri: None,
        dispatch_window: None,
        dispatch_interval_ms: 100,
        dispatch_claim_timeout_secs: 60,
        stuck_timeout_secs: 30,
        heartbeat_interval_secs: 15,
        heartbeat_timeout_secs: 90,
        watchdog_interval_secs: 30,
        max_attempts: 3,
        retention_days: 30,
        schedule_sync_interval_ms: 300,
        min_schedule_interval_secs: 60,
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

pub struct TestApp {
    pub base: String,
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
        Self::spawn_inner(roles, roles.worker, tune).await
    }

    /// Like [`Self::spawn_with`], for tests whose sites need no browser: they
    /// do not wait for one of the browser slots.
    pub async fn spawn_without_browsers(roles: Roles, tune: impl FnOnce(&mut Config)) -> TestApp {
        Self::spawn_inner(roles, false, tune).await
    }

    async fn spawn_inner(
        roles: Roles,
        uses_browsers: bool,
        tune: impl FnOnce(&mut Config),
    ) -> TestApp {
        let _ = tracing_subscriber::fmt()
            .with_env_filter(std::env::var("TEST_LOG").unwrap_or_else(|_| "warn".into()))
            .with_test_writer()
            .try_init();
        let browsers = if uses_browsers {
            Some(BROWSER_SLOTS.acquire().await.expect("slots never close"))
        } else {
            None
        };
        let db = TestDb::new().await;
        let mut config = test_config(&db.url, &format!("test-{}", Uuid::new_v4().simple()));
        tune(&mut config);
        let site = DemoSite::start(0).await.expect("fixture site starts");
        let redis = queue::connect(&config.redis_url)
            .await
            .expect("Redis reachable");
        let shutdown = CancellationToken::new();
        let mut set = JoinSet::new();
        // Roles reach Postgres through the config's URL (a test may route it
        // through a proxy); the test itself keeps a direct pool.
        let roles_pool = if config.database_url == db.url {
            db.pool.clone()
        } else {
            store::connect(&config.database_url, 10)
                .await
                .expect("roles reach Postgres")
        };
        let state =
            AppState::from_config(&config, roles_pool.clone(), redis.clone(), shutdown.clone())
                .expect("api settings are valid");
        let app = Application::build(&config, 0, state)
            .await
            .expect("api binds");
        let base = format!("http://{}", app.local_addr());
        set.spawn(app.run_until_stopped());
        if roles.scheduler {
            set.spawn(scheduler::run(
                config.clone(),
                roles_pool.clone(),
                redis.clone(),
                shutdown.clone(),
            ));
        }
        if roles.worker {
            set.spawn(worker::run(
                config.clone(),
                roles_pool.clone(),
                redis.clone(),
                shutdown.clone(),
            ));
        }
        TestApp {
            base,
            http: reqwest::Client::new(),
            db,
            config,
            site,
            shutdown,
            roles: Some(set),
            _browsers: browsers,
        }
    }

    pub fn pool(&self) -> &PgPool {
        &self.db.pool
    }

    /// The token the test's own requests carry: the first write token when
    /// the config turns auth on.
    pub fn token(&self) -> Option<&str> {
        (!self.config.auth_disabled)
            .then(|| self.config.api_tokens.first().map(String::as_str))
            .flatten()
    }

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

    pub async fn post(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(reqwest::Method::POST, path, Some(body)).await
    }

    pub async fn put(&self, path: &str, body: Value) -> (StatusCode, Value) {
        self.request(reqwest::Method::PUT, path, Some(body)).await
    }

    pub async fn delete(&self, path: &str) -> (StatusCode, Value) {
        self.request(reqwest::Method::DELETE, path, None).await
    }

    /// A site searching the fixture shop at `path` (e.g. "/search").
    pub fn site_body(&self, name: &str, path: &str) -> Value {
        json!({
            "name": name,
            "search_url": format!("{}{path}?q={{keyword}}&page={{page}}", self.site.base_url()),
            "item_selector": "li.product",
            "fields": {
                "title": {"selector": "a.title"},
                "link": {"selector": "a.title", "attr": "href"},
                "price": {"selector": ".price"},
            },
            "max_pages": 5,
            "render": "browser",
        })
    }

    pub async fn create_site(&self, body: Value) -> i64 {
        let (status, site) = self.post("/api/sites", body).await;
        assert_eq!(status, StatusCode::CREATED, "{site}");
        site["id"].as_i64().unwrap()
    }

    pub async fn create_keyword(&self, keyword: &str, site_ids: &[i64], schedule: &str) -> i64 {
        let (status, kw) = self
            .post(
                "/api/keywords",
                json!({"keyword": keyword, "site_ids": site_ids, "schedule": schedule, "enabled": true}),
            )
            .await;
        assert_eq!(status, StatusCode::CREATED, "{kw}");
        kw["id"].as_i64().unwrap()
    }

    /// A one-page site at `path_and_query` on the fixture shop (`{keyword}` in
    /// it), with `extra` settings over the defaults.
    pub async fn one_page_site(&self, name: &str, path_and_query: &str, extra: Value) -> i64 {
        let mut body = self.site_body(name, "/");
        body["search_url"] = json!(format!("{}{path_and_query}", self.site.base_url()));
        for (key, value) in extra.as_object().expect("settings object") {
            body[key] = value.clone();
        }
        self.create_site(body).await
    }

    /// A new keyword on one site, crawled now; returns its run.
    pub async fn crawl_once(&self, keyword: &str, site: i64) -> i64 {
        let kw = self.create_keyword(keyword, &[site], "0 0 0 1 1 *").await;
        self.crawl(kw).await[0]
    }

    /// A new keyword on one site, crawled until its run ends; returns the run.
    pub async fn crawl_to_end(&self, keyword: &str, site: i64, limit: Duration) -> Value {
        let run = self.crawl_once(keyword, site).await;
        self.wait_for_run(run, &["completed", "failed"], limit)
            .await
    }

    /// Asks for a crawl of a keyword; returns the ids of the runs queued.
    pub async fn crawl(&self, keyword_id: i64) -> Vec<i64> {
        let (status, body) = self
            .post(&format!("/api/keywords/{keyword_id}/crawl"), json!({}))
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{body}");
        body["queued"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["id"].as_i64().unwrap())
            .collect()
    }

    /// Waits until the run reaches one of `states`; panics after `limit`.
    pub async fn wait_for_run(&self, run_id: i64, states: &[&str], limit: Duration) -> Value {
        let start = Instant::now();
        loop {
            let (status, run) = self.get(&format!("/api/runs/{run_id}")).await;
            assert_eq!(status, StatusCode::OK, "{run}");
            if states.contains(&run["state"].as_str().unwrap()) {
                return run;
            }
            assert!(
                start.elapsed() < limit,
                "run {run_id} did not reach {states:?} within {limit:?}: {run}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Every result of a run, following the cursor.
    pub async fn results_of_run(&self, run_id: i64) -> Vec<Value> {
        let mut all = Vec::new();
        let mut cursor = String::new();
        loop {
            let (status, page) = self
                .get(&format!("/api/results?run_id={run_id}&limit=7{cursor}"))
                .await;
            assert_eq!(status, StatusCode::OK, "{page}");
            all.extend(page["items"].as_array().unwrap().iter().cloned());
            match page["next_cursor"].as_str() {
                Some(next) => cursor = format!("&cursor={next}"),
                None => return all,
            }
        }
    }

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
        clear_queue(&self.config.queue_name).await;
        self.db.drop().await;
    }
}

/// Removes every Redis key of a test's queue.
pub async fn clear_queue(queue_name: &str) {
    let mut redis = queue::connect(&redis_url()).await.expect("Redis reachable");
    let _: () = redis::cmd("ZREM")
        .arg("core:apalis:queues:list")
        .arg(format!("{queue_name}:workers"))
        .query_async(&mut redis)
        .await
        .expect("ZREM");
    let keys: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{queue_name}:*"))
        .query_async(&mut redis)
        .await
        .expect("KEYS");
    if !keys.is_empty() {
        let _: () = redis::cmd("DEL")
            .arg(keys)
            .query_async(&mut redis)
            .await
            .expect("DEL");
    }
}

/// A crawlfleet process (the real binary), killed on drop if still running.
pub struct RoleProcess {
    pub child: tokio::process::Child,
    pub log: PathBuf,
    /// The pid, still known after the process was reaped.
    pub pid_at_start: i32,
}

impl RoleProcess {
    pub fn spawn(process: &str, config: &Config, extra_env: &[(&str, String)]) -> RoleProcess {
        let dir = std::env::temp_dir().join("cf-test-logs");
        std::fs::create_dir_all(&dir).unwrap();
        let log = dir.join(format!("{process}-{}.log", Uuid::new_v4().simple()));
        let out = std::fs::File::create(&log).unwrap();
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_crawlfleet"));
        cmd.arg(format!("--process={process}"))
            .env("DATABASE_URL", &config.database_url)
            .env("REDIS_URL", &config.redis_url)
            .env("QUEUE_NAME", &config.queue_name)
            .env("API_HOST", "127.0.0.1")
            .env("API_PORT", "0")
            .env("SCHEDULER_PORT", config.scheduler_port.to_string())
            .env("METRICS_PORT", config.metrics_port.to_string())
            .env("AUTH_DISABLED", config.auth_disabled.to_string())
            .env("API_TOKENS", config.api_tokens.join(","))
            .env("API_READ_TOKENS", config.api_read_tokens.join(","))
            .env("WORKER_CONCURRENCY", config.worker_concurrency.to_string())
            .env("HTTP_CONCURRENCY", config.http_concurrency.to_string())
            .env(
                "ALLOW_PRIVATE_TARGETS",
                config.allow_private_targets.to_string(),
            )
            .env("SESSION_KEY", TEST_SESSION_KEY)
            .env(
                "DISPATCH_INTERVAL_MS",
                config.dispatch_interval_ms.to_string(),
            )
            .env(
                "SCHEDULE_SYNC_INTERVAL_MS",
                config.schedule_sync_interval_ms.to_string(),
            )
            .env(
                "HEARTBEAT_INTERVAL_SECS",
                config.heartbeat_interval_secs.to_string(),
            )
            .env(
                "HEARTBEAT_TIMEOUT_SECS",
                config.heartbeat_timeout_secs.to_string(),
            )
            .env(
                "WATCHDOG_INTERVAL_SECS",
                config.watchdog_interval_secs.to_string(),
            )
            .env("DRAIN_TIMEOUT_SECS", config.drain_timeout_secs.to_string())
            .env("LOG_FORMAT", "pretty")
            // Plain text: tests read the log.
            .env("NO_COLOR", "1")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .kill_on_drop(true);
        for (key, value) in extra_env {
            cmd.env(key, value);
        }
        let child = cmd.spawn().expect("crawlfleet binary starts");
        RoleProcess {
            pid_at_start: child.id().expect("just started") as i32,
            child,
            log,
        }
    }

    pub fn pid(&self) -> i32 {
        self.child.id().expect("running") as i32
    }

    /// The first line of the log containing `needle`, waiting up to `limit`.
    pub async fn log_line(&self, needle: &str, limit: Duration) -> String {
        let log = self.log.clone();
        eventually(limit, &format!("{needle:?} in {}", log.display()), || {
            let log = log.clone();
            async move {
                std::fs::read_to_string(&log)
                    .unwrap_or_default()
                    .lines()
                    .find(|line| line.contains(needle))
                    .map(str::to_owned)
            }
        })
        .await
    }

    /// The address the process logged with `message` (`api listening`,
    /// `health and metrics listening`): ports are picked by the process itself
    /// (port 0), so none can be taken by another test in between.
    pub async fn listening_on(&self, message: &str) -> std::net::SocketAddr {
        // A process logs this within a second of starting (it connects to
        // Postgres and Redis first): 30 s is ample on a loaded machine.
        let line = self.log_line(message, Duration::from_secs(30)).await;
        line.split_whitespace()
            .find_map(|word| word.strip_prefix("addr="))
            .and_then(|addr| addr.parse().ok())
            .unwrap_or_else(|| panic!("no addr= in {line:?}"))
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        assert_eq!(unsafe { libc::kill(self.pid(), signal) }, 0);
    }

    /// Sends SIGTERM and waits for the exit code.
    ///
    /// Callers allow a worker 30 s: an idle one exits in a second or two, and
    /// even a crawl in flight is bounded by the 10 s drain of [`test_config`]
    /// plus the browsers' bounded close. An api or scheduler stops within 2 s
    /// (the api's grace for WebSocket close frames); callers allow 10-15 s.
    pub async fn terminate(mut self, limit: Duration) -> i32 {
        self.signal(libc::SIGTERM);
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "process did not stop within {limit:?}; log {}",
                    self.log.display()
                )
            })
            .unwrap();
        status.code().unwrap_or(-1)
    }

    /// SIGKILL and reap.
    pub async fn kill(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

/// A test that fails midway still stops its processes the clean way, so a
/// worker drains and closes its browsers instead of leaving them running.
impl Drop for RoleProcess {
    fn drop(&mut self) {
        if !matches!(self.child.try_wait(), Ok(None)) {
            return;
        }
        let pid = self.pid_at_start;
        // SAFETY: kill(2) on our own child (SIGCONT first: it may be frozen).
        unsafe {
            libc::kill(pid, libc::SIGCONT);
            libc::kill(pid, libc::SIGTERM);
        }
        for _ in 0..150 {
            if !matches!(self.child.try_wait(), Ok(None)) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.child.start_kill();
    }
}

/// Browser slots for tests that start worker processes.
pub async fn browser_slots(n: u32) -> SemaphorePermit<'static> {
    BROWSER_SLOTS
        .acquire_many(n.min(2))
        .await
        .expect("slots never close")
}

/// Polls `check` every 100 ms until it returns `Some`, or panics after `limit`.
pub async fn eventually<T, F, Fut>(limit: Duration, what: &str, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Claims a run by hand as a worker would after its message arrived: the
/// dispatcher's mark first (only a dispatched run can be claimed).
pub async fn dispatch_and_claim(
    pool: &PgPool,
    run_id: i64,
    attempt: i32,
    worker: &str,
) -> Option<store::runs::ClaimedRun> {
    sqlx::query("UPDATE crawl_runs SET dispatched_at = now() WHERE id = $1 AND state = 'queued'")
        .bind(run_id)
        .execute(pool)
        .await
        .unwrap();
    store::runs::claim(pool, run_id, attempt, worker)
        .await
        .unwrap()
}

/// Runs of a database by state.
pub async fn count_states(pool: &PgPool) -> std::collections::HashMap<String, i64> {
    store::runs::count_by_state(pool)
        .await
        .unwrap()
        .into_iter()
        .map(|(state, n)| (state.as_str().to_owned(), n))
        .collect()
}

/// A Redis server of a test's own, for tests that stop it.
pub struct OwnRedis {
    child: tokio::process::Child,
    port: u16,
}

impl OwnRedis {
    pub async fn start() -> OwnRedis {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        Self::start_on(port).await
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    pub async fn start_on(port: u16) -> OwnRedis {
        let child = tokio::process::Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .stdout(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .expect("redis-server installed");
        let redis = OwnRedis { child, port };
        // redis-server listens within milliseconds of starting.
        eventually(Duration::from_secs(10), "own redis listens", || async {
            tokio::net::TcpStream::connect(("127.0.0.1", port))
                .await
                .ok()
                .map(|_| ())
        })
        .await;
        redis
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    pub async fn stop(mut self) {
        self.child.start_kill().unwrap();
        self.child.wait().await.unwrap();
    }
}

pub use crawlfleet::worker::browser::processes::descendants;

/// Kills what a SIGKILLed worker left: its chromedriver, its browsers and
/// their profile folders.
pub fn clean_up_after_killed_worker(left: &[i32], worker_pid: i32) {
    for &pid in left {
        // SAFETY: kill(2); the process may already be gone.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
    let marker = format!("-{worker_pid}-");
    for entry in std::fs::read_dir(std::env::temp_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("crawlfleet-") && name.contains(&marker) {
            crawlfleet::worker::browser::processes::kill_chrome_under(&entry.path());
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// Browser processes and profile folders that a worker process (by pid) left.
pub fn leftovers_of_worker(worker_pid: i32) -> (Vec<i32>, Vec<PathBuf>) {
    let marker = format!("-{worker_pid}-");
    let root = std::env::temp_dir().join("crawlfleet-");
    let needle = format!("--user-data-dir={}", root.display());
    let mut pids = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let cmdline = String::from_utf8_lossy(&cmdline);
        if cmdline
            .split('\0')
            .any(|arg| arg.starts_with(&needle) && arg.contains(&marker))
        {
            pids.push(pid);
        }
    }
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            let name = p.file_name().unwrap().to_string_lossy();
            name.starts_with("crawlfleet-") && name.contains(&marker)
        })
        .collect();
    // What is inside says who left it (a Chrome profile, chromedriver's temp...).
    let mut inside = Vec::new();
    let mut todo = dirs.clone();
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                todo.push(entry.path());
            }
            inside.push(entry.path());
        }
    }
    inside.sort();
    dirs.extend(inside.into_iter().take(40));
    (pids, dirs)
}

/// The pid of the chromedriver a worker process started.
pub fn chromedriver_of(worker_pid: i32) -> Option<i32> {
    descendants(worker_pid).into_iter().find(|pid| {
        std::fs::read_to_string(format!("/proc/{pid}/comm"))
            .is_ok_and(|c| c.trim() == "chromedriver")
    })
}

/// A TCP proxy in front of Postgres that can cut every connection and refuse
/// new ones for a while: a database outage, for real, without stopping the
/// server other tests share.
pub struct CuttableProxy {
    port: u16,
    up: std::sync::Arc<std::sync::atomic::AtomicBool>,
    cut: tokio::sync::watch::Sender<u64>,
    task: tokio::task::JoinHandle<()>,
}

impl CuttableProxy {
    pub async fn start(target: (String, u16)) -> CuttableProxy {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let up = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (cut, cuts) = tokio::sync::watch::channel(0u64);
        let task = tokio::spawn({
            let up = up.clone();
            async move {
                loop {
                    let Ok((mut client, _)) = listener.accept().await else {
                        return;
                    };
                    if !up.load(std::sync::atomic::Ordering::SeqCst) {
                        continue; // dropped: connection refused in effect
                    }
                    let target = target.clone();
                    let mut cuts = cuts.clone();
                    tokio::spawn(async move {
                        let Ok(mut server) = tokio::net::TcpStream::connect(target).await else {
                            return;
                        };
                        cuts.borrow_and_update();
                        tokio::select! {
                            _ = tokio::io::copy_bidirectional(&mut client, &mut server) => {}
                            _ = cuts.changed() => {}
                        }
                    });
                }
            }
        });
        CuttableProxy {
            port,
            up,
            cut,
            task,
        }
    }

    /// `url` with its host and port replaced by the proxy's.
    pub fn route(&self, url: &str) -> String {
        let mut url: url::Url = url.parse().unwrap();
        url.set_host(Some("127.0.0.1")).unwrap();
        url.set_port(Some(self.port)).unwrap();
        url.to_string()
    }

    /// Cuts every open connection and refuses new ones until [`Self::restore`].
    pub fn cut(&self) {
        self.up.store(false, std::sync::atomic::Ordering::SeqCst);
        self.cut.send_modify(|n| *n += 1);
    }

    pub fn restore(&self) {
        self.up.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl Drop for CuttableProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}
