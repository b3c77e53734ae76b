//! The backlog waits in Postgres; Redis only ever holds a bounded window.

use std::time::{Duration, Instant};

use crawlfleet::{domain::site::RenderMode, queue, store};

use crate::support::{Roles, TestApp, count_states};

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
