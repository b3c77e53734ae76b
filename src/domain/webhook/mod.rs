//! Webhooks: endpoints that are told when something an operator cares about
//! happens (a run failed, a site is blocked...), signed as the Standard
//! Webhooks specification says (<https://www.standardwebhooks.com/>): the
//! events and a delivery's states (here), an endpoint and its rules
//! (`endpoint`), its secret and signing (`secret`), the events' payloads
//! (`event`), and the retry schedule of a delivery (`schedule`). No I/O: the
//! store keeps the outbox, the scheduler's leader sends.

mod endpoint;
mod event;
mod schedule;
mod secret;

use std::{fmt, str::FromStr};

use serde::{Deserialize, Serialize};

use super::run::RunState;
pub use endpoint::{Webhook, WebhookInput, WebhookSpec};
pub use event::{MessageId, WebhookEvent};
pub use schedule::RetrySchedule;
pub use secret::{MASKED_SECRET, WebhookSecret};

/// What an endpoint may be told about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum WebhookEventType {
    /// A run failed for good (its last attempt, or a failure no retry can mend).
    #[serde(rename = "run.failed")]
    RunFailed,
    /// A run completed.
    #[serde(rename = "run.completed")]
    RunCompleted,
    /// A run completed below its site's expectations (`expect`).
    #[serde(rename = "run.degraded")]
    RunDegraded,
    /// A site refuses the fleet (429, 503, block pages).
    #[serde(rename = "site.blocked")]
    SiteBlocked,
    /// A blocked site answers again.
    #[serde(rename = "site.recovered")]
    SiteRecovered,
    /// Items seen for the first time.
    #[serde(rename = "items.new")]
    ItemsNew,
    /// Items whose fields changed.
    #[serde(rename = "items.changed")]
    ItemsChanged,
    /// Items no longer found.
    #[serde(rename = "items.removed")]
    ItemsRemoved,
}

impl WebhookEventType {
    pub const ALL: [WebhookEventType; 8] = [
        WebhookEventType::RunFailed,
        WebhookEventType::RunCompleted,
        WebhookEventType::RunDegraded,
        WebhookEventType::SiteBlocked,
        WebhookEventType::SiteRecovered,
        WebhookEventType::ItemsNew,
        WebhookEventType::ItemsChanged,
        WebhookEventType::ItemsRemoved,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            WebhookEventType::RunFailed => "run.failed",
            WebhookEventType::RunCompleted => "run.completed",
            WebhookEventType::RunDegraded => "run.degraded",
            WebhookEventType::SiteBlocked => "site.blocked",
            WebhookEventType::SiteRecovered => "site.recovered",
            WebhookEventType::ItemsNew => "items.new",
            WebhookEventType::ItemsChanged => "items.changed",
            WebhookEventType::ItemsRemoved => "items.removed",
        }
    }

    /// The event of a run that just entered `state`: `run.completed` or
    /// `run.failed`; `None` for any other state (a retried attempt is no event).
    pub fn of_run_state(state: RunState) -> Option<Self> {
        match state {
            RunState::Completed => Some(WebhookEventType::RunCompleted),
            RunState::Failed => Some(WebhookEventType::RunFailed),
            _ => None,
        }
    }

    /// The names, as an error message lists them.
    fn names() -> String {
        Self::ALL.map(Self::as_str).join(", ")
    }
}

impl fmt::Display for WebhookEventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown webhook event type {0:?}")]
pub struct UnknownEventType(pub String);

impl FromStr for WebhookEventType {
    type Err = UnknownEventType;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownEventType(s.to_owned()))
    }
}

/// Where a delivery of a message to an endpoint is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryState {
    /// Waiting for its next attempt (the first, or a retry).
    Pending,
    /// The endpoint answered 2xx.
    Delivered,
    /// Every attempt of the retry schedule failed.
    Failed,
}

impl DeliveryState {
    pub const ALL: [DeliveryState; 3] = [
        DeliveryState::Pending,
        DeliveryState::Delivered,
        DeliveryState::Failed,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryState::Pending => "pending",
            DeliveryState::Delivered => "delivered",
            DeliveryState::Failed => "failed",
        }
    }
}

#[derive(Debug, thiserror::Error)]
#[error("unknown delivery state {0:?}")]
pub struct UnknownDeliveryState(pub String);

impl FromStr for DeliveryState {
    type Err = UnknownDeliveryState;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|t| t.as_str() == s)
            .ok_or_else(|| UnknownDeliveryState(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_round_trip_through_text_and_json() {
        for t in WebhookEventType::ALL {
            assert_eq!(t.as_str().parse::<WebhookEventType>().unwrap(), t);
            assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
        }
        for s in DeliveryState::ALL {
            assert_eq!(s.as_str().parse::<DeliveryState>().unwrap(), s);
        }
        assert!("run.finished".parse::<WebhookEventType>().is_err());
    }

    #[test]
    fn only_a_run_that_ended_completed_or_failed_is_an_event() {
        for state in RunState::ALL {
            let expected = match state {
                RunState::Completed => Some(WebhookEventType::RunCompleted),
                RunState::Failed => Some(WebhookEventType::RunFailed),
                _ => None,
            };
            assert_eq!(WebhookEventType::of_run_state(state), expected, "{state}");
        }
    }
}
