//! One crawl attempt: claim, fetch each page in Chrome, extract, store, end.
//! Every write is fenced on (run, attempt, worker); a write that does not land
//! means the attempt was taken away, and the crawl stops at once.

use std::{
    future::Future,
    time::{Duration, Instant},
};

use fantoccini::{Locator, error::CmdError};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::{
    browser::{BrowserPool, BrowserSession},
    extract::{extract_items, response_status},
};
use crate::{
    domain::site::SiteSpec,
    events::{Event, EventPublisher},
    metrics::metrics,
    queue::Job,
    store::{
        self,
        runs::{Fence, FenceError},
    },
};

/// Longest wait for a site's `wait_for` element before the page counts as empty.
const WAIT_FOR_LIMIT: Duration = Duration::from_secs(10);
/// How often `wait_for` looks for its element.
const WAIT_FOR_POLL: Duration = Duration::from_millis(50);
/// How often a crawl checks it still holds its run (a user may cancel it).
const HELD_CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long finished work is kept trying to reach an unreachable Postgres.
const OUTAGE_PATIENCE: Duration = Duration::from_secs(600);
/// How long a session gets to answer a trivial script after a page-load timeout.
const RESPONSIVE_PROBE: Duration = Duration::from_secs(3);
/// Beyond the page-load timeout, how long a silent browser gets before it is
/// considered hung and killed.
const HUNG_BROWSER_GRACE: Duration = Duration::from_secs(5);

/// What a worker's crawls share.
pub struct CrawlContext {
    pub pool: PgPool,
    pub worker_id: String,
    pub browsers: BrowserPool,
    pub default_stuck_timeout: Duration,
    /// How often a held run's heartbeat is written.
    pub heartbeat_every: Duration,
    /// Fired when the drain deadline passes: unfinished crawls hand their runs back.
    pub drain_deadline: CancellationToken,
    /// Every crawl in flight, waited for at shutdown.
    pub crawls: tokio_util::task::TaskTracker,
    /// Where run changes are announced to the api's live clients.
    pub events: EventPublisher,
    /// On ECS: protects the task from scale-in while it holds runs.
    pub scale_in: Option<super::scale_in::ScaleInProtection>,
}

/// Why an attempt ended without completing.
#[derive(Debug, thiserror::Error)]
enum CrawlError {
    #[error(transparent)]
    Fence(#[from] FenceError),
    #[error("worker draining")]
    Drained,
    /// The attempt failed; `retry` says whether another attempt may succeed.
    #[error("{reason}")]
    Attempt {
        reason: String,
        retry: bool,
        /// The browser session is unusable and must be replaced.
        broken_session: bool,
    },
}

impl CrawlError {
    fn transient(reason: impl Into<String>) -> Self {
        CrawlError::Attempt {
            reason: reason.into(),
            retry: true,
            broken_session: false,
        }
    }

    fn permanent(reason: impl Into<String>) -> Self {
        CrawlError::Attempt {
            reason: reason.into(),
            retry: false,
            broken_session: false,
        }
    }

