//! A production-sized history for the benches that read it (console_data,
//! api_load): 100,000 ended runs with their attempts over 10 sites and 100
//! keywords, and 1,000,000 results with their items. Written by Postgres
//! itself (a bench of reading, not of inserting). Include it with
//! `#[path = "common/history.rs"] mod history;` beside `mod support`.

use crate::support::{ON_DEMAND, TestApp};

pub const SITES: usize = 10;
pub const KEYWORDS: usize = 100;
pub const RUNS: i64 = 100_000;
pub const RESULTS: i64 = 1_000_000;

/// What the history was written on.
pub struct History {
    pub sites: Vec<i64>,
    pub keywords: Vec<i64>,
}

/// The history: ended runs spread over the last two days (one in ten
/// failed, half of those blocked), an attempt each, and the results of the
/// first thousand runs, each item first seen when its run was queued.
pub async fn a_production_history(app: &TestApp) -> History {
    let mut sites = Vec::new();
    for n in 0..SITES {
        sites.push(
            app.create_site(app.site_body(&format!("site-{n}"), "/search"))
                .await,
        );
    }
    let mut keywords = Vec::new();
    for n in 0..KEYWORDS {
        let on = [sites[n % SITES]];
        keywords.push(
            app.create_keyword(&format!("keyword {n}"), &on, ON_DEMAND)
                .await,
        );
    }
    let pool = app.pool();
    sqlx::query(
        r#"INSERT INTO crawl_runs (keyword_id, site_id, state, trigger, max_attempts, worker_id,
                                   pages_crawled, items_found, error, error_kind, queued_at,
                                   started_at, state_changed_at, finished_at)
           SELECT ($1::bigint[])[1 + i % $3], ($2::bigint[])[1 + i % $4],
                  CASE WHEN i % 10 = 0 THEN 'failed' ELSE 'completed' END, 'schedule', 3, 'w-1',
                  1, CASE WHEN i % 10 = 0 THEN 0 ELSE 10 END,
                  CASE WHEN i % 10 = 0 THEN 'HTTP 503 at http://127.0.0.1/' END,
                  CASE WHEN i % 20 = 0 THEN 'blocked' WHEN i % 10 = 0 THEN 'site_error' END,
                  t, t, t + interval '2 seconds', t + interval '2 seconds'
           FROM generate_series(1, $5) AS i,
                LATERAL (SELECT now() - make_interval(secs => (($5 - i) * 172800.0 / $5))) AS at(t)"#,
    )
    .bind(&keywords)
    .bind(&sites)
    .bind(KEYWORDS as i32)
    .bind(SITES as i32)
    .bind(RUNS)
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        r#"INSERT INTO crawl_attempts (run_id, attempt, worker_id, started_at, ended_at, outcome,
                                       reason, error_kind, last_url)
           SELECT id, 1, worker_id, started_at, finished_at, state, error, error_kind,
                  'http://127.0.0.1/search'
           FROM crawl_runs"#,
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query(
        r#"INSERT INTO crawl_results (run_id, keyword_id, site_id, page, position, page_url,
                                      item_url, fields, content_hash, item_key)
           SELECT r.id, r.keyword_id, r.site_id, 1, p, 'http://127.0.0.1/search',
                  'http://127.0.0.1/item/' || r.id || '/' || p,
                  jsonb_build_object('title', 'Item ' || p, 'price', p),
                  md5(r.id || '/' || p), 'http://127.0.0.1/item/' || r.id || '/' || p
           FROM (SELECT id, keyword_id, site_id FROM crawl_runs ORDER BY id LIMIT $1 / 1000) AS r,
                generate_series(1, 1000) AS p"#,
    )
    .bind(RESULTS)
    .execute(pool)
    .await
    .unwrap();
    // Each item first seen when its run was queued: over the first half hour
    // of the two days.
    sqlx::query(
        r#"INSERT INTO items (keyword_id, site_id, identified_by, item_key, item_url, fields,
                              content_hash, first_seen_at, last_seen_at, last_changed_at,
                              last_page, last_position, last_page_url)
           SELECT r.keyword_id, r.site_id, 'url', r.item_key, r.item_url, r.fields, r.content_hash,
                  c.queued_at, c.queued_at, c.queued_at, r.page, r.position, r.page_url
           FROM crawl_results r JOIN crawl_runs c ON c.id = r.run_id
           ON CONFLICT DO NOTHING"#,
    )
    .execute(pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE").execute(pool).await.unwrap();
    History { sites, keywords }
}
