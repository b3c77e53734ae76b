//! `GET /api/jobs/queue`, its `queue.stats` event and its Prometheus gauges,
//! each number produced by the fleet for real.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{ApiProcess, Scrape, next_of_type, socket};
use crate::support::{Roles, TestApp, eventually};

/// Every count of the report: its JSON field and its `crawlfleet_queue_runs` state.
const COUNTS: [&str; 8] = [
    "queued",
    "dispatched",
    "delayed",
    "running",
    "url_call",
    "call_done",
    "completed_last_hour",
    "failed_last_hour",
];

async fn report(api: &ApiProcess) -> Value {
    let resp = reqwest::get(format!("{}/api/jobs/queue", api.base))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.json().await.unwrap()
}

fn counts(report: &Value) -> Vec<&Value> {
    COUNTS.iter().map(|c| &report[*c]).collect()
}

#[tokio::test]
async fn queue_stats_count_every_state_alike_in_json_websocket_and_gauges() {
    // One http slot, so a slow page holds it and a dispatched run waits.
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |c| {
        c.worker.http_concurrency = 1;
        c.worker.drain_timeout_secs = 1;
    })
    .await;
    // The api under test is its own process: its gauges are its own, where
    // this test binary's registry is shared by every test running at once.
    let api = ApiProcess::spawn(&app.config, &[]).await;
    let http = json!({"render": "http"});
    let quick = app
        .one_page_site("quick", "/search?q={keyword}", http.clone())
        .await;
    let gone = app
        .one_page_site("gone", "/status/404?q={keyword}", http.clone())
        .await;
    let failing = app
        .one_page_site(
            "failing",
            "/status/500?q={keyword}",
            json!({"render": "http", "max_attempts": 10}),
        )
        .await;
    let slow = app
        .one_page_site(
            "slow",
            "/slow?ms=60000&q={keyword}",
            json!({"render": "http", "max_concurrent_runs": 1}),
        )
        .await;
    // The slowest wait is three failed attempts with 2-3 s and 4-6 s backoffs
    // between: ~10 s; 60 s is six times that.
    let limit = Duration::from_secs(60);

    // Completed and failed in the last hour.
    app.crawl_to_completion("done", quick, limit).await;
    let refused = app.crawl_to_end("refused", gone, limit).await;
    assert_eq!(refused["state"], "failed", "{refused}");
    // Delayed: a run waiting out a retry backoff. After its third failed
    // attempt the backoff is 8-12 s, time enough for what follows (about a
    // second: three runs queued, a few reads).
    let retried = app.crawl_once("retried", failing).await;
    eventually(limit, "a third failed attempt", || async {
        let (_, run) = app.get(&format!("/api/runs/{retried}")).await;
        (run["attempt"] == 4 && run["state"] == "queued").then_some(())
    })
    .await;
    // In flight: a page that takes a minute holds the worker's one slot...
    app.crawl_in_flight("held", slow, limit).await;
    // ...so this run, dispatched, waits in Redis...
    let waiting = app.crawl_once("waiting", quick).await;
    eventually(limit, "the run dispatched", || async {
        let (_, run) = app.get(&format!("/api/runs/{waiting}")).await;
        run["dispatched_at"].is_string().then_some(())
    })
    .await;
    // ...and this one waits in Postgres: its site allows one run at a time.
    let behind = app.crawl_once("behind", slow).await;

    // A snapshot whose two reads around the scrape agree, so the gauges
    // were read from the same state. Three reads take milliseconds, and no
    // run moves for seconds here.
    let (report, scrape, age_before) =
        eventually(Duration::from_secs(10), "a steady snapshot", || async {
            let before = report(&api).await;
            let scrape = Scrape::of(&format!("{}/metrics", api.metrics_base)).await;
            let after = report(&api).await;
            (counts(&before) == counts(&after)).then(|| {
                let age_before = before["oldest_queued_age_secs"].as_f64().unwrap();
                (after, scrape, age_before)
            })
        })
        .await;
    let expected = json!({
        "queued": 3, "dispatched": 1, "delayed": 1,
        "running": 0, "url_call": 1, "call_done": 0,
        "completed_last_hour": 1, "failed_last_hour": 1,
        "backlog": 4,
    });
    for (field, value) in expected.as_object().unwrap() {
        assert_eq!(&report[field], value, "{field} in {report}");
    }
    let (_, run) = app.get(&format!("/api/runs/{behind}")).await;
    assert!(run["dispatched_at"].is_null(), "{run}");
    let age = report["oldest_queued_age_secs"].as_f64().unwrap();
    // A lower bound set by the backoffs (at least 2 s and 4 s) between its
    // attempts: load only adds to it.
    assert!(age >= 5.0, "the retried run was queued {age} s ago");
    let workers = report["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 1, "{report}");
    assert_eq!(
        workers[0]["concurrency"],
        app.config.worker.worker_concurrency
    );
    assert_eq!(workers[0]["http_concurrency"], 1);
    assert_eq!(workers[0]["in_flight"], 1);

    // The gauges say the same.
    for state in COUNTS {
        assert_eq!(
            scrape.value("crawlfleet_queue_runs", &[("state", state)]),
            report[state].as_f64(),
            "crawlfleet_queue_runs{{state={state}}}"
        );
    }
    let gauge_age = scrape
        .value("crawlfleet_queue_oldest_queued_age_seconds", &[])
        .unwrap();
    assert!(
        (age_before..=age).contains(&gauge_age),
        "oldest queued age: gauge {gauge_age}, JSON {age_before}..{age}"
    );
    assert_eq!(scrape.value("crawlfleet_queue_workers", &[]), Some(1.0));

    // And the live clients, every 5 s (the counts that stay put while we wait).
    // 15 s is three ticks. The held page stays in url_call until the worker's
    // 30 s stuck timeout, five times what this test takes after it.
    let mut ws = socket(&api.base, "unused").await;
    let stats = next_of_type(&mut ws, "queue.stats", Duration::from_secs(15)).await;
    for field in [
        "queued",
        "url_call",
        "completed_last_hour",
        "failed_last_hour",
    ] {
        assert_eq!(stats[field], report[field], "{field} in {stats}");
    }
    drop(ws);
    assert_eq!(api.process.terminate(Duration::from_secs(15)).await, 0);
    app.stop().await;
}