    fn broken(reason: impl Into<String>) -> Self {
        CrawlError::Attempt {
            reason: reason.into(),
            retry: true,
            broken_session: true,
        }
    }
}

/// Handles one job message. Failures are recorded in Postgres (our state
/// machine owns retries), so this never asks apalis to retry.
pub async fn handle(job: Job, ctx: &CrawlContext) {
    let Job::CrawlV1 { run_id, attempt } = job;
    let claimed = match store::runs::claim(&ctx.pool, run_id, attempt, &ctx.worker_id).await {
        Ok(Some(claimed)) => claimed,
        Ok(None) => {
            tracing::debug!(run_id, attempt, "stale or duplicate job message dropped");
            return;
        }
        Err(e) => {
            // Unclaimed: the dispatcher sends it again after its claim timeout.
            tracing::error!(run_id, error = ?e, "could not claim run");
            return;
        }
    };
    let fence = claimed.fence;
    let site_label = claimed.run.site_id.to_string();
    ctx.events.run_updated(&claimed.run).await;
    tracing::info!(run_id, attempt, "crawl started");
    if let Some(protection) = &ctx.scale_in {
        protection.hold().await;
    }
    let lost = CancellationToken::new();
    let watch = tokio::spawn(watch_hold(
        ctx.pool.clone(),
        fence.clone(),
        ctx.heartbeat_every,
        lost.clone(),
    ));
    let result = tokio::select! {
        result = crawl(ctx, &fence, claimed.run.keyword_id, claimed.run.site_id) => result,
        _ = lost.cancelled() => Err(FenceError::Superseded { run_id, attempt }.into()),
        _ = ctx.drain_deadline.cancelled() => Err(CrawlError::Drained),
    };
    watch.abort();
    let metrics = metrics();
    let ended = match result {
        Ok(last_page) => persist("completion", OUTAGE_PATIENCE, || {
            store::runs::complete(&ctx.pool, &fence, last_page)
        })
        .await
        .map(Some),
        Err(CrawlError::Fence(FenceError::Superseded { .. })) => {
            tracing::warn!(
                run_id,
                attempt,
                "attempt superseded or cancelled; crawl stopped"
            );
            Ok(None)
        }
        Err(CrawlError::Fence(FenceError::Database(e))) => Err(FenceError::Database(e)),
        // Draining is bounded by the process's own deadline: no long patience.
        Err(CrawlError::Drained) => persist("hand-back", Duration::from_secs(3), || {
            store::runs::release(&ctx.pool, &fence)
        })
        .await
        .map(Some),
        Err(CrawlError::Attempt { reason, retry, .. }) => {
            if reason.starts_with("stuck") {
                metrics
                    .stuck_detections
                    .with_label_values(&[&site_label])
                    .inc();
            }
            let run = persist("failure", OUTAGE_PATIENCE, || {
                store::runs::fail_attempt(&ctx.pool, &fence, &reason, !retry)
            })
            .await;
            if let Ok(run) = &run {
                tracing::warn!(run_id, attempt, state = %run.state, %reason, "attempt failed");
                if run.state == "queued" {
                    metrics.retries.with_label_values(&[&site_label]).inc();
                }
            }
            run.map(Some)
        }
    };
    if let Ok(Some(run)) = &ended {
        match run.state.as_str() {
            "completed" => tracing::info!(run_id, items = run.items_found, "crawl completed"),
            "queued" if run.attempt == attempt => {
                tracing::info!(run_id, "run handed back to the queue (drain)")
            }
            _ => {}
        }
        if matches!(run.state.as_str(), "completed" | "failed") {
            metrics
                .runs_finished
                .with_label_values(&[run.state.as_str(), &site_label])
                .inc();
        }
        ctx.events.run_updated(run).await;
    }
    if let Some(protection) = &ctx.scale_in {
        protection.release().await;
    }
    match ended {
        Ok(_) | Err(FenceError::Superseded { .. }) => {}
        // The run stays held; the watchdog takes it back once the heartbeat stops.
        Err(e) => tracing::error!(run_id, error = ?e, "could not record the end of the attempt"),
    }
}

/// Retries a fenced write while Postgres is unreachable: the work is done and
/// must not be lost to an outage. Stops when the write lands, when the attempt
/// turns out to be superseded, or after `patience`.
async fn persist<T, F, Fut>(what: &str, patience: Duration, mut write: F) -> Result<T, FenceError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, FenceError>>,
{
    let start = Instant::now();
    let mut delay = Duration::from_millis(200);
    loop {
        match write().await {
            Err(FenceError::Database(e)) if start.elapsed() < patience => {
                tracing::warn!(error = %e, "{what} not written yet; retrying in {delay:?}");
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(5));
            }
            other => return other,
        }
    }
}

