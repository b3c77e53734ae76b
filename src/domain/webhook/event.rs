//! What happened, as an endpoint is told: the event's type, the site and
//! keyword it concerns (what endpoints filter on), and its data. The body
//! sent is the Standard Webhooks shape `{"type", "timestamp", "data"}`,
//! written once when the event is recorded, so every retry sends (and
//! signs) the same bytes.

use chrono::{DateTime, SecondsFormat, Utc};
use serde::Serialize;
use serde_json::{Value, json};

use super::{Links, WebhookEventType};
use crate::domain::{
    change::{Change, ChangeSummary, ItemChange},
    run::{CrawlRun, RunHealth},
};

/// The `webhook-id` of a message: the same on every attempt, so a receiver
/// that saw it already can drop a repeat.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MessageId(pub String);

impl MessageId {
    /// A new id: `msg_` and 128 random bits.
    pub fn generate() -> Self {
        let bits: u128 = rand::random();
        MessageId(format!("msg_{bits:032x}"))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

/// An event to record: who is told is decided by the endpoints' events and
/// filters when it is recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct WebhookEvent {
    pub event_type: WebhookEventType,
    /// The site it concerns; endpoints filtering on sites see only theirs.
    pub site_id: Option<i64>,
    /// The keyword it concerns; an event without one passes keyword filters.
    pub keyword_id: Option<i64>,
    /// The event's own fields (the body's `data`).
    pub data: Value,
}

/// The body of a message.
#[derive(Serialize)]
struct Body<'a> {
    r#type: &'static str,
    timestamp: String,
    data: &'a Value,
}

impl WebhookEvent {
    /// The body sent for this event, recorded at `at`.
    pub fn body(&self, at: DateTime<Utc>) -> String {
        serde_json::to_string(&Body {
            r#type: self.event_type.as_str(),
            timestamp: at.to_rfc3339_opts(SecondsFormat::Millis, true),
            data: &self.data,
        })
        .expect("JSON values serialize")
    }

    /// The event `event_type` (see [`WebhookEventType::raised_by`]) of a
    /// run that just ended; `keyword` and `site` are the names as they are now.
    pub fn run_ended(
        event_type: WebhookEventType,
        run: &CrawlRun,
        keyword: &str,
        site: &str,
        links: &dyn Links,
    ) -> WebhookEvent {
        WebhookEvent {
            event_type,
            site_id: Some(run.site_id),
            keyword_id: run.keyword_id,
            data: run_data(run, keyword, site, links),
        }
    }

    /// `run.degraded`: a completed run below its site's expectations, with
    /// every unmet one (`health_reason`).
    pub fn run_degraded(
        run: &CrawlRun,
        keyword: &str,
        site: &str,
        links: &dyn Links,
    ) -> WebhookEvent {
        WebhookEvent::run_ended(WebhookEventType::RunDegraded, run, keyword, site, links)
    }

    /// `site.blocked` or `site.recovered` (`blocked`: which), told by the
    /// run that changed it; about the site, so it passes keyword filters.
    pub fn site_changed(
        blocked: bool,
        run: &CrawlRun,
        keyword: &str,
        site: &str,
        links: &dyn Links,
    ) -> WebhookEvent {
        let (event_type, why) = match blocked {
            true => (
                WebhookEventType::SiteBlocked,
                match (&run.error, run.health.as_ref().and_then(RunHealth::reason)) {
                    (Some(error), _) => error.clone(),
                    (None, Some(reason)) => reason.to_owned(),
                    (None, None) => format!("the site refused {} page request(s)", run.refusals),
                },
            ),
            false => (
                WebhookEventType::SiteRecovered,
                "a run completed healthy".to_owned(),
            ),
        };
        WebhookEvent {
            event_type,
            site_id: Some(run.site_id),
            keyword_id: None,
            data: json!({
                "site_id": run.site_id,
                "site": site,
                "reason": why,
                "run": run_data(run, keyword, site, links),
                "links": {
                    "site": links.site(run.site_id),
                    "health": links.site_health(run.site_id),
                },
            }),
        }
    }

