//! What the crawls of one worker process share, made from its settings
//! once: by the worker, and by `crawlfleet smoke` to crawl as it would.

use std::{path::PathBuf, time::Duration};

use apalis_redis::ConnectionManager;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::{
    browser::{self, BrowserPool},
    crawl::{self, CrawlContext},
    limiter, scale_in,
};
use crate::{
    config::{BrowserBackend, CommonConfig, WorkerConfig},
    domain::saved_page::SavedPageBounds,
    events::EventPublisher,
    net::target_guard::TargetGuard,
};

/// Browser slots of a worker with these settings: at least one (a
/// `WORKER_CONCURRENCY` of 0 still gets one), and no more than a remote
/// browser's own limit (`BROWSER_DEVTOOLS_SLOTS`, `BROWSER_WEBDRIVER_SLOTS`): what the worker announces
/// and takes jobs for is what it can open.
pub fn browser_slots(config: &WorkerConfig) -> usize {
    let limit = match config.browser_backend {
        BrowserBackend::Devtools => config.browser_devtools_slots,
        BrowserBackend::Webdriver => config.browser_webdriver_slots,
        BrowserBackend::Local => None,
    };
    config
        .worker_concurrency
        .min(limit.unwrap_or(usize::MAX))
        .max(1)
}

/// Where the browsers of worker `worker_id` keep their files.
pub(super) fn profile_root_of(worker_id: &str) -> PathBuf {
    std::env::temp_dir().join(format!("crawlfleet-{worker_id}"))
}

/// What every crawl of a worker with these settings shares: its browser
/// pool (Chrome as configured, under `profile_root`), its bounds, limiter,
/// robots cache and the `guard` every connection meets.
pub(super) fn crawl_context(
    common: &CommonConfig,
    config: &WorkerConfig,
    (pool, redis): (PgPool, ConnectionManager),
    worker_id: String,
    profile_root: PathBuf,
    guard: TargetGuard,
) -> anyhow::Result<CrawlContext> {
    Ok(CrawlContext {
        pool,
        worker_id,
        browsers: browser_pool(config, profile_root, guard.clone())?,
        default_stuck_timeout: Duration::from_secs(common.stuck_timeout_secs as u64),
        extract_budget: Duration::from_millis(config.extract_budget_ms.max(1)),
        learn_budget: Duration::from_millis(config.learn_budget_ms.max(1)),
        proxy_first_backoff: Duration::from_secs(config.proxy_first_backoff_secs.max(1)),
        heartbeat_every: Duration::from_secs(config.heartbeat_interval_secs.max(1)),
        drain_deadline: CancellationToken::new(),
        crawls: tokio_util::task::TaskTracker::new(),
        events: EventPublisher::new(redis.clone(), &common.queue_name),
        scale_in: config
            .ecs_agent_uri
            .as_deref()
            .map(|uri| scale_in::ScaleInProtection::new(uri, config.ecs_protection_minutes)),
        limiter: limiter::SiteLimiter::new(redis.clone(), &common.queue_name),
        robots: crawl::robots::RobotsCache::new(Duration::from_secs(config.robots_cache_secs)),
        guard,
        session_key: common.session_key.clone(),
        redis,
        queue_name: common.queue_name.clone(),
        sites: Default::default(),
        bounds: crawl::bounds::from_settings(&config.bounds),
        saved_pages: SavedPageBounds {
            runs: config.saved_pages_runs,
            bytes: config.saved_pages_max_bytes,
        },
    })
}

/// The worker's browser pool: Chrome as configured (binary, user, sandbox),
/// a slot per browser slot, its files under `profile_root`, every
/// connection judged by `guard`.
pub(super) fn browser_pool(
    config: &WorkerConfig,
    profile_root: PathBuf,
    guard: TargetGuard,
) -> anyhow::Result<BrowserPool> {
    let launch = browser::ChromeLaunch {
        path: config.chrome_path.clone(),
        user: browser::confinement::ChromeUser::resolve(config.chrome_user.as_deref())?,
        sandbox: config.chrome_sandbox,
    };
    match config.remote_browser()? {
        Some(remote) => BrowserPool::remote(remote, profile_root, browser_slots(config), guard),
        None => Ok(BrowserPool::new(
            launch,
            profile_root,
            browser_slots(config),
            guard,
        )),
    }
}