/// Writes the heartbeat and watches that the run is still ours (a cancel or a
/// takeover); cancels `lost` as soon as it is not.
async fn watch_hold(
    pool: PgPool,
    fence: Fence,
    heartbeat_every: Duration,
    lost: CancellationToken,
) {
    let mut last_beat = Instant::now();
    loop {
        tokio::time::sleep(HELD_CHECK_EVERY.min(heartbeat_every)).await;
        let held = if last_beat.elapsed() >= heartbeat_every {
            last_beat = Instant::now();
            match store::runs::heartbeat(&pool, &fence).await {
                Ok(()) => Ok(true),
                Err(FenceError::Superseded { .. }) => Ok(false),
                Err(FenceError::Database(e)) => Err(e),
            }
        } else {
            store::runs::is_held(&pool, &fence).await
        };
        match held {
            Ok(true) => {}
            Ok(false) => {
                lost.cancel();
                return;
            }
            // Postgres unreachable: keep crawling; the writes wait for it.
            Err(e) => tracing::warn!(error = %e, "could not check the run's hold"),
        }
    }
}

/// Crawls every page; returns the last page number crawled.
async fn crawl(
    ctx: &CrawlContext,
    fence: &Fence,
    keyword_id: i64,
    site_id: i64,
) -> Result<i32, CrawlError> {
    let site = store::sites::get(&ctx.pool, site_id)
        .await
        .map_err(FenceError::from)?;
    let keyword = store::keywords::text_of(&ctx.pool, keyword_id)
        .await
        .map_err(FenceError::from)?;
    let (Some(site), Some(keyword)) = (site, keyword) else {
        // Deleted meanwhile, and the run with it.
        return Err(FenceError::Superseded {
            run_id: fence.run_id,
            attempt: fence.attempt,
        }
        .into());
    };
    let spec = site
        .spec()
        .map_err(|e| CrawlError::permanent(format!("site is misconfigured: {e}")))?;
    let stuck_timeout = spec
        .stuck_timeout_secs
        .map(|s| Duration::from_secs(s as u64))
        .unwrap_or(ctx.default_stuck_timeout);
    let mut lease = ctx
        .browsers
        .lease()
        .await
        .map_err(|e| CrawlError::transient(format!("no browser: {e:#}")))?;
    let result = crawl_pages(
        ctx,
        fence,
        &spec,
        &keyword,
        stuck_timeout,
        &mut lease.session,
    )
    .await;
    let healthy = !matches!(
        result,
        Err(CrawlError::Attempt {
            broken_session: true,
            ..
        })
    );
    ctx.browsers.give_back(lease, healthy).await;
    result
}

async fn crawl_pages(
    ctx: &CrawlContext,
    fence: &Fence,
    spec: &SiteSpec,
    keyword: &str,
    stuck_timeout: Duration,
    session: &mut BrowserSession,
) -> Result<i32, CrawlError> {
    session
        .set_page_load_timeout(stuck_timeout)
        .await
        .map_err(|e| CrawlError::broken(format!("{e:#}")))?;
    let last_page = if spec.search_url.is_paged() {
        spec.max_pages
    } else {
        1
    };
    for page in 1..=last_page {
        let url = spec.search_url.url_for(keyword, page as u32).map_err(|e| {
            CrawlError::permanent(format!("search URL for {keyword:?} is invalid: {e}"))
        })?;
        let calling = persist("page start", OUTAGE_PATIENCE, || {
            store::runs::enter_url_call(&ctx.pool, fence, url.as_str())
        })
        .await?;
        ctx.events.run_updated(&calling).await;
        let fetch_started = std::time::Instant::now();
        let fetched = fetch_page(session, spec, &url, page, stuck_timeout).await;
        metrics()
            .page_fetch_duration
            .with_label_values(&[&calling.site_id.to_string()])
            .observe(fetch_started.elapsed().as_secs_f64());
        let items = match fetched? {
            PageOutcome::Items(items) => items,
            PageOutcome::PastTheEnd => Vec::new(),
        };
        let found = items.len();
        let stored = persist("page results", OUTAGE_PATIENCE, || {
            store::runs::store_page(&ctx.pool, fence, page, url.as_str(), &items)
        })
        .await?;
        ctx.events
            .publish(&Event::ResultStored {
                run_id: stored.id,
                keyword_id: stored.keyword_id,
                site_id: stored.site_id,
                page,
                count: found,
            })
            .await;
        ctx.events.run_updated(&stored).await;
        tracing::debug!(run_id = fence.run_id, page, found, "page stored");
        if found == 0 {
            return Ok(page);
        }
    }
    Ok(last_page)
}

