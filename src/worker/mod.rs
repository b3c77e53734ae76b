//! The worker room: takes crawl (and site preview) jobs from Redis and crawls them in headless
//! Chrome (its own, driven over the DevTools pipe) or over plain HTTP, each kind
//! from its own lane with its own slots. `browser/` owns Chrome, `crawl/` one
//! attempt, `fetch/` one page, `extract/` the items of a page.
//! May import `config`, `domain`, `store`, `queue`, `events`, `net`, `ops`;
//! never `api` or `scheduler`.

pub mod browser;
mod context;
pub mod crawl;
mod error;
mod extract;
mod fetch;
mod learning;
pub mod limiter;
mod page_cpu;
mod preview;
mod proxy_health;
mod repairing;
mod replay;
mod scale_in;
mod session;
pub mod smoke;

pub use context::browser_slots;
pub use extract::{content_hash, learn};

use std::{
    collections::VecDeque,
    sync::Arc,
    time::{Duration, Instant},
};

use anyhow::Context;
use apalis::prelude::*;
use apalis_redis::ConnectionManager;
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use crate::{
    config::{CommonConfig, WorkerConfig},
    queue::{self, Job, Lane},
    store::{self, workers::Slots},
};

use browser::processes;
use context::{crawl_context, profile_root_of};
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
    worker_id_for(&host, std::process::id(), nonce)
}

/// At most this much of the host name goes into a worker id. The id names the
/// worker's folder in the temp dir, and Chrome makes its singleton socket a
/// few levels below it, in a path of at most 107 bytes: with a Fargate task's
/// whole host name (`ip-10-0-1-23.ap-northeast-2.compute.internal`) Chrome
/// refused to start ("Socket path too long"; scripts/check-image found it).
const HOST_IN_WORKER_ID: usize = 20;

/// `<host>-<pid>-<nonce>`, the host being the first label of the host name
/// (the rest is the same for every task of a region), cut to
/// [`HOST_IN_WORKER_ID`] characters fit for a file name.
fn worker_id_for(host_name: &str, pid: u32, nonce: u32) -> String {
    let label: String = host_name
        .split('.')
        .next()
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || *c == '-')
        .take(HOST_IN_WORKER_ID)
        .collect();
    let host = if label.is_empty() { "host" } else { &label };
    format!("{host}-{pid}-{nonce:08x}")
}

