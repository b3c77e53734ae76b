//! One crawl attempt: claim, crawl the pages in the site's render mode, end.
//! Every write is fenced on (run, attempt, worker); a write that does not land
//! means the attempt was taken away, and the crawl stops at once.

pub(super) mod bounds;
mod details;
mod list;
mod pages;
pub mod robots;
mod site_cache;

use std::{
    future::Future,
    time::{Duration, Instant},
};

use sqlx::PgPool;
use tokio_util::sync::CancellationToken;

use super::{
    browser::{BrowserPool, BrowserSession},
    error::CrawlError,
    fetch::{BrowserPage, HttpClient, PageSource, prepare_for_crawl},
    limiter::SiteLimiter,
    repairing,
    session::{self, KeptSession, SessionCookies},
};
use crate::{
    domain::{
        bounds::CrawlBounds,
        failure::FailureKind,
        page::PagesRead,
        run::{CrawlRun, RunState},
        saved_page::SavedPageBounds,
        site::{RenderMode, SiteSpec},
    },
    events::{Event, EventPublisher},
    net::target_guard::TargetGuard,
    ops::metrics::metrics,
    store::{
        self,
        runs::{
            ClaimedRun, Evidence, Fence, FenceError, MAX_EVIDENCE_HTML, MAX_EVIDENCE_SCREENSHOT,
        },
        sealing::SessionKey,
        sites::LoadError,
    },
};
use pages::Crawl;

/// How often a crawl checks it still holds its run (a user may cancel it).
const HELD_CHECK_EVERY: Duration = Duration::from_secs(2);
/// How long finished work is kept trying to reach an unreachable Postgres.
pub(super) const OUTAGE_PATIENCE: Duration = Duration::from_secs(600);

/// What a worker's crawls share.
pub struct CrawlContext {
    pub pool: PgPool,
    pub worker_id: String,
    pub browsers: BrowserPool,
    pub default_stuck_timeout: Duration,
    /// The time reading one page (http and json modes) may use.
    pub extract_budget: Duration,
    /// The time learning selectors from one page may use.
    pub learn_budget: Duration,
    /// How long a proxy that drew a refusal is first retired (doubled in a row).
    pub proxy_first_backoff: Duration,
    /// How often a held run's heartbeat is written.
    pub heartbeat_every: Duration,
    /// Fired when the drain deadline passes: unfinished crawls hand their runs back.
    pub drain_deadline: CancellationToken,
    /// Every crawl in flight, waited for at shutdown.
    pub crawls: tokio_util::task::TaskTracker,
    /// Where run changes are announced to the api's live clients.
    pub events: EventPublisher,
    /// On ECS: protects the task from scale-in while it holds runs.
    pub scale_in: Option<crate::worker::scale_in::ScaleInProtection>,
    /// Each site's fleet-wide rate limit and refusal pauses.
    pub limiter: SiteLimiter,
    /// Each origin's robots.txt, as this worker last read it.
    pub robots: robots::RobotsCache,
    /// Refuses private and metadata targets unless allowed.
    pub guard: TargetGuard,
    /// Seals kept site sessions; `None`: sites that keep one cannot be crawled.
    /// Also opens preview requests, which the api seals with it.
    pub session_key: Option<SessionKey>,
    /// Where preview requests wait and their answers go (`queue::preview`).
    pub redis: apalis_redis::ConnectionManager,
    pub queue_name: String,
    /// The sites crawled, decoded once per version.
    pub sites: site_cache::SiteCache,
    /// What one crawl may store.
    pub bounds: CrawlBounds,
    /// What a site keeps of its healthy runs' pages (saved pages).
    pub saved_pages: SavedPageBounds,
}