enum PageOutcome {
    Items(Vec<store::runs::PageItem>),
    /// A later page answered 404/410: the results ended before `max_pages`.
    PastTheEnd,
}

/// Loads one results page and reads its items.
async fn fetch_page(
    session: &mut BrowserSession,
    spec: &SiteSpec,
    url: &url::Url,
    page: i32,
    stuck_timeout: Duration,
) -> Result<PageOutcome, CrawlError> {
    session.count_page();
    // The page-load timeout ends a slow load; this bound catches a session
    // that stopped answering at all (hung renderer, script loop): the session
    // is then killed by its profile folder and replaced.
    let load = tokio::time::timeout(
        stuck_timeout + HUNG_BROWSER_GRACE,
        session.client.goto(url.as_str()),
    )
    .await;
    match load {
        Ok(Ok(())) => {}
        Ok(Err(e)) if is_timeout(&e) => {
            let reason = format!(
                "stuck: page did not load within {}s at {url}",
                stuck_timeout.as_secs()
            );
            // A slow server leaves the session usable; a renderer stuck in a
            // script does not answer even this, and the session is replaced.
            let probe =
                tokio::time::timeout(RESPONSIVE_PROBE, session.client.execute("return 1", vec![]))
                    .await;
            return Err(if matches!(probe, Ok(Ok(_))) {
                CrawlError::transient(reason)
            } else {
                CrawlError::broken(reason)
            });
        }
        Ok(Err(e)) => return Err(CrawlError::broken(format!("loading {url}: {e}"))),
        Err(_) => {
            return Err(CrawlError::broken(format!(
                "stuck: browser stopped answering at {url}"
            )));
        }
    }
    let status = response_status(&session.client)
        .await
        .map_err(|e| CrawlError::broken(format!("{e:#} at {url}")))?;
    match status {
        Some(404 | 410) if page > 1 => return Ok(PageOutcome::PastTheEnd),
        Some(s @ (408 | 429)) | Some(s @ 500..=599) => {
            return Err(CrawlError::transient(format!("HTTP {s} at {url}")));
        }
        Some(s @ 400..=499) => {
            return Err(CrawlError::permanent(format!(
                "HTTP {s} at {url}: the site refused the search page"
            )));
        }
        _ => {}
    }
    if let Some(wait_for) = &spec.wait_for {
        let appeared = session
            .client
            .wait()
            .at_most(WAIT_FOR_LIMIT.min(stuck_timeout))
            .every(WAIT_FOR_POLL)
            .for_element(Locator::Css(wait_for.as_str()))
            .await;
        if let Err(e) = appeared {
            if !is_timeout_or_missing(&e) {
                return Err(CrawlError::broken(format!(
                    "waiting for {} at {url}: {e}",
                    wait_for.as_str()
                )));
            }
            tracing::info!(%url, "wait_for element never appeared; page counts as empty");
        }
    }
    let items = extract_items(&session.client, spec.item_selector.as_str(), &spec.fields)
        .await
        .map_err(|e| CrawlError::broken(format!("extracting at {url}: {e:#}")))?;
    Ok(PageOutcome::Items(items))
}

fn is_timeout(e: &CmdError) -> bool {
    matches!(e, CmdError::Standard(wd) if wd.error == fantoccini::error::ErrorStatus::Timeout)
}

fn is_timeout_or_missing(e: &CmdError) -> bool {
    is_timeout(e)
        || matches!(e, CmdError::WaitTimeout)
        || matches!(e, CmdError::Standard(wd) if wd.error == fantoccini::error::ErrorStatus::NoSuchElement)
}
