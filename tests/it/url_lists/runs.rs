//! URL lists crawled: a run reads each URL of its period once, in line
//! order, within the site's rate, counted by the fixture's own request log;
//! a superseded attempt's successor reads on after the last URL stored; a
//! URL that fails is recorded on its entry while the others are read; the
//! trigger's answers; the scheduler firing a list; change tracking by URL.

use std::{
    collections::HashMap,
    fmt::Write as _,
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    Router,
    extract::{Path, State},
    http::StatusCode as AxumStatus,
    response::{Html, IntoResponse, Response},
    routing::get,
};
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{create_list, stream_upload};
use crate::support::{RequestCounts, Roles, TestApp, eventually};

/// Product pages, one product each, at `/p/{n}`; `/gone/{n}` answers 404.
struct ListShop {
    base: String,
    requests: RequestCounts,
    prices: Arc<Mutex<HashMap<u32, u32>>>,
    task: tokio::task::JoinHandle<()>,
}

impl ListShop {
    async fn start() -> ListShop {
        let prices = Arc::new(Mutex::new(HashMap::new()));
        let requests = RequestCounts::default();
        let app = requests.count(
            Router::new()
                .route("/p/{n}", get(product))
                .route("/gone/{n}", get(gone))
                .route("/search", get(|| async { Html("<html></html>") }))
                .with_state(prices.clone()),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        ListShop {
            base,
            requests,
            prices,
            task,
        }
    }

    fn price(&self, n: u32, cents: u32) {
        self.prices.lock().unwrap().insert(n, cents);
    }

    /// A site reading one product a page, at `rate` requests a second.
    fn site_body(&self, name: &str, rate: f64) -> Value {
        json!({
            "name": name,
            "search_url": format!("{}/search?q={{keyword}}", self.base),
            "render": "http",
            "max_pages": 1,
            "max_requests_per_sec": rate,
            // A list run reads this many of its URLs at once.
            "max_concurrent_runs": 8,
            "item_selector": "div.product",
            "fields": {
                "title": {"selector": "h1"},
                "price": {"selector": ".price", "number": {"locale": "en-US"}},
            },
        })
    }

    fn reads_of(&self, n: u32) -> u32 {
        self.requests.on_path(&format!("/p/{n}"))
    }
}

impl Drop for ListShop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn product(
    State(prices): State<Arc<Mutex<HashMap<u32, u32>>>>,
    Path(n): Path<u32>,
) -> Html<String> {
    let cents = prices.lock().unwrap().get(&n).copied().unwrap_or(100 + n);
    Html(format!(
        r#"<!doctype html><html><body><div class="product"><h1>Product {n}</h1>
           <span class="price">${}.{:02}</span></div></body></html>"#,
        cents / 100,
        cents % 100
    ))
}

async fn gone(Path(_): Path<u32>) -> Response {
    (AxumStatus::NOT_FOUND, "gone").into_response()
}

/// A list on `site` holding `urls`, uploaded as plain text.
async fn list_of(app: &TestApp, site: i64, name: &str, urls: &[String]) -> i64 {
    let list = create_list(app, site, name).await;
    let mut body = String::new();
    for url in urls {
        writeln!(body, "{url}").unwrap();
    }
    let (status, answer) = stream_upload(app, "PUT", list, "text/plain", body.as_bytes()).await;
    assert_eq!(status, 200, "{answer}");
    list
}

/// `POST /api/url-lists/{list}/crawl`, expected 202; the run's id.
async fn crawl_list(app: &TestApp, list: i64) -> i64 {
    let (status, run) = app
        .post(&format!("/api/url-lists/{list}/crawl"), json!({}))
        .await;
    assert_eq!(status, StatusCode::ACCEPTED, "{run}");
    assert_eq!(run["url_list_id"], list, "{run}");
    assert_eq!(run["keyword_id"], Value::Null, "{run}");
    run["id"].as_i64().unwrap()
}

async fn list_view(app: &TestApp, list: i64) -> Value {
    let (status, view) = app.get(&format!("/api/url-lists/{list}")).await;
    assert_eq!(status, StatusCode::OK, "{view}");
    view
}

/// Every entry of `list` (url -> entry), through the API's pages.
async fn entries(app: &TestApp, list: i64) -> HashMap<String, Value> {
    let (mut all, mut cursor) = (HashMap::new(), String::new());
    loop {
        let (status, page) = app
            .get(&format!("/api/url-lists/{list}/urls?limit=1000{cursor}"))
            .await;
        assert_eq!(status, StatusCode::OK, "{page}");
        for entry in page["items"].as_array().unwrap() {
            all.insert(entry["url"].as_str().unwrap().to_owned(), entry.clone());
        }
        match page["next_cursor"].as_str() {
            Some(next) => cursor = format!("&cursor={next}"),
            None => return all,
        }
    }
}

const DRAIN_URLS: u32 = 2_000;
const DRAIN_RATE: f64 = 400.0;

#[tokio::test]
async fn a_two_thousand_url_list_drains_within_the_sites_rate_reading_every_url_exactly_once() {
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
        .wait_until_completed(run, Duration::from_secs(180))
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
