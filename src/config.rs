//! Settings of every role, from flags or the environment (see `.env.example`).

use std::time::Duration;

use clap::{Parser, ValueEnum};

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

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// One JSON object per line (containers).
    Json,
    /// Human-readable (terminals).
    Pretty,
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

    /// Postgres connection URL: the truth and the backlog.
    #[arg(long, env = "DATABASE_URL", hide_env_values = true)]
    pub database_url: String,

    /// Max Postgres connections of this process.
    #[arg(long, env = "DATABASE_MAX_CONNECTIONS", default_value_t = 10)]
    pub database_max_connections: u32,

    /// Redis connection URL (`redis://:password@host:port`): job transport.
    #[arg(long, env = "REDIS_URL", hide_env_values = true)]
    pub redis_url: String,

    /// Name of the job queue in Redis; processes that share it share work.
    #[arg(long, env = "QUEUE_NAME", default_value = "crawlfleet")]
    pub queue_name: String,

    /// Address the api listens on.
    #[arg(long, env = "API_HOST", default_value = "0.0.0.0")]
    pub api_host: String,

    /// Port of the api (0 = any free port).
    #[arg(long, env = "API_PORT", default_value_t = 3000)]
    pub api_port: u16,

    /// Port of the scheduler's /health and /metrics.
    #[arg(long, env = "SCHEDULER_PORT", default_value_t = 3002)]
    pub scheduler_port: u16,

    /// Port of the worker's /health and /metrics (in `all` mode the api port
    /// serves everything).
    #[arg(long, env = "METRICS_PORT", default_value_t = 3001)]
    pub metrics_port: u16,

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

    /// Publish the scaling metric to CloudWatch (one api process publishes).
    #[arg(long, env = "CLOUDWATCH_ENABLED", default_value_t = false)]
    pub cloudwatch_enabled: bool,

    /// CloudWatch namespace of the scaling metric.
    #[arg(long, env = "CLOUDWATCH_NAMESPACE", default_value = "CrawlerService")]
    pub cloudwatch_namespace: String,

    /// Seconds between two puts of the scaling metric.
    #[arg(long, env = "METRIC_INTERVAL_SECS", default_value_t = 60)]
    pub metric_interval_secs: u64,

    /// Log format: json or pretty.
    #[arg(long, env = "LOG_FORMAT", value_enum, default_value = "pretty")]
    pub log_format: LogFormat,

    /// Crawls one worker process runs at once (one browser session each).
    #[arg(long, env = "WORKER_CONCURRENCY", default_value_t = 2)]
    pub worker_concurrency: usize,

    /// chromedriver binary the worker starts and supervises (found on PATH by default).
    #[arg(long, env = "CHROMEDRIVER_PATH", default_value = "chromedriver")]
    pub chromedriver_path: String,

    /// Use this WebDriver server instead of starting chromedriver (e.g. a Selenium Grid).
    #[arg(long, env = "WEBDRIVER_URL")]
    pub webdriver_url: Option<String>,

    /// Chrome/Chromium binary; chromedriver finds it by itself when unset.
    #[arg(long, env = "CHROME_PATH")]
    pub chrome_path: Option<String>,

    /// On SIGTERM, how long in-flight crawls may run before their runs are handed
    /// back to the queue (keep under ECS's 30 s stopTimeout).
    #[arg(long, env = "DRAIN_TIMEOUT_SECS", default_value_t = 25)]
    pub drain_timeout_secs: u64,

    /// Set by ECS on Fargate: the worker turns on task scale-in protection while
    /// it holds runs, so scale-in removes idle tasks.
    #[arg(long, env = "ECS_AGENT_URI")]
    pub ecs_agent_uri: Option<String>,

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

    /// Default stuck timeout of a page request, for sites that set none.
    #[arg(long, env = "STUCK_TIMEOUT_SECS", default_value_t = 120)]
    pub stuck_timeout_secs: u32,

    /// How often a worker writes the heartbeat of each run it holds.
    #[arg(long, env = "HEARTBEAT_INTERVAL_SECS", default_value_t = 15)]
    pub heartbeat_interval_secs: u64,

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

    /// Default attempts per run, for sites that set none.
    #[arg(long, env = "MAX_ATTEMPTS", default_value_t = 3)]
    pub max_attempts: u32,

    /// How often the scheduler re-reads keywords so API changes take effect.
    #[arg(long, env = "SCHEDULE_SYNC_INTERVAL_MS", default_value_t = 1000)]
    pub schedule_sync_interval_ms: u64,

    /// Serve the bundled demo site on loopback and register a demo site and keyword
    /// when no site exists yet (`scripts/up`).
    #[arg(long, env = "DEMO", default_value_t = false)]
    pub demo: bool,

    /// Port of the demo site (with --demo).
    #[arg(long, env = "DEMO_PORT", default_value_t = 3080)]
    pub demo_port: u16,
}

impl Config {
    pub fn dispatch_interval(&self) -> Duration {
        Duration::from_millis(self.dispatch_interval_ms)
    }
    pub fn dispatch_claim_timeout(&self) -> Duration {
        Duration::from_secs(self.dispatch_claim_timeout_secs)
    }
    pub fn schedule_sync_interval(&self) -> Duration {
        Duration::from_millis(self.schedule_sync_interval_ms)
    }
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    use super::*;

    #[test]
    fn every_setting_is_documented_in_env_example() {
        let example = include_str!("../.env.example");
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
