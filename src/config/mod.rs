//! Settings, from flags or the environment (see `.env.example`): what every
//! role uses (`CommonConfig`) and each role's own (`ApiConfig`,
//! `SchedulerConfig`, `WorkerConfig`), flattened into one command line. A
//! role is handed the common settings and its own, nothing else.

mod bounds;
mod browser;
mod clients;
mod datastores;

use std::time::Duration;

use clap::{Parser, ValueEnum};

pub use bounds::CrawlBoundsSettings;
pub use browser::{BrowserBackend, DevToolsUrl, RemoteBrowserSettings, RemoteProtocol};
pub use clients::ClientLimits;
pub use datastores::{DatabaseSettings, RedisSettings, SslMode};

use crate::{
    net::{
        http_server::Limits,
        target_guard::{AllowedTarget, TargetGuard},
    },
    ops::telemetry::LogFormat,
    store::sealing::SessionKey,
};

/// Which role(s) this process plays.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Process {
    /// REST + health endpoints.
    Api,
    /// Cron, dispatcher.
    Scheduler,
    /// Takes crawl jobs and drives headless Chrome.
    Worker,
    /// The three in one process (local use, demos, tests).
    All,
}

impl Process {
    pub fn runs_api(self) -> bool {
        matches!(self, Process::Api | Process::All)
    }
    pub fn runs_scheduler(self) -> bool {
        matches!(self, Process::Scheduler | Process::All)
    }
    pub fn runs_worker(self) -> bool {
        matches!(self, Process::Worker | Process::All)
    }
}

/// crawlfleet: keyword crawls of many sites, on a schedule, in headless Chrome.
#[derive(Debug, Clone, Parser)]
#[command(
    version,
    about,
    after_help = "Also: `crawlfleet healthcheck --url http://127.0.0.1:3000/health` exits 0 when healthy."
)]
pub struct Config {
    /// Role of this process.
    #[arg(long, env = "PROCESS", value_enum, default_value = "all")]
    pub process: Process,

    #[command(flatten)]
    pub common: CommonConfig,

    #[command(flatten)]
    pub api: ApiConfig,

    #[command(flatten)]
    pub scheduler: SchedulerConfig,

    #[command(flatten)]
    pub worker: WorkerConfig,

    /// Serve the bundled demo site on loopback and register a demo site and keyword
    /// when no site exists yet (`scripts/up`): runs crawlfleet-demo, found next to
    /// this executable or on PATH, until this process stops.
    #[arg(long, env = "DEMO", default_value_t = false)]
    pub demo: bool,

    /// Port of the demo site (with --demo).
    #[arg(long, env = "DEMO_PORT", default_value_t = 3080)]
    pub demo_port: u16,
}

/// Settings every role uses: where Postgres and Redis are, how to log, the
/// key of sealed secrets, the outbound-address guard, the bounds of an HTTP
/// server, and the defaults of a site's crawl.
#[derive(Debug, Clone, clap::Args)]
pub struct CommonConfig {
    #[command(flatten)]
    pub database: DatabaseSettings,

    /// The Postgres URL `database` resolves to (see [`Config::resolve`]).
    #[arg(skip)]
    pub database_url: String,

    /// Max Postgres connections of this process.
    #[arg(long, env = "DATABASE_MAX_CONNECTIONS", default_value_t = 10)]
    pub database_max_connections: u32,

    #[command(flatten)]
    pub redis: RedisSettings,

    /// The Redis URL `redis` resolves to (see [`Config::resolve`]).
    #[arg(skip)]
    pub redis_url: String,

    /// Name of the job queue in Redis; processes that share it share work.
    #[arg(long, env = "QUEUE_NAME", default_value = "crawlfleet")]
    pub queue_name: String,

    /// A request head must arrive within this many seconds of the previous
    /// response (or of the accept), so a kept-alive connection idle this long
    /// is closed whatever HTTP_IDLE_TIMEOUT_SECS says (every process's HTTP
    /// server). Behind a load balancer, set it above the balancer's idle timeout.
    #[arg(long, env = "HTTP_HEADER_TIMEOUT_SECS", default_value_t = 10)]
    pub http_header_timeout_secs: u64,

