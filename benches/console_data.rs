//! How fast the data of each console page arrives with a production-sized
//! history: 100,000 runs (with their attempts) over 10 sites and 100
//! keywords, and 1,000,000 results. Each request is made 20 times against an
//! api process (the release binary under `cargo bench`); the median and the
//! slowest are printed. Needs Postgres and Redis.
//!
//!   cargo bench --bench console_data       (or scripts/bench)
//!
//! Exits non-zero if a page's slowest answer takes over TARGET.

#[allow(dead_code, unused_imports)]
#[path = "../tests/it/support/mod.rs"]
mod support;

use std::time::{Duration, Instant};

use support::{ON_DEMAND, RoleProcess, TestApp};

const SITES: usize = 10;
const KEYWORDS: usize = 100;
const RUNS: i64 = 100_000;
const RESULTS: i64 = 1_000_000;
const TRIES: usize = 20;
const TARGET: Duration = Duration::from_millis(300);

/// The history, written by Postgres itself: ended runs spread over the last
/// two days (one in ten failed, half of those blocked), an attempt each, and
/// the results of the first thousand runs.
async fn a_production_history(app: &TestApp) -> (Vec<i64>, Vec<i64>) {
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
    (sites, keywords)
}

/// The median and the slowest of `TRIES` answers to `path`.
async fn time(http: &reqwest::Client, base: &str, path: &str) -> (Duration, Duration) {
    let mut took = Vec::new();
    for _ in 0..TRIES {
        let started = Instant::now();
        let response = http.get(format!("{base}{path}")).send().await.unwrap();
        assert_eq!(response.status(), 200, "{path}");
        response.bytes().await.unwrap();
        took.push(started.elapsed());
    }
    took.sort();
    (took[TRIES / 2], took[TRIES - 1])
}

#[tokio::main]
async fn main() {
    let app = TestApp::spawn().await;
    let writing = Instant::now();
    let (sites, keywords) = a_production_history(&app).await;
    println!(
        "{RUNS} runs with their attempts and {RESULTS} results written in {:.1} s",
        writing.elapsed().as_secs_f64()
    );
    let (_, last) = app.get("/api/runs?limit=1").await;
    let run = last["items"][0]["id"].as_i64().unwrap();
    // Ten minutes into the results' half hour: a third of them first seen before.
    let (_, first) = app.get("/api/results?limit=1").await;
    let first_seen: chrono::DateTime<chrono::Utc> = first["items"][0]["first_seen_at"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let ten_minutes_in = (first_seen + chrono::TimeDelta::minutes(10))
        .format("%Y-%m-%dT%H:%M:%SZ")
        .to_string();
    let api = RoleProcess::spawn("api", &app.config, &[]);
    let base = format!("http://{}", api.listening_on("api listening").await);
    let http = reqwest::Client::new();
    let pages = [
        "/api/jobs/queue".to_owned(),
        "/api/jobs/history".to_owned(),
        "/api/sites/health".to_owned(),
        "/api/runs?error_kind=blocked&limit=100".to_owned(),
        "/api/runs?limit=100".to_owned(),
        "/api/runs?state=failed&limit=100".to_owned(),
        format!("/api/runs?site_id={}&limit=100", sites[3]),
        format!("/api/runs?keyword_id={}&limit=100", keywords[7]),
        format!("/api/runs/{run}"),
        "/api/results?limit=100".to_owned(),
        format!("/api/results?keyword_id={}&limit=100", keywords[0]),
        // A word of every item, of one in a thousand, of none.
        "/api/results?q=item&limit=100".to_owned(),
        "/api/results?q=777&limit=100".to_owned(),
        "/api/results?q=nowhere&limit=100".to_owned(),
        format!("/api/results?first_seen_after={ten_minutes_in}&limit=100"),
        format!("/api/results?first_seen_before={ten_minutes_in}&limit=100"),
        format!("/api/results?q=777&site_id={}&limit=100", sites[1]),
        "/api/access".to_owned(),
        format!("/api/sites/{}/health", sites[0]),
        "/api/sites".to_owned(),
        "/api/keywords".to_owned(),
    ];
    let mut slow = Vec::new();
    for page in &pages {
        let (median, slowest) = time(&http, &base, page).await;
        println!(
            "{page:<45} median {:>6.1} ms, slowest {:>6.1} ms",
            median.as_secs_f64() * 1e3,
            slowest.as_secs_f64() * 1e3
        );
        if slowest > TARGET {
            slow.push(page.clone());
        }
    }
    assert_eq!(api.terminate(Duration::from_secs(30)).await, 0);
    app.stop().await;
    if !slow.is_empty() {
        eprintln!("over {TARGET:?}: {slow:?}");
        std::process::exit(1);
    }
}
