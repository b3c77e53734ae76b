//! The scheduler's own `/metrics` (its side port): the dispatcher's window
//! and the watchdog's actions move as the fleet changes.

use std::time::Duration;

use serde_json::json;

use super::Scrape;
use crate::support::{RoleProcess, Roles, TestApp, eventually};

#[tokio::test]
async fn the_scheduler_exports_its_dispatch_window_dispatches_and_watchdog_actions() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |_| {}).await;
    let scheduler = RoleProcess::spawn(
        "scheduler",
        &app.config,
        &[("WATCHDOG_INTERVAL_SECS", "1".into())],
    );
    let addr = scheduler.listening_on("health and metrics listening").await;
    let metrics = format!("http://{addr}/metrics");
    let window =
        |scrape: &Scrape, lane: &str| scrape.value("crawlfleet_dispatch_window", &[("lane", lane)]);
    // The slowest wait is for the windows to follow a new worker: its start,
    // then the dispatcher's next look at the fleet (every 5 s): ~7 s. The
    // watchdog sweeps every second. 30 s is four times the slowest.
    let limit = Duration::from_secs(30);

    // No worker yet: each lane's window is the floor that wakes a first one.
    let scrape = eventually(limit, "the dispatcher's windows", || async {
        let scrape = Scrape::of(&metrics).await;
        window(&scrape, "http").is_some().then_some(scrape)
    })
    .await;
    assert_eq!(window(&scrape, "browser"), Some(10.0));
    assert_eq!(window(&scrape, "http"), Some(10.0));
    assert_eq!(scrape.value("crawlfleet_dispatched_total", &[]), Some(0.0));

    // A worker joins: the windows follow its slots (4 jobs a slot).
    let worker = RoleProcess::spawn(
        "worker",
        &app.config,
        &[
            ("WORKER_CONCURRENCY", "3".into()),
            ("HTTP_CONCURRENCY", "5".into()),
            // It will not heartbeat on its own during the test: the test
            // makes its heartbeats stale instead.
            ("HEARTBEAT_INTERVAL_SECS", "600".into()),
            ("DRAIN_TIMEOUT_SECS", "1".into()),
        ],
    );
    eventually(limit, "windows that follow the worker", || async {
        let scrape = Scrape::of(&metrics).await;
        (window(&scrape, "browser") == Some(12.0) && window(&scrape, "http") == Some(20.0))
            .then_some(())
    })
    .await;

    // Two runs on slow pages; their worker then falls silent. One has
    // attempts left, the other was on its last.
    let slow = |attempts: u32| json!({"render": "http", "max_attempts": attempts});
    let retrying = app
        .one_page_site("retrying", "/slow?ms=60000&q={keyword}", slow(3))
        .await;
    let last = app
        .one_page_site("last", "/slow?ms=60000&q={keyword}", slow(1))
        .await;
    let runs = [
        app.crawl_once("again", retrying).await,
        app.crawl_once("over", last).await,
    ];
    for run in runs {
        app.wait_for_run(run, &["url_call"], limit).await;
    }
    let dispatched = Scrape::of(&metrics)
        .await
        .count("crawlfleet_dispatched_total", &[]);
    assert!(dispatched >= 2.0, "{dispatched} dispatched");
    sqlx::query(
        "UPDATE crawl_runs SET heartbeat_at = now() - interval '1 hour' WHERE id = ANY($1)",
    )
    .bind(&runs[..])
    .execute(app.pool())
    .await
    .unwrap();
    let over = app.wait_for_run(runs[1], &["failed"], limit).await;
    assert!(
        over["error"].as_str().unwrap().contains("worker lost"),
        "{over}"
    );
    assert_eq!(over["error_kind"], "worker_lost", "{over}");
    eventually(limit, "the other run retried", || async {
        let (_, run) = app.get(&format!("/api/runs/{}", runs[0])).await;
        (run["attempt"] == 2).then_some(())
    })
    .await;

    let scrape = Scrape::of(&metrics).await;
    assert_eq!(
        scrape.value(
            "crawlfleet_watchdog_actions_total",
            &[("reason", "worker_lost")]
        ),
        Some(2.0)
    );
    let (retrying, last) = (retrying.to_string(), last.to_string());
    assert_eq!(
        scrape.value("crawlfleet_retries_total", &[("site", &retrying)]),
        Some(1.0)
    );
    assert_eq!(
        scrape.value(
            "crawlfleet_runs_finished_total",
            &[("state", "failed"), ("site", &last)]
        ),
        Some(1.0)
    );
    assert_eq!(
        scrape.value("crawlfleet_retries_total", &[("site", &last)]),
        None,
        "a run on its last attempt is not retried"
    );
    assert_eq!(worker.terminate(limit).await, 0);
    assert_eq!(scheduler.terminate(limit).await, 0);
    app.stop().await;
}