/// Runs until `shutdown`, then drains: no new jobs, in-flight crawls get
/// `drain_timeout` to finish, the rest are handed back to the queue.
pub async fn run(
    common: CommonConfig,
    config: WorkerConfig,
    pool: PgPool,
    redis: ConnectionManager,
    shutdown: CancellationToken,
) -> anyhow::Result<()> {
    let worker_id = worker_id();
    let slots = Slots {
        browser: browser_slots(&config) as i64,
        http: config.http_concurrency.max(1) as i64,
    };
    if processes::become_subreaper() {
        tracing::debug!("worker is a child subreaper");
    }
    let process = store::workers::WorkerProcess {
        id: worker_id.clone(),
        host: host_of(&worker_id),
        release: scale_in::release(config.ecs_metadata_uri.as_deref()).await,
        slots,
    };
    if !announce_when_ready(&pool, &process, &shutdown).await? {
        return Ok(());
    }
    let profile_root = profile_root_of(&worker_id);
    let ctx = Arc::new(crawl_context(
        &common,
        &config,
        (pool.clone(), redis.clone()),
        worker_id.clone(),
        profile_root.clone(),
        common.target_guard(),
    )?);
    // The browser (and anything else of this user) cannot read this
    // process's environment or memory from now on.
    if !browser::confinement::protect_worker() {
        tracing::warn!("could not make the worker non-dumpable");
    }
    tracing::info!(%worker_id, release = %process.release, browser_slots = slots.browser, http_slots = slots.http, "worker started");

    let housekeeping = tokio::spawn(housekeeping(
        ctx.clone(),
        pool.clone(),
        process,
        profile_root.clone(),
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

    // Two lanes, each its own consumer: http/json crawls never wait for a browser.
    let consumed = tokio::try_join!(
        consume(
            &common.queue_name,
            redis.clone(),
            Lane::Browser,
            &worker_id,
            slots.browser as usize,
            &ctx,
            &shutdown
        ),
        consume(
            &common.queue_name,
            redis,
            Lane::Http,
            &worker_id,
            slots.http as usize,
            &ctx,
            &shutdown
        ),
    )
    .map(|_| ());
    if consumed.is_err() {
        // One lane gave up: stop the other too, and exit non-zero after the drain.
        shutdown.cancel();
    }
    // In-flight crawls end by themselves, or hand their runs back at the drain deadline.
    ctx.crawls.close();
    ctx.crawls.wait().await;

    drain.abort();
    ctx.browsers.close_all().await;
    housekeeping.abort();
    let _ = store::workers::retire(&pool, &worker_id).await;
    consumed?;
    tracing::info!(%worker_id, "worker stopped");
    Ok(())
}

/// How long a starting worker waits for the schema (api and scheduler migrate).
const SCHEMA_WAIT: Duration = Duration::from_secs(120);

/// Announces the worker, waiting while Postgres or its schema is not there yet
/// (a worker may start before the api or scheduler has run the migrations).
/// `false` when shutdown came first.
async fn announce_when_ready(
    pool: &PgPool,
    process: &store::workers::WorkerProcess,
    shutdown: &CancellationToken,
) -> anyhow::Result<bool> {
    let started = Instant::now();
    loop {
        match store::workers::announce(pool, process).await {
            Ok(()) => return Ok(true),
            Err(e) if started.elapsed() < SCHEMA_WAIT => {
                tracing::info!(error = %e, "database not ready for workers yet; waiting");
            }
            Err(e) => return Err(e).context("announcing the worker"),
        }
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(false),
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
}

/// Consumer restarts tolerated within [`RESTART_WINDOW`] before the process gives up.
const MAX_RESTARTS: usize = 5;
const RESTART_WINDOW: Duration = Duration::from_secs(60);

/// Takes jobs of one lane until `shutdown`. A consumer that stops by itself
/// (Redis flushed or restarted under it, a fetch script failing) is started
/// again; one that keeps stopping makes the process exit non-zero so its
/// supervisor (ECS, compose) replaces it, never a silent exit 0.
async fn consume(
    queue_name: &str,
    redis: ConnectionManager,
    lane: Lane,
    worker_id: &str,
    concurrency: usize,
    ctx: &Arc<CrawlContext>,
    shutdown: &CancellationToken,
) -> anyhow::Result<()> {
    let mut stops: VecDeque<Instant> = VecDeque::new();
    for generation in 1.. {
        let backend = queue::storage(redis.clone(), &lane.queue_name(queue_name), concurrency)
            .poll_with_interval(POLL_EVERY);
        // apalis-redis refuses, silently, a name still registered: one per start.
        let consumer = WorkerBuilder::new(format!("{worker_id}-{}{generation}", lane.as_str()))
            .backend(backend)
            .concurrency(concurrency)
            .data(ctx.clone())
            .build(handle_job);
        let stop = shutdown.clone();
        let result = consumer
            .run_until(async move {
                stop.cancelled().await;
                Ok::<(), std::io::Error>(())
            })
            .await;
        if shutdown.is_cancelled() {
            return Ok(());
        }
        let now = Instant::now();
        stops.push_back(now);
        while stops
            .front()
            .is_some_and(|t| now.duration_since(*t) > RESTART_WINDOW)
        {
            stops.pop_front();
        }
        let why = match result {
            Ok(()) => "stopped by itself".to_owned(),
            Err(e) => e.to_string(),
        };
        if stops.len() > MAX_RESTARTS {
            anyhow::bail!(
                "the {} job consumer keeps stopping ({why}); giving up so the supervisor restarts the worker",
                lane.as_str()
            );
        }
        tracing::error!(reason = %why, lane = lane.as_str(), "job consumer stopped; starting it again");
        tokio::select! {
            _ = shutdown.cancelled() => return Ok(()),
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
    }
    unreachable!("the loop only ends by returning")
}

async fn handle_job(job: Job, ctx: Data<Arc<CrawlContext>>) -> Result<(), BoxDynError> {
    let ctx: Arc<CrawlContext> = (*ctx).clone();
    // Its own task: a panic in one crawl cannot take the consumer down, crawls
    // use both cores, and a consumer that dies does not take its crawls along.
    let crawl = ctx.crawls.spawn({
        let ctx = ctx.clone();
        async move {
            match job {
                Job::CrawlV1 { run_id, attempt } | Job::CrawlListV1 { run_id, attempt } => {
                    crawl::handle(run_id, attempt, &ctx).await
                }
                Job::PreviewV1 { preview_id } => preview::handle(preview_id, &ctx).await,
                Job::ReplayV1 { replay_id } => replay::handle(replay_id, &ctx).await,
            }
        }
    });
    if let Err(e) = crawl.await {
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

/// How often the CPU time per page is worked out.
const PAGE_CPU_EVERY: Duration = Duration::from_secs(10);

/// Announces the worker, renews its scale-in protection (dropping it for good
/// once a newer release runs), reaps orphaned Chrome helpers and works out the
/// CPU time per page, until shutdown.
async fn housekeeping(
    ctx: Arc<CrawlContext>,
    pool: PgPool,
    process: store::workers::WorkerProcess,
    profile_root: std::path::PathBuf,
    shutdown: CancellationToken,
) {
    let mut announce = tokio::time::interval(ANNOUNCE_EVERY);
    let mut reap = tokio::time::interval(REAP_EVERY);
    let renew_every = ctx
        .scale_in
        .as_ref()
        .map_or(Duration::from_secs(3600), |p| p.renew_every());
    let mut renew =
        tokio::time::interval_at(tokio::time::Instant::now() + renew_every, renew_every);
    let mut cpu = tokio::time::interval(PAGE_CPU_EVERY);
    let mut page_cpu = page_cpu::PageCpu::start();
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => return,
            _ = announce.tick() => {
                if let Err(e) = store::workers::announce(&pool, &process).await {
                    tracing::warn!(error = ?e, "could not announce the worker");
                }
                if let Some(protection) = &ctx.scale_in {
                    match store::workers::replaced_by_newer_release(&pool, &process).await {
                        Ok(true) => protection.replaced().await,
                        Ok(false) => {}
                        Err(e) => tracing::warn!(error = ?e, "could not look for a newer release"),
                    }
                }
            }
            _ = renew.tick() => {
                if let Some(protection) = &ctx.scale_in {
                    protection.renew().await;
                }
            }
            _ = reap.tick() => {
                processes::reap_orphans(&profile_root);
            }
            _ = cpu.tick() => page_cpu.sample(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_worker_id_names_the_first_label_of_the_host_then_pid_and_nonce() {
        let id = worker_id_for("ip-10-0-1-23.ap-northeast-2.compute.internal", 7, 0xab);
        assert_eq!(id, "ip-10-0-1-23-7-000000ab");
        assert_eq!(host_of(&id), "ip-10-0-1-23");
        assert_eq!(worker_id_for("", 7, 0xab), "host-7-000000ab");
        assert_eq!(
            worker_id_for("3f9c2a1b7d4e", 1, 1),
            "3f9c2a1b7d4e-1-00000001"
        );
    }

    #[test]
    fn chrome_has_room_for_its_socket_below_the_longest_worker_folder() {
        // Chrome's TMPDIR is <temp>/crawlfleet-<worker id>/tmp (ChromePlaces); its
        // singleton socket goes in a folder it makes there. pid_max is at most 2^22.
        let id = worker_id_for(&"a".repeat(63), 4_194_304, u32::MAX);
        let socket =
            format!("/tmp/crawlfleet-{id}/tmp/org.chromium.Chromium.XXXXXX/SingletonSocket");
        assert!(socket.len() <= 107, "{socket}: {} bytes", socket.len());
    }
}