    /// HTTP connections served at once, RESERVED_CONNECTIONS of them kept for
    /// requests with a valid token; past it, only /health and /ready are
    /// answered (briefly) and other requests get 503.
    #[arg(long, env = "MAX_CONNECTIONS", default_value_t = 512)]
    pub max_connections: usize,

    #[command(flatten)]
    pub client_limits: ClientLimits,

    /// Log format: json or pretty.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "pretty")]
    pub log_format: LogFormat,

    /// Let crawls reach loopback, private, link-local and metadata addresses
    /// (tests and the demo on 127.0.0.1). Off: such targets are refused (SSRF guard).
    #[arg(long, env = "ALLOW_PRIVATE_TARGETS", default_value_t = false)]
    pub allow_private_targets: bool,

    /// Private targets allowed even so, comma-separated: `ip` or `ip:port`
    /// (an intranet site crawled on purpose). Everything else private stays refused.
    #[arg(long, env = "ALLOWED_PRIVATE_TARGETS", value_delimiter = ',')]
    pub allowed_private_targets: Vec<AllowedTarget>,

    /// Key sealing kept site sessions (cookies, local storage) in Postgres:
    /// 32 bytes as 64 hex characters or base64. Needed by sites with keep_session.
    #[arg(long, env = "SESSION_KEY", hide_env_values = true)]
    pub session_key: Option<SessionKey>,

    /// While SESSION_KEY rotates, the key it replaces: what it sealed still
    /// opens, and the api seals it again with SESSION_KEY at start. Remove it
    /// once every api has started with the new key.
    #[arg(long, env = "SESSION_KEY_PREVIOUS", hide_env_values = true)]
    pub session_key_previous: Option<SessionKey>,

    /// Default stuck timeout of a page request, for sites that set none.
    #[arg(long, env = "STUCK_TIMEOUT_SECS", default_value_t = 120)]
    pub stuck_timeout_secs: u32,

    /// Default attempts per run, for sites that set none.
    #[arg(long, env = "MAX_ATTEMPTS", default_value_t = 3)]
    pub max_attempts: u32,

    /// CloudWatch namespace of what the fleet puts: the api's scaling metric
    /// and figures, the scheduler's heartbeat.
    #[arg(long, env = "CLOUDWATCH_NAMESPACE", default_value = "CrawlerService")]
    pub cloudwatch_namespace: String,
}

/// The api's settings: where it listens, who may call it, its WebSocket
/// clients, the CloudWatch scaling metric and the rules of a keyword's schedule.
#[derive(Debug, Clone, clap::Args)]
pub struct ApiConfig {
    /// Address the api listens on.
    #[arg(long, env = "API_HOST", default_value = "0.0.0.0")]
    pub api_host: String,

    /// Port of the api (0 = any free port).
    #[arg(long, env = "API_PORT", default_value_t = 3000)]
    pub api_port: u16,

    /// Address of the api's /metrics and /health side port. Loopback by
    /// default: only this host scrapes it. In a container, 0.0.0.0 and a port
    /// published to the host's loopback (docker-compose.ec2.yaml).
    #[arg(long, env = "API_METRICS_HOST", default_value = "127.0.0.1")]
    pub api_metrics_host: String,

    /// Port of the api's /metrics (and /health), apart from the API's port:
    /// /metrics is never served to API clients (0 = any free port).
    #[arg(long, env = "API_METRICS_PORT", default_value_t = 3003)]
    pub api_metrics_port: u16,

    /// The api's /metrics reads its gauges from Postgres (queue counts, site
    /// health) at most once in this many seconds; scrapes in between get the
    /// values last read. 0: every scrape reads them.
    #[arg(long, env = "API_METRICS_REFRESH_SECS", default_value_t = 5)]
    pub api_metrics_refresh_secs: u64,

