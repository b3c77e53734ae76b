//! Webhooks: endpoints that are told when something an operator cares about
//! happens (a run failed, a site is blocked...), signed as the Standard
//! Webhooks specification says (<https://www.standardwebhooks.com/>): the
//! events and a delivery's states (here), an endpoint and its rules
//! (`endpoint`), its secret and signing (`secret`), the events' payloads
//! (`event`) and the API paths they link to (`links`), and the retry schedule of a delivery (`schedule`). No I/O: the
//! store keeps the outbox, the scheduler's leader sends.

mod endpoint;
mod event;
mod links;
mod schedule;
mod secret;

use super::{run::RunState, text_enum::text_enum};

pub use endpoint::{Webhook, WebhookInput, WebhookSpec};
#[cfg(test)]
pub(crate) use event::tests::run_ending_bodies;
pub use event::{MessageId, WebhookEvent};
pub use links::Links;
pub use schedule::RetrySchedule;
pub use secret::{MASKED_SECRET, WebhookSecret};

text_enum! {
    /// What an endpoint may be told about.
    #[derive(PartialOrd, Ord)]
    pub enum WebhookEventType as "webhook event type" {
        /// A run failed for good (its last attempt, or a failure no retry can mend).
        RunFailed = "run.failed",
        /// A run completed.
        RunCompleted = "run.completed",
        /// A run completed below its site's expectations (`expect`).
        RunDegraded = "run.degraded",
        /// A site refuses the fleet (429, 503, block pages).
        SiteBlocked = "site.blocked",
        /// A blocked site answers again.
        SiteRecovered = "site.recovered",
        /// Items seen for the first time.
        ItemsNew = "items.new",
        /// Items whose fields changed.
        ItemsChanged = "items.changed",
        /// Items no longer found.
        ItemsRemoved = "items.removed",
    }
}

impl WebhookEventType {
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

text_enum! {
    /// Where a delivery of a message to an endpoint is.
    pub enum DeliveryState as "delivery state" {
        /// Waiting for its next attempt (the first, or a retry).
        Pending = "pending",
        /// The endpoint answered 2xx.
        Delivered = "delivered",
        /// Every attempt of the retry schedule failed.
        Failed = "failed",
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
