//! Runs as the API shows them: the store's domain runs mapped to the wire,
//! with the OpenAPI schemas clients generate code from.

use std::borrow::Cow;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{
    PartialSchema, ToSchema,
    openapi::{
        RefOr, Schema,
        schema::{ObjectBuilder, Type},
    },
};

use crate::{
    domain::{
        failure::FailureKind,
        page::PagingEnd,
        run::{Attempt, AttemptOutcome, CrawlRun, RunHealth, RunState, StopReason},
    },
    store::runs::QueueOutcome,
};

/// A run's state on the wire: the domain's [`RunState`], whose OpenAPI
/// schema is the enum of its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunStateView(pub RunState);

impl Serialize for RunStateView {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for RunStateView {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        name.parse()
            .map(RunStateView)
            .map_err(serde::de::Error::custom)
    }
}

impl PartialSchema for RunStateView {
    fn schema() -> RefOr<Schema> {
        names_schema(
            RunState::ALL.map(RunState::as_str),
            "Where a crawl run is in its life (docs/design.md, \"Crawl run state machine\").",
        )
    }
}

impl ToSchema for RunStateView {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("RunState")
    }
}

/// Why an attempt failed, on the wire: the domain's [`FailureKind`], whose
/// OpenAPI schema is the enum of its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorKindView(pub FailureKind);

impl Serialize for ErrorKindView {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.as_str())
    }
}

impl<'de> Deserialize<'de> for ErrorKindView {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let name = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
        name.parse()
            .map(ErrorKindView)
            .map_err(serde::de::Error::custom)
    }
}

impl PartialSchema for ErrorKindView {
    fn schema() -> RefOr<Schema> {
        names_schema(
            FailureKind::ALL.map(FailureKind::as_str),
            "Why an attempt failed: stuck (no answer within the stuck timeout), worker_lost, \
             browser_crashed, network, site_error (5xx, 408), http_status (4xx), blocked (429, \
             503 or a block page on every try), target_refused (SSRF guard), unreadable_page, \
             page_too_large, no_items (a first page without items on a site that expects them), \
             misconfigured, internal, cancelled, robots_disallowed (the site's robots.txt \
             disallows the first page for our user agent; the page was not fetched), \
             extraction_over_budget (reading a page took more than EXTRACT_BUDGET_MS: the \
             site's selectors cost too much there; not retried).",
        )
    }
}

impl ToSchema for ErrorKindView {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("ErrorKind")
    }
}

/// Why a completed run stopped before its last page, on the wire: the
/// domain's [`StopReason`], whose OpenAPI schema is the enum of its names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StopReasonView(pub StopReason);

impl Serialize for StopReasonView {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.0.as_str())
    }
}

impl PartialSchema for StopReasonView {
    fn schema() -> RefOr<Schema> {
        names_schema(
            StopReason::ALL.map(StopReason::as_str),
            "Why a completed run stopped before its last page: robots_disallowed (the site's \
             robots.txt disallows the next page for our user agent; it was not fetched).",
        )
    }
}

impl ToSchema for StopReasonView {
    fn name() -> Cow<'static, str> {
        Cow::Borrowed("StopReason")
    }
}

/// The schema of a string that is one of `names`.
pub(in crate::api) fn names_schema<const N: usize>(
    names: [&'static str; N],
    description: &str,
) -> RefOr<Schema> {
    ObjectBuilder::new()
        .schema_type(Type::String)
        .enum_values(Some(names))
        .description(Some(description))
        .into()
}

/// A stored crawl run, as the API shows it.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = CrawlRun)]
pub struct CrawlRunView {
    pub id: i64,
    pub keyword_id: i64,
    pub site_id: i64,
    pub state: RunStateView,
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
    pub paging_ended: Option<PagingEndView>,
    pub current_url: Option<String>,
    /// Why the last attempt failed, as a person reads it.
    pub error: Option<String>,
    /// Why the last attempt failed, as a program matches on it (null before
    /// a failure, and on failures recorded before kinds were).
    pub error_kind: Option<ErrorKindView>,
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
    pub stop_reason: Option<StopReasonView>,
}

impl From<CrawlRun> for CrawlRunView {
    fn from(run: CrawlRun) -> Self {
        let (stopped_at_url, stop_reason) = match run.stopped_early {
            Some(stop) => (Some(stop.url), Some(StopReasonView(stop.reason))),
            None => (None, None),
        };
        CrawlRunView {
            stopped_at_url,
            stop_reason,
            id: run.id,
            keyword_id: run.keyword_id,
            site_id: run.site_id,
            state: RunStateView(run.state),
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
            paging_ended: run.paging_ended.map(PagingEndView::from),
            current_url: run.current_url,
            error: run.error,
            error_kind: run.error_kind.map(ErrorKindView),
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

/// Why a completed run's paging ended.
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
#[schema(as = PagingEnd)]
pub enum PagingEndView {
    LastPage,
    MaxPages,
    SeenBefore,
    /// robots.txt disallows the next page (`stopped_at_url`).
    Disallowed,
    /// The run holds as many items as a run may keep (`RUN_MAX_ITEMS`).
    ItemCap,
}

impl From<PagingEnd> for PagingEndView {
    fn from(end: PagingEnd) -> Self {
        match end {
            PagingEnd::LastPage => PagingEndView::LastPage,
            PagingEnd::MaxPages => PagingEndView::MaxPages,
            PagingEnd::SeenBefore => PagingEndView::SeenBefore,
            PagingEnd::Disallowed => PagingEndView::Disallowed,
            PagingEnd::ItemCap => PagingEndView::ItemCap,
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
    pub error_kind: Option<ErrorKindView>,
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
            error_kind: attempt.error_kind.map(ErrorKindView),
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