    /// Tokens allowed to read and write through the API (comma-separated).
    #[arg(
        long,
        env = "API_TOKENS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub api_tokens: Vec<String>,

    /// Tokens allowed only to read (GET) and subscribe (comma-separated).
    #[arg(
        long,
        env = "API_READ_TOKENS",
        hide_env_values = true,
        value_delimiter = ','
    )]
    pub api_read_tokens: Vec<String>,

    /// Serve the API without tokens. Refused unless set explicitly.
    #[arg(long, env = "AUTH_DISABLED", default_value_t = false)]
    pub auth_disabled: bool,

    /// Seconds between pings to WebSocket clients; one silent for two pings is dropped.
    #[arg(long, env = "WS_PING_INTERVAL_SECS", default_value_t = 30)]
    pub ws_ping_interval_secs: u64,

    /// A WebSocket client that takes longer than this to accept a frame is dropped.
    #[arg(long, env = "WS_SEND_TIMEOUT_SECS", default_value_t = 10)]
    pub ws_send_timeout_secs: u64,

    /// Proxies whose `X-Forwarded-For` is believed, as comma-separated CIDRs
    /// (behind the load balancer: its subnets). Empty: the connection's
    /// address is the client, whatever a request forwards.
    #[arg(long, env = "TRUSTED_PROXIES", value_delimiter = ',')]
    pub trusted_proxies: Vec<ipnet::IpNet>,

    /// WebSocket clients of this api process at once; past it, 503.
    #[arg(long, env = "MAX_WS_CLIENTS", default_value_t = 256)]
    pub max_ws_clients: usize,

    /// WebSocket clients of one token at once; past it, 503.
    #[arg(long, env = "MAX_WS_CLIENTS_PER_TOKEN", default_value_t = 32)]
    pub max_ws_clients_per_token: usize,

    /// Publish the scaling metric to CloudWatch (one api process publishes).
    #[arg(long, env = "CLOUDWATCH_ENABLED", default_value_t = false)]
    pub cloudwatch_enabled: bool,

    /// Seconds between two puts of the scaling metric. At most the step
    /// policy's alarm period (10 s, infra/autoscaling.tf): a high-resolution
    /// alarm that finds no datapoint in a period does not scale.
    #[arg(long, env = "METRIC_INTERVAL_SECS", default_value_t = 10)]
    pub metric_interval_secs: u64,

    /// Shortest time allowed between two fire times of a keyword's schedule
    /// (checked when a keyword is created or changed).
    #[arg(long, env = "MIN_SCHEDULE_INTERVAL_SECS", default_value_t = 60)]
    pub min_schedule_interval_secs: u32,

    /// How long `POST /api/sites/preview` waits for a worker to take the
    /// preview and crawl it; after that the answer is 503 and a worker that
    /// takes it later drops it.
    #[arg(long, env = "PREVIEW_TIMEOUT_SECS", default_value_t = 30)]
    pub preview_timeout_secs: u32,
    /// A paged listing (results, runs, an item's history, deliveries) stops
    /// adding rows once its answer holds this many bytes, and says so
    /// (`cut_at_bytes`); its `next_cursor` goes on from the last row sent.
    #[arg(long, env = "API_ANSWER_MAX_BYTES", default_value_t = 4 * 1024 * 1024)]
    pub api_answer_max_bytes: usize,
}

/// The scheduler's settings: its side port, the dispatcher's window, the
/// watchdog, retention and how often schedules are re-read.
#[derive(Debug, Clone, clap::Args)]
pub struct SchedulerConfig {
    /// Port of the scheduler's /health and /metrics.
    #[arg(long, env = "SCHEDULER_PORT", default_value_t = 3002)]
    pub scheduler_port: u16,

    /// Jobs in Redis at most (dispatched, not yet claimed). Default: 4 x the fleet's
    /// total concurrency, at least 10; never more than 1000.
    #[arg(long, env = "DISPATCH_WINDOW")]
    pub dispatch_window: Option<u32>,

