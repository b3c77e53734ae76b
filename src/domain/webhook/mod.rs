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

use super::{
    change::ChangeSummary,
    run::{RunHealth, RunState, SiteTransition},
    text_enum::text_enum,
};

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
        /// A verified repair of a site's selectors was proposed (or applied
        /// by the site's `repair: auto` policy). Raised by the repair, not by
        /// a run's end.
        SiteRepairProposed = "site.repair_proposed",
    }
}

impl WebhookEventType {
    /// The events a run's end raises, in the order they are recorded: the
    /// run ended in `state` with `health`, changed its site as `site` says
    /// (only when it did change it) and found `changes`. `run.completed` or
    /// `run.failed`; then `run.degraded`; `site.blocked` or `site.recovered`;
    /// `items.new`, `items.changed`, `items.removed` for each kind it found
    /// any of. Nothing for any other state (a retried attempt, a release, a
    /// cancel is no event).
    pub fn raised_by(
        state: RunState,
        health: Option<&RunHealth>,
        site: Option<SiteTransition>,
        changes: Option<&ChangeSummary>,
    ) -> Vec<Self> {
        let ended = match state {
            RunState::Completed => WebhookEventType::RunCompleted,
            RunState::Failed => WebhookEventType::RunFailed,
            _ => return Vec::new(),
        };
        let mut raised = vec![ended];
        if let Some(RunHealth::Degraded { .. }) = health {
            raised.push(WebhookEventType::RunDegraded);
        }
        raised.extend(site.map(|site| match site {
            SiteTransition::Blocked => WebhookEventType::SiteBlocked,
            SiteTransition::Recovered => WebhookEventType::SiteRecovered,
        }));
        if let Some(changes) = changes {
            for (event_type, count) in [
                (WebhookEventType::ItemsNew, changes.new),
                (WebhookEventType::ItemsChanged, changes.changed),
                (WebhookEventType::ItemsRemoved, changes.removed),
            ] {
                if count > 0 {
                    raised.push(event_type);
                }
            }
        }
        raised
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
    fn only_a_run_that_ended_completed_or_failed_raises_events() {
        let changes = ChangeSummary {
            new: 2,
            removed: 1,
            ..ChangeSummary::default()
        };
        let blocked = Some(SiteTransition::Blocked);
        for state in RunState::ALL {
            let raised = WebhookEventType::raised_by(state, None, blocked, Some(&changes));
            match state {
                RunState::Completed | RunState::Failed => assert!(!raised.is_empty(), "{state}"),
                _ => assert_eq!(raised, [], "{state}"),
            }
        }
    }

    #[test]
    fn a_run_end_raises_its_own_event_then_degraded_site_and_item_events() {
        use WebhookEventType::*;
        let degraded = RunHealth::Degraded {
            reason: "no items".to_owned(),
            blocked: true,
        };
        let changes = ChangeSummary {
            new: 2,
            removed: 1,
            ..ChangeSummary::default()
        };
        let cases = [
            (
                RunState::Completed,
                Some(&RunHealth::Healthy),
                None,
                None,
                vec![RunCompleted],
            ),
            (
                RunState::Completed,
                Some(&degraded),
                Some(SiteTransition::Blocked),
                Some(&changes),
                vec![
                    RunCompleted,
                    RunDegraded,
                    SiteBlocked,
                    ItemsNew,
                    ItemsRemoved,
                ],
            ),
            (
                RunState::Completed,
                Some(&RunHealth::Healthy),
                Some(SiteTransition::Recovered),
                Some(&ChangeSummary::default()),
                vec![RunCompleted, SiteRecovered],
            ),
            (
                RunState::Failed,
                None,
                Some(SiteTransition::Blocked),
                None,
                vec![RunFailed, SiteBlocked],
            ),
        ];
        for (state, health, site, changes, expected) in cases {
            assert_eq!(
                WebhookEventType::raised_by(state, health, site, changes),
                expected,
                "{state} {health:?} {site:?}"
            );
        }
    }
}
