//! The backlog waits in Postgres; Redis only ever holds a bounded window.

use std::{
    collections::HashMap,
    time::{Duration, Instant},
};

use crawlfleet::{domain::site::RenderMode, queue, store};
use serde_json::{Value, json};
use sqlx::PgPool;

use crate::support::{ON_DEMAND, Roles, TestApp, count_states};

const BACKLOG_SITES: i64 = 20;
const BACKLOG_KEYWORDS: i64 = 1000;
const WINDOW: u32 = 16;

#[tokio::test]
async fn a_backlog_of_20000_runs_drains_through_a_bounded_window() {
    let mut app = TestApp::spawn_with(Roles::fleet(), |c| {
        c.scheduler.dispatch_window = Some(WINDOW);
        c.scheduler.dispatch_interval_ms = 50;
    })
    .await;
    let pool = &app.pool().clone();
    let template = format!("{}/static?q={{keyword}}", app.site.base_url());
    // 20 sites x 1,000 keywords = 20,000 queued runs, written in bulk.
    sqlx::query(
        "INSERT INTO sites (name, search_url, item_selector, fields)
         SELECT 'site-' || n, $1, 'li.product', '{\"title\": {\"selector\": \"a.title\"}}'
         FROM generate_series(1, $2) AS n",
    )
    .bind(&template)
    .bind(BACKLOG_SITES)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("INSERT INTO keywords (keyword, schedule) SELECT 'kw ' || n, '0 0 0 1 1 *' FROM generate_series(1, $1) AS n")
        .bind(BACKLOG_KEYWORDS)
        .execute(pool)
        .await
        .unwrap();
    sqlx::query("INSERT INTO keyword_sites SELECT k.id, s.id FROM keywords k CROSS JOIN sites s")
        .execute(pool)
        .await
        .unwrap();
    sqlx::query(
        "INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, max_attempts)
         SELECT keyword_id, site_id, 'queued', 'manual', 3 FROM keyword_sites",
    )
    .execute(pool)
    .await
    .unwrap();

    let mut redis = queue::connect(&app.config.common.redis_url).await.unwrap();
    let target = 5 * WINDOW as i64;
    let start = Instant::now();
    let (mut max_in_redis, mut max_dispatched, mut samples) = (0u64, 0i64, 0u32);
    loop {
        let in_redis = queue::pending_in_redis(&mut redis, &app.config.common.queue_name)
            .await
            .unwrap();
        let dispatched = store::runs::count_in_redis(pool, &RenderMode::ALL)
            .await
            .unwrap();
        max_in_redis = max_in_redis.max(in_redis);
        max_dispatched = max_dispatched.max(dispatched);
        samples += 1;
        let completed = count_states(pool)
            .await
            .get("completed")
            .copied()
            .unwrap_or(0);
        if completed >= target {
            break;
        }
        // 80 one-page browser crawls, two at a time, a few hundred ms each:
        // well under a minute even on a loaded machine; 240 s is four times that.
        assert!(
            start.elapsed() < Duration::from_secs(240),
            "only {completed} runs completed"
        );
        // Fewer samples on a slow machine can only miss a peak, never show
        // one that was not there: load cannot fail the maxima checked below.
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    eprintln!(
        "backlog: {target} runs drained in {:?}; max jobs in Redis {max_in_redis}, max dispatched {max_dispatched}, {samples} samples",
        start.elapsed()
    );
    assert!(
        max_in_redis <= WINDOW as u64,
        "Redis held {max_in_redis} jobs, window is {WINDOW}"
    );
    assert!(max_dispatched <= WINDOW as i64);

    // Round-robin across sites: the first runs claimed span every site.
    let first_sites: i64 = sqlx::query_scalar(
        "SELECT count(DISTINCT site_id) FROM (SELECT site_id FROM crawl_runs WHERE started_at IS NOT NULL
         ORDER BY started_at LIMIT $1) AS first",
    )
    .bind(BACKLOG_SITES)
    .fetch_one(pool)
    .await
    .unwrap();
    assert!(
        first_sites >= BACKLOG_SITES - 2,
        "first claims covered only {first_sites} sites"
    );

    // Cancel the rest; nothing ran twice and every run is accounted for.
    sqlx::query(
        "UPDATE crawl_runs SET state = 'cancelled', finished_at = now() WHERE state = 'queued'",
    )
    .execute(pool)
    .await
    .unwrap();
    app.stop_roles().await;
    let states = count_states(pool).await;
    assert_eq!(
        states.values().sum::<i64>(),
        BACKLOG_SITES * BACKLOG_KEYWORDS,
        "{states:?}"
    );
    let over: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT run_id FROM crawl_results GROUP BY run_id HAVING count(*) <> 5) AS odd",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(over, 0, "a run stored other than its 5 items");
    // A busy machine may fail an attempt (and retry it); no run may complete twice.
    let twice: i64 = sqlx::query_scalar(
        "SELECT count(*) FROM (SELECT run_id FROM crawl_attempts WHERE outcome = 'completed'
         GROUP BY run_id HAVING count(*) > 1) AS twice",
    )
    .fetch_one(pool)
    .await
    .unwrap();
    assert_eq!(twice, 0, "a run completed twice");
    app.finish().await;
}