    /// `items.new`, `items.changed` and `items.removed` of a completed run:
    /// one event per kind it found any of, each with the count and (up to
    /// `CHANGE_SAMPLES`) the items with their diffs.
    pub fn items_found(
        run: &CrawlRun,
        keyword: &str,
        site: &str,
        changes: &ChangeSummary,
        links: &dyn Links,
    ) -> Vec<WebhookEvent> {
        [
            (WebhookEventType::ItemsNew, Change::New, changes.new),
            (
                WebhookEventType::ItemsChanged,
                Change::Changed,
                changes.changed,
            ),
            (
                WebhookEventType::ItemsRemoved,
                Change::Removed,
                changes.removed,
            ),
        ]
        .into_iter()
        .filter(|(_, _, count)| *count > 0)
        .map(|(event_type, change, count)| {
            let items: Vec<&ItemChange> = changes
                .samples
                .iter()
                .filter(|item| item.change == change)
                .collect();
            let id = run.id;
            WebhookEvent {
                event_type,
                site_id: Some(run.site_id),
                keyword_id: run.keyword_id,
                data: json!({
                    "run_id": id,
                    "keyword_id": run.keyword_id,
                    "url_list_id": run.url_list_id,
                    "keyword": keyword,
                    "site_id": run.site_id,
                    "site": site,
                    "count": count,
                    "items": items,
                    "items_truncated": (items.len() as i64) < i64::from(count),
                    "links": {
                        "run": links.run(id),
                        "results": links.run_results(id, Some(change)),
                    },
                }),
            }
        })
        .collect()
    }

    /// A sample of `event_type` for endpoint `webhook_id`'s test: marked
    /// `"test": true`, about no real site or keyword.
    pub fn sample(event_type: WebhookEventType, webhook_id: i64) -> WebhookEvent {
        WebhookEvent {
            event_type,
            site_id: None,
            keyword_id: None,
            data: json!({
                "test": true,
                "webhook_id": webhook_id,
                "message": format!(
                    "a test of webhook {webhook_id}: crawlfleet sends {event_type} events here"
                ),
            }),
        }
    }
}

