//! What an operator reads to see a site breaking: a site's health, and the
//! runs that failed one way, in a time window.

use crawlfleet::{
    domain::{
        failure::{Failure, FailureKind},
        item::PageItem,
    },
    store,
};
use serde_json::json;

use crate::support::{ON_DEMAND, TestApp, complete_with_one_page, dispatch_and_claim};

/// Crawls `keyword` by hand: `Ok(items)` completes with that many items,
/// `Err(kind)` fails its only attempt that way.
async fn ended_run(app: &TestApp, keyword: i64, outcome: Result<usize, FailureKind>) -> i64 {
    let pool = app.pool();
    let run = app.crawl(keyword).await[0];
    match outcome {
        Ok(n) => {
            let items: Vec<PageItem> = (0..n)
                .map(|i| PageItem {
                    fields: json!({"title": i}),
                    item_url: None,
                    content_hash: format!("{keyword}-{i}"),
                })
                .collect();
            complete_with_one_page(pool, run, "http://127.0.0.1/", &items).await;
        }
        Err(kind) => {
            let fence = dispatch_and_claim(pool, run, 1, "w").await.unwrap().fence;
            let failure = Failure::new(kind, "refused: HTTP 429 (3 tries)");
            store::runs::fail_attempt(pool, &fence, &failure)
                .await
                .unwrap();
        }
    }
    run
}

#[tokio::test]
async fn a_sites_health_shows_its_last_success_its_rates_and_its_recent_yield() {
    let app = TestApp::spawn().await;
    let mut body = app.site_body("shop", "/search");
    body["max_attempts"] = json!(1);
    let site = app.create_site(body).await;
    let (status, fresh) = app.get(&format!("/api/sites/{site}/health")).await;
    assert_eq!(status, 200, "{fresh}");
    assert_eq!(fresh["last_success_at"], json!(null));
    assert_eq!(
        fresh["success_rate_24h"],
        json!(null),
        "no run ended: no rate"
    );
    assert_eq!(fresh["recent_runs"], json!([]));

    let mut keywords = Vec::new();
    for word in ["lamp", "desk", "chair"] {
        keywords.push(app.create_keyword(word, &[site], ON_DEMAND).await);
    }
    let first = ended_run(&app, keywords[0], Ok(3)).await;
    ended_run(&app, keywords[1], Err(FailureKind::Blocked)).await;
    let last = ended_run(&app, keywords[2], Ok(5)).await;

    let (status, health) = app.get(&format!("/api/sites/{site}/health")).await;
    assert_eq!(status, 200, "{health}");
    assert_eq!(health["site_id"], site);
    assert_eq!(health["runs_ended_24h"], 3);
    assert_eq!(health["attempts_ended_24h"], 3);
    let rate = |name: &str| health[name].as_f64().unwrap();
    assert!(
        (rate("success_rate_24h") - 2.0 / 3.0).abs() < 1e-9,
        "{health}"
    );
    assert!(
        (rate("blocked_rate_24h") - 1.0 / 3.0).abs() < 1e-9,
        "{health}"
    );
    let recent: Vec<(i64, i64)> = health["recent_runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["run_id"].as_i64().unwrap(),
                r["items_found"].as_i64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        recent,
        [(first, 3), (last, 5)],
        "completed runs, oldest first"
    );
    let (_, last_run) = app.get(&format!("/api/runs/{last}")).await;
    assert_eq!(health["last_success_at"], last_run["finished_at"]);

    let (status, _) = app.get("/api/sites/999999/health").await;
    assert_eq!(status, 404);

    let (status, every) = app.get("/api/sites/health").await;
    assert_eq!(status, 200, "{every}");
    assert_eq!(
        every,
        json!([health]),
        "the one site, as its own page shows it"
    );
    assert_eq!(health["name"], "shop");

    let (status, minutes) = app.get("/api/jobs/history").await;
    assert_eq!(status, 200, "{minutes}");
    let minutes = minutes.as_array().unwrap();
    assert_eq!(minutes.len(), 60, "the last hour, minute by minute");
    let sum = |what: &str| {
        minutes
            .iter()
            .map(|m| m[what].as_i64().unwrap())
            .sum::<i64>()
    };
    assert_eq!((sum("completed"), sum("failed")), (2, 1));
    let starts: Vec<chrono::DateTime<chrono::Utc>> = minutes
        .iter()
        .map(|m| m["minute"].as_str().unwrap().parse().unwrap())
        .collect();
    assert!(
        starts
            .windows(2)
            .all(|w| w[1] - w[0] == chrono::TimeDelta::minutes(1)),
        "oldest first, one a minute"
    );
    app.stop().await;
}