/// Handles one job message. Failures are recorded in Postgres (our state
/// machine owns retries), so this never asks apalis to retry.
pub async fn handle(run_id: i64, attempt: i32, ctx: &CrawlContext) {
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
    let fence = claimed.fence.clone();
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
        result = crawl(ctx, &claimed) => result,
        _ = lost.cancelled() => Err(FenceError::Superseded { run_id, attempt }.into()),
        _ = ctx.drain_deadline.cancelled() => Err(CrawlError::Drained),
    };
    watch.abort();
    let metrics = metrics();
    let attempt_failed = matches!(result, Err(CrawlError::Attempt { .. }));
    let ended = match result {
        Ok(pages) => persist("completion", OUTAGE_PATIENCE, || {
            store::runs::complete_saving(&ctx.pool, &fence, pages.clone(), &ctx.saved_pages)
        })
        .await
        .map(|done| Some((done.run, Some(done.changes), done.stored_page))),
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
        .map(|run| Some((run, None, None))),
        Err(CrawlError::Attempt { failure, .. }) => {
            if failure.kind == FailureKind::Stuck {
                metrics
                    .stuck_detections
                    .with_label_values(&[&site_label])
                    .inc();
            }
            let run = persist("failure", OUTAGE_PATIENCE, || {
                store::runs::fail_attempt(&ctx.pool, &fence, &failure)
            })
            .await;
            if let Ok(run) = &run {
                tracing::warn!(run_id, attempt, state = %run.state, kind = %failure.kind, reason = %failure, "attempt failed");
            }
            run.map(|run| Some((run, None, None)))
        }
    };
    if let Ok(Some((run, changes, stored_page))) = &ended {
        match run.state {
            RunState::Completed => {
                tracing::info!(
                    run_id,
                    items = run.items_found,
                    new = run.items_new,
                    changed = run.items_changed,
                    removed = run.items_removed,
                    "crawl completed"
                )
            }
            RunState::Queued if run.attempt == attempt => {
                tracing::info!(run_id, "run handed back to the queue (drain)")
            }
            _ => {}
        }
        metrics.count_attempt_end(run.state, run.site_id, attempt_failed);
        // The last page's results and the run's end: one round trip.
        let mut events = Vec::with_capacity(3);
        if let Some((page, count)) = *stored_page {
            events.push(Event::ResultStored {
                run_id: run.id,
                keyword_id: run.keyword_id,
                url_list_id: run.url_list_id,
                site_id: run.site_id,
                page,
                count,
            });
            events.push(Event::run_updated(&page_stored(run)));
        }
        events.push(match changes {
            Some(changes) => Event::run_completed(run, changes),
            None => Event::run_updated(run),
        });
        ctx.events.publish_all(&events).await;
        if repairing::calls_for_repair(run) {
            let keyword = claimed.keyword.as_deref().unwrap_or_default();
            repairing::after_bad_run(ctx, run, keyword).await;
        }
    }
    if let Some(protection) = &ctx.scale_in {
        protection.release().await;
    }
    match ended {
        Ok(_) => {}
        // The last page now goes with the completion: a superseded worker
        // often learns it only here.
        Err(FenceError::Superseded { .. }) => tracing::warn!(
            run_id,
            attempt,
            "attempt superseded or cancelled; its end was not written"
        ),
        // The run stays held; the watchdog takes it back once the heartbeat stops.
        Err(e) => tracing::error!(run_id, error = ?e, "could not record the end of the attempt"),
    }
}

/// A run completed with its last page, as it was between the two: the
/// page stored (`call_done`), not judged yet. The completion's transaction
/// goes through that state under the run's lock; live clients are told of
/// it as of every page before.
fn page_stored(completed: &CrawlRun) -> CrawlRun {
    CrawlRun {
        state: RunState::CallDone,
        health: None,
        items_removed: 0,
        ..completed.clone()
    }
}

/// Retries a fenced write while Postgres is unreachable: the work is done and
/// must not be lost to an outage. Stops when the write lands, when the attempt
/// turns out to be superseded, or after `patience`.
pub(super) async fn persist<T, F, Fut>(
    what: &str,
    patience: Duration,
    mut write: F,
) -> Result<T, FenceError>
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

