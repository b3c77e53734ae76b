//! The worker room: takes crawl jobs from Redis and crawls them in headless
//! Chrome, with its own supervised chromedriver.

mod browser;
mod chromedriver;
mod crawl;
mod extract;
pub use extract::content_hash;
pub mod processes;

use std::{sync::Arc, time::Duration};

use anyhow::Context;
use apalis::prelude::*;
use apalis_redis::ConnectionManager;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    config::Config,
    queue::{self, Job},
    store,
};

use browser::BrowserPool;
use chromedriver::ChromeDriver;
use crawl::CrawlContext;

/// How often the worker announces itself (the fleet's concurrency).
const ANNOUNCE_EVERY: Duration = Duration::from_secs(15);
/// How often an idle worker looks for new jobs (apalis-redis does not poll by default).
const POLL_EVERY: Duration = Duration::from_millis(300);
/// How often re-parented Chrome helpers are reaped.
const REAP_EVERY: Duration = Duration::from_secs(2);

/// A name unique to this process: apalis-redis silently refuses a worker whose
/// name is still registered, and ECS tasks share a hostname pattern.
fn worker_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "host".to_owned());
    let nonce: u32 = rand::random();
    format!("{host}-{}-{nonce:08x}", std::process::id())
}

/// Runs until `shutdown`, then drains: no new jobs, in-flight crawls get
/// `drain_timeout` to finish, the rest are handed back to the queue.
pub async fn run(
    config: Config,
    pool: PgPool,
    redis: ConnectionManager,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let worker_id = worker_id();
    let concurrency = config.worker_concurrency.max(1);
    if processes::become_subreaper() {
        tracing::debug!("worker is a child subreaper");
    }
    let profile_root = std::env::temp_dir().join(format!("crawlfleet-{worker_id}"));
    let browsers_stop = CancellationToken::new();
    let chromedriver = match &config.webdriver_url {
        Some(_) => None,
        None => Some(
            ChromeDriver::start(
                &config.chromedriver_path,
                profile_root.clone(),
                browsers_stop.clone(),
            )
            .await?,
        ),
    };
    let webdriver_url = config
        .webdriver_url
        .clone()
        .or_else(|| chromedriver.as_ref().map(|c| c.url().to_owned()))
        .expect("one of the two is set");
    let ctx = Arc::new(CrawlContext {
        pool: pool.clone(),
        worker_id: worker_id.clone(),
        browsers: BrowserPool::new(
            webdriver_url,
            config.chrome_path.clone(),
            profile_root,
            concurrency,
            chromedriver
                .as_ref()
                .map(ChromeDriver::generation)
                // A remote WebDriver is not ours to restart: one generation.
                .unwrap_or_else(|| tokio::sync::watch::channel(0).1),
        ),
        default_stuck_timeout: Duration::from_secs(config.stuck_timeout_secs as u64),
        heartbeat_every: Duration::from_secs(config.heartbeat_interval_secs.max(1)),
        drain_deadline: CancellationToken::new(),
    });
    store::workers::announce(&pool, &worker_id, &host_of(&worker_id), concurrency as i32).await?;
    tracing::info!(%worker_id, concurrency, "worker started");

    let housekeeping = tokio::spawn(housekeeping(
        pool.clone(),
        worker_id.clone(),
        concurrency as i32,
        chromedriver.as_ref().map(|c| c.pid()),
        shutdown.clone(),
    ));
    let drain_timeout = Duration::from_secs(config.drain_timeout_secs);
    let drain = {
        let (shutdown, deadline) = (shutdown.clone(), ctx.drain_deadline.clone());
        tokio::spawn(async move {
            shutdown.cancelled().await;
            tokio::time::sleep(drain_timeout).await;
            deadline.cancel();
        })
    };

    let backend =
        queue::storage(redis, &config.queue_name, concurrency).poll_with_interval(POLL_EVERY);
    let worker = WorkerBuilder::new(worker_id.clone())
        .backend(backend)
        .concurrency(concurrency)
        .data(ctx.clone())
        .build(handle_job);
    let stop = shutdown.clone();
    let pool_result = worker
        .run_until(async move {
            stop.cancelled().await;
            Ok::<(), std::io::Error>(())
        })
        .await;
    let stopped_on_request = shutdown.is_cancelled();

    drain.abort();
    ctx.browsers.close_all().await;
    browsers_stop.cancel();
    if let Some(chromedriver) = chromedriver {
        chromedriver.stopped().await;
    }
    housekeeping.abort();
    let _ = store::workers::retire(&pool, &worker_id).await;
    match (pool_result, stopped_on_request) {
        (Ok(()), true) => {
            tracing::info!(%worker_id, "worker stopped");
            Ok(())
        }
        // A worker pool that stops by itself is a dead worker: exit non-zero so
        // the supervisor (ECS, compose) restarts the process.
        (Ok(()), false) => anyhow::bail!("the job consumer stopped unexpectedly"),
        (Err(e), _) => Err(anyhow::anyhow!("{e}")).context("the job consumer failed"),
    }
}

async fn handle_job(job: Job, ctx: Data<Arc<CrawlContext>>) -> Result<(), BoxDynError> {
    let ctx: Arc<CrawlContext> = (*ctx).clone();
    // Its own task: a panic in one crawl cannot take the consumer down, and
    // crawls use both cores.
    if let Err(e) = tokio::spawn(async move { crawl::handle(job, &ctx).await }).await {
        tracing::error!(error = ?e, ?job, "crawl task panicked");
    }
    Ok(())
}

fn host_of(worker_id: &str) -> String {
    worker_id
        .rsplitn(3, '-')
        .nth(2)
        .unwrap_or(worker_id)
        .to_owned()
}

/// Announces the worker and reaps orphaned Chrome helpers, until shutdown.
async fn housekeeping(
    pool: PgPool,
    worker_id: String,
    concurrency: i32,
    chromedriver_pid: Option<u32>,
    shutdown: CancellationToken,
) {
    let mut announce = tokio::time::interval(ANNOUNCE_EVERY);
    let mut reap = tokio::time::interval(REAP_EVERY);
    let keep: Vec<u32> = chromedriver_pid.into_iter().collect();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = announce.tick() => {
                let host = host_of(&worker_id);
                if let Err(e) = store::workers::announce(&pool, &worker_id, &host, concurrency).await {
                    tracing::warn!(error = ?e, "could not announce the worker");
                }
            }
            _ = reap.tick() => { processes::reap_orphans(&keep); }
        }
    }
}