    /// How often the dispatcher looks for backlog to move into Redis, in milliseconds.
    #[arg(long, env = "DISPATCH_INTERVAL_MS", default_value_t = 250)]
    pub dispatch_interval_ms: u64,

    /// A dispatched run no worker claimed within this time is dispatched again.
    #[arg(long, env = "DISPATCH_CLAIM_TIMEOUT_SECS", default_value_t = 300)]
    pub dispatch_claim_timeout_secs: u64,

    /// A held run whose heartbeat is older than this is taken back by the
    /// watchdog (its worker died: kill -9, OOM, Fargate task stopped).
    #[arg(long, env = "HEARTBEAT_TIMEOUT_SECS", default_value_t = 90)]
    pub heartbeat_timeout_secs: u64,

    /// How often the scheduler's watchdog looks for stuck and orphaned runs.
    #[arg(long, env = "WATCHDOG_INTERVAL_SECS", default_value_t = 30)]
    pub watchdog_interval_secs: u64,

    /// Ended runs and their results older than this many days are deleted
    /// (daily); 0 keeps everything.
    #[arg(long, env = "RETENTION_DAYS", default_value_t = 30)]
    pub retention_days: u64,

    /// How often the scheduler re-reads keywords so API changes take effect.
    #[arg(long, env = "SCHEDULE_SYNC_INTERVAL_MS", default_value_t = 1000)]
    pub schedule_sync_interval_ms: u64,

    /// A scheduler that becomes the leader fires the keywords whose fire it
    /// missed by at most this many seconds (the previous leader died or was
    /// being replaced); a fire that fails to queue is retried that long. A
    /// period is fired once either way.
    #[arg(long, env = "SCHEDULE_CATCH_UP_SECS", default_value_t = 300)]
    pub schedule_catch_up_secs: u64,
    /// Webhook deliveries the scheduler's leader sends at once.
    #[arg(long, env = "WEBHOOK_CONCURRENCY", default_value_t = 16)]
    pub webhook_concurrency: usize,

    /// Webhook deliveries in flight to one endpoint at most, so an endpoint
    /// that is slow or down cannot hold up the others.
    #[arg(long, env = "WEBHOOK_ENDPOINT_CONCURRENCY", default_value_t = 4)]
    pub webhook_endpoint_concurrency: usize,

    /// A webhook endpoint must answer within this many seconds, or the
    /// attempt failed (and is retried).
    #[arg(long, env = "WEBHOOK_TIMEOUT_SECS", default_value_t = 10)]
    pub webhook_timeout_secs: u64,

    /// Seconds before each retry of a failed webhook delivery (comma-separated):
    /// about a day in all. After the last, the delivery is failed, and an
    /// endpoint with no success in all that time is disabled.
    #[arg(
        long,
        env = "WEBHOOK_RETRY_SCHEDULE_SECS",
        value_delimiter = ',',
        default_value = "5,300,1800,7200,18000,36000,36000"
    )]
    pub webhook_retry_schedule_secs: Vec<u64>,

    /// Put the scheduler's heartbeat (`SchedulerHeartbeat`, 1) to CloudWatch
    /// from the leader, while its dispatch and cron loops turn: what the
    /// scheduler-heartbeat alarm watches.
    #[arg(long, env = "SCHEDULER_HEARTBEAT_ENABLED", default_value_t = false)]
    pub scheduler_heartbeat_enabled: bool,

    /// Seconds between two heartbeats (the alarm looks at minutes).
    #[arg(long, env = "SCHEDULER_HEARTBEAT_SECS", default_value_t = 60)]
    pub scheduler_heartbeat_secs: u64,
}

/// Whether Chrome runs with its sandbox (`CHROME_SANDBOX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SandboxMode {
    /// With the sandbox when Chrome can have it, else without, said once in the log.
    Auto,
    /// With the sandbox, or the browser does not start.
    Required,
    /// Without (`--no-sandbox`).
    Off,
}

