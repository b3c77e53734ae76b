//! Real worker processes sharing one queue: no run done twice, and a worker
//! killed with SIGKILL mid-queue loses nothing.

use std::time::Duration;

use serde_json::json;

use crate::support::{
    RoleProcess, Roles, TestApp, browser_slots, clean_up_after_killed_worker, count_states,
    descendants, eventually,
};

async fn duplicate_results(app: &TestApp) -> i64 {
    sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT run_id, page, content_hash FROM crawl_results
         GROUP BY run_id, page, content_hash HAVING count(*) > 1) AS dup",
    )
    .fetch_one(app.pool())
    .await
    .unwrap()
}

/// The runs a worker process is in the middle of, read while it is frozen.
async fn runs_held_by(app: &TestApp, worker_pid: i32) -> Vec<i64> {
    sqlx::query_scalar(
        "SELECT id FROM crawl_runs WHERE state IN ('running', 'url_call', 'call_done') AND worker_id LIKE $1",
    )
    .bind(format!("%-{worker_pid}-%"))
    .fetch_all(app.pool())
    .await
    .unwrap()
}

#[tokio::test]
async fn two_worker_processes_share_a_queue_and_complete_each_run_once() {
    let _slots = browser_slots(2).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let site = app
        .one_page_site("static", "/static?q={keyword}", json!({}))
        .await;
    let workers = [
        RoleProcess::worker(&app.config),
        RoleProcess::worker(&app.config),
    ];
    let runs = app.queue_crawls(site, "item ", 24).await;
    // 24 one-page crawls on 4 browser slots take seconds once the workers'
    // browsers are up; 120 s is ten times that and more. Attempt 1 holds unless
    // a page hangs 60 s or a worker misses 90 s of heartbeats (15 s apart).
    for run in &runs {
        let run = app
            .wait_until_completed(*run, Duration::from_secs(120))
            .await;
        assert_eq!(run["attempt"], 1);
        assert_eq!(run["items_found"], 5);
    }
    let by_worker: i64 = sqlx::query_scalar("SELECT count(DISTINCT worker_id) FROM crawl_runs")
        .fetch_one(app.pool())
        .await
        .unwrap();
    assert_eq!(by_worker, 2, "both workers took runs");
    assert_eq!(duplicate_results(&app).await, 0);
    assert_eq!(
        app.site.hits("/static"),
        24,
        "each run fetched its page once"
    );
    for worker in workers {
        assert_eq!(
            worker.terminate(Duration::from_secs(30)).await,
            0,
            "a drained worker exits 0"
        );
    }
    app.stop().await;
}

#[tokio::test]
async fn a_worker_killed_mid_queue_loses_nothing() {
    let _slots = browser_slots(2).await;
    // Short enough that the killed worker's runs come back in seconds. A
    // survivor missing 5 s of heartbeats on a loaded machine only has a run
    // retried, which this test allows: each run completes once, on any attempt.
    let app = TestApp::spawn_with(Roles::scheduler_only(), |c| {
        c.worker.heartbeat_interval_secs = 1;
        c.scheduler.heartbeat_timeout_secs = 5;
        c.scheduler.watchdog_interval_secs = 1;
        c.scheduler.dispatch_claim_timeout_secs = 8;
    })
    .await;
    let site = app
        .one_page_site("slow", "/slow?ms=600&q={keyword}", json!({}))
        .await;
    let doomed = RoleProcess::worker(&app.config);
    let survivor = RoleProcess::worker(&app.config);
    let runs = app.queue_crawls(site, "item ", 20).await;

    // Two worker processes, their browsers and two 0.6 s crawls: seconds. The
    // doomed worker is frozen before its runs are read, so a run it was about
    // to finish cannot end between the reading and the kill.
    let held = eventually(
        Duration::from_secs(90),
        "the doomed worker is mid-crawl",
        || async {
            let completed = count_states(app.pool())
                .await
                .get("completed")
                .copied()
                .unwrap_or(0);
            if completed < 2 {
                return None;
            }
            doomed.signal(libc::SIGSTOP);
            let held = runs_held_by(&app, doomed.pid()).await;
            if held.is_empty() {
                doomed.signal(libc::SIGCONT);
                return None;
            }
            Some(held)
        },
    )
    .await;
    let pid = doomed.pid();
    let left = descendants(pid);
    doomed.kill().await;
    clean_up_after_killed_worker(&left, pid);

    // The killed worker's runs are back within ~15 s: its held runs after the
    // 5 s heartbeat timeout and a backoff, the messages it had fetched after the
    // 8 s claim timeout (checked every 5 s). 150 s is ten times that.
    for run in &runs {
        let run = app
            .wait_until_completed(*run, Duration::from_secs(150))
            .await;
        assert_eq!(run["items_found"], 5);
    }
    for run in held {
        let attempt: i32 = sqlx::query_scalar("SELECT attempt FROM crawl_runs WHERE id = $1")
            .bind(run)
            .fetch_one(app.pool())
            .await
            .unwrap();
        assert!(
            attempt > 1,
            "run {run}, held by the killed worker, was retried"
        );
    }
    assert_eq!(duplicate_results(&app).await, 0);
    assert_eq!(survivor.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}
