//! URL lists crawled: a run reads each URL of its period once, in line
//! order, within the site's rate, counted by the fixture's own request log;
//! a superseded attempt's successor reads on after the last URL stored; a
//! URL that fails is recorded on its entry while the others are read; the
//! trigger's answers; change tracking by URL.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::shop::{ListShop, crawl_list, entries, list_of, list_view};
use crate::support::{Roles, TestApp, eventually};

const DRAIN_URLS: u32 = 10_000;
const DRAIN_RATE: f64 = 400.0;

#[tokio::test]
async fn a_ten_thousand_url_list_drains_within_the_sites_rate_reading_every_url_exactly_once() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = ListShop::start().await;
    let site = app
        .create_site(shop.site_body("list shop", DRAIN_RATE))
        .await;
    let urls: Vec<String> = (1..=DRAIN_URLS)
        .map(|n| format!("{}/p/{n}", shop.base))
        .collect();
    let list = list_of(&app, site, "products", &urls).await;

    let started = Instant::now();
    let run = crawl_list(&app, list).await;
    let run = app
        .wait_until_completed(run, Duration::from_secs(300))
        .await;
    let took = started.elapsed();

    let unread: Vec<u32> = (1..=DRAIN_URLS)
        .filter(|&n| shop.reads_of(n) != 1)
        .collect();
    assert!(
        unread.is_empty(),
        "URLs not requested exactly once: {} (first {:?})",
        unread.len(),
        &unread[..unread.len().min(10)]
    );
    assert_eq!(shop.requests.on_path("/search"), 0, "no search read");
    assert_eq!(run["pages_crawled"], DRAIN_URLS, "{run}");
    assert_eq!(run["items_found"], DRAIN_URLS, "{run}");
    assert_eq!(run["items_new"], DRAIN_URLS, "{run}");
    assert_eq!(run["urls_failed"], 0, "{run}");
    assert_eq!(run["health"], "healthy", "{run}");
    let view = list_view(&app, list).await;
    assert_eq!(view["read_in_period"], DRAIN_URLS, "{view}");
    assert_eq!(view["failed_in_period"], 0, "{view}");
    let floor = Duration::from_secs_f64(f64::from(DRAIN_URLS - 100) / DRAIN_RATE);
    assert!(took >= floor, "{took:?}: faster than the site's rate");
    eprintln!(
        "{DRAIN_URLS} URLs in {took:?} ({:.0}/s at a rate of {DRAIN_RATE}/s)",
        f64::from(DRAIN_URLS) / took.as_secs_f64()
    );
    app.stop().await;
}

#[tokio::test]
async fn a_failing_url_is_recorded_on_its_entry_and_the_others_are_read() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = ListShop::start().await;
    let site = app.create_site(shop.site_body("list shop", 200.0)).await;
    let mut urls: Vec<String> = (1..=20).map(|n| format!("{}/p/{n}", shop.base)).collect();
    urls.insert(5, format!("{}/gone/1", shop.base));
    urls.push(format!("{}/gone/2", shop.base));
    let list = list_of(&app, site, "with gone", &urls).await;

    let run = crawl_list(&app, list).await;
    let run = app.wait_until_completed(run, Duration::from_secs(60)).await;
    assert_eq!(run["urls_failed"], 2, "{run}");
    assert_eq!(run["pages_crawled"], 20, "{run}");
    assert_eq!(run["health"], "degraded", "{run}");
    assert!(
        run["health_reason"].as_str().unwrap().contains("2 URL(s)"),
        "{run}"
    );
    for n in 1..=20 {
        assert_eq!(shop.reads_of(n), 1, "product {n}");
    }
    let entries = entries(&app, list).await;
    for gone in ["gone/1", "gone/2"] {
        let entry = &entries[&format!("{}/{gone}", shop.base)];
        assert!(entry["failed_at"].is_string(), "{entry}");
        assert_eq!(entry["last_read_at"], Value::Null, "{entry}");
        assert!(
            entry["last_error"].as_str().unwrap().contains("404"),
            "{entry}"
        );
    }
    let view = list_view(&app, list).await;
    assert_eq!(
        (
            view["read_in_period"].clone(),
            view["failed_in_period"].clone()
        ),
        (json!(20), json!(2)),
        "{view}"
    );
    app.stop().await;
}

