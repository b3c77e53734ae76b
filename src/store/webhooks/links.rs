//! The API's paths, as the events recorded here link to them: the store
//! records every webhook event (in the transaction of its change), so it
//! hands the domain the paths of `api/` (which it may not import). A test of
//! the api GETs every link a run's webhooks carry.

use crate::domain::{change::Change, webhook::Links};

/// The paths of the API under `/api`.
pub struct ApiLinks;

impl Links for ApiLinks {
    fn run(&self, run_id: i64) -> String {
        format!("/api/runs/{run_id}")
    }

    fn run_results(&self, run_id: i64, change: Option<Change>) -> String {
        match change {
            Some(change) => format!("/api/results?run_id={run_id}&change={}", change.as_str()),
            None => format!("/api/results?run_id={run_id}"),
        }
    }

    fn site(&self, site_id: i64) -> String {
        format!("/api/sites/{site_id}")
    }

    fn site_health(&self, site_id: i64) -> String {
        format!("/api/sites/{site_id}/health")
    }

    fn keyword(&self, keyword_id: i64) -> String {
        format!("/api/keywords/{keyword_id}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::webhook::run_ending_bodies;

    /// Every kind of body a run's ending records, byte for byte, as receivers
    /// were sent them when the domain wrote the API's paths itself: one that
    /// verifies signatures or parses strictly sees no change but the one
    /// field added since, `url_list_id` (null on a keyword's run).
    #[test]
    fn run_ending_bodies_are_the_bytes_receivers_were_sent() {
        let bodies = run_ending_bodies(&ApiLinks);
        assert_eq!(bodies, GOLDEN_BODIES, "{bodies:#?}");
    }

    const GOLDEN_BODIES: [&str; 6] = [
        r#"{"type":"run.failed","timestamp":"2026-11-25T10:00:01.000Z","data":{"attempt":3,"error":"HTTP 404","error_kind":"http_status","finished_at":"2026-11-25T10:00:00Z","health":null,"health_reason":null,"items_changed":0,"items_found":0,"items_new":0,"items_removed":0,"keyword":"lamp","keyword_id":2,"links":{"keyword":"/api/keywords/2","results":"/api/results?run_id=7","run":"/api/runs/7","site":"/api/sites/3"},"max_attempts":3,"pages_crawled":1,"queued_at":"2026-11-25T10:00:00Z","refusals":0,"run_id":7,"site":"shop","site_id":3,"started_at":"2026-11-25T10:00:00Z","state":"failed","stopped_at_url":null,"trigger":"manual","url_list_id":null}}"#,
        r#"{"type":"run.degraded","timestamp":"2026-11-25T10:00:01.000Z","data":{"attempt":3,"error":"HTTP 404","error_kind":"http_status","finished_at":"2026-11-25T10:00:00Z","health":"degraded","health_reason":"found 0 items, expected at least 5","items_changed":0,"items_found":0,"items_new":1,"items_removed":1,"keyword":"lamp","keyword_id":2,"links":{"keyword":"/api/keywords/2","results":"/api/results?run_id=7","run":"/api/runs/7","site":"/api/sites/3"},"max_attempts":3,"pages_crawled":1,"queued_at":"2026-11-25T10:00:00Z","refusals":2,"run_id":7,"site":"shop","site_id":3,"started_at":"2026-11-25T10:00:00Z","state":"completed","stopped_at_url":"https://shop.example/?p=2","trigger":"manual","url_list_id":null}}"#,
        r#"{"type":"site.blocked","timestamp":"2026-11-25T10:00:01.000Z","data":{"links":{"health":"/api/sites/3/health","site":"/api/sites/3"},"reason":"HTTP 404","run":{"attempt":3,"error":"HTTP 404","error_kind":"http_status","finished_at":"2026-11-25T10:00:00Z","health":"degraded","health_reason":"found 0 items, expected at least 5","items_changed":0,"items_found":0,"items_new":1,"items_removed":1,"keyword":"lamp","keyword_id":2,"links":{"keyword":"/api/keywords/2","results":"/api/results?run_id=7","run":"/api/runs/7","site":"/api/sites/3"},"max_attempts":3,"pages_crawled":1,"queued_at":"2026-11-25T10:00:00Z","refusals":2,"run_id":7,"site":"shop","site_id":3,"started_at":"2026-11-25T10:00:00Z","state":"completed","stopped_at_url":"https://shop.example/?p=2","trigger":"manual","url_list_id":null},"site":"shop","site_id":3}}"#,
        r#"{"type":"site.recovered","timestamp":"2026-11-25T10:00:01.000Z","data":{"links":{"health":"/api/sites/3/health","site":"/api/sites/3"},"reason":"a run completed healthy","run":{"attempt":3,"error":"HTTP 404","error_kind":"http_status","finished_at":"2026-11-25T10:00:00Z","health":"degraded","health_reason":"found 0 items, expected at least 5","items_changed":0,"items_found":0,"items_new":1,"items_removed":1,"keyword":"lamp","keyword_id":2,"links":{"keyword":"/api/keywords/2","results":"/api/results?run_id=7","run":"/api/runs/7","site":"/api/sites/3"},"max_attempts":3,"pages_crawled":1,"queued_at":"2026-11-25T10:00:00Z","refusals":2,"run_id":7,"site":"shop","site_id":3,"started_at":"2026-11-25T10:00:00Z","state":"completed","stopped_at_url":"https://shop.example/?p=2","trigger":"manual","url_list_id":null},"site":"shop","site_id":3}}"#,
        r#"{"type":"items.new","timestamp":"2026-11-25T10:00:01.000Z","data":{"count":1,"items":[{"change":"new","fields":{"title":"Lamp"},"item_id":11,"item_url":"https://shop.example/11"}],"items_truncated":false,"keyword":"lamp","keyword_id":2,"links":{"results":"/api/results?run_id=7&change=new","run":"/api/runs/7"},"run_id":7,"site":"shop","site_id":3,"url_list_id":null}}"#,
        r#"{"type":"items.removed","timestamp":"2026-11-25T10:00:01.000Z","data":{"count":3,"items":[{"change":"removed","fields":{"title":"Lamp"},"item_id":12,"item_url":"https://shop.example/12"}],"items_truncated":true,"keyword":"lamp","keyword_id":2,"links":{"results":"/api/results?run_id=7&change=removed","run":"/api/runs/7"},"run_id":7,"site":"shop","site_id":3,"url_list_id":null}}"#,
    ];
}
