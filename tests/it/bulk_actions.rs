//! Many runs retried or cancelled at once, by id or by a listing's filters,
//! each through the single-run path: counted first (`dry_run`), refused runs
//! reported with why; and many sites and keywords enabled or disabled.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::support::{ON_DEMAND, Roles, TestApp, dispatch_and_claim};
use crawlfleet::{
    domain::failure::{Failure, FailureKind},
    store,
};

const WRITE_TOKEN: &str = "bulk-write-token";
const READ_TOKEN: &str = "bulk-read-token";

async fn app_with_tokens() -> TestApp {
    TestApp::spawn_without_browsers(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec![WRITE_TOKEN.into()];
        config.api.api_read_tokens = vec![READ_TOKEN.into()];
    })
    .await
}

/// Fails run `id` for good, as a worker would on a 404.
async fn fail(app: &TestApp, id: i64) {
    let fence = dispatch_and_claim(app.pool(), id, 1, "w")
        .await
        .expect("claimed")
        .fence;
    let failed = store::runs::fail_attempt(
        app.pool(),
        &fence,
        &Failure::new(FailureKind::HttpStatus, "HTTP 404"),
    )
    .await
    .unwrap();
    assert_eq!(failed.state.as_str(), "failed");
}

async fn state_of(app: &TestApp, id: i64) -> String {
    let (_, run) = app.get(&format!("/api/runs/{id}")).await;
    run["state"].as_str().unwrap().to_owned()
}

fn ids(outcome: &Value, key: &str) -> Vec<i64> {
    outcome[key]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect()
}

