//! Saved pages: a run that completes healthy keeps its list pages (bodies
//! compressed, with the items stored from each) under the site version it
//! crawled with; the site keeps its last runs within the bounds; a degraded
//! or failed run keeps nothing.

use std::time::Duration;

use crawlfleet::store;
use serde_json::{Value, json};

use crate::support::{ON_DEMAND, Roles, TestApp};

const LIMIT: Duration = Duration::from_secs(60);

/// The fixture shop's search over HTTP: 3 pages of 5 items and an empty 4th.
async fn http_site(app: &TestApp, name: &str, extra: Value) -> i64 {
    let mut body = app.site_body(name, "/search");
    body["render"] = json!("http");
    for (key, value) in extra.as_object().expect("settings object") {
        body[key] = value.clone();
    }
    app.create_site(body).await
}

/// Crawls `keyword` on `site` once and waits for the run to end.
async fn crawl_once(app: &TestApp, keyword: i64) -> Value {
    let runs = app.crawl(keyword).await;
    assert_eq!(runs.len(), 1);
    app.wait_for_run(runs[0], &["completed", "failed"], LIMIT)
        .await
}

/// The saved runs of `site`, newest first, with their pages' numbers.
async fn saved_runs(app: &TestApp, site: i64) -> Vec<(i64, Vec<i32>)> {
    let pages = store::saved_pages::of_site(&app.db.pool, site, 1000)
        .await
        .unwrap();
    let mut runs: Vec<(i64, Vec<i32>)> = Vec::new();
    for page in pages {
        match runs.last_mut() {
            Some((run, numbers)) if *run == page.run_id => numbers.push(page.page_no),
            _ => runs.push((page.run_id, vec![page.page_no])),
        }
    }
    runs
}

#[tokio::test]
async fn a_healthy_run_saves_its_pages_with_their_items_and_site_version() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let site = http_site(&app, "saved", json!({})).await;
    let keyword = app.create_keyword("tea", &[site], ON_DEMAND).await;
    // An edit: the site is at version 2 when it is crawled.
    let mut edited = app.site_body("saved", "/search");
    edited["render"] = json!("http");
    edited["max_pages"] = json!(6);
    let (status, body) = app.put(&format!("/api/sites/{site}"), edited).await;
    assert_eq!(status, 200, "{body}");
    let version: i32 = sqlx::query_scalar("SELECT version FROM sites WHERE id = $1")
        .bind(site)
        .fetch_one(&app.db.pool)
        .await
        .unwrap();
    assert_eq!(version, 2);

    let run = crawl_once(&app, keyword).await;
    assert_eq!(run["state"], "completed", "{run}");
    assert_eq!(run["health"], "healthy", "{run}");
    assert_eq!(
        run["site_version"], 2,
        "the run shows the version it crawled with"
    );
    let run_id = run["id"].as_i64().unwrap();

    let pages = store::saved_pages::of_site(&app.db.pool, site, 100)
        .await
        .unwrap();
    let numbers: Vec<i32> = pages.iter().map(|p| p.page_no).collect();
    assert_eq!(
        numbers,
        [1, 2, 3, 4],
        "every list page, the empty last one too"
    );
    let results = app.results_of_run(run_id).await;
    for page in &pages {
        assert_eq!(page.run_id, run_id);
        assert_eq!(page.site_version, Some(2));
        assert_eq!(page.render.as_str(), "http");
        assert!(
            page.url.contains(&format!("page={}", page.page_no)),
            "{}",
            page.url
        );
        // The body comes back as the page the shop served.
        let html = flate2_inflate(&page.body);
        assert_eq!(html.len(), page.raw_bytes as usize);
        let html = String::from_utf8_lossy(&html);
        assert!(html.contains(&format!("Results for tea, page {}", page.page_no)));
        // The items are those the run stored from the page.
        let stored: Vec<&Value> = results
            .iter()
            .filter(|r| r["page"] == page.page_no)
            .map(|r| &r["fields"])
            .collect();
        let saved: Vec<&Value> = page
            .items
            .as_array()
            .unwrap()
            .iter()
            .map(|i| &i["fields"])
            .collect();
        assert_eq!(saved, stored, "page {}", page.page_no);
    }
    assert_eq!(
        pages
            .iter()
            .map(|p| p.items.as_array().unwrap().len())
            .sum::<usize>(),
        15
    );
    app.stop().await;
}