/// A site (its settings over the fixture's defaults) and the runs it has
/// queued, each as (keyword, priority, queued this many seconds after the
/// first).
struct Queued {
    site: &'static str,
    settings: Value,
    runs: &'static [(&'static str, i32, i64)],
}

/// Creates each site and keyword through the api; the runs are written
/// directly, with the priority and age each is given.
async fn queue_runs(app: &TestApp, sites: &[Queued]) {
    for site in sites {
        let site_id = app
            .one_page_site(site.site, "/static?q={keyword}", site.settings.clone())
            .await;
        for (keyword, priority, second) in site.runs {
            let keyword_id = app.create_keyword(keyword, &[site_id], ON_DEMAND).await;
            sqlx::query(
                "INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, max_attempts, priority, queued_at)
                 VALUES ($1, $2, 'queued', 'manual', 3, $3, '2026-01-01'::timestamptz + make_interval(secs => $4))",
            )
            .bind(keyword_id)
            .bind(site_id)
            .bind(priority)
            .bind(*second as f64)
            .execute(app.pool())
            .await
            .unwrap();
        }
    }
}

/// The keywords of the runs `take_for_dispatch` takes, in the order it gives them.
async fn take(pool: &PgPool, limit: i64) -> Vec<String> {
    let taken = store::runs::take_for_dispatch(pool, &RenderMode::ALL, limit)
        .await
        .unwrap();
    let ids: Vec<i64> = taken.iter().map(|run| run.run_id).collect();
    let mut keywords: HashMap<i64, String> = sqlx::query_as(
        "SELECT r.id, k.keyword FROM crawl_runs r JOIN keywords k ON k.id = r.keyword_id
         WHERE r.id = ANY($1) AND r.dispatched_at IS NOT NULL",
    )
    .bind(&ids)
    .fetch_all(pool)
    .await
    .unwrap()
    .into_iter()
    .collect();
    ids.iter()
        .map(|id| keywords.remove(id).expect("marked dispatched"))
        .collect()
}

#[tokio::test]
async fn the_dispatcher_takes_sites_in_turn_each_by_priority_then_age_within_its_room() {
    let app = TestApp::spawn().await;
    let pool = app.pool();
    queue_runs(
        &app,
        &[
            Queued {
                site: "a",
                settings: json!({"max_concurrent_runs": 2}),
                runs: &[("a1", 0, 1), ("a2", 5, 3), ("a3", 0, 2)],
            },
            Queued {
                site: "b",
                settings: json!({"max_concurrent_runs": 8}),
                runs: &[("b1", 0, 2), ("b2", 0, 4), ("b3", 1, 5)],
            },
            // One run at a time, whatever max_concurrent_runs says.
            Queued {
                site: "c",
                settings: json!({"max_concurrent_runs": 5, "keep_session": true, "exclusive_session": true}),
                runs: &[("c1", 0, 0), ("c2", 9, 6)],
            },
        ],
    )
    .await;
    // Each site's first run, then each site's second, ...; within a turn
    // by priority then age.
    assert_eq!(take(pool, 2).await, ["c2", "a2"]);
    // a has room for one more and c for none; b's are all due.
    assert_eq!(take(pool, 10).await, ["b3", "a1", "b1", "b2"]);
    assert!(
        take(pool, 10).await.is_empty(),
        "every site is full or empty"
    );
    // A run that ends makes room for the next of its site.
    sqlx::query(
        "UPDATE crawl_runs SET state = 'completed', finished_at = now(), dispatched_at = NULL
         WHERE keyword_id = (SELECT id FROM keywords WHERE keyword = 'c2')",
    )
    .execute(pool)
    .await
    .unwrap();
    assert_eq!(take(pool, 10).await, ["c1"]);
    app.stop().await;
}