fn skipped(outcome: &Value) -> Vec<(i64, String)> {
    outcome["skipped"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["id"].as_i64().unwrap(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[tokio::test]
async fn failed_runs_are_retried_by_id_and_by_filter_counted_first_and_refusals_named() {
    let app = app_with_tokens().await;
    let site = app
        .one_page_site("shop", "/static?q={keyword}", json!({}))
        .await;
    let runs = app.queue_crawls(site, "kw", 4).await;
    for &run in &runs[..3] {
        fail(&app, run).await;
    }
    let queued = runs[3];

    // Counted first: three failed runs would be retried, none is.
    let (status, count) = app
        .post(
            "/api/runs/bulk",
            json!({"action": "retry", "filter": {"state": "failed", "site_id": site}, "dry_run": true}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{count}");
    assert_eq!(count["matched"], 3);
    assert_eq!(count["done"], 3);
    assert_eq!(count["dry_run"], true);
    for &run in &runs[..3] {
        assert_eq!(state_of(&app, run).await, "failed");
    }

    // By id: the failed one is queued again; the queued one and an unknown id are skipped, with why.
    let (status, outcome) = app
        .post(
            "/api/runs/bulk",
            json!({"action": "retry", "ids": [runs[0], queued, 999_999]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    assert_eq!(outcome["matched"], 3);
    assert_eq!(ids(&outcome, "done_ids"), vec![runs[0]]);
    assert_eq!(
        skipped(&outcome),
        vec![
            (queued, "not_retryable".to_owned()),
            (999_999, "not_found".to_owned())
        ]
    );
    let (_, retried) = app.get(&format!("/api/runs/{}", runs[0])).await;
    assert_eq!(retried["state"], "queued");
    assert_eq!(
        retried["attempt"], 2,
        "a fresh attempt, as a single retry gives"
    );

    // By filter: the two still failed.
    let (_, outcome) = app
        .post(
            "/api/runs/bulk",
            json!({"action": "retry", "filter": {"state": "failed"}}),
        )
        .await;
    assert_eq!(outcome["done"], 2, "{outcome}");
    let mut done = ids(&outcome, "done_ids");
    done.sort();
    assert_eq!(done, vec![runs[1], runs[2]]);
    for &run in &runs {
        assert_eq!(state_of(&app, run).await, "queued");
    }

    // Cancel: every queued run of the site; then again, each has ended.
    let (_, outcome) = app
        .post(
            "/api/runs/bulk",
            json!({"action": "cancel", "filter": {"site_id": site, "state": "queued"}}),
        )
        .await;
    assert_eq!(outcome["done"], 4, "{outcome}");
    let (_, again) = app
        .post(
            "/api/runs/bulk",
            json!({"action": "cancel", "ids": [runs[0]]}),
        )
        .await;
    assert_eq!(again["done"], 0);
    assert_eq!(skipped(&again), vec![(runs[0], "already_ended".to_owned())]);
    assert_eq!(state_of(&app, runs[0]).await, "cancelled");
    app.finish().await;
}

#[tokio::test]
async fn a_bulk_request_names_the_field_at_fault_and_needs_a_write_token() {
    let app = app_with_tokens().await;
    let too_many: Vec<i64> = (1..=501).collect();
    for (body, field) in [
        (json!({"action": "retry"}), "ids"),
        (json!({"action": "retry", "ids": []}), "ids"),
        (json!({"action": "retry", "ids": too_many}), "ids"),
        (
            json!({"action": "retry", "ids": [1], "filter": {}}),
            "filter",
        ),
    ] {
        let (status, error) = app.post("/api/runs/bulk", body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
        assert_eq!(error["error"]["field"], field, "{error}");
    }
    for (path, body, field) in [
        ("/api/sites/enabled", json!({"enabled": false}), "ids"),
        (
            "/api/keywords/enabled",
            json!({"enabled": false, "ids": [1], "all": true}),
            "all",
        ),
    ] {
        let (status, error) = app.post(path, body).await;
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY, "{error}");
        assert_eq!(error["error"]["field"], field, "{error}");
    }
    let (status, _) = app
        .post("/api/runs/bulk", json!({"action": "launch", "ids": [1]}))
        .await;
    assert!(status.is_client_error(), "{status}");

    for (path, body) in [
        ("/api/runs/bulk", json!({"action": "retry", "ids": [1]})),
        ("/api/sites/enabled", json!({"enabled": false, "all": true})),
        (
            "/api/keywords/enabled",
            json!({"enabled": false, "all": true}),
        ),
    ] {
        let status = app
            .http
            .post(format!("{}{path}", app.base))
            .bearer_auth(READ_TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap()
            .status();
        assert_eq!(status, StatusCode::FORBIDDEN, "{path}");
    }
    app.finish().await;
}

#[tokio::test]
async fn sites_and_keywords_are_disabled_and_enabled_together() {
    let app = app_with_tokens().await;
    let a = app
        .one_page_site("a", "/static?q={keyword}", json!({}))
        .await;
    let b = app
        .one_page_site("b", "/static?q={keyword}", json!({}))
        .await;
    let kw = app.create_keyword("desk", &[a, b], ON_DEMAND).await;

    let (_, count) = app
        .post(
            "/api/sites/enabled",
            json!({"enabled": false, "all": true, "dry_run": true}),
        )
        .await;
    assert_eq!(count["changed"], 2, "{count}");
    let (_, site) = app.get(&format!("/api/sites/{a}")).await;
    assert_eq!(site["enabled"], true, "a dry run changes nothing");
    let versions = |site: i64| {
        let app = &app;
        async move {
            let (_, page) = app.get(&format!("/api/sites/{site}/versions")).await;
            page["items"].as_array().unwrap().len()
        }
    };
    let before = versions(a).await;

    let (status, outcome) = app
        .post(
            "/api/sites/enabled",
            json!({"enabled": false, "ids": [a, b, 424_242]}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{outcome}");
    assert_eq!(ids(&outcome, "changed_ids"), vec![a, b]);
    assert_eq!(ids(&outcome, "not_found"), vec![424_242]);
    let (_, site) = app.get(&format!("/api/sites/{a}")).await;
    assert_eq!(site["enabled"], false);
    assert_eq!(
        versions(a).await,
        before + 1,
        "each change is a version of its site"
    );
    // Disabled sites are not queued.
    let (_, crawl) = app
        .post(&format!("/api/keywords/{kw}/crawl"), json!({}))
        .await;
    assert_eq!(crawl["queued"].as_array().unwrap().len(), 0, "{crawl}");

    let (_, outcome) = app
        .post("/api/sites/enabled", json!({"enabled": true, "ids": [a]}))
        .await;
    assert_eq!(ids(&outcome, "changed_ids"), vec![a]);
    let (_, outcome) = app
        .post("/api/sites/enabled", json!({"enabled": true, "all": true}))
        .await;
    assert_eq!(ids(&outcome, "changed_ids"), vec![b]);
    assert_eq!(ids(&outcome, "unchanged_ids"), vec![a]);

    let (_, outcome) = app
        .post(
            "/api/keywords/enabled",
            json!({"enabled": false, "ids": [kw]}),
        )
        .await;
    assert_eq!(ids(&outcome, "changed_ids"), vec![kw], "{outcome}");
    let (_, keyword) = app.get(&format!("/api/keywords/{kw}")).await;
    assert_eq!(keyword["enabled"], false);
    let (_, outcome) = app
        .post(
            "/api/keywords/enabled",
            json!({"enabled": true, "all": true}),
        )
        .await;
    assert_eq!(ids(&outcome, "changed_ids"), vec![kw]);
    let (_, keyword) = app.get(&format!("/api/keywords/{kw}")).await;
    assert_eq!(keyword["enabled"], true);
    app.finish().await;
}

#[tokio::test]
async fn of_two_failed_runs_of_one_keyword_and_site_one_is_retried_the_other_skipped_as_the_pair_is_active()
 {
    let app = app_with_tokens().await;
    let site = app
        .one_page_site("shop", "/static?q={keyword}", json!({}))
        .await;
    let keyword = app.create_keyword("lamp", &[site], ON_DEMAND).await;
    let first = app.crawl(keyword).await[0];
    fail(&app, first).await;
    let second = app.crawl(keyword).await[0];
    fail(&app, second).await;

    let (_, outcome) = app
        .post(
            "/api/runs/bulk",
            json!({"action": "retry", "filter": {"keyword_id": keyword}}),
        )
        .await;
    // Newest first: the second is queued again, which holds the pair.
    assert_eq!(ids(&outcome, "done_ids"), vec![second], "{outcome}");
    assert_eq!(skipped(&outcome), vec![(first, "pair_active".to_owned())]);
    assert_eq!(state_of(&app, first).await, "failed");
    app.finish().await;
}
