//! The crawl run state machine (docs/design.md, "Crawl run state machine").

use std::{fmt, str::FromStr};

use chrono::{DateTime, Utc};
use rand::Rng;
use serde::{Deserialize, Serialize};

use super::{failure::FailureKind, page::PagingEnd};

/// Where a crawl run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    /// Waiting in Postgres (and, once dispatched, in Redis).
    Queued,
    /// A worker claimed it.
    Running,
    /// A page request is in flight.
    UrlCall,
    /// A page came back and was extracted.
    CallDone,
    Completed,
    Failed,
    /// The period's result already existed.
    Skipped,
    Cancelled,
}

impl RunState {
    pub const ALL: [RunState; 8] = [
        RunState::Queued,
        RunState::Running,
        RunState::UrlCall,
        RunState::CallDone,
        RunState::Completed,
        RunState::Failed,
        RunState::Skipped,
        RunState::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Queued => "queued",
            RunState::Running => "running",
            RunState::UrlCall => "url_call",
            RunState::CallDone => "call_done",
            RunState::Completed => "completed",
            RunState::Failed => "failed",
            RunState::Skipped => "skipped",
            RunState::Cancelled => "cancelled",
        }
    }

    /// Active runs hold the keyword/site pair: at most one at a time.
    pub fn is_active(self) -> bool {
        matches!(
            self,
            RunState::Queued | RunState::Running | RunState::UrlCall | RunState::CallDone
        )
    }
}

impl fmt::Display for RunState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown run state {0:?}")]
pub struct UnknownRunState(pub String);

impl FromStr for RunState {
    type Err = UnknownRunState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunState::ALL
            .into_iter()
            .find(|state| state.as_str() == s)
            .ok_or_else(|| UnknownRunState(s.to_owned()))
    }
}

/// Why a run was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trigger {
    Manual,
    Schedule,
}

impl Trigger {
    pub const ALL: [Trigger; 2] = [Trigger::Manual, Trigger::Schedule];

    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Schedule => "schedule",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown trigger {0:?}")]
pub struct UnknownTrigger(pub String);

impl FromStr for Trigger {
    type Err = UnknownTrigger;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Trigger::ALL
            .into_iter()
            .find(|trigger| trigger.as_str() == s)
            .ok_or_else(|| UnknownTrigger(s.to_owned()))
    }
}

/// One crawl of one keyword on one site, through its attempts.
#[derive(Debug, Clone, PartialEq)]
pub struct CrawlRun {
    pub id: i64,
    pub keyword_id: i64,
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

/// Why a run stopped reading pages before its last one, and still completed
/// with what it read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The site's robots.txt disallows the next page for our user agent.
    RobotsDisallowed,
}

impl StopReason {
    pub const ALL: [StopReason; 1] = [StopReason::RobotsDisallowed];

    pub fn as_str(self) -> &'static str {
        match self {
            StopReason::RobotsDisallowed => "robots_disallowed",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown stop reason {0:?}")]
pub struct UnknownStopReason(pub String);

impl FromStr for StopReason {
    type Err = UnknownStopReason;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        StopReason::ALL
            .into_iter()
            .find(|reason| reason.as_str() == s)
            .ok_or_else(|| UnknownStopReason(s.to_owned()))
    }
}

/// The first page a completed run did not read, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EarlyStop {
    pub url: String,
    pub reason: StopReason,
}

/// How an attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptOutcome {
    Completed,
    Failed,
    /// Handed back to the queue by a draining worker; not counted against the run.
    Released,
    Cancelled,
}

impl AttemptOutcome {
    pub const ALL: [AttemptOutcome; 4] = [
        AttemptOutcome::Completed,
        AttemptOutcome::Failed,
        AttemptOutcome::Released,
        AttemptOutcome::Cancelled,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            AttemptOutcome::Completed => "completed",
            AttemptOutcome::Failed => "failed",
            AttemptOutcome::Released => "released",
            AttemptOutcome::Cancelled => "cancelled",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown attempt outcome {0:?}")]
pub struct UnknownAttemptOutcome(pub String);

impl FromStr for AttemptOutcome {
    type Err = UnknownAttemptOutcome;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        AttemptOutcome::ALL
            .into_iter()
            .find(|outcome| outcome.as_str() == s)
            .ok_or_else(|| UnknownAttemptOutcome(s.to_owned()))
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
        for reason in StopReason::ALL {
            assert_eq!(reason.as_str().parse::<StopReason>().unwrap(), reason);
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
