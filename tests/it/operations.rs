//! What keeps a fleet healthy over days: Postgres outages ridden out, ECS
//! scale-in protection, retention of old runs and of Redis job data.

use std::{
    sync::{Arc, Mutex},
    time::Duration,
};

use apalis::prelude::TaskSink;
use axum::{
    Json, Router,
    routing::{get, put},
};
use crawlfleet::{
    queue::{self, Job},
    store,
};
use serde_json::{Value, json};

use crate::support::{
    CuttableProxy, ON_DEMAND, OwnRedis, Roles, TestApp, complete_with_one_page, count_states,
    database_server, eventually,
};

// The slowest run here rides out the 6 s outage: about 10 s with Chrome's
// start and the writes' retry backoff; 90 s is nine times that.
const LIMIT: Duration = Duration::from_secs(90);

#[tokio::test]
async fn a_worker_holds_its_results_through_a_postgres_outage_and_everything_resumes() {
    let server = database_server();
    let proxy = CuttableProxy::start((
        server.host_str().unwrap().to_owned(),
        server.port().unwrap_or(5432),
    ))
    .await;
    let app = TestApp::spawn_with(Roles::fleet(), |c| {
        c.common.database_url = proxy.route(&c.common.database_url);
    })
    .await;
    let slow = app
        .one_page_site("slow", "/slow?ms=3000&q={keyword}", json!({}))
        .await;
    let run = app.crawl_in_flight("outage", slow, LIMIT).await;

    // Postgres vanishes while the page loads, for longer than the page takes.
    // Should a loaded machine finish the page only after the restore, the test
    // passes without the held write: weaker, never a false failure.
    proxy.cut();
    tokio::time::sleep(Duration::from_secs(6)).await;
    proxy.restore();

    let done = app.wait_until_completed(run, LIMIT).await;
    assert_eq!(done["attempt"], 1, "the finished page was kept, not redone");
    assert_eq!(done["items_found"], 5);
    // Every role reconnected: a new crawl goes through end to end.
    app.crawl_to_completion("after", slow, LIMIT).await;
    app.stop().await;
}

