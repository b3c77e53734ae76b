//! Fargate Spot takes a task back with a two-minute notice: ECS sends the
//! task SIGTERM, then SIGKILL once its stopTimeout (at most 120 s) runs out.
//! A worker stopped that way loses nothing: it drains within
//! `DRAIN_TIMEOUT_SECS` (25 s, well inside the notice) and hands back what
//! it could not finish; a worker that outlives the notice is killed, and the
//! watchdog takes its runs back. Here the notice is scaled down to seconds.

use std::time::Duration;

use serde_json::json;

use crate::support::{RoleProcess, Roles, TestApp, eventually};

/// Stops `worker` as ECS stops a reclaimed Spot task: SIGTERM, `notice` to
/// exit, then SIGKILL. The exit code when it exited by itself.
async fn reclaim_like_spot(mut worker: RoleProcess, notice: Duration) -> Option<i32> {
    worker.signal(libc::SIGTERM);
    match tokio::time::timeout(notice, worker.child.wait()).await {
        Ok(status) => Some(status.unwrap().code().unwrap_or(-1)),
        Err(_) => {
            worker.kill().await;
            None
        }
    }
}

/// The runs held by the worker process `pid` now.
async fn held_by(app: &TestApp, pid: i32) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM crawl_runs WHERE state IN ('running', 'url_call', 'call_done') AND worker_id LIKE $1",
    )
    .bind(format!("%-{pid}-%"))
    .fetch_one(app.pool())
    .await
    .unwrap()
}

/// Queues `n` one-page http crawls of pages that take `page_ms` and starts
/// `doomed` and a survivor; returns the runs once the doomed worker holds some.
async fn a_fleet_mid_queue(
    app: &TestApp,
    doomed: &RoleProcess,
    n: usize,
    page_ms: u64,
) -> Vec<i64> {
    let site = app
        .one_page_site(
            "slow",
            &format!("/slow?ms={page_ms}&q={{keyword}}"),
            // More at once than one worker's 4 slots: both workers hold runs,
            // whichever polls the queue first.
            json!({"render": "http", "stuck_timeout_secs": 60, "max_concurrent_runs": 8}),
        )
        .await;
    let runs = app.queue_crawls(site, "spot ", n).await;
    // Both workers up and claiming: seconds.
    eventually(
        Duration::from_secs(60),
        "the doomed worker holds runs",
        || async { (held_by(app, doomed.pid()).await > 0).then_some(()) },
    )
    .await;
    runs
}

/// Each run completed, once, its page stored once.
async fn every_run_completed_once(app: &TestApp, runs: &[i64]) {
    for run in runs {
        // The hand-back or the watchdog, then a page of a few seconds behind
        // the survivor's four slots: seconds; 120 s is ample.
        let done = app
            .wait_until_completed(*run, Duration::from_secs(120))
            .await;
        assert_eq!(done["items_found"], 5, "{done}");
    }
    let twice: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT run_id FROM crawl_results GROUP BY run_id, page, content_hash HAVING count(*) > 1) AS d",
    )
    .fetch_one(app.pool())
    .await
    .unwrap();
    assert_eq!(twice, 0, "a page stored twice");
}

#[tokio::test]
async fn a_worker_reclaimed_like_spot_drains_within_the_notice_and_loses_nothing() {
    let app = TestApp::spawn_with(Roles::scheduler_only(), |c| {
        c.worker.http_concurrency = 4;
        // 2 s against a 10 s notice: as 25 s against Spot's 120 s.
        c.worker.drain_timeout_secs = 2;
        // A job the doomed worker fetched but never started goes out again
        // after this, not after the default minute.
        c.scheduler.dispatch_claim_timeout_secs = 8;
    })
    .await;
    let doomed = RoleProcess::worker(&app.config);
    let pid = doomed.pid();
    let survivor = RoleProcess::worker(&app.config);
    // 6 s pages: the test sees the doomed worker's first runs within a poll
    // or two of their start, so the notice comes seconds before they could
    // end, and its 2 s drain cannot finish them: some must be handed back.
    let runs = a_fleet_mid_queue(&app, &doomed, 8, 6000).await;

    let exit = reclaim_like_spot(doomed, Duration::from_secs(10)).await;
    assert_eq!(exit, Some(0), "drained and exited 0 within the notice");
    // Every attempt it made ended: completed, or handed back (not counted
    // as an attempt) at its drain deadline. None left for the watchdog.
    let attempts: Vec<(i64, i32, Option<String>)> = sqlx::query_as(
        "SELECT run_id, attempt, outcome FROM crawl_attempts WHERE worker_id LIKE $1 ORDER BY id",
    )
    .bind(format!("%-{pid}-%"))
    .fetch_all(app.pool())
    .await
    .unwrap();
    assert!(!attempts.is_empty(), "the doomed worker took runs");
    for (_, _, outcome) in &attempts {
        assert!(
            matches!(outcome.as_deref(), Some("completed" | "released")),
            "{attempts:?}"
        );
    }
    let released: Vec<(i64, i32)> = attempts
        .iter()
        .filter(|(_, _, outcome)| outcome.as_deref() == Some("released"))
        .map(|(run, attempt, _)| (*run, *attempt))
        .collect();
    assert!(
        !released.is_empty(),
        "the runs it could not finish were handed back: {attempts:?}"
    );
    every_run_completed_once(&app, &runs).await;
    // Each run handed back was finished by the survivor, without the
    // hand-back costing it an attempt.
    for (run, attempt) in released {
        let (_, done) = app.get(&format!("/api/runs/{run}")).await;
        assert_eq!(done["attempt"], attempt, "{done}");
        assert!(
            !done["worker_id"]
                .as_str()
                .unwrap()
                .contains(&format!("-{pid}-")),
            "{done}"
        );
    }
    assert_eq!(survivor.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_worker_still_draining_when_the_notice_ends_is_killed_and_its_runs_complete_once() {
    let app = TestApp::spawn_with(Roles::scheduler_only(), |c| {
        c.worker.http_concurrency = 4;
        // A drain longer than the notice: the SIGKILL comes first.
        c.worker.drain_timeout_secs = 60;
        c.worker.heartbeat_interval_secs = 1;
        c.scheduler.heartbeat_timeout_secs = 5;
        c.scheduler.watchdog_interval_secs = 1;
        c.scheduler.dispatch_claim_timeout_secs = 8;
    })
    .await;
    let doomed = RoleProcess::worker(&app.config);
    let pid = doomed.pid();
    let survivor = RoleProcess::worker(&app.config);
    // 10 s pages: however late the test sees the doomed worker's runs on a
    // loaded machine, they are still in flight when the notice begins (with
    // 3 s pages it once saw the last of them, and the worker drained in time).
    let runs = a_fleet_mid_queue(&app, &doomed, 8, 10_000).await;

    let left = crate::support::descendants(pid);
    let exit = reclaim_like_spot(doomed, Duration::from_secs(1)).await;
    assert_eq!(exit, None, "still draining: killed");
    crate::support::clean_up_after_killed_worker(&left, pid);
    every_run_completed_once(&app, &runs).await;
    assert_eq!(survivor.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}