/// The worker's settings: its side port, its concurrency, Chrome, draining,
/// Fargate scale-in protection, heartbeats, and the bounds of what a crawl stores.
#[derive(Debug, Clone, clap::Args)]
pub struct WorkerConfig {
    /// Port of the worker's /health and /metrics (in `all` mode the api's
    /// metrics port, API_METRICS_PORT, serves everything).
    #[arg(long, env = "METRICS_PORT", default_value_t = 3001)]
    pub metrics_port: u16,

    /// Crawls one worker process runs at once (one browser session each).
    #[arg(long, env = "WORKER_CONCURRENCY", default_value_t = 2)]
    pub worker_concurrency: usize,

    /// Plain HTTP and JSON crawls one worker process runs at once, besides its
    /// browser crawls (they need no browser, so they never wait for one).
    #[arg(long, env = "HTTP_CONCURRENCY", default_value_t = 32)]
    pub http_concurrency: usize,

    /// Chrome/Chromium binary the worker starts (one per worker process, each
    /// crawl in a context of its own) and drives over the DevTools pipe.
    #[arg(long, env = "CHROME_PATH", default_value = "chromium")]
    pub chrome_path: String,

    /// The user Chrome runs as: a name, a uid or uid:gid. Empty: the worker's
    /// own user, or `nobody` when the worker runs as root (Chrome refuses its
    /// sandbox as root, and must not read the worker's environment).
    #[arg(long, env = "CHROME_USER")]
    pub chrome_user: Option<String>,

    /// Chrome's sandbox: auto (with it where the platform allows, else
    /// without, said once in the log), required (Chrome does not start
    /// without it), off.
    #[arg(long, env = "CHROME_SANDBOX", value_enum, default_value_t = SandboxMode::Auto)]
    pub chrome_sandbox: SandboxMode,

    /// Where the browser slots live: local (a Chrome the worker starts),
    /// devtools (contexts of the remote browser at BROWSER_DEVTOOLS_URL) or
    /// webdriver (contexts of a Chrome session of BROWSER_WEBDRIVER_URL).
    #[arg(long, env = "BROWSER_BACKEND", value_enum, default_value_t = BrowserBackend::Local)]
    pub browser_backend: BrowserBackend,

    /// The remote browser of BROWSER_BACKEND=devtools: its WebSocket
    /// (`ws://host:port/devtools/browser/...`) or `http://host:port`, whose
    /// `/json/version` names it. A secret (it may hold a token): never logged.
    #[arg(long, env = "BROWSER_DEVTOOLS_URL", hide_env_values = true)]
    pub browser_devtools_url: Option<Secret>,

    /// The remote browser's own limit of contexts at once: the worker opens
    /// no more than the smaller of this and its browser slots.
    #[arg(long, env = "BROWSER_DEVTOOLS_SLOTS")]
    pub browser_devtools_slots: Option<usize>,

    /// The WebDriver endpoint of BROWSER_BACKEND=webdriver (Selenium Grid 4,
    /// chromedriver): `http://host:port`. A secret (it may hold
    /// credentials): never logged.
    #[arg(long, env = "BROWSER_WEBDRIVER_URL", hide_env_values = true)]
    pub browser_webdriver_url: Option<Secret>,

    /// The endpoint's limit of sessions at once: the worker opens no more
    /// than the smaller of this and its browser slots.
    #[arg(long, env = "BROWSER_WEBDRIVER_SLOTS")]
    pub browser_webdriver_slots: Option<usize>,

    /// The address the browser relays listen on. A remote browser must reach
    /// it; the relays serve only connections from the remote browser's address.
    #[arg(long, env = "BROWSER_RELAY_BIND", default_value = "127.0.0.1")]
    pub browser_relay_bind: String,

    /// On SIGTERM, how long in-flight crawls may run before their runs are handed
    /// back to the queue (keep under ECS's 30 s stopTimeout).
    #[arg(long, env = "DRAIN_TIMEOUT_SECS", default_value_t = 25)]
    pub drain_timeout_secs: u64,

