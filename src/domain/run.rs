//! The crawl run state machine (DESIGN.md, "Crawl run state machine").

use std::{fmt, str::FromStr};

use rand::Rng;
use serde::{Deserialize, Serialize};

/// Where a crawl run is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, utoipa::ToSchema)]
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
    pub fn as_str(self) -> &'static str {
        match self {
            Trigger::Manual => "manual",
            Trigger::Schedule => "schedule",
        }
    }
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
