//! Faults of whole worker processes, caused for real: SIGTERM (drain), SIGSTOP
//! (a zombie comes back), Chrome killed, a consumer that stops, Redis
//! flushed and restarted.

use std::time::{Duration, Instant};

use apalis::prelude::TaskSink;
use crawlfleet::queue::{self, Job};
use serde_json::json;

use crate::support::{
    OwnRedis, RoleProcess, Roles, TestApp, TestDb, browser_slots, chrome_of, clear_queue,
    eventually, leftovers_of_worker, test_config, test_queue_name,
};

// A run here is one page (up to 5 s on /slow) after a worker process and its
// Chrome start, or a few 0.3 s crawls: seconds; 90 s is over ten times that.
const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn sigterm_drains_hands_unfinished_runs_back_and_exits_0_within_the_deadline() {
    let _slots = browser_slots(1).await;
    let app =
        TestApp::spawn_with(Roles::scheduler_only(), |c| c.worker.drain_timeout_secs = 2).await;
    let slow = app
        .one_page_site(
            "slow",
            "/slow?ms=30000&q={keyword}",
            json!({"stuck_timeout_secs": 60}),
        )
        .await;
    let worker = RoleProcess::worker(&app.config);
    let pid = worker.pid();
    let run = app.crawl_in_flight("slow", slow, LIMIT).await;

    let started = Instant::now();
    let code = worker.terminate(Duration::from_secs(20)).await;
    let took = started.elapsed();
    eprintln!("drain: exit {code} after {took:?} (deadline 2 s)");
    assert_eq!(code, 0);
    // The 2 s deadline, then the hand-back and the browser's kill: ~3 s.
    // Widened from 10 s: 15 s leaves a loaded machine five times that, and is
    // still half the 30 s the page would hold a worker that did not drain.
    assert!(took < Duration::from_secs(15), "{took:?}");

    let (_, back) = app.get(&format!("/api/runs/{run}")).await;
    assert_eq!(back["state"], "queued", "{back}");
    assert_eq!(back["attempt"], 1, "a drain does not count an attempt");
    assert_eq!(back["attempts"][0]["outcome"], "released");
    let (pids, dirs) = leftovers_of_worker(pid);
    assert!(
        pids.is_empty() && dirs.is_empty(),
        "left behind: {pids:?} {dirs:?}"
    );
    app.post(&format!("/api/runs/{run}/cancel"), json!({}))
        .await;
    app.stop().await;
}