#[tokio::test]
async fn on_ecs_the_task_is_protected_from_scale_in_exactly_while_it_holds_runs() {
    let calls: Arc<Mutex<Vec<Value>>> = Arc::default();
    let agent = Router::new().route(
        "/task-protection/v1/state",
        put({
            let calls = calls.clone();
            move |Json(body): Json<Value>| async move {
                calls.lock().unwrap().push(body);
                Json(json!({"protection": {"ProtectionEnabled": true}}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let agent_uri = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move { axum::serve(listener, agent).await });

    let app = TestApp::spawn_with(Roles::fleet(), |c| {
        c.worker.ecs_agent_uri = Some(agent_uri.clone());
    })
    .await;
    let slow = app
        .one_page_site("slow", "/slow?ms=1500&q={keyword}", json!({}))
        .await;
    let run = app.crawl_in_flight("protected", slow, LIMIT).await;
    {
        let calls = calls.lock().unwrap();
        assert_eq!(calls.len(), 1, "{calls:?}");
        assert_eq!(calls[0]["ProtectionEnabled"], true);
        assert!(calls[0]["ExpiresInMinutes"].as_u64().unwrap() > 0);
    }
    app.wait_for_run(run, &["completed"], LIMIT).await;
    // Dropped as the crawl ends, milliseconds after it completed.
    eventually(
        Duration::from_secs(10),
        "protection dropped when idle",
        || async {
            let calls = calls.lock().unwrap();
            (calls.len() == 2 && calls[1]["ProtectionEnabled"] == false).then_some(())
        },
    )
    .await;
    app.stop().await;
    server.abort();
}

/// A fake ECS agent: task metadata of `crawlfleet-worker:7` and a task
/// protection endpoint that records every call.
async fn fake_ecs_agent() -> (String, Arc<Mutex<Vec<Value>>>, tokio::task::JoinHandle<()>) {
    let calls: Arc<Mutex<Vec<Value>>> = Arc::default();
    let agent = Router::new()
        .route(
            "/task-protection/v1/state",
            put({
                let calls = calls.clone();
                move |Json(body): Json<Value>| async move {
                    calls.lock().unwrap().push(body);
                    Json(json!({"protection": {"ProtectionEnabled": true}}))
                }
            }),
        )
        .route(
            "/task",
            get(|| async { Json(json!({"Family": "crawlfleet-worker", "Revision": "7"})) }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let uri = format!("http://{}", listener.local_addr().unwrap());
    let server = tokio::spawn(async move {
        axum::serve(listener, agent).await.unwrap();
    });
    (uri, calls, server)
}

#[tokio::test]
async fn a_worker_replaced_by_a_deployment_drops_its_protection_while_busy_and_never_takes_it_again()
 {
    let (agent_uri, calls, server) = fake_ecs_agent().await;
    let app = TestApp::spawn_with(Roles::fleet(), |c| {
        c.worker.ecs_agent_uri = Some(agent_uri.clone());
        c.worker.ecs_metadata_uri = Some(agent_uri.clone());
    })
    .await;
    let pool = app.pool();
    let release = eventually(Duration::from_secs(30), "the worker announced", || async {
        sqlx::query_scalar::<_, String>("SELECT release FROM workers")
            .fetch_optional(pool)
            .await
            .unwrap()
    })
    .await;
    assert_eq!(
        release, "crawlfleet-worker:7",
        "read from the task metadata"
    );

    let slow = app
        .one_page_site(
            "slow",
            "/slow?ms=25000&q={keyword}",
            json!({"stuck_timeout_secs": 120}),
        )
        .await;
    let run = app.crawl_in_flight("busy", slow, LIMIT).await;
    assert_eq!(calls.lock().unwrap().len(), 1, "protected while busy");

    // A deployment's new revision starts; so does a host worker of another kind,
    // which must not count. Within one announce period, the busy worker lets go.
    sqlx::query(
        "INSERT INTO workers (id, host, concurrency, release)
         VALUES ('host-1', 'h', 1, 'crawlfleet-0.0.0'), ('new-1', 'n', 4, 'crawlfleet-worker:8')",
    )
    .execute(pool)
    .await
    .unwrap();
    eventually(Duration::from_secs(30), "protection dropped", || async {
        let calls = calls.lock().unwrap();
        (calls.len() == 2 && calls[1]["ProtectionEnabled"] == false).then_some(())
    })
    .await;
    let still: String = sqlx::query_scalar("SELECT state FROM crawl_runs WHERE id = $1")
        .bind(run)
        .fetch_one(pool)
        .await
        .unwrap();
    assert_eq!(still, "url_call", "dropped while the crawl still runs");

    // The crawl ends and another runs: this worker never protects itself again.
    app.wait_for_run(run, &["completed"], LIMIT).await;
    let quick = app
        .one_page_site("quick", "/slow?ms=10&q={keyword}", json!({}))
        .await;
    app.crawl_to_completion("after", quick, LIMIT).await;
    assert_eq!(
        calls.lock().unwrap().len(),
        2,
        "{:?}",
        calls.lock().unwrap()
    );
    app.stop().await;
    server.abort();
}

#[tokio::test]
async fn retention_deletes_old_runs_with_their_results_and_keeps_recent_ones() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    let site = app.create_site(app.site_body("shop", "/search")).await;
    let old = app.create_keyword("old", &[site], ON_DEMAND).await;
    let new = app.create_keyword("new", &[site], ON_DEMAND).await;
    for keyword in [old, new] {
        let run = app.crawl(keyword).await[0];
        let item = crawlfleet::domain::item::PageItem {
            fields: json!({"title": "t"}),
            item_url: None,
            content_hash: "h".into(),
        };
        complete_with_one_page(pool, run, "http://x/", &[item]).await;
    }
    sqlx::query(
        "UPDATE crawl_runs SET finished_at = now() - interval '31 days' WHERE keyword_id = $1",
    )
    .bind(old)
    .execute(pool)
    .await
    .unwrap();
    let active = app.crawl(old).await[0];
    sqlx::query("UPDATE crawl_runs SET queued_at = now() - interval '40 days' WHERE id = $1")
        .bind(active)
        .execute(pool)
        .await
        .unwrap();

    let deleted = store::runs::delete_finished_before(pool, Duration::from_secs(30 * 24 * 3600))
        .await
        .unwrap();
    assert_eq!(deleted, 1);
    let results: Vec<i64> = sqlx::query_scalar("SELECT keyword_id FROM crawl_results")
        .fetch_all(pool)
        .await
        .unwrap();
    assert_eq!(results, vec![new], "the old run's results went with it");
    let (status, _) = app.get(&format!("/api/runs/{active}")).await;
    assert_eq!(status, 200, "an active run is never deleted, however old");
    app.stop().await;
}

/// Redis memory in use, in bytes.
async fn used_memory(conn: &mut apalis_redis::ConnectionManager) -> i64 {
    let info: String = redis::cmd("INFO")
        .arg("memory")
        .query_async(conn)
        .await
        .unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

#[tokio::test]
async fn redis_memory_stays_flat_over_10000_jobs_once_trimmed() {
    let redis = OwnRedis::start().await;
    let app = TestApp::spawn_with(
        Roles {
            scheduler: false,
            worker: true,
        },
        |c| {
            c.common.redis_url = redis.url();
            c.worker.worker_concurrency = 4;
        },
    )
    .await;
    let mut conn = queue::connect(&redis.url()).await.unwrap();
    // The worker registers before the baseline is read; were it later, what it
    // adds is within the one-time cost allowed at the end.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = used_memory(&mut conn).await;

    // 10,000 job messages, in two days' worth of 5,000, in windows of 500 (as
    // the dispatcher would): they name no run, so each is dropped at once.
    let mut storage = queue::storage(conn.clone(), &app.config.common.queue_name, 1);
    let mut after_trim = Vec::new();
    for day in 0..2 {
        for window in 0..10 {
            let first = 10_000_000 + day * 5_000 + window * 500;
            let jobs = (first..first + 500)
                .map(|run_id| Job::CrawlV1 { run_id, attempt: 1 })
                .collect();
            storage.push_bulk(jobs).await.unwrap();
            // 500 jobs dropped at once, fetched 4 at a time back to back:
            // a second or two; 60 s is far more than a loaded machine needs.
            eventually(Duration::from_secs(60), "the window drained", || {
                let mut conn = conn.clone();
                let queue = app.config.common.queue_name.clone();
                async move {
                    (queue::pending_in_redis(&mut conn, &queue).await.unwrap() == 0).then_some(())
                }
            })
            .await;
        }
        // Acks land with the consumer's next fetch. It polls every 300 ms: 2 s
        // is six polls, and 4,950 of 5,000 below spares the last few acks.
        tokio::time::sleep(Duration::from_secs(2)).await;
        let loaded = used_memory(&mut conn).await;
        let trimmed = queue::trim(
            &mut conn,
            &app.config.common.queue_name,
            Duration::from_secs(3600),
        )
        .await
        .unwrap();
        // Redis shrinks its key tables in the background (serverCron, ten
        // times a second by default): 3 s is thirty of its rounds.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let after = used_memory(&mut conn).await;
        eprintln!(
            "redis used_memory: start {before} B; day {day}: 5,000 jobs -> {loaded} B, trimmed {trimmed} jobs -> {after} B"
        );
        assert!(trimmed >= 4_950, "trimmed {trimmed}");
        assert!(
            loaded - before > 1_000_000,
            "the jobs did take memory: {before} -> {loaded}"
        );
        after_trim.push(after);
    }
    // A one-time cost stays (Lua VM and script cache, key tables sized for
    // the peak); past it, memory is flat from one day to the next.
    assert!(
        after_trim[0] - before < 600_000,
        "memory did not return: {before} -> {after_trim:?}"
    );
    assert!(
        after_trim[1] - after_trim[0] < 50_000,
        "memory grows day by day: {after_trim:?}"
    );
    assert_eq!(count_states(app.pool()).await.values().sum::<i64>(), 0);
    app.stop().await;
    redis.stop().await;
}