#[tokio::test]
async fn runs_are_listed_by_failure_kind_and_time_window() {
    let app = TestApp::spawn().await;
    let mut body = app.site_body("shop", "/search");
    body["max_attempts"] = json!(1);
    let site = app.create_site(body).await;
    let mut keywords = Vec::new();
    for word in ["lamp", "desk", "chair", "stool"] {
        keywords.push(app.create_keyword(word, &[site], ON_DEMAND).await);
    }
    let start = chrono::Utc::now() - chrono::TimeDelta::seconds(1);
    let blocked = ended_run(&app, keywords[0], Err(FailureKind::Blocked)).await;
    let old_site_error = ended_run(&app, keywords[1], Err(FailureKind::SiteError)).await;
    let completed = ended_run(&app, keywords[2], Ok(2)).await;
    let new_site_error = ended_run(&app, keywords[3], Err(FailureKind::SiteError)).await;

    let ids = |page: serde_json::Value| -> Vec<i64> {
        let mut ids: Vec<i64> = page["items"]
            .as_array()
            .unwrap_or_else(|| panic!("{page}"))
            .iter()
            .map(|run| run["id"].as_i64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    let (status, page) = app.get("/api/runs?error_kind=blocked").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(page), [blocked]);
    let (_, page) = app.get("/api/runs?state=failed").await;
    assert_eq!(ids(page), [blocked, old_site_error, new_site_error]);
    let (_, page) = app.get("/api/runs?error_kind=site_error").await;
    assert_eq!(ids(page), [old_site_error, new_site_error]);

    let at = |t: chrono::DateTime<chrono::Utc>| t.format("%Y-%m-%dT%H:%M:%S%.fZ").to_string();
    let (_, page) = app
        .get(&format!("/api/runs?queued_after={}", at(start)))
        .await;
    assert_eq!(
        ids(page),
        [blocked, old_site_error, completed, new_site_error],
        "all were queued after the start"
    );

    // Two runs queued two hours ago, two just now: a cutoff an hour ago
    // splits them, so each bound must leave out the other side.
    sqlx::query(
        "UPDATE crawl_runs SET queued_at = queued_at - interval '2 hours' WHERE id = ANY($1)",
    )
    .bind(vec![blocked, old_site_error])
    .execute(app.pool())
    .await
    .unwrap();
    let cutoff = at(chrono::Utc::now() - chrono::TimeDelta::hours(1));
    let (status, page) = app.get(&format!("/api/runs?queued_before={cutoff}")).await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(page), [blocked, old_site_error], "only the old runs");
    let (_, page) = app
        .get(&format!(
            "/api/runs?queued_before={cutoff}&error_kind=site_error"
        ))
        .await;
    assert_eq!(
        ids(page),
        [old_site_error],
        "the old site error, not the new one"
    );
    let (_, page) = app.get(&format!("/api/runs?queued_after={cutoff}")).await;
    assert_eq!(ids(page), [completed, new_site_error], "only the new runs");
    let (_, page) = app
        .get(&format!(
            "/api/runs?queued_after={cutoff}&error_kind=site_error"
        ))
        .await;
    assert_eq!(
        ids(page),
        [new_site_error],
        "the new site error, not the old one"
    );

    for (query, field) in [
        ("error_kind=sad", "error_kind"),
        ("queued_after=yesterday", "queued_after"),
    ] {
        let (status, error) = app.get(&format!("/api/runs?{query}")).await;
        assert_eq!(status, 400, "{query}: {error}");
        assert_eq!(error["error"]["field"], field, "{query}: {error}");
    }
    app.stop().await;
}