/// A run's fields as its events carry them, with the API paths to read more.
fn run_data(run: &CrawlRun, keyword: &str, site: &str, links: &dyn Links) -> Value {
    let id = run.id;
    json!({
        "run_id": id,
        "state": run.state,
        "keyword_id": run.keyword_id,
        "url_list_id": run.url_list_id,
        "keyword": keyword,
        "site_id": run.site_id,
        "site": site,
        "trigger": run.trigger,
        "attempt": run.attempt,
        "max_attempts": run.max_attempts,
        "pages_crawled": run.pages_crawled,
        "items_found": run.items_found,
        "error_kind": run.error_kind,
        "error": run.error,
        "queued_at": run.queued_at,
        "started_at": run.started_at,
        "finished_at": run.finished_at,
        "health": run.health.as_ref().map(RunHealth::as_str),
        "health_reason": run.health.as_ref().and_then(RunHealth::reason),
        "refusals": run.refusals,
        "items_new": run.items_new,
        "items_changed": run.items_changed,
        "items_removed": run.items_removed,
        "stopped_at_url": run.stopped_early.as_ref().map(|stop| &stop.url),
        "links": {
            "run": links.run(id),
            "results": links.run_results(id, None),
            "site": links.site(run.site_id),
            "keyword": run.keyword_id.map(|id| links.keyword(id)),
        },
    })
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::domain::{
        failure::FailureKind,
        run::{RunState, Trigger},
    };

    fn run(state: RunState) -> CrawlRun {
        let at = "2026-11-25T10:00:00Z".parse().unwrap();
        CrawlRun {
            id: 7,
            keyword_id: Some(2),
            url_list_id: None,
            period_start: None,
            urls_failed: 0,
            site_version: None,
            site_id: 3,
            state,
            trigger: Trigger::Manual,
            priority: 0,
            attempt: 3,
            max_attempts: 3,
            worker_id: None,
            pages_crawled: 1,
            items_found: 0,
            current_url: None,
            error: Some("HTTP 404".into()),
            error_kind: Some(FailureKind::HttpStatus),
            queued_at: at,
            not_before: None,
            dispatched_at: None,
            started_at: Some(at),
            heartbeat_at: None,
            state_changed_at: at,
            finished_at: Some(at),
            items_new: 0,
            items_changed: 0,
            items_removed: 0,
            paging_ended: None,
            health: None,
            refusals: 0,
            stopped_early: None,
        }
    }

    #[test]
    fn the_body_is_type_timestamp_and_data_in_that_order() {
        let event = WebhookEvent::run_ended(
            WebhookEventType::RunFailed,
            &run(RunState::Failed),
            "lamp",
            "shop",
            &Named,
        );
        let at = "2026-11-25T10:00:01.5Z".parse().unwrap();
        let body = event.body(at);
        assert!(
            body.starts_with(
                r#"{"type":"run.failed","timestamp":"2026-11-25T10:00:01.500Z","data":{"#
            ),
            "{body}"
        );
        let data: Value = serde_json::from_str::<Value>(&body).unwrap()["data"].clone();
        assert_eq!(data["run_id"], 7);
        assert_eq!(data["keyword"], "lamp");
        assert_eq!(data["site"], "shop");
        assert_eq!(data["state"], "failed");
        assert_eq!(data["error_kind"], "http_status");
        assert_eq!(data["links"]["run"], "run 7");
    }

    /// The body of every kind of event a run's ending records, at one
    /// instant, with `links`: the store's test holds them to the bytes
    /// receivers were sent (`store::webhooks::links`).
    pub(crate) fn run_ending_bodies(links: &dyn Links) -> Vec<String> {
        let mut degraded = run(RunState::Completed);
        degraded.health = Some(RunHealth::Degraded {
            reason: "found 0 items, expected at least 5".into(),
            blocked: true,
        });
        degraded.refusals = 2;
        degraded.items_new = 1;
        degraded.items_removed = 1;
        degraded.stopped_early = Some(crate::domain::page::EarlyStop {
            url: "https://shop.example/?p=2".into(),
            reason: crate::domain::page::StopReason::RobotsDisallowed,
        });
        let item = |item_id, change| ItemChange {
            item_id,
            change,
            item_url: Some(format!("https://shop.example/{item_id}")),
            fields: serde_json::json!({"title": "Lamp"}),
            diff: None,
        };
        let changes = ChangeSummary {
            new: 1,
            changed: 0,
            removed: 3,
            removals_judged: true,
            samples: vec![item(11, Change::New), item(12, Change::Removed)],
        };
        let at = "2026-11-25T10:00:01Z".parse().unwrap();
        let failed = run(RunState::Failed);
        let mut events = vec![
            WebhookEvent::run_ended(WebhookEventType::RunFailed, &failed, "lamp", "shop", links),
            WebhookEvent::run_degraded(&degraded, "lamp", "shop", links),
            WebhookEvent::site_changed(true, &degraded, "lamp", "shop", links),
            WebhookEvent::site_changed(false, &degraded, "lamp", "shop", links),
        ];
        events.extend(WebhookEvent::items_found(
            &degraded, "lamp", "shop", &changes, links,
        ));
        events.iter().map(|event| event.body(at)).collect()
    }

    /// Links that name what they link to, so a test sees which went where.
    struct Named;

    impl Links for Named {
        fn run(&self, run_id: i64) -> String {
            format!("run {run_id}")
        }
        fn run_results(&self, run_id: i64, change: Option<Change>) -> String {
            format!("results of run {run_id} {change:?}")
        }
        fn site(&self, site_id: i64) -> String {
            format!("site {site_id}")
        }
        fn site_health(&self, site_id: i64) -> String {
            format!("health of site {site_id}")
        }
        fn keyword(&self, keyword_id: i64) -> String {
            format!("keyword {keyword_id}")
        }
    }

    #[test]
    fn each_link_of_an_event_is_the_one_its_links_give_for_its_subject() {
        let bodies: Vec<Value> = run_ending_bodies(&Named)
            .iter()
            .map(|body| serde_json::from_str::<Value>(body).unwrap()["data"].clone())
            .collect();
        let run_links = serde_json::json!({
            "run": "run 7", "results": "results of run 7 None",
            "site": "site 3", "keyword": "keyword 2",
        });
        assert_eq!(bodies[0]["links"], run_links);
        assert_eq!(bodies[1]["links"], run_links);
        for site_event in &bodies[2..4] {
            assert_eq!(
                site_event["links"],
                serde_json::json!({"site": "site 3", "health": "health of site 3"})
            );
            assert_eq!(site_event["run"]["links"], run_links);
        }
        assert_eq!(
            bodies[4]["links"],
            serde_json::json!({"run": "run 7", "results": "results of run 7 Some(New)"})
        );
        assert_eq!(
            bodies[5]["links"],
            serde_json::json!({"run": "run 7", "results": "results of run 7 Some(Removed)"})
        );
    }

    #[test]
    fn message_ids_are_unique_and_prefixed() {
        let a = MessageId::generate();
        assert!(a.as_str().starts_with("msg_") && a.as_str().len() == 36);
        assert_ne!(a, MessageId::generate());
    }
}