    /// Set by ECS on Fargate: the worker turns on task scale-in protection while
    /// it holds runs, so scale-in removes idle tasks.
    #[arg(long, env = "ECS_AGENT_URI")]
    pub ecs_agent_uri: Option<String>,

    /// How long one scale-in protection lasts unless renewed (every third of
    /// it while runs are held): the longest a deployment or a scale-in waits
    /// for a busy task that has stopped renewing.
    #[arg(long, env = "ECS_PROTECTION_MINUTES", default_value_t = 10)]
    pub ecs_protection_minutes: u64,

    /// Set by ECS: where the worker reads its task definition and revision, the
    /// release it announces (a newer one running means a deployment replaces it).
    #[arg(long, env = "ECS_CONTAINER_METADATA_URI_V4")]
    pub ecs_metadata_uri: Option<String>,

    /// How often a worker writes the heartbeat of each run it holds.
    #[arg(long, env = "HEARTBEAT_INTERVAL_SECS", default_value_t = 15)]
    pub heartbeat_interval_secs: u64,

    /// How long a worker keeps an origin's robots.txt before asking for it
    /// again (one that could not be read: a minute at most; 0: before every page).
    #[arg(long, env = "ROBOTS_CACHE_SECS", default_value_t = 3600)]
    pub robots_cache_secs: u64,
    /// What one crawl may store.
    #[command(flatten)]
    pub bounds: CrawlBoundsSettings,

    /// Milliseconds one page's reading may take in http and json modes once
    /// it is parsed (matching the site's selectors, reading values), on a
    /// thread of its own. Past it the attempt fails as
    /// `extraction_over_budget`, without retries: the same selectors cost
    /// the same next time. Real pages take a few milliseconds.
    #[arg(long, env = "EXTRACT_BUDGET_MS", default_value_t = 2000)]
    pub extract_budget_ms: u64,
    /// Milliseconds learning selectors from examples (`POST /api/sites/learn`)
    /// may take on a worker once the page is loaded and parsed, on a thread
    /// of its own; past it the learning is refused as over its budget.
    #[arg(long, env = "LEARN_BUDGET_MS", default_value_t = 3000)]
    pub learn_budget_ms: u64,
    /// Seconds a site's proxy (or pool member) that drew a refusal is
    /// retired the first time; each retirement in a row doubles it, up to
    /// 15 minutes, and a page through it ends the run of retirements.
    #[arg(long, env = "PROXY_FIRST_BACKOFF_SECS", default_value_t = 30)]
    pub proxy_first_backoff_secs: u64,

    /// Saved pages: how many of a site's last healthy runs keep their list
    /// pages (compressed, with their items) for replays (0: none kept).
    #[arg(long, env = "SAVED_PAGES_RUNS", default_value_t = 3)]
    pub saved_pages_runs: u32,

    /// Saved pages: the compressed bytes a site keeps over all its saved
    /// runs; the oldest runs are pruned past it.
    #[arg(long, env = "SAVED_PAGES_MAX_BYTES", default_value_t = 8 * 1024 * 1024)]
    pub saved_pages_max_bytes: u64,
}

/// A setting's text that no `Debug` shows.
#[derive(Clone)]
pub struct Secret(pub String);

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "<redacted>")
    }
}

impl std::str::FromStr for Secret {
    type Err = std::convert::Infallible;
    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Ok(Secret(text.to_owned()))
    }
}

impl WorkerConfig {
    /// The remote browser the settings name (`None`: the local Chrome), or
    /// an error naming the setting that is wrong.
    pub fn remote_browser(&self) -> anyhow::Result<Option<RemoteBrowserSettings>> {
        let (url, slots) = match self.browser_backend {
            BrowserBackend::Webdriver => {
                (&self.browser_webdriver_url, self.browser_webdriver_slots)
            }
            _ => (&self.browser_devtools_url, self.browser_devtools_slots),
        };
        browser::remote_browser(
            self.browser_backend,
            url.as_ref().map(|s| s.0.as_str()),
            slots,
            &self.browser_relay_bind,
        )
    }
}