#[tokio::test]
async fn a_superseded_attempt_is_resumed_after_the_last_stored_url_and_nothing_stored_is_read_twice()
 {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = ListShop::start().await;
    let site = app.create_site(shop.site_body("list shop", 50.0)).await;
    let n = 200;
    let urls: Vec<String> = (1..=n).map(|n| format!("{}/p/{n}", shop.base)).collect();
    let list = list_of(&app, site, "resumed", &urls).await;
    let run = crawl_list(&app, list).await;

    eventually(Duration::from_secs(30), "60 URLs read", || async {
        let (_, view) = app.get(&format!("/api/runs/{run}")).await;
        (view["pages_crawled"].as_i64().unwrap_or(0) >= 60).then_some(())
    })
    .await;
    // What the watchdog does to a stuck attempt: the run queued again under
    // a new attempt; the first attempt's fence no longer holds.
    let taken = sqlx::query_scalar!(
        "UPDATE crawl_runs SET attempt = attempt + 1, state = 'queued', worker_id = NULL,
                dispatched_at = NULL, state_changed_at = now()
         WHERE id = $1 RETURNING attempt",
        run
    )
    .fetch_one(app.pool())
    .await
    .unwrap();
    assert_eq!(taken, 2);
    let read_before: Vec<String> = sqlx::query_scalar!(
        "SELECT url FROM url_list_entries WHERE list_id = $1 AND last_read_at IS NOT NULL",
        list
    )
    .fetch_all(app.pool())
    .await
    .unwrap();
    assert!(read_before.len() >= 60);

    let done = app.wait_until_completed(run, Duration::from_secs(60)).await;
    assert_eq!(done["attempt"], 2, "{done}");
    for url in &read_before {
        let n: u32 = url.rsplit('/').next().unwrap().parse().unwrap();
        assert_eq!(shop.reads_of(n), 1, "{url}: stored before, read again");
    }
    let total: u32 = (1..=n).map(|n| shop.reads_of(n)).sum();
    assert!(
        (1..=n).all(|n| shop.reads_of(n) >= 1),
        "every URL read at last"
    );
    // At most the URL in flight when the fence moved is read twice.
    assert!(total <= n + 1, "{total} reads of {n} URLs");
    let stored: i64 = sqlx::query_scalar!(
        r#"SELECT count(DISTINCT item_key) AS "n!" FROM crawl_results WHERE run_id = $1"#,
        run
    )
    .fetch_one(app.pool())
    .await
    .unwrap();
    assert_eq!(stored, i64::from(n), "each URL's item stored");
    let view = list_view(&app, list).await;
    assert_eq!(view["read_in_period"], n, "{view}");
    app.stop().await;
}

const READ_TOKEN: &str = "list-read-token";

#[tokio::test]
async fn the_trigger_answers_404_409_and_wants_a_write_token() {
    let app = TestApp::spawn_without_browsers(Roles::default(), |config| {
        config.api.auth_disabled = false;
        config.api.api_tokens = vec!["list-write-token".into()];
        config.api.api_read_tokens = vec![READ_TOKEN.into()];
    })
    .await;
    let shop = ListShop::start().await;
    let site = app.create_site(shop.site_body("list shop", 10.0)).await;
    let list = list_of(&app, site, "one", &[format!("{}/p/1", shop.base)]).await;

    let (status, body) = app.post("/api/url-lists/987654/crawl", json!({})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{body}");
    let run = crawl_list(&app, list).await;
    // No worker: the run stays queued, and a second trigger is refused.
    let (status, body) = app
        .post(&format!("/api/url-lists/{list}/crawl"), json!({}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&run.to_string()),
        "{body}"
    );
    let view = list_view(&app, list).await;
    assert_eq!(view["active_run_id"], run, "{view}");

    let url = format!("{}/api/url-lists/{list}/crawl", app.base);
    let anonymous = reqwest::Client::new().post(&url).send().await.unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
    let read_only = reqwest::Client::new()
        .post(&url)
        .bearer_auth(READ_TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(read_only.status(), StatusCode::FORBIDDEN);
    app.stop().await;
}

#[tokio::test]
async fn a_second_run_tracks_each_urls_item_by_its_url() {
    let app = TestApp::spawn_without_browsers(Roles::fleet(), |_| {}).await;
    let shop = ListShop::start().await;
    let site = app.create_site(shop.site_body("list shop", 200.0)).await;
    let urls: Vec<String> = (1..=5).map(|n| format!("{}/p/{n}", shop.base)).collect();
    let list = list_of(&app, site, "tracked", &urls).await;

    let first = crawl_list(&app, list).await;
    let first = app
        .wait_until_completed(first, Duration::from_secs(60))
        .await;
    assert_eq!(first["items_new"], 5, "{first}");
    shop.price(3, 999);
    let second = crawl_list(&app, list).await;
    let second = app
        .wait_until_completed(second, Duration::from_secs(60))
        .await;
    assert_eq!(
        (second["items_new"].clone(), second["items_changed"].clone()),
        (json!(0), json!(1)),
        "{second}"
    );
    for n in 1..=5 {
        assert_eq!(shop.reads_of(n), 2, "product {n}: read once a run");
    }
    let changed = app
        .results(&format!("url_list_id={list}&change=changed"))
        .await;
    assert_eq!(changed.len(), 1, "{changed:?}");
    assert_eq!(changed[0]["item_url"], format!("{}/p/3", shop.base));
    assert_eq!(changed[0]["url_list_id"], list);
    assert_eq!(changed[0]["diff"]["price"]["new"], 9.99, "{changed:?}");
    app.stop().await;
}
