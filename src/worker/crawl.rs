//! One crawl attempt: claim, fetch each page in Chrome, extract, store, end.
//! Every write is fenced on (run, attempt, worker); a write that does not land
//! means the attempt was taken away, and the crawl stops at once.

use std::time::Duration;

use fantoccini::{Locator, error::CmdError};
use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::{browser::BrowserPool, extract::extract_items};
use crate::{
    domain::site::SiteSpec,
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
    tracing::info!(run_id, attempt, "crawl started");
    let held = CancellationToken::new();
    let heartbeat = tokio::spawn(keep_heartbeat(
        ctx.pool.clone(),
        fence.clone(),
        ctx.heartbeat_every,
        held.clone(),
    ));
    let result = tokio::select! {
        result = crawl(ctx, &fence, claimed.keyword_id, claimed.site_id) => result,
        _ = held.cancelled() => Err(CrawlError::Fence(FenceError::Superseded { run_id, attempt })),
        _ = ctx.drain_deadline.cancelled() => Err(CrawlError::Drained),
    };
    held.cancel();
    let _ = heartbeat.await;
    let ended = match result {
        Ok(last_page) => store::runs::complete(&ctx.pool, &fence, last_page)
            .await
            .map(|run| tracing::info!(run_id, items = run.items_found, "crawl completed")),
        Err(CrawlError::Fence(FenceError::Superseded { .. })) => {
            tracing::warn!(run_id, attempt, "attempt superseded; crawl stopped");
            Ok(())
        }
        Err(CrawlError::Fence(FenceError::Database(e))) => Err(FenceError::Database(e)),
        Err(CrawlError::Drained) => store::runs::release(&ctx.pool, &fence)
            .await
            .map(|_| tracing::info!(run_id, "run handed back to the queue (drain)")),
        Err(CrawlError::Attempt { reason, retry, .. }) => store::runs::fail_attempt(
            &ctx.pool, &fence, &reason, !retry,
        )
        .await
        .map(|run| tracing::warn!(run_id, attempt, state = %run.state, %reason, "attempt failed")),
    };
    if let Err(e) = ended {
        // The run stays held; the watchdog takes it back once the heartbeat stops.
        tracing::error!(run_id, error = ?e, "could not record the end of the attempt");
    }
}

async fn keep_heartbeat(pool: PgPool, fence: Fence, every: Duration, held: CancellationToken) {
    loop {
        tokio::select! {
            _ = held.cancelled() => return,
            _ = tokio::time::sleep(every) => {}
        }
        match store::runs::heartbeat(&pool, &fence).await {
            Ok(()) => {}
            Err(FenceError::Superseded { .. }) => {
                held.cancel();
                return;
            }
            Err(FenceError::Database(e)) => tracing::warn!(error = ?e, "heartbeat not written"),
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
    let (Some(site), Some(keyword)) = (
        store::sites::get(&ctx.pool, site_id)
            .await
            .map_err(FenceError::from)?,
        store::keywords::text_of(&ctx.pool, keyword_id)
            .await
            .map_err(FenceError::from)?,
    ) else {
        return Err(FenceError::Superseded {
            run_id: fence.run_id,
            attempt: fence.attempt,
        }
        .into());
    };
    let spec = site.spec().map_err(|e| CrawlError::Attempt {
        reason: format!("site is misconfigured: {e}"),
        retry: false,
        broken_session: false,
    })?;
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
        }) | Err(CrawlError::Drained)
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
    session: &mut super::browser::BrowserSession,
) -> Result<i32, CrawlError> {
    session
        .set_page_load_timeout(stuck_timeout)
        .await
        .map_err(|e| broken(format!("{e:#}")))?;
    let last_page = if spec.search_url.is_paged() {
        spec.max_pages
    } else {
        1
    };
    for page in 1..=last_page {
        let url =
            spec.search_url
                .url_for(keyword, page as u32)
                .map_err(|e| CrawlError::Attempt {
                    reason: format!("search URL for {keyword:?} is invalid: {e}"),
                    retry: false,
                    broken_session: false,
                })?;
        store::runs::enter_url_call(&ctx.pool, fence, url.as_str()).await?;
        session.count_page();
        // The page-load timeout ends a slow load; this bound catches a session
        // that stopped answering at all (hung renderer).
        let load = tokio::time::timeout(
            stuck_timeout + Duration::from_secs(5),
            session.client.goto(url.as_str()),
        )
        .await;
        match load {
            Ok(Ok(())) => {}
            Ok(Err(e)) if is_timeout(&e) => {
                return Err(CrawlError::Attempt {
                    reason: format!("stuck: page did not load within {stuck_timeout:?} at {url}"),
                    retry: true,
                    broken_session: false,
                });
            }
            Ok(Err(e)) => return Err(broken(format!("loading {url}: {e}"))),
            Err(_) => return Err(broken(format!("stuck: browser stopped answering at {url}"))),
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
                    return Err(broken(format!(
                        "waiting for {} at {url}: {e}",
                        wait_for.as_str()
                    )));
                }
                tracing::info!(run_id = fence.run_id, %url, "wait_for element never appeared; page counts as empty");
            }
        }
        let items = extract_items(&session.client, spec.item_selector.as_str(), &spec.fields)
            .await
            .map_err(|e| broken(format!("extracting at {url}: {e:#}")))?;
        let found = items.len();
        store::runs::store_page(&ctx.pool, fence, page, url.as_str(), &items).await?;
        tracing::debug!(run_id = fence.run_id, page, found, "page stored");
        if found == 0 {
            return Ok(page);
        }
    }
    Ok(last_page)
}

fn broken(reason: String) -> CrawlError {
    CrawlError::Attempt {
        reason,
        retry: true,
        broken_session: true,
    }
}

fn is_timeout(e: &CmdError) -> bool {
    matches!(e, CmdError::Standard(wd) if wd.error == fantoccini::error::ErrorStatus::Timeout)
}

fn is_timeout_or_missing(e: &CmdError) -> bool {
    is_timeout(e)
        || matches!(e, CmdError::WaitTimeout)
        || matches!(e, CmdError::Standard(wd) if wd.error == fantoccini::error::ErrorStatus::NoSuchElement)
}