impl Config {
    /// Settings as parsed, with the datastores' URLs made from what was given.
    pub fn resolve(mut self) -> anyhow::Result<Config> {
        if self.process.runs_worker() {
            self.worker.remote_browser()?;
        }
        self.common.database_url = self.common.database.resolve()?;
        self.common.redis_url = self.common.redis.resolve()?;
        self.common.session_key = match (
            self.common.session_key.take(),
            self.common.session_key_previous.take(),
        ) {
            (Some(key), Some(previous)) => Some(key.replacing(&previous)),
            (None, Some(_)) => anyhow::bail!(
                "SESSION_KEY_PREVIOUS is set without SESSION_KEY: set the new key as SESSION_KEY"
            ),
            (key, None) => key,
        };
        Ok(self)
    }
}

impl CommonConfig {
    /// The guard of every outbound address, as this process is set up.
    pub fn target_guard(&self) -> TargetGuard {
        TargetGuard::new(self.allow_private_targets, &self.allowed_private_targets)
    }

    /// Bounds of this process's HTTP server.
    pub fn http_limits(&self) -> Limits {
        let max_connections = self.max_connections.max(1);
        let clients = &self.client_limits;
        Limits {
            header_timeout: Duration::from_secs(self.http_header_timeout_secs.max(1)),
            idle_timeout: Duration::from_secs(clients.http_idle_timeout_secs.max(1)),
            max_connections,
            reserved_connections: clients.reserved(max_connections),
            max_connections_per_client: clients.connections_per_client(max_connections),
            max_requests_per_client: clients.max_requests_per_client.max(1),
        }
    }
}

impl SchedulerConfig {
    pub fn dispatch_interval(&self) -> Duration {
        Duration::from_millis(self.dispatch_interval_ms)
    }
    pub fn dispatch_claim_timeout(&self) -> Duration {
        Duration::from_secs(self.dispatch_claim_timeout_secs)
    }
    pub fn schedule_sync_interval(&self) -> Duration {
        Duration::from_millis(self.schedule_sync_interval_ms)
    }
    pub fn schedule_catch_up(&self) -> Duration {
        Duration::from_secs(self.schedule_catch_up_secs)
    }
    pub fn webhook_timeout(&self) -> Duration {
        Duration::from_secs(self.webhook_timeout_secs.max(1))
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn a_session_key_is_32_bytes_of_hex_or_base64_and_never_printed() {
        let hex_key = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff";
        let key: SessionKey = hex_key.parse().unwrap();
        assert_eq!(
            key,
            SessionKey::from_bytes(hex::decode(hex_key).unwrap().try_into().unwrap())
        );
        let b64 = "ABEiM0RVZneImaq7zN3u/wARIjNEVWZ3iJmqu8zd7v8=";
        assert_eq!(b64.parse::<SessionKey>().unwrap(), key);
        assert!("short".parse::<SessionKey>().is_err());
        assert_eq!(format!("{key:?}"), "SessionKey(***)");
    }

    /// Like Svix's: eight attempts over about a day.
    #[test]
    fn webhook_retries_default_to_about_a_day() {
        let config = Config::try_parse_from([
            "crawlfleet",
            "--database-url=postgres://x",
            "--redis-url=redis://x",
        ])
        .unwrap();
        let schedule = &config.scheduler.webhook_retry_schedule_secs;
        assert_eq!(schedule.len(), 7);
        let hours = schedule.iter().sum::<u64>() as f64 / 3600.0;
        assert!((24.0..=28.0).contains(&hours), "{hours}");
    }

    #[test]
    fn every_setting_is_documented_in_env_example() {
        let example = include_str!("../../.env.example");
        for arg in Config::command().get_arguments() {
            let Some(env) = arg.get_env() else { continue };
            let name = env.to_str().unwrap();
            let documented = example
                .lines()
                .any(|l| l.trim_start_matches("# ").starts_with(&format!("{name}=")));
            assert!(documented, "{name} is missing from .env.example");
        }
    }
}