#[tokio::test]
async fn a_frozen_worker_is_superseded_and_none_of_its_late_writes_land() {
    let _slots = browser_slots(2).await;
    // The frozen worker's run is taken back ~9 s after the freeze. The
    // rescuer's 1 s heartbeats may then be up to 7 s late on a loaded machine
    // before its attempt 2 is taken back too.
    let app = TestApp::spawn_with(Roles::scheduler_only(), |c| {
        c.worker.heartbeat_interval_secs = 1;
        c.scheduler.heartbeat_timeout_secs = 8;
        c.scheduler.watchdog_interval_secs = 1;
    })
    .await;
    let slow = app
        .one_page_site(
            "slow",
            "/slow?ms=5000&q={keyword}",
            json!({"stuck_timeout_secs": 60}),
        )
        .await;
    let frozen = RoleProcess::worker(&app.config);
    let frozen_pid = frozen.pid();
    let run = app.crawl_in_flight("zombie", slow, LIMIT).await;
    frozen.signal(libc::SIGSTOP);

    // The watchdog takes the attempt back; another worker completes attempt 2.
    // ~9 s: 8 s without a heartbeat, then the next 1 s sweep; 30 s is over three times that.
    app.wait_for_run(run, &["queued"], Duration::from_secs(30))
        .await;
    let rescuer = RoleProcess::worker(&app.config);
    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(done["attempt"], 2);
    assert!(
        !done["worker_id"]
            .as_str()
            .unwrap()
            .contains(&format!("-{frozen_pid}-"))
    );
    let results_before: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, fetched_at::text FROM crawl_results WHERE run_id = $1 ORDER BY id",
    )
    .bind(run)
    .fetch_all(app.pool())
    .await
    .unwrap();

    // The zombie wakes up with its page loaded and tries to write it, within
    // a second of SIGCONT; 30 s is ample. Its log line follows the refused write.
    frozen.signal(libc::SIGCONT);
    eventually(
        Duration::from_secs(30),
        "the zombie notices it was superseded",
        || async {
            std::fs::read_to_string(&frozen.log)
                .unwrap()
                .contains("superseded")
                .then_some(())
        },
    )
    .await;
    let (_, after) = app.get(&format!("/api/runs/{run}")).await;
    assert_eq!(after["state"], "completed");
    assert_eq!(after["attempt"], 2);
    assert_eq!(after["items_found"], 5);
    let results_after: Vec<(i64, String)> = sqlx::query_as(
        "SELECT id, fetched_at::text FROM crawl_results WHERE run_id = $1 ORDER BY id",
    )
    .bind(run)
    .fetch_all(app.pool())
    .await
    .unwrap();
    assert_eq!(
        results_after, results_before,
        "a late write of the zombie landed"
    );
    assert_eq!(after["attempts"][0]["outcome"], "failed");
    assert!(
        after["attempts"][0]["reason"]
            .as_str()
            .unwrap()
            .starts_with("worker lost")
    );

    assert_eq!(frozen.terminate(Duration::from_secs(30)).await, 0);
    assert_eq!(rescuer.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_killed_chrome_is_replaced_its_helpers_killed_and_the_run_retried() {
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn_with(Roles::scheduler_only(), |_| {}).await;
    let slow = app
        .one_page_site(
            "slow",
            "/slow?ms=4000&q={keyword}",
            json!({"stuck_timeout_secs": 60}),
        )
        .await;
    let worker = RoleProcess::worker(&app.config);
    let pid = worker.pid();
    let run = app.crawl_in_flight("browser", slow, LIMIT).await;
    let chrome = chrome_of(pid).expect("the worker runs a Chrome");
    let browsers_before = leftovers_of_worker(pid).0;
    assert!(browsers_before.len() > 1, "Chrome and its helpers");
    // SAFETY: kill(2) on a process this test's worker started.
    unsafe { libc::kill(chrome, libc::SIGKILL) };

    let done = app.wait_until_completed(run, LIMIT).await;
    // Attempt 2 starts after a backoff of at least 2 s, in a new Chrome
    // started for it (about a second).
    assert_eq!(done["attempt"], 2, "the run on the dead Chrome was retried");
    assert_eq!(
        done["attempts"][0]["error_kind"], "browser_crashed",
        "{done}"
    );
    let restarted = chrome_of(pid).expect("a new Chrome runs");
    assert_ne!(restarted, chrome);
    let still: Vec<i32> = leftovers_of_worker(pid)
        .0
        .into_iter()
        .filter(|p| browsers_before.contains(p))
        .collect();
    assert!(
        still.is_empty(),
        "helpers of the dead Chrome still running: {still:?}"
    );
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_worker_whose_consumer_stops_exits_non_zero() {
    let _slots = browser_slots(1).await;
    let app = TestApp::spawn().await;
    // apalis-redis 1.0 cannot fetch from a queue with more than ~8,000 due
    // jobs: its consumer stops. The dispatcher never lets that happen; here
    // the jobs are pushed past it to prove the process then exits non-zero.
    let redis = queue::connect(&app.config.common.redis_url).await.unwrap();
    let mut storage = queue::storage(redis, &app.config.common.queue_name, 1);
    for chunk in 0..10 {
        let jobs = (0..1000)
            .map(|i| Job::CrawlV1 {
                run_id: 1_000_000 + chunk * 1000 + i,
                attempt: 1,
            })
            .collect();
        storage.push_bulk(jobs).await.unwrap();
    }
    let mut worker = RoleProcess::worker(&app.config);
    // Six consumer stops 1 s apart: ~10 s with the process start. A stop cycle
    // six times slower would fall out of the code's 60 s restart window anyway.
    let status = tokio::time::timeout(Duration::from_secs(60), worker.child.wait())
        .await
        .expect("the worker exits by itself")
        .unwrap();
    // Exit code 1, the one `main` returns for an error: a panic (101) or a
    // signal (no code) would be a crash, not the worker giving up.
    let log = std::fs::read_to_string(&worker.log).unwrap();
    let tail: Vec<&str> = log.lines().rev().take(5).collect();
    assert_eq!(
        status.code(),
        Some(1),
        "exit status {status}; log ends: {tail:#?}"
    );
    // And for the reason this test causes, not for another one.
    assert!(
        log.contains("job consumer keeps stopping")
            && log.contains("giving up so the supervisor restarts the worker"),
        "the worker says why it gives up; log ends: {tail:#?}"
    );
    let (pids, dirs) = leftovers_of_worker(worker.pid_at_start);
    assert!(
        pids.is_empty() && dirs.is_empty(),
        "left behind: {pids:?} {dirs:?}"
    );
    app.stop().await;
}

#[tokio::test]
async fn runs_survive_redis_being_flushed_and_restarted() {
    let redis = OwnRedis::start().await;
    let port = redis.port();
    let app = TestApp::spawn_with(Roles::fleet(), |c| {
        c.common.redis_url = redis.url();
        c.scheduler.dispatch_claim_timeout_secs = 3;
        c.scheduler.dispatch_window = Some(4);
    })
    .await;
    let slow = app
        .one_page_site(
            "slow",
            "/slow?ms=300&q={keyword}",
            json!({"stuck_timeout_secs": 60}),
        )
        .await;
    let runs = app.queue_crawls(slow, "item ", 16).await;
    eventually(LIMIT, "some runs completed", || async {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM crawl_runs WHERE state = 'completed'")
                .fetch_one(app.pool())
                .await
                .unwrap();
        (n >= 3).then_some(())
    })
    .await;
    let mut conn = queue::connect(&redis.url()).await.unwrap();
    let _: () = redis::cmd("FLUSHALL").query_async(&mut conn).await.unwrap();
    eventually(LIMIT, "more runs completed after the flush", || async {
        let n: i64 =
            sqlx::query_scalar("SELECT count(*) FROM crawl_runs WHERE state = 'completed'")
                .fetch_one(app.pool())
                .await
                .unwrap();
        (n >= 8).then_some(())
    })
    .await;
    redis.stop().await;
    // How long Redis stays down does not matter to what is checked: every run
    // must complete either way.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let _redis = OwnRedis::start_on(port).await;
    // Lost messages go out again after the 3 s claim timeout (checked every
    // 5 s), and the runs left are a few 0.3 s crawls: seconds; 120 s is ample.
    for run in runs {
        app.wait_until_completed(run, Duration::from_secs(120))
            .await;
    }
    let doubled: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT run_id FROM crawl_results GROUP BY run_id HAVING count(*) <> 5) AS odd",
    )
    .fetch_one(app.pool())
    .await
    .unwrap();
    assert_eq!(doubled, 0);
    app.stop().await;
}

#[tokio::test]
async fn a_worker_started_before_the_migrations_waits_for_them() {
    let _slots = browser_slots(1).await;
    // A bare database: nobody has migrated it yet.
    let db = TestDb::unmigrated().await;
    let mut config = test_config(&db.url, &test_queue_name());
    config.worker.worker_concurrency = 1;
    let mut worker = RoleProcess::worker(&config);
    // It waits up to 120 s for the schema, so it cannot exit within 3 s unless
    // broken; a slow start only makes this check weaker, never fail.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(
        matches!(worker.child.try_wait(), Ok(None)),
        "the worker waits instead of exiting"
    );

    crawlfleet::store::migrate(&db.pool).await.unwrap();
    // It tries again every second: announced about a second after the migrations.
    eventually(
        Duration::from_secs(20),
        "the worker announced itself",
        || async {
            let n: i64 = sqlx::query_scalar("SELECT count(*) FROM workers")
                .fetch_one(&db.pool)
                .await
                .unwrap();
            (n == 1).then_some(())
        },
    )
    .await;
    assert_eq!(worker.terminate(Duration::from_secs(30)).await, 0);
    clear_queue(&config.common.queue_name).await;
    db.drop().await;
}