#[tokio::test]
async fn a_browser_run_saves_its_pages_as_rendered_and_a_replay_reads_them_the_same() {
    let app = TestApp::spawn_with(Roles::fleet(), |_| {}).await;
    let site = app.create_site(app.site_body("rendered", "/search")).await;
    let keyword = app.create_keyword("tea", &[site], ON_DEMAND).await;
    let run = crawl_once(&app, keyword).await;
    assert_eq!(run["health"], "healthy", "{run}");
    let pages = store::saved_pages::of_site(&app.db.pool, site, 100)
        .await
        .unwrap();
    assert_eq!(
        pages.iter().map(|p| p.page_no).collect::<Vec<_>>(),
        [1, 2, 3, 4]
    );
    for page in &pages {
        assert_eq!(page.render.as_str(), "browser");
        let html = String::from_utf8_lossy(&flate2_inflate(&page.body)).into_owned();
        assert!(html.contains(&format!("Results for tea, page {}", page.page_no)));
    }
    // The DOM as the browser rendered it reads as the browser read it.
    let (status, replay) = app
        .post(
            &format!("/api/sites/{site}/replay"),
            json!({"version": run["site_version"]}),
        )
        .await;
    assert_eq!(status, 200, "{replay}");
    let replayed: Vec<&Value> = replay["runs"][0]["pages"]
        .as_array()
        .unwrap()
        .iter()
        .collect();
    assert_eq!(replayed.len(), 4, "{replay}");
    for page in replayed {
        assert_eq!(page["error"], Value::Null, "{page}");
        for diff in ["added", "removed", "changed"] {
            assert_eq!(page[diff], json!([]), "{diff}: {page}");
        }
    }
    assert_eq!(
        replay["runs"][0]["pages"][0]["items"]
            .as_array()
            .unwrap()
            .len(),
        5
    );
    app.stop().await;
}

fn flate2_inflate(deflated: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::DeflateDecoder::new(deflated)
        .read_to_end(&mut out)
        .expect("deflate data");
    out
}

#[tokio::test]
async fn a_site_keeps_its_last_runs_and_prunes_the_oldest() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |config| {
        config.worker.saved_pages_runs = 2;
    })
    .await;
    let site = http_site(&app, "kept", json!({})).await;
    let keyword = app.create_keyword("tea", &[site], ON_DEMAND).await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        let run = crawl_once(&app, keyword).await;
        assert_eq!(run["health"], "healthy", "{run}");
        ids.push(run["id"].as_i64().unwrap());
    }
    let kept: Vec<i64> = saved_runs(&app, site).await.iter().map(|r| r.0).collect();
    assert_eq!(
        kept,
        [ids[2], ids[1]],
        "the two newest runs, the oldest pruned"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_site_keeps_no_more_bytes_than_its_bound() {
    // One run's 4 pages fit (they deflate to about 950 bytes); two do not.
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |config| {
        config.worker.saved_pages_max_bytes = 1400;
    })
    .await;
    let site = http_site(&app, "bytes", json!({})).await;
    let keyword = app.create_keyword("tea", &[site], ON_DEMAND).await;
    let first = crawl_once(&app, keyword).await;
    let second = crawl_once(&app, keyword).await;
    let runs = saved_runs(&app, site).await;
    let pages = store::saved_pages::of_site(&app.db.pool, site, 100)
        .await
        .unwrap();
    let bytes: usize = pages.iter().map(|p| p.body.len()).sum();
    assert!(bytes <= 1400, "{bytes} bytes kept");
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert_eq!(
        runs[0].0,
        second["id"].as_i64().unwrap(),
        "the newer run is kept"
    );
    assert_ne!(runs[0].0, first["id"].as_i64().unwrap());
    assert_eq!(runs[0].1, [1, 2, 3, 4]);
    app.stop().await;
}

#[tokio::test]
async fn a_degraded_or_failed_run_saves_nothing() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    // 15 items found, 100 expected: completed, degraded.
    let degraded = http_site(&app, "degraded", json!({"expect": {"min_items": 100}})).await;
    // The first page answers 404: the run fails.
    let failing = app
        .one_page_site(
            "failing",
            "/no-such-page?q={keyword}",
            json!({"render": "http", "max_attempts": 1}),
        )
        .await;
    let keyword = app
        .create_keyword("tea", &[degraded, failing], ON_DEMAND)
        .await;
    let runs = app.crawl(keyword).await;
    for run in runs {
        let run = app.wait_for_run(run, &["completed", "failed"], LIMIT).await;
        if run["site_id"] == degraded {
            assert_eq!(run["health"], "degraded", "{run}");
        } else {
            assert_eq!(run["state"], "failed", "{run}");
        }
    }
    assert!(saved_runs(&app, degraded).await.is_empty());
    assert!(saved_runs(&app, failing).await.is_empty());
    app.stop().await;
}
