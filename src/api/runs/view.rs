//! Runs as the API shows them: the store's domain runs mapped to the wire,
//! with the OpenAPI schemas clients generate code from.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    api::view::view,
    domain::{
        failure::FailureKind,
        page::PagingEnd,
        page::StopReason,
        run::{Attempt, AttemptOutcome, CrawlRun, RunHealth, RunState},
    },
    store::runs::QueueOutcome,
};

view! {
    /// A stored crawl run, as the API shows it.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = CrawlRun)]
    pub struct CrawlRunView from (run: CrawlRun) {
        let (stopped_at_url, stop_reason) = match run.stopped_early {
            Some(stop) => (Some(stop.url), Some(stop.reason)),
            None => (None, None),
        };
        let health_reason = run.health.as_ref().and_then(RunHealth::reason).map(str::to_owned);
    } {
        id: i64 = run.id,
        /// The keyword searched (null for a URL list's run).
        keyword_id: Option<i64> = run.keyword_id,
        /// The URL list read (null for a keyword's run).
        url_list_id: Option<i64> = run.url_list_id,
        /// A list run's period: its URLs not read since then are read.
        period_start: Option<DateTime<Utc>> = run.period_start,
        /// A list run's URLs that could not be read (each on its entry).
        urls_failed: i32 = run.urls_failed,
        site_id: i64 = run.site_id,
        /// The site version the run crawled with, recorded when a worker
        /// claimed it (null before, and on runs claimed before it was recorded).
        site_version: Option<i32> = run.site_version,
        state: RunState = run.state,
        /// manual or schedule.
        trigger: &'static str = run.trigger.as_str(),
        priority: i32 = run.priority,
        attempt: i32 = run.attempt,
        max_attempts: i32 = run.max_attempts,
        worker_id: Option<String> = run.worker_id,
        pages_crawled: i32 = run.pages_crawled,
        items_found: i32 = run.items_found,
        /// Items its keyword/site had not stored (change tracking).
        items_new: i32 = run.items_new,
        /// Items stored before that it found with other values.
        items_changed: i32 = run.items_changed,
        /// Items stored before that it did not find, having read every page.
        items_removed: i32 = run.items_removed,
        /// Why its paging ended, once it completed: `last_page` (it read every
        /// page, so it judged removals), `max_pages` (there was more),
        /// `seen_before` (an incremental crawl reached what was stored) or
        /// `repeated_page` (a page repeated the one before it).
        paging_ended: Option<PagingEnd> = run.paging_ended,
        current_url: Option<String> = run.current_url,
        /// Why the last attempt failed, as a person reads it.
        error: Option<String> = run.error,
        /// Why the last attempt failed, as a program matches on it (null before
        /// a failure, and on failures recorded before kinds were).
        error_kind: Option<FailureKind> = run.error_kind,
        queued_at: DateTime<Utc> = run.queued_at,
        not_before: Option<DateTime<Utc>> = run.not_before,
        dispatched_at: Option<DateTime<Utc>> = run.dispatched_at,
        started_at: Option<DateTime<Utc>> = run.started_at,
        heartbeat_at: Option<DateTime<Utc>> = run.heartbeat_at,
        state_changed_at: DateTime<Utc> = run.state_changed_at,
        finished_at: Option<DateTime<Utc>> = run.finished_at,
        /// Once completed: `healthy`, or `degraded` when the run fell below its
        /// site's `expect` (null on other runs).
        health: Option<&'static str> = run.health.as_ref().map(RunHealth::as_str),
        /// Why a degraded run is degraded: every unmet expectation.
        health_reason: Option<String> = health_reason,
        /// Page requests the site refused during the run (each tried again
        /// after the fleet paused the site).
        refusals: i32 = run.refusals,
        /// A completed run that did not read all its pages: the first page it
        /// did not read (null when it read them all).
        stopped_at_url: Option<String> = stopped_at_url,
        /// Why it stopped there (null when it read them all).
        stop_reason: Option<StopReason> = stop_reason,
    }
}

view! {
    /// One attempt of a run (of the run whose id comes with it), as the API shows it.
    #[derive(Debug, Clone, Serialize, ToSchema)]
    #[schema(as = Attempt)]
    pub struct AttemptView from (of_run: (i64, Attempt)) {
        let (run_id, attempt) = of_run;
        let kept = |yes: bool, what: &str| {
            yes.then(|| format!("/api/runs/{run_id}/attempts/{}/{what}", attempt.attempt))
        };
        let html_url = kept(attempt.kept_html, "html");
        let screenshot_url = kept(attempt.kept_screenshot, "screenshot");
    } {
        attempt: i32 = attempt.attempt,
        worker_id: String = attempt.worker_id,
        started_at: DateTime<Utc> = attempt.started_at,
        ended_at: Option<DateTime<Utc>> = attempt.ended_at,
        /// completed, failed, released (handed back by a draining worker) or cancelled.
        outcome: Option<&'static str> = attempt.outcome.map(AttemptOutcome::as_str),
        reason: Option<String> = attempt.reason,
        /// Why the attempt failed, as a program matches on it.
        error_kind: Option<FailureKind> = attempt.error_kind,
        last_url: Option<String> = attempt.last_url,
        /// Where the HTML of the page the attempt failed on is (when kept).
        html_url: Option<String> = html_url,
        /// Where its screenshot is (browser mode, when kept).
        screenshot_url: Option<String> = screenshot_url,
    }
}

/// What asking for a crawl did, site by site.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = QueueOutcome)]
pub struct QueueOutcomeView {
    /// Runs queued now.
    pub queued: Vec<CrawlRunView>,
    /// Sites skipped because the period's result already exists.
    pub skipped: Vec<CrawlRunView>,
    /// Sites not queued again because a run of theirs is still active.
    pub already_active: Vec<CrawlRunView>,
    /// Sites of the keyword not queued because they are disabled.
    pub disabled_sites: Vec<i64>,
}

impl From<QueueOutcome> for QueueOutcomeView {
    fn from(outcome: QueueOutcome) -> Self {
        let view = |runs: Vec<CrawlRun>| runs.into_iter().map(CrawlRunView::from).collect();
        QueueOutcomeView {
            queued: view(outcome.queued),
            skipped: view(outcome.skipped),
            already_active: view(outcome.already_active),
            disabled_sites: outcome.disabled_sites,
        }
    }
}
