//! The crawl run state machine (docs/design.md, "Crawl run state machine"):
//! a run, its states and its attempts (here), and every move between the
//! states, decided as a value the store applies guarded (`transition`).

mod transition;

pub use transition::{SiteTransition, Transition, rescued_as};

use chrono::{DateTime, Utc};
use rand::Rng;

use super::{
    failure::FailureKind,
    page::{EarlyStop, PagingEnd},
    text_enum::text_enum,
};

text_enum! {
    /// Where a crawl run is in its life.
    pub enum RunState as "run state" {
        /// Waiting in Postgres (and, once dispatched, in Redis).
        Queued = "queued",
        /// A worker claimed it.
        Running = "running",
        /// A page request is in flight.
        UrlCall = "url_call",
        /// A page came back and was extracted.
        CallDone = "call_done",
        Completed = "completed",
        Failed = "failed",
        /// The period's result already existed.
        Skipped = "skipped",
        Cancelled = "cancelled",
    }
}

impl RunState {
    /// Active runs hold the keyword/site pair: at most one at a time.
    pub fn is_active(self) -> bool {
        RunState::ACTIVE.contains(&self)
    }
}

text_enum! {
    /// Why a run was queued.
    pub enum Trigger as "trigger" {
        Manual = "manual",
        Schedule = "schedule",
    }
}

/// One crawl of one keyword on one site, or of one URL list (which belongs
/// to one site), through its attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct CrawlRun {
    pub id: i64,
    /// The keyword searched; `None` for a URL list's run.
    pub keyword_id: Option<i64>,
    /// The URL list read; `None` for a keyword's run (exactly one is set).
    pub url_list_id: Option<i64>,
    /// A list run's period: its entries not read since then are read.
    pub period_start: Option<DateTime<Utc>>,
    /// A list run's URLs whose page could not be read (each recorded on its entry).
    pub urls_failed: i32,
    /// The site version the run crawled with, recorded when it was claimed
    /// (`None` before, and on runs claimed before versions were recorded).
    pub site_version: Option<i32>,
    pub site_id: i64,
    pub state: RunState,
    pub trigger: Trigger,
    pub priority: i32,
    /// The current attempt (the last one, once the run ended).
    pub attempt: i32,
    pub max_attempts: i32,
    pub worker_id: Option<String>,
    pub pages_crawled: i32,
    pub items_found: i32,
    /// Items the run found that its keyword/site had not stored (change tracking).
    pub items_new: i32,
    /// Items stored before that it found with other values.
    pub items_changed: i32,
    /// Items stored before that it did not find, having read every page.
    pub items_removed: i32,
    /// Why its paging ended (`None` until it completes): only a run that
    /// reached the last page judges removals.
    pub paging_ended: Option<PagingEnd>,
    pub current_url: Option<String>,
    /// Why the last attempt failed, as a person reads it.
    pub error: Option<String>,
    /// Why the last attempt failed, as a program matches on it (`None` for
    /// failures recorded before kinds were).
    pub error_kind: Option<FailureKind>,
    pub queued_at: DateTime<Utc>,
    pub not_before: Option<DateTime<Utc>>,
    pub dispatched_at: Option<DateTime<Utc>>,
    pub started_at: Option<DateTime<Utc>>,
    pub heartbeat_at: Option<DateTime<Utc>>,
    pub state_changed_at: DateTime<Utc>,
    pub finished_at: Option<DateTime<Utc>>,
    /// How the run measured up to its site's expectations, once completed.
    pub health: Option<RunHealth>,
    /// Page requests the site refused during the run (each tried again).
    pub refusals: i32,
    /// A completed run that did not read all its pages: where it stopped and why.
    pub stopped_early: Option<EarlyStop>,
}

/// How a completed run measured up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunHealth {
    Healthy,
    Degraded {
        /// Every unmet expectation, as a person reads it.
        reason: String,
        /// The site's refusals are why: it is blocking us.
        blocked: bool,
    },
}

impl RunHealth {
    pub fn as_str(&self) -> &'static str {
        match self {
            RunHealth::Healthy => "healthy",
            RunHealth::Degraded { .. } => "degraded",
        }
    }

    pub fn reason(&self) -> Option<&str> {
        match self {
            RunHealth::Healthy => None,
            RunHealth::Degraded { reason, .. } => Some(reason),
        }
    }
}

text_enum! {
    /// How an attempt ended.
    pub enum AttemptOutcome as "attempt outcome" {
        Completed = "completed",
        Failed = "failed",
        /// Handed back to the queue by a draining worker; not counted against the run.
        Released = "released",
        Cancelled = "cancelled",
    }
}

/// One attempt of a run: which worker, when, and how it ended.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub attempt: i32,
    pub worker_id: String,
    pub started_at: DateTime<Utc>,
    pub ended_at: Option<DateTime<Utc>>,
    pub outcome: Option<AttemptOutcome>,
    pub reason: Option<String>,
    pub error_kind: Option<FailureKind>,
    pub last_url: Option<String>,
    /// What the worker kept of the page the attempt failed on.
    pub kept_html: bool,
    pub kept_screenshot: bool,
}

/// Delay before attempt `next_attempt` of a failed run: exponential from 2 s,
/// capped at 5 minutes, with up to 50% random jitter so retries of many runs
/// that failed together (a site down) do not return together.
pub fn retry_backoff(next_attempt: i32) -> std::time::Duration {
    let exp = (next_attempt - 2).clamp(0, 16) as u32;
    let base_ms = (2_000u64 << exp).min(300_000);
    let jitter = rand::rng().random_range(0..=base_ms / 2);
    std::time::Duration::from_millis(base_ms + jitter)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_through_text() {
        for state in RunState::ALL {
            assert_eq!(state.as_str().parse::<RunState>().unwrap(), state);
        }
        assert!("done".parse::<RunState>().is_err());
        for trigger in Trigger::ALL {
            assert_eq!(trigger.as_str().parse::<Trigger>().unwrap(), trigger);
        }
        for outcome in AttemptOutcome::ALL {
            assert_eq!(outcome.as_str().parse::<AttemptOutcome>().unwrap(), outcome);
        }
    }

    #[test]
    fn backoff_grows_and_is_capped() {
        let second = retry_backoff(2).as_millis();
        assert!((2_000..=3_000).contains(&second), "{second}");
        let third = retry_backoff(3).as_millis();
        assert!((4_000..=6_000).contains(&third), "{third}");
        assert!(retry_backoff(40).as_millis() <= 450_000);
    }
}
