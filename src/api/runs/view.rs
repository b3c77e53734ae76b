//! Runs as the API shows them: the store's domain runs mapped to the wire,
//! with the OpenAPI schemas clients generate code from.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{
    domain::{
        failure::FailureKind,
        page::PagingEnd,
        page::StopReason,
        run::{Attempt, AttemptOutcome, CrawlRun, RunHealth, RunState},
    },
    store::runs::QueueOutcome,
};

/// A stored crawl run, as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = CrawlRun)]
pub struct CrawlRunView {
    pub id: i64,
    pub keyword_id: i64,
    pub site_id: i64,
    pub state: RunState,
    /// manual or schedule.
    pub trigger: &'static str,
    pub priority: i32,
    pub attempt: i32,
    pub max_attempts: i32,
    pub worker_id: Option<String>,
    pub pages_crawled: i32,
    pub items_found: i32,
    /// Items its keyword/site had not stored (change tracking).
    pub items_new: i32,
    /// Items stored before that it found with other values.
    pub items_changed: i32,
    /// Items stored before that it did not find, having read every page.
    pub items_removed: i32,
    /// Why its paging ended, once it completed: `last_page` (it read every
    /// page, so it judged removals), `max_pages` (there was more) or
    /// `seen_before` (an incremental crawl reached what was stored).
    pub paging_ended: Option<PagingEnd>,
    pub current_url: Option<String>,
    /// Why the last attempt failed, as a person reads it.
    pub error: Option<String>,
    /// Why the last attempt failed, as a program matches on it (null before
    /// a failure, and on failures recorded before kinds were).
    pub error_kind: Option<FailureKind>,
    pub queued_at: DateTime<Utc>,
    pub not_before: Option<DateTime<Utc>>,
    pub dispatched_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub state_changed_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// Once completed: `healthy`, or `degraded` when the run fell below its
    /// site's `expect` (null on other runs).
    pub health: Option<&'static str>,
    /// Why a degraded run is degraded: every unmet expectation.
    pub health_reason: Option<String>,
    /// Page requests the site refused during the run (each tried again
    /// after the fleet paused the site).
    pub refusals: i32,
    /// A completed run that did not read all its pages: the first page it
    /// did not read (null when it read them all).
    pub stopped_at_url: Option<String>,
    /// Why it stopped there (null when it read them all).
    pub stop_reason: Option<StopReason>,
}

impl From<CrawlRun> for CrawlRunView {
    fn from(run: CrawlRun) -> Self {
        let (stopped_at_url, stop_reason) = match run.stopped_early {
            Some(stop) => (Some(stop.url), Some(stop.reason)),
            None => (None, None),
        };
        CrawlRunView {
            stopped_at_url,
            stop_reason,
            id: run.id,
            keyword_id: run.keyword_id,
            site_id: run.site_id,
            state: run.state,
            trigger: run.trigger.as_str(),
            priority: run.priority,
            attempt: run.attempt,
            max_attempts: run.max_attempts,
            worker_id: run.worker_id,
            pages_crawled: run.pages_crawled,
            items_found: run.items_found,
            items_new: run.items_new,
            items_changed: run.items_changed,
            items_removed: run.items_removed,
            paging_ended: run.paging_ended,
            current_url: run.current_url,
            error: run.error,
            error_kind: run.error_kind,
            queued_at: run.queued_at,
            not_before: run.not_before,
            dispatched_at: run.dispatched_at,
            started_at: run.started_at,
            heartbeat_at: run.heartbeat_at,
            state_changed_at: run.state_changed_at,
            finished_at: run.finished_at,
            health: run.health.as_ref().map(RunHealth::as_str),
            health_reason: run
                .health
                .as_ref()
                .and_then(RunHealth::reason)
                .map(str::to_owned),
            refusals: run.refusals,
        }
    }
}

/// One attempt of a run, as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = Attempt)]
pub struct AttemptView {
    pub attempt: i32,
    pub worker_id: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    /// completed, failed, released (handed back by a draining worker) or cancelled.
    pub outcome: Option<&'static str>,
    pub reason: Option<String>,
    /// Why the attempt failed, as a program matches on it.
    pub error_kind: Option<FailureKind>,
    pub last_url: Option<String>,
    /// Where the HTML of the page the attempt failed on is (when kept).
    pub html_url: Option<String>,
    /// Where its screenshot is (browser mode, when kept).
    pub screenshot_url: Option<String>,
}

impl AttemptView {
    /// Attempt `attempt` of run `run_id`.
    pub fn new(run_id: i64, attempt: Attempt) -> Self {
        let kept = |yes: bool, what: &str| {
            yes.then(|| format!("/api/runs/{run_id}/attempts/{}/{what}", attempt.attempt))
        };
        AttemptView {
            html_url: kept(attempt.kept_html, "html"),
            screenshot_url: kept(attempt.kept_screenshot, "screenshot"),
            attempt: attempt.attempt,
            worker_id: attempt.worker_id,
            started_at: attempt.started_at,
            ended_at: attempt.ended_at,
            outcome: attempt.outcome.map(AttemptOutcome::as_str),
            reason: attempt.reason,
            error_kind: attempt.error_kind,
            last_url: attempt.last_url,
        }
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