/// Crawls the run's site for its keyword, in the site's render mode; returns
/// the pages read (the last one, and why paging ended there). A site that keeps its session starts from
/// the kept one and, when the crawl completes, keeps what it ends with.
async fn crawl(ctx: &CrawlContext, claimed: &ClaimedRun) -> Result<PagesRead, CrawlError> {
    let (fence, run) = (&claimed.fence, &claimed.run);
    // A URL list's run has no keyword: its URLs are its pages.
    let keyword = claimed.keyword.as_deref().unwrap_or_default();
    let site = ctx
        .sites
        .get(
            &ctx.pool,
            run.site_id,
            claimed.site_version,
            ctx.session_key.as_ref(),
        )
        .await;
    let site = match site {
        Ok(Some(site)) => site,
        Err(LoadError::Database(e)) => return Err(FenceError::from(e).into()),
        Err(e @ LoadError::Secrets { .. }) => {
            return Err(CrawlError::failed(
                FailureKind::Misconfigured,
                format!("site is misconfigured: {e}"),
            ));
        }
        // Deleted meanwhile, and the run with it.
        Ok(None) => {
            return Err(FenceError::Superseded {
                run_id: fence.run_id,
                attempt: fence.attempt,
            }
            .into());
        }
    };
    let spec = &site.spec;
    // The pace is fixed before the first request (the HTTP client's redirect
    // hops take it too): the search's robots.txt is read first.
    let crawl_delay = match spec.search_url.first_url(keyword) {
        Ok(first) => robots::crawl_delay(&ctx.robots, spec, run.site_id, &first, &ctx.guard).await,
        // Crawl::pages fails the attempt for it.
        Err(_) => None,
    };
    let crawl = Crawl {
        ctx,
        fence,
        run,
        spec,
        keyword,
        stuck_timeout: spec
            .stuck_timeout_secs
            .map(|s| Duration::from_secs(s as u64))
            .unwrap_or(ctx.default_stuck_timeout),
        crawl_delay,
        detail_evidence_kept: Default::default(),
        keeps_bodies: ctx.saved_pages.keeps().into(),
        proxies: spec
            .identity
            .egress()
            .map(|pool| super::proxy_health::ProxyChoice::new(pool, run.site_id)),
    };
    let kept = load_session(ctx, spec, run.site_id).await?;
    let (read, ended_with) = match spec.render {
        RenderMode::Browser => crawl_in_browser(&crawl, kept.as_ref()).await?,
        RenderMode::Http | RenderMode::Json => {
            let cookies = kept
                .as_ref()
                .map_or_else(SessionCookies::empty, KeptSession::cookie_store);
            let client = HttpClient::new(
                &spec.identity,
                ctx.guard.clone(),
                crawl.stuck_timeout,
                cookies.clone(),
                crawl.pace(),
            )
            .await?
            .with_max_page_bytes(ctx.bounds.page_bytes);
            let mut source = PageSource::Http(client);
            let crawled = crawl.read(&mut source).await;
            if let (Err(CrawlError::Attempt { .. }), PageSource::Http(client)) =
                (&crawled, &mut source)
                && let Some(failed) = client.failed_answer.take()
            {
                let (url, html) = *failed;
                let evidence = Evidence {
                    page_url: Some(url.to_string()),
                    html: Some(html),
                    screenshot: None,
                };
                keep_evidence(&crawl, evidence.capped()).await;
            }
            (crawled?, spec.session.keep.then(|| cookies.session()))
        }
    };
    if let (Some(ended_with), Some(key)) = (ended_with, &ctx.session_key) {
        // A session lost to a hiccup costs a login, not the crawl's results.
        match session::save(&ctx.pool, key, run.site_id, fence, &ended_with).await {
            Ok(true) => {}
            // Completing will find the same and stop the crawl.
            Ok(false) => tracing::info!(run_id = run.id, "superseded; the session is not kept"),
            Err(e) => {
                tracing::warn!(run_id = run.id, error = ?e, "could not keep the site's session")
            }
        }
    }
    Ok(read)
}

/// The site's kept session, when it keeps one.
async fn load_session(
    ctx: &CrawlContext,
    spec: &SiteSpec,
    site_id: i64,
) -> Result<Option<KeptSession>, CrawlError> {
    if !spec.session.keep {
        return Ok(None);
    }
    let Some(key) = &ctx.session_key else {
        return Err(CrawlError::failed(
            FailureKind::Misconfigured,
            "the site keeps its session, but SESSION_KEY is not set on this worker",
        ));
    };
    session::load(&ctx.pool, key, site_id).await.map_err(|e| {
        CrawlError::failed(
            FailureKind::Internal,
            format!("opening the kept session: {e:#}"),
        )
    })
}

/// A crawl in a pooled browser session, made the site's for the time of the
/// crawl; returns the pages read and, when the site keeps it, the session.
async fn crawl_in_browser(
    crawl: &Crawl<'_>,
    kept: Option<&KeptSession>,
) -> Result<(PagesRead, Option<KeptSession>), CrawlError> {
    let browsers = &crawl.ctx.browsers;
    // The context leaves through one member for the whole run (the relay
    // holds one upstream): chosen now, among those not retired.
    let proxy = match &crawl.proxies {
        Some(choice) => Some(
            choice
                .next(&crawl.ctx.pool, crawl.fence.run_id, true)
                .await?,
        ),
        None => None,
    };
    let mut lease = browsers
        .lease(proxy.as_ref())
        .await
        .map_err(|e| CrawlError::browser(format!("no browser: {e:#}")))?;
    let session = lease.session();
    let result: Result<_, CrawlError> = async {
        prepare_for_crawl(session, crawl.spec, kept)
            .await
            .map_err(|e| CrawlError::browser(format!("preparing the browser: {e:#}")))?;
        let read = crawl
            .read(&mut PageSource::Browser(BrowserPage::new(
                &mut *session,
                crawl.ctx.bounds,
                crawl.keyword,
            )))
            .await?;
        let ended_with = match crawl.spec.session.keep {
            true => Some(
                KeptSession::from_browser(session)
                    .await
                    .map_err(|e| CrawlError::browser(format!("reading the session: {e:#}")))?,
            ),
            false => None,
        };
        Ok((read, ended_with))
    }
    .await;
    // A page robots.txt disallows was never loaded: nothing to keep.
    if let Err(CrawlError::Attempt { failure, .. }) = &result
        && failure.kind != FailureKind::RobotsDisallowed
        && !crawl
            .detail_evidence_kept
            .load(std::sync::atomic::Ordering::Relaxed)
    {
        keep_browser_evidence(crawl, lease.session()).await;
    }
    let healthy = !matches!(&result, Err(e) if e.breaks_session());
    browsers.give_back(lease, healthy).await;
    result
}

/// How long the browser gets to show what a failed attempt ended on.
const EVIDENCE_TIMEOUT: Duration = Duration::from_secs(3);

/// Keeps the page a failed attempt ended on as the browser shows it: its URL,
/// its HTML and a screenshot. A browser that does not answer within
/// [`EVIDENCE_TIMEOUT`] (a hung renderer) is not asked again, and nothing
/// here changes how the attempt ends. Only failures pay for it.
async fn keep_browser_evidence(crawl: &Crawl<'_>, session: &BrowserSession) {
    let Ok(Ok(page_url)) = tokio::time::timeout(EVIDENCE_TIMEOUT, session.url()).await else {
        return;
    };
    let html = tokio::time::timeout(EVIDENCE_TIMEOUT, session.html(MAX_EVIDENCE_HTML))
        .await
        .ok()
        .and_then(Result::ok);
    let screenshot = match html {
        Some(_) => screenshot(session).await,
        None => None,
    };
    let evidence = Evidence {
        page_url: Some(page_url.to_string()),
        html,
        screenshot,
    };
    keep_evidence(crawl, evidence.capped()).await;
}

/// The page as the browser shows it (PNG), within [`EVIDENCE_TIMEOUT`] and
/// the evidence's size cap; `None` when it cannot be had.
pub(super) async fn screenshot(session: &BrowserSession) -> Option<Vec<u8>> {
    tokio::time::timeout(EVIDENCE_TIMEOUT, session.screenshot())
        .await
        .ok()
        .and_then(Result::ok)
        .filter(|png| png.len() <= MAX_EVIDENCE_SCREENSHOT)
}

/// Keeps a failed attempt's evidence; a failure to keep it is logged, and
/// never changes how the attempt ends.
async fn keep_evidence(crawl: &Crawl<'_>, evidence: Evidence) {
    if let Err(e) = store::runs::keep_evidence(&crawl.ctx.pool, crawl.fence, &evidence).await {
        tracing::warn!(run_id = crawl.fence.run_id, error = ?e, "the failed page was not kept");
    }
}
